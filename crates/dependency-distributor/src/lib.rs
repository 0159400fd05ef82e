//! # flotilla-dependency-distributor
//!
//! `propagateDeps: true` on a PropagationPolicy or ClusterPropagationPolicy makes the resources a
//! workload references (ConfigMaps, Secrets, PersistentVolumeClaims, ServiceAccounts, and any
//! kind a declarative rule names) follow it to exactly the clusters it runs in, without
//! selectors of their own. This service does it, as Karmada's dependencies distributor does:
//!
//! 1. For every independent binding with `spec.propagateDeps` it reads the template, finds its
//!    dependencies ([`flotilla_interpreter::dependencies`]) and records them in the binding's
//!    `resourcebinding.karmada.io/dependencies` annotation.
//! 2. Each dependency gets one *attached* binding, `<name>-<kind lower>` in the dependency's
//!    namespace (a ClusterResourceBinding for a cluster-scoped dependency), owned by the
//!    dependency object, whose `spec.requiredBy` lists a `BindingSnapshot {namespace, name,
//!    clusters}` for every binding that needs it. The scheduler targets the union of those
//!    clusters (plus the binding's own placement result when a policy of its own also claims
//!    the dependency), and execution propagates it.
//! 3. When nothing requires a dependency any more, its attached-only binding is deleted and
//!    execution's finalizer cleans the member objects. A binding a policy claims is never
//!    deleted; the distributor only writes its `requiredBy`.
//!
//! The distributor reads the workload's *binding* (its clusters and `propagateDeps`), never the
//! policy: a lazy policy change that has not reached the binding moves neither the workload nor
//! its dependencies (lazy activation, Combined Cases 5 and 6), and the referencing bindings'
//! suspension becomes the dependency's (see [`plan`] for how disagreements are resolved).
//!
//! Beyond Karmada: ClusterResourceBindings distribute their namespaced dependencies too (a
//! PersistentVolume's CSI secrets), and declarative rules (`--dependency-rules FILE` and the
//! ConfigMap `flotilla-system/flotilla-dependency-rules`, see [`rules`]) name the references of
//! any kind, CRDs included.
//!
//! Modules: [`binding`] (what is read from bindings), [`plan`] (pure decisions), [`index`] (who
//! references what), [`controller`] (reconcilers), [`watch`] (watches, workers, resync),
//! [`grpc`] (`SyncDependencies`), [`rules`], [`feature_gates`], [`fingerprint`] (shared with the detector), [`kinds`],
//! [`metrics`]; the work queue is `flotilla_runtime::queue`.

pub mod binding;
pub mod controller;
pub mod feature_gates;
pub use flotilla_api::fingerprint;
pub mod grpc;
pub mod index;
pub mod kinds;
pub mod metrics;
pub mod plan;
pub mod rules;
pub mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::watched::Watched;
use flotilla_api::{ClusterResourceBinding, ResourceBinding};
use flotilla_proto::v1::dependency_distributor_server::DependencyDistributorServer;
use flotilla_proto::v1::scheduler_client::SchedulerClient;
use flotilla_rpc::{ClientOptions, Readiness};
use flotilla_runtime::KubeArgs;
use flotilla_runtime::cache::Cache;
use flotilla_runtime::events::Recorder;
use flotilla_runtime::grpc::GrpcListener;
use flotilla_runtime::leader::LeaderElection;
use flotilla_runtime::queue::WorkQueue;
use flotilla_telemetry::LogArgs;
use kube::Api;
use kube::runtime::events::Reporter;
use tonic::service::Routes;
use tracing::info;

use crate::binding::BindingView;
use crate::controller::Context;
use crate::feature_gates::FeatureGates;
use crate::index::Key;
use crate::rules::RulesSet;
use crate::watch::{CHECK_RULES, CHECK_SYNCED, SyncGate, SyncPart};

/// The binary's name, also its event reporter and default `service.name`.
pub const NAME: &str = "flotilla-dependency-distributor";

/// Command-line flags.
#[derive(Clone, Debug, clap::Parser)]
#[command(name = NAME, version, about = "Makes the resources a workload references follow it to its clusters (propagateDeps)")]
pub struct Args {
    /// How to reach the control-plane API.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
    /// Threads the service's tasks run on.
    #[command(flatten)]
    pub threads: flotilla_runtime::ThreadArgs,
    /// Address of the gRPC server (SyncDependencies and grpc.health.v1).
    #[arg(long, default_value = "127.0.0.1:7103")]
    pub grpc_addr: SocketAddr,
    /// Address of the ops endpoint (/metrics, /healthz, /livez, /readyz).
    #[arg(long, default_value = "127.0.0.1:9103")]
    pub metrics_addr: SocketAddr,
    /// The scheduler, told about every attached binding the distributor changes.
    #[arg(long, default_value = "http://127.0.0.1:7102")]
    pub scheduler_addr: String,
    /// Feature gates, Karmada's syntax: `PropagateDeps=true|false` (default true).
    #[arg(long, default_value = "")]
    pub feature_gates: FeatureGates,
    /// A `flotilla.io/v1alpha1 DependencyRules` file, re-read when it changes.
    #[arg(long)]
    pub dependency_rules: Option<PathBuf>,
    /// How often the rules file is re-read, in seconds.
    #[arg(long, default_value_t = 2)]
    pub dependency_rules_poll_seconds: u64,
    /// How often every binding and dependency is reconciled again, in seconds (a safety net;
    /// watches drive the work).
    #[arg(long, default_value_t = 300)]
    pub resync_seconds: u64,
    /// Concurrent reconciles.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Leader election (active/standby on the Lease
    /// `flotilla-system/flotilla-dependency-distributor`).
    #[command(flatten)]
    pub leader_election: flotilla_runtime::leader::LeaderElectArgs,
}

/// Why the service could not start or failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Logging or tracing could not be set up.
    #[error(transparent)]
    Telemetry(#[from] flotilla_telemetry::TelemetryError),
    /// A listener, the kube client or a server failed.
    #[error(transparent)]
    Runtime(#[from] flotilla_runtime::RuntimeError),
    /// The scheduler address is invalid.
    #[error("--scheduler-addr: {0}")]
    Scheduler(#[from] flotilla_rpc::client::ClientError),
    /// The leader-election flags are inconsistent.
    #[error("{0}")]
    LeaderElection(String),
}

/// Reports the work queue's depth and oldest wait every two seconds.
async fn report_queue(queue: WorkQueue<Arc<Key>>, shutdown: flotilla_runtime::Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        flotilla_telemetry::metrics::report_queue(NAME, "bindings", queue.len(), queue.oldest_wait());
    }
}

/// Runs the distributor until SIGTERM or SIGINT.
pub async fn run(args: Args) -> Result<(), ServiceError> {
    let _telemetry = flotilla_telemetry::init(NAME, &args.log)?;
    let readiness = Readiness::new(&[grpc::SERVICE_NAME]);
    let shutdown = flotilla_runtime::shutdown_token();
    metrics::metrics();
    let ops = flotilla_runtime::ops::serve(args.metrics_addr, readiness.clone(), shutdown.clone()).await?;
    let listener = GrpcListener::bind(args.grpc_addr).await?;
    info!(grpc = %listener.address(), ops = %ops, feature_gates = %args.feature_gates, "starting");

    if !args.feature_gates.propagate_deps {
        info!("feature gate PropagateDeps=false: no dependencies are distributed; serving health only");
        readiness.set(
            "feature-gates",
            true,
            "PropagateDeps=false: dependency distribution is off",
        );
        let routes = Routes::new(DependencyDistributorServer::new(grpc::Service::disabled()));
        listener.serve(routes, readiness, shutdown).await?;
        return Ok(());
    }

    let client = flotilla_runtime::kube_client(&args.kube).await?;
    let leadership = if args.leader_election.leader_elect {
        let timings = args
            .leader_election
            .timings()
            .map_err(ServiceError::LeaderElection)?;
        let identity = flotilla_runtime::lease::identity(listener.address().port());
        let election = LeaderElection::start(
            client.clone(),
            &args.leader_election.leader_elect_namespace,
            NAME,
            &identity,
            NAME,
            timings,
            Some(readiness.clone()),
        );
        // A leader that loses the Lease exits and comes back as a standby.
        election.exit_on_loss();
        election
    } else {
        LeaderElection::always_leader(NAME)
    };
    let scheduler = SchedulerClient::new(flotilla_rpc::connect(
        &args.scheduler_addr,
        &ClientOptions::default(),
    )?);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: NAME.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let (rb_store, rb_writer) = Cache::new();
    let (crb_store, crb_writer) = Cache::new();
    let queue: WorkQueue<Arc<Key>> = WorkQueue::new(Duration::from_millis(200), Duration::from_secs(60));
    let (watch_requests, watch_receiver) = tokio::sync::mpsc::unbounded_channel();
    readiness.set(CHECK_SYNCED, false, "filling the caches");
    readiness.set(CHECK_RULES, true, "built-in rules");
    let ctx = Arc::new(Context::new(
        client.clone(),
        rb_store,
        crb_store,
        RulesSet::new(),
        recorder,
        scheduler,
        queue.clone(),
        readiness.clone(),
        watch_requests,
    ));

    let mut parts = vec![
        SyncPart::ResourceBindings,
        SyncPart::ClusterResourceBindings,
        SyncPart::RulesConfigMap,
    ];
    if args.dependency_rules.is_some() {
        parts.push(SyncPart::RulesFile);
    }
    let gate = SyncGate::new(parts);

    tokio::spawn(flotilla_runtime::api_probe::run(
        client.clone(),
        readiness.clone(),
        shutdown.clone(),
    ));
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "ServiceAccount"),
    ] {
        let _ = ctx.watch_requests.send((api_version.to_owned(), kind.to_owned()));
    }
    tokio::spawn(watch::watch_dependency_kinds(
        ctx.clone(),
        watch_receiver,
        shutdown.clone(),
    ));
    if let Some(path) = args.dependency_rules.clone() {
        let interval = Duration::from_secs(args.dependency_rules_poll_seconds.max(1));
        tokio::spawn(watch::poll_rules_file(
            ctx.clone(),
            path,
            interval,
            gate.clone(),
            shutdown.clone(),
        ));
    }
    tokio::spawn(watch::watch_rules_config_map(
        ctx.clone(),
        gate.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(watch::watch_bindings(
        ctx.clone(),
        Api::<Watched<ResourceBinding>>::all(client.clone()),
        rb_writer,
        |binding| BindingView::of_resource_binding(&binding.into_binding()),
        SyncPart::ResourceBindings,
        gate.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(watch::watch_bindings(
        ctx.clone(),
        Api::<Watched<ClusterResourceBinding>>::all(client.clone()),
        crb_writer,
        |binding| BindingView::of_cluster_resource_binding(&binding.into_binding()),
        SyncPart::ClusterResourceBindings,
        gate.clone(),
        shutdown.clone(),
    ));
    {
        let ctx = ctx.clone();
        let gate = gate.clone();
        let workers = args.workers.max(1);
        let resync = Duration::from_secs(args.resync_seconds.max(1));
        let shutdown = shutdown.clone();
        let leadership = leadership.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = gate.opened() => {}
            }
            ctx.readiness.set(CHECK_SYNCED, true, "caches synced");
            // A standby keeps its caches warm and writes nothing until it leads.
            let leading = tokio::select! {
                _ = shutdown.cancelled() => return,
                leading = leadership.wait_leader() => leading,
            };
            if !leading {
                return;
            }
            info!(workers, "caches synced and leading; distributing dependencies");
            for _ in 0..workers {
                tokio::spawn(watch::worker(ctx.clone()));
            }
            tokio::spawn(watch::resync(ctx.clone(), resync, shutdown.clone()));
            tokio::spawn(report_queue(ctx.queue.clone(), shutdown));
        });
    }

    let routes = Routes::new(DependencyDistributorServer::new(
        grpc::Service::new(ctx.clone(), gate).with_leadership(leadership.clone()),
    ));
    listener.serve(routes, readiness, shutdown).await?;
    queue.shut_down();
    leadership.release().await;
    info!("stopped");
    Ok(())
}
