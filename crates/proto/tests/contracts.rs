//! The generated client and server types fit together: a real tonic server implementing each
//! service answers a real generated client over loopback.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::net::SocketAddr;

use flotilla_proto::health::v1::health_check_response::ServingStatus;
use flotilla_proto::health::v1::health_client::HealthClient;
use flotilla_proto::health::v1::health_server::{Health, HealthServer};
use flotilla_proto::health::v1::{HealthCheckRequest, HealthCheckResponse};
use flotilla_proto::v1::dependency_distributor_client::DependencyDistributorClient;
use flotilla_proto::v1::dependency_distributor_server::{DependencyDistributor, DependencyDistributorServer};
use flotilla_proto::v1::execution_client::ExecutionClient;
use flotilla_proto::v1::execution_server::{Execution, ExecutionServer};
use flotilla_proto::v1::scheduler_client::SchedulerClient;
use flotilla_proto::v1::scheduler_server::{Scheduler, SchedulerServer};
use flotilla_proto::v1::*;
use tonic::{Request, Response, Status};

struct Echo;

#[tonic::async_trait]
impl Scheduler for Echo {
    async fn schedule(
        &self,
        request: Request<ScheduleRequest>,
    ) -> Result<Response<ScheduleResponse>, Status> {
        let binding = request
            .into_inner()
            .binding
            .ok_or_else(|| Status::invalid_argument("binding is required"))?;
        Ok(Response::new(ScheduleResponse {
            outcome: Outcome::Done as i32,
            clusters: vec![TargetCluster {
                name: "member1".into(),
                replicas: 2,
            }],
            observed_generation: binding.generation,
            message: binding.key(),
        }))
    }
}

#[tonic::async_trait]
impl Execution for Echo {
    async fn dispatch(
        &self,
        request: Request<DispatchRequest>,
    ) -> Result<Response<DispatchResponse>, Status> {
        let binding = request
            .into_inner()
            .binding
            .ok_or_else(|| Status::invalid_argument("binding is required"))?;
        Ok(Response::new(DispatchResponse {
            outcome: Outcome::Deferred as i32,
            works: vec![format!("karmada-es-member1/{}", binding.name)],
            suspended_clusters: vec!["member1".into()],
        }))
    }
}

#[tonic::async_trait]
impl DependencyDistributor for Echo {
    async fn sync_dependencies(
        &self,
        request: Request<SyncDependenciesRequest>,
    ) -> Result<Response<SyncDependenciesResponse>, Status> {
        let binding = request
            .into_inner()
            .binding
            .ok_or_else(|| Status::invalid_argument("binding is required"))?;
        Ok(Response::new(SyncDependenciesResponse {
            outcome: Outcome::Unchanged as i32,
            attached: vec![binding],
        }))
    }
}

#[tonic::async_trait]
impl Health for Echo {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let status = if request.into_inner().service.is_empty() {
            ServingStatus::Serving
        } else {
            ServingStatus::ServiceUnknown
        };
        Ok(Response::new(HealthCheckResponse {
            status: status as i32,
        }))
    }

    type WatchStream = tokio_stream::Once<Result<HealthCheckResponse, Status>>;

    async fn watch(&self, _: Request<HealthCheckRequest>) -> Result<Response<Self::WatchStream>, Status> {
        Ok(Response::new(tokio_stream::once(Ok(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))))
    }
}

async fn serve() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(SchedulerServer::new(Echo))
            .add_service(ExecutionServer::new(Echo))
            .add_service(DependencyDistributorServer::new(Echo))
            .add_service(HealthServer::new(Echo))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    addr
}

#[tokio::test]
async fn generated_clients_talk_to_generated_servers() {
    let addr = serve().await;
    let endpoint = format!("http://{addr}");
    let binding = BindingRef::resource_binding("default", "nginx-deployment", 3, "uid-1");

    let scheduled = SchedulerClient::connect(endpoint.clone())
        .await
        .unwrap()
        .schedule(ScheduleRequest {
            binding: Some(binding.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(scheduled.outcome(), Outcome::Done);
    assert_eq!(scheduled.observed_generation, 3);
    assert_eq!(scheduled.message, "default/nginx-deployment");
    assert_eq!(
        scheduled.clusters,
        vec![TargetCluster {
            name: "member1".into(),
            replicas: 2
        }]
    );

    let dispatched = ExecutionClient::connect(endpoint.clone())
        .await
        .unwrap()
        .dispatch(DispatchRequest {
            binding: Some(binding.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dispatched.outcome(), Outcome::Deferred);
    assert_eq!(dispatched.works, vec!["karmada-es-member1/nginx-deployment"]);

    let synced = DependencyDistributorClient::connect(endpoint.clone())
        .await
        .unwrap()
        .sync_dependencies(SyncDependenciesRequest {
            binding: Some(binding.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(synced.attached, vec![binding]);

    let mut health = HealthClient::connect(endpoint.clone()).await.unwrap();
    let serving = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(serving.status(), ServingStatus::Serving);
    let unknown = health
        .check(HealthCheckRequest {
            service: "nope".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(unknown.status(), ServingStatus::ServiceUnknown);

    let missing = SchedulerClient::connect(endpoint)
        .await
        .unwrap()
        .schedule(ScheduleRequest { binding: None })
        .await;
    assert_eq!(missing.unwrap_err().code(), tonic::Code::InvalidArgument);
}

#[test]
fn cluster_binding_key_has_no_namespace() {
    let binding = BindingRef::cluster_resource_binding("ns-namespace", 1, "u");
    assert_eq!(binding.key(), "ns-namespace");
    assert_eq!(binding.kind(), BindingKind::ClusterResourceBinding);
}
