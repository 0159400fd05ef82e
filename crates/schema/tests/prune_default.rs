//! Pruning, defaulting and type navigation.
#![allow(clippy::unwrap_used)]

use flotilla_schema::{ListInfo, Schema};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::{Value, json};

fn schema(yaml: &str) -> Schema {
    let v: Value = serde_yaml::from_str(yaml).unwrap();
    let props: JSONSchemaProps = serde_json::from_value(v).unwrap();
    Schema::new(&props).unwrap()
}

const SCHEMA: &str = r#"
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer, default: 1}
      mode: {type: string, nullable: true, default: fast}
      strict: {type: string}
      labels: {type: object, additionalProperties: {type: string}}
      anyMap: {type: object, additionalProperties: true}
      free: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {known: {type: object, properties: {a: {type: string}}}}}
      items:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            port: {type: integer, default: 80}
      tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
      plain: {type: array, items: {type: string, default: x}}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
      nested:
        type: object
        default: {}
        properties:
          inner: {type: string, default: hello}
"#;

#[test]
fn prunes_unknown_fields_and_reports_paths() {
    let s = schema(SCHEMA);
    let mut obj = json!({
        "apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a", "whatever": 1},
        "extra": true,
        "spec": {
            "foo": 1,
            "labels": {"a": "b"},
            "anyMap": {"k": {"deep": 1}, "s": "kept"},
            "free": {"anything": {"goes": 1}, "known": {"a": "x", "b": "pruned"}},
            "items": [{"name": "a", "bogus": 1}],
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "junk": 1}, "data": {"k": "v"}}
        }
    });
    let paths = s.prune(&mut obj);
    assert_eq!(
        paths,
        vec![
            "extra",
            "spec.anyMap.k.deep",
            "spec.foo",
            "spec.free.known.b",
            "spec.items[0].bogus",
            "spec.template.metadata.junk",
        ]
    );
    assert_eq!(
        obj,
        json!({
            "apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a", "whatever": 1},
            "spec": {
                "labels": {"a": "b"},
                "anyMap": {"k": {}, "s": "kept"},
                "free": {"anything": {"goes": 1}, "known": {"a": "x"}},
                "items": [{"name": "a"}],
                "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
            }
        })
    );
}

/// Embedded resources in a list (as a Work's manifests) and in a map.
const EMBEDDED: &str = r#"
type: object
properties:
  spec:
    type: object
    properties:
      manifests:
        type: array
        items: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
      byName:
        type: object
        additionalProperties: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
"#;

#[test]
fn embedded_metadata_is_coerced_wherever_the_resource_is_nested() {
    // Works keep their manifests in a list, other kinds in a map: both are found.
    let s = schema(EMBEDDED);
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "junk": 1}});
    let mut obj = json!({"spec": {"manifests": [manifest.clone()], "byName": {"c": manifest}}});
    let paths = s.prune(&mut obj);
    assert_eq!(
        paths,
        vec!["spec.byName[c].metadata.junk", "spec.manifests[0].metadata.junk"]
    );
    let clean = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(
        obj,
        json!({"spec": {"manifests": [clean.clone()], "byName": {"c": clean}}})
    );

    // Without embedded resources there is no metadata to coerce: unknown fields still go.
    let s = schema("type: object\nproperties:\n  spec: {type: object, properties: {a: {type: string}}}");
    let mut obj = json!({"metadata": {"name": "x", "junk": 1}, "spec": {"a": "b", "c": 1}});
    assert_eq!(s.prune(&mut obj), vec!["spec.c"]);
    assert_eq!(
        obj,
        json!({"metadata": {"name": "x", "junk": 1}, "spec": {"a": "b"}})
    );
}

#[test]
fn a_failed_coercion_changes_nothing_and_names_the_first_bad_resource() {
    let s = schema(EMBEDDED);
    // The first manifest alone would be coerced (its junk dropped); the second and third
    // cannot be: nothing is coerced, and validation reports the second, the first in order.
    let good = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "junk": 1}});
    let bad_metadata = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5}});
    let bad_kind = json!({"apiVersion": "v1", "kind": 7, "metadata": {"name": "d"}});
    let original = json!({"spec": {"manifests": [good.clone(), bad_metadata, bad_kind]}});
    let mut obj = original.clone();
    assert_eq!(s.prune(&mut obj), Vec::<String>::new());
    assert_eq!(obj, original);
    let errors: Vec<String> = s.validate(&obj).iter().map(ToString::to_string).collect();
    assert!(
        errors.iter().any(|e| e.contains("spec.manifests[1].metadata")),
        "{errors:?}"
    );

    // Nested deeper than one level, the coerced metadata lands where its resource is.
    let mut obj = json!({"spec": {"manifests": [good.clone(), good]}});
    assert_eq!(
        s.prune(&mut obj),
        vec![
            "spec.manifests[0].metadata.junk",
            "spec.manifests[1].metadata.junk"
        ]
    );
    assert_eq!(obj["spec"]["manifests"][1]["metadata"], json!({"name": "c"}));
}

#[test]
fn prunes_disallowed_nulls() {
    let s = schema(SCHEMA);
    let mut obj = json!({"spec": {"strict": null, "mode": null, "replicas": null}});
    s.prune(&mut obj);
    // `strict` is neither nullable nor defaulted; `replicas` is defaulted, `mode` nullable.
    assert_eq!(obj, json!({"spec": {"mode": null, "replicas": null}}));
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"]["replicas"], json!(1));
    assert_eq!(obj["spec"]["mode"], Value::Null, "nullable null keeps its null");
}

#[test]
fn applies_defaults() {
    let s = schema(SCHEMA);
    let mut obj =
        json!({"spec": {"items": [{"name": "a"}, {"name": "b", "port": 8080}], "plain": ["a", null]}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json!({"spec": {
            "replicas": 1, "mode": "fast",
            "items": [{"name": "a", "port": 80}, {"name": "b", "port": 8080}],
            "plain": ["a", "x"],
            "nested": {"inner": "hello"}
        }})
    );
    // Defaults apply only inside objects that exist.
    let mut empty = json!({});
    s.apply_defaults(&mut empty);
    assert_eq!(empty, json!({}));
}

#[test]
fn navigation() {
    let s = schema(SCHEMA);
    assert_eq!(
        s.list_type_at(&["spec", "items"]),
        Some(ListInfo {
            list_type: "map".into(),
            map_keys: vec!["name".into()]
        })
    );
    assert_eq!(s.list_type_at(&["spec", "tags"]).unwrap().list_type, "set");
    assert_eq!(s.list_type_at(&["spec", "plain"]).unwrap().list_type, "atomic");
    assert_eq!(s.list_type_at(&["spec", "replicas"]), None);
    assert_eq!(s.list_type_at(&["spec", "nope"]), None);
    assert_eq!(
        s.props_at(&["spec", "items", "*", "port"])
            .unwrap()
            .type_
            .as_deref(),
        Some("integer")
    );
    assert_eq!(
        s.props_at(&["spec", "labels", "anykey"])
            .unwrap()
            .type_
            .as_deref(),
        Some("string")
    );
    assert_eq!(
        s.props_at(&["spec", "labels", "*"]).unwrap().type_.as_deref(),
        Some("string")
    );
    assert!(s.props_at(&["spec", "missing"]).is_none());
    assert_eq!(s.map_type_at(&["spec", "nested"]).as_deref(), Some("granular"));
}
