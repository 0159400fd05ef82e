//! What the bench applies to the control plane: namespaces, Deployments (optionally each with
//! a ConfigMap it reads through `envFrom`), PropagationPolicies, and the writes that create and
//! change them. Plain Karmada API objects, so any Karmada-compatible control plane accepts them.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::BenchError;

/// The field manager of the bench's writes.
pub const MANAGER: &str = "flotilla-bench";

/// The API of `policy.karmada.io/v1alpha1` PropagationPolicies in `namespace`.
pub fn policies(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("policy.karmada.io", "v1alpha1", "PropagationPolicy");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "propagationpolicies");
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The API of `work.karmada.io/v1alpha2` ResourceBindings in `namespace` (all when `None`).
pub fn bindings(client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("work.karmada.io", "v1alpha2", "ResourceBinding");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "resourcebindings");
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// The API of `work.karmada.io/v1alpha1` Works (all namespaces).
pub fn works(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("work.karmada.io", "v1alpha1", "Work");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "works");
    Api::all_with(client.clone(), &resource)
}

/// The name of the ConfigMap Deployment `name` depends on.
pub fn config_map_name(deployment: &str) -> String {
    format!("{deployment}-config")
}

/// A one-replica Deployment; with `with_config`, its container reads ConfigMap
/// [`config_map_name`] through `envFrom`, so `propagateDeps` makes the ConfigMap follow it.
pub fn deployment(namespace: &str, name: &str, with_config: bool) -> Value {
    let mut container = json!({"name": "app", "image": "nginx:1.25"});
    if with_config {
        container["envFrom"] = json!([{"configMapRef": {"name": config_map_name(name)}}]);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name, "flotilla-bench": "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]}
            }
        }
    })
}

/// The ConfigMap Deployment `deployment` reads.
pub fn config_map(namespace: &str, deployment: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(deployment), "namespace": namespace},
        "data": {"GREETING": format!("hello from {deployment}")}
    })
}

/// A PropagationPolicy selecting every Deployment of its namespace and placing it on
/// `clusters` (Duplicated).
pub fn policy(namespace: &str, name: &str, clusters: &[String], propagate_deps: bool, lazy: bool) -> Value {
    let mut spec = json!({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
        "propagateDeps": propagate_deps,
        "placement": {"clusterAffinity": {"clusterNames": clusters}},
    });
    if lazy {
        spec["activationPreference"] = json!("Lazy");
    }
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

fn kube_error(what: String) -> impl FnOnce(kube::Error) -> BenchError {
    move |source| BenchError::Kube { what, source }
}

/// Whether a failed write may succeed when retried (the server is down or restarting).
pub fn retriable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

/// Runs `write` until it succeeds, treating 409 AlreadyExists as success (an earlier attempt
/// landed), retrying errors [`retriable`] says may pass, for at most `patience`.
pub async fn create_with_retry<F, Fut>(what: &str, patience: Duration, mut write: F) -> Result<(), BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let deadline = std::time::Instant::now() + patience;
    let mut delay = Duration::from_millis(50);
    loop {
        match write().await {
            Ok(()) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => return Ok(()),
            Err(error) if retriable(&error) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
            Err(source) => {
                return Err(BenchError::Kube {
                    what: what.to_owned(),
                    source,
                });
            }
        }
    }
}

/// Creates namespace `name` on the control plane (fine if it exists).
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<(), BenchError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))
        .map_err(|e| BenchError::Invalid(format!("namespace {name}: {e}")))?;
    create_with_retry(
        &format!("create namespace {name}"),
        Duration::from_secs(30),
        || {
            let api = api.clone();
            let namespace = namespace.clone();
            async move { api.create(&PostParams::default(), &namespace).await.map(|_| ()) }
        },
    )
    .await
}

/// Server-side applies `object` (a PropagationPolicy) on the control plane.
pub async fn apply_policy(client: &Client, object: &Value) -> Result<(), BenchError> {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    policies(client, namespace)
        .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(object))
        .await
        .map(|_| ())
        .map_err(kube_error(format!("apply PropagationPolicy {namespace}/{name}")))
}

/// Replaces the cluster list of PropagationPolicy `namespace/name` (a merge patch).
pub async fn move_policy(
    client: &Client,
    namespace: &str,
    name: &str,
    clusters: &[String],
) -> Result<i64, BenchError> {
    let patch = json!({"spec": {"placement": {"clusterAffinity": {"clusterNames": clusters}}}});
    let updated = policies(client, namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(kube_error(format!(
            "change placement of PropagationPolicy {namespace}/{name}"
        )))?;
    Ok(updated.metadata.generation.unwrap_or_default())
}

/// Creates Deployment `name` (and first its ConfigMap, with `with_config`), retrying while the
/// control plane is unavailable for up to `patience`.
pub async fn create_template(
    client: &Client,
    namespace: &str,
    name: &str,
    with_config: bool,
    patience: Duration,
) -> Result<(), BenchError> {
    if with_config {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let object: ConfigMap = serde_json::from_value(config_map(namespace, name))
            .map_err(|e| BenchError::Invalid(format!("ConfigMap of {name}: {e}")))?;
        create_with_retry(
            &format!("create ConfigMap {namespace}/{}", config_map_name(name)),
            patience,
            || {
                let api = api.clone();
                let object = object.clone();
                async move { api.create(&PostParams::default(), &object).await.map(|_| ()) }
            },
        )
        .await?;
    }
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let object: Deployment = serde_json::from_value(deployment(namespace, name, with_config))
        .map_err(|e| BenchError::Invalid(format!("Deployment {name}: {e}")))?;
    create_with_retry(&format!("create Deployment {namespace}/{name}"), patience, || {
        let api = api.clone();
        let object = object.clone();
        async move { api.create(&PostParams::default(), &object).await.map(|_| ()) }
    })
    .await
}

/// Creates every template `names` with at most `parallel` writes in flight.
pub async fn create_templates(
    client: &Client,
    namespace: &str,
    names: &[String],
    with_config: bool,
    parallel: usize,
    patience: Duration,
) -> Result<(), BenchError> {
    use futures::StreamExt;
    // Owned futures collected first: a lazily mapped stream of borrowing futures is not
    // `Send` for every lifetime, which `tokio::spawn` callers need.
    let futures: Vec<_> = names
        .iter()
        .map(|name| {
            let (client, namespace, name) = (client.clone(), namespace.to_owned(), name.clone());
            async move { create_template(&client, &namespace, &name, with_config, patience).await }
        })
        .collect();
    let mut writes = futures::stream::iter(futures).buffer_unordered(parallel.max(1));
    while let Some(result) = writes.next().await {
        result?;
    }
    Ok(())
}

/// `metadata.generation` of every ResourceBinding in `namespace`, by name.
pub async fn binding_generations(
    client: &Client,
    namespace: &str,
) -> Result<std::collections::BTreeMap<String, i64>, BenchError> {
    let list = bindings(client, Some(namespace))
        .list(&Default::default())
        .await
        .map_err(kube_error(format!("list ResourceBindings in {namespace}")))?;
    Ok(list
        .items
        .into_iter()
        .map(|b| {
            (
                b.metadata.name.unwrap_or_default(),
                b.metadata.generation.unwrap_or_default(),
            )
        })
        .collect())
}

/// The template names `prefix-00000 ..` for `count` templates.
pub fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i:05}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn templates_are_valid_kubernetes_objects() {
        let d: Deployment = serde_json::from_value(deployment("ns", "app-00001", true)).unwrap();
        let container = &d.spec.unwrap().template.spec.unwrap().containers[0];
        let from = container.env_from.as_ref().unwrap();
        assert_eq!(from[0].config_map_ref.as_ref().unwrap().name, "app-00001-config");
        let plain = deployment("ns", "x", false);
        assert!(plain["spec"]["template"]["spec"]["containers"][0]["envFrom"].is_null());
        let c: ConfigMap = serde_json::from_value(config_map("ns", "app-00001")).unwrap();
        assert_eq!(c.metadata.name.as_deref(), Some("app-00001-config"));
    }

    #[test]
    fn policies_are_valid_karmada_policies() {
        let clusters = vec!["member1".to_owned(), "member2".to_owned()];
        let value = policy("ns", "p", &clusters, true, true);
        let typed: flotilla_api::PropagationPolicy = serde_json::from_value(value.clone()).unwrap();
        assert!(typed.spec.is_lazy());
        assert!(typed.validate().is_ok(), "{:?}", typed.validate());
        assert_eq!(
            value["spec"]["placement"]["clusterAffinity"]["clusterNames"],
            json!(["member1", "member2"])
        );
        let eager = policy("ns", "p", &clusters, false, false);
        assert!(eager["spec"]["activationPreference"].is_null());
    }

    #[test]
    fn names_sort_in_creation_order() {
        assert_eq!(names("t", 2), vec!["t-00000", "t-00001"]);
    }

    #[test]
    fn only_server_side_trouble_is_retried() {
        let status = |code| kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed());
        assert!(retriable(&status(503)));
        assert!(retriable(&status(429)));
        assert!(!retriable(&status(422)));
        assert!(!retriable(&status(404)));
    }
}
