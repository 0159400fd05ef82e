//! Scaffolding for the distributor's component tests: a control plane with the distributor (and,
//! once it is on main, the scheduler) running as real processes, and helpers that create what
//! the detector and the scheduler would (independent bindings with `spec.clusters`), so the
//! distributor's own contract can be checked on its own.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::well_known::{
    DEPENDENCIES_ANNOTATION, PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
};
use flotilla_api::{
    BindingSnapshot, ClusterResourceBinding, ObjectReference, ResourceBinding, ResourceBindingSpec,
    TargetCluster,
};
use flotilla_e2e::{Env, EnvOptions, Service, wait_until};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Client};
use serde_json::{Value, json};

/// How long a test waits for the distributor to converge.
pub const CONVERGE: Duration = Duration::from_secs(30);

/// Starts a control plane with the distributor and `extra` distributor flags.
pub async fn start(extra: &[&str]) -> Env {
    let mut service_args = BTreeMap::new();
    service_args.insert(
        Service::DependencyDistributor,
        extra.iter().map(|s| (*s).to_owned()).collect(),
    );
    Env::start(EnvOptions {
        members: 3,
        services: vec![Service::DependencyDistributor],
        service_args,
        ..Default::default()
    })
    .await
}

/// Creates any object from its JSON.
pub async fn create(client: &Client, object: Value) -> DynamicObject {
    let api = dynamic(client, &object);
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// Replaces the content of an existing object (read-modify-write).
pub async fn update(client: &Client, object: Value) -> DynamicObject {
    let api = dynamic(client, &object);
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let current = api.get(&name).await.unwrap();
    let mut object: DynamicObject = serde_json::from_value(object).unwrap();
    object.metadata.resource_version = current.metadata.resource_version;
    api.replace(&name, &PostParams::default(), &object).await.unwrap()
}

/// Deletes an object named by its JSON.
pub async fn delete(client: &Client, object: &Value) {
    let api = dynamic(client, object);
    let name = object["metadata"]["name"].as_str().unwrap();
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

fn dynamic(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(group, version, kind));
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// A Deployment in `default` with `pod_spec` (containers default to one nginx).
pub fn deployment(name: &str, mut pod_spec: Value) -> Value {
    if pod_spec.get("containers").is_none() {
        pod_spec["containers"] = json!([{"name": "app", "image": "nginx"}]);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    })
}

/// A ConfigMap in `default`.
pub fn config_map(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"key": value}})
}

/// A Secret in `namespace`.
pub fn secret(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "stringData": {"password": "s3cret"}})
}

/// Target clusters with `replicas` each.
pub fn clusters(names: &[&str], replicas: i32) -> Vec<TargetCluster> {
    names
        .iter()
        .map(|name| TargetCluster {
            name: (*name).to_owned(),
            replicas,
        })
        .collect()
}

/// What the detector writes for a template a policy claims, with the scheduler's result.
pub fn binding_spec(template: &DynamicObject, propagate_deps: bool, on: &[&str]) -> ResourceBindingSpec {
    let types = template.types.clone().unwrap();
    ResourceBindingSpec {
        resource: ObjectReference {
            api_version: types.api_version,
            kind: types.kind,
            namespace: template.metadata.namespace.clone(),
            name: template.metadata.name.clone().unwrap(),
            uid: template.metadata.uid.clone(),
            resource_version: template.metadata.resource_version.clone(),
        },
        propagate_deps,
        clusters: clusters(on, 1),
        ..Default::default()
    }
}

fn claimed_meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        annotations: Some(BTreeMap::from([
            (PROPAGATION_POLICY_NAME_ANNOTATION.to_owned(), "pp".to_owned()),
            (
                PROPAGATION_POLICY_NAMESPACE_ANNOTATION.to_owned(),
                "default".to_owned(),
            ),
        ])),
        ..Default::default()
    }
}

/// Creates the independent ResourceBinding of `template` (as the detector and the scheduler
/// would): `<name>-<kind lower>`, claimed by a policy, scheduled to `on`.
pub async fn bind(
    client: &Client,
    template: &DynamicObject,
    propagate_deps: bool,
    on: &[&str],
) -> ResourceBinding {
    let spec = binding_spec(template, propagate_deps, on);
    let name = format!("{}-{}", spec.resource.name, spec.resource.kind.to_lowercase());
    let namespace = template.metadata.namespace.clone().unwrap();
    let binding = ResourceBinding {
        metadata: claimed_meta(&name, Some(&namespace)),
        spec,
        status: None,
    };
    Api::<ResourceBinding>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap()
}

/// Creates the independent ClusterResourceBinding of a cluster-scoped `template`.
pub async fn bind_cluster(client: &Client, template: &DynamicObject, on: &[&str]) -> ClusterResourceBinding {
    let spec = binding_spec(template, true, on);
    let name = format!("{}-{}", spec.resource.name, spec.resource.kind.to_lowercase());
    let binding = ClusterResourceBinding {
        metadata: claimed_meta(&name, None),
        spec: spec.into(),
        status: None,
    };
    Api::<ClusterResourceBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap()
}

/// Merge-patches a ResourceBinding's spec (as the scheduler or the detector would).
/// Retries on 409: the distributor writes the same object (annotations, requiredBy) and the
/// apiserver may refuse a concurrent unconditional patch.
pub async fn patch_binding_spec(client: &Client, name: &str, spec: Value) {
    let api = Api::<ResourceBinding>::namespaced(client.clone(), "default");
    let patch = json!({"spec": spec});
    wait_until(&format!("patching default/{name}"), CONVERGE, || async {
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Some(()),
            Err(kube::Error::Api(status)) if status.is_conflict() => None,
            Err(error) => panic!("cannot patch default/{name}: {error}"),
        }
    })
    .await;
}

/// Deletes a ResourceBinding in `default`.
pub async fn unbind(client: &Client, name: &str) {
    Api::<ResourceBinding>::namespaced(client.clone(), "default")
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// A ResourceBinding, if it exists.
pub async fn get_binding(client: &Client, namespace: &str, name: &str) -> Option<ResourceBinding> {
    Api::<ResourceBinding>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .unwrap()
}

/// `(namespace, name, cluster names)` of each snapshot.
pub fn snapshots(required_by: &[BindingSnapshot]) -> Vec<(Option<String>, String, Vec<String>)> {
    required_by
        .iter()
        .map(|s| {
            (
                s.namespace.clone(),
                s.name.clone(),
                s.clusters.iter().map(|c| c.name.clone()).collect(),
            )
        })
        .collect()
}

/// `(Some("default"), binding, clusters)`.
pub fn snap(binding: &str, on: &[&str]) -> (Option<String>, String, Vec<String>) {
    (
        Some("default".to_owned()),
        binding.to_owned(),
        on.iter().map(|c| (*c).to_owned()).collect(),
    )
}

/// Waits until the attached binding `namespace/name` exists with exactly `want` snapshots, and
/// returns it.
pub async fn wait_required_by(
    client: &Client,
    namespace: &str,
    name: &str,
    want: Vec<(Option<String>, String, Vec<String>)>,
) -> ResourceBinding {
    let mut last = None;
    let what = format!("{namespace}/{name} to be required by {want:?}");
    let found = tokio::time::timeout(CONVERGE, async {
        loop {
            let binding = get_binding(client, namespace, name).await;
            if let Some(binding) = &binding
                && snapshots(&binding.spec.required_by) == want
            {
                return binding.clone();
            }
            last = binding.map(|b| snapshots(&b.spec.required_by));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    match found {
        Ok(binding) => binding,
        Err(_) => panic!("timed out waiting for {what}; last seen: {last:?}"),
    }
}

/// Waits until `namespace/name` is deleted: gone, or left only to execution's finalizer (no
/// execution runs in these tests).
pub async fn wait_gone(client: &Client, namespace: &str, name: &str) {
    wait_until(&format!("{namespace}/{name} to be deleted"), CONVERGE, || async {
        let binding = get_binding(client, namespace, name).await;
        flotilla_e2e::fixtures::binding_deleted_without_execution(binding.as_ref().map(|b| &b.metadata))
            .then_some(())
    })
    .await;
}

/// The dependencies recorded on an independent binding, as `kind/name`.
pub fn recorded(binding: &ResourceBinding) -> Vec<String> {
    let Some(value) = binding
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEPENDENCIES_ANNOTATION))
    else {
        return vec![];
    };
    let deps: Vec<Value> = serde_json::from_str(value).unwrap();
    deps.iter()
        .map(|d| format!("{}/{}", d["kind"].as_str().unwrap(), d["name"].as_str().unwrap()))
        .collect()
}

/// Waits until the independent binding records exactly `want` (`kind/name`, sorted).
pub async fn wait_recorded(client: &Client, name: &str, want: &[&str]) {
    wait_until(
        &format!("default/{name} to record {want:?}"),
        CONVERGE,
        || async {
            let binding = get_binding(client, "default", name).await?;
            (recorded(&binding) == want).then_some(())
        },
    )
    .await;
}

/// The value of a metric line starting with `prefix` on the distributor's `/metrics`.
pub async fn metric(env: &Env, prefix: &str) -> Option<f64> {
    let (_, body) = env.http_get(Service::DependencyDistributor, "/metrics").await?;
    body.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}
