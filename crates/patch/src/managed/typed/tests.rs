#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::*;
use crate::builtin::shape_for;
use crate::shape::SmpStrategy;

fn fs(v: Value) -> FieldSet {
    FieldSet::from_fields_v1(&v).unwrap()
}

/// A test type: a struct with a list map, a set, an atomic list, a map of strings, an atomic
/// struct and a nested struct.
fn shape() -> Shape {
    Shape::object([
        (
            "list",
            Shape::list_map(
                &["name"],
                Shape::object([("name", Shape::Scalar), ("value", Shape::Scalar)]),
            ),
        ),
        ("set", Shape::set(Shape::Scalar)),
        ("atomicList", Shape::atomic_list(Shape::Scalar)),
        ("labels", Shape::map_of(Shape::Scalar)),
        ("ref", Shape::atomic_object([("name", Shape::Scalar)])),
        ("nested", Shape::object([("inner", Shape::object([]))])),
        ("free", Shape::Untyped),
    ])
}

#[test]
fn field_set_of_each_node_kind() {
    let v = json!({
        "list": [{"name": "a", "value": 1}, {"name": "b"}],
        "set": ["x", "y"],
        "atomicList": [1, 2],
        "labels": {"app": "web", "empty": ""},
        "ref": {"name": "r"},
        "nested": {"inner": {"deep": true}, "emptyMap": {}, "nothing": null},
        "free": {"a": {"b": 1}, "l": [1]}
    });
    assert_eq!(
        to_field_set(&v, &shape()).to_fields_v1(),
        json!({
            "f:list": {
                "k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:value": {}},
                "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}
            },
            "f:set": {"v:\"x\"": {}, "v:\"y\"": {}},
            "f:atomicList": {},
            "f:labels": {"f:app": {}, "f:empty": {}},
            "f:ref": {},
            "f:nested": {"f:inner": {"f:deep": {}}, "f:emptyMap": {}, "f:nothing": {}},
            // Untyped content: every key below it is a map entry, owned itself ("."); lists are
            // atomic. `free` itself is a declared struct field.
            "f:free": {"f:a": {".": {}, "f:b": {}}, "f:l": {}}
        })
    );
}

#[test]
fn list_map_keys_use_schema_defaults() {
    let pod = shape_for("v1", "Pod");
    let v = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]}]}});
    let set = to_field_set(&v, &pod);
    assert_eq!(
        set.to_fields_v1()["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:ports"],
        json!({
            "k:{\"containerPort\":53,\"protocol\":\"UDP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}},
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}
        })
    );
}

#[test]
fn duplicate_items_are_owned_as_one_leaf() {
    let v = json!({"list": [{"name": "a", "value": 1}, {"name": "a", "value": 2}, {"name": "b"}]});
    assert_eq!(
        to_field_set(&v, &shape()).to_fields_v1(),
        json!({"f:list": {"k:{\"name\":\"a\"}": {}, "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}})
    );
}

#[test]
fn compare_reports_added_removed_modified_with_container_markers() {
    let old = json!({"list": [{"name": "a", "value": 1}], "labels": {"x": "1"}, "set": ["p"], "ref": {"name": "r"}});
    let new = json!({"list": [{"name": "a", "value": 2}, {"name": "b"}], "nested": {"inner": {"k": 1}}, "set": ["p", "q"], "ref": {"name": "s"}});
    let c = compare(&old, &new, &shape());
    assert_eq!(
        c.modified,
        fs(json!({"f:list": {"k:{\"name\":\"a\"}": {"f:value": {}}}, "f:ref": {}}))
    );
    // New granular containers are added with their own path (the "." of Update entries).
    assert_eq!(
        c.added,
        fs(json!({
            "f:list": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}}},
            "f:nested": {".": {}, "f:inner": {".": {}, "f:k": {}}},
            "f:set": {"v:\"q\"": {}}
        }))
    );
    assert_eq!(c.removed, fs(json!({"f:labels": {".": {}, "f:x": {}}})));
}

#[test]
fn compare_treats_empty_and_null_containers_as_leaves() {
    let c = compare(&json!({"labels": null}), &json!({"labels": {}}), &shape());
    assert_eq!(c.modified, fs(json!({"f:labels": {}})));
    let c = compare(&json!({}), &json!({"labels": {}}), &shape());
    assert_eq!(c.added, fs(json!({"f:labels": {}})));
    let c = compare(&json!({"x": 1}), &json!({"x": 1.0}), &shape());
    assert_eq!(c, Comparison::default(), "1 and 1.0 are equal");
}

#[test]
fn compare_type_changes_under_untyped() {
    let c = compare(
        &json!({"free": {"a": {"b": 1}}}),
        &json!({"free": {"a": "scalar"}}),
        &shape(),
    );
    assert_eq!(c.modified, fs(json!({"f:free": {"f:a": {}}})));
    assert_eq!(c.removed, fs(json!({"f:free": {"f:a": {"f:b": {}}}})));
}

#[test]
fn merge_keeps_live_fields_and_orders_list_items() {
    let live = json!({"list": [{"name": "a", "value": 1}, {"name": "b"}, {"name": "c"}], "labels": {"x": "1"}, "other": 1});
    let config = json!({"list": [{"name": "d"}, {"name": "b", "value": 2}], "labels": {"y": "2"}});
    let merged = merge(&live, &config, &shape());
    assert_eq!(
        merged,
        json!({
            "list": [{"name": "a", "value": 1}, {"name": "d"}, {"name": "b", "value": 2}, {"name": "c"}],
            "labels": {"x": "1", "y": "2"},
            "other": 1
        })
    );
    // Atomic values are replaced whole; null in a granular map leaves it as it is.
    let merged = merge(
        &json!({"atomicList": [1, 2], "ref": {"name": "a"}, "labels": {"x": "1"}}),
        &json!({"atomicList": [3], "ref": {}, "labels": null}),
        &shape(),
    );
    assert_eq!(
        merged,
        json!({"atomicList": [3], "ref": {}, "labels": {"x": "1"}})
    );
}

#[test]
fn merge_of_sets_unions_in_order() {
    let merged = merge(
        &json!({"set": ["a", "b", "c"]}),
        &json!({"set": ["d", "b"]}),
        &shape(),
    );
    assert_eq!(merged, json!({"set": ["a", "d", "b", "c"]}));
}

#[test]
fn remove_items_empties_to_null() {
    let v = json!({"list": [{"name": "a", "value": 1}, {"name": "b"}], "labels": {"x": "1"}, "keep": true});
    let to_remove = fs(
        json!({"f:list": {"k:{\"name\":\"b\"}": {}, "k:{\"name\":\"a\"}": {"f:value": {}}}, "f:labels": {"f:x": {}}}),
    );
    let got = remove_items(&v, &to_remove, &shape());
    assert_eq!(
        got,
        json!({"list": [{"name": "a"}], "labels": null, "keep": true})
    );
}

#[test]
fn ensure_named_fields_adds_struct_parents_only() {
    let set = fs(json!({
        "f:nested": {"f:inner": {"f:x": {}}},
        "f:labels": {"f:app": {}},
        "f:list": {"k:{\"name\":\"a\"}": {"f:value": {}}},
        "f:free": {"f:a": {"f:b": {}}}
    }));
    let ensured = ensure_named_fields_are_members(set, &shape());
    assert_eq!(
        ensured,
        fs(json!({
            "f:nested": {".": {}, "f:inner": {".": {}, "f:x": {}}},
            "f:labels": {".": {}, "f:app": {}},
            "f:list": {".": {}, "k:{\"name\":\"a\"}": {"f:value": {}}},
            "f:free": {".": {}, "f:a": {"f:b": {}}}
        }))
    );
}

#[test]
fn validation_messages_follow_structured_merge_diff() {
    let s = shape();
    assert_eq!(
        validate(&json!({"list": [{"name": "a"}, {"name": "a"}]}), &s, false).unwrap_err(),
        ".list: duplicate entries for key [name=\"a\"]"
    );
    assert!(validate(&json!({"list": [{"name": "a"}, {"name": "a"}]}), &s, true).is_ok());
    assert_eq!(
        validate(&json!({"list": [{"value": 1}]}), &s, false).unwrap_err(),
        ".list: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
    );
    assert_eq!(
        validate(&json!({"set": [{"a": 1}], "ref": "x"}), &s, false).unwrap_err(),
        "errors:\n  .ref: expected map, got x\n  .set: element 0: associative list without keys has an element that's a map type"
    );
    assert_eq!(
        validate(&json!({"list": {"name": "a"}}), &s, false).unwrap_err(),
        ".list: expected list, got map[name:a]"
    );
    let deployment = shape_for("apps/v1", "Deployment");
    let dup = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "A"}, {"name": "A"}]}]}}}});
    assert_eq!(
        validate(&dup, &deployment, false).unwrap_err(),
        ".spec.template.spec.containers[name=\"c\"].env: duplicate entries for key [name=\"A\"]"
    );
}

#[test]
fn item_path_elements() {
    let list = shape().field("list").clone();
    assert_eq!(
        item_path_element(&list, &json!({"name": "a"}))
            .unwrap()
            .to_string(),
        "[name=\"a\"]"
    );
    assert_eq!(
        item_path_element(&list, &json!(null)).unwrap_err(),
        "associative list with keys may not have a null element"
    );
    let set = Shape::set(Shape::Scalar).with_list_strategy(SmpStrategy::Merge { key: None });
    assert_eq!(item_path_element(&set, &json!(3)).unwrap().to_string(), "[=3]");
    assert_eq!(
        item_path_element(&set, &json!(null)).unwrap_err(),
        "associative list without keys has an element that's an explicit null"
    );
}

#[test]
fn compare_skips_equal_subtrees_and_finds_changes_beside_them() {
    let deep = json!({"inner": {"a": {"b": [1, 2], "c": {"d": "e"}}}});
    let old =
        json!({"free": deep, "labels": {"x": "1", "y": "2"}, "gone": 1, "list": [{"name": "a", "value": 1}]});
    let new =
        json!({"free": deep, "labels": {"x": "1", "y": "3"}, "new": 2, "list": [{"name": "a", "value": 1}]});
    let c = compare(&old, &new, &shape());
    assert_eq!(c.modified, fs(json!({"f:labels": {"f:y": {}}})));
    assert_eq!(c.added, fs(json!({"f:new": {}})));
    assert_eq!(c.removed, fs(json!({"f:gone": {}})));
    // Backwards, what was added is removed.
    let back = compare(&new, &old, &shape());
    assert_eq!(
        (back.added, back.removed, back.modified),
        (c.removed, c.added, c.modified)
    );
    assert_eq!(compare(&old, &old.clone(), &shape()), Comparison::default());
}
