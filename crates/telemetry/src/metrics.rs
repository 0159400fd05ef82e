//! The process-wide Prometheus registry.
//!
//! Metric families are registered once (from `OnceLock`s in the crates that own them) into one
//! global registry, which the `/metrics` endpoint encodes in the Prometheus text format.

use std::sync::{Mutex, OnceLock};

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::{Metric, Registry};

pub use prometheus_client;

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Registry::with_prefix("flotilla")))
}

/// Registers a metric family under `flotilla_<name>`.
pub fn register(name: &str, help: &str, metric: impl Metric) {
    descriptors()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(Descriptor {
            name: format!("flotilla_{name}"),
            help: help.to_owned(),
            kind: metric.metric_type().as_str().to_owned(),
        });
    registry()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .register(name, help, metric);
}

/// What a registered family is, so it can be listed before it has a sample.
struct Descriptor {
    name: String,
    help: String,
    kind: String,
}

fn descriptors() -> &'static Mutex<Vec<Descriptor>> {
    static DESCRIPTORS: OnceLock<Mutex<Vec<Descriptor>>> = OnceLock::new();
    DESCRIPTORS.get_or_init(|| Mutex::new(Vec::new()))
}

/// The registry in Prometheus text format.
pub fn encode_text() -> String {
    let mut out = String::new();
    let registry = registry().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Encoding into a String cannot fail.
    let _ = encode(&mut out, &registry);
    // prometheus-client leaves out families without samples (an error counter before the first
    // error). List them anyway, as Go's client does, so dashboards and alerts can rely on every
    // documented family being present.
    let descriptors = descriptors()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut missing = String::new();
    for d in descriptors.iter() {
        if !out.contains(&format!("# TYPE {} ", d.name)) {
            let help = if d.help.ends_with('.') {
                d.help.clone()
            } else {
                format!("{}.", d.help)
            };
            missing.push_str(&format!(
                "# HELP {} {help}\n# TYPE {} {}\n",
                d.name, d.name, d.kind
            ));
        }
    }
    if !missing.is_empty() {
        // Before the terminating `# EOF` of the OpenMetrics text.
        match out.rfind("# EOF") {
            Some(at) => out.insert_str(at, &missing),
            None => out.push_str(&missing),
        }
    }
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct QueueLabels {
    service: String,
    queue: String,
}

struct QueueFamilies {
    depth: prometheus_client::metrics::family::Family<QueueLabels, prometheus_client::metrics::gauge::Gauge>,
    oldest: prometheus_client::metrics::family::Family<
        QueueLabels,
        prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    >,
}

fn queue_families() -> &'static QueueFamilies {
    static FAMILIES: OnceLock<QueueFamilies> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let families = QueueFamilies {
            depth: Default::default(),
            oldest: Default::default(),
        };
        register(
            "workqueue_depth",
            "Keys waiting in a service's work queue",
            families.depth.clone(),
        );
        register(
            "workqueue_oldest_wait_seconds",
            "How long the oldest key waiting in a work queue has waited",
            families.oldest.clone(),
        );
        families
    })
}

/// Registers the work-queue families, so `/metrics` lists them before the first report.
pub fn register_queue_metrics() {
    queue_families();
}

/// Reports work queue `queue` of `service`: keys waiting and the oldest key's wait.
pub fn report_queue(service: &str, queue: &str, depth: usize, oldest_wait: std::time::Duration) {
    let labels = QueueLabels {
        service: service.to_owned(),
        queue: queue.to_owned(),
    };
    let families = queue_families();
    families
        .depth
        .get_or_create(&labels)
        .set(i64::try_from(depth).unwrap_or(i64::MAX));
    families
        .oldest
        .get_or_create(&labels)
        .set(oldest_wait.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn registered_metrics_are_encoded() {
        let counter: Counter = Counter::default();
        register("test_events", "Events seen by the test", counter.clone());
        counter.inc_by(3);
        let text = encode_text();
        assert!(text.contains("flotilla_test_events_total 3"), "{text}");
    }

    #[test]
    fn families_without_samples_are_still_listed() {
        #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
        struct Labels {
            controller: String,
        }
        let errors: prometheus_client::metrics::family::Family<Labels, Counter> = Default::default();
        register("test_empty_errors", "Errors nobody had yet", errors.clone());
        let text = encode_text();
        assert!(
            text.contains("# TYPE flotilla_test_empty_errors counter\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        errors
            .get_or_create(&Labels {
                controller: "c".to_owned(),
            })
            .inc();
        let text = encode_text();
        assert_eq!(
            text.matches("# TYPE flotilla_test_empty_errors ").count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn queues_report_depth_and_oldest_wait() {
        report_queue("svc", "items", 4, std::time::Duration::from_millis(1500));
        let text = encode_text();
        assert!(
            text.contains("flotilla_workqueue_depth{service=\"svc\",queue=\"items\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_workqueue_oldest_wait_seconds{service=\"svc\",queue=\"items\"} 1.5"),
            "{text}"
        );
    }
}
