//! The service process: flags, wiring of watches, queues, workers, the ops endpoint and the
//! gRPC server, and clean shutdown on SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use flotilla_api::well_known::cluster_of_execution_namespace;
use flotilla_proto::v1::execution_server::ExecutionServer;
use flotilla_rpc::Readiness;
use flotilla_runtime::KubeArgs;
use flotilla_runtime::membership::{Membership, MembershipArgs};
use flotilla_telemetry::LogArgs;
use kube::ResourceExt;

use crate::apply_once::Mode;
use crate::clusters::Members;
use crate::context::{Context, Settings};
use crate::dispatch::{self, reconcile_binding};
use crate::metrics::{Resynced, metrics};
use crate::namespaces::reconcile_namespace;
use crate::naming::work_name;
use crate::server::ExecutionService;
use crate::watches;

/// `flotilla-execution` flags.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "flotilla-execution",
    version,
    about = "Turns scheduled bindings into Works and applies them to member clusters"
)]
pub struct Args {
    /// Control-plane access.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
    /// Threads the service's tasks run on.
    #[command(flatten)]
    pub threads: flotilla_runtime::ThreadArgs,
    /// Address of the gRPC server (`flotilla.v1.Execution`, `grpc.health.v1.Health`).
    #[arg(long, default_value = "127.0.0.1:7104")]
    pub grpc_addr: SocketAddr,
    /// Address of the ops endpoint (`/metrics`, `/healthz`, `/livez`, `/readyz`).
    #[arg(long, default_value = "127.0.0.1:9104")]
    pub metrics_addr: SocketAddr,
    /// Apply member objects once per desired revision (`on`), and leave objects others
    /// deleted alone too (`force`); `off` reverts drift. A template's
    /// `flotilla.io/apply-once-only` annotation overrides this per template.
    #[arg(long, value_enum, default_value_t = Mode::Off)]
    pub apply_once_only: Mode,
    /// How often everything is reconciled again without events (e.g. `30s`, `5m`).
    #[arg(long, default_value = "5m", value_parser = parse_period)]
    pub resync_period: Duration,
    /// How often member clusters are probed for health.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub cluster_probe_period: Duration,
    /// Deadline of one request to a member cluster.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub member_timeout: Duration,
    /// How long the report of a Work whose workloads were just written waits for the member's
    /// controllers to report on them (a Deployment's `status.observedGeneration`), so that one
    /// Work status write says both that the manifests were applied and what the member made of
    /// them; the Work is reported when a controller reports or when this has passed. `0s`
    /// reports at once.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub report_wait: Duration,
    /// Bindings reconciled concurrently (a binding's Works are written concurrently).
    #[arg(long, default_value_t = 4)]
    pub binding_workers: usize,
    /// Binding workers beyond `--binding-workers` that take a binding only while the member
    /// clusters' Work queues hold fewer than `--burst-work-backlog` Works: more dispatches in
    /// flight while the members keep up, and the backlog kept in the binding queue (as keys)
    /// while they do not. `0` runs only `--binding-workers`.
    #[arg(long, default_value_t = 4)]
    pub burst_binding_workers: usize,
    /// Works waiting in the Work queues of the member clusters this replica serves, at or above
    /// which the burst binding workers take no binding.
    #[arg(long, default_value_t = 128)]
    pub burst_work_backlog: usize,
    /// Under a backlog of bindings, how long the pass that aggregates a binding's Work reports
    /// into its status (and its template's) yields to bindings waiting for dispatch: it is
    /// served as if queued this much later than its reports came. Without a backlog nothing
    /// waits. `0s` serves both in the order they came.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub status_deferral: Duration,
    /// `Dispatch` calls reconciled at once; a call beyond is answered `OUTCOME_QUEUED` and its
    /// binding queued for the binding workers.
    #[arg(long, default_value_t = 8)]
    pub dispatch_concurrency: usize,
    /// Works applied concurrently per member cluster (one Work is never applied by two
    /// workers at once; an unreachable member still blocks only its own workers).
    #[arg(long, default_value_t = 8)]
    pub work_workers: usize,
    /// MiB of Works held, across members, from the watch event that queues each until a worker
    /// takes it, so the worker need not read the Work from the API server (an approximate
    /// count of the decoded objects). A Work beyond it is read as usual. `0` holds none.
    #[arg(long, default_value_t = crate::arrivals::DEFAULT_BUDGET_MIB)]
    pub held_works_mib: usize,
    /// Sharding between replicas (Lease membership, rendezvous hashing of clusters, bindings
    /// and namespaces).
    #[command(flatten)]
    pub membership: MembershipArgs,
    /// Feature gates, Karmada's syntax: `Failover=true|false` (default true) taints clusters
    /// that stay not ready for `--failover-eviction-timeout` with `NoExecute` (unless a
    /// ClusterTaintPolicy has a `NoExecute` taint) and applies ClusterTaintPolicies.
    #[arg(long, default_value = "")]
    pub feature_gates: FeatureGates,
    /// How long a cluster's `Ready` condition must be `False` (or `Unknown`) before it gets
    /// the `NoExecute` failover taint (e.g. `30s`, `5m`).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub failover_eviction_timeout: Duration,
}

/// Name of the gate that turns automatic `NoExecute` taints on and off.
pub const FAILOVER_GATE: &str = "Failover";

/// Execution's feature gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// `Failover`: taint clusters not ready for `--failover-eviction-timeout` with `NoExecute`
    /// (Karmada v1.13's behaviour; on by default, see `docs/failover.md`) and apply
    /// ClusterTaintPolicies (Karmada runs its policy controller only with this gate).
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

/// The membership group of execution replicas (Lease name prefix and label value).
pub const MEMBERSHIP_GROUP: &str = "flotilla-execution";

/// Parses `500ms`, `30s`, `5m`, `1h` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| text.split_at(i))
        .unwrap_or((text, "s"));
    let value: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: use e.g. 500ms, 30s, 5m or 1h"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(value)),
        "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value * 60)),
        "h" => Ok(Duration::from_secs(value * 3600)),
        _ => Err(format!(
            "invalid duration {text:?}: use e.g. 500ms, 30s, 5m or 1h"
        )),
    }
}

/// A period: a [`parse_duration`] of more than zero (a timer cannot tick every 0 s).
pub fn parse_period(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err(format!(
            "invalid period {text:?}: must be more than 0, e.g. 30s or 5m"
        )),
        period => Ok(period),
    }
}

/// Runs the service until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let _telemetry = flotilla_telemetry::init("flotilla-execution", &args.log)?;
    let shutdown = flotilla_runtime::shutdown_token();
    let readiness = Readiness::new(&["flotilla.v1.Execution"]);
    readiness.set(flotilla_runtime::api_probe::CHECK, false, "not checked yet");
    readiness.set("caches", false, "syncing");
    let ops = flotilla_runtime::ops::serve(args.metrics_addr, readiness.clone(), shutdown.clone()).await?;
    let client = flotilla_runtime::kube_client(&args.kube)
        .await
        .context("cannot reach the control plane")?;
    tracing::info!(
        grpc = %args.grpc_addr,
        ops = %ops,
        apply_once_only = %args.apply_once_only,
        failover = args.feature_gates.failover,
        failover_eviction_timeout = ?args.failover_eviction_timeout,
        "flotilla-execution starting"
    );

    let settings = Settings {
        apply_once_only: args.apply_once_only,
        resync_period: args.resync_period,
        probe_period: args.cluster_probe_period,
        member_timeout: args.member_timeout,
        report_wait: args.report_wait,
        work_workers: args.work_workers.max(1),
        status_deferral: args.status_deferral,
        held_works_bytes: args.held_works_mib.saturating_mul(1 << 20),
        taints: crate::taints::TaintOptions {
            no_execute: args.feature_gates.failover,
            eviction_timeout: args.failover_eviction_timeout,
        },
    };
    let timings = args.membership.timings().map_err(anyhow::Error::msg)?;
    let listener = flotilla_runtime::grpc::GrpcListener::bind(args.grpc_addr).await?;
    let identity = flotilla_runtime::lease::identity(listener.address().port());
    let membership = if args.membership.sharding {
        let membership = Membership::start(
            client.clone(),
            &args.membership.membership_namespace,
            MEMBERSHIP_GROUP,
            &identity,
            timings,
            Some(readiness.clone()),
        );
        // A replica that cannot renew its membership exits before the others take its keys.
        membership.exit_on_loss();
        membership
    } else {
        Membership::everything(&identity)
    };
    let (stores, writers) = watches::stores();
    let ctx = Arc::new(Context::new(client, settings, stores, shutdown.clone()));
    ctx.set_membership(membership.clone());
    watches::spawn(&ctx, writers);
    tokio::spawn(run_rebalance(ctx.clone(), membership.clone()));
    for _ in 0..args.binding_workers.max(1) {
        tokio::spawn(run_binding_worker(ctx.clone(), None));
    }
    for _ in 0..args.burst_binding_workers {
        tokio::spawn(run_binding_worker(ctx.clone(), Some(args.burst_work_backlog)));
    }
    tokio::spawn(run_namespace_worker(ctx.clone()));
    tokio::spawn(crate::taint_policies::run_status_worker(ctx.clone()));
    tokio::spawn(run_resync(ctx.clone()));
    tokio::spawn(run_housekeeping(ctx.clone(), readiness.clone()));
    {
        let ctx = ctx.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            if watches::wait_synced(&ctx.stores).await {
                ctx.set_synced();
                readiness.set("caches", true, "synced");
                tracing::info!("caches synced");
            }
        });
    }

    let routes = tonic::service::Routes::new(ExecutionServer::new(ExecutionService::new(
        ctx.clone(),
        args.dispatch_concurrency,
    )));
    listener.serve(routes, readiness, shutdown.clone()).await?;
    shutdown.cancel();
    ctx.binding_queue.shut_down();
    ctx.namespace_queue.shut_down();
    ctx.taint_policy_queue.shut_down();
    for member in ctx.members.all() {
        member.queue.shut_down();
    }
    // The workers are stopping: hand this replica's clusters over at once.
    membership.leave().await;
    tracing::info!("flotilla-execution stopped");
    Ok(())
}

/// How often a burst binding worker held back by the members' backlog looks at it again.
const BURST_RECHECK: Duration = Duration::from_millis(50);

/// A binding worker; a burst worker (`backlog` = `--burst-work-backlog`) takes a binding only
/// while the member clusters' Work queues hold fewer Works than that.
async fn run_binding_worker(ctx: Arc<Context>, backlog: Option<usize>) {
    if !ctx.wait_synced().await {
        return;
    }
    loop {
        if let Some(limit) = backlog {
            while ctx.members.queued_works() >= limit {
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(BURST_RECHECK) => {}
                }
            }
        }
        let key = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            key = ctx.binding_queue.next() => key,
        };
        let Some(key) = key else { return };
        match reconcile_binding(&ctx, &key).await {
            Ok(_) => ctx.binding_queue.forget(&key),
            Err(error) => {
                let delay = ctx.binding_queue.add_rate_limited(key.clone());
                tracing::info!(binding = %key, %error, retry_in = ?delay, "binding not reconciled");
            }
        }
        ctx.binding_queue.done(&key);
    }
}

async fn run_namespace_worker(ctx: Arc<Context>) {
    if !ctx.wait_synced().await {
        return;
    }
    loop {
        let name = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            name = ctx.namespace_queue.next() => name,
        };
        let Some(name) = name else { return };
        match reconcile_namespace(&ctx, &name).await {
            Ok(()) => ctx.namespace_queue.forget(&name),
            Err(error) => {
                let delay = ctx.namespace_queue.add_rate_limited(name.clone());
                tracing::info!(namespace = %name, %error, retry_in = ?delay, "namespace not propagated");
            }
        }
        ctx.namespace_queue.done(&name);
    }
}

/// Queues everything again whenever the membership changes: keys this replica gained are
/// picked up at once (keys it lost are skipped by the workers).
async fn run_rebalance(ctx: Arc<Context>, membership: Membership) {
    if !ctx.wait_synced().await {
        return;
    }
    let mut view = membership.subscribe();
    loop {
        view.borrow_and_update();
        queue_everything(&ctx, Sweep::All);
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            changed = view.changed() => if changed.is_err() { return },
        }
    }
}

/// Once per resync period, queues every namespace and ClusterTaintPolicy, and every binding and
/// Work that is not settled ([`CachedBinding::settled`](crate::cache::CachedBinding::settled),
/// [`CachedWork::settled`](crate::cache::CachedWork::settled)): a safety net under the watches
/// (a lost event, a failed apply whose retry was dropped). A settled Work is left alone: reading
/// it and its member objects again would cost two API reads per member object each period, and
/// what could unsettle it reaches its worker without the resync (a member object's change or
/// deletion through the member watch, which queues every Work of its cluster when it has to
/// list again; a member that comes back through the probe; a Work or binding change through
/// their watches). A settled binding likewise (ADR 0023): reading it and its template again
/// would cost two reads per template each period, and what could unsettle it reaches the
/// binding controller through the watches (a change of its spec or metadata, its Works'
/// reports and deletions, a cluster's or an override policy's change).
async fn run_resync(ctx: Arc<Context>) {
    let mut ticker = tokio::time::interval(ctx.settings.resync_period);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let pass = queue_everything(&ctx, Sweep::Resync);
        metrics().resynced(&pass);
        tracing::debug!(
            works_queued = pass.works.queued,
            works_settled = pass.works.settled,
            bindings_queued = pass.bindings.queued,
            bindings_settled = pass.bindings.settled,
            "resync"
        );
    }
}

/// Which bindings and Works [`queue_everything`] queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sweep {
    /// All of them (this replica's share of the clusters may have changed).
    All,
    /// Those that are not settled ([`run_resync`]).
    Resync,
}

/// Queues every namespace and ClusterTaintPolicy, and the bindings and Works `sweep` asks for;
/// returns how many of those were queued and how many were left alone as settled.
fn queue_everything(ctx: &Arc<Context>, sweep: Sweep) -> Resynced {
    let mut pass = Resynced::default();
    // The clusters' execution namespaces, looked up once for every binding's Works.
    let namespaces = (sweep == Sweep::Resync).then(|| dispatch::execution_namespaces(ctx));
    for binding in watches::cached_bindings(ctx) {
        if let Some(namespaces) = &namespaces {
            let name = work_name(&binding.key.namespace, &binding.key.name);
            if binding.settled(&dispatch::cached_works_named_in(ctx, namespaces, &name)) {
                pass.bindings.settled += 1;
                continue;
            }
        }
        ctx.binding_queue.add(binding.key.clone());
        pass.bindings.queued += 1;
    }
    for work in ctx.stores.works.state() {
        if sweep == Sweep::Resync
            && work.settled(
                work.binding
                    .as_deref()
                    .and_then(|key| watches::cached_binding(ctx, key))
                    .as_deref(),
            )
        {
            pass.works.settled += 1;
            continue;
        }
        if let Some(cluster) = cluster_of_execution_namespace(work.namespace()) {
            Members::ensure(ctx, cluster).queue.add(work.queue_name());
            pass.works.queued += 1;
        }
    }
    for namespace in ctx.stores.namespaces.state() {
        ctx.namespace_queue.add(namespace.name_any());
    }
    for policy in ctx.stores.taint_policies.state() {
        ctx.taint_policy_queue.add(policy.name_any());
    }
    pass
}

/// Every few seconds: readiness of the control-plane API, queue depths and suspended Works.
async fn run_housekeeping(ctx: Arc<Context>, readiness: Readiness) {
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let started = Instant::now();
        flotilla_runtime::api_probe::check(&ctx.client, &readiness).await;
        tracing::trace!(elapsed = ?started.elapsed(), "control plane checked");
        let metrics = metrics();
        metrics.set_queue_depth("bindings", ctx.binding_queue.len());
        metrics.set_queue_depth("binding-reports", ctx.binding_queue.deferred_len());
        metrics.set_queue_depth("namespaces", ctx.namespace_queue.len());
        let report = |queue: &str, depth: usize, oldest: Duration| {
            flotilla_telemetry::metrics::report_queue("flotilla-execution", queue, depth, oldest);
        };
        report(
            "bindings",
            ctx.binding_queue.len(),
            ctx.binding_queue.oldest_wait(),
        );
        report(
            "namespaces",
            ctx.namespace_queue.len(),
            ctx.namespace_queue.oldest_wait(),
        );
        let mut suspended: BTreeMap<String, usize> = BTreeMap::new();
        let mut owned = 0;
        for member in ctx.members.all() {
            metrics.set_queue_depth(&format!("cluster/{}", member.name), member.queue.len());
            report(
                &format!("cluster/{}", member.name),
                member.queue.len(),
                member.queue.oldest_wait(),
            );
            suspended.insert(member.name.clone(), 0);
            if ctx.owns(&crate::context::cluster_shard(&member.name)) {
                owned += 1;
            }
        }
        metrics.set_owned_clusters(owned);
        // Each replica counts the clusters it owns, so a sum over replicas counts each once.
        for work in ctx.stores.works.state() {
            if work.suspend_dispatching == Some(true)
                && let Some(cluster) = cluster_of_execution_namespace(work.namespace())
                && ctx.owns(&crate::context::cluster_shard(cluster))
            {
                *suspended.entry(cluster.to_owned()).or_default() += 1;
            }
        }
        for (cluster, count) in suspended {
            metrics.set_suspended_works(&cluster, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("5 weeks").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn flags_follow_the_service_contract() {
        let args = Args::try_parse_from(["flotilla-execution"]).unwrap();
        assert_eq!(args.grpc_addr.to_string(), "127.0.0.1:7104");
        assert_eq!(args.metrics_addr.to_string(), "127.0.0.1:9104");
        assert_eq!(args.apply_once_only, Mode::Off);
        let args = Args::try_parse_from([
            "flotilla-execution",
            "--kubeconfig",
            "/tmp/kc",
            "--context",
            "control-plane",
            "--grpc-addr",
            "127.0.0.1:1",
            "--metrics-addr",
            "127.0.0.1:2",
            "--log-format",
            "json",
            "--log-level",
            "debug",
            "--apply-once-only",
            "force",
            "--resync-period",
            "30s",
        ])
        .unwrap();
        assert_eq!(args.apply_once_only, Mode::Force);
        assert_eq!(args.resync_period, Duration::from_secs(30));
        assert_eq!(args.kube.context.as_deref(), Some("control-plane"));
        assert!(Args::try_parse_from(["flotilla-execution", "--apply-once-only", "sometimes"]).is_err());
        // A zero resync period is refused at the flag, naming it, not a panic of the timer.
        let error = Args::try_parse_from(["flotilla-execution", "--resync-period", "0s"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--resync-period") && error.contains("must be more than 0"),
            "{error}"
        );
    }

    #[test]
    fn failover_flags() {
        let args = Args::try_parse_from(["flotilla-execution"]).unwrap();
        assert!(args.feature_gates.failover, "on by default");
        assert_eq!(
            args.failover_eviction_timeout,
            Duration::from_secs(300),
            "Karmada's 5 minutes"
        );
        let args = Args::try_parse_from([
            "flotilla-execution",
            "--feature-gates",
            "Failover=false",
            "--failover-eviction-timeout",
            "30s",
        ])
        .unwrap();
        assert!(!args.feature_gates.failover);
        assert_eq!(args.failover_eviction_timeout, Duration::from_secs(30));
        let error = Args::try_parse_from(["flotilla-execution", "--feature-gates", "PropagateDeps=true"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("unknown feature gate \"PropagateDeps\"; known gates: Failover"),
            "{error}"
        );
    }

    #[test]
    fn worker_and_status_deferral_flags() {
        let args = Args::try_parse_from(["flotilla-execution"]).unwrap();
        assert_eq!((args.binding_workers, args.work_workers), (4, 8));
        assert_eq!((args.burst_binding_workers, args.burst_work_backlog), (4, 128));
        let args = Args::try_parse_from([
            "flotilla-execution",
            "--burst-binding-workers",
            "0",
            "--burst-work-backlog",
            "500",
        ])
        .unwrap();
        assert_eq!((args.burst_binding_workers, args.burst_work_backlog), (0, 500));
        assert_eq!(args.status_deferral, crate::dispatch::STATUS_DEFERRAL);
        assert_eq!(args.status_deferral, Duration::from_secs(30));
        let args = Args::try_parse_from(["flotilla-execution", "--status-deferral", "0s"]).unwrap();
        assert_eq!(args.status_deferral, Duration::ZERO, "0s: one order for both");
        let error = Args::try_parse_from(["flotilla-execution", "--status-deferral", "soon"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("--status-deferral"), "{error}");
    }
}
