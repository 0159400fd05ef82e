//! The distributor's Prometheus metrics (registered once in the process-wide registry that
//! `/metrics` serves):
//!
//! - `flotilla_dependency_attached_bindings`: attached bindings (bindings with a non-empty
//!   `requiredBy`) in the control plane;
//! - `flotilla_dependency_reconciles_total{kind,result}`: reconciles of independent bindings
//!   (`kind="binding"`) and of attached bindings (`kind="dependency"`), `result` = `ok`,
//!   `error`, or `settled` for a queued key left alone with no API call (a binding whose
//!   dependencies were already read at its template inputs and rules; a dependency whose cached
//!   attached binding is as the cached bindings ask);
//! - `flotilla_dependency_template_reads_total{read}`: a binding reconcile that needed its
//!   template's dependencies read the template (`read="true"`) or found them already read at
//!   the binding's template inputs and rules (`read="false"`);
//! - `flotilla_dependency_resync_bindings_queued_total` and
//!   `flotilla_dependency_resync_bindings_settled_total`: per resync pass, the distributing
//!   bindings queued and those left alone;
//! - `flotilla_dependency_reconcile_errors_total{kind}`: failed reconciles;
//! - `flotilla_dependency_reconcile_duration_seconds{kind}`;
//! - `flotilla_dependency_writes_total{action}`: attached bindings created, patched, deleted;
//! - `flotilla_dependency_rules_valid{source}`: 1 when the source's latest rules are valid;
//! - `flotilla_dependency_conflicts`: attached bindings whose referencing bindings disagree.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadLabels {
    read: &'static str,
}

type DurationFamily = Family<KindLabels, Histogram, fn() -> Histogram>;

/// Handles to every metric family.
pub struct Metrics {
    attached_bindings: Gauge,
    conflicts: Gauge,
    reconciles: Family<ReconcileLabels, Counter>,
    errors: Family<KindLabels, Counter>,
    durations: DurationFamily,
    writes: Family<ActionLabels, Counter>,
    rules_valid: Family<SourceLabels, Gauge>,
    template_reads: Family<ReadLabels, Counter>,
    resync_queued: Counter,
    resync_settled: Counter,
}

fn new_histogram() -> Histogram {
    // 0.5 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The process's metrics, registered on first use.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let metrics = Metrics {
            attached_bindings: Gauge::default(),
            conflicts: Gauge::default(),
            reconciles: Family::default(),
            errors: Family::default(),
            durations: DurationFamily::new_with_constructor(new_histogram),
            writes: Family::default(),
            rules_valid: Family::default(),
            template_reads: Family::default(),
            resync_queued: Counter::default(),
            resync_settled: Counter::default(),
        };
        use flotilla_telemetry::metrics::register;
        register(
            "dependency_attached_bindings",
            "Attached bindings (bindings with a non-empty requiredBy)",
            metrics.attached_bindings.clone(),
        );
        register(
            "dependency_conflicts",
            "Attached bindings whose referencing bindings disagree on a field",
            metrics.conflicts.clone(),
        );
        register(
            "dependency_reconciles",
            "Reconciles by kind (binding, dependency) and result (ok, error, settled: left alone)",
            metrics.reconciles.clone(),
        );
        register(
            "dependency_reconcile_errors",
            "Failed reconciles by kind",
            metrics.errors.clone(),
        );
        register(
            "dependency_reconcile_duration_seconds",
            "Reconcile latency by kind",
            metrics.durations.clone(),
        );
        register(
            "dependency_writes",
            "Attached binding writes by action (create, patch, delete, status)",
            metrics.writes.clone(),
        );
        register(
            "dependency_rules_valid",
            "1 when the source's latest dependency rules are valid, 0 when they are rejected",
            metrics.rules_valid.clone(),
        );
        register(
            "dependency_template_reads",
            "Binding reconciles that read the template (read=true) or found its dependencies already read at the binding's template inputs and rules (read=false)",
            metrics.template_reads.clone(),
        );
        register(
            "dependency_resync_bindings_queued",
            "Distributing bindings a resync queued (not settled)",
            metrics.resync_queued.clone(),
        );
        register(
            "dependency_resync_bindings_settled",
            "Distributing bindings a resync left alone (settled)",
            metrics.resync_settled.clone(),
        );
        metrics
    })
}

impl Metrics {
    /// Records one reconcile.
    pub fn reconciled(&self, kind: &'static str, ok: bool, elapsed: Duration) {
        let result = if ok { "ok" } else { "error" };
        self.reconciles
            .get_or_create(&ReconcileLabels { kind, result })
            .inc();
        if !ok {
            self.errors.get_or_create(&KindLabels { kind }).inc();
        }
        self.durations
            .get_or_create(&KindLabels { kind })
            .observe(elapsed.as_secs_f64());
    }

    /// Records a queued key left alone because it is settled.
    pub fn left_settled(&self, kind: &'static str) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                kind,
                result: "settled",
            })
            .inc();
    }

    /// Records whether a binding reconcile read its template.
    pub fn template_read(&self, read: bool) {
        let read = if read { "true" } else { "false" };
        self.template_reads.get_or_create(&ReadLabels { read }).inc();
    }

    /// Records one resync pass: distributing bindings queued and left alone.
    pub fn resynced(&self, queued: usize, settled: usize) {
        self.resync_queued
            .inc_by(u64::try_from(queued).unwrap_or(u64::MAX));
        self.resync_settled
            .inc_by(u64::try_from(settled).unwrap_or(u64::MAX));
    }

    /// Records one write of an attached binding.
    pub fn wrote(&self, action: &'static str) {
        self.writes.get_or_create(&ActionLabels { action }).inc();
    }

    /// Sets the number of attached bindings.
    pub fn set_attached_bindings(&self, count: usize) {
        self.attached_bindings
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the number of attached bindings with disagreeing referencing bindings.
    pub fn set_conflicts(&self, count: usize) {
        self.conflicts.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Records whether a rules source is valid.
    pub fn set_rules_valid(&self, source: &'static str, valid: bool) {
        self.rules_valid
            .get_or_create(&SourceLabels { source })
            .set(i64::from(valid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_exported() {
        let m = metrics();
        m.reconciled("binding", true, Duration::from_millis(3));
        m.reconciled("dependency", false, Duration::from_millis(3));
        m.wrote("create");
        m.set_attached_bindings(4);
        m.set_rules_valid("configmap", false);
        m.left_settled("binding");
        m.template_read(false);
        m.resynced(2, 3);
        let text = flotilla_telemetry::metrics::encode_text();
        for needle in [
            "flotilla_dependency_reconciles_total{kind=\"binding\",result=\"ok\"}",
            "flotilla_dependency_reconcile_errors_total{kind=\"dependency\"} ",
            "flotilla_dependency_attached_bindings 4",
            "flotilla_dependency_writes_total{action=\"create\"}",
            "flotilla_dependency_rules_valid{source=\"configmap\"} 0",
            "flotilla_dependency_reconcile_duration_seconds_bucket",
            "flotilla_dependency_reconciles_total{kind=\"binding\",result=\"settled\"}",
            "flotilla_dependency_template_reads_total{read=\"false\"}",
            "flotilla_dependency_resync_bindings_queued_total 2",
            "flotilla_dependency_resync_bindings_settled_total 3",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
    }
}
