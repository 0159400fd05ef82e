//! Failover end to end (issue 16), named after Karmada's documented cases (its
//! `test/e2e/suites/base/failover_test.go` and the user guide's failover pages): a member's API
//! server is stopped, the Cluster is tainted `cluster.karmada.io/not-ready:NoExecute`, the
//! workloads move per their policy (purge modes, tolerations, suspension, Lazy activation),
//! the member is started again and loses its taint without keeping a second copy; an
//! application made unhealthy in one member moves away (application failover); Karmada's
//! ClusterTaintPolicy examples taint a member from its conditions (its own `Ready` and ones a
//! monitoring system reports). Services are killed with SIGKILL in the middle of evictions:
//! every timing is read back from the API.
//!
//! Timings are shortened by flags (`--cluster-probe-period`, `--failover-eviction-timeout`,
//! `--graceful-eviction-timeout`) and by the policies' own `tolerationSeconds` /
//! `gracePeriodSeconds`; every wait has a deadline, never a fixed sleep.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::well_known::{NOT_READY_TAINT_KEY, execution_namespace};
use flotilla_api::{Cluster, ResourceBinding, Work};
use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, member_deployment};
use flotilla_e2e::wait::{eventually, stays, wait_until};
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Taint};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// How long "nothing happens" is watched.
const QUIET: Duration = Duration::from_secs(3);

const NS: &str = "default";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A PropagationPolicy for Deployment `name` in `default` that prefers member1 and falls back
/// to member2 (Karmada's `clusterAffinities`, its documented way to fail over between cluster
/// groups), with `extra` spec lines (2-space indented YAML).
fn policy(name: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: {name}
  namespace: {NS}
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: {name}
  placement:
    clusterAffinities:
    - affinityName: primary
      clusterNames: [member1]
    - affinityName: backup
      clusterNames: [member2]
{extra}"#
    )
}

/// The services' flags that make failover fast enough for a test.
fn fast_failover(graceful_eviction_timeout: &str) -> BTreeMap<Service, Vec<String>> {
    let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    BTreeMap::from([
        (
            Service::Execution,
            args(&[
                "--cluster-probe-period=1s",
                "--member-timeout=3s",
                "--failover-eviction-timeout=2s",
            ]),
        ),
        (
            Service::Scheduler,
            vec![format!("--graceful-eviction-timeout={graceful_eviction_timeout}")],
        ),
    ])
}

async fn binding(cp: &Client, name: &str) -> Option<ResourceBinding> {
    let api: Api<ResourceBinding> = Api::namespaced(cp.clone(), NS);
    api.get_opt(&format!("{name}-deployment")).await.unwrap()
}

/// The target clusters of the binding of Deployment `name`.
async fn targets(cp: &Client, name: &str) -> Vec<String> {
    binding(cp, name)
        .await
        .map(|b| b.spec.clusters.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default()
}

/// Waits until the binding of `name` targets exactly `clusters`; returns it.
async fn wait_targets(cp: &Client, name: &str, clusters: &[&str]) -> ResourceBinding {
    wait_until(&format!("{name} to target {clusters:?}"), TIMEOUT, || async {
        binding(cp, name).await.filter(|b| {
            b.spec
                .clusters
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                == clusters
                && b.status.as_ref().and_then(|s| s.scheduler_observed_generation) == b.metadata.generation
        })
    })
    .await
}

/// The Work of Deployment `name` in `cluster`'s execution namespace.
async fn work(cp: &Client, cluster: &str, name: &str) -> Option<Work> {
    let api: Api<Work> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    let works = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => vec![],
        Err(e) => panic!("list Works of {cluster}: {e}"),
    };
    let binding = format!("{name}-deployment");
    works.into_iter().find(|w| {
        w.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("resourcebinding.karmada.io/name"))
            == Some(&binding)
    })
}

/// Whether member `i` has Deployment `default/name`.
async fn on_member(env: &Env, i: usize, name: &str) -> bool {
    member_deployment(&env.member_client(i).await, NS, name)
        .await
        .is_some()
}

async fn wait_on_member(env: &Env, i: usize, name: &str) {
    let member = env.member_client(i).await;
    fixtures::wait_member_deployment(&member, NS, name, &format!("{name} on member{i}"), |_| true).await;
}

async fn wait_gone_from_member(env: &Env, i: usize, name: &str) {
    let member = env.member_client(i).await;
    fixtures::wait_member_deployment_gone(&member, NS, name, &format!("{name} to leave member{i}")).await;
}

/// The failover taints (`cluster.karmada.io/*`) of Cluster `name`.
async fn failover_taints(cp: &Client, name: &str) -> Vec<Taint> {
    let api: Api<Cluster> = Api::all(cp.clone());
    api.get(name)
        .await
        .unwrap()
        .spec
        .taints
        .into_iter()
        .filter(|t| t.key.starts_with("cluster.karmada.io/"))
        .collect()
}

/// Waits until Cluster `name` carries `cluster.karmada.io/not-ready:NoExecute`; returns its
/// `timeAdded`.
async fn wait_no_execute_taint(cp: &Client, name: &str) -> Timestamp {
    wait_until(
        &format!("{name} to be tainted not-ready:NoExecute"),
        TIMEOUT,
        || async {
            failover_taints(cp, name)
                .await
                .into_iter()
                .find(|t| t.key == NOT_READY_TAINT_KEY && t.effect == "NoExecute")
                .and_then(|t| t.time_added)
                .map(|t| t.0)
        },
    )
    .await
}

/// Reasons of the events about object `name`.
async fn event_reasons(cp: &Client, namespace: Option<&str>, name: &str) -> Vec<String> {
    let api: Api<Event> = match namespace {
        Some(ns) => Api::namespaced(cp.clone(), ns),
        None => Api::all(cp.clone()),
    };
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

/// The events of `reason` about the object called `name` whose message contains `text`.
async fn events_about(events: &Api<Event>, name: &str, reason: &str, text: &str) -> Vec<Event> {
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref().is_some_and(|m| m.contains(text))
        })
        .collect()
}

/// When `binding` was evicted from `cluster`: its task's `creationTimestamp`, or, once the
/// task has finished, the time of the eviction event.
async fn eviction_time(cp: &Client, binding: &ResourceBinding, cluster: &str) -> Timestamp {
    if let Some(created) = binding
        .spec
        .eviction_task(cluster)
        .and_then(|t| t.creation_timestamp.clone())
    {
        return created.0;
    }
    let name = binding.metadata.name.clone().unwrap();
    let events: Api<Event> = Api::namespaced(cp.clone(), NS);
    events_about(&events, &name, "EvictWorkloadFromClusterStarted", cluster)
        .await
        .into_iter()
        .find_map(|e| {
            e.event_time
                .map(|t| t.0)
                .or_else(|| e.first_timestamp.map(|t| t.0))
        })
        .unwrap_or_else(|| panic!("no eviction of {name} from {cluster} recorded"))
}

/// Sets `suppressDeletion` of the binding's eviction task for `cluster` (what a person does to
/// confirm a `Never` purge), with the read resourceVersion as precondition.
async fn confirm_deletion(cp: &Client, name: &str, cluster: &str) {
    let api: Api<ResourceBinding> = Api::namespaced(cp.clone(), NS);
    for _ in 0..10 {
        let binding = binding(cp, name).await.unwrap();
        let mut tasks = binding.spec.graceful_eviction_tasks.clone();
        let task = tasks.iter_mut().find(|t| t.from_cluster == cluster).unwrap();
        task.suppress_deletion = Some(false);
        let patch = json!({
            "metadata": {"resourceVersion": binding.metadata.resource_version},
            "spec": {"gracefulEvictionTasks": tasks},
        });
        match api
            .patch(
                &binding.metadata.name.clone().unwrap(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("confirm the deletion of {name} in {cluster}: {e}"),
        }
    }
    panic!("the binding of {name} kept changing");
}

// ---------------------------------------------------------------------------------------------
// Cluster failover: stop member1, watch the workloads move, start it again
// ---------------------------------------------------------------------------------------------

/// Karmada's "Cluster failover testing with nil failover behavior / with purgeMode gracefully /
/// with purgeMode directly", plus `Never` and suspension, around one outage of member1:
///
/// - `graceful` (no `failover`: Gracefully) moves to member2 at once; member1's copy goes once
///   member2's is healthy (its Work waits, being deleted, for member1 to answer again);
/// - `directly` (`purgeMode: Directly`): "delete the old ones first, then create the new ones":
///   member2 gets nothing while member1's copy cannot be confirmed deleted;
/// - `never` (`purgeMode: Never`): moves, and member1 keeps its copy, even after it is back,
///   until a person sets `suppressDeletion: false`;
/// - `suspended` (dispatching suspended on member1): moves, and member1's copy is never cleaned
///   by failover: it goes only when dispatching resumes.
///
/// Execution is killed while member1's failure is being detected, scheduler and execution while
/// the `Directly` eviction waits. After member1 is back it loses its taints and keeps no second
/// copy of anything.
#[tokio::test]
async fn cluster_failover_with_purge_modes_stop_a_member_and_start_it_again() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        service_args: fast_failover("300s"),
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    let suspend_member1 = "  suspension:\n    dispatchingOnClusters:\n      clusterNames: [member1]\n";
    let policies = [
        ("graceful", String::new()),
        (
            "directly",
            "  failover:\n    cluster:\n      purgeMode: Directly\n".to_owned(),
        ),
        (
            "never",
            "  failover:\n    cluster:\n      purgeMode: Never\n".to_owned(),
        ),
        ("suspended", suspend_member1.to_owned()),
    ];
    for (name, extra) in &policies {
        fixtures::apply(&cp, &policy(name, extra)).await;
        fixtures::apply(&cp, &deployment_yaml(NS, name, 2, "nginx:1.25")).await;
    }
    for (name, _) in &policies {
        wait_targets(&cp, name, &["member1"]).await;
    }
    for name in ["graceful", "directly", "never"] {
        wait_on_member(&env, 1, name).await;
    }
    // Suspended from the start: member1 never got it; its Work holds it.
    assert!(!on_member(&env, 1, "suspended").await);

    // member1's API server goes away; execution is killed while it finds out.
    env.members[0].stop();
    env.kill(Service::Execution);
    env.start_again(Service::Execution).await;
    let tainted_at = wait_no_execute_taint(&cp, "member1").await;
    let taints = failover_taints(&cp, "member1").await;
    assert!(
        taints
            .iter()
            .any(|t| t.key == NOT_READY_TAINT_KEY && t.effect == "NoSchedule"),
        "{taints:?}"
    );

    // Gracefully (the default): moved at once, the eviction finished once member2's copy was
    // healthy, and member1's Work is being deleted (it waits for member1 to answer).
    wait_targets(&cp, "graceful", &["member2"]).await;
    wait_on_member(&env, 2, "graceful").await;
    eventually("graceful's eviction task to finish", TIMEOUT, || async {
        binding(&cp, "graceful")
            .await
            .is_some_and(|b| b.spec.graceful_eviction_tasks.is_empty())
    })
    .await;
    eventually("graceful's Work in member1 to be deleted", TIMEOUT, || async {
        work(&cp, "member1", "graceful")
            .await
            .is_none_or(|w| w.metadata.deletion_timestamp.is_some())
    })
    .await;
    // Recorded on the binding and on the template, as in Karmada.
    for object in ["graceful-deployment", "graceful"] {
        let reasons = event_reasons(&cp, Some(NS), object).await;
        assert!(
            reasons.iter().any(|r| r == "EvictWorkloadFromClusterStarted"),
            "{object}: {reasons:?}"
        );
        assert!(
            reasons.iter().any(|r| r == "EvictWorkloadFromClusterSucceed"),
            "{object}: {reasons:?}"
        );
    }

    // Never: moved; the task waits for a person; member1's Work is kept as it is.
    let never = wait_targets(&cp, "never", &["member2"]).await;
    let task = &never.spec.graceful_eviction_tasks[0];
    assert_eq!(
        (
            task.from_cluster.as_str(),
            task.reason.as_str(),
            task.producer.as_str()
        ),
        ("member1", "TaintUntolerated", "TaintManager")
    );
    assert_eq!(task.suppress_deletion, Some(true));
    let created = task.creation_timestamp.clone().unwrap().0;
    assert!(
        created >= tainted_at,
        "evicted after the taint: {created} < {tainted_at}"
    );
    wait_on_member(&env, 2, "never").await;

    // Suspended on member1: moved too (suspension does not affect scheduling), and its Work in
    // member1 stays, suspended, after the eviction finished.
    wait_targets(&cp, "suspended", &["member2"]).await;
    wait_on_member(&env, 2, "suspended").await;
    eventually("suspended's eviction task to finish", TIMEOUT, || async {
        binding(&cp, "suspended")
            .await
            .is_some_and(|b| b.spec.graceful_eviction_tasks.is_empty())
    })
    .await;

    // Directly: moved in the binding, but member2 gets nothing while member1's copy may still
    // run; member1's Work is being deleted.
    let directly = wait_targets(&cp, "directly", &["member2"]).await;
    assert_eq!(
        directly.spec.graceful_eviction_tasks[0].purge_mode,
        Some(flotilla_api::policy::PurgeMode::Directly)
    );
    eventually("directly's Work in member1 to be deleted", TIMEOUT, || async {
        work(&cp, "member1", "directly")
            .await
            .is_some_and(|w| w.metadata.deletion_timestamp.is_some())
    })
    .await;

    // Kill -9 both deciders in the middle of these evictions: nothing moves that should not,
    // and the tasks are the same tasks.
    env.kill(Service::Scheduler);
    env.kill(Service::Execution);
    env.start_again(Service::Scheduler).await;
    env.start_again(Service::Execution).await;
    stays(
        "member1's kept copies to stay and member2 to get no directly",
        QUIET,
        || async {
            work(&cp, "member2", "directly").await.is_none()
                && !on_member(&env, 2, "directly").await
                && work(&cp, "member1", "never")
                    .await
                    .is_some_and(|w| w.metadata.deletion_timestamp.is_none())
                && work(&cp, "member1", "suspended").await.is_some_and(|w| {
                    w.metadata.deletion_timestamp.is_none() && w.spec.suspend_dispatching == Some(true)
                })
        },
    )
    .await;
    let never_again = binding(&cp, "never").await.unwrap();
    assert_eq!(
        never_again.spec.graceful_eviction_tasks[0]
            .creation_timestamp
            .clone()
            .unwrap()
            .0,
        created,
        "the task is the one written before the restart"
    );

    // member1 comes back: untainted, and every copy goes where the policies say.
    env.members[0].start_again().await;
    eventually("member1 to lose its failover taints", TIMEOUT, || async {
        failover_taints(&cp, "member1").await.is_empty()
    })
    .await;
    wait_gone_from_member(&env, 1, "graceful").await;
    wait_gone_from_member(&env, 1, "directly").await;
    wait_on_member(&env, 2, "directly").await;
    assert!(on_member(&env, 1, "never").await, "Never keeps the old copy");

    // A person confirms the Never purge; dispatching to member1 resumes for `suspended`.
    confirm_deletion(&cp, "never", "member1").await;
    wait_gone_from_member(&env, 1, "never").await;
    assert!(
        !on_member(&env, 1, "suspended").await,
        "a suspended cluster never received it"
    );
    fixtures::apply(&cp, &policy("suspended", "")).await;
    eventually("suspended's Work in member1 to go", TIMEOUT, || async {
        work(&cp, "member1", "suspended").await.is_none()
    })
    .await;

    // No second copy anywhere: each Deployment runs in member2 only, and stays so (the
    // fallback group is kept: Karmada does not go back to an earlier group by itself).
    stays("every workload in member2 only", QUIET, || async {
        let mut ok = true;
        for (name, _) in &policies {
            ok &= !on_member(&env, 1, name).await
                && on_member(&env, 2, name).await
                && targets(&cp, name).await == ["member2"];
        }
        ok
    })
    .await;
    let reasons = event_reasons(&cp, None, "member1").await;
    assert!(reasons.iter().any(|r| r == "TaintClusterSucceed"), "{reasons:?}");
}

/// Karmada's `clusterTolerations` with `tolerationSeconds` (its taint manager's "evict after
/// the toleration time"), a toleration without a limit, and Lazy activation, around an outage
/// of member1 that never ends:
///
/// - `default` (no toleration) moves at once;
/// - `tolerant` tolerates `not-ready:NoExecute` for 20 s: it stays, the scheduler is killed
///   with SIGKILL in the middle of the toleration, and it moves at `timeAdded` + 20 s all the
///   same (the count is in the API, not in a timer);
/// - `forever` tolerates it without `tolerationSeconds` and `lazy` belongs to a Lazy policy:
///   both stay on member1 ...
/// - ... until member1 is gone (its Cluster deleted): then they go where their placement says,
///   without an eviction task.
#[tokio::test]
async fn cluster_failover_with_toleration_seconds_lazy_bindings_and_a_cluster_gone() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        service_args: fast_failover("300s"),
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    let toleration = |seconds: &str| {
        format!(
            "    clusterTolerations:\n    - key: cluster.karmada.io/not-ready\n      operator: Exists\n      effect: NoExecute\n{seconds}"
        )
    };
    let policies = [
        ("default", String::new(), String::new()),
        (
            "tolerant",
            toleration("      tolerationSeconds: 20\n"),
            String::new(),
        ),
        ("forever", toleration(""), String::new()),
        ("lazy", String::new(), "  activationPreference: Lazy\n".to_owned()),
    ];
    for (name, placement, spec) in &policies {
        // The toleration belongs under `placement:`, which `policy` ends with.
        fixtures::apply(&cp, &policy(name, &format!("{placement}{spec}"))).await;
        fixtures::apply(&cp, &deployment_yaml(NS, name, 1, "nginx:1.25")).await;
    }
    for (name, _, _) in &policies {
        wait_targets(&cp, name, &["member1"]).await;
        wait_on_member(&env, 1, name).await;
    }
    let lazy = binding(&cp, "lazy").await.unwrap();
    assert_eq!(
        lazy.metadata.annotations.as_ref().unwrap()["flotilla.io/activation-preference"],
        "Lazy"
    );

    env.members[0].stop();
    let tainted_at = wait_no_execute_taint(&cp, "member1").await;
    wait_targets(&cp, "default", &["member2"]).await;
    wait_on_member(&env, 2, "default").await;
    let evictions = env
        .metric_sample(
            Service::Scheduler,
            "flotilla_scheduler_evictions_total{reason=\"TaintUntolerated\",purge_mode=\"Gracefully\"}",
        )
        .await;
    assert!(evictions >= Some(1.0), "{evictions:?}");

    // Tolerated for 20 s: still on member1 a few seconds after the taint, and the scheduler
    // dies meanwhile.
    assert_eq!(targets(&cp, "tolerant").await, ["member1"]);
    env.kill(Service::Scheduler);
    env.start_again(Service::Scheduler).await;
    let tolerant = wait_targets(&cp, "tolerant", &["member2"]).await;
    let evicted_at = eviction_time(&cp, &tolerant, "member1").await;
    let after = evicted_at.duration_since(tainted_at);
    assert!(
        after >= SignedDuration::from_secs(20) && after < SignedDuration::from_secs(60),
        "evicted {after:?} after the taint; the toleration is 20 s"
    );
    wait_on_member(&env, 2, "tolerant").await;

    // Tolerated forever, and Lazy: still on member1, no eviction.
    for name in ["forever", "lazy"] {
        let b = binding(&cp, name).await.unwrap();
        assert_eq!(targets(&cp, name).await, ["member1"], "{name}");
        assert!(b.spec.graceful_eviction_tasks.is_empty(), "{name}");
    }
    stays("forever and lazy to stay on member1", QUIET, || async {
        targets(&cp, "forever").await == ["member1"]
            && targets(&cp, "lazy").await == ["member1"]
            && !on_member(&env, 2, "forever").await
            && !on_member(&env, 2, "lazy").await
    })
    .await;

    // member1 is gone for good: its Cluster is deleted. Lazy or tolerated, nothing stays on a
    // cluster that no longer exists.
    let clusters: Api<Cluster> = Api::all(cp.clone());
    clusters
        .delete("member1", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["forever", "lazy"] {
        let b = wait_targets(&cp, name, &["member2"]).await;
        assert!(
            b.spec.graceful_eviction_tasks.is_empty(),
            "{name}: leaving a deleted cluster is no eviction"
        );
        wait_on_member(&env, 2, name).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Application failover
// ---------------------------------------------------------------------------------------------

/// `failover.application` with `extra` lines under it (6-space indented), plus
/// `propagateDeps: true` (Karmada requires it).
fn application_failover(extra: &str) -> String {
    format!(
        "  propagateDeps: true\n  failover:\n    application:\n      decisionConditions:\n        tolerationSeconds: 2\n{extra}"
    )
}

/// Whether the binding of `name` reports its copy in `cluster` with `health`.
async fn reports_health(cp: &Client, name: &str, cluster: &str, health: &str) -> bool {
    binding(cp, name).await.is_some_and(|b| {
        b.status.is_some_and(|s| {
            s.aggregated_status
                .iter()
                .any(|i| i.cluster_name == cluster && i.health.as_ref().is_some_and(|h| h.as_str() == health))
        })
    })
}

/// Karmada's application failover cases ("application failover with purgeMode never", "with
/// purgeMode gracefully when the application come back to healthy on the new cluster", "when
/// the GracePeriodSeconds is reach out", "Delete the old ones first, then create the new
/// ones"), with the user guide's shape of policy: each Deployment runs in member1, is made
/// unhealthy there (the simulated member reports no available replica, as a cordoned node with
/// its pods deleted would), and after `tolerationSeconds` moves to member2. The scheduler is
/// killed with SIGKILL while the toleration runs. Karmada's older purge mode spellings
/// (`Immediately`, `Graciously`) are used for two of them. Policies Karmada rejects are rejected
/// with a message naming the field.
#[tokio::test]
async fn application_failover_with_purge_modes_never_gracefully_and_directly() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;

    // Bad input: refused at the API with the field and the fix; nothing is created.
    let without_deps = policy(
        "bad",
        "  failover:\n    application:\n      decisionConditions:\n        tolerationSeconds: 2\n",
    );
    let error = fixtures::try_apply(&cp, &without_deps)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.propagateDeps")
            && error.contains("must be true when spec.failover.application is set"),
        "{error}"
    );
    let never_with_grace = policy(
        "bad",
        &application_failover("      purgeMode: Never\n      gracePeriodSeconds: 30\n"),
    );
    let error = fixtures::try_apply(&cp, &never_with_grace)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.failover.application.gracePeriodSeconds")
            && error.contains("only takes effect when purgeMode is Gracefully"),
        "{error}"
    );
    assert!(
        fixtures::get(
            &cp,
            "policy.karmada.io/v1alpha1",
            "PropagationPolicy",
            Some(NS),
            "bad"
        )
        .await
        .is_none()
    );

    // member2 already runs a Deployment of the same name that flotilla did not create: the
    // copy of `app-grace-period` cannot be applied there (conflictResolution Abort), so its new
    // placement never becomes healthy.
    let member2 = env.member_client(2).await;
    fixtures::apply(&member2, &deployment_yaml(NS, "app-grace-period", 1, "busybox:1")).await;

    let policies = [
        ("app-never", application_failover("      purgeMode: Never\n")),
        (
            "app-graceful",
            application_failover("      purgeMode: Gracefully\n      gracePeriodSeconds: 600\n"),
        ),
        (
            "app-grace-period",
            application_failover("      purgeMode: Graciously\n      gracePeriodSeconds: 20\n"),
        ),
        (
            "app-directly",
            application_failover("      purgeMode: Immediately\n"),
        ),
    ];
    for (name, extra) in &policies {
        fixtures::apply(&cp, &policy(name, extra)).await;
        fixtures::apply(&cp, &deployment_yaml(NS, name, 2, "nginx:1.25")).await;
    }
    for (name, _) in &policies {
        wait_targets(&cp, name, &["member1"]).await;
        eventually(&format!("{name} to be healthy in member1"), TIMEOUT, || async {
            reports_health(&cp, name, "member1", "Healthy").await
        })
        .await;
    }

    // The application fails in member1.
    let member1 = env.member_client(1).await;
    let deployments: Api<Deployment> = Api::namespaced(member1.clone(), NS);
    let failed_at = Timestamp::now();
    for (name, _) in &policies {
        let mark = json!({"metadata": {"annotations": {"simulate.flotilla.io/unavailable": "true"}}});
        deployments
            .patch(name, &PatchParams::default(), &Patch::Merge(&mark))
            .await
            .unwrap();
    }
    eventually("app-graceful to be unhealthy in member1", TIMEOUT, || async {
        reports_health(&cp, "app-graceful", "member1", "Unhealthy").await
    })
    .await;
    env.kill(Service::Scheduler);
    env.start_again(Service::Scheduler).await;

    // Watched side by side, from the start: app-directly (the old copy goes before the new one
    // comes) and app-grace-period (the old copy outlives the move by its grace period).
    tokio::join!(
        async {
            wait_until("app-directly to run in member2", TIMEOUT, || async {
                let (old, new) = (
                    on_member(&env, 1, "app-directly").await,
                    on_member(&env, 2, "app-directly").await,
                );
                assert!(!(old && new), "app-directly runs in member1 and member2 at once");
                new.then_some(())
            })
            .await;
            assert!(!on_member(&env, 1, "app-directly").await);
        },
        grace_period_reached(&env, &cp),
    );

    // Gracefully: moved after the toleration; the old copy goes once the new one is healthy.
    let graceful = wait_targets(&cp, "app-graceful", &["member2"]).await;
    let evicted_at = eviction_time(&cp, &graceful, "member1").await;
    let after = evicted_at.duration_since(failed_at);
    assert!(
        after >= SignedDuration::from_secs(1) && after < SignedDuration::from_secs(40),
        "evicted {after:?} after the failure; the toleration is 2 s"
    );
    wait_on_member(&env, 2, "app-graceful").await;
    wait_gone_from_member(&env, 1, "app-graceful").await;
    let reasons = event_reasons(&cp, Some(NS), "app-graceful-deployment").await;
    assert!(
        reasons.iter().any(|r| r == "EvictWorkloadFromClusterSucceed"),
        "{reasons:?}"
    );

    // Never: moved; the task carries Karmada's producer and waits for a person.
    let never = wait_targets(&cp, "app-never", &["member2"]).await;
    let task = never.spec.eviction_task("member1").unwrap();
    assert_eq!(task.reason, "ApplicationFailure");
    assert_eq!(task.producer, "resource-binding-application-failover-controller");
    assert_eq!(task.suppress_deletion, Some(true));
    wait_on_member(&env, 2, "app-never").await;
    eventually("app-never to be healthy in member2", TIMEOUT, || async {
        reports_health(&cp, "app-never", "member2", "Healthy").await
    })
    .await;
    stays("app-never's old copy to stay in member1", QUIET, || async {
        on_member(&env, 1, "app-never").await
    })
    .await;
    confirm_deletion(&cp, "app-never", "member1").await;
    wait_gone_from_member(&env, 1, "app-never").await;
}

/// Karmada's "application failover with purgeMode gracefully when the GracePeriodSeconds is
/// reach out": member2's copy of `app-grace-period` cannot be applied, so the new placement is
/// never healthy; the old copy stays for the task's `gracePeriodSeconds` (20 s), then goes.
async fn grace_period_reached(env: &Env, cp: &Client) {
    let grace = wait_targets(cp, "app-grace-period", &["member2"]).await;
    let task = grace.spec.eviction_task("member1").unwrap().clone();
    assert_eq!(task.purge_mode, Some(flotilla_api::policy::PurgeMode::Gracefully));
    assert_eq!(task.grace_period_seconds, Some(20));
    let created = task.creation_timestamp.unwrap().0;
    eventually(
        "app-grace-period's Work in member2 to report the conflict",
        TIMEOUT,
        || async {
            work(cp, "member2", "app-grace-period").await.is_some_and(|w| {
                w.status.is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Applied" && c.status == "False" && c.reason == "Conflict")
                })
            })
        },
    )
    .await;
    let kept_until = created.checked_add(SignedDuration::from_secs(16)).unwrap();
    let remaining = kept_until.duration_since(Timestamp::now());
    if remaining > SignedDuration::ZERO {
        stays(
            "app-grace-period's old copy to stay during the grace period",
            remaining.unsigned_abs(),
            || async { on_member(env, 1, "app-grace-period").await },
        )
        .await;
    }
    wait_gone_from_member(env, 1, "app-grace-period").await;
    assert!(
        Timestamp::now() >= created.checked_add(SignedDuration::from_secs(19)).unwrap(),
        "removed before the grace period ran out"
    );
    eventually("app-grace-period's eviction task to finish", TIMEOUT, || async {
        binding(cp, "app-grace-period")
            .await
            .is_some_and(|b| b.spec.graceful_eviction_tasks.is_empty())
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// ClusterTaintPolicy
// ---------------------------------------------------------------------------------------------

/// The YAML block of `docs/failover.md` that defines `kind: ClusterTaintPolicy` `name`.
fn guide_taint_policy(name: &str) -> String {
    fixtures::doc_yaml_blocks("failover.md")
        .into_iter()
        .find(|b| b.contains("kind: ClusterTaintPolicy") && b.contains(&format!("  name: {name}\n")))
        .unwrap_or_else(|| panic!("docs/failover.md has no ClusterTaintPolicy {name}"))
}

/// Sets condition `type_` of Cluster `cluster` to `status`, as a monitoring system would: read,
/// change, write the status with the read resourceVersion (execution writes it too).
async fn set_cluster_condition(cp: &Client, cluster: &str, type_: &str, status: bool) {
    let api: Api<Cluster> = Api::all(cp.clone());
    for _ in 0..20 {
        let current = api.get(cluster).await.unwrap();
        let mut cluster_status = current.status.clone().unwrap_or_default();
        flotilla_api::conditions::set(
            &mut cluster_status.conditions,
            type_,
            status,
            "Monitoring",
            "reported by the e2e test's monitoring system",
            None,
            Timestamp::now(),
        );
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "status": cluster_status,
        });
        match api
            .patch_status(cluster, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("set {type_} of {cluster}: {e}"),
        }
    }
    panic!("Cluster {cluster} kept changing");
}

/// `key:effect` of every taint of Cluster `name`.
async fn taint_keys(cp: &Client, name: &str) -> Vec<String> {
    let api: Api<Cluster> = Api::all(cp.clone());
    api.get(name)
        .await
        .unwrap()
        .spec
        .taints
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect()
}

/// Whether Cluster `name` carries `key:effect`.
async fn has_taint(cp: &Client, name: &str, taint: &str) -> bool {
    taint_keys(cp, name).await.iter().any(|t| t == taint)
}

/// The `Ready` condition of Cluster `name`: (status, lastTransitionTime).
async fn ready_condition(cp: &Client, name: &str) -> Option<(String, Timestamp)> {
    let api: Api<Cluster> = Api::all(cp.clone());
    let cluster = api.get(name).await.unwrap();
    let status = cluster.status?;
    let ready = flotilla_api::conditions::find(&status.conditions, "Ready")?;
    Some((ready.status.clone(), ready.last_transition_time.0))
}

/// Waits until ClusterTaintPolicy `name` is `Valid=True` for its current generation (execution
/// has seen this version of it).
async fn wait_policy_seen(cp: &Client, name: &str) {
    eventually(
        &format!("ClusterTaintPolicy {name} to be Valid at its generation"),
        TIMEOUT,
        || async {
            let Some(policy) =
                fixtures::get(cp, "policy.karmada.io/v1alpha1", "ClusterTaintPolicy", None, name).await
            else {
                return false;
            };
            let policy = serde_json::to_value(policy).unwrap();
            policy["status"]["observedGeneration"] == policy["metadata"]["generation"]
                && fixtures::condition(&policy, "Valid").is_some_and(|c| c["status"] == "True")
        },
    )
    .await;
}

/// Karmada's "Taint cluster with ClusterTaintPolicy" cases ("Multi conditions match", "Control
/// with multiple taints") with its documented examples unchanged, around one outage of member1:
///
/// - bad policies are refused with the field that is wrong, and nothing is created;
/// - `detect-cluster-notready` (Karmada v1.14's announcement) taints member1
///   `not-ready:NoSchedule` and `not-ready:NoExecute` once both `Ready` and `NetworkAvailable`
///   (reported by a monitoring system: the test) are not `True`; the workload moves to member2;
///   execution adds no automatic `NoExecute` taint, since a policy has one; execution is killed
///   while the failure is detected and again while member1 is tainted, and the taints are the
///   same taints afterwards;
/// - member1 comes back, but its network is still reported down: neither condition list
///   matches and the taints stay, until the network is reported back;
/// - `foo` (Karmada's user guide) on `KubeComponentsHealthy`: edited so that it no longer
///   targets member2, member2 keeps its taint; edited back, the taint goes; deleted, the taint
///   it added stays.
#[tokio::test]
async fn taint_cluster_with_cluster_taint_policy_stop_a_member_and_start_it_again() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        service_args: fast_failover("300s"),
        control_plane_args: vec!["--allow-no-execute-taint-policy".to_owned()],
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;

    // Bad input: refused at the API with the field and the fix; nothing is created and no
    // cluster is touched.
    let bad = |spec: &str| {
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata:\n  name: bad\nspec:\n{spec}"
        )
    };
    let cases = [
        (
            "  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['true']}]\n  taints: [{key: not-ready, effect: NoSchedule}]\n",
            "spec.addOnConditions[0].statusValues[0]: \"true\" is not a condition status: use True, False or Unknown",
        ),
        (
            "  taints: [{key: x, effect: NoSchedule}, {key: x, value: y, effect: NoSchedule}]\n",
            "spec.taints[1]: duplicate taint x:NoSchedule: taints must be unique by key and effect",
        ),
        (
            "  taints: [{key: 'not a key', effect: NoSchedule}]\n",
            "spec.taints[0].key: \"not a key\" is not a valid taint key",
        ),
    ];
    for (spec, message) in cases {
        let error = fixtures::try_apply(&cp, &bad(spec))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(message), "{error}");
    }
    assert!(
        fixtures::get(
            &cp,
            "policy.karmada.io/v1alpha1",
            "ClusterTaintPolicy",
            None,
            "bad"
        )
        .await
        .is_none()
    );

    // Karmada's two examples, the workload and its policy, back to back.
    let detect = guide_taint_policy("detect-cluster-notready");
    let foo = guide_taint_policy("foo");
    fixtures::apply(&cp, &detect).await;
    fixtures::apply(&cp, &foo).await;
    fixtures::apply(&cp, &policy("web", "")).await;
    fixtures::apply(&cp, &deployment_yaml(NS, "web", 2, "nginx:1.25")).await;
    wait_targets(&cp, "web", &["member1"]).await;
    wait_on_member(&env, 1, "web").await;
    wait_policy_seen(&cp, "detect-cluster-notready").await;
    wait_policy_seen(&cp, "foo").await;
    for member in ["member1", "member2"] {
        assert!(taint_keys(&cp, member).await.is_empty(), "{member}");
    }

    // The monitoring system reports member1's network down (Ready is still True: nothing
    // yet); then member1's API server goes away, and execution is killed while it finds out.
    set_cluster_condition(&cp, "member1", "NetworkAvailable", false).await;
    env.members[0].stop();
    env.kill(Service::Execution);
    env.start_again(Service::Execution).await;
    wait_until(
        "member1 to get the policy's not-ready:NoExecute",
        TIMEOUT,
        || async {
            has_taint(&cp, "member1", "not-ready:NoExecute")
                .await
                .then_some(())
        },
    )
    .await;
    assert!(has_taint(&cp, "member1", "not-ready:NoSchedule").await);

    // The workload leaves member1 like for any NoExecute taint.
    wait_targets(&cp, "web", &["member2"]).await;
    wait_on_member(&env, 2, "web").await;

    // A policy has a NoExecute taint: no automatic one, even well past
    // --failover-eviction-timeout (2 s); the NoSchedule readiness taint is there as always.
    let (ready, since) = ready_condition(&cp, "member1").await.unwrap();
    assert_eq!(ready, "False");
    assert!(has_taint(&cp, "member1", "cluster.karmada.io/not-ready:NoSchedule").await);
    let past_timeout = since.checked_add(SignedDuration::from_secs(5)).unwrap();
    let remaining = past_timeout.duration_since(Timestamp::now());
    if remaining > SignedDuration::ZERO {
        stays(
            "member1 without an automatic NoExecute taint",
            remaining.unsigned_abs(),
            || async { !has_taint(&cp, "member1", "cluster.karmada.io/not-ready:NoExecute").await },
        )
        .await;
    }
    assert!(!has_taint(&cp, "member1", "cluster.karmada.io/not-ready:NoExecute").await);
    assert!(taint_keys(&cp, "member2").await.is_empty(), "member2 is healthy");

    // Kill -9 execution while member1 is tainted: the same taints (timeAdded included) after.
    let clusters: Api<Cluster> = Api::all(cp.clone());
    let tainted = clusters.get("member1").await.unwrap().spec.taints;
    env.kill(Service::Execution);
    env.start_again(Service::Execution).await;
    stays("member1's taints to stay the same taints", QUIET, || async {
        clusters.get("member1").await.unwrap().spec.taints == tainted
    })
    .await;

    // member1 answers again: Ready, but its network is still reported down, so neither
    // condition list matches and the policy's taints stay (the readiness one goes).
    env.members[0].start_again().await;
    eventually("member1 to be Ready again", TIMEOUT, || async {
        ready_condition(&cp, "member1")
            .await
            .is_some_and(|(s, _)| s == "True")
            && !has_taint(&cp, "member1", "cluster.karmada.io/not-ready:NoSchedule").await
    })
    .await;
    stays("the policy's taints while the network is down", QUIET, || async {
        taint_keys(&cp, "member1").await == ["not-ready:NoSchedule", "not-ready:NoExecute"]
    })
    .await;

    // The network is reported back: both conditions True, the taints go.
    set_cluster_condition(&cp, "member1", "NetworkAvailable", true).await;
    eventually("member1 to lose the policy's taints", TIMEOUT, || async {
        taint_keys(&cp, "member1").await.is_empty()
    })
    .await;
    // The removal's event names the policy. (Not the addition's: execution was killed right
    // after the network went down, possibly between writing the taints and publishing their
    // event, and events are best effort, as in Kubernetes.)
    let events: Api<Event> = Api::all(cp.clone());
    wait_taint_event(
        &events,
        "member1",
        "removed {not-ready:NoExecute} (ClusterTaintPolicy detect-cluster-notready)",
    )
    .await;

    // foo, on member2's KubeComponentsHealthy condition.
    set_cluster_condition(&cp, "member2", "KubeComponentsHealthy", false).await;
    eventually("member2 to get kube-components-unhealthy", TIMEOUT, || async {
        has_taint(&cp, "member2", "kube-components-unhealthy:NoSchedule").await
    })
    .await;
    assert!(!has_taint(&cp, "member1", "kube-components-unhealthy:NoSchedule").await);
    wait_taint_event(
        &events,
        "member2",
        "added {kube-components-unhealthy:NoSchedule} (ClusterTaintPolicy foo)",
    )
    .await;

    // Edited to target member1 only: member2 keeps its taint, even once healthy (Karmada).
    let member1_only = foo.replace("    - member1\n    - member2\n", "    - member1\n");
    assert_ne!(member1_only, foo);
    fixtures::apply(&cp, &member1_only).await;
    wait_policy_seen(&cp, "foo").await;
    set_cluster_condition(&cp, "member2", "KubeComponentsHealthy", true).await;
    stays(
        "member2 to keep the taint of a policy that left it",
        QUIET,
        || async { has_taint(&cp, "member2", "kube-components-unhealthy:NoSchedule").await },
    )
    .await;

    // Edited back: the policy looks after member2 again, which is healthy: the taint goes.
    fixtures::apply(&cp, &foo).await;
    eventually("member2 to lose kube-components-unhealthy", TIMEOUT, || async {
        !has_taint(&cp, "member2", "kube-components-unhealthy:NoSchedule").await
    })
    .await;

    // Deleted: the taint it added stays.
    set_cluster_condition(&cp, "member2", "KubeComponentsHealthy", false).await;
    eventually(
        "member2 to get kube-components-unhealthy again",
        TIMEOUT,
        || async { has_taint(&cp, "member2", "kube-components-unhealthy:NoSchedule").await },
    )
    .await;
    fixtures::delete(&cp, &foo).await;
    eventually("execution to forget foo", TIMEOUT, || async {
        env.metric_sample(
            Service::Execution,
            "flotilla_execution_cluster_taint_policies{valid=\"true\"}",
        )
        .await
            == Some(1.0)
    })
    .await;
    set_cluster_condition(&cp, "member2", "KubeComponentsHealthy", true).await;
    stays("member2 to keep the taint of a deleted policy", QUIET, || async {
        has_taint(&cp, "member2", "kube-components-unhealthy:NoSchedule").await
    })
    .await;
}

/// Waits for a `TaintClusterSucceed` event of Cluster `cluster` whose message contains `text`.
async fn wait_taint_event(events: &Api<Event>, cluster: &str, text: &str) {
    eventually(
        &format!("a {cluster} taint event with {text}"),
        TIMEOUT,
        || async {
            !events_about(events, cluster, "TaintClusterSucceed", text)
                .await
                .is_empty()
        },
    )
    .await;
}

/// Karmada's webhook rule: without `--allow-no-execute-taint-policy` (the default), a policy
/// with a `NoExecute` taint is refused, with the field and the flag to set.
#[tokio::test]
async fn cluster_taint_policy_with_no_execute_is_refused_by_default() {
    let env = Env::start(EnvOptions {
        members: 0,
        services: vec![],
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    let error = fixtures::try_apply(&cp, &guide_taint_policy("detect-cluster-notready"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.taints[1].effect: NoExecute is not allowed")
            && error.contains("--allow-no-execute-taint-policy"),
        "{error}"
    );
    assert!(
        fixtures::get(
            &cp,
            "policy.karmada.io/v1alpha1",
            "ClusterTaintPolicy",
            None,
            "detect-cluster-notready"
        )
        .await
        .is_none()
    );
    // NoSchedule policies need no flag.
    fixtures::apply(&cp, &guide_taint_policy("foo")).await;
}

// ---------------------------------------------------------------------------------------------
// The user guide
// ---------------------------------------------------------------------------------------------

/// Every YAML example of `docs/failover.md` (Karmada's user guide example among them) applies
/// unchanged and propagates as the guide says, carrying its failover settings into the binding.
#[tokio::test]
async fn failover_guide_examples_apply_unchanged() {
    let env = Env::start(EnvOptions {
        // The guide's NoExecute ClusterTaintPolicy needs it, as in Karmada.
        control_plane_args: vec!["--allow-no-execute-taint-policy".to_owned()],
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    let blocks = fixtures::doc_yaml_blocks("failover.md");
    assert_eq!(blocks.len(), 5, "the guide's YAML examples");
    for block in &blocks {
        fixtures::apply(&cp, block).await;
    }

    // The cluster failover example: on the primary group, Gracefully.
    let web = wait_targets(&cp, "web", &["member1"]).await;
    let cluster = web
        .spec
        .failover
        .as_ref()
        .and_then(|f| f.cluster.as_ref())
        .unwrap();
    assert_eq!(
        cluster.purge_mode,
        Some(flotilla_api::policy::PurgeMode::Gracefully)
    );
    wait_on_member(&env, 1, "web").await;

    // The toleration example is a valid policy.
    eventually("batch-propagation to be Valid", TIMEOUT, || async {
        fixtures::get(
            &cp,
            "policy.karmada.io/v1alpha1",
            "PropagationPolicy",
            Some(NS),
            "batch-propagation",
        )
        .await
        .map(|p| serde_json::to_value(p).unwrap())
        .is_some_and(|p| fixtures::condition(&p, "Valid").is_some_and(|c| c["status"] == "True"))
    })
    .await;

    // Karmada's application failover example: one cluster (spread), the failover settings in
    // the binding.
    let nginx = wait_until("nginx to be scheduled to one cluster", TIMEOUT, || async {
        binding(&cp, "nginx").await.filter(|b| b.spec.clusters.len() == 1)
    })
    .await;
    let application = nginx
        .spec
        .failover
        .as_ref()
        .and_then(|f| f.application.as_ref())
        .unwrap();
    assert_eq!(application.decision_conditions.toleration_seconds, Some(120));
    assert_eq!(
        application.purge_mode,
        Some(flotilla_api::policy::PurgeMode::Never)
    );
    assert!(nginx.spec.propagate_deps);
    let member: usize = nginx.spec.clusters[0].name["member".len()..].parse().unwrap();
    wait_on_member(&env, member, "nginx").await;

    // Karmada's ClusterTaintPolicy examples are valid and taint nothing: no cluster has the
    // conditions they need.
    wait_policy_seen(&cp, "foo").await;
    wait_policy_seen(&cp, "detect-cluster-notready").await;
    let detect = fixtures::get(
        &cp,
        "policy.karmada.io/v1alpha1",
        "ClusterTaintPolicy",
        None,
        "detect-cluster-notready",
    )
    .await
    .map(|p| serde_json::to_value(p).unwrap())
    .unwrap();
    // `kubectl get clustertaintpolicies` shows them in its TAINTS column.
    assert_eq!(
        detect["status"]["taints"],
        "not-ready:NoSchedule,not-ready:NoExecute"
    );
    for member in ["member1", "member2", "member3"] {
        assert!(taint_keys(&cp, member).await.is_empty(), "{member}");
    }
}
