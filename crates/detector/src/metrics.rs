//! The detector's Prometheus metrics, registered once in the process-wide registry
//! (`flotilla_telemetry::metrics`) and served on `/metrics`:
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `flotilla_detector_reconciles_total` | `controller` (`policy`, `template`), `outcome` | reconciles by outcome |
//! | `flotilla_detector_reconcile_errors_total` | `controller` | reconciles that failed (retried) |
//! | `flotilla_detector_reconcile_duration_seconds` | `controller` | reconcile latency |
//! | `flotilla_detector_queue_depth` | `controller` | keys waiting |
//! | `flotilla_detector_binding_writes_total` | `write` (`create`, `spec`, `metadata`, `status`) | writes to bindings |
//! | `flotilla_detector_pending_lazy_bindings` | | bindings whose Lazy policy change is pending |
//! | `flotilla_detector_watched_kinds` | | resource kinds watched as templates |

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    controller: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    write: &'static str,
}

type Histograms = Family<ControllerLabels, Histogram, fn() -> Histogram>;

/// The detector's metric families.
pub struct Metrics {
    reconciles: Family<OutcomeLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    duration: Histograms,
    queue_depth: Family<ControllerLabels, Gauge>,
    binding_writes: Family<WriteLabels, Counter>,
    pending_lazy: Gauge,
    watched_kinds: Gauge,
}

fn new_histogram() -> Histogram {
    // 100 µs .. ~6.5 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// The metrics, registered on first use.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let metrics = Metrics {
            reconciles: Family::default(),
            errors: Family::default(),
            duration: Histograms::new_with_constructor(new_histogram),
            queue_depth: Family::default(),
            binding_writes: Family::default(),
            pending_lazy: Gauge::default(),
            watched_kinds: Gauge::default(),
        };
        use flotilla_telemetry::metrics::register;
        register(
            "detector_reconciles",
            "Detector reconciles by controller and outcome",
            metrics.reconciles.clone(),
        );
        register(
            "detector_reconcile_errors",
            "Detector reconciles that failed and were retried",
            metrics.errors.clone(),
        );
        register(
            "detector_reconcile_duration_seconds",
            "Detector reconcile latency",
            metrics.duration.clone(),
        );
        register(
            "detector_queue_depth",
            "Keys waiting in the detector's work queues",
            metrics.queue_depth.clone(),
        );
        register(
            "detector_binding_writes",
            "Writes of the detector to bindings, by kind of write",
            metrics.binding_writes.clone(),
        );
        register(
            "detector_pending_lazy_bindings",
            "Bindings whose Lazy policy change is pending (PolicyActivated=False)",
            metrics.pending_lazy.clone(),
        );
        register(
            "detector_watched_kinds",
            "Resource kinds the detector watches as templates",
            metrics.watched_kinds.clone(),
        );
        metrics
    })
}

impl Metrics {
    /// Records one reconcile.
    pub fn reconciled(&self, controller: &'static str, outcome: &'static str, elapsed: Duration) {
        self.reconciles
            .get_or_create(&OutcomeLabels { controller, outcome })
            .inc();
        self.duration
            .get_or_create(&ControllerLabels { controller })
            .observe(elapsed.as_secs_f64());
    }

    /// Records one failed reconcile.
    pub fn failed(&self, controller: &'static str, elapsed: Duration) {
        self.errors.get_or_create(&ControllerLabels { controller }).inc();
        self.duration
            .get_or_create(&ControllerLabels { controller })
            .observe(elapsed.as_secs_f64());
    }

    /// Sets a queue's depth.
    pub fn queue_depth(&self, controller: &'static str, depth: usize) {
        self.queue_depth
            .get_or_create(&ControllerLabels { controller })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Records one binding write (`create`, `spec`, `metadata`, `status`).
    pub fn binding_write(&self, write: &'static str) {
        self.binding_writes.get_or_create(&WriteLabels { write }).inc();
    }

    /// Sets the number of bindings with a pending Lazy change.
    pub fn pending_lazy(&self, count: usize) {
        self.pending_lazy.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the number of watched kinds.
    pub fn watched_kinds(&self, count: usize) {
        self.watched_kinds.set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_exported() {
        let m = metrics();
        m.reconciled("template", "lazy-skipped", Duration::from_millis(2));
        m.failed("policy", Duration::from_millis(1));
        m.queue_depth("template", 3);
        m.binding_write("status");
        m.pending_lazy(5);
        m.watched_kinds(2);
        let text = flotilla_telemetry::metrics::encode_text();
        for wanted in [
            "flotilla_detector_reconciles_total{controller=\"template\",outcome=\"lazy-skipped\"} 1",
            "flotilla_detector_reconcile_errors_total{controller=\"policy\"} 1",
            "flotilla_detector_queue_depth{controller=\"template\"} 3",
            "flotilla_detector_binding_writes_total{write=\"status\"} 1",
            "flotilla_detector_pending_lazy_bindings 5",
            "flotilla_detector_watched_kinds 2",
            "flotilla_detector_reconcile_duration_seconds_count{controller=\"template\"} 1",
        ] {
            assert!(text.contains(wanted), "{wanted} missing from\n{text}");
        }
    }
}
