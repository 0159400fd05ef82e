//! Execution's periodic resync (issue 17, round 13): it leaves settled Works alone (no read of
//! the Work, no read of its member objects), and what it then no longer covers is covered
//! elsewhere: a member object deleted while execution's member watch was away (the watch had to
//! list again) is re-created without waiting for any resync.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, wait_member_deployment};
use flotilla_e2e::wait::wait_until;
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
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

/// Execution's counters of Works queued and left alone by the resync, and its Work reads.
async fn resync_counters(env: &Env) -> (f64, f64, f64) {
    let queued = env
        .metric_sample(Service::Execution, "flotilla_execution_resync_works_queued_total")
        .await
        .unwrap_or_default();
    let settled = env
        .metric_sample(
            Service::Execution,
            "flotilla_execution_resync_works_settled_total",
        )
        .await
        .unwrap_or_default();
    (queued, settled, work_reads(env).await)
}

/// Execution's GETs of Works, as its `flotilla_control_plane_requests_total` counts them.
async fn work_reads(env: &Env) -> f64 {
    let (_, body) = env.http_get(Service::Execution, "/metrics").await.unwrap();
    body.lines()
        .filter(|line| {
            line.starts_with("flotilla_control_plane_requests_total{")
                && line.contains(r#"verb="get""#)
                && line.contains(r#"resource="works""#)
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
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

#[tokio::test]
async fn the_resync_leaves_settled_works_alone() {
    let env = propagated("1s", &[]).await;

    // Four Works, applied: once their reports are in execution's cache (the members' simulated
    // workload status included), a resync pass (every second here) finds all four settled. Two
    // passes' worth of settled Works go by during which the resync queues nothing and execution
    // reads no Work; a resync that queued every Work would read each of them at every pass.
    let since = Rc::new(Cell::new(resync_counters(&env).await));
    wait_until(
        "two resync passes that leave every Work alone and read none",
        TIMEOUT,
        || {
            let (env, since) = (&env, Rc::clone(&since));
            async move {
                let now = resync_counters(env).await;
                let (queued, settled, reads) = since.get();
                if now.0 != queued || now.2 != reads {
                    // A Work was queued or read (a report not in the cache yet, a member's
                    // status change): count again from here.
                    since.set(now);
                    return None;
                }
                (now.1 >= settled + 8.0).then_some(())
            }
        },
    )
    .await;
    let (_, settled, _) = resync_counters(&env).await;
    assert!(
        settled >= 8.0,
        "the resync counted the settled Works it left alone: {settled}"
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
