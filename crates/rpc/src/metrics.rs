//! RPC metrics: request latency by method and status code, for clients and servers.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    method: String,
    code: String,
}

type LatencyFamily = Family<RpcLabels, Histogram, fn() -> Histogram>;

fn new_histogram() -> Histogram {
    // 0.5 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

fn family(side: &'static str) -> &'static LatencyFamily {
    static CLIENT: OnceLock<LatencyFamily> = OnceLock::new();
    static SERVER: OnceLock<LatencyFamily> = OnceLock::new();
    let cell = if side == "client" { &CLIENT } else { &SERVER };
    cell.get_or_init(|| {
        let family = LatencyFamily::new_with_constructor(new_histogram);
        flotilla_telemetry::metrics::register(
            &format!("grpc_{side}_request_duration_seconds"),
            &format!("gRPC {side} request latency by method and status code"),
            family.clone(),
        );
        family
    })
}

/// Registers the client and server latency families, so `/metrics` lists them before the
/// first call.
pub fn register() {
    family("client");
    family("server");
}

/// Records one client call (all attempts included).
pub(crate) fn observe_client(method: &str, code: tonic::Code, elapsed: Duration) {
    observe("client", method, code, elapsed);
}

/// Records one served request.
pub(crate) fn observe_server(method: &str, code: tonic::Code, elapsed: Duration) {
    observe("server", method, code, elapsed);
}

fn observe(side: &'static str, method: &str, code: tonic::Code, elapsed: Duration) {
    family(side)
        .get_or_create(&RpcLabels {
            method: method.to_owned(),
            code: format!("{code:?}"),
        })
        .observe(elapsed.as_secs_f64());
}
