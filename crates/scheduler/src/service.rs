//! The `flotilla-scheduler` process: flags, and wiring the cluster inventory, the binding
//! controllers, the gRPC server and the ops endpoint together.
//!
//! The service is stateless: every replica watches the same objects and serves `Schedule`;
//! writes are conditional on the resourceVersion read, so any number of replicas can run behind
//! one address.

use std::net::SocketAddr;
use std::sync::Arc;

use flotilla_api::{Cluster, ClusterResourceBinding, ResourceBinding};
use flotilla_rpc::Readiness;
use flotilla_runtime::grpc::GrpcListener;
use flotilla_runtime::{KubeArgs, Shutdown};
use kube::Api;
use tonic::service::Routes;

use crate::grpc::{SERVICE_NAME, ScheduleService};
use crate::inventory::Inventory;
use crate::peers::Peers;
use crate::reconcile::Context;

/// Readiness check: Clusters, ResourceBindings and ClusterResourceBindings are listed.
const CHECK_CACHES: &str = "caches";

/// The scheduler's flags.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// How to reach the control plane.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Address the gRPC `Schedule` service listens on.
    #[arg(long, default_value = "127.0.0.1:7102")]
    pub grpc_addr: SocketAddr,
    /// Address of the ops endpoint (`/metrics`, `/healthz`, `/livez`, `/readyz`).
    #[arg(long, default_value = "127.0.0.1:9102")]
    pub metrics_addr: SocketAddr,
    /// gRPC address of flotilla-execution, told about new results (empty: never called).
    #[arg(long, default_value = "http://127.0.0.1:7104")]
    pub execution_addr: String,
    /// gRPC address of flotilla-dependency-distributor, told about new results of bindings with
    /// `propagateDeps` (empty: never called).
    #[arg(long, default_value = "http://127.0.0.1:7103")]
    pub dependency_distributor_addr: String,
}

/// Errors starting the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Process set-up failed (kubeconfig, listeners).
    #[error(transparent)]
    Runtime(#[from] flotilla_runtime::RuntimeError),
    /// A peer address is invalid.
    #[error(transparent)]
    Peer(#[from] flotilla_rpc::client::ClientError),
}

/// Runs the scheduler until `shutdown`.
pub async fn run(args: Args, shutdown: Shutdown) -> Result<(), ServiceError> {
    let readiness = Readiness::new(&[SERVICE_NAME]);
    readiness.set(CHECK_CACHES, false, "listing Clusters and bindings");
    let ops = flotilla_runtime::ops::serve(args.metrics_addr, readiness.clone(), shutdown.clone()).await?;
    let client = flotilla_runtime::kube_client(&args.kube).await?;
    let peers = Peers::new(&args.execution_addr, &args.dependency_distributor_addr)?;
    crate::metrics::metrics();

    let inventory = Arc::new(Inventory::new());
    let ctx = Arc::new(Context {
        client: client.clone(),
        inventory: inventory.clone(),
        peers,
        attempts: Default::default(),
    });
    let listener = GrpcListener::bind(args.grpc_addr).await?;
    tracing::info!(grpc = %listener.address(), ops = %ops, "flotilla-scheduler starting");

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(crate::inventory::run(
        Api::<Cluster>::all(client.clone()),
        inventory.clone(),
        shutdown.clone(),
    ));
    tasks.spawn(flotilla_runtime::api_probe::run(
        client.clone(),
        readiness.clone(),
        shutdown.clone(),
    ));
    {
        let (client, ctx, readiness, shutdown) =
            (client.clone(), ctx.clone(), readiness.clone(), shutdown.clone());
        tasks.spawn(async move { run_controllers(client, ctx, readiness, shutdown).await });
    }
    let routes = Routes::new(ScheduleService::new(ctx).into_server());
    let served = listener.serve(routes, readiness, shutdown.clone()).await;
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
    tracing::info!("flotilla-scheduler stopped");
    Ok(served?)
}

/// Starts the binding controllers once the cluster inventory is listed (scheduling against an
/// empty inventory would empty every result), and reports the caches' readiness.
async fn run_controllers(client: kube::Client, ctx: Arc<Context>, readiness: Readiness, shutdown: Shutdown) {
    tokio::select! {
        () = shutdown.cancelled() => return,
        () = ctx.inventory.wait_synced() => {}
    }
    let bindings = crate::controller::start::<ResourceBinding>(client.clone(), ctx.clone(), shutdown.clone());
    let cluster_bindings =
        crate::controller::start::<ClusterResourceBinding>(client, ctx.clone(), shutdown.clone());
    let synced = async {
        bindings.wait_synced().await;
        cluster_bindings.wait_synced().await;
    };
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = synced => {
            readiness.set(CHECK_CACHES, true, "Clusters, ResourceBindings and ClusterResourceBindings listed");
            tracing::info!("caches synced; scheduling");
        }
    }
    crate::controller::report(&bindings, &cluster_bindings, shutdown.clone()).await;
    let _ = bindings.task.await;
    let _ = cluster_bindings.task.await;
}
