//! What end-to-end tests apply and look at: applying YAML the way `kubectl apply
//! --server-side` does (any kind, resolved through discovery), building the usual templates,
//! and reading objects back from the control plane or a member.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Api, Client};
use serde_json::Value;

use crate::wait::{eventually, wait_until};

/// The field manager tests apply as.
pub const MANAGER: &str = "e2e-user";

/// How long an e2e wait lasts before it fails the test. Generous: CI runs every test binary on
/// two cores, each with a whole installation.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until ResourceBinding `namespace`/`name` says `FullyApplied=True` for its generation.
pub async fn wait_fully_applied(client: &Client, namespace: &str, name: &str, what: &str, timeout: Duration) {
    let api = Api::<flotilla_api::ResourceBinding>::namespaced(client.clone(), namespace);
    wait_until(what, timeout, || {
        let api = api.clone();
        async move {
            let binding = api.get_opt(name).await.ok()??;
            let condition = binding
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == "FullyApplied")?;
            (condition.status == "True" && condition.observed_generation == binding.metadata.generation)
                .then_some(())
        }
    })
    .await;
}

/// Resolves the API of `object` (by its apiVersion/kind and namespace) through discovery.
pub async fn api_for(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps): (ApiResource, ApiCapabilities) = discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discovery of {api_version} {kind}: {e}"));
    match caps.scope {
        Scope::Namespaced => {
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    }
}

/// Parses one or more YAML documents into JSON objects.
pub fn documents(yaml: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("bad test YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Server-side applies every document of `yaml` (forcing conflicts, as `kubectl apply
/// --server-side --force-conflicts`), returning the stored objects.
pub async fn apply(client: &Client, yaml: &str) -> Vec<DynamicObject> {
    let mut out = Vec::new();
    for doc in documents(yaml) {
        out.push(apply_value(client, &doc).await);
    }
    out
}

/// Server-side applies one object.
pub async fn apply_value(client: &Client, object: &Value) -> DynamicObject {
    let api = api_for(client, object).await;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("apply {} {name}: {e}", object["kind"]))
}

/// Applies `yaml` and returns the error instead of panicking (for bad-input tests).
pub async fn try_apply(client: &Client, yaml: &str) -> Result<(), kube::Error> {
    for doc in documents(yaml) {
        let api = api_for(client, &doc).await;
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&doc))
            .await?;
    }
    Ok(())
}

/// Deletes every object named in `yaml` (missing ones are fine).
pub async fn delete(client: &Client, yaml: &str) {
    for doc in documents(yaml) {
        let api = api_for(client, &doc).await;
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("delete {} {name}: {e}", doc["kind"]),
        }
    }
}

/// Reads the object `apiVersion`/`kind` `namespace`/`name` (namespace ignored for cluster
/// scope); `None` when it does not exist.
pub async fn get(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<DynamicObject> {
    let probe = serde_json::json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": namespace.unwrap_or("default")},
    });
    let api = api_for(client, &probe).await;
    match api.get(name).await {
        Ok(o) => Some(o),
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => panic!("get {kind} {name}: {e}"),
    }
}

/// A Deployment template with one container `app` running `image`.
pub fn deployment_yaml(namespace: &str, name: &str, replicas: i32, image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
  labels:
    app: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: app
        image: {image}
"#
    )
}

/// The member's Deployment `namespace/name`, if present.
pub async fn member_deployment(member: &Client, namespace: &str, name: &str) -> Option<Deployment> {
    let api: Api<Deployment> = Api::namespaced(member.clone(), namespace);
    match api.get(name).await {
        Ok(d) => Some(d),
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => panic!("get member deployment {namespace}/{name}: {e}"),
    }
}

/// The first container's image of a Deployment.
pub fn image_of(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

/// `spec.replicas` of a Deployment.
pub fn replicas_of(deployment: &Deployment) -> Option<i32> {
    deployment.spec.as_ref()?.replicas
}

/// Waits until `member` has the Deployment and `check` accepts it; returns it.
pub async fn wait_member_deployment(
    member: &Client,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Deployment {
    wait_until(what, TIMEOUT, || async {
        member_deployment(member, namespace, name)
            .await
            .filter(|d| check(d))
    })
    .await
}

/// Waits until `member` has no Deployment `namespace/name`.
pub async fn wait_member_deployment_gone(member: &Client, namespace: &str, name: &str, what: &str) {
    eventually(what, TIMEOUT, || async {
        member_deployment(member, namespace, name).await.is_none()
    })
    .await
}

/// Whether a binding, read as `Some(metadata)` or `None` when absent, is deleted as far as a
/// component test without execution can see: gone, or deleting with only execution's finalizer
/// (`karmada.io/binding-controller`, set at creation) left to release it.
pub fn binding_deleted_without_execution(metadata: Option<&ObjectMeta>) -> bool {
    metadata.is_none_or(|m| {
        m.deletion_timestamp.is_some()
            && m.finalizers
                .iter()
                .flatten()
                .all(|f| f == flotilla_api::well_known::BINDING_CONTROLLER_FINALIZER)
    })
}

/// The `status` of condition `type_` in `object.status.conditions`, if present.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The ```` ```yaml ```` blocks of `docs/<file>`, in order, so user-guide examples are applied
/// by tests exactly as written.
pub fn doc_yaml_blocks(file: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match current.as_mut() {
            None if line.trim_start().starts_with("```yaml") => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_start().starts_with("```") => {
                blocks.extend(current.take());
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}
