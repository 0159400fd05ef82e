//! CustomResourceDefinitions: serving (namespaced and cluster scope, several versions), the
//! status and scale subresources, printer columns, schema validation, pruning and defaulting,
//! strict field validation, kubectl explain, deletion of a CRD removing its objects, and
//! flotilla's admission for Karmada kinds.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use serde_json::{Value, json};

use common::{Server, eventually, namespace, rand_suffix, shared};

const WAIT: Duration = Duration::from_secs(20);

fn widget_crd(group: &str, scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wdg"], "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                    ],
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "description": "A Widget for tests.",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What the widget should be.",
                                "properties": {
                                    "size": {"type": "integer", "minimum": 0, "description": "How many parts."},
                                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
                                },
                                "required": ["size"]
                            },
                            "status": {"type": "object", "properties": {"size": {"type": "integer"}, "phase": {"type": "string"}}}
                        }
                    }}
                },
                {
                    "name": "v1beta1", "served": true, "storage": false,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                }
            ]
        }
    })
}

async fn install(client: &kube::Client, crd: Value) -> String {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let created = api.create(&PostParams::default(), &crd).await.unwrap();
    let name = created.metadata.name.unwrap();
    let conditions = created.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    name
}

fn widgets(client: &kube::Client, group: &str, version: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "Widget"), "widgets");
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn widget(group: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": name}, "spec": spec})).unwrap()
}

fn status_of(e: kube::Error) -> (u16, String, String, Value) {
    match e {
        kube::Error::Api(s) => {
            let details = serde_json::to_value(&s.details).unwrap_or(Value::Null);
            (s.code, s.reason.clone(), s.message.clone(), details)
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn crd_serves_versions_validates_prunes_defaults_and_subresources() {
    let server = shared();
    let client = server.client().await;
    let group = format!("t{}.example.com", rand_suffix());
    install(&client, widget_crd(&group, "Namespaced")).await;
    let ns = namespace(&client, "widgets").await;
    let api = widgets(&client, &group, "v1", Some(&ns));

    // Defaulting and pruning (with the unknown field reported as a warning, not stored).
    let created = api
        .create(
            &PostParams::default(),
            &widget(
                &group,
                "w1",
                json!({"size": 2, "bogus": true, "extra": {"free": {"form": 1}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["color"], "red");
    assert!(created.data["spec"].get("bogus").is_none());
    assert_eq!(created.data["spec"]["extra"]["free"]["form"], 1);
    assert_eq!(created.metadata.generation, Some(1));

    // Schema validation: 422 with causes.
    let err = api
        .create(
            &PostParams::default(),
            &widget(&group, "bad", json!({"size": -1, "color": "green"})),
        )
        .await
        .unwrap_err();
    let (code, reason, message, details) = status_of(err);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        message.starts_with(&format!("Widget.{group} \"bad\" is invalid")),
        "{message}"
    );
    let fields: Vec<&str> = details["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"spec.size") && fields.contains(&"spec.color"),
        "{details}"
    );
    let err = api
        .create(&PostParams::default(), &widget(&group, "missing", json!({})))
        .await
        .unwrap_err();
    assert_eq!(status_of(err).0, 422);

    // Strict field validation rejects unknown fields with 400.
    let req = http::Request::post(format!("/apis/{group}/v1/namespaces/{ns}/widgets?fieldValidation=Strict"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "strict"}, "spec": {"size": 1, "nope": 1}})).unwrap())
        .unwrap();
    let err = client.request::<Value>(req).await.unwrap_err();
    let (code, reason, message, _) = status_of(err);
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    assert_eq!(message, "strict decoding error: unknown field \"spec.nope\"");

    // Status subresource: the main resource ignores status; /status ignores spec.
    let pp = PatchParams::default();
    let w = api
        .patch("w1", &pp, &Patch::Merge(json!({"status": {"phase": "Ready"}})))
        .await
        .unwrap();
    assert!(w.data.get("status").is_none());
    let w = api
        .patch_status(
            "w1",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Ready", "size": 2}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"]["phase"], "Ready");
    assert_eq!(w.data["spec"]["size"], 2);
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );
    let w = api
        .patch("w1", &pp, &Patch::Merge(json!({"spec": {"size": 3}})))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(2));
    // Updates of custom resources need a resourceVersion.
    let mut unconditional = w.clone();
    unconditional.metadata.resource_version = None;
    let err = api
        .replace("w1", &PostParams::default(), &unconditional)
        .await
        .unwrap_err();
    assert_eq!(status_of(err).0, 422);

    // Scale subresource.
    let scale = api.get_scale("w1").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    api.patch_scale("w1", &pp, &Patch::Merge(json!({"spec": {"replicas": 5}})))
        .await
        .unwrap();
    assert_eq!(api.get("w1").await.unwrap().data["spec"]["size"], 5);

    // Every served version reads the same object, with its own apiVersion.
    let beta = widgets(&client, &group, "v1beta1", Some(&ns));
    let got = beta.get("w1").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, format!("{group}/v1beta1"));
    assert_eq!(got.data["spec"]["size"], 5);

    // Strategic merge patch is not supported for custom resources (415).
    let req = http::Request::patch(format!("/apis/{group}/v1/namespaces/{ns}/widgets/w1"))
        .header("Content-Type", "application/strategic-merge-patch+json")
        .body(br#"{"spec":{"size":1}}"#.to_vec())
        .unwrap();
    let err = client.request::<Value>(req).await.unwrap_err();
    assert_eq!(status_of(err).1, "UnsupportedMediaType");

    // Table output uses the printer columns.
    let req = http::Request::get(format!("/apis/{group}/v1/namespaces/{ns}/widgets"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Size", "Color", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "w1");
    assert_eq!(table["rows"][0]["cells"][1], 5);
    assert_eq!(table["rows"][0]["cells"][2], "red");
}

/// A status merge patch (what the services send for Works and bindings) is applied without
/// decoding the rest of the object: the answer, a GET and the watch event must still carry
/// the spec exactly as it was created, and every check of a status write still holds.
#[tokio::test]
async fn status_patches_leave_the_rest_of_a_custom_resource_as_stored() {
    use futures::StreamExt;
    use kube::api::WatchEvent;
    use kube::api::WatchParams;

    let server = shared();
    let client = server.client().await;
    let group = format!("s{}.example.com", rand_suffix());
    let crd_name = install(&client, widget_crd(&group, "Namespaced")).await;
    let ns = namespace(&client, "status-writes").await;
    let api = widgets(&client, &group, "v1", Some(&ns));
    let spec = json!({"size": 2, "color": "blue", "tags": ["a", "b"],
        "extra": {"text": "quote \" backslash \\ line\nbreak é \u{1F600}", "n": [1.5, -2, null, true], "deep": {"x": {}}}});
    let mut w = widget(&group, "w", spec.clone());
    w.metadata.labels = Some([("app".to_owned(), "w".to_owned())].into());
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.data["spec"], spec);
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut events = api
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();

    let pp = PatchParams::default();
    let status = json!({"phase": "Ready", "size": 2});
    let written = api
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "status": status})),
        )
        .await
        .unwrap();
    assert_eq!(
        written.data["spec"], spec,
        "the answer carries the spec as stored"
    );
    assert_eq!(written.data["status"], status);
    assert_eq!(written.metadata.labels, created.metadata.labels);
    assert_eq!(written.metadata.generation, Some(1));
    assert_eq!(written.metadata.uid, created.metadata.uid);
    let new_rv = written.metadata.resource_version.clone().unwrap();
    assert_ne!(new_rv, rv);
    let status_entry = written
        .metadata
        .managed_fields
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.subresource.as_deref() == Some("status"))
        .expect("a managedFields entry for the status write");
    assert_eq!(status_entry.operation.as_deref(), Some("Update"));
    let owned = serde_json::to_value(&status_entry.fields_v1).unwrap();
    assert!(owned["f:status"]["f:phase"].is_object(), "{owned}");
    assert!(owned.get("f:spec").is_none(), "{owned}");
    // The creator keeps what it owned: the spec was left out of the comparison, not removed.
    let creator = |obj: &DynamicObject| {
        obj.metadata
            .managed_fields
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.subresource.is_none())
            .map(|e| serde_json::to_value(&e.fields_v1).unwrap())
    };
    let before = creator(&created).expect("the create's managedFields entry");
    assert!(before["f:spec"]["f:size"].is_object(), "{before}");
    assert_eq!(creator(&written), Some(before));

    let got = api.get("w").await.unwrap();
    assert_eq!(got.data, written.data);
    assert_eq!(got.metadata.resource_version.as_deref(), Some(new_rv.as_str()));
    let event = tokio::time::timeout(WAIT, events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Modified(obj) => {
            assert_eq!(obj.data["spec"], spec, "the watch event carries the spec");
            assert_eq!(obj.data["status"], status);
            assert_eq!(obj.metadata.resource_version.as_deref(), Some(new_rv.as_str()));
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    // The same status again stores nothing new.
    let again = api
        .patch_status("w", &pp, &Patch::Merge(json!({"status": status})))
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version.as_deref(), Some(new_rv.as_str()));
    assert_eq!(again.data["spec"], spec);

    // A stale resourceVersion is a conflict; a status the schema rejects is 422 naming the
    // field. Neither changes the object.
    let err = api
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "status": {"phase": "Stale"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(err).0, 409);
    let err = api
        .patch_status("w", &pp, &Patch::Merge(json!({"status": {"size": "big"}})))
        .await
        .unwrap_err();
    let (code, reason, _, details) = status_of(err);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(details["causes"][0]["field"], "status.size", "{details}");
    // A dry run answers with the whole object it would store, and stores nothing.
    let dry = api
        .patch_status(
            "w",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"status": {"phase": "Dry"}})),
        )
        .await
        .unwrap();
    assert_eq!(dry.data["spec"], spec);
    assert_eq!(dry.data["status"]["phase"], "Dry");
    let got = api.get("w").await.unwrap();
    assert_eq!(got.metadata.resource_version.as_deref(), Some(new_rv.as_str()));
    assert_eq!(got.data, written.data);

    // As in kube-apiserver, a status write validates the status only: an object whose stored
    // spec a later schema rejects still takes status writes, and keeps its spec.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &crd_name,
        &pp,
        &Patch::<Value>::Json(
            serde_json::from_value(json!([{"op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/maximum",
                "value": 1}]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    eventually("the stricter schema to be served", WAIT, || async {
        let err = api
            .create(
                &PostParams::default(),
                &widget(&group, "probe", json!({"size": 2})),
            )
            .await
            .err()?;
        (status_of(err).0 == 422).then_some(())
    })
    .await;
    let written = api
        .patch_status("w", &pp, &Patch::Merge(json!({"status": {"phase": "Degraded"}})))
        .await
        .unwrap();
    assert_eq!(written.data["status"]["phase"], "Degraded");
    assert_eq!(written.data["spec"], spec);
    // The main resource is still validated whole.
    let err = api
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"color": "red"}})))
        .await
        .unwrap_err();
    assert_eq!(status_of(err).0, 422);
    assert_eq!(api.get("w").await.unwrap().data["spec"], spec);
}

#[tokio::test]
async fn kubectl_works_with_custom_resources() {
    let server = shared();
    let client = server.client().await;
    let group = format!("k{}.example.com", rand_suffix());
    install(&client, widget_crd(&group, "Cluster")).await;
    let yaml = format!(
        "apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: cw}}\nspec: {{size: 4, color: blue}}\n"
    );
    for kubectl in [
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    ] {
        server
            .kubectl_with(kubectl, &["apply", "-f", "-"], Some(&yaml))
            .success();
        let out = server.kubectl_with(kubectl, &["get", &format!("widgets.{group}")], None);
        let text = out.success();
        let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, vec!["NAME", "SIZE", "COLOR", "AGE"], "{kubectl}: {text}");
        assert!(text.lines().nth(1).unwrap().starts_with("cw"), "{text}");
        let explain = server.kubectl_with(kubectl, &["explain", &format!("widgets.{group}.spec.size")], None);
        assert!(
            explain.success().contains("How many parts."),
            "{kubectl}: {}",
            explain.stdout
        );
        server
            .kubectl_with(
                kubectl,
                &[
                    "patch",
                    &format!("widget.{group}"),
                    "cw",
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"size":6}}"#,
                ],
                None,
            )
            .success();
        let bad = server.kubectl_with(
            kubectl,
            &["apply", "-f", "-"],
            Some(&format!(
                "apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: cw2}}\nspec: {{size: 1, wrong: x}}\n"
            )),
        );
        assert!(
            bad.failure().contains("unknown field \"spec.wrong\""),
            "{kubectl}: {}",
            bad.stderr
        );
        server
            .kubectl_with(kubectl, &["delete", &format!("widgets.{group}"), "cw"], None)
            .success();
    }
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_stops_serving() {
    let server = shared();
    let client = server.client().await;
    let group = format!("d{}.example.com", rand_suffix());
    let name = install(&client, widget_crd(&group, "Namespaced")).await;
    let ns = namespace(&client, "crddel").await;
    let api = widgets(&client, &group, "v1", Some(&ns));
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &widget(&group, &format!("x{i}"), json!({"size": i})),
        )
        .await
        .unwrap();
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("CRD deleted", WAIT, || {
        let crds = crds.clone();
        let name = name.clone();
        async move { crds.get_opt(&name).await.unwrap().is_none().then_some(()) }
    })
    .await;
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(status_of(err).0, 404);
    // Re-creating the CRD serves an empty collection: the objects are gone for good.
    install(&client, widget_crd(&group, "Namespaced")).await;
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn karmada_kinds_get_flotilla_admission() {
    let server = shared();
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in flotilla_api_crds() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {}
            Err(e) => panic!("installing {:?}: {e}", crd.metadata.name),
        }
    }
    let ns = namespace(&client, "karmada").await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("policy.karmada.io", "v1alpha1", "PropagationPolicy"),
        "propagationpolicies",
    );
    let pps: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "bad"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "elsewhere"}]}
    }))
    .unwrap();
    let (code, reason, message, details) =
        status_of(pps.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        message.contains("PropagationPolicy.policy.karmada.io \"bad\" is invalid"),
        "{message}"
    );
    assert_eq!(
        details["causes"][0]["field"],
        "spec.resourceSelectors[0].namespace"
    );
    let good: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "good"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}
    }))
    .unwrap();
    pps.create(&PostParams::default(), &good).await.unwrap();
    // Updates are admitted too.
    let err = pps
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resourceSelectors": []}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(err).0, 422);
}

fn flotilla_api_crds() -> Vec<CustomResourceDefinition> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        // deploy/crds also holds the kustomize `Kustomization` file.
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        out.push(serde_yaml::from_str(&text).unwrap());
    }
    out
}

#[test]
fn server_side_apply_with_kubectl_conflicts_and_force() {
    let server: &Server = shared();
    let ns = format!("ssa-{}", rand_suffix());
    server
        .kubectl_stdin(
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"),
        )
        .success();
    let deploy = |replicas: u32, image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: c, image: {image}}}]\n"
        )
    };
    for kubectl in [
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    ] {
        let out = server.kubectl_with(
            kubectl,
            &["apply", "--server-side", "-f", "-"],
            Some(&deploy(2, "nginx:1")),
        );
        assert!(
            out.success().contains("serverside-applied"),
            "{kubectl}: {}",
            out.stdout
        );
        let managers = server
            .kubectl_with(
                kubectl,
                &[
                    "get",
                    "deploy",
                    "web",
                    "-n",
                    &ns,
                    "-o",
                    "jsonpath={.metadata.managedFields[*].manager}",
                ],
                None,
            )
            .success()
            .to_owned();
        assert!(managers.contains("kubectl"), "{managers}");
        // Another manager takes spec.replicas.
        server
            .kubectl_with(
                kubectl,
                &["scale", "deploy", "web", "-n", &ns, "--replicas=5"],
                None,
            )
            .success();
        let conflict = server.kubectl_with(
            kubectl,
            &["apply", "--server-side", "-f", "-"],
            Some(&deploy(3, "nginx:1")),
        );
        let err = conflict.failure();
        assert!(
            err.contains("conflict") && err.contains(".spec.replicas"),
            "{kubectl}: {err}"
        );
        server
            .kubectl_with(
                kubectl,
                &["apply", "--server-side", "--force-conflicts", "-f", "-"],
                Some(&deploy(3, "nginx:2")),
            )
            .success();
        let got = server
            .kubectl_with(
                kubectl,
                &[
                    "get",
                    "deploy",
                    "web",
                    "-n",
                    &ns,
                    "-o",
                    "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
                ],
                None,
            )
            .success()
            .to_owned();
        assert_eq!(got, "3 nginx:2");
        server
            .kubectl_with(kubectl, &["delete", "deploy", "web", "-n", &ns], None)
            .success();
    }
    server.kubectl(&["delete", "namespace", &ns]).success();
}

#[test]
fn kubectl_edit_through_an_editor_script() {
    let server = shared();
    let ns = format!("edit-{}", rand_suffix());
    server
        .kubectl_stdin(
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"),
        )
        .success();
    server
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg, namespace: {ns}}}\ndata: {{color: blue}}\n"),
        )
        .success();
    let editor = server.dir.join(format!("editor-{}.sh", rand_suffix()));
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/color: blue/color: green/' \"$1\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &server.kubeconfig)
        .env("KUBE_EDITOR", &editor)
        .args(["edit", "configmap", "cfg", "-n", &ns])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = server
        .kubectl(&["get", "cm", "cfg", "-n", &ns, "-o", "jsonpath={.data.color}"])
        .success()
        .to_owned();
    assert_eq!(got, "green");
    server.kubectl(&["delete", "namespace", &ns]).success();
}
