//! # flotilla-telemetry
//!
//! Observability plumbing every flotilla service shares:
//!
//! - [`init`]: structured logs (text or JSON, filtered by `--log-level` or `RUST_LOG`) and, when
//!   the standard `OTEL_*` environment variables configure an OTLP endpoint, an OpenTelemetry
//!   trace pipeline exporting over OTLP/gRPC. Without an endpoint no OpenTelemetry layer is
//!   installed, so tracing costs nothing beyond `tracing` itself. The exporter's gRPC channel
//!   runs on a one-thread runtime of its own, so spans are exported (and flushed at shutdown)
//!   whatever runtime the service runs on, one thread included (ADR 0025).
//! - [`propagation`]: W3C `traceparent` in and out of gRPC metadata, HTTP headers and object
//!   annotations, so one trace follows a change across processes.
//! - [`metrics`]: the process-wide Prometheus registry the `/metrics` endpoint encodes.

pub mod metrics;
pub mod propagation;

use std::fmt;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// Logging flags shared by every binary.
#[derive(Clone, Debug, clap::Args)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, env = "FLOTILLA_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter, e.g. `info` or `info,flotilla_detector=debug` (`RUST_LOG` syntax).
    #[arg(long, env = "FLOTILLA_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

impl Default for LogArgs {
    fn default() -> Self {
        Self {
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
        }
    }
}

/// Errors setting up telemetry.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("invalid --log-level {filter:?}: {source}; use e.g. info or info,flotilla_detector=debug")]
    Filter {
        /// The filter as given.
        filter: String,
        /// Why it does not parse.
        source: tracing_subscriber::filter::ParseError,
    },
    /// The OTLP exporter could not be built from the `OTEL_*` environment.
    #[error("cannot build the OTLP trace exporter from OTEL_* environment variables: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// The OTLP exporter's thread could not be started.
    #[error(
        "cannot start the OTLP trace exporter's thread: {0}; raise the process's thread limit or unset OTEL_EXPORTER_OTLP_ENDPOINT"
    )]
    ExporterRuntime(std::io::Error),
    /// A global subscriber was already installed.
    #[error("tracing is already initialised: {0}")]
    AlreadyInitialised(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps the trace pipeline alive; flushes pending spans when dropped.
#[must_use = "dropping the guard shuts the trace exporter down"]
pub struct Telemetry {
    exporter: Option<Exporter>,
}

/// The OTLP pipeline: the provider, then the runtime its gRPC channel runs on (dropped after
/// the provider has shut down).
struct Exporter {
    provider: SdkTracerProvider,
    _runtime: ExporterRuntime,
}

/// Runs the OTLP exporter's gRPC channel. The batch processor's thread blocks on each export,
/// and the channel's tasks must make progress meanwhile: on the service's own runtime they
/// could not when that runtime is one thread and is the one shutting down
/// (opentelemetry-rust#2583), so they have a thread of their own. Dropped without blocking:
/// the guard, and `init` when it fails, run inside the service's runtime, where dropping a
/// runtime would panic.
struct ExporterRuntime(Option<tokio::runtime::Runtime>);

impl Drop for ExporterRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Telemetry {
    /// Whether spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.exporter.is_some()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(exporter) = &self.exporter {
            // Best effort: a collector that is down must not keep the process from exiting.
            let _ = exporter.provider.shutdown();
        }
    }
}

/// Whether the environment asks for OTLP trace export: an endpoint is set
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and
/// `OTEL_TRACES_EXPORTER` is not `none`.
pub fn otlp_configured() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let exporter_disabled = std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v.trim() == "none");
    !exporter_disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Installs the global tracing subscriber for `service` (the default `service.name` when
/// `OTEL_SERVICE_NAME` is unset).
pub fn init(service: &'static str, args: &LogArgs) -> Result<Telemetry, TelemetryError> {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| args.log_level.clone());
    let filter = EnvFilter::try_new(&filter).map_err(|source| TelemetryError::Filter { filter, source })?;
    propagation::install_propagator();

    let exporter = if otlp_configured() {
        Some(build_exporter(service)?)
    } else {
        None
    };
    let otel_layer = exporter.as_ref().map(|Exporter { provider, .. }| {
        tracing_opentelemetry::layer().with_tracer(provider.tracer(service))
    });

    let registry = tracing_subscriber::registry().with(filter).with(otel_layer);
    match args.log_format {
        LogFormat::Text => registry
            .with(tracing_subscriber::fmt::layer().with_target(true))
            .try_init()?,
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true),
            )
            .try_init()?,
    }
    Ok(Telemetry { exporter })
}

fn build_exporter(service: &'static str) -> Result<Exporter, TelemetryError> {
    let runtime = ExporterRuntime(Some(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()
            .map_err(TelemetryError::ExporterRuntime)?,
    ));
    // The channel spawns its tasks on the runtime current when it is built.
    let exporter = {
        let _entered = runtime.0.as_ref().map(tokio::runtime::Runtime::enter);
        opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(service);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    Ok(Exporter {
        provider,
        _runtime: runtime,
    })
}
