//! OpenTelemetry traces end to end: the real service binaries export spans over OTLP/gRPC to a
//! receiver running in this test process, and one Deployment propagation is one trace holding
//! spans of the detector, the scheduler, the dependency distributor and execution, down to the
//! member apply of each target cluster; and a service stopped with SIGTERM exports the spans it
//! still holds before it exits.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, wait_member_deployment};
use flotilla_e2e::wait::wait_until_explained;
use flotilla_e2e::{Env, EnvOptions, Service, binaries};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use tokio_stream::wrappers::TcpListenerStream;

/// One received span, flattened.
#[derive(Clone, Debug)]
struct ReceivedSpan {
    service: String,
    trace_id: String,
    /// The parent span's id, empty for a root.
    parent: String,
    /// Trace ids of the span's links.
    links: Vec<String>,
    name: String,
    attributes: BTreeMap<String, String>,
}

impl ReceivedSpan {
    fn attribute(&self, key: &str) -> &str {
        self.attributes.get(key).map(String::as_str).unwrap_or_default()
    }
}

/// An OTLP/gRPC trace receiver (`opentelemetry.proto.collector.trace.v1.TraceService/Export`)
/// that keeps every span it is sent.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            let service = resource.get("service.name").cloned().unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    received.push(ReceivedSpan {
                        service: service.clone(),
                        trace_id: hex(&span.trace_id),
                        parent: hex(&span.parent_span_id),
                        links: span.links.iter().map(|l| hex(&l.trace_id)).collect(),
                        name: span.name,
                        attributes: attributes(&span.attributes),
                    });
                }
            }
        }
        self.spans.lock().unwrap().extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Receiver {
    /// Serves on an ephemeral local port; returns the receiver and its `http://` endpoint.
    async fn start() -> (Self, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let receiver = Receiver::default();
        let service = TraceServiceServer::new(receiver.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        (receiver, endpoint)
    }

    fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }
}

/// The gRPC methods one propagation with `propagateDeps` calls.
const GRPC_HOPS: [&str; 3] = [
    "/flotilla.v1.Scheduler/Schedule",
    "/flotilla.v1.Execution/Dispatch",
    "/flotilla.v1.DependencyDistributor/SyncDependencies",
];

/// What one trace must hold for the propagation of Deployment `default/<name>` to `clusters`.
fn complete_trace(spans: &[ReceivedSpan], name: &str, clusters: &[&str]) -> Option<String> {
    let binding = format!("{name}-deployment");
    let mut by_trace: BTreeMap<&str, Vec<&ReceivedSpan>> = BTreeMap::new();
    for span in spans {
        by_trace.entry(&span.trace_id).or_default().push(span);
    }
    by_trace.into_iter().find_map(|(trace, spans)| {
        let has = |service: &str, span_name: &str, check: &dyn Fn(&ReceivedSpan) -> bool| {
            spans
                .iter()
                .any(|s| s.service == service && s.name == span_name && check(s))
        };
        let detector = has("flotilla-detector", "detector.reconcile", &|s| {
            s.attribute("controller") == "template" && s.attribute("object").contains(name)
        });
        let scheduler = has("flotilla-scheduler", "scheduler.schedule", &|s| {
            s.attribute("binding").contains(&binding) && !s.attribute("clusters").is_empty()
        });
        let distributor = spans.iter().any(|s| {
            s.service == "flotilla-dependency-distributor" && s.attribute("binding").contains(&binding)
        });
        let dispatch = has("flotilla-execution", "execution.dispatch", &|s| {
            s.attribute("object").contains(&binding) && s.attribute("outcome") == "dispatched"
        });
        let applied: BTreeSet<&str> = spans
            .iter()
            .filter(|s| {
                s.service == "flotilla-execution"
                    && s.name == "execution.apply"
                    && s.attribute("object").contains(name)
                    && s.attribute("outcome") == "applied"
            })
            .map(|s| s.attribute("cluster"))
            .collect();
        let all_applied = clusters.iter().all(|c| applied.contains(c));
        // The gRPC hops are server spans of the same trace. Whichever of a call and a watch
        // event reaches a service first does the work, so a call's span can end (and be
        // exported) after the work it found done: wait for it like for the rest.
        let calls = GRPC_HOPS.iter().all(|method| {
            spans
                .iter()
                .any(|s| s.name == "grpc.server" && s.attribute("rpc.method") == *method)
        });
        (detector && scheduler && distributor && dispatch && all_applied && calls).then(|| trace.to_owned())
    })
}

fn summary(spans: &[ReceivedSpan]) -> String {
    spans
        .iter()
        .map(|s| {
            let links: Vec<&str> = s.links.iter().map(|l| &l[..8]).collect();
            let parent = if s.parent.is_empty() { "root" } else { "child" };
            format!(
                "{} {parent} links={links:?} {} {} {:?}",
                &s.trace_id[..8],
                s.service,
                s.name,
                s.attributes
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A receiver, and `members` members with every service exporting its spans to it in batches
/// every `schedule_delay_ms`.
async fn traced_env(members: usize, schedule_delay_ms: u64) -> (Receiver, Env) {
    let (receiver, endpoint) = Receiver::start().await;
    let env = Env::start(EnvOptions {
        members,
        service_env: vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), endpoint),
            (
                "OTEL_BSP_SCHEDULE_DELAY".to_owned(),
                schedule_delay_ms.to_string(),
            ),
        ],
        ..Default::default()
    })
    .await;
    (receiver, env)
}

/// Propagates Deployment `default/<name>` with its dependencies (so every service takes part) to
/// `member1..=member<members>`, and waits until each member holds it.
async fn propagate(env: &Env, name: &str, members: usize) {
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", name, 2, "nginx:1.25")).await;
    let clusters: Vec<String> = (1..=members).map(|i| format!("member{i}")).collect();
    let policy = format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: {name}
  namespace: default
spec:
  propagateDeps: true
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: {name}
  placement:
    clusterAffinity:
      clusterNames: [{}]
"#,
        clusters.join(", ")
    );
    fixtures::apply(&cp, &policy).await;
    for (i, cluster) in clusters.iter().enumerate() {
        let member = env.member_client(i + 1).await;
        let what = format!("{name} in {cluster}");
        wait_member_deployment(&member, "default", name, &what, |_| true).await;
    }
}

#[tokio::test]
async fn one_deployment_propagation_is_one_trace() {
    // Flush spans every 100 ms instead of every 5 s.
    let (receiver, env) = traced_env(2, 100).await;
    propagate(&env, "traced", 2).await;

    let clusters = ["member1", "member2"];
    // Spans arrive in batches; poll the receiver until one trace is complete.
    wait_until_explained(
        "a trace holding the detector, scheduler, distributor, dispatch, member apply and gRPC server spans of default/traced",
        TIMEOUT,
        || async { complete_trace(&receiver.spans(), "traced", &clusters) },
        || async { format!("received:\n{}", summary(&receiver.spans())) },
    )
    .await;
}

/// The services run their tasks on one thread by default (ADR 0025), and the OTLP exporter's
/// flush at shutdown must not wait on that thread: each service, stopped with SIGTERM, exits on
/// its own and its spans reach the collector. No periodic export happens within the test, so
/// the spans can only have come from the flush. (The test's own runtime has two threads: the
/// receiver keeps serving while the test waits for a process to exit.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_held_at_shutdown_are_exported_when_a_service_stops() {
    let (receiver, mut env) = traced_env(1, 3_600_000).await;
    propagate(&env, "flushed", 1).await;

    for service in Service::ALL {
        let name = service.binary();
        let before = receiver.spans().iter().filter(|s| s.service == name).count();
        let process = env.service(service);
        let exited = process.terminate(Duration::from_secs(30));
        assert!(
            exited,
            "{name} did not exit within 30 s of SIGTERM:\n{}",
            process.log_tail(40)
        );
        let after = receiver.spans().iter().filter(|s| s.service == name).count();
        assert!(
            after > before,
            "{name} exported no span at shutdown ({before} before); received:\n{}\n{name}'s log:\n{}",
            summary(&receiver.spans()),
            process.log_tail(40)
        );
    }
}

/// An OTLP endpoint that is not a URL stops each service at start with an error naming the
/// variable, not a panic (the exporter's own runtime is shut down on that path too).
#[test]
fn an_otlp_endpoint_that_is_not_a_url_is_a_clean_start_error() {
    for service in Service::ALL {
        let output = std::process::Command::new(binaries::binary(service.binary()))
            .args(["--kubeconfig", "/nonexistent/kubeconfig"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")
            .env_remove("OTEL_TRACES_EXPORTER")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{}: {stderr}", service.binary());
        assert!(
            stderr.contains("OTEL_* environment variables") && !stderr.contains("panicked"),
            "{}: {stderr}",
            service.binary()
        );
    }
}
