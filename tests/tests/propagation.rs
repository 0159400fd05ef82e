//! Placement and lifecycle of propagated templates, end to end (issue 4, "Tests"): real
//! detector, scheduler, execution and dependency-distributor processes against real
//! flotilla-apiservers, asserting on what the MEMBER clusters hold.
//!
//! Every scenario the issue names is its own test function. They share one installation (see
//! [`shared_env`]): each works on its own objects, so they cannot see each other, and the file
//! starts one set of processes instead of ten.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Weak};
use std::time::Duration;

use flotilla_e2e::fixtures::{
    self, TIMEOUT, api_for, deployment_yaml, image_of, member_deployment, replicas_of,
    wait_member_deployment, wait_member_deployment_gone,
};
use flotilla_e2e::wait::stays;
use flotilla_e2e::{Env, EnvOptions, eventually, wait_until};
use kube::Client;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// The installation the running tests share, kept while any test holds it.
static SHARED: tokio::sync::Mutex<Weak<Env>> = tokio::sync::Mutex::const_new(Weak::new());

/// A test's handle on the shared installation; prints the logs if the test fails.
struct SharedEnv(Arc<Env>);

impl Deref for SharedEnv {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.0
    }
}

impl Drop for SharedEnv {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.dump_logs(60);
        }
    }
}

/// The installation shared by the tests that run at the same time: three members, `member1`
/// and `member2` labelled `env: prod` (only [`label_selector_affinity_follows_cluster_label_changes`]
/// looks at labels; it is the only test changing Cluster objects). Started by the first test
/// that needs it, stopped when the last one holding it ends. Nothing in an [`Env`] is tied to
/// the runtime that started it (processes and files), so tests on their own runtimes share it.
async fn shared_env() -> SharedEnv {
    let mut shared = SHARED.lock().await;
    if let Some(env) = shared.upgrade() {
        return SharedEnv(env);
    }
    let prod: BTreeMap<String, String> = [("env".to_owned(), "prod".to_owned())].into();
    let env = Arc::new(
        Env::start(EnvOptions {
            member_labels: [(0, prod.clone()), (1, prod)].into(),
            ..Default::default()
        })
        .await,
    );
    *shared = Arc::downgrade(&env);
    SharedEnv(env)
}

/// How long "nothing happens" is watched for.
const QUIET: Duration = Duration::from_secs(3);

/// A PropagationPolicy in `default` selecting the Deployment `deployment`, with `spec` (YAML,
/// indented by two spaces, without `resourceSelectors`) appended.
fn policy_for(name: &str, deployment: &str, spec: &str) -> String {
    format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: {name}
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: {deployment}
{spec}"#
    )
}

/// Every object of `api_version`/`kind` (in `namespace`, or cluster-wide).
async fn list(client: &Client, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<DynamicObject> {
    let probe = json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": "x", "namespace": namespace.unwrap_or("default")},
    });
    let api = api_for(client, &probe).await;
    api.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list {kind}: {e}"))
        .items
}

/// The Works of binding `default/<binding>` in `cluster`'s execution namespace.
async fn works_of(cp: &Client, cluster: &str, binding: &str) -> Vec<Value> {
    list(
        cp,
        "work.karmada.io/v1alpha1",
        "Work",
        Some(&format!("karmada-es-{cluster}")),
    )
    .await
    .into_iter()
    .map(|w| serde_json::to_value(w).unwrap())
    .filter(|w| w["metadata"]["annotations"]["resourcebinding.karmada.io/name"] == binding)
    .collect()
}

/// Merge-patches the labels of Cluster `cluster` (`null` removes a label).
async fn patch_cluster_labels(cp: &Client, cluster: &str, labels: Value) {
    let probe = json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": cluster}});
    let api = api_for(cp, &probe).await;
    api.patch(
        cluster,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": labels}})),
    )
    .await
    .unwrap_or_else(|e| panic!("label Cluster {cluster}: {e}"));
}

/// Asserts that `member` (1-based) does not get Deployment `default/name` for a while.
async fn never_gets(env: &Env, member: usize, name: &str) {
    let client = env.member_client(member).await;
    stays(
        &format!("member{member} without Deployment {name}"),
        QUIET,
        || async { member_deployment(&client, "default", name).await.is_none() },
    )
    .await;
}

/// Waits until every member in `members` (1-based) has Deployment `default/name` with
/// `replicas` and `image`.
async fn wait_on_members(env: &Env, members: &[usize], name: &str, replicas: i32, image: &str) {
    for &i in members {
        let client = env.member_client(i).await;
        wait_member_deployment(
            &client,
            "default",
            name,
            &format!("{name} in member{i} with {replicas} replicas of {image}"),
            |d| replicas_of(d) == Some(replicas) && image_of(d).as_deref() == Some(image),
        )
        .await;
    }
}

#[tokio::test]
async fn duplicated_to_two_of_three_clusters() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "dup", 3, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "dup",
            "dup",
            r"  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaSchedulingType: Duplicated
",
        ),
    )
    .await;

    wait_on_members(&env, &[1, 2], "dup", 3, "nginx:1.25").await;
    let one = member_deployment(&env.member_client(1).await, "default", "dup")
        .await
        .unwrap();
    let two = member_deployment(&env.member_client(2).await, "default", "dup")
        .await
        .unwrap();
    assert_eq!(one.spec, two.spec, "both members run the same Deployment spec");
    never_gets(&env, 3, "dup").await;

    // Exactly one Work per target cluster, none for member3.
    assert_eq!(works_of(&cp, "member1", "dup-deployment").await.len(), 1);
    assert_eq!(works_of(&cp, "member2", "dup-deployment").await.len(), 1);
    assert!(works_of(&cp, "member3", "dup-deployment").await.is_empty());
}

#[tokio::test]
async fn divided_five_replicas_weighted_one_to_two() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "div", 5, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "div",
            "div",
            r"  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster:
            clusterNames: [member1]
          weight: 1
        - targetCluster:
            clusterNames: [member2]
          weight: 2
",
        ),
    )
    .await;

    // crates/scheduler/src/webster.rs documents it: 5 replicas with weights 1:2 give 2 and 3.
    wait_on_members(&env, &[1], "div", 2, "nginx:1.25").await;
    wait_on_members(&env, &[2], "div", 3, "nginx:1.25").await;
    never_gets(&env, 3, "div").await;
    let mut sum = 0;
    for i in 1..=3 {
        if let Some(d) = member_deployment(&env.member_client(i).await, "default", "div").await {
            sum += replicas_of(&d).unwrap();
        }
    }
    assert_eq!(sum, 5, "the members run exactly the template's replicas");

    // Scaling keeps the proportion: 8 replicas at 1:2 are 3 and 5 (seats B, A, B, B, A, B, B, A).
    fixtures::apply(&cp, &deployment_yaml("default", "div", 8, "nginx:1.25")).await;
    wait_on_members(&env, &[1], "div", 3, "nginx:1.25").await;
    wait_on_members(&env, &[2], "div", 5, "nginx:1.25").await;
}

#[tokio::test]
async fn label_selector_affinity_follows_cluster_label_changes() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "lbl", 2, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "lbl",
            "lbl",
            r"  placement:
    clusterAffinity:
      labelSelector:
        matchLabels:
          env: prod
",
        ),
    )
    .await;
    wait_on_members(&env, &[1, 2], "lbl", 2, "nginx:1.25").await;
    never_gets(&env, 3, "lbl").await;

    // member3 gains the label: it gains the Deployment.
    patch_cluster_labels(&cp, "member3", json!({"env": "prod"})).await;
    wait_on_members(&env, &[3], "lbl", 2, "nginx:1.25").await;

    // member1 loses the label: it loses the Deployment; the others keep theirs.
    patch_cluster_labels(&cp, "member1", json!({"env": null})).await;
    wait_member_deployment_gone(
        &env.member_client(1).await,
        "default",
        "lbl",
        "lbl gone from member1",
    )
    .await;
    for i in [2, 3] {
        assert!(
            member_deployment(&env.member_client(i).await, "default", "lbl")
                .await
                .is_some()
        );
    }
    // member1's Work is gone with it; member3 has one.
    eventually("the lbl Work of member1 to be gone", TIMEOUT, || async {
        works_of(&cp, "member1", "lbl-deployment").await.is_empty()
    })
    .await;
    assert_eq!(works_of(&cp, "member3", "lbl-deployment").await.len(), 1);
}

#[tokio::test]
async fn priority_preemption_always_takes_the_claim_never_does_not() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "pri", 1, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "low",
            "pri",
            r"  priority: 1
  placement:
    clusterAffinity:
      clusterNames: [member1]
",
        ),
    )
    .await;
    wait_on_members(&env, &[1], "pri", 1, "nginx:1.25").await;

    // A higher-priority policy with the default preemption (Never) does not take the claim.
    let high = |preemption: &str| {
        policy_for(
            "high",
            "pri",
            &format!(
                r"  priority: 10
  preemption: {preemption}
  placement:
    clusterAffinity:
      clusterNames: [member2]
"
            ),
        )
    };
    fixtures::apply(&cp, &high("Never")).await;
    never_gets(&env, 2, "pri").await;
    let template = fixtures::get(&cp, "apps/v1", "Deployment", Some("default"), "pri")
        .await
        .unwrap();
    assert_eq!(
        template.metadata.annotations.unwrap_or_default()["propagationpolicy.karmada.io/name"],
        "low",
        "the lower-priority policy keeps its claim"
    );
    assert!(
        member_deployment(&env.member_client(1).await, "default", "pri")
            .await
            .is_some()
    );

    // preemption: Always: the higher-priority policy takes the claim and the member set moves.
    fixtures::apply(&cp, &high("Always")).await;
    wait_on_members(&env, &[2], "pri", 1, "nginx:1.25").await;
    wait_member_deployment_gone(
        &env.member_client(1).await,
        "default",
        "pri",
        "pri gone from member1",
    )
    .await;
    let template = fixtures::get(&cp, "apps/v1", "Deployment", Some("default"), "pri")
        .await
        .unwrap();
    assert_eq!(
        template.metadata.annotations.unwrap_or_default()["propagationpolicy.karmada.io/name"],
        "high"
    );
    never_gets(&env, 3, "pri").await;
}

#[tokio::test]
async fn policy_deletion_leaves_member_objects_in_place() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "keep", 2, "nginx:1.25")).await;
    let policy = policy_for(
        "keep",
        "keep",
        r"  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
",
    );
    fixtures::apply(&cp, &policy).await;
    wait_on_members(&env, &[1, 2], "keep", 2, "nginx:1.25").await;

    fixtures::delete(&cp, &policy).await;
    // The claim goes away from the template...
    eventually("the template to lose its claim", TIMEOUT, || async {
        let template = fixtures::get(&cp, "apps/v1", "Deployment", Some("default"), "keep")
            .await
            .unwrap();
        !template
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("propagationpolicy.karmada.io/name")
    })
    .await;
    // ...but the member objects stay.
    let (m1, m2) = (env.member_client(1).await, env.member_client(2).await);
    stays("member objects kept after policy deletion", QUIET, || async {
        member_deployment(&m1, "default", "keep").await.is_some()
            && member_deployment(&m2, "default", "keep").await.is_some()
    })
    .await;

    // The next matching policy takes the template over, and its placement applies.
    fixtures::apply(
        &cp,
        &policy_for(
            "keep-next",
            "keep",
            r"  placement:
    clusterAffinity:
      clusterNames: [member3]
",
        ),
    )
    .await;
    wait_on_members(&env, &[3], "keep", 2, "nginx:1.25").await;
    wait_member_deployment_gone(&m1, "default", "keep", "keep moved off member1").await;
    wait_member_deployment_gone(&m2, "default", "keep", "keep moved off member2").await;
}

#[tokio::test]
async fn template_update_propagates_to_every_member() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "upd", 2, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "upd",
            "upd",
            r"  placement:
    clusterAffinity:
      clusterNames: [member1, member2, member3]
",
        ),
    )
    .await;
    wait_on_members(&env, &[1, 2, 3], "upd", 2, "nginx:1.25").await;

    fixtures::apply(&cp, &deployment_yaml("default", "upd", 2, "nginx:1.27")).await;
    wait_on_members(&env, &[1, 2, 3], "upd", 2, "nginx:1.27").await;
}

#[tokio::test]
async fn template_deletion_removes_member_objects() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    let template = deployment_yaml("default", "gone", 1, "nginx:1.25");
    fixtures::apply(&cp, &template).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "gone",
            "gone",
            r"  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
",
        ),
    )
    .await;
    wait_on_members(&env, &[1, 2], "gone", 1, "nginx:1.25").await;

    fixtures::delete(&cp, &template).await;
    for i in [1, 2] {
        let member = env.member_client(i).await;
        wait_member_deployment_gone(
            &member,
            "default",
            "gone",
            &format!("gone removed from member{i}"),
        )
        .await;
    }
    // No binding and no Work is left behind.
    eventually("the binding and its Works to be gone", TIMEOUT, || async {
        fixtures::get(
            &cp,
            "work.karmada.io/v1alpha2",
            "ResourceBinding",
            Some("default"),
            "gone-deployment",
        )
        .await
        .is_none()
            && works_of(&cp, "member1", "gone-deployment").await.is_empty()
            && works_of(&cp, "member2", "gone-deployment").await.is_empty()
    })
    .await;
}

#[tokio::test]
async fn preserve_resources_on_deletion_keeps_member_objects() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    let template = deployment_yaml("default", "kept", 1, "nginx:1.25");
    fixtures::apply(&cp, &template).await;
    fixtures::apply(
        &cp,
        &policy_for(
            "kept",
            "kept",
            r"  preserveResourcesOnDeletion: true
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
",
        ),
    )
    .await;
    wait_on_members(&env, &[1, 2], "kept", 1, "nginx:1.25").await;

    fixtures::delete(&cp, &template).await;
    // The control plane cleans up its own objects...
    eventually("the binding and its Works to be gone", TIMEOUT, || async {
        fixtures::get(
            &cp,
            "work.karmada.io/v1alpha2",
            "ResourceBinding",
            Some("default"),
            "kept-deployment",
        )
        .await
        .is_none()
            && works_of(&cp, "member1", "kept-deployment").await.is_empty()
            && works_of(&cp, "member2", "kept-deployment").await.is_empty()
    })
    .await;
    // ...and the member objects stay.
    let (m1, m2) = (env.member_client(1).await, env.member_client(2).await);
    stays("member objects preserved", QUIET, || async {
        member_deployment(&m1, "default", "kept").await.is_some()
            && member_deployment(&m2, "default", "kept").await.is_some()
    })
    .await;
}

#[tokio::test]
async fn conflict_resolution_abort_vs_overwrite_on_existing_member_object() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    let member1 = env.member_client(1).await;
    // Objects created directly in member1, not by flotilla.
    for name in ["abort", "overwrite"] {
        fixtures::apply(&member1, &deployment_yaml("default", name, 1, "member:own")).await;
    }
    let resolution = |name: &str, resolution: &str| {
        policy_for(
            name,
            name,
            &format!(
                r"  conflictResolution: {resolution}
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
"
            ),
        )
    };
    for (name, how) in [("abort", "Abort"), ("overwrite", "Overwrite")] {
        fixtures::apply(&cp, &deployment_yaml("default", name, 2, "nginx:1.25")).await;
        fixtures::apply(&cp, &resolution(name, how)).await;
    }

    // Overwrite: flotilla takes the member object over.
    let taken = wait_member_deployment(&member1, "default", "overwrite", "overwrite taken over", |d| {
        image_of(d).as_deref() == Some("nginx:1.25") && replicas_of(d) == Some(2)
    })
    .await;
    assert_eq!(
        taken
            .metadata
            .labels
            .unwrap_or_default()
            .get("karmada.io/managed")
            .map(String::as_str),
        Some("true")
    );

    // Abort: member2 (no conflict) gets it; member1's Work says why it did not.
    wait_on_members(&env, &[2], "abort", 2, "nginx:1.25").await;
    let work = wait_until(
        "the abort Work in member1 to report the conflict",
        TIMEOUT,
        || async {
            works_of(&cp, "member1", "abort-deployment")
                .await
                .into_iter()
                .find(|w| {
                    fixtures::condition(w, "Applied")
                        .is_some_and(|c| c["status"] == "False" && c["reason"] == "Conflict")
                })
        },
    )
    .await;
    let message = fixtures::condition(&work, "Applied").unwrap()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("abort"),
        "the conflict message names the object: {message}"
    );
    eventually("the binding to be not FullyApplied", TIMEOUT, || async {
        let binding = fixtures::get(
            &cp,
            "work.karmada.io/v1alpha2",
            "ResourceBinding",
            Some("default"),
            "abort-deployment",
        )
        .await
        .unwrap();
        fixtures::condition(&serde_json::to_value(&binding).unwrap(), "FullyApplied")
            .is_some_and(|c| c["status"] == "False")
    })
    .await;
    stays("member1's own abort Deployment untouched", QUIET, || async {
        let d = member_deployment(&member1, "default", "abort").await.unwrap();
        image_of(&d).as_deref() == Some("member:own")
            && replicas_of(&d) == Some(1)
            && !d
                .metadata
                .labels
                .unwrap_or_default()
                .contains_key("karmada.io/managed")
    })
    .await;

    // Switching the policy to Overwrite reaches the binding and its Work: now it is taken over.
    fixtures::apply(&cp, &resolution("abort", "Overwrite")).await;
    wait_member_deployment(
        &member1,
        "default",
        "abort",
        "abort taken over after the switch",
        |d| {
            image_of(d).as_deref() == Some("nginx:1.25")
                && d.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("karmada.io/managed"))
                    .map(String::as_str)
                    == Some("true")
        },
    )
    .await;
    eventually("the abort Work in member1 to be applied", TIMEOUT, || async {
        works_of(&cp, "member1", "abort-deployment")
            .await
            .iter()
            .any(|w| fixtures::condition(w, "Applied").is_some_and(|c| c["status"] == "True"))
    })
    .await;
}

/// A cluster-scoped CRD, `widgets.example.com`.
const WIDGET_CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Cluster
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
";

/// Applies the Widget CRD and waits until `client` serves it.
async fn install_widget_crd(client: &Client) {
    fixtures::apply(client, WIDGET_CRD).await;
    eventually("widgets.example.com to be served", TIMEOUT, || async {
        kube::discovery::pinned_kind(
            client,
            &kube::core::GroupVersionKind::gvk("example.com", "v1", "Widget"),
        )
        .await
        .is_ok()
    })
    .await;
}

#[tokio::test]
async fn cluster_propagation_policy_namespace_and_cluster_scoped_crd() {
    let env = shared_env().await;
    let cp = env.control_plane_client().await;
    install_widget_crd(&cp).await;
    for i in 1..=3 {
        install_widget_crd(&env.member_client(i).await).await;
    }
    // `team-a` opts out of automatic namespace propagation, so only the policy places it.
    fixtures::apply(
        &cp,
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels:
    namespace.karmada.io/skip-auto-propagation: "true"
    team: a
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: gizmo
spec:
  size: 3
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: team-a
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: Namespace
    name: team-a
  - apiVersion: example.com/v1
    kind: Widget
    name: gizmo
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
"#,
    )
    .await;

    for i in [1, 2] {
        let member = env.member_client(i).await;
        let namespace = wait_until(&format!("namespace team-a in member{i}"), TIMEOUT, || async {
            fixtures::get(&member, "v1", "Namespace", None, "team-a").await
        })
        .await;
        assert_eq!(namespace.metadata.labels.unwrap_or_default()["team"], "a");
        let widget = wait_until(&format!("widget gizmo in member{i}"), TIMEOUT, || async {
            fixtures::get(&member, "example.com/v1", "Widget", None, "gizmo").await
        })
        .await;
        assert_eq!(widget.data["spec"]["size"], 3);
    }
    let member3 = env.member_client(3).await;
    stays("member3 without team-a and gizmo", QUIET, || async {
        fixtures::get(&member3, "v1", "Namespace", None, "team-a")
            .await
            .is_none()
            && fixtures::get(&member3, "example.com/v1", "Widget", None, "gizmo")
                .await
                .is_none()
    })
    .await;
    // Both are cluster-scoped templates: ClusterResourceBindings.
    for name in ["team-a-namespace", "gizmo-widget"] {
        assert!(
            fixtures::get(
                &cp,
                "work.karmada.io/v1alpha2",
                "ClusterResourceBinding",
                None,
                name
            )
            .await
            .is_some(),
            "ClusterResourceBinding {name}"
        );
    }

    // An edit of the cluster-scoped object reaches the members.
    fixtures::apply(
        &cp,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gizmo\nspec:\n  size: 5\n",
    )
    .await;
    for i in [1, 2] {
        let member = env.member_client(i).await;
        eventually(&format!("gizmo resized in member{i}"), TIMEOUT, || async {
            fixtures::get(&member, "example.com/v1", "Widget", None, "gizmo")
                .await
                .is_some_and(|w| w.data["spec"]["size"] == 5)
        })
        .await;
    }

    // A namespace the policy selects that is also propagated automatically (no opt-out): both
    // Works apply the same member Namespace, and neither may report a conflict.
    fixtures::apply(
        &cp,
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-b
  labels:
    team: b
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: team-b
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: Namespace
    name: team-b
  placement:
    clusterAffinity:
      clusterNames: [member1]
"#,
    )
    .await;
    for i in 1..=3 {
        let member = env.member_client(i).await;
        eventually(&format!("namespace team-b in member{i}"), TIMEOUT, || async {
            fixtures::get(&member, "v1", "Namespace", None, "team-b")
                .await
                .is_some()
        })
        .await;
    }
    let applied = |work: &Value| fixtures::condition(work, "Applied").is_some_and(|c| c["status"] == "True");
    let team_b_works = || async {
        list(
            &cp,
            "work.karmada.io/v1alpha1",
            "Work",
            Some("karmada-es-member1"),
        )
        .await
        .into_iter()
        .map(|w| serde_json::to_value(w).unwrap())
        .filter(|w| {
            w["metadata"]["annotations"]["clusterresourcebinding.karmada.io/name"] == "team-b-namespace"
                || w["metadata"]["labels"]["flotilla.io/propagated-namespace"] == "team-b"
        })
        .collect::<Vec<Value>>()
    };
    eventually("both team-b Works in member1 to be applied", TIMEOUT, || async {
        let works = team_b_works().await;
        works.len() == 2 && works.iter().all(applied)
    })
    .await;
    // ...and they do not take the member Namespace from each other: it is written no more.
    let member1 = env.member_client(1).await;
    let version = |ns: Option<DynamicObject>| ns.and_then(|n| n.metadata.resource_version);
    let settled = version(fixtures::get(&member1, "v1", "Namespace", None, "team-b").await);
    assert!(settled.is_some());
    stays(
        "both team-b Works applied, member1's team-b unchanged",
        QUIET,
        || async {
            let works = team_b_works().await;
            works.len() == 2
                && works.iter().all(applied)
                && version(fixtures::get(&member1, "v1", "Namespace", None, "team-b").await) == settled
        },
    )
    .await;
}
