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
    registry()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .register(name, help, metric);
}

/// The registry in Prometheus text format.
pub fn encode_text() -> String {
    let mut out = String::new();
    let registry = registry().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Encoding into a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
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
}
