//! A service process's plumbing end to end over loopback: gRPC served with the trace layer and
//! health, called through the retrying traced client; the ops endpoint reports readiness and
//! the RPC metrics.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::net::SocketAddr;

use flotilla_proto::health::v1::HealthCheckRequest;
use flotilla_proto::health::v1::health_check_response::ServingStatus;
use flotilla_proto::health::v1::health_client::HealthClient;
use flotilla_proto::v1::scheduler_client::SchedulerClient;
use flotilla_proto::v1::scheduler_server::{Scheduler, SchedulerServer};
use flotilla_proto::v1::{BindingRef, Outcome, ScheduleRequest, ScheduleResponse};
use flotilla_rpc::{ClientOptions, Readiness, RetryPolicy};
use flotilla_runtime::grpc::GrpcListener;
use http_body_util::{BodyExt, Empty};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

struct Fixed;

#[tonic::async_trait]
impl Scheduler for Fixed {
    async fn schedule(
        &self,
        request: Request<ScheduleRequest>,
    ) -> Result<Response<ScheduleResponse>, Status> {
        let binding = request
            .into_inner()
            .binding
            .ok_or_else(|| Status::invalid_argument("binding is required"))?;
        Ok(Response::new(ScheduleResponse {
            outcome: Outcome::Unchanged as i32,
            clusters: vec![],
            observed_generation: binding.generation,
            message: String::new(),
        }))
    }
}

async fn http_get(address: SocketAddr, path: &str) -> (u16, String) {
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn grpc_health_ops_and_metrics() {
    let shutdown = CancellationToken::new();
    let readiness = Readiness::new(&["flotilla.v1.Scheduler"]);
    readiness.set("kube-api", false, "not yet reached");

    let listener = GrpcListener::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let grpc_address = listener.address();
    let routes = tonic::service::Routes::new(SchedulerServer::new(Fixed));
    tokio::spawn(listener.serve(routes, readiness.clone(), shutdown.clone()));
    let ops_address = flotilla_runtime::ops::serve(
        "127.0.0.1:0".parse().unwrap(),
        readiness.clone(),
        shutdown.clone(),
    )
    .await
    .unwrap();

    let channel = flotilla_rpc::connect(&grpc_address.to_string(), &ClientOptions::default()).unwrap();
    let mut health = HealthClient::new(channel.clone());
    let status = health
        .check(HealthCheckRequest {
            service: "flotilla.v1.Scheduler".into(),
        })
        .await
        .unwrap();
    assert_eq!(status.into_inner().status(), ServingStatus::NotServing);
    assert_eq!(http_get(ops_address, "/readyz").await.0, 503);

    readiness.set("kube-api", true, "reachable");
    let status = health
        .check(HealthCheckRequest {
            service: "flotilla.v1.Scheduler".into(),
        })
        .await
        .unwrap();
    assert_eq!(status.into_inner().status(), ServingStatus::Serving);
    let (code, body) = http_get(ops_address, "/readyz?verbose").await;
    assert_eq!(code, 200);
    assert!(body.contains("[+] kube-api: reachable"), "{body}");

    let client = SchedulerClient::new(channel);
    let response = flotilla_rpc::call("flotilla.v1.Scheduler/Schedule", &RetryPolicy::default(), || {
        let mut client = client.clone();
        async move {
            let binding = BindingRef::resource_binding("default", "nginx-deployment", 4, "u");
            client
                .schedule(ScheduleRequest {
                    binding: Some(binding),
                })
                .await
        }
    })
    .await
    .unwrap();
    assert_eq!(response.into_inner().observed_generation, 4);

    let invalid = SchedulerClient::new(
        flotilla_rpc::connect(&grpc_address.to_string(), &ClientOptions::default()).unwrap(),
    )
    .schedule(ScheduleRequest { binding: None })
    .await;
    assert_eq!(invalid.unwrap_err().code(), tonic::Code::InvalidArgument);

    let (code, metrics) = http_get(ops_address, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metrics.contains(r#"flotilla_grpc_server_request_duration_seconds_count{method="/flotilla.v1.Scheduler/Schedule",code="Ok"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"flotilla_grpc_server_request_duration_seconds_count{method="/flotilla.v1.Scheduler/Schedule",code="InvalidArgument"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"flotilla_grpc_client_request_duration_seconds_count{method="flotilla.v1.Scheduler/Schedule",code="Ok"} 1"#), "{metrics}");
    shutdown.cancel();
}
