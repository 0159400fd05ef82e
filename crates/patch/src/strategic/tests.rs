#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::*;
use crate::builtin::shape_for;
use crate::shape::{Shape, SmpStrategy};

/// A test type in the spirit of kube-apiserver's: every list flavour the server distinguishes.
fn item_shape() -> Shape {
    let merging = || {
        Shape::list_map(&["name"], Shape::object([])).with_list_strategy(SmpStrategy::Merge {
            key: Some("name".into()),
        })
    };
    let ints = || Shape::atomic_list(Shape::Scalar).with_list_strategy(SmpStrategy::Merge { key: None });
    Shape::object([
        ("mergingList", merging()),
        ("nonMergingList", Shape::atomic_list(Shape::object([]))),
        ("mergingIntList", ints()),
        ("nonMergingIntList", Shape::atomic_list(Shape::Scalar)),
        ("simpleMap", Shape::map_of(Shape::Scalar)),
        (
            "replacingMap",
            Shape::object([]).with_object_strategy(SmpStrategy::Replace),
        ),
        (
            "retainKeysMap",
            Shape::object([("mergingList", merging()), ("mergingIntList", ints())])
                .with_object_strategy(SmpStrategy::RetainKeys),
        ),
    ])
}

fn smp(doc: Value, patch: Value) -> Value {
    strategic_merge_patch(&doc, &patch, &item_shape()).unwrap()
}

fn smp_err(doc: Value, patch: Value) -> PatchError {
    strategic_merge_patch(&doc, &patch, &item_shape()).unwrap_err()
}

#[test]
fn empty_patch_is_identity() {
    let docs = [
        json!({}),
        json!({"mergingList": [{"name": "a", "value": "1"}, {"name": "b"}], "simpleMap": {"k": "v"}}),
        json!({"mergingIntList": [3, 1, 2], "nonMergingList": [{"name": "x"}], "other": {"deep": [1, {"a": 2}]}}),
    ];
    for doc in docs {
        assert_eq!(smp(doc.clone(), json!({})), doc);
    }
    // Property: the empty patch is the identity for every built-in shape too.
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["b", "a"]},
        "spec": {"template": {"spec": {"containers": [{"name": "b"}, {"name": "a", "env": [{"name": "X"}]}]}}}
    });
    for &(v, k) in crate::builtin::KINDS {
        assert_eq!(
            strategic_merge_patch(&deployment, &json!({}), &shape_for(v, k)).unwrap(),
            deployment,
            "{k}"
        );
    }
}

#[test]
fn nulls_delete_and_maps_merge() {
    let doc = json!({"simpleMap": {"a": "1", "b": "2"}, "value": "x", "nested": {"a": {"b": 1, "c": 2}}});
    let got = smp(
        doc,
        json!({"simpleMap": {"a": null, "c": "3"}, "value": null, "nested": {"a": {"c": null, "d": 4}}}),
    );
    assert_eq!(
        got,
        json!({"simpleMap": {"b": "2", "c": "3"}, "nested": {"a": {"b": 1, "d": 4}}})
    );
}

#[test]
fn merging_list_merges_by_key_and_prepends_new_items() {
    let doc = json!({"mergingList": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]});
    let got = smp(
        doc,
        json!({"mergingList": [{"name": "b", "other": "x"}, {"name": "c"}]}),
    );
    // kube-apiserver orders patch items first (by patch order), then the live-only items,
    // interleaving by live order where both are known.
    assert_eq!(
        got,
        json!({"mergingList": [{"name": "a", "value": "1"}, {"name": "b", "value": "2", "other": "x"}, {"name": "c"}]})
    );
    let got = smp(
        json!({"mergingList": [{"name": "a"}, {"name": "b"}]}),
        json!({"mergingList": [{"name": "c"}]}),
    );
    assert_eq!(
        got,
        json!({"mergingList": [{"name": "c"}, {"name": "a"}, {"name": "b"}]})
    );
}

#[test]
fn lists_without_strategy_are_replaced() {
    let doc = json!({"nonMergingList": [{"name": "a"}, {"name": "b"}], "nonMergingIntList": [1, 2], "untypedList": [1]});
    let got = smp(
        doc,
        json!({"nonMergingList": [{"name": "c"}], "nonMergingIntList": [3], "untypedList": [2, 3]}),
    );
    assert_eq!(
        got,
        json!({"nonMergingList": [{"name": "c"}], "nonMergingIntList": [3], "untypedList": [2, 3]})
    );
}

#[test]
fn primitive_merge_lists_union() {
    // Values both sides know keep the live order; values only the patch has go first.
    let got = smp(
        json!({"mergingIntList": [1, 2]}),
        json!({"mergingIntList": [2, 3]}),
    );
    assert_eq!(got, json!({"mergingIntList": [1, 2, 3]}));
    let got = smp(json!({"mergingIntList": [1, 2]}), json!({"mergingIntList": [3]}));
    assert_eq!(got, json!({"mergingIntList": [3, 1, 2]}));
}

#[test]
fn finalizers_union_and_delete_from_primitive_list() {
    let shape = shape_for("v1", "ConfigMap");
    let doc = json!({"metadata": {"name": "c", "finalizers": ["a.io/x", "b.io/y"]}});
    let added =
        strategic_merge_patch(&doc, &json!({"metadata": {"finalizers": ["c.io/z"]}}), &shape).unwrap();
    assert_eq!(
        added["metadata"]["finalizers"],
        json!(["c.io/z", "a.io/x", "b.io/y"])
    );
    let removed = strategic_merge_patch(
        &added,
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x", "not-there"]}}),
        &shape,
    )
    .unwrap();
    assert_eq!(removed["metadata"]["finalizers"], json!(["c.io/z", "b.io/y"]));
    // Deleting from a list that does not exist does not create it.
    let untouched = strategic_merge_patch(
        &json!({"metadata": {}}),
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        &shape,
    )
    .unwrap();
    assert_eq!(untouched, json!({"metadata": {}}));
}

#[test]
fn delete_from_primitive_list_works_without_merge_strategy() {
    let got = smp(
        json!({"nonMergingIntList": [1, 2, 3, 2]}),
        json!({"$deleteFromPrimitiveList/nonMergingIntList": [2]}),
    );
    assert_eq!(got, json!({"nonMergingIntList": [1, 3]}));
}

#[test]
fn patch_directives_in_list_items() {
    let doc = json!({"mergingList": [{"name": "a"}, {"name": "b"}, {"name": "a", "dup": true}]});
    // `$patch: delete` removes every item with that key.
    let got = smp(
        doc.clone(),
        json!({"mergingList": [{"name": "a", "$patch": "delete"}]}),
    );
    assert_eq!(got, json!({"mergingList": [{"name": "b"}]}));
    // `$patch: replace` replaces the whole list with the other items.
    let got = smp(
        doc.clone(),
        json!({"mergingList": [{"$patch": "replace"}, {"name": "z", "value": "1"}]}),
    );
    assert_eq!(got, json!({"mergingList": [{"name": "z", "value": "1"}]}));
    // `$patch: merge` in a list is rejected as kube-apiserver rejects it.
    let err = smp_err(doc.clone(), json!({"mergingList": [{"$patch": "merge"}]}));
    assert_eq!(
        err,
        PatchError::Internal("merging lists cannot yet be specified in the patch (at .mergingList)".into())
    );
    let err = smp_err(doc, json!({"mergingList": [{"$patch": "frob", "name": "a"}]}));
    assert_eq!(
        err.message(),
        "unknown patch type: frob in map: map[$patch:frob name:a] (at .mergingList)"
    );
}

#[test]
fn patch_directives_in_maps() {
    let doc = json!({"simpleMap": {"a": "1", "b": "2"}, "keep": 1});
    let got = smp(doc.clone(), json!({"simpleMap": {"$patch": "replace", "c": "3"}}));
    assert_eq!(got, json!({"simpleMap": {"c": "3"}, "keep": 1}));
    let got = smp(doc.clone(), json!({"simpleMap": {"$patch": "delete"}}));
    assert_eq!(got, json!({"simpleMap": {}, "keep": 1}));
    // kube-apiserver only knows replace and delete for maps; merge is an unknown patch type.
    let err = smp_err(doc.clone(), json!({"simpleMap": {"$patch": "merge", "c": "3"}}));
    assert_eq!(
        err.message(),
        "unknown patch type: merge in map: map[$patch:merge c:3] (at .simpleMap)"
    );
    assert_eq!(err.http_status(), 500);
    // A whole-document replace.
    assert_eq!(smp(doc, json!({"$patch": "replace", "x": 1})), json!({"x": 1}));
}

#[test]
fn replace_strategy_on_maps() {
    let got = smp(
        json!({"replacingMap": {"a": 1, "b": 2}}),
        json!({"replacingMap": {"c": 3}}),
    );
    assert_eq!(got, json!({"replacingMap": {"c": 3}}));
    // PodDisruptionBudget.spec.selector carries patchStrategy "replace".
    let pdb = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}, "minAvailable": 1}});
    let got = strategic_merge_patch(
        &pdb,
        &json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        &shape_for("policy/v1", "PodDisruptionBudget"),
    )
    .unwrap();
    assert_eq!(
        got["spec"],
        json!({"selector": {"matchLabels": {"b": "2"}}, "minAvailable": 1})
    );
    // Deployment.spec.selector has no strategy: merged.
    let got = strategic_merge_patch(
        &pdb,
        &json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        &shape_for("apps/v1", "Deployment"),
    )
    .unwrap();
    assert_eq!(
        got["spec"]["selector"],
        json!({"matchLabels": {"a": "1", "b": "2"}})
    );
}

#[test]
fn retain_keys_clears_unlisted_fields() {
    let doc = json!({"retainKeysMap": {"name": "a", "value": "1", "other": "x"}});
    let got = smp(
        doc.clone(),
        json!({"retainKeysMap": {"$retainKeys": ["name", "value"], "value": "2"}}),
    );
    assert_eq!(got, json!({"retainKeysMap": {"name": "a", "value": "2"}}));
    // A patched field missing from $retainKeys is a malformed patch.
    let err = smp_err(
        doc.clone(),
        json!({"retainKeysMap": {"$retainKeys": ["name"], "value": "2"}}),
    );
    assert_eq!(
        err,
        PatchError::BadRequest("invalid patch format of retainKeys (at .retainKeysMap)".into())
    );
    let err = smp_err(doc, json!({"retainKeysMap": {"$retainKeys": "name"}}));
    assert_eq!(err.http_status(), 400);
}

#[test]
fn set_element_order_orders_merged_lists() {
    let live = json!({"mergingList": [
        {"name": "1", "other": "a"}, {"name": "2", "value": "2"}, {"name": "9"}, {"name": "3", "value": "3"}, {"name": "4", "value": "4"}
    ]});
    let patch =
        json!({"$setElementOrder/mergingList": [{"name": "2"}, {"name": "1"}, {"name": "4"}, {"name": "3"}]});
    // Live-only items (9) stay after the item that preceded them in the live list.
    assert_eq!(
        smp(live, patch)["mergingList"],
        json!([{"name": "2", "value": "2"}, {"name": "1", "other": "a"}, {"name": "9"}, {"name": "4", "value": "4"}, {"name": "3", "value": "3"}])
    );

    let live = json!({"mergingList": [{"name": "1", "other": "a"}, {"name": "2", "value": "2"}]});
    let patch = json!({
        "$setElementOrder/mergingList": [{"name": "3"}, {"name": "1"}, {"name": "2"}],
        "mergingList": [{"name": "3", "value": "3"}]
    });
    assert_eq!(
        smp(live, patch)["mergingList"],
        json!([{"name": "3", "value": "3"}, {"name": "1", "other": "a"}, {"name": "2", "value": "2"}])
    );

    // 2 is only live: it keeps its place before 3, where the live list had it.
    let got = smp(
        json!({"mergingIntList": [1, 2, 3]}),
        json!({"$setElementOrder/mergingIntList": [3, 4, 1], "mergingIntList": [4]}),
    );
    assert_eq!(got["mergingIntList"], json!([2, 3, 4, 1]));
}

#[test]
fn set_element_order_must_match_the_patch_list() {
    let err = smp_err(
        json!({"mergingList": [{"name": "1"}]}),
        json!({"$setElementOrder/mergingList": [{"name": "1"}, {"name": "2"}], "mergingList": [{"name": "2"}, {"name": "1"}]}),
    );
    assert!(err.message().starts_with("The order in patch list:"), "{err}");
    assert_eq!(err.http_status(), 500);
}

#[test]
fn missing_merge_key_is_an_error_naming_the_list() {
    let shape = shape_for("apps/v1", "Deployment");
    let live = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "a"}]}}}});
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "b"}]}}}});
    let err = strategic_merge_patch(&live, &patch, &shape).unwrap_err();
    assert_eq!(
        err,
        PatchError::Internal(
            "map: map[image:b] does not contain declared merge key: name (at .spec.template.spec.containers)"
                .into()
        )
    );
}

#[test]
fn nested_merge_lists_inside_items() {
    let shape = shape_for("v1", "Pod");
    let live = json!({"spec": {"containers": [{
        "name": "web",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "env": [{"name": "A", "value": "1"}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]
    }]}});
    let patch = json!({"spec": {"containers": [{
        "name": "web",
        "ports": [{"containerPort": 443}],
        "env": [{"name": "A", "value": "2"}],
        "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]
    }]}});
    let got = strategic_merge_patch(&live, &patch, &shape).unwrap();
    let c = &got["spec"]["containers"][0];
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 443}, {"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(c["env"], json!([{"name": "A", "value": "2"}]));
    assert_eq!(
        c["volumeMounts"],
        json!([{"name": "cache", "mountPath": "/cache"}, {"name": "data", "mountPath": "/data"}])
    );
}

#[test]
fn type_changes_replace_and_new_subtrees_drop_nulls_and_directives() {
    let got = smp(
        json!({"a": "string", "b": [1]}),
        json!({"a": {"x": 1, "y": null}, "b": {"k": {"$patch": "delete"}, "j": 1}, "c": {"d": null, "e": [{"$patch": "delete"}, 1]}}),
    );
    assert_eq!(got, json!({"a": {"x": 1}, "b": {"j": 1}, "c": {"e": [1]}}));
}

#[test]
fn untyped_documents_merge_maps_and_replace_lists() {
    let doc = json!({"spec": {"a": {"b": 1}, "list": [1, 2], "items": [{"name": "x"}]}});
    let got = strategic_merge_patch(
        &doc,
        &json!({"spec": {"a": {"c": 2}, "list": [3], "items": [{"name": "y"}]}}),
        &Shape::Untyped,
    )
    .unwrap();
    assert_eq!(
        got,
        json!({"spec": {"a": {"b": 1, "c": 2}, "list": [3], "items": [{"name": "y"}]}})
    );
}

#[test]
fn malformed_documents() {
    let err = strategic_merge_patch(&json!({}), &json!([1]), &Shape::Untyped).unwrap_err();
    assert_eq!(
        err.message(),
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    assert_eq!(err.http_status(), 400);
    let err = smp_err(json!({"mergingList": []}), json!({"mergingList": [[1]]}));
    assert_eq!(
        err,
        PatchError::Unprocessable("lists of lists are not supported (at .mergingList)".into())
    );
    let err = smp_err(
        json!({"mergingList": [{"name": "a"}]}),
        json!({"mergingList": ["x"]}),
    );
    assert!(
        err.message()
            .starts_with("list element types are not identical: [[map[name:a]] [x]]"),
        "{err}"
    );
    let err = smp_err(json!({}), json!({"$deleteFromPrimitiveList": ["x"]}));
    assert_eq!(err.message(), "invalid patch format of primitive list");
    let err = smp_err(json!({}), json!({"$setElementOrder/mergingList": "x"}));
    assert_eq!(err.message(), "expected a []interface {}, but received a string");
}

/// The live Deployment a user created with `kubectl apply` (plus what the server added).
fn applied_deployment(image: &str, env: Value, last_applied: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": "9f1c", "resourceVersion": "7", "generation": 1,
            "labels": {"app": "web"},
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": last_applied
            }
        },
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web",
                        "image": image,
                        "env": env,
                        "imagePullPolicy": "IfNotPresent",
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "resources": {}
                    }],
                    "restartPolicy": "Always",
                    "dnsPolicy": "ClusterFirst",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30
                }
            }
        },
        "status": {"observedGeneration": 1, "replicas": 2}
    })
}

#[test]
fn kubectl_apply_three_way_patch_changes_image_and_removes_env_var() {
    let old_config = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"labels":{"app":"web"},"name":"web","namespace":"default"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"strategy":{"rollingUpdate":{"maxSurge":1},"type":"RollingUpdate"},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"image":"nginx:1.25","name":"web"}]}}}}
"#;
    let new_config = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"labels":{"app":"web"},"name":"web","namespace":"default"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"strategy":{"rollingUpdate":{"maxSurge":1},"type":"RollingUpdate"},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"env":[{"name":"A","value":"1"}],"image":"nginx:1.26","name":"web"}]}}}}
"#;
    let live = applied_deployment(
        "nginx:1.25",
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
        old_config,
    );
    // What `kubectl apply` sends (strategicpatch.CreateThreeWayMergePatch of last-applied,
    // the new file and the live object): the deletion of B from the last-applied diff, the
    // image from the live diff, and $setElementOrder for every merging list it touched.
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": new_config}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}],
                "env": [{"$patch": "delete", "name": "B"}],
                "image": "nginx:1.26",
                "name": "web"
            }]
        }}}
    });
    let got = strategic_merge_patch(&live, &patch, &shape_for("apps/v1", "Deployment")).unwrap();
    let want = applied_deployment("nginx:1.26", json!([{"name": "A", "value": "1"}]), new_config);
    assert_eq!(got, want);
}

#[test]
fn kubectl_apply_switches_deployment_strategy_with_retain_keys() {
    let live = applied_deployment("nginx", json!([]), "{}");
    // Changing `strategy` from RollingUpdate to Recreate: kubectl sends $retainKeys because
    // Deployment.spec.strategy has patchStrategy "retainKeys", so the server-defaulted
    // rollingUpdate.maxUnavailable goes too.
    let patch =
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}});
    let got = strategic_merge_patch(&live, &patch, &shape_for("apps/v1", "Deployment")).unwrap();
    assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(got["spec"]["replicas"], json!(2));
}

#[test]
fn kubectl_edit_two_way_patch_adds_a_container_port() {
    let live = applied_deployment("nginx", json!([{"name": "A", "value": "1"}]), "{}");
    // `kubectl edit` sends a two-way patch between what it showed and what was saved.
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "web"}],
        "containers": [{"name": "web", "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]
    }}}});
    let got = strategic_merge_patch(&live, &patch, &shape_for("apps/v1", "Deployment")).unwrap();
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 8080, "protocol": "TCP"}])
    );
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
}

#[test]
fn go_stable_sort_matches_insertion_and_symmerge() {
    // Larger than one insertion-sort block so SymMerge runs; result must equal a stable sort.
    let mut data: Vec<Value> = (0..57).map(|i| json!([(i * 37) % 11, i])).collect();
    let mut expected = data.clone();
    expected.sort_by_key(|v| v[0].as_i64().unwrap());
    go_stable_sort(&mut data, |a, b| a[0].as_i64() < b[0].as_i64());
    assert_eq!(data, expected);
}
