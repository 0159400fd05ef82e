//! Table-driven tests of every overrider, operator and error case, named after Karmada's
//! documented examples (`docs/userguide/scheduling/override-policy.md`) and its unit tests
//! (`pkg/util/overridemanager/*_test.go`) where they come from there.

#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use flotilla_api::overrides::{OverridePolicyKind, OverrideSpec, Overriders};

use crate::doc::Doc;
use crate::render::{PolicySource, RuleFailure, apply_rule, render};
use crate::select::ClusterFacts;

/// Applies one rule's overriders to `object`: the result, or `(overrider, message)`.
fn run(object: &Value, overriders: Value) -> Result<Value, (String, String)> {
    let overriders: Overriders = serde_json::from_value(overriders).unwrap();
    let mut doc = Doc::from(object);
    apply_rule(&mut doc, &overriders).map(|()| Value::from(&doc))
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "myapp", "namespace": "default"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": containers}}},
    })
}

fn images(object: &Value, pointer: &str) -> Vec<String> {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|c| c["image"].as_str().unwrap_or_default().to_owned())
        .collect()
}

const DIGEST: &str = "sha256:dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9c";

// ------------------------------------------------------------------------------------------
// imageOverrider
// ------------------------------------------------------------------------------------------

#[test]
fn image_overrider_documented_examples() {
    let myapp = deployment(json!([{"name": "myapp", "image": "myapp:1.0.0"}]));
    let cases = [
        // Example 1: add the registry.
        (
            json!({"component": "Registry", "operator": "add", "value": "test-repo"}),
            "test-repo/myapp:1.0.0",
        ),
        // Example 2: replace the repository.
        (
            json!({"component": "Repository", "operator": "replace", "value": "myapp2"}),
            "myapp2:1.0.0",
        ),
        // Example 3: remove the tag.
        (json!({"component": "Tag", "operator": "remove"}), "myapp"),
    ];
    for (overrider, expected) in cases {
        let out = run(&myapp, json!({"imageOverrider": [overrider.clone()]})).unwrap();
        assert_eq!(
            images(&out, "/spec/template/spec/containers"),
            vec![expected],
            "{overrider}"
        );
    }
}

#[test]
fn image_overrider_every_component_and_operator() {
    let image = "fictional.registry.example/imagename:v1.0.0";
    let cases = [
        (
            "Registry",
            "add",
            ".test",
            "fictional.registry.example.test/imagename:v1.0.0".to_owned(),
        ),
        (
            "Registry",
            "replace",
            "fictional.registry.us",
            "fictional.registry.us/imagename:v1.0.0".to_owned(),
        ),
        ("Registry", "remove", "", "imagename:v1.0.0".to_owned()),
        (
            "Repository",
            "add",
            "/nginx",
            "fictional.registry.example/imagename/nginx:v1.0.0".to_owned(),
        ),
        (
            "Repository",
            "replace",
            "nginx",
            "fictional.registry.example/nginx:v1.0.0".to_owned(),
        ),
        // Karmada leaves the registry's slash behind.
        (
            "Repository",
            "remove",
            "",
            "fictional.registry.example/:v1.0.0".to_owned(),
        ),
        (
            "Tag",
            "add",
            "-alpine",
            "fictional.registry.example/imagename:v1.0.0-alpine".to_owned(),
        ),
        // "v1.0.0" + a digest is neither a tag nor a digest: nothing changes (Karmada).
        ("Tag", "add", DIGEST, image.to_owned()),
        (
            "Tag",
            "replace",
            DIGEST,
            format!("fictional.registry.example/imagename@{DIGEST}"),
        ),
        (
            "Tag",
            "replace",
            "v2",
            "fictional.registry.example/imagename:v2".to_owned(),
        ),
        (
            "Tag",
            "remove",
            "",
            "fictional.registry.example/imagename".to_owned(),
        ),
    ];
    for (component, operator, value, expected) in cases {
        let object = deployment(json!([{"name": "c", "image": image}]));
        let mut overrider = json!({"component": component, "operator": operator});
        if !value.is_empty() {
            overrider["value"] = json!(value);
        }
        let out = run(&object, json!({"imageOverrider": [overrider]})).unwrap();
        assert_eq!(
            images(&out, "/spec/template/spec/containers"),
            vec![expected],
            "{component} {operator} {value}"
        );
    }
}

#[test]
fn image_overrider_digest_and_tag_forms() {
    let cases = [
        // A digested image: Tag replace with a tag drops the digest.
        (
            format!("nginx@{DIGEST}"),
            json!({"component": "Tag", "operator": "replace", "value": "1.25"}),
            "nginx:1.25".to_owned(),
        ),
        (
            format!("nginx@{DIGEST}"),
            json!({"component": "Tag", "operator": "remove"}),
            "nginx".to_owned(),
        ),
        // Tag and digest together: Karmada keeps only the tag, even for another component.
        (
            format!("nginx:1.0@{DIGEST}"),
            json!({"component": "Registry", "operator": "replace", "value": "example.com"}),
            "example.com/nginx:1.0".to_owned(),
        ),
        (
            "nginx".to_owned(),
            json!({"component": "Tag", "operator": "add", "value": "latest"}),
            "nginx:latest".to_owned(),
        ),
        (
            "localhost:5000/app".to_owned(),
            json!({"component": "Registry", "operator": "remove"}),
            "app".to_owned(),
        ),
    ];
    for (image, overrider, expected) in cases {
        let object = deployment(json!([{"name": "c", "image": image}]));
        let out = run(&object, json!({"imageOverrider": [overrider.clone()]})).unwrap();
        assert_eq!(
            images(&out, "/spec/template/spec/containers"),
            vec![expected],
            "{image} {overrider}"
        );
    }
}

#[test]
fn image_overrider_default_paths_by_kind() {
    let registry =
        json!({"imageOverrider": [{"component": "Registry", "operator": "replace", "value": "example.com"}]});
    let pod_spec = json!({"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "registry.k8s.io/b:2"}],
                          "initContainers": [{"name": "i", "image": "init:1"}]});
    for kind in ["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job"] {
        let object = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "x"},
                            "spec": {"template": {"spec": pod_spec.clone()}}});
        let out = run(&object, registry.clone()).unwrap();
        // Every container, whatever its registry; init containers are left alone.
        assert_eq!(
            images(&out, "/spec/template/spec/containers"),
            vec!["example.com/a:1", "example.com/b:2"],
            "{kind}"
        );
        assert_eq!(
            images(&out, "/spec/template/spec/initContainers"),
            vec!["init:1"],
            "{kind}"
        );
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec.clone()});
    let out = run(&pod, registry.clone()).unwrap();
    assert_eq!(
        images(&out, "/spec/containers"),
        vec!["example.com/a:1", "example.com/b:2"]
    );
    // Other kinds need a predicate: a CronJob is left as it is.
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                      "spec": {"jobTemplate": {"spec": {"template": {"spec": pod_spec.clone()}}}}});
    assert_eq!(run(&cron, registry).unwrap(), cron);
    // A workload without containers is left alone.
    let empty = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "e"}, "spec": {}});
    assert_eq!(
        run(
            &empty,
            json!({"imageOverrider": [{"component": "Tag", "operator": "remove"}]})
        )
        .unwrap(),
        empty
    );
}

#[test]
fn image_overrider_with_a_predicate() {
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}]}}}}}});
    let out = run(
        &cron,
        json!({"imageOverrider": [{"predicate": {"path": "/spec/jobTemplate/spec/template/spec/containers/1/image"},
                                   "component": "Tag", "operator": "replace", "value": "3"}]}),
    )
    .unwrap();
    assert_eq!(
        images(&out, "/spec/jobTemplate/spec/template/spec/containers"),
        vec!["a:1", "b:3"]
    );
    // A predicate on a Deployment changes only that image.
    let object = deployment(json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]));
    let out = run(
        &object,
        json!({"imageOverrider": [{"predicate": {"path": "/spec/template/spec/containers/1/image"},
                                   "component": "Repository", "operator": "replace", "value": "nginx"}]}),
    )
    .unwrap();
    assert_eq!(
        images(&out, "/spec/template/spec/containers"),
        vec!["a:1", "nginx:1"]
    );
}

#[test]
fn image_overrider_errors() {
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            deployment(json!([{"name": "c", "image": "Not An Image"}])),
            json!({"component": "Tag", "operator": "remove"}),
            "failed to parse image value(Not An Image), error: invalid reference format",
        ),
        (
            deployment(json!([{"name": "c", "image": "UPPER:1"}])),
            json!({"component": "Tag", "operator": "remove"}),
            "failed to parse image value(UPPER:1), error: repository name must be lowercase",
        ),
        (
            deployment(json!([{"name": "c"}])),
            json!({"component": "Tag", "operator": "remove"}),
            "failed to parse image value(), error: repository name must have at least one component",
        ),
        (
            deployment(json!("not a list")),
            json!({"component": "Tag", "operator": "remove"}),
            "/spec/template/spec/containers is a string, not a list",
        ),
        (
            deployment(json!([{"name": "c", "image": "a:1"}])),
            json!({"predicate": {"path": "/spec/template/spec/containers/5/image"}, "component": "Tag", "operator": "remove"}),
            "cannot read the image at predicate path \"/spec/template/spec/containers/5/image\": containers has 1 items, no index 5",
        ),
        (
            deployment(json!([{"name": "c", "image": "a:1"}])),
            json!({"predicate": {"path": "/spec/replicas"}, "component": "Tag", "operator": "remove"}),
            "cannot read the image at predicate path \"/spec/replicas\": \"replicas\" is a number, not a string",
        ),
        (
            deployment(json!([{"name": "c", "image": "a:1"}])),
            json!({"predicate": {"path": "/spec/nothing/image"}, "component": "Tag", "operator": "remove"}),
            "cannot read the image at predicate path \"/spec/nothing/image\": \"nothing\" does not exist",
        ),
    ];
    for (object, overrider, message) in cases {
        let error = run(&object, json!({"imageOverrider": [overrider.clone()]})).unwrap_err();
        assert_eq!(
            error,
            ("imageOverrider[0]".to_owned(), message.to_owned()),
            "{overrider}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// commandOverrider / argsOverrider
// ------------------------------------------------------------------------------------------

fn myapp_with_command() -> Value {
    deployment(json!([{"name": "myapp", "image": "myapp",
        "command": ["./myapp", "--parameter1=foo", "--parameter2=bar"]}]))
}

fn command(object: &Value) -> Value {
    object["spec"]["template"]["spec"]["containers"][0]["command"].clone()
}

#[test]
fn command_overrider_documented_examples() {
    // Example 1: add a flag.
    let out = run(
        &myapp_with_command(),
        json!({"commandOverrider": [{"containerName": "myapp", "operator": "add", "value": ["--cluster=member1"]}]}),
    )
    .unwrap();
    assert_eq!(
        command(&out),
        json!([
            "./myapp",
            "--parameter1=foo",
            "--parameter2=bar",
            "--cluster=member1"
        ])
    );
    // Example 2: remove a flag.
    let out = run(
        &myapp_with_command(),
        json!({"commandOverrider": [{"containerName": "myapp", "operator": "remove", "value": ["--parameter1=foo"]}]}),
    )
    .unwrap();
    assert_eq!(command(&out), json!(["./myapp", "--parameter2=bar"]));
}

#[test]
fn command_and_args_overrider_cases() {
    let two = deployment(json!([
        {"name": "a", "image": "a", "args": ["-v", "-x", "-v"]},
        {"name": "b", "image": "b"},
    ]));
    let cases: Vec<(Value, Value)> = vec![
        // Remove drops every equal item.
        (
            json!({"argsOverrider": [{"containerName": "a", "operator": "remove", "value": ["-v"]}]}),
            json!([{"name": "a", "image": "a", "args": ["-x"]}, {"name": "b", "image": "b"}]),
        ),
        // A container without the field gets it.
        (
            json!({"argsOverrider": [{"containerName": "b", "operator": "add", "value": ["--new"]}]}),
            json!([{"name": "a", "image": "a", "args": ["-v", "-x", "-v"]}, {"name": "b", "image": "b", "args": ["--new"]}]),
        ),
        // ... even when removing (Karmada writes an empty list).
        (
            json!({"commandOverrider": [{"containerName": "b", "operator": "remove", "value": ["x"]}]}),
            json!([{"name": "a", "image": "a", "args": ["-v", "-x", "-v"]}, {"name": "b", "image": "b", "command": []}]),
        ),
        // No container of that name: nothing changes.
        (
            json!({"commandOverrider": [{"containerName": "zzz", "operator": "add", "value": ["x"]}]}),
            json!([{"name": "a", "image": "a", "args": ["-v", "-x", "-v"]}, {"name": "b", "image": "b"}]),
        ),
        // Without values, add changes nothing.
        (
            json!({"argsOverrider": [{"containerName": "a", "operator": "add"}]}),
            json!([{"name": "a", "image": "a", "args": ["-v", "-x", "-v"]}, {"name": "b", "image": "b"}]),
        ),
        // Several overriders apply in order.
        (
            json!({"argsOverrider": [
                {"containerName": "a", "operator": "add", "value": ["-y"]},
                {"containerName": "a", "operator": "remove", "value": ["-x"]},
            ]}),
            json!([{"name": "a", "image": "a", "args": ["-v", "-v", "-y"]}, {"name": "b", "image": "b"}]),
        ),
    ];
    for (overriders, expected) in cases {
        let out = run(&two, overriders.clone()).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"], expected,
            "{overriders}"
        );
    }
    // A Pod's containers are under /spec.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "c", "command": ["run"]}]}});
    let out = run(
        &pod,
        json!({"commandOverrider": [{"containerName": "c", "operator": "add", "value": ["--v=2"]}]}),
    )
    .unwrap();
    assert_eq!(out["spec"]["containers"][0]["command"], json!(["run", "--v=2"]));
    // Kinds without known containers are left alone.
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {}});
    assert_eq!(
        run(
            &cron,
            json!({"commandOverrider": [{"containerName": "c", "operator": "add", "value": ["x"]}]})
        )
        .unwrap(),
        cron
    );
}

#[test]
fn command_overrider_errors() {
    let cases = [
        (
            deployment(json!([{"name": "c", "image": "c", "command": "run"}])),
            "/spec/template/spec/containers/0/command is a string, not a list",
        ),
        (
            deployment(json!([{"name": "c", "image": "c", "command": ["run", 5]}])),
            "/spec/template/spec/containers/0/command/1 is a number, not a string",
        ),
        (
            deployment(json!(["c"])),
            "/spec/template/spec/containers/0 is a string, not a container",
        ),
    ];
    for (object, message) in cases {
        let error = run(
            &object,
            json!({"commandOverrider": [{"containerName": "c", "operator": "add", "value": ["x"]}]}),
        )
        .unwrap_err();
        assert_eq!(error, ("commandOverrider[0]".to_owned(), message.to_owned()));
    }
}

// ------------------------------------------------------------------------------------------
// labelsOverrider / annotationsOverrider
// ------------------------------------------------------------------------------------------

#[test]
fn labels_overrider_documented_example() {
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "myapp", "labels": {"foo": "foo", "baz": "baz"}}});
    let out = run(
        &object,
        json!({"labelsOverrider": [
            {"operator": "add", "value": {"bar": "bar"}},
            {"operator": "replace", "value": {"foo": "exist"}},
            {"operator": "remove", "value": {"baz": "baz"}},
        ]}),
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"bar": "bar", "foo": "exist"}));
}

#[test]
fn labels_and_annotations_operators() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"a": "1"}, "annotations": {"example.com/x": "1"}}});
    let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let cases: Vec<(&Value, Value, &str, Value)> = vec![
        // add sets, also over an existing key.
        (
            &object,
            json!({"labelsOverrider": [{"operator": "add", "value": {"a": "2", "b": "3"}}]}),
            "labels",
            json!({"a": "2", "b": "3"}),
        ),
        // replace and remove act only on keys that exist.
        (
            &object,
            json!({"labelsOverrider": [{"operator": "replace", "value": {"a": "9", "zz": "9"}}]}),
            "labels",
            json!({"a": "9"}),
        ),
        (
            &object,
            json!({"labelsOverrider": [{"operator": "remove", "value": {"a": "", "zz": ""}}]}),
            "labels",
            json!({}),
        ),
        // Keys with '/' are escaped in the patch path.
        (
            &object,
            json!({"annotationsOverrider": [{"operator": "replace", "value": {"example.com/x": "2"}}]}),
            "annotations",
            json!({"example.com/x": "2"}),
        ),
        (
            &object,
            json!({"annotationsOverrider": [{"operator": "add", "value": {"example.com/y": "a~b"}}]}),
            "annotations",
            json!({"example.com/x": "1", "example.com/y": "a~b"}),
        ),
        // add creates the map when the object has none.
        (
            &bare,
            json!({"labelsOverrider": [{"operator": "add", "value": {"k": "v"}}]}),
            "labels",
            json!({"k": "v"}),
        ),
        (
            &bare,
            json!({"annotationsOverrider": [{"operator": "add", "value": {"k": "v"}}]}),
            "annotations",
            json!({"k": "v"}),
        ),
    ];
    for (input, overriders, field, expected) in cases {
        let out = run(input, overriders.clone()).unwrap();
        assert_eq!(out["metadata"][field], expected, "{overriders}");
    }
    // replace or remove without any map: nothing changes, no map appears.
    let out = run(
        &bare,
        json!({"labelsOverrider": [{"operator": "remove", "value": {"k": ""}}]}),
    )
    .unwrap();
    assert_eq!(out, bare);
}

// ------------------------------------------------------------------------------------------
// fieldOverrider
// ------------------------------------------------------------------------------------------

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "myconfigmap", "namespace": "default"}, "data": data})
}

#[test]
fn field_overrider_documented_yaml_example() {
    let object = configmap(json!({"config.yaml": "app:\n  database:\n    port: 5432\n"}));
    let out = run(
        &object,
        json!({"fieldOverrider": [{"fieldPath": "/data/config.yaml",
            "yaml": [{"subPath": "/app/database/port", "operator": "replace", "value": "3306"}]}]}),
    )
    .unwrap();
    // The value is the string "3306", as the example writes it.
    assert_eq!(
        out["data"]["config.yaml"],
        "app:\n  database:\n    port: '3306'\n"
    );
}

#[test]
fn field_overrider_json_operations() {
    let object =
        configmap(json!({"config.json": "{\"db\": {\"port\": 5432, \"host\": \"db\"}, \"debug\": true}"}));
    let out = run(
        &object,
        json!({"fieldOverrider": [{"fieldPath": "/data/config.json", "json": [
            {"subPath": "/db/port", "operator": "replace", "value": 3306},
            {"subPath": "/debug", "operator": "remove"},
            {"subPath": "/db/replicas", "operator": "add", "value": [1, 2]},
        ]}]}),
    )
    .unwrap();
    assert_eq!(
        out["data"]["config.json"],
        r#"{"db":{"port":3306,"host":"db","replicas":[1,2]}}"#
    );
    // Several field overriders, each on its own field, apply in order.
    let object = configmap(json!({"a.json": "{\"x\":1}", "b.yaml": "y: 1\n"}));
    let out = run(
        &object,
        json!({"fieldOverrider": [
            {"fieldPath": "/data/a.json", "json": [{"subPath": "/x", "operator": "replace", "value": 2}]},
            {"fieldPath": "/data/b.yaml", "yaml": [{"subPath": "/z", "operator": "add", "value": {"k": "v"}}]},
        ]}),
    )
    .unwrap();
    assert_eq!(
        out["data"],
        json!({"a.json": "{\"x\":2}", "b.yaml": "y: 1\nz:\n  k: v\n"})
    );
}

#[test]
fn field_overrider_errors() {
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            configmap(json!({"config.yaml": "a: 1\n"})),
            json!({"fieldPath": "/data/other.yaml", "yaml": [{"subPath": "/a", "operator": "remove"}]}),
            "cannot read fieldPath \"/data/other.yaml\": object has no key \"other.yaml\"",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}}),
            json!({"fieldPath": "/spec/replicas", "yaml": [{"subPath": "/a", "operator": "remove"}]}),
            "the value at fieldPath \"/spec/replicas\" is a number, not a string",
        ),
        (
            configmap(json!({"config.yaml": "a: 1\n"})),
            json!({"fieldPath": "/data/config.yaml", "yaml": [{"subPath": "/b", "operator": "remove"}]}),
            "error in remove for path: '/b': unable to remove nonexistent key: b: missing value",
        ),
        (
            configmap(json!({"config.json": "{not json"})),
            json!({"fieldPath": "/data/config.json", "json": [{"subPath": "/a", "operator": "remove"}]}),
            "the field does not hold JSON: invalid JSON at byte 1: expected a member name",
        ),
        (
            configmap(json!({"config.yaml": "plain text"})),
            json!({"fieldPath": "/data/config.yaml", "yaml": [{"subPath": "/a", "operator": "add", "value": 1}]}),
            "the YAML document is a string, not an object or a list",
        ),
    ];
    for (object, overrider, message) in cases {
        let error = run(&object, json!({"fieldOverrider": [overrider.clone()]})).unwrap_err();
        assert_eq!(
            error,
            ("fieldOverrider[0]".to_owned(), message.to_owned()),
            "{overrider}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// plaintext
// ------------------------------------------------------------------------------------------

#[test]
fn plaintext_documented_examples() {
    // Example 1: replace configmap data.
    let out = run(
        &configmap(json!({"example": "1"})),
        json!({"plaintext": [{"path": "/data/example", "operator": "replace", "value": "2"}]}),
    )
    .unwrap();
    assert_eq!(out["data"], json!({"example": "2"}));
    // Example 2: add/replace/remove container env.
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "myapp"},
        "spec": {"template": {"spec": {"containers": [{"env": [
            {"name": "region", "value": "region1"}, {"name": "zone", "value": "zone1"}]}]}}}});
    let out = run(
        &object,
        json!({"plaintext": [
            {"path": "/spec/template/spec/containers/0/env/-", "operator": "add", "value": {"name": "cluster", "value": "cluster1"}},
            {"path": "/spec/template/spec/containers/0/env/0", "operator": "add", "value": {"name": "provider", "value": "provider1"}},
            {"path": "/spec/template/spec/containers/0/env/1", "operator": "replace", "value": {"name": "region", "value": "region2"}},
            {"path": "/spec/template/spec/containers/0/env/2", "operator": "remove"},
        ]}),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([
            {"name": "provider", "value": "provider1"},
            {"name": "region", "value": "region2"},
            {"name": "cluster", "value": "cluster1"},
        ])
    );
}

#[test]
fn plaintext_failures_name_the_operation_and_change_nothing() {
    let object = configmap(json!({"a": "1"}));
    let error = run(
        &object,
        json!({"plaintext": [
            {"path": "/data/b", "operator": "add", "value": "2"},
            {"path": "/data/missing", "operator": "remove"},
        ]}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        (
            "plaintext[1]".to_owned(),
            "error in remove for path: '/data/missing': unable to remove nonexistent key: missing: missing value"
                .to_owned()
        )
    );
    let error = run(
        &object,
        json!({"plaintext": [{"path": "/spec/template/x", "operator": "add", "value": 1}]}),
    )
    .unwrap_err();
    assert_eq!(
        error.1,
        "add operation does not apply: doc is missing path: \"/spec/template/x\": missing value"
    );
}

#[test]
fn overriders_apply_in_karmadas_order() {
    // plaintext runs last: it sees the image the image overrider wrote and the label the
    // labels overrider added.
    let object = deployment(json!([{"name": "c", "image": "app:1"}]));
    let out = run(
        &object,
        json!({
            "plaintext": [
                {"path": "/spec/template/spec/containers/0/image", "operator": "replace", "value": "final:9"},
                {"path": "/metadata/labels/added", "operator": "replace", "value": "by-plaintext"},
            ],
            "imageOverrider": [{"component": "Tag", "operator": "replace", "value": "2"}],
            "labelsOverrider": [{"operator": "add", "value": {"added": "by-labels"}}],
        }),
    )
    .unwrap();
    assert_eq!(images(&out, "/spec/template/spec/containers"), vec!["final:9"]);
    assert_eq!(out["metadata"]["labels"]["added"], "by-plaintext");
    // A failing overrider discards the whole rule, including earlier overriders.
    let error = run(
        &object,
        json!({
            "imageOverrider": [{"component": "Tag", "operator": "replace", "value": "2"}],
            "plaintext": [{"path": "/nope/x", "operator": "remove"}],
        }),
    )
    .unwrap_err();
    assert_eq!(error.0, "plaintext[0]");
}

// ------------------------------------------------------------------------------------------
// render: policies, order, clusters, failures, records
// ------------------------------------------------------------------------------------------

fn policy(kind: OverridePolicyKind, name: &str, spec: Value) -> PolicySource {
    PolicySource {
        kind,
        namespace: (kind == OverridePolicyKind::OverridePolicy).then(|| "default".to_owned()),
        name: name.to_owned(),
        spec: serde_json::from_value::<OverrideSpec>(spec).unwrap(),
    }
}

fn op(name: &str, spec: Value) -> PolicySource {
    policy(OverridePolicyKind::OverridePolicy, name, spec)
}

fn cop(name: &str, spec: Value) -> PolicySource {
    policy(OverridePolicyKind::ClusterOverridePolicy, name, spec)
}

fn set_label(value: &str) -> Value {
    json!({"overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"winner": value}}]}}]})
}

fn nginx() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"replicas": 1}})
}

fn member(name: &str) -> ClusterFacts {
    ClusterFacts {
        name: name.to_owned(),
        labels: [(
            "env".to_owned(),
            if name == "member1" { "prod" } else { "dev" }.to_owned(),
        )]
        .into(),
        provider: Some("aws".into()),
        region: Some(
            if name == "member1" {
                "cn-north-1"
            } else {
                "us-east-1"
            }
            .into(),
        ),
        zones: vec![],
    }
}

fn with_selectors(mut spec: Value, selectors: Value) -> Value {
    spec["resourceSelectors"] = selectors;
    spec
}

#[test]
fn the_most_specific_policy_applies_last_and_wins() {
    let by_kind = json!([{"apiVersion": "apps/v1", "kind": "Deployment"}]);
    let by_labels = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "nginx"}}}]);
    let by_name = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}]);
    let cases = [
        (
            vec![
                op("a-name", with_selectors(set_label("name"), by_name.clone())),
                op("z-kind", with_selectors(set_label("kind"), by_kind.clone())),
            ],
            "name",
        ),
        (
            vec![
                op("a-labels", with_selectors(set_label("labels"), by_labels.clone())),
                op("z-all", set_label("all")),
            ],
            "labels",
        ),
        (
            vec![
                op("a-name", with_selectors(set_label("name"), by_name.clone())),
                op("b-labels", with_selectors(set_label("labels"), by_labels.clone())),
            ],
            "name",
        ),
        // Equal specificity: by name, the last name wins.
        (
            vec![
                op("b", with_selectors(set_label("b"), by_kind.clone())),
                op("a", with_selectors(set_label("a"), by_kind.clone())),
            ],
            "b",
        ),
        // An OverridePolicy applies after every ClusterOverridePolicy, however specific.
        (
            vec![
                op("z-kind", with_selectors(set_label("op"), by_kind.clone())),
                cop("a-name", with_selectors(set_label("cop"), by_name.clone())),
            ],
            "op",
        ),
    ];
    for (policies, winner) in cases {
        let rendered = render(&nginx(), &member("member1"), &policies);
        assert_eq!(
            rendered.manifest["metadata"]["labels"]["winner"], winner,
            "{policies:?}"
        );
        assert!(rendered.failures.is_empty());
    }
}

#[test]
fn override_policies_are_selected_after_cluster_override_policies_applied() {
    // The ClusterOverridePolicy adds the label the OverridePolicy selects by.
    let policies = [
        cop(
            "add-tier",
            json!({"overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"tier": "web"}}]}}]}),
        ),
        op(
            "by-tier",
            with_selectors(
                set_label("by-tier"),
                json!([{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"tier": "web"}}}]),
            ),
        ),
    ];
    let rendered = render(&nginx(), &member("member1"), &policies);
    assert_eq!(rendered.manifest["metadata"]["labels"]["winner"], "by-tier");
}

#[test]
fn policies_that_do_not_select_the_object_do_not_apply() {
    let policies = [
        op(
            "other-kind",
            with_selectors(set_label("x"), json!([{"apiVersion": "v1", "kind": "Service"}])),
        ),
        op(
            "other-name",
            with_selectors(
                set_label("x"),
                json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]),
            ),
        ),
        PolicySource {
            namespace: Some("elsewhere".into()),
            ..op("other-namespace", set_label("x"))
        },
    ];
    let rendered = render(&nginx(), &member("member1"), &policies);
    assert_eq!(rendered.manifest, nginx());
    assert_eq!(rendered.applied_overrides, None);
    assert_eq!(rendered.applied_cluster_overrides, None);
    // OverridePolicies never apply to cluster-scoped objects; ClusterOverridePolicies do.
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    let rendered = render(
        &namespace,
        &member("member1"),
        &[op("op", set_label("op")), cop("cop", set_label("cop"))],
    );
    assert_eq!(rendered.manifest["metadata"]["labels"]["winner"], "cop");
    assert!(rendered.applied_overrides.is_none());
}

#[test]
fn rules_apply_per_target_cluster() {
    let rule = |target: Value, value: &str| json!({"targetCluster": target, "overriders": {"annotationsOverrider": [{"operator": "add", "value": {value: "yes"}}]}});
    let policy = op(
        "targets",
        json!({"overrideRules": [
            rule(json!({"clusterNames": ["member1"]}), "names"),
            rule(json!({"labelSelector": {"matchLabels": {"env": "dev"}}}), "labels"),
            rule(json!({"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["cn-north-1"]}]}}), "fields"),
            rule(json!({"exclude": ["member1"]}), "exclude"),
            {"overriders": {"annotationsOverrider": [{"operator": "add", "value": {"every": "yes"}}]}},
        ]}),
    );
    let annotations = |cluster: &str| {
        let rendered = render(&nginx(), &member(cluster), std::slice::from_ref(&policy));
        let mut keys: Vec<String> = rendered.manifest["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(annotations("member1"), vec!["every", "fields", "names"]);
    assert_eq!(annotations("member2"), vec!["every", "exclude", "labels"]);
}

#[test]
fn the_deprecated_form_is_one_rule() {
    let policy = op(
        "old",
        json!({"targetCluster": {"clusterNames": ["member2"]},
               "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 5}]}}),
    );
    let m1 = render(&nginx(), &member("member1"), std::slice::from_ref(&policy));
    let m2 = render(&nginx(), &member("member2"), std::slice::from_ref(&policy));
    assert_eq!(m1.manifest["spec"]["replicas"], 1);
    assert_eq!(m2.manifest["spec"]["replicas"], 5);
    assert_eq!(
        m2.applied_overrides.as_deref(),
        Some(
            r#"[{"policyName":"old","overriders":{"plaintext":[{"path":"/spec/replicas","operator":"replace","value":5}]}}]"#
        )
    );
    // A failure in the deprecated form names spec.overriders.
    let broken = op(
        "old",
        json!({"overriders": {"plaintext": [{"path": "/spec/nope/x", "operator": "remove"}]}}),
    );
    let rendered = render(&nginx(), &member("member1"), &[broken]);
    assert_eq!(
        rendered.failures[0].to_string(),
        "OverridePolicy default/old spec.overriders.plaintext[0]: remove operation does not apply: doc is missing path: \"/spec/nope/x\": missing value"
    );
}

#[test]
fn a_failing_rule_is_skipped_and_the_rest_applies() {
    let policies = [
        cop(
            "first",
            json!({"overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"cop": "yes"}}]}}]}),
        ),
        op(
            "mixed",
            json!({"overrideRules": [
                {"overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 3}]}},
                {"overriders": {
                    "labelsOverrider": [{"operator": "add", "value": {"half": "applied"}}],
                    "plaintext": [{"path": "/metadata/annotations/missing", "operator": "remove"}],
                }},
                {"overriders": {"imageOverrider": [{"predicate": {"path": "/spec/nothing/image"}, "component": "Tag", "operator": "remove"}]}},
                {"overriders": {"labelsOverrider": [{"operator": "add", "value": {"last": "yes"}}]}},
            ]}),
        ),
    ];
    let rendered = render(&nginx(), &member("member1"), &policies);
    assert_eq!(rendered.manifest["spec"]["replicas"], 3);
    assert_eq!(
        rendered.manifest["metadata"]["labels"],
        json!({"app": "nginx", "cop": "yes", "last": "yes"})
    );
    assert_eq!(
        rendered.failures,
        vec![
            RuleFailure {
                policy: "OverridePolicy default/mixed".into(),
                rule: "spec.overrideRules[1]".into(),
                overrider: "plaintext[0]".into(),
                message: "remove operation does not apply: doc is missing path: \"/metadata/annotations/missing\": missing value".into(),
            },
            RuleFailure {
                policy: "OverridePolicy default/mixed".into(),
                rule: "spec.overrideRules[2]".into(),
                overrider: "imageOverrider[0]".into(),
                message: "cannot read the image at predicate path \"/spec/nothing/image\": \"nothing\" does not exist".into(),
            },
        ]
    );
    // Only the rules that applied are recorded, in Karmada's format.
    assert_eq!(
        rendered.applied_overrides.as_deref(),
        Some(concat!(
            r#"[{"policyName":"mixed","overriders":{"plaintext":[{"path":"/spec/replicas","operator":"replace","value":3}]}},"#,
            r#"{"policyName":"mixed","overriders":{"labelsOverrider":[{"operator":"add","value":{"last":"yes"}}]}}]"#
        ))
    );
    assert_eq!(
        rendered.applied_cluster_overrides.as_deref(),
        Some(
            r#"[{"policyName":"first","overriders":{"labelsOverrider":[{"operator":"add","value":{"cop":"yes"}}]}}]"#
        )
    );
}

#[test]
fn a_rule_can_fail_in_one_cluster_only() {
    // The ClusterOverridePolicy adds an annotation in member1 only; the OverridePolicy removes
    // it, which fails where it was never added.
    let policies = [
        cop(
            "add",
            json!({"overrideRules": [{"targetCluster": {"clusterNames": ["member1"]},
                "overriders": {"annotationsOverrider": [{"operator": "add", "value": {"x": "1"}}]}}]}),
        ),
        op(
            "remove",
            json!({"overrideRules": [{"overriders": {"plaintext": [{"path": "/metadata/annotations/x", "operator": "remove"}]}}]}),
        ),
    ];
    let m1 = render(&nginx(), &member("member1"), &policies);
    assert!(m1.failures.is_empty());
    assert_eq!(m1.manifest["metadata"].get("annotations"), Some(&json!({})));
    let m2 = render(&nginx(), &member("member2"), &policies);
    assert_eq!(m2.failures.len(), 1);
    assert_eq!(m2.failures[0].policy, "OverridePolicy default/remove");
    assert_eq!(m2.manifest, nginx());
}
