//! Execution's periodic resync (issue 17, rounds 13 and 14): it leaves settled bindings and
//! Works alone (no read of the binding or its template, no read of the Work or its member
//! objects), and what it then no longer covers is covered elsewhere: a member object deleted
//! while execution's member watch was away (the watch had to list again) is re-created without
//! waiting for any resync. A binding's status change alone does not queue the binding (as in
//! Karmada); a binding it unsettled is queued by the next resync; a change of its metadata is
//! queued at once. The scheduler, likewise, leaves a binding alone when a change leaves what it
//! reads as it was (round 21): another writer's annotation, execution's per-cluster reports of a
//! binding without failover.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use flotilla_api::ResourceBinding;
use flotilla_e2e::env::series_sum;
use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, wait_member_deployment};
use flotilla_e2e::wait::wait_until;
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// Places the Deployments named `web` and `api` in `default` on `member1` and `member2`.
const POLICY: &str = r"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: resync
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  - apiVersion: apps/v1
    kind: Deployment
    name: api
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
";

/// What execution's resync and reads have counted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counters {
    works_queued: f64,
    works_settled: f64,
    work_reads: f64,
    bindings_queued: f64,
    bindings_settled: f64,
    binding_reads: f64,
}

impl Counters {
    /// Whether nothing was queued or read since `since`.
    fn quiet_since(&self, since: &Counters) -> bool {
        self.works_queued == since.works_queued
            && self.work_reads == since.work_reads
            && self.bindings_queued == since.bindings_queued
            && self.binding_reads == since.binding_reads
    }
}

/// Execution's counters of Works and bindings queued and left alone by the resync, and its
/// reads of them.
async fn resync_counters(env: &Env) -> Counters {
    let sample = |name: &'static str| async move {
        env.metric_sample(Service::Execution, name)
            .await
            .unwrap_or_default()
    };
    Counters {
        works_queued: sample("flotilla_execution_resync_works_queued_total").await,
        works_settled: sample("flotilla_execution_resync_works_settled_total").await,
        work_reads: reads(env, "works").await,
        bindings_queued: sample("flotilla_execution_resync_bindings_queued_total").await,
        bindings_settled: sample("flotilla_execution_resync_bindings_settled_total").await,
        binding_reads: reads(env, "resourcebindings").await,
    }
}

/// Execution's GETs of `resource`, as its `flotilla_control_plane_requests_total` counts them.
async fn reads(env: &Env, resource: &str) -> f64 {
    let (_, body) = env.http_get(Service::Execution, "/metrics").await.unwrap();
    let resource = format!(r#"resource="{resource}""#);
    series_sum(
        &body,
        "flotilla_control_plane_requests_total",
        &[r#"verb="get""#, &resource],
    )
}

/// Removes `FullyApplied` from `name`'s binding's status, as another status writer could.
async fn remove_fully_applied(cp: &Client, name: &str) {
    let api = Api::<ResourceBinding>::namespaced(cp.clone(), "default");
    let name = format!("{name}-deployment");
    let binding = api.get(&name).await.unwrap();
    let others: Vec<_> = binding
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| c.type_ != "FullyApplied")
        .collect();
    let patch = json!({
        "metadata": {"resourceVersion": binding.metadata.resource_version},
        "status": {"conditions": others},
    });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Two members; execution resyncs every `resync_period`; the members run with `member_args`.
/// `web` and `api` are applied and present in both members.
async fn propagated(resync_period: &str, member_args: &[&str]) -> Env {
    let env = Env::start(EnvOptions {
        members: 2,
        member_args: member_args.iter().map(ToString::to_string).collect(),
        service_args: BTreeMap::from([(
            Service::Execution,
            vec!["--resync-period".to_owned(), resync_period.to_owned()],
        )]),
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, POLICY).await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "nginx:1.25")).await;
    fixtures::apply(&cp, &deployment_yaml("default", "api", 1, "nginx:1.25")).await;
    for i in [1, 2] {
        let member = env.member_client(i).await;
        for name in ["web", "api"] {
            wait_member_deployment(&member, "default", name, &format!("{name} in member{i}"), |_| {
                true
            })
            .await;
        }
    }
    env
}

/// Waits for two resync passes of execution (`propagated("1s", ..)`) that find both bindings
/// and their four Works settled and queue and read none of them.
async fn wait_settled(env: &Env) {
    let since = Rc::new(Cell::new(resync_counters(env).await));
    wait_until(
        "two resync passes that leave every binding and Work alone and read none",
        TIMEOUT,
        || {
            let since = Rc::clone(&since);
            async move {
                let now = resync_counters(env).await;
                let before = since.get();
                if !now.quiet_since(&before) {
                    // Something was queued or read (a report not in the cache yet, a member's
                    // status change): count again from here.
                    since.set(now);
                    return None;
                }
                (now.works_settled >= before.works_settled + 8.0
                    && now.bindings_settled >= before.bindings_settled + 4.0)
                    .then_some(())
            }
        },
    )
    .await;
}

/// What the scheduler counted of binding events and attempts so far.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SchedulerCounts {
    /// Events that queued their binding (`flotilla_scheduler_binding_events_total`).
    queued: f64,
    /// Events that left it alone.
    left_alone: f64,
    /// Watch-triggered attempts (`flotilla_scheduler_schedules_total`), any outcome.
    attempts: f64,
    /// Of those, the ones that wrote nothing.
    unchanged: f64,
}

async fn scheduler_counts(env: &Env) -> SchedulerCounts {
    let (_, body) = env.http_get(Service::Scheduler, "/metrics").await.unwrap();
    let sum = |family: &str, labels: &[&str]| series_sum(&body, family, labels);
    let events = "flotilla_scheduler_binding_events_total";
    let attempts = "flotilla_scheduler_schedules_total";
    let watch = r#"trigger="watch""#;
    SchedulerCounts {
        queued: sum(events, &[r#"queued="true""#]),
        left_alone: sum(events, &[r#"queued="false""#]),
        attempts: sum(attempts, &[watch]),
        unchanged: sum(attempts, &[watch, r#"outcome="unchanged""#]),
    }
}

/// `web`'s binding.
async fn web_binding(cp: &Client) -> ResourceBinding {
    Api::<ResourceBinding>::namespaced(cp.clone(), "default")
        .get("web-deployment")
        .await
        .unwrap()
}

/// Another writer's change of `web`'s binding.
/// Patches `web`'s binding (its status with `status`) and returns it as written, asserting
/// that the patch stored something: a patch that changed nothing keeps the resourceVersion and
/// gives the scheduler's watch no event, which a test counting events would wait for in vain.
async fn patch_web_binding(cp: &Client, status: bool, patch: serde_json::Value) -> ResourceBinding {
    let api = Api::<ResourceBinding>::namespaced(cp.clone(), "default");
    let before = web_binding(cp).await.metadata.resource_version;
    let params = PatchParams::default();
    let written = if status {
        api.patch_status("web-deployment", &params, &Patch::Merge(&patch))
            .await
    } else {
        api.patch("web-deployment", &params, &Patch::Merge(&patch)).await
    }
    .unwrap();
    assert_ne!(
        written.metadata.resource_version, before,
        "the patch {patch} changed web's binding"
    );
    written
}

#[tokio::test]
async fn the_scheduler_leaves_a_binding_alone_when_nothing_it_reads_changed() {
    let env = propagated("1s", &[]).await;
    let cp = env.control_plane_client().await;
    wait_settled(&env).await;

    // Another writer's annotation, then new per-cluster reports of a binding without failover
    // (as execution writes them): the scheduler's watch delivers both, and neither queues the
    // binding nor makes an attempt.
    let before = scheduler_counts(&env).await;
    let binding = patch_web_binding(
        &cp,
        false,
        json!({"metadata": {"annotations": {"example.com/owner": "team-web"}}}),
    )
    .await;
    let mut reports = binding.status.unwrap_or_default().aggregated_status;
    assert_eq!(reports.len(), 2, "{reports:?}");
    for report in &mut reports {
        // Unlike what the member reported (its controller may not have reported ready yet).
        let ready = report.status.as_ref().and_then(|s| s["readyReplicas"].as_i64());
        let ready = if ready == Some(0) { 1 } else { 0 };
        report.status = Some(json!({"replicas": 1, "readyReplicas": ready}));
    }
    patch_web_binding(&cp, true, json!({"status": {"aggregatedStatus": reports}})).await;
    wait_until("the scheduler to see both changes", TIMEOUT, || async {
        (scheduler_counts(&env).await.left_alone >= before.left_alone + 2.0).then_some(())
    })
    .await;
    let after = scheduler_counts(&env).await;
    assert_eq!(
        (after.queued, after.attempts),
        (before.queued, before.attempts),
        "nothing queued, no attempt: {before:?} -> {after:?}"
    );

    // A condition is read (the status patch writes the whole list back): the change queues
    // the binding, and the attempt writes nothing and keeps the other writer's condition.
    let before = after;
    let binding = web_binding(&cp).await;
    let mut conditions = binding.status.unwrap_or_default().conditions;
    conditions.push(Condition {
        type_: "Reviewed".into(),
        status: "True".into(),
        reason: "Reviewed".into(),
        message: "reviewed by the web team".into(),
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        observed_generation: binding.metadata.generation,
    });
    patch_web_binding(&cp, true, json!({"status": {"conditions": conditions}})).await;
    wait_until("the scheduler to schedule web again", TIMEOUT, || async {
        let now = scheduler_counts(&env).await;
        (now.queued > before.queued && now.unchanged > before.unchanged).then_some(())
    })
    .await;
    let after = scheduler_counts(&env).await;
    assert_eq!(
        after.attempts - before.attempts,
        after.unchanged - before.unchanged,
        "every attempt wrote nothing: {before:?} -> {after:?}"
    );
    let binding = web_binding(&cp).await;
    let conditions = binding.status.unwrap_or_default().conditions;
    assert!(
        conditions.iter().any(|c| c.type_ == "Reviewed"),
        "the other writer's condition stays: {conditions:?}"
    );
}

#[tokio::test]
async fn the_resync_leaves_settled_bindings_and_works_alone() {
    let env = propagated("1s", &[]).await;
    let cp = env.control_plane_client().await;

    // Two bindings dispatched to two members, four Works applied: once their reports are in
    // execution's caches (the members' simulated workload status included), a resync pass (every
    // second here) finds every binding and Work settled. Two passes' worth of them go by during
    // which the resync queues nothing and execution reads no binding and no Work; a resync that
    // queued them would read each at every pass.
    wait_settled(&env).await;

    // Another writer removes web's FullyApplied: a status change alone does not queue the
    // binding (its watch event leaves the signature as it was), but web is no longer settled,
    // so the next pass queues it and execution writes the condition back. Had the watch event
    // queued web, the condition would be back before the pass, which would then find web
    // settled and queue nothing.
    let before = resync_counters(&env).await;
    remove_fully_applied(&cp, "web").await;
    wait_until("the resync to queue web's binding", TIMEOUT, || async {
        (resync_counters(&env).await.bindings_queued > before.bindings_queued).then_some(())
    })
    .await;
    fixtures::wait_fully_applied(
        &cp,
        "default",
        "web-deployment",
        "web's FullyApplied back",
        TIMEOUT,
    )
    .await;

    // A change of what the binding's reconcile reads (here a label) queues it at once.
    let before = resync_counters(&env).await;
    Api::<ResourceBinding>::namespaced(cp.clone(), "default")
        .patch(
            "web-deployment",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "web"}}})),
        )
        .await
        .unwrap();
    wait_until("execution to read web's binding again", TIMEOUT, || async {
        (resync_counters(&env).await.binding_reads > before.binding_reads).then_some(())
    })
    .await;
    let after = resync_counters(&env).await;
    assert_eq!(
        after.bindings_queued, before.bindings_queued,
        "the watch, not the resync, queued web: {before:?} -> {after:?}"
    );
}

#[tokio::test]
async fn a_member_object_deleted_while_the_member_watch_was_away_is_created_again() {
    // The member keeps one revision for watch resumption, so a watch that was away while the
    // member changed must list again (410 Gone); the resync is an hour away and takes no part.
    let mut env = propagated("1h", &["--watch-window", "1"]).await;

    // Execution is away (paused, its connections kept) while member1 restarts, which cuts its
    // member watch; then web is deleted in member1 and member1 moves on past its window.
    env.pause(Service::Execution);
    env.members[0].restart().await;
    let member1 = env.member_client(1).await;
    Api::<Deployment>::namespaced(member1.clone(), "default")
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(member1.clone(), "default");
    for i in 0..3 {
        let config_map =
            serde_json::from_value(json!({"metadata": {"name": format!("unrelated-{i}")}})).unwrap();
        config_maps
            .create(&PostParams::default(), &config_map)
            .await
            .unwrap();
    }
    env.resume(Service::Execution);

    // The member watch resumes from a revision member1 no longer has, lists again, and queues
    // every Work of member1: web is created again. Nothing else was disturbed.
    wait_member_deployment(
        &member1,
        "default",
        "web",
        "web to be created again in member1 after the member watch listed again",
        |_| true,
    )
    .await;
    let member2 = env.member_client(2).await;
    for name in ["web", "api"] {
        assert!(
            fixtures::member_deployment(&member2, "default", name)
                .await
                .is_some()
        );
    }
    assert!(
        fixtures::member_deployment(&member1, "default", "api")
            .await
            .is_some()
    );
}
