//! Dispatch suspension end to end (issue 6, seed `dispatch-suspension.md`): policies with
//! `suspension` go through detector -> scheduler -> execution, and the assertions are on the
//! member clusters (present / absent / unchanged), on Works (manifest, `Dispatching` condition,
//! events) and on what `kubectl get` shows.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::time::Duration;

use flotilla_api::Work;
use flotilla_api::well_known::execution_namespace;
use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, image_of, member_deployment, replicas_of};
use flotilla_e2e::wait::{stays, wait_until};
use flotilla_e2e::{Env, EnvOptions, Service, eventually};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

/// How long "nothing changes in a suspended cluster" is watched.
const QUIET: Duration = Duration::from_secs(3);

/// A PropagationPolicy `name` for Deployment `template` in `default`, placed on `clusters`,
/// with `extra` appended under `spec:` (two-space indented YAML, e.g. a `suspension:` block).
fn policy_yaml(name: &str, template: &str, clusters: &[&str], extra: &str) -> String {
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
    name: {template}
  placement:
    clusterAffinity:
      clusterNames: [{}]
{extra}"#,
        clusters.join(", ")
    )
}

/// `suspension.dispatching: true` under `spec:`.
const SUSPEND_ALL: &str = "  suspension:\n    dispatching: true\n";

/// `suspension.dispatchingOnClusters` naming `clusters`, under `spec:`.
fn suspend_on(clusters: &[&str]) -> String {
    format!(
        "  suspension:\n    dispatchingOnClusters:\n      clusterNames: [{}]\n",
        clusters.join(", ")
    )
}

/// The image of member `i`'s Deployment `default/name`, if it exists.
async fn member_image(env: &Env, i: usize, name: &str) -> Option<String> {
    let member = env.member_client(i).await;
    member_deployment(&member, "default", name)
        .await
        .as_ref()
        .and_then(image_of)
}

/// Waits until member `i` runs `image` in Deployment `default/name`.
async fn wait_image(env: &Env, i: usize, name: &str, image: &str) {
    let member = env.member_client(i).await;
    fixtures::wait_member_deployment(
        &member,
        "default",
        name,
        &format!("member{i} to run {name} with {image}"),
        |d| image_of(d).as_deref() == Some(image),
    )
    .await;
}

/// The Work of `cluster` whose first manifest is `kind` `name`.
async fn work_of(cp: &Client, cluster: &str, kind: &str, name: &str) -> Option<Work> {
    let api: Api<Work> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    let works = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => vec![],
        Err(e) => panic!("list Works of {cluster}: {e}"),
    };
    works.into_iter().find(|w| {
        w.spec
            .workload
            .manifests
            .first()
            .is_some_and(|m| m["kind"] == kind && m["metadata"]["name"] == name)
    })
}

/// The first container image of a Work's Deployment manifest.
fn work_image(work: &Work) -> String {
    work.spec.workload.manifests[0]["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `(status, reason, message)` of condition `type_` of a Work.
fn work_condition(work: &Work, type_: &str) -> Option<(String, String, String)> {
    let status = work.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until the Work of `cluster` for Deployment `name` satisfies `check`; returns it.
async fn wait_work(
    cp: &Client,
    cluster: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Work) -> bool,
) -> Work {
    wait_until(
        &format!("Work of {name} in {cluster}: {what}"),
        TIMEOUT,
        || async {
            work_of(cp, cluster, "Deployment", name)
                .await
                .filter(|w| check(w))
        },
    )
    .await
}

/// Whether a Work is suspended and says so in its `Dispatching` condition.
fn is_suspended(work: &Work) -> bool {
    work.spec.suspend_dispatching == Some(true)
        && work_condition(work, "Dispatching").is_some_and(|c| c.0 == "False")
}

/// Whether a Work dispatches and has been applied at its generation.
fn is_dispatching(work: &Work) -> bool {
    work.spec.suspend_dispatching != Some(true)
        && work_condition(work, "Dispatching").is_some_and(|c| c.0 == "True")
}

/// Waits until an event with `reason` is recorded about the Work of `cluster` for `name`.
async fn wait_work_event(cp: &Client, cluster: &str, name: &str, reason: &str) {
    let work = work_of(cp, cluster, "Deployment", name).await.unwrap();
    let work_name = work.name_any();
    let api: Api<Event> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    eventually(
        &format!("event {reason} on Work {work_name}"),
        TIMEOUT,
        || async {
            api.list(&ListParams::default())
                .await
                .map(|list| {
                    list.items.iter().any(|e| {
                        e.reason.as_deref() == Some(reason)
                            && e.involved_object.name.as_deref() == Some(work_name.as_str())
                    })
                })
                .unwrap_or(false)
        },
    )
    .await;
}

/// Applies `template` at `image` and waits until every member in `members` runs it.
async fn deploy(env: &Env, cp: &Client, name: &str, replicas: i32, image: &str, members: &[usize]) {
    fixtures::apply(cp, &deployment_yaml("default", name, replicas, image)).await;
    for i in members {
        wait_image(env, *i, name, image).await;
    }
}

/// Asserts for [`QUIET`] that the listed members keep running `image`.
async fn members_keep(env: &Env, name: &str, members: &[usize], image: &str) {
    stays(
        &format!("members {members:?} keep {name} at {image}"),
        QUIET,
        || async {
            for i in members {
                if member_image(env, *i, name).await.as_deref() != Some(image) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}

/// `kubectl <args>` against the control plane; stdout.
fn kubectl(env: &Env, args: &[&str]) -> String {
    flotilla_e2e::tools::stdout_of(
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(env.control_plane.kubeconfig())
            .args(args),
    )
}

/// The value of `column` in the row whose first cell starts with `row_key`, from kubectl's
/// table (cells are located by the header's column offsets, as cells may be empty).
fn table_cell(table: &str, row_key: &str, column: &str) -> Option<String> {
    let mut lines = table.lines();
    let header = lines.next()?;
    let start = header
        .match_indices(column)
        .map(|(i, _)| i)
        .find(|i| header[i + column.len()..].starts_with(' ') || i + column.len() == header.len())?;
    let end = header[start + column.len()..]
        .find(|c: char| c != ' ')
        .map(|offset| start + column.len() + offset);
    let row = lines.find(|l| l.split_whitespace().any(|cell| cell.starts_with(row_key)))?;
    let cell = match end {
        Some(end) => row.get(start..end.min(row.len()))?,
        None => row.get(start..)?,
    };
    Some(cell.trim().to_owned())
}

#[tokio::test]
async fn suspend_all_then_edit_template_then_resume() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;

    // Suspend every cluster, then edit the template.
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, SUSPEND_ALL)).await;
    for cluster in all {
        wait_work(&cp, cluster, "web", "suspended", is_suspended).await;
    }
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v2")).await;
    // Story 4: the control plane computes and keeps the desired state.
    for cluster in all {
        let work = wait_work(&cp, cluster, "web", "holds v2", |w| work_image(w) == "app:v2").await;
        assert_eq!(
            work_condition(&work, "Dispatching"),
            Some((
                "False".to_owned(),
                "SuspendDispatching".to_owned(),
                "Work dispatching is in a suspended state.".to_owned()
            ))
        );
        wait_work_event(&cp, cluster, "web", "DispatchSuspended").await;
    }
    members_keep(&env, "web", &[1, 2, 3], "app:v1").await;

    // kubectl shows the suspension at a glance.
    let works = kubectl(&env, &["get", "work", "-A"]);
    let work_name = work_of(&cp, "member1", "Deployment", "web")
        .await
        .unwrap()
        .name_any();
    assert_eq!(
        table_cell(&works, &work_name, "SUSPENDED").as_deref(),
        Some("true"),
        "{works}"
    );
    assert_eq!(
        table_cell(&works, &work_name, "DISPATCHING").as_deref(),
        Some("False"),
        "{works}"
    );
    let bindings = kubectl(&env, &["get", "rb", "-n", "default"]);
    assert_eq!(
        table_cell(&bindings, "web-deployment", "SUSPENDED").as_deref(),
        Some("true"),
        "{bindings}"
    );

    // Resume: every member gets the latest desired state at once.
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    for i in 1..=3 {
        wait_image(&env, i, "web", "app:v2").await;
    }
    for cluster in all {
        wait_work(&cp, cluster, "web", "dispatching", is_dispatching).await;
        wait_work_event(&cp, cluster, "web", "DispatchResumed").await;
    }
    let works = kubectl(&env, &["get", "work", "-A"]);
    assert_eq!(
        table_cell(&works, &work_name, "DISPATCHING").as_deref(),
        Some("True"),
        "{works}"
    );
}

#[tokio::test]
async fn ordered_rollout_suspend_member2_member3_update_image_resume_member2_then_all() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;

    // Suspend member2 and member3, then update the image: only member1 is updated.
    fixtures::apply(
        &cp,
        &policy_yaml("web", "web", &all, &suspend_on(&["member2", "member3"])),
    )
    .await;
    for cluster in ["member2", "member3"] {
        wait_work(&cp, cluster, "web", "suspended", is_suspended).await;
    }
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v2")).await;
    wait_image(&env, 1, "web", "app:v2").await;
    wait_work(&cp, "member2", "web", "holds v2", |w| work_image(w) == "app:v2").await;
    members_keep(&env, "web", &[2, 3], "app:v1").await;

    // Resume member2 only.
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, &suspend_on(&["member3"]))).await;
    wait_image(&env, 2, "web", "app:v2").await;
    members_keep(&env, "web", &[3], "app:v1").await;

    // Resume all.
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    wait_image(&env, 3, "web", "app:v2").await;
    for cluster in all {
        wait_work(&cp, cluster, "web", "dispatching", is_dispatching).await;
    }
}

#[tokio::test]
async fn rollback_before_resume_suspended_clusters_never_see_the_bad_version() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;
    fixtures::apply(
        &cp,
        &policy_yaml("web", "web", &all, &suspend_on(&["member2", "member3"])),
    )
    .await;
    for cluster in ["member2", "member3"] {
        wait_work(&cp, cluster, "web", "suspended", is_suspended).await;
    }
    let before = member_deployment(&env.member_client(3).await, "default", "web")
        .await
        .unwrap();

    // v2 goes to member1 only, is found bad, and is rolled back before resuming.
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v2-bad")).await;
    wait_image(&env, 1, "web", "app:v2-bad").await;
    members_keep(&env, "web", &[2, 3], "app:v1").await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v1")).await;
    wait_image(&env, 1, "web", "app:v1").await;
    wait_work(&cp, "member3", "web", "holds v1 again", |w| {
        work_image(w) == "app:v1"
    })
    .await;

    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    for cluster in all {
        wait_work(&cp, cluster, "web", "dispatching and applied", |w| {
            is_dispatching(w)
                && work_condition(w, "Applied").is_some_and(|c| c.0 == "True")
                && w.status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Applied"))
                    .is_some_and(|c| c.observed_generation == w.metadata.generation)
        })
        .await;
    }
    let after = member_deployment(&env.member_client(3).await, "default", "web")
        .await
        .unwrap();
    assert_eq!(image_of(&after).as_deref(), Some("app:v1"));
    assert_eq!(
        before.spec.as_ref().map(|s| &s.template),
        after.spec.as_ref().map(|s| &s.template),
        "member3's pod template never changed"
    );
    assert_eq!(member_image(&env, 2, "web").await.as_deref(), Some("app:v1"));
}

#[tokio::test]
async fn delete_while_suspended_removes_member_objects() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, SUSPEND_ALL)).await;
    for cluster in all {
        wait_work(&cp, cluster, "web", "suspended", is_suspended).await;
    }
    fixtures::delete(&cp, &deployment_yaml("default", "web", 1, "app:v1")).await;
    for i in 1..=3 {
        let member = env.member_client(i).await;
        fixtures::wait_member_deployment_gone(&member, "default", "web", &format!("web gone from member{i}"))
            .await;
    }
    for cluster in all {
        eventually(&format!("the Work of {cluster} is gone"), TIMEOUT, || async {
            work_of(&cp, cluster, "Deployment", "web").await.is_none()
        })
        .await;
    }
}

#[tokio::test]
async fn divided_scale_down_while_one_cluster_suspended_keeps_its_object() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let divided = r#"  placement:
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
          weight: 1
"#;
    let policy = |suspension: &str| {
        format!(
            r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
{divided}{suspension}"#
        )
    };
    fixtures::apply(&cp, &policy("")).await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 4, "app:v1")).await;
    for i in [1, 2] {
        let member = env.member_client(i).await;
        fixtures::wait_member_deployment(
            &member,
            "default",
            "web",
            &format!("2 replicas in member{i}"),
            |d| replicas_of(d) == Some(2),
        )
        .await;
    }

    fixtures::apply(&cp, &policy(&suspend_on(&["member2"]))).await;
    wait_work(&cp, "member2", "web", "suspended", is_suspended).await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 2, "app:v1")).await;
    let member1 = env.member_client(1).await;
    fixtures::wait_member_deployment(&member1, "default", "web", "1 replica in member1", |d| {
        replicas_of(d) == Some(1)
    })
    .await;
    // The suspended cluster's Work holds the re-divided replicas, its member keeps 2.
    wait_work(&cp, "member2", "web", "holds 1 replica", |w| {
        w.spec.workload.manifests[0]["spec"]["replicas"] == 1
    })
    .await;
    let member2 = env.member_client(2).await;
    stays("member2 keeps 2 replicas", QUIET, || async {
        member_deployment(&member2, "default", "web")
            .await
            .as_ref()
            .and_then(replicas_of)
            == Some(2)
    })
    .await;

    fixtures::apply(&cp, &policy("")).await;
    fixtures::wait_member_deployment(
        &member2,
        "default",
        "web",
        "1 replica in member2 after resume",
        |d| replicas_of(d) == Some(1),
    )
    .await;
}

/// Applies `variants` of a policy back to back (no waiting in between) and checks the
/// binding, the Works and the members follow the last one only.
async fn rapid_edits_converge(env: &Env, cp: &Client, variants: &[String], binding: (&str, Option<&str>)) {
    for variant in variants {
        fixtures::apply(cp, variant).await;
    }
    // The last variant suspends member3 only.
    let (kind, namespace) = match binding.1 {
        Some(ns) => ("ResourceBinding", Some(ns)),
        None => ("ClusterResourceBinding", None),
    };
    eventually("the binding carries the last suspension", TIMEOUT, || async {
        fixtures::get(cp, "work.karmada.io/v1alpha2", kind, namespace, binding.0)
            .await
            .is_some_and(|b| {
                b.data["spec"]["suspension"]
                    == serde_json::json!({"dispatchingOnClusters": {"clusterNames": ["member3"]}})
            })
    })
    .await;
    wait_work(cp, "member3", "web", "suspended", is_suspended).await;
    for cluster in ["member1", "member2"] {
        wait_work(cp, cluster, "web", "dispatching", is_dispatching).await;
    }
    fixtures::apply(cp, &deployment_yaml("default", "web", 1, "app:v2")).await;
    wait_image(env, 1, "web", "app:v2").await;
    wait_image(env, 2, "web", "app:v2").await;
    members_keep(env, "web", &[3], "app:v1").await;
}

#[tokio::test]
async fn rapid_consecutive_policy_edits_converge_to_the_last() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;
    let variants = vec![
        policy_yaml("web", "web", &all, SUSPEND_ALL),
        policy_yaml("web", "web", &all, &suspend_on(&["member1", "member2"])),
        policy_yaml("web", "web", &all, ""),
        policy_yaml("web", "web", &all, &suspend_on(&["member2"])),
        policy_yaml("web", "web", &all, SUSPEND_ALL),
        policy_yaml("web", "web", &all, &suspend_on(&["member3"])),
    ];
    rapid_edits_converge(&env, &cp, &variants, ("web-deployment", Some("default"))).await;
}

#[tokio::test]
async fn rapid_consecutive_cluster_policy_edits_converge_to_the_last() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let cpp = |extra: &str| {
        format!(
            r#"apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: web
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
    namespace: default
  placement:
    clusterAffinity:
      clusterNames: [member1, member2, member3]
{extra}"#
        )
    };
    fixtures::apply(&cp, &cpp("")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;
    let variants = vec![
        cpp(SUSPEND_ALL),
        cpp(&suspend_on(&["member1"])),
        cpp(""),
        cpp(SUSPEND_ALL),
        cpp(&suspend_on(&["member3"])),
    ];
    rapid_edits_converge(&env, &cp, &variants, ("web-deployment", Some("default"))).await;
    // The CLI edits ClusterPropagationPolicies too.
    flotilla_ok(
        &env,
        &["resume", "web", "--cluster-scoped"],
        "clusterpropagationpolicy web: dispatching to every cluster (not suspended)",
    );
    wait_image(&env, 3, "web", "app:v2").await;
}

#[tokio::test]
async fn kill_execution_while_suspended_then_restart_still_suspended() {
    let mut env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;
    fixtures::apply(
        &cp,
        &policy_yaml("web", "web", &all, &suspend_on(&["member2", "member3"])),
    )
    .await;
    for cluster in ["member2", "member3"] {
        wait_work(&cp, cluster, "web", "suspended", is_suspended).await;
    }

    env.kill(Service::Execution);
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v2")).await;
    env.start_again(Service::Execution).await;
    wait_image(&env, 1, "web", "app:v2").await;
    for cluster in ["member2", "member3"] {
        wait_work(&cp, cluster, "web", "suspended with v2", |w| {
            is_suspended(w) && work_image(w) == "app:v2"
        })
        .await;
    }
    members_keep(&env, "web", &[2, 3], "app:v1").await;

    // A restart with nothing changed on the control plane keeps it suspended too.
    env.restart(Service::Execution).await;
    members_keep(&env, "web", &[2, 3], "app:v1").await;

    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    wait_image(&env, 2, "web", "app:v2").await;
    wait_image(&env, 3, "web", "app:v2").await;
}

#[tokio::test]
async fn alias_spellings_accepted_and_inconsistent_spellings_rejected() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let all = ["member1", "member2", "member3"];
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, "")).await;
    deploy(&env, &cp, "web", 1, "app:v1", &[1, 2, 3]).await;

    // The seed's spelling suspendDispatchingOnClusters, carried canonically into the binding.
    let alias_on = "  suspension:\n    suspendDispatchingOnClusters:\n      clusterNames: [member2]\n";
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, alias_on)).await;
    wait_work(&cp, "member2", "web", "suspended", is_suspended).await;
    let binding = fixtures::get(
        &cp,
        "work.karmada.io/v1alpha2",
        "ResourceBinding",
        Some("default"),
        "web-deployment",
    )
    .await
    .unwrap();
    assert_eq!(
        binding.data["spec"]["suspension"],
        serde_json::json!({"dispatchingOnClusters": {"clusterNames": ["member2"]}})
    );
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v2")).await;
    wait_image(&env, 1, "web", "app:v2").await;
    wait_image(&env, 3, "web", "app:v2").await;
    members_keep(&env, "web", &[2], "app:v1").await;

    // The seed's spelling suspendDispatching.
    let alias_all = "  suspension:\n    suspendDispatching: true\n";
    fixtures::apply(&cp, &policy_yaml("web", "web", &all, alias_all)).await;
    for cluster in all {
        wait_work(&cp, cluster, "web", "suspended", is_suspended).await;
    }
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "app:v3")).await;
    wait_work(&cp, "member1", "web", "holds v3", |w| work_image(w) == "app:v3").await;
    members_keep(&env, "web", &[1, 3], "app:v2").await;

    // Both spellings, inconsistent: refused by the API with a message naming the fields.
    let inconsistent = "  suspension:\n    dispatching: true\n    suspendDispatching: false\n";
    let error = fixtures::try_apply(&cp, &policy_yaml("web", "web", &all, inconsistent))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected an API error, got {error}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.suspension.suspendDispatching")
            && status.message.contains("conflicts with dispatching"),
        "{}",
        status.message
    );
    let inconsistent_on = "  suspension:\n    dispatchingOnClusters:\n      clusterNames: [member1]\n    suspendDispatchingOnClusters:\n      clusterNames: [member2]\n";
    let error = fixtures::try_apply(&cp, &policy_yaml("web", "web", &all, inconsistent_on))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected an API error, got {error}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.suspension.suspendDispatchingOnClusters"),
        "{}",
        status.message
    );
    let both =
        "  suspension:\n    dispatching: true\n    dispatchingOnClusters:\n      clusterNames: [member2]\n";
    let error = fixtures::try_apply(&cp, &policy_yaml("web", "web", &all, both))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected an API error, got {error}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("cannot be combined with dispatching"),
        "{}",
        status.message
    );
    // The refused edits changed nothing: still suspended everywhere (member2 since v1).
    members_keep(&env, "web", &[1, 3], "app:v2").await;
    assert_eq!(member_image(&env, 2, "web").await.as_deref(), Some("app:v1"));
}

/// Runs the real `flotilla` binary against the control plane: (success, stdout, stderr).
fn flotilla(env: &Env, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(flotilla_e2e::binaries::binary("flotilla"))
        .args(args)
        .env("KUBECONFIG", env.control_plane.kubeconfig())
        .output()
        .unwrap_or_else(|e| panic!("cannot run flotilla: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    )
}

/// Runs `flotilla`, asserting success and the printed state.
fn flotilla_ok(env: &Env, args: &[&str], expected: &str) {
    let (ok, stdout, stderr) = flotilla(env, args);
    assert!(ok, "flotilla {args:?} failed: {stderr}");
    assert_eq!(stdout, expected, "flotilla {args:?}");
}

#[tokio::test]
async fn docs_rollout_walkthrough_with_flotilla_suspend_and_resume() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    let blocks = fixtures::doc_yaml_blocks("suspension.md");
    assert_eq!(blocks.len(), 3, "docs/suspension.md YAML examples");
    let (template_and_policy, suspend_all, alias_on) = (&blocks[0], &blocks[1], &blocks[2]);
    fixtures::apply(&cp, template_and_policy).await;
    for i in 1..=3 {
        wait_image(&env, i, "nginx", "nginx:1.25").await;
    }
    let template_v = |image: &str| {
        let template = template_and_policy.split("\n---\n").next().unwrap();
        template.replace("nginx:1.25", image)
    };

    // The YAML way: suspend every cluster, then resume by applying the policy without it.
    fixtures::apply(&cp, suspend_all).await;
    for cluster in ["member1", "member2", "member3"] {
        wait_work(&cp, cluster, "nginx", "suspended", is_suspended).await;
    }
    fixtures::apply(&cp, template_and_policy).await;
    for cluster in ["member1", "member2", "member3"] {
        wait_work(&cp, cluster, "nginx", "dispatching", is_dispatching).await;
    }

    // The walkthrough: release 1.26 to member1 first.
    flotilla_ok(
        &env,
        &["suspend", "nginx-propagation", "--clusters", "member2,member3"],
        "propagationpolicy default/nginx-propagation: dispatching suspended on member2, member3",
    );
    for cluster in ["member2", "member3"] {
        wait_work(&cp, cluster, "nginx", "suspended", is_suspended).await;
    }
    fixtures::apply(&cp, &template_v("nginx:1.26")).await;
    wait_image(&env, 1, "nginx", "nginx:1.26").await;
    wait_work(&cp, "member2", "nginx", "holds 1.26 (Story 4)", |w| {
        work_image(w) == "nginx:1.26"
    })
    .await;
    members_keep(&env, "nginx", &[2, 3], "nginx:1.25").await;
    let bindings = kubectl(&env, &["get", "rb", "-n", "default", "-o", "wide"]);
    assert_eq!(
        table_cell(&bindings, "nginx-deployment", "SUSPENDED-CLUSTERS").as_deref(),
        Some("[\"member2\",\"member3\"]"),
        "{bindings}"
    );

    flotilla_ok(
        &env,
        &["resume", "nginx-propagation", "--clusters", "member2"],
        "propagationpolicy default/nginx-propagation: dispatching suspended on member3",
    );
    wait_image(&env, 2, "nginx", "nginx:1.26").await;
    members_keep(&env, "nginx", &[3], "nginx:1.25").await;
    flotilla_ok(
        &env,
        &["resume", "nginx-propagation"],
        "propagationpolicy default/nginx-propagation: dispatching to every cluster (not suspended)",
    );
    wait_image(&env, 3, "nginx", "nginx:1.26").await;

    // The seed's spelling, then the CLI rewrites it canonically.
    fixtures::apply(&cp, alias_on).await;
    for cluster in ["member2", "member3"] {
        wait_work(&cp, cluster, "nginx", "suspended", is_suspended).await;
    }
    flotilla_ok(
        &env,
        &[
            "resume",
            "nginx-propagation",
            "-n",
            "default",
            "--clusters",
            "member3",
        ],
        "propagationpolicy default/nginx-propagation: dispatching suspended on member2",
    );
    let policy = fixtures::get(
        &cp,
        "policy.karmada.io/v1alpha1",
        "PropagationPolicy",
        Some("default"),
        "nginx-propagation",
    )
    .await
    .unwrap();
    assert_eq!(
        policy.data["spec"]["suspension"],
        serde_json::json!({"dispatchingOnClusters": {"clusterNames": ["member2"]}})
    );
    wait_work(&cp, "member3", "nginx", "dispatching", is_dispatching).await;

    // Suspending what is already suspended is reported as unchanged; a typo is warned about.
    flotilla_ok(
        &env,
        &["suspend", "nginx-propagation"],
        "propagationpolicy default/nginx-propagation: dispatching suspended on every cluster",
    );
    flotilla_ok(
        &env,
        &["suspend", "nginx-propagation", "--clusters", "membr2"],
        "propagationpolicy default/nginx-propagation: dispatching suspended on every cluster (unchanged)\n\
         warning: membr2 is not a registered cluster",
    );
    for cluster in ["member1", "member2", "member3"] {
        wait_work(&cp, cluster, "nginx", "suspended", is_suspended).await;
    }
    // Resuming one cluster out of "every cluster" keeps the other registered ones, by name.
    flotilla_ok(
        &env,
        &["resume", "nginx-propagation", "--clusters", "member1"],
        "propagationpolicy default/nginx-propagation: dispatching suspended on member2, member3",
    );

    // Errors name the problem.
    let (ok, _, stderr) = flotilla(&env, &["suspend", "missing"]);
    assert!(!ok);
    assert!(
        stderr.contains("propagationpolicy default/missing not found"),
        "{stderr}"
    );
    let (ok, _, stderr) = flotilla(&env, &["resume", "nginx-propagation", "--clusters", "Member1"]);
    assert!(!ok);
    assert!(stderr.contains("\"Member1\" is not a cluster name"), "{stderr}");
}
