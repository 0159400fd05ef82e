//! Execution starts a Work's reconcile from the Work the control-plane watch delivered, not a
//! read of it (issue 17, round 26; `crates/execution/src/arrivals.rs`). Template changes typed
//! back to back, with execution running and with it paused between them, end with the last
//! one in the member and never put an older one back; `--held-works-mib 0` reads every Work
//! as before.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flotilla_e2e::env::series_sum;
use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml};
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
  name: reads
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

/// The images typed one after the other, oldest first.
const IMAGES: [&str; 4] = ["nginx:1.25", "nginx:1.26", "nginx:1.27", "nginx:1.28"];

async fn start(execution_args: &[&str]) -> Env {
    Env::start(EnvOptions {
        members: 1,
        service_args: BTreeMap::from([(
            Service::Execution,
            execution_args.iter().map(ToString::to_string).collect(),
        )]),
        ..Default::default()
    })
    .await
}

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

/// Every image member1's Deployment `web` had, version by version, from its creation on.
async fn record_member_images(env: &Env) -> Arc<Mutex<Vec<String>>> {
    let member = env.member_client(1).await;
    let deployments: Api<Deployment> = Api::namespaced(member, "default");
    let listed = deployments.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty(), "member1 starts without Deployments");
    let from = listed.metadata.resource_version.unwrap_or_default();
    let mut stream = deployments
        .watch(&WatchParams::default().timeout(290), &from)
        .await
        .unwrap()
        .boxed();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(d) | WatchEvent::Modified(d)) if d.name_any() == "web" => {
                    let image = d
                        .spec
                        .and_then(|s| s.template.spec)
                        .and_then(|s| s.containers.into_iter().next())
                        .and_then(|c| c.image)
                        .unwrap_or_default();
                    let mut seen = recorder.lock().unwrap();
                    if seen.last() != Some(&image) {
                        seen.push(image);
                    }
                }
                Ok(WatchEvent::Error(error)) => panic!("the member watch failed: {error:?}"),
                _ => {}
            }
        }
    });
    seen
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
        seen.windows(2).all(|pair| order(&pair[0]) < order(&pair[1])),
        "member1's web went back to an older image: {seen:?}"
    );
}

/// The user creates a Deployment and ConfigMap and changes the Deployment's image three times,
/// back to back. Each Work's first reconcile starts from the watch's delivery; the member ends
/// at the last image, never going back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_are_reconciled_from_the_watch_delivery_and_back_to_back_changes_end_at_the_last() {
    let env = start(&[]).await;
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
    let mut env = start(&[]).await;
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
    let env = start(&["--held-works-mib", "0"]).await;
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
