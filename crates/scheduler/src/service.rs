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
    /// Feature gates, Karmada's syntax: `Failover=true|false` (default true) evicts bindings
    /// from clusters with `NoExecute` taints their placement does not tolerate.
    #[arg(long, default_value = "")]
    pub feature_gates: FeatureGates,
    /// Purge mode of cluster failover for policies without `failover.cluster`: `Gracefully`
    /// (the old copy stays until the new placement is healthy) or `Directly`.
    #[arg(long, default_value = "Gracefully", value_parser = ["Gracefully", "Directly"])]
    pub no_execute_taint_eviction_purge_mode: String,
    /// How long an eviction task without `gracePeriodSeconds` keeps the old copy while the new
    /// placement is not healthy (e.g. `30s`, `10m`).
    #[arg(long, default_value = "10m", value_parser = flotilla_runtime::lease::parse_duration)]
    pub graceful_eviction_timeout: std::time::Duration,
}

/// Name of the gate that turns cluster failover (taint-based eviction) on and off.
pub const FAILOVER_GATE: &str = "Failover";

/// The scheduler's feature gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// `Failover`: evict bindings from clusters with untolerated `NoExecute` taints. On by
    /// default (Karmada turned its gate off by default in v1.12; flotilla's users asked for
    /// failover out of the box, see `docs/failover.md`).
    pub failover: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self { failover: true }
    }
}

impl std::str::FromStr for FeatureGates {
    type Err = flotilla_runtime::feature_gates::FeatureGateError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let defaults = FeatureGates::default();
        let gates = flotilla_runtime::feature_gates::parse(spec, &[(FAILOVER_GATE, defaults.failover)])?;
        Ok(FeatureGates {
            failover: gates.get(FAILOVER_GATE).copied().unwrap_or(defaults.failover),
        })
    }
}

impl Args {
    /// The failover settings the flags ask for.
    pub fn failover(&self) -> crate::failover::FailoverOptions {
        crate::failover::FailoverOptions {
            taint_eviction: self.feature_gates.failover,
            default_purge_mode: flotilla_api::policy::PurgeMode::from(
                self.no_execute_taint_eviction_purge_mode.as_str(),
            ),
            graceful_eviction_timeout: self.graceful_eviction_timeout,
        }
    }
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
    let failover = args.failover();
    let ctx = Arc::new(Context {
        client: client.clone(),
        inventory: inventory.clone(),
        peers,
        failover: failover.clone(),
        recorder: Context::recorder(client.clone()),
        attempts: Default::default(),
    });
    let listener = GrpcListener::bind(args.grpc_addr).await?;
    tracing::info!(
        grpc = %listener.address(),
        ops = %ops,
        failover = failover.taint_eviction,
        purge_mode = %failover.default_purge_mode,
        graceful_eviction_timeout = ?failover.graceful_eviction_timeout,
        "flotilla-scheduler starting"
    );

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("flotilla-scheduler").chain(flags.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn failover_flags_default_to_karmadas_timings_with_failover_on() {
        let failover = parse(&[]).unwrap().failover();
        assert!(failover.taint_eviction);
        assert_eq!(
            failover.default_purge_mode,
            flotilla_api::policy::PurgeMode::Gracefully
        );
        assert_eq!(
            failover.graceful_eviction_timeout,
            std::time::Duration::from_secs(600)
        );

        let failover = parse(&[
            "--feature-gates=Failover=false",
            "--no-execute-taint-eviction-purge-mode=Directly",
            "--graceful-eviction-timeout=30s",
        ])
        .unwrap()
        .failover();
        assert!(!failover.taint_eviction);
        assert_eq!(
            failover.default_purge_mode,
            flotilla_api::policy::PurgeMode::Directly
        );
        assert_eq!(
            failover.graceful_eviction_timeout,
            std::time::Duration::from_secs(30)
        );
    }

    #[test]
    fn bad_failover_flags_are_refused() {
        assert!(parse(&["--no-execute-taint-eviction-purge-mode=Never"]).is_err());
        assert!(parse(&["--graceful-eviction-timeout=soon"]).is_err());
        let error = parse(&["--feature-gates=Failover=maybe"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("invalid value \"maybe\" for Failover; use true or false"),
            "{error}"
        );
    }
}
