//! Scaffolding of the detector's component tests: a control plane with the detector only,
//! object builders and waits.

#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use flotilla_api::policy::PolicyStatus;
use flotilla_api::work::ResourceBinding;
use flotilla_api::{ClusterPropagationPolicy, PropagationPolicy};
use flotilla_e2e::{Env, EnvOptions, Service, wait_until};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// How long a test waits for the detector to converge.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A control plane (no members) with only the detector running.
pub async fn detector_env() -> Env {
    Env::start(EnvOptions {
        members: 0,
        services: vec![Service::Detector],
        ..Default::default()
    })
    .await
}

/// Creates a Deployment `name` in `default` with `labels` and `replicas`.
pub async fn create_deployment(client: &Client, name: &str, labels: Value, replicas: i32) -> Deployment {
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]},
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap()
}

/// A PropagationPolicy in `default` from its spec as JSON.
pub async fn create_pp(client: &Client, name: &str, spec: Value) -> PropagationPolicy {
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &policy)
        .await
        .unwrap()
}

/// A ClusterPropagationPolicy from its spec as JSON.
pub async fn create_cpp(client: &Client, name: &str, spec: Value) -> ClusterPropagationPolicy {
    let policy: ClusterPropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    Api::<ClusterPropagationPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap()
}

/// Merge-patches object `name`, retrying while the API answers 409 (flotilla-apiserver
/// reports a conflict when another writer, here the detector, writes the object concurrently,
/// even without a resourceVersion in the patch).
pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_until(&format!("patching {name}"), TIMEOUT, || async {
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Some(()),
            Err(kube::Error::Api(e)) if e.code == 409 => None,
            Err(e) => panic!("patching {name}: {e}"),
        }
    })
    .await
}

/// Merge-patches the spec of PropagationPolicy `name`.
pub async fn patch_pp(client: &Client, name: &str, spec: Value) {
    merge_patch(
        &Api::<PropagationPolicy>::namespaced(client.clone(), "default"),
        name,
        json!({ "spec": spec }),
    )
    .await
}

/// A label edit of Deployment `name` (the seed's `refresh-time`).
pub async fn touch_deployment(client: &Client, name: &str, value: &str) {
    merge_patch(
        &Api::<Deployment>::namespaced(client.clone(), "default"),
        name,
        json!({"metadata": {"labels": {"refresh-time": value}}}),
    )
    .await
}

/// A selector for the Deployment `name`.
pub fn deployment_selector(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name})
}

/// A placement on one cluster.
pub fn placement(cluster: &str) -> Value {
    json!({"clusterAffinity": {"clusterNames": [cluster]}})
}

/// The ResourceBinding `name` in `default`, if it exists.
pub async fn binding(client: &Client, name: &str) -> Option<ResourceBinding> {
    Api::<ResourceBinding>::namespaced(client.clone(), "default")
        .get_opt(name)
        .await
        .unwrap()
}

/// The cluster names of a binding's placement.
pub fn placement_clusters(binding: &ResourceBinding) -> Vec<String> {
    binding
        .spec
        .placement
        .as_ref()
        .and_then(|p| p.cluster_affinity.as_ref())
        .map(|a| a.cluster_names.clone())
        .unwrap_or_default()
}

/// The `PolicyActivated` condition of a binding as (status, reason, message).
pub fn activated(binding: &ResourceBinding) -> Option<(String, String, String)> {
    let conditions = &binding.status.as_ref()?.conditions;
    let c = conditions.iter().find(|c| c.type_ == "PolicyActivated")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until the binding `name` exists and `check` holds; returns it.
pub async fn wait_binding(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&ResourceBinding) -> bool,
) -> ResourceBinding {
    wait_until(what, TIMEOUT, || async {
        binding(client, name).await.filter(|b| check(b))
    })
    .await
}

/// The claim annotation `propagationpolicy.karmada.io/name` of Deployment `name`.
pub async fn claimed_by(client: &Client, name: &str) -> Option<String> {
    let d = Api::<Deployment>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap();
    let annotations = d.metadata.annotations.unwrap_or_default();
    annotations
        .get("propagationpolicy.karmada.io/name")
        .or_else(|| annotations.get("clusterpropagationpolicy.karmada.io/name"))
        .cloned()
}

/// Waits until Deployment `name` is claimed by `policy` (`None`: unclaimed).
pub async fn wait_claim(client: &Client, name: &str, policy: Option<&str>) {
    wait_until(
        &format!("{name} to be claimed by {policy:?}"),
        TIMEOUT,
        || async { (claimed_by(client, name).await.as_deref() == policy).then_some(()) },
    )
    .await
}

/// The status of PropagationPolicy `name`.
pub async fn pp_status(client: &Client, name: &str) -> Option<PolicyStatus> {
    Api::<PropagationPolicy>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap()
        .status
}

/// Reads a counter from the detector's `/metrics`.
pub async fn metric(env: &Env, line_prefix: &str) -> f64 {
    let Some((200, body)) = env.http_get(Service::Detector, "/metrics").await else {
        return 0.0;
    };
    body.lines()
        .filter(|l| l.starts_with(line_prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
