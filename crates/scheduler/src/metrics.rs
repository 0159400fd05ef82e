//! The service's Prometheus metrics, registered once in the process-wide registry
//! (`flotilla_scheduler_*` on `/metrics`).

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// Labels of one scheduling attempt.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScheduleLabels {
    /// `ResourceBinding` or `ClusterResourceBinding`.
    kind: String,
    /// `grpc` or `watch`.
    trigger: String,
    /// See [`crate::reconcile::Outcome::as_str`].
    outcome: String,
}

/// Labels of a binding's watch event.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    /// `true` when the event queued the binding, `false` when nothing scheduling reads changed.
    queued: String,
}

/// Labels of a failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    /// What failed: `api`, `conflicts`, `dispatch`, `sync-dependencies`.
    during: String,
}

/// Labels of the cluster-inventory gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    /// `true` for Clusters the scheduler places on, `false` for the rest.
    ready: String,
}

/// Labels of the per-binding attempt state gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeldLabels {
    /// `turn` (an attempt runs or waits) or `version` (a version the watch cache does not hold yet).
    held: String,
}

/// Labels of an eviction.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvictionLabels {
    /// `TaintUntolerated` or `ApplicationFailure`.
    reason: String,
    /// The task's purge mode.
    purge_mode: String,
}

/// Labels of a finished eviction task.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskEndLabels {
    /// `healthy`, `timeout` or `confirmed`.
    end: String,
}

type DurationFamily = Family<ScheduleLabels, Histogram, fn() -> Histogram>;

/// The scheduler's metrics.
pub struct Metrics {
    schedules: Family<ScheduleLabels, Counter>,
    /// The two series of `scheduler_binding_events`: queued, left alone.
    binding_events: [Counter; 2],
    durations: DurationFamily,
    errors: Family<ErrorLabels, Counter>,
    conflicts: Counter,
    unschedulable: Gauge,
    clusters: Family<ClusterLabels, Gauge>,
    evictions: Family<EvictionLabels, Counter>,
    eviction_tasks_finished: Family<TaskEndLabels, Counter>,
    eviction_tasks: Gauge,
    attempt_state: Family<HeldLabels, Gauge>,
}

fn duration_histogram() -> Histogram {
    // 0.1 ms .. ~3 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// The process's metrics, registered on first use.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let binding_events = Family::<EventLabels, Counter>::default();
        // The series are created once and kept (a counter is a shared atomic): counting an
        // event looks nothing up.
        let [queued, alone] = ["true", "false"].map(|queued| {
            binding_events.get_or_create_owned(&EventLabels {
                queued: queued.to_owned(),
            })
        });
        let metrics = Metrics {
            schedules: Family::default(),
            binding_events: [queued, alone],
            durations: DurationFamily::new_with_constructor(duration_histogram),
            errors: Family::default(),
            conflicts: Counter::default(),
            unschedulable: Gauge::default(),
            clusters: Family::default(),
            evictions: Family::default(),
            eviction_tasks_finished: Family::default(),
            eviction_tasks: Gauge::default(),
            attempt_state: Family::default(),
        };
        use flotilla_telemetry::metrics::register;
        register(
            "scheduler_schedules",
            "Bindings scheduled, by kind, trigger (grpc, watch) and outcome",
            metrics.schedules.clone(),
        );
        register(
            "scheduler_binding_events",
            "Binding changes the watch delivered, by whether they queued the binding (queued=\"false\": nothing scheduling reads changed)",
            binding_events,
        );
        register(
            "scheduler_schedule_duration_seconds",
            "Time to schedule one binding (reads, decision and writes), by kind, trigger and outcome",
            metrics.durations.clone(),
        );
        register(
            "scheduler_errors",
            "Failures while scheduling or notifying peers, by what failed",
            metrics.errors.clone(),
        );
        register(
            "scheduler_write_conflicts",
            "Writes refused with 409 Conflict (another writer changed the binding first) and retried",
            metrics.conflicts.clone(),
        );
        register(
            "scheduler_unschedulable_bindings",
            "Bindings whose Scheduled condition is False",
            metrics.unschedulable.clone(),
        );
        register(
            "scheduler_clusters",
            "Clusters in the scheduler's inventory, by readiness (ready=\"false\" ones get no new placements)",
            metrics.clusters.clone(),
        );
        register(
            "scheduler_evictions",
            "Clusters bindings were evicted from (failover), by reason (TaintUntolerated, ApplicationFailure) and purge mode",
            metrics.evictions.clone(),
        );
        register(
            "scheduler_eviction_tasks_finished",
            "Graceful eviction tasks ended, by why (healthy: the new placement is healthy; timeout; confirmed: suppressDeletion set to false)",
            metrics.eviction_tasks_finished.clone(),
        );
        register(
            "scheduler_graceful_eviction_tasks",
            "Graceful eviction tasks in the bindings' specs (clusters whose old copies are still kept)",
            metrics.eviction_tasks.clone(),
        );
        register(
            "scheduler_attempt_state_bindings",
            "Bindings the scheduler holds attempt state for: held=\"turn\" (an attempt runs or waits on it), held=\"version\" (a version it read or wrote that its watch cache does not hold yet); both return to 0 when it is idle",
            metrics.attempt_state.clone(),
        );
        metrics
    })
}

impl Metrics {
    /// Records one scheduling attempt.
    pub fn observe_schedule(&self, kind: &str, trigger: &str, outcome: &str, elapsed: Duration) {
        let labels = ScheduleLabels {
            kind: kind.to_owned(),
            trigger: trigger.to_owned(),
            outcome: outcome.to_owned(),
        };
        self.schedules.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a binding's watch event that queued it (`queued`) or left it alone.
    pub fn binding_event(&self, queued: bool) {
        self.binding_events[usize::from(!queued)].inc();
    }

    /// Counts a failure during `during`.
    pub fn error(&self, during: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                during: during.to_owned(),
            })
            .inc();
    }

    /// Counts a write refused with 409.
    pub fn conflict(&self) {
        self.conflicts.inc();
    }

    /// Sets the number of unschedulable bindings.
    pub fn set_unschedulable(&self, count: usize) {
        self.unschedulable.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the number of ready and not-ready Clusters in the inventory.
    pub fn set_clusters(&self, ready: usize, not_ready: usize) {
        for (label, count) in [("true", ready), ("false", not_ready)] {
            self.clusters
                .get_or_create(&ClusterLabels {
                    ready: label.to_owned(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Sets how many bindings the scheduler holds `held` state for (`turn` or `version`).
    pub fn set_attempt_state(&self, held: &str, bindings: usize) {
        self.attempt_state
            .get_or_create(&HeldLabels {
                held: held.to_owned(),
            })
            .set(i64::try_from(bindings).unwrap_or(i64::MAX));
    }

    /// Counts one eviction.
    pub fn evicted(&self, reason: &str, purge_mode: &str) {
        self.evictions
            .get_or_create(&EvictionLabels {
                reason: reason.to_owned(),
                purge_mode: purge_mode.to_owned(),
            })
            .inc();
    }

    /// Counts one finished eviction task.
    pub fn eviction_task_finished(&self, end: &str) {
        self.eviction_tasks_finished
            .get_or_create(&TaskEndLabels { end: end.to_owned() })
            .inc();
    }

    /// Sets the number of eviction tasks in the bindings' specs.
    pub fn set_eviction_tasks(&self, count: usize) {
        self.eviction_tasks.set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}
