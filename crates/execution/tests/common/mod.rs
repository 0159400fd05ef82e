//! Scaffolding for execution's component tests: a control plane with members and only the
//! execution service, templates, and bindings created as if the scheduler had scheduled them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::well_known::execution_namespace;
use flotilla_api::{ResourceBinding, ResourceBindingSpec, TargetCluster, Work};
use flotilla_e2e::{Env, EnvOptions, Service, wait_until};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};

/// How long a condition may take.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// How long "nothing happens" is watched for.
pub const QUIET: Duration = Duration::from_secs(4);

/// A control plane with `members` members and flotilla-execution started with `args`.
pub async fn start(members: usize, args: &[&str]) -> Env {
    let mut service_args = vec!["--cluster-probe-period".to_owned(), "1s".to_owned()];
    service_args.extend(args.iter().map(|a| (*a).to_owned()));
    Env::start(EnvOptions {
        members,
        services: vec![Service::Execution],
        service_args: BTreeMap::from([(Service::Execution, service_args)]),
        ..Default::default()
    })
    .await
}

/// Creates namespace `name` on `client`'s server (no error if it exists).
pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    if !labels.is_empty() {
        namespace.metadata.labels = Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
    }
    match api.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("cannot create namespace {name}: {e}"),
    }
}

/// A Deployment template.
pub fn deployment(namespace: &str, name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }))
    .unwrap()
}

/// Creates `template` on the control plane.
pub async fn create_template(cp: &Client, template: &Deployment) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(cp.clone(), &template.namespace().unwrap());
    api.create(&PostParams::default(), template).await.unwrap()
}

/// The name the detector gives a Deployment's binding.
pub fn binding_name(template: &str) -> String {
    format!("{template}-deployment")
}

/// Creates the ResourceBinding of `template` (owned by it, as the detector does) and marks it
/// scheduled to `clusters`.
pub async fn create_binding(
    cp: &Client,
    template: &Deployment,
    clusters: &[(&str, i32)],
    customize: impl FnOnce(&mut ResourceBindingSpec),
) -> ResourceBinding {
    let namespace = template.namespace().unwrap();
    let mut spec = ResourceBindingSpec {
        resource: flotilla_api::ObjectReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some(namespace.clone()),
            name: template.name_any(),
            uid: template.uid(),
            resource_version: template.resource_version(),
        },
        replicas: template.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        clusters: targets(clusters),
        ..Default::default()
    };
    customize(&mut spec);
    let mut binding = ResourceBinding::new(&binding_name(&template.name_any()), spec);
    binding.metadata.namespace = Some(namespace.clone());
    binding.metadata.owner_references = Some(vec![template.controller_owner_ref(&()).unwrap()]);
    let api: Api<ResourceBinding> = Api::namespaced(cp.clone(), &namespace);
    let created = api.create(&PostParams::default(), &binding).await.unwrap();
    mark_scheduled(cp, &namespace, &created.name_any()).await
}

/// Target clusters from `(name, replicas)`.
pub fn targets(clusters: &[(&str, i32)]) -> Vec<TargetCluster> {
    clusters
        .iter()
        .map(|(name, replicas)| TargetCluster {
            name: (*name).into(),
            replicas: *replicas,
        })
        .collect()
}

/// Sets `status.schedulerObservedGeneration` to the binding's generation.
pub async fn mark_scheduled(cp: &Client, namespace: &str, name: &str) -> ResourceBinding {
    let api: Api<ResourceBinding> = Api::namespaced(cp.clone(), namespace);
    retry_conflicts(|| async {
        let binding = api.get(name).await?;
        let api = &api;
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"schedulerObservedGeneration": binding.metadata.generation}})),
        )
        .await
    })
    .await
}

/// Runs `write` until it does not fail with 409 Conflict. flotilla-apiserver answers a patch
/// without a resourceVersion precondition with 409 when another writer got in between
/// (kube-apiserver retries such patches itself).
pub async fn retry_conflicts<T, F, Fut>(mut write: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    for _ in 0..50 {
        match write().await {
            Ok(value) => return value,
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("write failed: {e}"),
        }
    }
    panic!("write kept conflicting")
}

/// Merge-patches the binding's spec (as the detector or scheduler would) and marks it
/// scheduled again.
pub async fn update_binding(cp: &Client, namespace: &str, name: &str, spec_patch: Value) -> ResourceBinding {
    let api: Api<ResourceBinding> = Api::namespaced(cp.clone(), namespace);
    let patch = json!({"spec": spec_patch});
    retry_conflicts(|| {
        let (api, patch) = (&api, &patch);
        async move {
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
    })
    .await;
    mark_scheduled(cp, namespace, name).await
}

/// Changes the template's image and refreshes its binding, as the detector would.
pub async fn set_template_image(cp: &Client, namespace: &str, template: &str, image: &str) {
    let api: Api<Deployment> = Api::namespaced(cp.clone(), namespace);
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}});
    let patched = retry_conflicts(|| {
        let (api, patch) = (&api, &patch);
        async move {
            api.patch(template, &PatchParams::default(), &Patch::Strategic(patch))
                .await
        }
    })
    .await;
    update_binding(
        cp,
        namespace,
        &binding_name(template),
        json!({"resource": {"resourceVersion": patched.resource_version()}}),
    )
    .await;
}

/// The image of a Deployment's first container.
pub fn image_of(deployment: &Deployment) -> String {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// The member Deployment, if it exists.
pub async fn member_deployment(env: &Env, member: usize, namespace: &str, name: &str) -> Option<Deployment> {
    let api: Api<Deployment> = Api::namespaced(env.member_client(member).await, namespace);
    api.get_opt(name).await.ok().flatten()
}

/// Waits until member `member`'s Deployment satisfies `check`.
pub async fn wait_member(
    env: &Env,
    member: usize,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(Option<&Deployment>) -> bool,
) -> Option<Deployment> {
    wait_until(
        &format!("member{member}: {namespace}/{name} {what}"),
        TIMEOUT,
        || async {
            let found = member_deployment(env, member, namespace, name).await;
            check(found.as_ref()).then_some(found)
        },
    )
    .await
}

/// Waits until member `member` has the Deployment with `image`.
pub async fn wait_image(env: &Env, member: usize, namespace: &str, name: &str, image: &str) -> Deployment {
    wait_member(env, member, namespace, name, &format!("has image {image}"), |d| {
        d.is_some_and(|d| image_of(d) == image)
    })
    .await
    .unwrap()
}

/// Waits until member `member` has no such Deployment.
pub async fn wait_gone(env: &Env, member: usize, namespace: &str, name: &str) {
    wait_member(env, member, namespace, name, "is gone", |d| d.is_none()).await;
}

/// The Work of binding `namespace/binding` in `cluster`, if it exists.
pub async fn work(cp: &Client, cluster: &str, namespace: &str, binding: &str) -> Option<Work> {
    let api: Api<Work> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    api.get_opt(&flotilla_execution::naming::work_name(namespace, binding))
        .await
        .unwrap()
}

/// Waits until the Work of `binding` in `cluster` satisfies `check`.
pub async fn wait_work(
    cp: &Client,
    cluster: &str,
    namespace: &str,
    binding: &str,
    what: &str,
    check: impl Fn(Option<&Work>) -> bool,
) -> Option<Work> {
    wait_until(
        &format!("Work of {namespace}/{binding} in {cluster} {what}"),
        TIMEOUT,
        || async {
            let found = work(cp, cluster, namespace, binding).await;
            check(found.as_ref()).then_some(found)
        },
    )
    .await
}

/// The condition `type_` of a Work as `(status, reason, message)`.
pub fn work_condition(work: &Work, type_: &str) -> Option<(String, String, String)> {
    work.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether a member object carries flotilla's marks for `work`.
pub fn has_marks(object: &Deployment, work: &Work) -> bool {
    let labels = object.labels();
    let annotations = object.annotations();
    labels.get("karmada.io/managed").map(String::as_str) == Some("true")
        && labels.get("work.karmada.io/permanent-id") == work.metadata.uid.as_ref()
        && annotations.get("work.karmada.io/name") == work.metadata.name.as_ref()
        && annotations.get("work.karmada.io/namespace") == work.metadata.namespace.as_ref()
        && annotations.contains_key("resourcetemplate.karmada.io/uid")
        && annotations.contains_key("resourcetemplate.karmada.io/generation")
        && annotations.contains_key("flotilla.io/desired-revision")
}

/// Deletes the template (its binding goes by garbage collection).
pub async fn delete_template(cp: &Client, namespace: &str, name: &str) {
    let api: Api<Deployment> = Api::namespaced(cp.clone(), namespace);
    api.delete(name, &DeleteParams::foreground()).await.unwrap();
}

/// Works of `cluster`.
pub async fn works_in(cp: &Client, cluster: &str) -> Vec<Work> {
    let api: Api<Work> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    api.list(&ListParams::default()).await.unwrap().items
}

/// Patches the member Deployment's image as someone else would (drift).
pub async fn patch_member_image(env: &Env, member: usize, namespace: &str, name: &str, image: &str) {
    let api: Api<Deployment> = Api::namespaced(env.member_client(member).await, namespace);
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}});
    retry_conflicts(|| {
        let (api, patch) = (&api, &patch);
        async move {
            api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
        }
    })
    .await;
}

/// Deletes the member Deployment as someone else would.
pub async fn delete_member(env: &Env, member: usize, namespace: &str, name: &str) {
    let api: Api<Deployment> = Api::namespaced(env.member_client(member).await, namespace);
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

/// The group/version resource of Deployments, for readability in asserts.
pub fn deployment_kind() -> String {
    Deployment::kind(&()).into_owned()
}
