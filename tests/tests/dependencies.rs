//! `propagateDeps` end to end (issue 7, seed `dependencies-automatic-propagation.md`): the
//! ConfigMaps, Secrets, PVCs and ServiceAccounts a workload references reach exactly the member
//! clusters the workload runs in, through detector -> scheduler -> dependency-distributor ->
//! scheduler -> execution. Every test asserts on the members; `requiredBy` snapshots of the
//! attached bindings are checked where they say something the members cannot.
//!
//! The distributor leaves a binding alone once its dependencies were read at its template
//! inputs and rules (issue 17, round 23, ADR 0026): its resync queues only bindings that are
//! not settled, and what the resync then no longer covers reaches it otherwise (a template
//! edit moves the binding; new rules unsettle every binding).

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flotilla_api::policy::ConflictResolution;
use flotilla_api::well_known::DEPENDENCIES_ANNOTATION;
use flotilla_api::{ClusterResourceBinding, ResourceBinding, Work};
use flotilla_e2e::env::{sample_in, series_sum};
use flotilla_e2e::fixtures::{self, TIMEOUT};
use flotilla_e2e::wait::{eventually, stays, wait_until};
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::{Value, json};

// ----- objects ------------------------------------------------------------------------------

/// A Deployment `default/<name>` whose pod spec is `pod_spec` merged over one nginx container.
fn deployment(name: &str, pod_spec: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "app", "image": "nginx:1.25"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), pod_spec.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    })
}

fn config_map(namespace: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace}, "data": {"key": value}})
}

fn secret(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": namespace}, "stringData": {"token": "s3cret"}})
}

/// A PropagationPolicy `default/<name>` with `propagateDeps: true` for the Deployments
/// `deployments`, to `clusters`; `extra` is merged into its spec.
fn policy(name: &str, deployments: &[&str], clusters: &[&str], extra: Value) -> Value {
    let selectors: Vec<Value> = deployments
        .iter()
        .map(|d| json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": d}))
        .collect();
    let mut spec = json!({
        "propagateDeps": true,
        "resourceSelectors": selectors,
        "placement": {"clusterAffinity": {"clusterNames": clusters}},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

async fn apply(client: &Client, object: Value) {
    fixtures::apply_value(client, &object).await;
}

async fn delete(client: &Client, object: Value) {
    fixtures::delete(client, &serde_yaml::to_string(&object).unwrap()).await;
}

// ----- members ------------------------------------------------------------------------------

async fn members(env: &Env) -> Vec<Client> {
    let mut clients = Vec::new();
    for i in 1..=env.members.len() {
        clients.push(env.member_client(i).await);
    }
    clients
}

/// The members (1-based) that hold `apiVersion kind namespace/name`.
async fn holders(
    members: &[Client],
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Vec<usize> {
    let mut on = Vec::new();
    for (i, member) in members.iter().enumerate() {
        if fixtures::get(member, api_version, kind, namespace, name)
            .await
            .is_some()
        {
            on.push(i + 1);
        }
    }
    on
}

/// Waits until exactly the members `want` (1-based) hold the object; the panic names where it
/// was last seen.
async fn wait_placed(
    members: &[Client],
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    want: &[usize],
) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let on = holders(members, api_version, kind, namespace, name).await;
        if on == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {TIMEOUT:?}: {kind} {}/{name} is on members {on:?}, want {want:?}",
            namespace.unwrap_or("")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// [`wait_placed`] for a core (`v1`) object in `default`.
async fn wait_core(members: &[Client], kind: &str, name: &str, want: &[usize]) {
    wait_placed(members, "v1", kind, Some("default"), name, want).await;
}

/// Proves for a few seconds that exactly `want` hold the object.
async fn stays_placed(members: &[Client], kind: &str, namespace: &str, name: &str, want: &[usize]) {
    stays(
        &format!("{kind} {namespace}/{name} only on members {want:?}"),
        Duration::from_secs(2),
        || async { holders(members, "v1", kind, Some(namespace), name).await == want },
    )
    .await;
}

// ----- bindings -----------------------------------------------------------------------------

async fn binding(cp: &Client, namespace: &str, name: &str) -> Option<ResourceBinding> {
    Api::<ResourceBinding>::namespaced(cp.clone(), namespace)
        .get_opt(name)
        .await
        .unwrap()
}

/// `spec.requiredBy` as `(namespace/name, [cluster])`, clusters sorted.
fn snapshots(spec: &flotilla_api::ResourceBindingSpec) -> Vec<(String, Vec<String>)> {
    spec.required_by
        .iter()
        .map(|s| {
            let mut clusters: Vec<String> = s.clusters.iter().map(|c| c.name.clone()).collect();
            clusters.sort();
            let key = match &s.namespace {
                Some(ns) if !ns.is_empty() => format!("{ns}/{}", s.name),
                _ => s.name.clone(),
            };
            (key, clusters)
        })
        .collect()
}

fn want_snapshots(want: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    want.iter()
        .map(|(k, c)| ((*k).to_owned(), c.iter().map(|s| (*s).to_owned()).collect()))
        .collect()
}

/// Waits until the attached binding `namespace/name` lists exactly `want` in `requiredBy`.
async fn wait_required_by(
    cp: &Client,
    namespace: &str,
    name: &str,
    want: &[(&str, &[&str])],
) -> ResourceBinding {
    let want = want_snapshots(want);
    wait_until(
        &format!("ResourceBinding {namespace}/{name} requiredBy {want:?}"),
        TIMEOUT,
        || async {
            binding(cp, namespace, name)
                .await
                .filter(|b| snapshots(&b.spec) == want)
        },
    )
    .await
}

async fn wait_binding_gone(cp: &Client, namespace: &str, name: &str) {
    eventually(
        &format!("ResourceBinding {namespace}/{name} to be deleted"),
        TIMEOUT,
        || async { binding(cp, namespace, name).await.is_none() },
    )
    .await;
}

/// The dependencies the distributor recorded on an independent binding (annotation value).
async fn recorded_dependencies(cp: &Client, namespace: &str, name: &str) -> Option<String> {
    binding(cp, namespace, name)
        .await?
        .metadata
        .annotations?
        .get(DEPENDENCIES_ANNOTATION)
        .cloned()
}

// ----- tests --------------------------------------------------------------------------------

/// Seed Story 1: the Deployment and its policy come first; the ConfigMap and Secret it
/// references are created afterwards and land in exactly the Deployment's clusters.
#[tokio::test]
async fn story_1_configmap_and_secret_created_after_the_deployment() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(
        &cp,
        deployment(
            "myapp",
            json!({
                "containers": [{"name": "app", "image": "nginx:1.25",
                                "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "my-secret", "key": "token"}}}]}],
                "volumes": [{"name": "config", "configMap": {"name": "my-config"}}],
            }),
        ),
    )
    .await;
    apply(
        &cp,
        policy("myapp", &["myapp"], &["member1", "member2"], json!({})),
    )
    .await;
    wait_placed(
        &members,
        "apps/v1",
        "Deployment",
        Some("default"),
        "myapp",
        &[1, 2],
    )
    .await;

    apply(&cp, config_map("default", "my-config", "v1")).await;
    apply(&cp, secret("default", "my-secret")).await;
    wait_core(&members, "ConfigMap", "my-config", &[1, 2]).await;
    wait_core(&members, "Secret", "my-secret", &[1, 2]).await;
    // What is propagated (the Works' manifests) and what the members hold is what a real
    // cluster would hold: the control plane folded the applied stringData into data (base64
    // of "s3cret") and keeps no stringData.
    for (i, member) in [&members[0], &members[1]].into_iter().enumerate() {
        let works: Api<Work> = Api::namespaced(cp.clone(), &format!("karmada-es-member{}", i + 1));
        let manifests: Vec<Value> = works
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .flat_map(|w| w.spec.workload.manifests)
            .filter(|m| m["kind"] == "Secret" && m["metadata"]["name"] == "my-secret")
            .collect();
        assert_eq!(manifests.len(), 1, "member{}: {manifests:?}", i + 1);
        assert_eq!(manifests[0]["data"], json!({"token": "czNjcmV0"}));
        assert!(manifests[0].get("stringData").is_none(), "{}", manifests[0]);
        let secret = fixtures::get(member, "v1", "Secret", Some("default"), "my-secret")
            .await
            .unwrap();
        assert_eq!(secret.data["data"], json!({"token": "czNjcmV0"}));
        assert!(secret.data.get("stringData").is_none(), "{:?}", secret.data);
    }
    let want: &[(&str, &[&str])] = &[("default/myapp-deployment", &["member1", "member2"])];
    let attached = wait_required_by(&cp, "default", "my-config-configmap", want).await;
    wait_required_by(&cp, "default", "my-secret-secret", want).await;
    assert_eq!(attached.spec.resource.kind, "ConfigMap");
    assert!(!attached.spec.propagate_deps);

    // A content change follows to the members.
    apply(&cp, config_map("default", "my-config", "v2")).await;
    for member in [&members[0], &members[1]] {
        eventually("the new ConfigMap content on the member", TIMEOUT, || async {
            fixtures::get(member, "v1", "ConfigMap", Some("default"), "my-config")
                .await
                .is_some_and(|o| o.data["data"]["key"] == "v2")
        })
        .await;
    }
    stays_placed(&members, "ConfigMap", "default", "my-config", &[1, 2]).await;
}

/// A PersistentVolumeClaim named by a volume follows the workload.
#[tokio::test]
async fn pvc_follows_the_workload() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(
        &cp,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "data", "namespace": "default"},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    apply(
        &cp,
        deployment(
            "db",
            json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}),
        ),
    )
    .await;
    apply(&cp, policy("db", &["db"], &["member3"], json!({}))).await;
    wait_core(&members, "PersistentVolumeClaim", "data", &[3]).await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "db", &[3]).await;
    wait_required_by(
        &cp,
        "default",
        "data-persistentvolumeclaim",
        &[("default/db-deployment", &["member3"])],
    )
    .await;
}

/// The ServiceAccount named by `serviceAccountName` follows the workload; `default` is not a
/// dependency (every namespace of every cluster has its own).
#[tokio::test]
async fn service_account_follows_the_workload_but_default_is_not_a_dependency() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(
        &cp,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "default"}}),
    )
    .await;
    apply(&cp, deployment("job", json!({"serviceAccountName": "runner"}))).await;
    apply(&cp, deployment("plain", json!({"serviceAccountName": "default"}))).await;
    apply(&cp, policy("sa", &["job", "plain"], &["member2"], json!({}))).await;
    wait_core(&members, "ServiceAccount", "runner", &[2]).await;
    wait_required_by(
        &cp,
        "default",
        "runner-serviceaccount",
        &[("default/job-deployment", &["member2"])],
    )
    .await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "plain", &[2]).await;
    assert!(binding(&cp, "default", "default-serviceaccount").await.is_none());
    let recorded = recorded_dependencies(&cp, "default", "plain-deployment").await;
    assert!(
        recorded.as_deref().is_none_or(|r| !r.contains("ServiceAccount")),
        "{recorded:?}"
    );
}

/// A Secret named in `imagePullSecrets` follows the workload.
#[tokio::test]
async fn image_pull_secret_follows_the_workload() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(
        &cp,
        deployment("web", json!({"imagePullSecrets": [{"name": "registry"}]})),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1", "member3"], json!({}))).await;
    apply(&cp, secret("default", "registry")).await;
    wait_core(&members, "Secret", "registry", &[1, 3]).await;
    wait_required_by(
        &cp,
        "default",
        "registry-secret",
        &[("default/web-deployment", &["member1", "member3"])],
    )
    .await;
}

/// Two Deployments on different clusters share a ConfigMap: it goes to the union; deleting one
/// workload removes it only where no workload needs it any more.
#[tokio::test]
async fn shared_configmap_goes_to_the_union_and_stays_where_still_needed() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "shared", "x")).await;
    let volume = json!({"volumes": [{"name": "c", "configMap": {"name": "shared"}}]});
    apply(&cp, deployment("web", volume.clone())).await;
    apply(&cp, deployment("api", volume)).await;
    apply(&cp, policy("web", &["web"], &["member1"], json!({}))).await;
    apply(&cp, policy("api", &["api"], &["member2"], json!({}))).await;
    wait_core(&members, "ConfigMap", "shared", &[1, 2]).await;
    wait_required_by(
        &cp,
        "default",
        "shared-configmap",
        &[
            ("default/api-deployment", &["member2"]),
            ("default/web-deployment", &["member1"]),
        ],
    )
    .await;

    delete(&cp, deployment("web", json!({}))).await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "web", &[]).await;
    wait_core(&members, "ConfigMap", "shared", &[2]).await;
    wait_required_by(
        &cp,
        "default",
        "shared-configmap",
        &[("default/api-deployment", &["member2"])],
    )
    .await;

    delete(&cp, deployment("api", json!({}))).await;
    wait_binding_gone(&cp, "default", "shared-configmap").await;
    wait_core(&members, "ConfigMap", "shared", &[]).await;
    // The template itself stays on the control plane.
    assert!(
        fixtures::get(&cp, "v1", "ConfigMap", Some("default"), "shared")
            .await
            .is_some()
    );
}

/// The workload is rescheduled from member1 to member2: its dependency moves with it.
#[tokio::test]
async fn rescheduling_the_workload_moves_its_dependencies() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "cfg", "x")).await;
    apply(
        &cp,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1"], json!({}))).await;
    wait_core(&members, "ConfigMap", "cfg", &[1]).await;

    apply(&cp, policy("web", &["web"], &["member2"], json!({}))).await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "web", &[2]).await;
    wait_core(&members, "ConfigMap", "cfg", &[2]).await;
    wait_required_by(
        &cp,
        "default",
        "cfg-configmap",
        &[("default/web-deployment", &["member2"])],
    )
    .await;
}

/// A reference removed from the template: the dependency is cleaned from the members and its
/// attached binding deleted (its `requiredBy` became empty); the other dependency stays.
#[tokio::test]
async fn a_reference_removed_from_the_template_is_cleaned_from_members() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "cfg", "x")).await;
    apply(&cp, secret("default", "token")).await;
    apply(
        &cp,
        deployment(
            "web",
            json!({
                "containers": [{"name": "app", "image": "nginx:1.25", "envFrom": [{"secretRef": {"name": "token"}}]}],
                "volumes": [{"name": "c", "configMap": {"name": "cfg"}}],
            }),
        ),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1", "member2"], json!({}))).await;
    wait_core(&members, "Secret", "token", &[1, 2]).await;
    wait_core(&members, "ConfigMap", "cfg", &[1, 2]).await;

    // The same Deployment without the envFrom (server-side apply drops the field).
    apply(
        &cp,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    wait_core(&members, "Secret", "token", &[]).await;
    wait_binding_gone(&cp, "default", "token-secret").await;
    stays_placed(&members, "ConfigMap", "default", "cfg", &[1, 2]).await;
    assert!(
        fixtures::get(&cp, "v1", "Secret", Some("default"), "token")
            .await
            .is_some()
    );
}

/// A dependency its own policy also claims keeps its independent binding; it goes to the union
/// of its own placement and its `requiredBy` clusters (docs/dependencies.md), and back to its
/// own placement alone when the workload goes.
#[tokio::test]
async fn a_dependency_with_its_own_policy_goes_to_the_union() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "cfg", "x")).await;
    apply(
        &cp,
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": "cfg", "namespace": "default"},
               "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg"}],
                        "placement": {"clusterAffinity": {"clusterNames": ["member3"]}}}}),
    )
    .await;
    wait_core(&members, "ConfigMap", "cfg", &[3]).await;
    let own = binding(&cp, "default", "cfg-configmap").await.unwrap();

    apply(
        &cp,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1"], json!({}))).await;
    wait_core(&members, "ConfigMap", "cfg", &[1, 3]).await;
    let attached = wait_required_by(
        &cp,
        "default",
        "cfg-configmap",
        &[("default/web-deployment", &["member1"])],
    )
    .await;
    assert_eq!(attached.metadata.uid, own.metadata.uid, "the same binding");

    delete(&cp, deployment("web", json!({}))).await;
    wait_core(&members, "ConfigMap", "cfg", &[3]).await;
    wait_required_by(&cp, "default", "cfg-configmap", &[]).await;
    stays("the claimed binding is kept", Duration::from_secs(2), || async {
        binding(&cp, "default", "cfg-configmap").await.is_some()
    })
    .await;
}

/// A ClusterPropagationPolicy with `propagateDeps` distributes the dependencies of the
/// namespaced workloads it selects.
#[tokio::test]
async fn cluster_propagation_policy_propagates_dependencies() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, secret("default", "token")).await;
    apply(
        &cp,
        deployment(
            "web",
            json!({"containers": [{"name": "app", "image": "nginx:1.25",
                   "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "token", "key": "token"}}}]}]}),
        ),
    )
    .await;
    apply(
        &cp,
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
               "metadata": {"name": "web"},
               "spec": {"propagateDeps": true,
                        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}],
                        "placement": {"clusterAffinity": {"clusterNames": ["member2", "member3"]}}}}),
    )
    .await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "web", &[2, 3]).await;
    wait_core(&members, "Secret", "token", &[2, 3]).await;
    wait_required_by(
        &cp,
        "default",
        "token-secret",
        &[("default/web-deployment", &["member2", "member3"])],
    )
    .await;
}

const WORKFLOW_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: workflows.example.io
spec:
  group: example.io
  scope: Namespaced
  names: {plural: workflows, singular: workflow, kind: Workflow, listKind: WorkflowList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// Waits until `client` serves `example.io/v1 Workflow` (a CRD just created).
async fn wait_workflows_served(client: &Client) {
    eventually("example.io/v1 Workflow to be served", TIMEOUT, || async {
        let resolved = kube::discovery::pinned_kind(
            client,
            &kube::core::GroupVersionKind::gvk("example.io", "v1", "Workflow"),
        )
        .await;
        resolved.is_ok()
    })
    .await;
}

/// The rules ConfigMap `flotilla-system/flotilla-dependency-rules`: a Workflow's ConfigMaps are
/// named at `name_path`.
fn workflow_rules(name_path: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "flotilla-dependency-rules", "namespace": "flotilla-system"},
           "data": {"rules.yaml": format!("apiVersion: flotilla.io/v1alpha1\nkind: DependencyRules\nrules:\n  - apiVersion: example.io/v1\n    kind: Workflow\n    references:\n      - apiVersion: v1\n        kind: ConfigMap\n        namePaths: [\"{name_path}\"]\n")}})
}

/// The Workflow CRD everywhere, the rules ConfigMap with `name_path`, the ConfigMaps `step-1`
/// and `step-2`, the Workflow `default/nightly` naming both, and its policy (`propagateDeps`,
/// member2). Returns the control-plane and member clients.
async fn nightly_workflow(env: &Env, name_path: &str) -> (Client, Vec<Client>) {
    let cp = env.control_plane_client().await;
    let members = members(env).await;
    for client in std::iter::once(&cp).chain(members.iter()) {
        fixtures::apply(client, WORKFLOW_CRD).await;
    }
    for client in std::iter::once(&cp).chain(members.iter()) {
        wait_workflows_served(client).await;
    }
    apply(
        &cp,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flotilla-system"}}),
    )
    .await;
    apply(&cp, workflow_rules(name_path)).await;
    apply(&cp, config_map("default", "step-1", "a")).await;
    apply(&cp, config_map("default", "step-2", "b")).await;
    apply(
        &cp,
        json!({"apiVersion": "example.io/v1", "kind": "Workflow",
               "metadata": {"name": "nightly", "namespace": "default"},
               "spec": {"steps": [{"configMap": "step-1"}, {"configMap": "step-2"}]}}),
    )
    .await;
    apply(
        &cp,
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": "nightly", "namespace": "default"},
               "spec": {"propagateDeps": true,
                        "resourceSelectors": [{"apiVersion": "example.io/v1", "kind": "Workflow", "name": "nightly"}],
                        "placement": {"clusterAffinity": {"clusterNames": ["member2"]}}}}),
    )
    .await;
    (cp, members)
}

/// Beyond Karmada: a declarative rule (ConfigMap `flotilla-system/flotilla-dependency-rules`)
/// makes the ConfigMaps a CRD kind names dependencies.
#[tokio::test]
async fn a_crd_kind_via_a_declarative_rule() {
    let env = Env::start(EnvOptions::default()).await;
    let (cp, members) = nightly_workflow(&env, ".spec.steps[*].configMap").await;
    wait_placed(
        &members,
        "example.io/v1",
        "Workflow",
        Some("default"),
        "nightly",
        &[2],
    )
    .await;
    wait_core(&members, "ConfigMap", "step-1", &[2]).await;
    wait_core(&members, "ConfigMap", "step-2", &[2]).await;
    wait_required_by(
        &cp,
        "default",
        "step-1-configmap",
        &[("default/nightly-workflow", &["member2"])],
    )
    .await;
}

/// Beyond Karmada: a cluster-scoped owner. A ClusterPropagationPolicy with `propagateDeps`
/// puts a PersistentVolume on member2; the Secrets its CSI spec names (namespaced) follow it.
#[tokio::test]
async fn cluster_scoped_owner_pv_propagates_its_csi_secrets() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(
        &cp,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "storage"}}),
    )
    .await;
    apply(&cp, secret("storage", "csi-publish")).await;
    apply(&cp, secret("storage", "csi-expand")).await;
    apply(
        &cp,
        json!({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data"},
            "spec": {
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "csi": {
                    "driver": "csi.example.io", "volumeHandle": "vol-1",
                    "nodePublishSecretRef": {"name": "csi-publish", "namespace": "storage"},
                    "controllerExpandSecretRef": {"name": "csi-expand", "namespace": "storage"},
                },
            },
        }),
    )
    .await;
    apply(
        &cp,
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
               "metadata": {"name": "data"},
               "spec": {"propagateDeps": true,
                        "resourceSelectors": [{"apiVersion": "v1", "kind": "PersistentVolume", "name": "data"}],
                        "placement": {"clusterAffinity": {"clusterNames": ["member2"]}}}}),
    )
    .await;
    wait_placed(&members, "v1", "PersistentVolume", None, "data", &[2]).await;
    for name in ["csi-publish", "csi-expand"] {
        wait_placed(&members, "v1", "Secret", Some("storage"), name, &[2]).await;
    }
    let attached = wait_required_by(
        &cp,
        "storage",
        "csi-publish-secret",
        &[("data-persistentvolume", &["member2"])],
    )
    .await;
    assert!(attached.spec.required_by[0].namespace.is_none());
    let owner = Api::<ClusterResourceBinding>::all(cp.clone())
        .get("data-persistentvolume")
        .await
        .unwrap();
    assert!(owner.spec.0.propagate_deps);
}

/// `--feature-gates=PropagateDeps=false`: the workload propagates, nothing is attached.
#[tokio::test]
async fn feature_gate_off_attaches_nothing() {
    let env = Env::start(EnvOptions {
        service_args: BTreeMap::from([(
            Service::DependencyDistributor,
            vec!["--feature-gates".to_owned(), "PropagateDeps=false".to_owned()],
        )]),
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "cfg", "x")).await;
    apply(
        &cp,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1"], json!({}))).await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "web", &[1]).await;
    stays(
        "no attached binding and no ConfigMap on any member",
        Duration::from_secs(2),
        || async {
            binding(&cp, "default", "cfg-configmap").await.is_none()
                && holders(&members, "v1", "ConfigMap", Some("default"), "cfg")
                    .await
                    .is_empty()
        },
    )
    .await;
    assert_eq!(
        recorded_dependencies(&cp, "default", "web-deployment").await,
        None
    );
}

/// Two referencing bindings disagree on conflictResolution and preserveResourcesOnDeletion:
/// the attached binding takes Abort and true, says so in `DependencyConflict` and a Warning
/// event, and the condition clears once they agree.
#[tokio::test]
async fn disagreeing_referencing_bindings_surface_a_condition_and_an_event() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "shared", "x")).await;
    let volume = json!({"volumes": [{"name": "c", "configMap": {"name": "shared"}}]});
    apply(&cp, deployment("web", volume.clone())).await;
    apply(&cp, deployment("api", volume)).await;
    apply(
        &cp,
        policy(
            "web",
            &["web"],
            &["member1"],
            json!({"conflictResolution": "Overwrite", "preserveResourcesOnDeletion": true}),
        ),
    )
    .await;
    apply(&cp, policy("api", &["api"], &["member2"], json!({}))).await;
    wait_core(&members, "ConfigMap", "shared", &[1, 2]).await;
    let attached = wait_until("the DependencyConflict condition", TIMEOUT, || async {
        let b = binding(&cp, "default", "shared-configmap").await?;
        let value = serde_json::to_value(&b).unwrap();
        let condition = fixtures::condition(&value, "DependencyConflict")?;
        (condition["status"] == "True").then(|| (b, condition.clone()))
    })
    .await;
    let (attached, condition) = attached;
    assert_eq!(attached.spec.conflict_resolution, Some(ConflictResolution::Abort));
    assert_eq!(attached.spec.preserve_resources_on_deletion, Some(true));
    assert_eq!(condition["reason"], "ReferencingBindingsDisagree");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("conflictResolution") && message.contains("default/web-deployment"),
        "{message}"
    );
    assert!(message.contains("preserveResourcesOnDeletion"), "{message}");
    let events: Api<Event> = Api::namespaced(cp.clone(), "default");
    wait_until("a DependencyConflict Warning event", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("DependencyConflict")
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("shared-configmap")
        })
    })
    .await;

    // They agree: the condition clears.
    apply(
        &cp,
        policy(
            "api",
            &["api"],
            &["member2"],
            json!({"conflictResolution": "Overwrite", "preserveResourcesOnDeletion": true}),
        ),
    )
    .await;
    wait_until("DependencyConflict=False", TIMEOUT, || async {
        let b = binding(&cp, "default", "shared-configmap").await?;
        let value = serde_json::to_value(&b).unwrap();
        let condition = fixtures::condition(&value, "DependencyConflict")?;
        (condition["status"] == "False" && b.spec.conflict_resolution == Some(ConflictResolution::Overwrite))
            .then_some(())
    })
    .await;
    stays_placed(&members, "ConfigMap", "default", "shared", &[1, 2]).await;
}

/// The distributor is SIGKILLed; while it is down a reference is added and one removed and the
/// workload is rescheduled; after the restart the members converge.
#[tokio::test]
async fn killing_the_distributor_midway_converges() {
    let mut env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    apply(&cp, config_map("default", "cfg", "x")).await;
    apply(&cp, secret("default", "token")).await;
    apply(
        &cp,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1"], json!({}))).await;
    wait_core(&members, "ConfigMap", "cfg", &[1]).await;

    env.kill(Service::DependencyDistributor);
    apply(
        &cp,
        deployment(
            "web",
            json!({"containers": [{"name": "app", "image": "nginx:1.25", "envFrom": [{"secretRef": {"name": "token"}}]}]}),
        ),
    )
    .await;
    apply(&cp, policy("web", &["web"], &["member1", "member3"], json!({}))).await;
    wait_placed(&members, "apps/v1", "Deployment", Some("default"), "web", &[1, 3]).await;
    env.start_again(Service::DependencyDistributor).await;

    wait_core(&members, "Secret", "token", &[1, 3]).await;
    wait_core(&members, "ConfigMap", "cfg", &[]).await;
    wait_binding_gone(&cp, "default", "cfg-configmap").await;
    wait_required_by(
        &cp,
        "default",
        "token-secret",
        &[("default/web-deployment", &["member1", "member3"])],
    )
    .await;
    // A second restart changes nothing.
    let before = binding(&cp, "default", "token-secret").await.unwrap();
    env.restart(Service::DependencyDistributor).await;
    stays(
        "the attached binding's spec is not rewritten after a restart",
        Duration::from_secs(2),
        || async {
            binding(&cp, "default", "token-secret")
                .await
                .is_some_and(|b| b.metadata.generation == before.metadata.generation)
        },
    )
    .await;
}

/// The YAML of `docs/dependencies.md`, applied as written and in order, does what the guide
/// says: the quick start's ConfigMap and Secret follow `myapp` to member1 and member2, the CA
/// bundle with its own policy goes to the union, and the CRD rule sends `step-1` to member2.
#[tokio::test]
async fn user_guide_examples_work() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    for block in fixtures::doc_yaml_blocks("dependencies.md") {
        for doc in fixtures::documents(&block) {
            if doc["kind"] == "CustomResourceDefinition" {
                // The guide says: install the CRD on the control plane and on every member.
                for client in std::iter::once(&cp).chain(members.iter()) {
                    fixtures::apply_value(client, &doc).await;
                }
                for client in std::iter::once(&cp).chain(members.iter()) {
                    wait_workflows_served(client).await;
                }
            } else {
                fixtures::apply_value(&cp, &doc).await;
            }
        }
    }
    wait_placed(
        &members,
        "apps/v1",
        "Deployment",
        Some("default"),
        "myapp",
        &[1, 2],
    )
    .await;
    wait_core(&members, "ConfigMap", "my-config", &[1, 2]).await;
    wait_core(&members, "Secret", "my-secret", &[1, 2]).await;
    wait_core(&members, "ConfigMap", "ca-bundle", &[1, 2, 3]).await;
    wait_core(&members, "ConfigMap", "step-1", &[2]).await;
    wait_placed(
        &members,
        "example.io/v1",
        "Workflow",
        Some("default"),
        "nightly",
        &[2],
    )
    .await;
    let attached = wait_required_by(
        &cp,
        "default",
        "my-config-configmap",
        &[("default/myapp-deployment", &["member1", "member2"])],
    )
    .await;
    assert_eq!(attached.spec.conflict_resolution, Some(ConflictResolution::Abort));
}

// ----- settled bindings (ADR 0026) ----------------------------------------------------------

/// The distributor's counters: distributing bindings its resync queued and left alone,
/// dependencies left alone, its GETs of Deployments and Workflows (template reads), and all its
/// GETs but its Lease's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ResyncCounts {
    queued: f64,
    settled: f64,
    dependencies_settled: f64,
    template_gets: f64,
    gets: f64,
}

async fn resync_counts(env: &Env) -> ResyncCounts {
    let (_, body) = env
        .http_get(Service::DependencyDistributor, "/metrics")
        .await
        .unwrap();
    let sample = |name: &str| sample_in(&body, name).unwrap_or_default();
    let gets = |resource: &str| {
        series_sum(
            &body,
            "flotilla_control_plane_requests_total",
            &[r#"verb="get""#, resource],
        )
    };
    ResyncCounts {
        queued: sample("flotilla_dependency_resync_bindings_queued_total"),
        settled: sample("flotilla_dependency_resync_bindings_settled_total"),
        dependencies_settled: sample(
            r#"flotilla_dependency_reconciles_total{kind="dependency",result="settled"}"#,
        ),
        template_gets: gets(r#"resource="deployments""#) + gets(r#"resource="workflows""#),
        gets: gets("") - gets(r#"resource="leases""#),
    }
}

/// Waits for resync passes (`--resync-seconds 1`) that leave `bindings` distributing bindings
/// and `dependencies` dependencies alone twice over, queue no binding and read nothing.
async fn wait_resync_leaves_alone(env: &Env, bindings: f64, dependencies: f64) {
    let since = std::rc::Rc::new(std::cell::Cell::new(resync_counts(env).await));
    wait_until(
        "two resync passes that leave every binding and dependency alone and read nothing",
        TIMEOUT,
        || {
            let since = std::rc::Rc::clone(&since);
            async move {
                let now = resync_counts(env).await;
                let before = since.get();
                if now.queued != before.queued || now.gets != before.gets {
                    // Still settling (or a pass queued or read something): count again from here.
                    since.set(now);
                    return None;
                }
                (now.settled >= before.settled + 2.0 * bindings
                    && now.dependencies_settled >= before.dependencies_settled + 2.0 * dependencies)
                    .then_some(())
            }
        },
    )
    .await;
}

fn resync_every_second() -> EnvOptions {
    EnvOptions {
        service_args: BTreeMap::from([(
            Service::DependencyDistributor,
            vec!["--resync-seconds".to_owned(), "1".to_owned()],
        )]),
        ..Default::default()
    }
}

/// A settled binding and a settled dependency cost the resync nothing (no read at all), and a
/// template edit still reaches the distributor through the binding (the detector moves
/// `spec.resource`): two edits applied back to back end with the second one's dependencies in
/// the members, the first one's and the original's cleaned.
#[tokio::test]
async fn the_resync_leaves_settled_bindings_alone_and_template_edits_still_count() {
    let env = Env::start(resync_every_second()).await;
    let cp = env.control_plane_client().await;
    let members = members(&env).await;
    for name in ["cfg", "cfg2", "cfg3"] {
        apply(&cp, config_map("default", name, name)).await;
    }
    let reads = |name: &str| json!({"containers": [{"name": "app", "image": "nginx:1.25", "envFrom": [{"configMapRef": {"name": name}}]}]});
    apply(&cp, deployment("web", reads("cfg"))).await;
    apply(&cp, policy("web", &["web"], &["member1"], json!({}))).await;
    wait_core(&members, "ConfigMap", "cfg", &[1]).await;
    wait_resync_leaves_alone(&env, 1.0, 1.0).await;

    // Two edits, back to back, while the resync keeps running.
    let before = resync_counts(&env).await;
    apply(&cp, deployment("web", reads("cfg2"))).await;
    apply(&cp, deployment("web", reads("cfg3"))).await;
    wait_core(&members, "ConfigMap", "cfg3", &[1]).await;
    wait_core(&members, "ConfigMap", "cfg", &[]).await;
    wait_core(&members, "ConfigMap", "cfg2", &[]).await;
    let recorded = recorded_dependencies(&cp, "default", "web-deployment")
        .await
        .unwrap();
    assert!(
        recorded.contains("\"cfg3\"") && !recorded.contains("\"cfg\"") && !recorded.contains("\"cfg2\""),
        "{recorded}"
    );
    let after = resync_counts(&env).await;
    assert!(
        after.template_gets > before.template_gets,
        "the edit was read from the template: {before:?} -> {after:?}"
    );
    // And it settles again.
    wait_resync_leaves_alone(&env, 1.0, 1.0).await;
    stays_placed(&members, "ConfigMap", "default", "cfg3", &[1]).await;
}

/// New dependency rules unsettle every settled binding: the binding itself does not change,
/// yet the dependencies the new rule names follow the workload.
#[tokio::test]
async fn new_dependency_rules_reach_settled_bindings() {
    let env = Env::start(resync_every_second()).await;
    let (cp, members) = nightly_workflow(&env, ".spec.steps[0].configMap").await;
    wait_core(&members, "ConfigMap", "step-1", &[2]).await;
    wait_resync_leaves_alone(&env, 1.0, 1.0).await;
    assert!(
        holders(&members, "v1", "ConfigMap", Some("default"), "step-2")
            .await
            .is_empty()
    );

    let binding_before = binding(&cp, "default", "nightly-workflow").await.unwrap();
    apply(&cp, workflow_rules(".spec.steps[*].configMap")).await;
    wait_core(&members, "ConfigMap", "step-2", &[2]).await;
    stays_placed(&members, "ConfigMap", "default", "step-1", &[2]).await;
    let binding_after = binding(&cp, "default", "nightly-workflow").await.unwrap();
    assert_eq!(
        binding_before.spec.resource, binding_after.spec.resource,
        "the binding's template inputs did not move; the rules did"
    );
    wait_resync_leaves_alone(&env, 1.0, 2.0).await;
}
