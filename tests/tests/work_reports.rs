//! Execution's Work reports (issue 17, round 24): a Work whose workload was just written to a
//! member waits for the member's controller to report on it (`--report-wait`), so one Work
//! status write says both that the manifest was applied and what the member made of it. Every
//! event of the Work is watched: the first one that reports the applied generation already
//! carries the controller's status, at creation and after a template change. Kinds without a
//! controller are reported at once, and a member without controllers gets its report once the
//! wait has passed.
//!
//! A Work's reconcile starts from the Work the control-plane watch delivered, not a read of it
//! (round 26, ADR 0028): template changes typed back to back, with execution running and with
//! it paused between them, end with the last one in the member and never put an older one
//! back; `--held-works-mib 0` reads every Work as before.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use flotilla_api::Work;
use flotilla_api::conditions::find;
use flotilla_api::well_known::execution_namespace;
use flotilla_api::work::ResourceHealth;
use flotilla_e2e::env::series_sum;
use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, image_of};
use flotilla_e2e::wait::wait_until;
use flotilla_e2e::{Env, EnvOptions, Service};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};

/// Places Deployment `web` and ConfigMap `settings` in `default` on `member1`.
const POLICY: &str = r"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: reports
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  - apiVersion: v1
    kind: ConfigMap
    name: settings
  placement:
    clusterAffinity:
      clusterNames: [member1]
";

const CONFIG_MAP: &str = r"apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  mode: fast
";

/// One member; execution runs with `execution_args`; `member1` runs without controllers when
/// `controllers` is false.
async fn start(controllers: bool, execution_args: &[&str]) -> Env {
    Env::start(EnvOptions {
        members: 1,
        members_without_controllers: if controllers {
            BTreeSet::new()
        } else {
            BTreeSet::from([0])
        },
        service_args: BTreeMap::from([(
            Service::Execution,
            execution_args.iter().map(ToString::to_string).collect(),
        )]),
        ..Default::default()
    })
    .await
}

/// Execution's count of report waits that ended `ended` (`reconciled`, `timed-out`).
async fn waits_ended(env: &Env, ended: &str) -> f64 {
    let (_, metrics) = env.http_get(Service::Execution, "/metrics").await.unwrap();
    series_sum(
        &metrics,
        "flotilla_execution_report_waits_total",
        &["cluster=\"member1\"", &format!("ended=\"{ended}\"")],
    )
}

/// Every version `api` sees of its objects from now on, in the order they were written, as
/// `keep` maps each (`None`: not recorded).
async fn record<K, T>(api: Api<K>, keep: impl Fn(K) -> Option<T> + Send + 'static) -> Arc<Mutex<Vec<T>>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    let listed = api.list(&ListParams::default()).await.unwrap();
    let from = listed.metadata.resource_version.unwrap_or_default();
    let mut stream = api
        .watch(&WatchParams::default().timeout(290), &from)
        .await
        .unwrap()
        .boxed();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                    if let Some(kept) = keep(object) {
                        recorder.lock().unwrap().push(kept);
                    }
                }
                Ok(WatchEvent::Error(error)) => panic!("a watch failed: {error:?}"),
                _ => {}
            }
        }
    });
    seen
}

/// Every version of every Work in `member1`'s execution namespace, in the order the control
/// plane wrote them, from now on.
async fn record_works(env: &Env) -> Arc<Mutex<Vec<Work>>> {
    let cp = env.control_plane_client().await;
    record(Api::<Work>::namespaced(cp, &execution_namespace("member1")), Some).await
}

/// The versions recorded of the Work of binding `binding`.
fn versions_of(seen: &Mutex<Vec<Work>>, binding: &str) -> Vec<Work> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|w| {
            w.annotations()
                .get("resourcebinding.karmada.io/name")
                .map(String::as_str)
                == Some(binding)
        })
        .cloned()
        .collect()
}

/// The first recorded version of `binding`'s Work whose `Applied` condition observes
/// `generation`, once there is one.
async fn first_report(seen: &Mutex<Vec<Work>>, binding: &str, generation: i64) -> Work {
    wait_until(
        &format!("a report of {binding}'s Work at generation {generation}"),
        TIMEOUT,
        || async {
            versions_of(seen, binding).into_iter().find(|w| {
                w.status
                    .as_ref()
                    .and_then(|s| find(&s.conditions, "Applied"))
                    .is_some_and(|c| c.observed_generation == Some(generation))
            })
        },
    )
    .await
}

/// `Applied`'s status and the reflected status of the Work's first manifest.
fn reported(work: &Work) -> (String, Option<serde_json::Value>, Option<ResourceHealth>) {
    let status = work.status.as_ref().unwrap();
    let applied = find(&status.conditions, "Applied").unwrap().status.clone();
    let manifest = status.manifest_statuses.first().unwrap();
    (applied, manifest.status.clone(), manifest.health.clone())
}

/// With a report wait far longer than the test, a Deployment's Work can only be reported
/// because the member's controller reported: its first report says both `Applied=True` and
/// the controller's status for the applied generation, at creation and after a template
/// change. The ConfigMap's Work, with no controller to wait for, is reported at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_is_reported_once_with_what_its_member_controller_made_of_it() {
    let env = start(true, &["--report-wait", "1h"]).await;
    let cp = env.control_plane_client().await;
    let seen = record_works(&env).await;
    fixtures::apply(&cp, POLICY).await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "nginx:1.25")).await;
    fixtures::apply(&cp, CONFIG_MAP).await;

    let config_map = first_report(&seen, "settings-configmap", 1).await;
    let (applied, status, health) = reported(&config_map);
    assert_eq!(
        (applied.as_str(), status, health),
        ("True", None, Some(ResourceHealth::Healthy))
    );

    let web = first_report(&seen, "web-deployment", 1).await;
    let (applied, status, health) = reported(&web);
    assert_eq!(applied, "True");
    let status = status.expect("the first report carries the member's status");
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(status["readyReplicas"], 1, "{status}");
    assert_eq!(health, Some(ResourceHealth::Healthy));

    // A template change: the Work's next generation is reported with the status the
    // controller wrote for it, not the one the apply's answer still had.
    fixtures::apply(&cp, &deployment_yaml("default", "web", 3, "nginx:1.25")).await;
    let web = first_report(&seen, "web-deployment", 2).await;
    let (applied, status, _) = reported(&web);
    assert_eq!(applied, "True");
    let status = status.unwrap();
    assert_eq!(
        (status["replicas"].as_i64(), status["readyReplicas"].as_i64()),
        (Some(3), Some(3)),
        "{status}"
    );
    // One status write reported each generation: the apply and the member's status together.
    // (A version whose status is its predecessor's is a write of the Work's spec.)
    let versions = versions_of(&seen, "web-deployment");
    let status_writes: Vec<_> = versions
        .windows(2)
        .filter(|pair| pair[0].status != pair[1].status)
        .map(|pair| &pair[1])
        .collect();
    let reports = |generation: i64| {
        status_writes
            .iter()
            .filter(|w| {
                w.status
                    .as_ref()
                    .and_then(|s| find(&s.conditions, "Applied"))
                    .is_some_and(|c| c.observed_generation == Some(generation))
            })
            .count()
    };
    assert_eq!(
        (status_writes.len(), reports(1), reports(2)),
        (2, 1, 1),
        "{:#?}",
        versions
            .iter()
            .map(|w| (w.resource_version(), &w.status))
            .collect::<Vec<_>>()
    );
    assert!(
        waits_ended(&env, "reconciled").await >= 2.0,
        "both generations waited"
    );
    assert_eq!(waits_ended(&env, "timed-out").await, 0.0);
}

/// A member without controllers never reports on its workloads: the Work is reported once the
/// wait (the default, 500 ms) has passed, without a reflected status, and the binding is fully
/// applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_no_controller_reports_on_is_reported_after_the_wait() {
    let env = start(false, &[]).await;
    let cp = env.control_plane_client().await;
    let seen = record_works(&env).await;
    fixtures::apply(&cp, POLICY).await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, "nginx:1.25")).await;

    let web = first_report(&seen, "web-deployment", 1).await;
    let (applied, status, health) = reported(&web);
    assert_eq!((applied.as_str(), status), ("True", None));
    assert_eq!(
        health,
        Some(ResourceHealth::Unhealthy),
        "no pod runs without a controller"
    );
    assert_eq!(
        waits_ended(&env, "timed-out").await,
        1.0,
        "reported once the wait passed"
    );
    assert_eq!(waits_ended(&env, "reconciled").await, 0.0);
    fixtures::wait_fully_applied(
        &cp,
        "default",
        "web-deployment",
        "web-deployment fully applied",
        TIMEOUT,
    )
    .await;
}

/// The images typed one after the other, oldest first.
const IMAGES: [&str; 4] = ["nginx:1.25", "nginx:1.26", "nginx:1.27", "nginx:1.28"];

/// Execution's `flotilla_execution_work_reads_total` with `source`.
async fn work_reads(env: &Env, source: &str) -> f64 {
    let (_, metrics) = env.http_get(Service::Execution, "/metrics").await.unwrap();
    series_sum(
        &metrics,
        "flotilla_execution_work_reads_total",
        &[&format!("source=\"{source}\"")],
    )
}

/// Execution's GETs of Works, counted by its control-plane client.
async fn work_gets(env: &Env) -> f64 {
    let (_, metrics) = env.http_get(Service::Execution, "/metrics").await.unwrap();
    series_sum(
        &metrics,
        "flotilla_control_plane_requests_total",
        &["verb=\"get\"", "resource=\"works\""],
    )
}

/// The image of every version of member1's Deployment `web`, from now on.
async fn record_member_images(env: &Env) -> Arc<Mutex<Vec<String>>> {
    let member = env.member_client(1).await;
    record(Api::<Deployment>::namespaced(member, "default"), |d| {
        (d.name_any() == "web").then(|| image_of(&d).unwrap_or_default())
    })
    .await
}

/// Waits until member1's `web` runs the last image and its binding is fully applied, then
/// checks that the member's images only ever moved forward.
async fn ends_with_the_last_image(env: &Env, images: &Mutex<Vec<String>>) {
    let cp = env.control_plane_client().await;
    fixtures::wait_fully_applied(&cp, "default", "web-deployment", "web", TIMEOUT).await;
    wait_until("member1's web at the last image", TIMEOUT, || async {
        (images.lock().unwrap().last().map(String::as_str) == IMAGES.last().copied()).then_some(())
    })
    .await;
    let seen = images.lock().unwrap().clone();
    let order = |image: &String| IMAGES.iter().position(|i| i == image).unwrap();
    assert!(
        seen.windows(2).all(|pair| order(&pair[0]) <= order(&pair[1])),
        "member1's web went back to an older image: {seen:?}"
    );
}

/// The user creates a Deployment and ConfigMap and changes the Deployment's image three times,
/// back to back. Each Work's first reconcile starts from the watch's delivery; the member ends
/// at the last image, never going back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_are_reconciled_from_the_watch_delivery_and_back_to_back_changes_end_at_the_last() {
    let env = start(true, &[]).await;
    let cp = env.control_plane_client().await;
    let images = record_member_images(&env).await;
    fixtures::apply(&cp, POLICY).await;
    fixtures::apply(&cp, CONFIG_MAP).await;
    for image in IMAGES {
        fixtures::apply(&cp, &deployment_yaml("default", "web", 1, image)).await;
    }
    ends_with_the_last_image(&env, &images).await;
    fixtures::wait_fully_applied(&cp, "default", "settings-configmap", "settings", TIMEOUT).await;

    let (from_watch, from_api, gets) = (
        work_reads(&env, "watch").await,
        work_reads(&env, "api").await,
        work_gets(&env).await,
    );
    assert!(
        from_watch >= 2.0,
        "both Works' first reconciles start from the watch: watch {from_watch}, api {from_api}"
    );
    assert_eq!(
        gets, from_api,
        "every GET of a Work is a read the metric counts as `api`"
    );
}

/// The same changes typed while execution is paused: its watch delivers them all at once when
/// it resumes, and the Work it holds is the newest one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_changes_while_execution_is_paused_end_at_the_last() {
    let mut env = start(true, &[]).await;
    let cp = env.control_plane_client().await;
    let images = record_member_images(&env).await;
    fixtures::apply(&cp, POLICY).await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 1, IMAGES[0])).await;
    fixtures::wait_fully_applied(&cp, "default", "web-deployment", "web", TIMEOUT).await;

    env.pause(Service::Execution);
    for image in &IMAGES[1..] {
        fixtures::apply(&cp, &deployment_yaml("default", "web", 1, image)).await;
    }
    env.resume(Service::Execution);
    ends_with_the_last_image(&env, &images).await;
}

/// `--held-works-mib 0` holds nothing: every reconcile reads its Work, and the outcome is the
/// same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_budget_every_work_is_read_from_the_api_server() {
    let env = start(true, &["--held-works-mib", "0"]).await;
    let cp = env.control_plane_client().await;
    let images = record_member_images(&env).await;
    fixtures::apply(&cp, POLICY).await;
    for image in IMAGES {
        fixtures::apply(&cp, &deployment_yaml("default", "web", 1, image)).await;
    }
    ends_with_the_last_image(&env, &images).await;
    assert_eq!(work_reads(&env, "watch").await, 0.0);
    assert!(work_reads(&env, "api").await >= 1.0);
}
