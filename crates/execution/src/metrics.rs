//! Execution's Prometheus metrics (registered once into the process registry that `/metrics`
//! serves):
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `flotilla_execution_member_apply_duration_seconds` | `cluster`, `outcome` | one manifest's apply round trip to a member |
//! | `flotilla_execution_member_apply_errors_total` | `cluster`, `reason` | failed member applies (`unreachable`, `conflict`, `error`) |
//! | `flotilla_execution_suspended_works` | `cluster` | Works whose dispatching is suspended |
//! | `flotilla_execution_queue_depth` | `queue` | keys waiting (`bindings`, of them `binding-reports` the report passes deferred behind dispatches, `namespaces`, `cluster/<name>`) |
//! | `flotilla_execution_reconcile_total` | `controller`, `result` | reconciles by controller (`binding`, `work`, `namespace`) and result |
//! | `flotilla_execution_reconcile_duration_seconds` | `controller` | reconcile latency |
//! | `flotilla_execution_owned_clusters` | | member clusters this replica owns (sharding) |
//! | `flotilla_execution_evicted_works_purged_total` | `cluster` | Works of clusters a binding was evicted from, deleted by failover |
//! | `flotilla_execution_cluster_failover_taint` | `cluster`, `effect` | 1 while the cluster carries a failover taint (`not-ready`/`unreachable`) of that effect |
//! | `flotilla_execution_cluster_taint_policies` | `valid` | ClusterTaintPolicies in execution's cache, valid (applied) or not (ignored) |
//! | `flotilla_execution_dispatch_queued_total` | | `Dispatch` calls answered `OUTCOME_QUEUED` (beyond `--dispatch-concurrency`) |
//! | `flotilla_execution_resync_works_queued_total` | | Works the periodic resync queued to their cluster's workers (not settled) |
//! | `flotilla_execution_resync_works_settled_total` | | Works the periodic resync left alone (settled: applied, finalized, of a cached binding) |
//! | `flotilla_execution_resync_bindings_queued_total` | | Bindings the periodic resync queued to the binding workers (not settled) |
//! | `flotilla_execution_resync_bindings_settled_total` | | Bindings the periodic resync left alone (settled: dispatched, one settled Work per target cluster) |
//! | `flotilla_execution_work_reads_total` | `source` | Works a reconcile started from, by where it got them: `watch` (held from the watch event that queued it), `wait` (read by the reconcile whose report waited), `api` (a GET) |
//! | `flotilla_execution_report_waits_total` | `cluster`, `ended` | Work reports that waited for the member's controllers (ADR 0027), by how the wait ended: `reconciled` (the Work was reconciled again, usually because a controller reported) or `timed-out` (`--report-wait` passed) |

use std::sync::OnceLock;
use std::time::Duration;

use flotilla_telemetry::metrics::register;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApplyLabels {
    cluster: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    cluster: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaintLabels {
    cluster: String,
    effect: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ValidLabels {
    valid: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WaitLabels {
    cluster: String,
    ended: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms .. ~32 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The metric families.
pub struct Metrics {
    apply_duration: HistogramFamily<ApplyLabels>,
    apply_errors: Family<ErrorLabels, Counter>,
    suspended_works: Family<ClusterLabels, Gauge>,
    queue_depth: Family<QueueLabels, Gauge>,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_duration: HistogramFamily<ControllerLabels>,
    owned_clusters: Gauge,
    purged: Family<ClusterLabels, Counter>,
    failover_taints: Family<TaintLabels, Gauge>,
    taint_policies: Family<ValidLabels, Gauge>,
    dispatch_queued: Counter,
    resync_queued: Counter,
    resync_settled: Counter,
    resync_bindings_queued: Counter,
    resync_bindings_settled: Counter,
    report_waits: Family<WaitLabels, Counter>,
    work_reads: Family<SourceLabels, Counter>,
}

/// What one pass over the caches queued and left alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resynced {
    /// Works queued to their cluster's workers, and left alone.
    pub works: Swept,
    /// Bindings queued to the binding workers, and left alone.
    pub bindings: Swept,
}

/// How many objects of one kind a pass queued, and how many it left alone as settled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Queued.
    pub queued: usize,
    /// Left alone (settled).
    pub settled: usize,
}

/// The process-wide metrics, registered on first use.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let metrics = Metrics {
            apply_duration: HistogramFamily::new_with_constructor(latency_histogram),
            apply_errors: Family::default(),
            suspended_works: Family::default(),
            queue_depth: Family::default(),
            reconciles: Family::default(),
            reconcile_duration: HistogramFamily::new_with_constructor(latency_histogram),
            owned_clusters: Gauge::default(),
            purged: Family::default(),
            failover_taints: Family::default(),
            taint_policies: Family::default(),
            dispatch_queued: Counter::default(),
            resync_queued: Counter::default(),
            resync_settled: Counter::default(),
            resync_bindings_queued: Counter::default(),
            resync_bindings_settled: Counter::default(),
            report_waits: Family::default(),
            work_reads: Family::default(),
        };
        register(
            "execution_owned_clusters",
            "Member clusters this replica owns (applies to) under sharding",
            metrics.owned_clusters.clone(),
        );
        register(
            "execution_member_apply_duration_seconds",
            "Latency of applying one manifest to a member cluster, by cluster and outcome",
            metrics.apply_duration.clone(),
        );
        register(
            "execution_member_apply_errors",
            "Failed member applies by cluster and reason",
            metrics.apply_errors.clone(),
        );
        register(
            "execution_suspended_works",
            "Works whose dispatching is suspended, by cluster",
            metrics.suspended_works.clone(),
        );
        register(
            "execution_queue_depth",
            "Keys waiting in execution's work queues",
            metrics.queue_depth.clone(),
        );
        register(
            "execution_reconcile",
            "Reconciles by controller and result",
            metrics.reconciles.clone(),
        );
        register(
            "execution_reconcile_duration_seconds",
            "Reconcile latency by controller",
            metrics.reconcile_duration.clone(),
        );
        register(
            "execution_evicted_works_purged",
            "Works of clusters a binding was evicted from, deleted by failover (purge), by cluster",
            metrics.purged.clone(),
        );
        register(
            "execution_cluster_failover_taint",
            "1 while the cluster carries a failover taint (cluster.karmada.io/not-ready or unreachable) of the effect, by cluster and effect",
            metrics.failover_taints.clone(),
        );
        register(
            "execution_cluster_taint_policies",
            "ClusterTaintPolicies in execution's cache, by validity (invalid ones are ignored)",
            metrics.taint_policies.clone(),
        );
        register(
            "execution_dispatch_queued",
            "Dispatch calls answered OUTCOME_QUEUED because --dispatch-concurrency calls were in progress",
            metrics.dispatch_queued.clone(),
        );
        register(
            "execution_resync_works_queued",
            "Works the periodic resync queued to their cluster's workers (not settled)",
            metrics.resync_queued.clone(),
        );
        register(
            "execution_resync_works_settled",
            "Works the periodic resync left alone (applied, finalized, of a cached binding)",
            metrics.resync_settled.clone(),
        );
        register(
            "execution_resync_bindings_queued",
            "Bindings the periodic resync queued to the binding workers (not settled)",
            metrics.resync_bindings_queued.clone(),
        );
        register(
            "execution_resync_bindings_settled",
            "Bindings the periodic resync left alone (dispatched, one settled Work per target cluster)",
            metrics.resync_bindings_settled.clone(),
        );
        register(
            "execution_report_waits",
            "Work reports that waited for the member's controllers, by cluster and how the wait ended (reconciled, timed-out)",
            metrics.report_waits.clone(),
        );
        register(
            "execution_work_reads",
            "Works a reconcile started from, by source (watch: held from the event that queued it; wait: read by the reconcile whose report waited; api: a GET)",
            metrics.work_reads.clone(),
        );
        metrics
    })
}

impl Metrics {
    /// Counts a `Dispatch` call answered `OUTCOME_QUEUED`.
    pub fn dispatch_queued(&self) {
        self.dispatch_queued.inc();
    }

    /// Counts one resync pass: Works and bindings queued and left alone as settled.
    pub fn resynced(&self, pass: &Resynced) {
        self.resync_queued.inc_by(pass.works.queued as u64);
        self.resync_settled.inc_by(pass.works.settled as u64);
        self.resync_bindings_queued.inc_by(pass.bindings.queued as u64);
        self.resync_bindings_settled.inc_by(pass.bindings.settled as u64);
    }

    /// Records one member apply.
    pub fn observe_apply(&self, cluster: &str, outcome: &str, elapsed: Duration) {
        self.apply_duration
            .get_or_create(&ApplyLabels {
                cluster: cluster.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one failed member apply.
    pub fn apply_error(&self, cluster: &str, reason: &str) {
        self.apply_errors
            .get_or_create(&ErrorLabels {
                cluster: cluster.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Sets the number of suspended Works of `cluster`.
    pub fn set_suspended_works(&self, cluster: &str, count: usize) {
        self.suspended_works
            .get_or_create(&ClusterLabels {
                cluster: cluster.to_owned(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the number of member clusters this replica owns.
    pub fn set_owned_clusters(&self, count: usize) {
        self.owned_clusters.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the depth of `queue`.
    pub fn set_queue_depth(&self, queue: &str, depth: usize) {
        self.queue_depth
            .get_or_create(&QueueLabels {
                queue: queue.to_owned(),
            })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Records one reconcile.
    pub fn reconciled(&self, controller: &str, ok: bool, elapsed: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: controller.to_owned(),
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
        self.reconcile_duration
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a Work report's wait for the member's controllers that ended: `timed_out` when
    /// `--report-wait` passed, otherwise a reconcile of the Work took it.
    pub fn report_wait_ended(&self, cluster: &str, timed_out: bool) {
        self.report_waits
            .get_or_create(&WaitLabels {
                cluster: cluster.to_owned(),
                ended: if timed_out { "timed-out" } else { "reconciled" }.to_owned(),
            })
            .inc();
    }

    /// Counts the Work a reconcile started from, by where it came from.
    pub fn work_read(&self, source: crate::arrivals::Source) {
        self.work_reads
            .get_or_create(&SourceLabels {
                source: source.label(),
            })
            .inc();
    }

    /// Counts the Work of an evicted cluster deleted by failover.
    pub fn purged(&self, cluster: &str) {
        self.purged
            .get_or_create(&ClusterLabels {
                cluster: cluster.to_owned(),
            })
            .inc();
    }

    /// Sets whether `cluster` carries a failover taint with `effect`.
    pub fn set_failover_taint(&self, cluster: &str, effect: &str, tainted: bool) {
        self.failover_taints
            .get_or_create(&TaintLabels {
                cluster: cluster.to_owned(),
                effect: effect.to_owned(),
            })
            .set(i64::from(tainted));
    }

    /// Sets how many ClusterTaintPolicies are cached, valid and not.
    pub fn set_taint_policies(&self, valid: usize, invalid: usize) {
        for (label, count) in [("true", valid), ("false", invalid)] {
            self.taint_policies
                .get_or_create(&ValidLabels {
                    valid: label.to_owned(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }
}
