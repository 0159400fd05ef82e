//! Metrics and health (issue 9): every service's `/metrics` exposes the metric families
//! `docs/ha.md` lists, and `/readyz` reflects real health (the control-plane API going away
//! makes the services unready; its return makes them ready again).

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, wait_member_deployment};
use flotilla_e2e::{Env, EnvOptions, Service, eventually};

/// Families every service registers (the gRPC layer and the work queues).
const COMMON: &[&str] = &[
    "flotilla_grpc_server_request_duration_seconds",
    "flotilla_grpc_client_request_duration_seconds",
    "flotilla_workqueue_depth",
    "flotilla_workqueue_oldest_wait_seconds",
    "flotilla_control_plane_requests",
];

fn families(service: Service) -> &'static [&'static str] {
    match service {
        Service::Detector => &[
            "flotilla_detector_reconciles",
            "flotilla_detector_reconcile_errors",
            "flotilla_detector_reconcile_duration_seconds",
            "flotilla_detector_queue_depth",
            "flotilla_detector_pending_lazy_bindings",
            "flotilla_leader",
        ],
        Service::Scheduler => &[
            "flotilla_scheduler_schedules",
            "flotilla_scheduler_schedule_duration_seconds",
            "flotilla_scheduler_errors",
            "flotilla_scheduler_write_conflicts",
            "flotilla_scheduler_clusters",
            "flotilla_scheduler_evictions",
            "flotilla_scheduler_eviction_tasks_finished",
            "flotilla_scheduler_graceful_eviction_tasks",
        ],
        Service::DependencyDistributor => &[
            "flotilla_dependency_attached_bindings",
            "flotilla_dependency_reconciles",
            "flotilla_dependency_reconcile_errors",
            "flotilla_dependency_reconcile_duration_seconds",
            "flotilla_dependency_resync_bindings_queued",
            "flotilla_dependency_resync_bindings_settled",
            "flotilla_leader",
        ],
        Service::Execution => &[
            "flotilla_execution_member_apply_duration_seconds",
            "flotilla_execution_member_apply_errors",
            "flotilla_execution_suspended_works",
            "flotilla_execution_queue_depth",
            "flotilla_execution_reconcile",
            "flotilla_execution_reconcile_duration_seconds",
            "flotilla_execution_owned_clusters",
            "flotilla_execution_evicted_works_purged",
            "flotilla_execution_cluster_failover_taint",
            "flotilla_execution_cluster_taint_policies",
            "flotilla_execution_work_reads",
            "flotilla_membership_members",
        ],
    }
}

/// Waits until `service`'s `/metrics` holds `sample` (a metric name with its first labels).
async fn wait_for_sample(env: &Env, service: Service, sample: &str) {
    eventually(
        &format!("{service:?} /metrics to hold {sample}"),
        TIMEOUT,
        || async {
            env.http_get(service, "/metrics")
                .await
                .is_some_and(|(_, body)| body.contains(sample))
        },
    )
    .await;
}

#[tokio::test]
async fn every_service_exposes_its_metric_families_and_readiness_follows_the_api() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        ..Default::default()
    })
    .await;
    // Some traffic, so that labelled samples exist too.
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
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
  placement:
    clusterAffinity:
      clusterNames: [member1]
"#,
    )
    .await;
    let member1 = env.member_client(1).await;
    wait_member_deployment(&member1, "default", "web", "web in member1", |_| true).await;

    for service in Service::ALL {
        let (code, body) = env.http_get(service, "/metrics").await.unwrap();
        assert_eq!(code, 200, "{service:?} /metrics");
        let missing: Vec<&str> = COMMON
            .iter()
            .chain(families(service))
            .filter(|family| !body.contains(&format!("# TYPE {family} ")))
            .copied()
            .collect();
        assert!(missing.is_empty(), "{service:?} lacks {missing:?} in\n{body}");
    }
    // Samples from the traffic above.
    let (_, execution) = env.http_get(Service::Execution, "/metrics").await.unwrap();
    assert!(
        execution.contains("flotilla_execution_member_apply_duration_seconds_count{cluster=\"member1\""),
        "{execution}"
    );
    let (_, detector) = env.http_get(Service::Detector, "/metrics").await.unwrap();
    assert!(
        detector.contains("flotilla_leader{service=\"flotilla-detector\"} 1"),
        "{detector}"
    );
    // The detector's Schedule call is recorded when its answer arrives, which may be after
    // the member already holds the Deployment (the scheduler notifies execution before
    // answering).
    wait_for_sample(
        &env,
        Service::Detector,
        "flotilla_grpc_client_request_duration_seconds_count{method=\"flotilla.v1.Scheduler/Schedule\"",
    )
    .await;
    // The scheduler reports its queue per binding kind (every 5 s).
    wait_for_sample(
        &env,
        Service::Scheduler,
        "flotilla_workqueue_oldest_wait_seconds{service=\"flotilla-scheduler\",queue=\"ResourceBinding\"}",
    )
    .await;

    // Readiness names its checks, leader election and membership included.
    let (_, verbose) = env.http_get(Service::Detector, "/readyz?verbose").await.unwrap();
    assert!(verbose.contains("leader-election: leader"), "{verbose}");
    let (_, verbose) = env.http_get(Service::Execution, "/readyz?verbose").await.unwrap();
    assert!(verbose.contains("[+] membership"), "{verbose}");

    // Readiness reflects real health: without the control-plane API no service is ready; each
    // is again once it is back, although nothing changes afterwards (a watch re-established on a
    // quiet kind reports nothing, so readiness cannot wait for a watch event).
    let services = [
        Service::Detector,
        Service::Scheduler,
        Service::DependencyDistributor,
        Service::Execution,
    ];
    env.control_plane.stop();
    for service in services {
        let address = env.metrics_address(service);
        eventually(&format!("{service:?} to report not ready"), TIMEOUT, || {
            let address = address.clone();
            async move {
                matches!(
                    flotilla_e2e::env::http_get(&address, "/readyz").await,
                    Some((503, _))
                )
            }
        })
        .await;
        assert!(
            matches!(env.http_get(service, "/livez").await, Some((200, _))),
            "{service:?} stays live"
        );
    }
    env.control_plane.start_again().await;
    for service in services {
        env.wait_service_ready(service).await;
        let (_, verbose) = env.http_get(service, "/readyz?verbose").await.unwrap();
        assert!(
            verbose.contains("[+] control-plane: reachable"),
            "{service:?}: {verbose}"
        );
    }
}
