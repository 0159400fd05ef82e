//! # flotilla-rpc
//!
//! How flotilla's services call each other, applied once instead of at every call site:
//!
//! - [`client`]: a lazily connecting channel with a per-call deadline and an interceptor that
//!   carries the caller's W3C trace context in gRPC metadata;
//! - [`retry`]: exponential backoff with jitter for idempotent calls (every flotilla call is);
//! - [`server`]: a tower layer that continues the caller's trace and records RPC metrics;
//! - [`health`]: process readiness, served as `grpc.health.v1.Health` (and read by the HTTP
//!   `/readyz` endpoint of `flotilla-runtime`).

pub mod client;
pub mod health;
pub mod retry;
pub mod server;

mod metrics;

pub use metrics::register as register_metrics;

pub use client::{ClientOptions, TracedChannel, connect};
pub use health::Readiness;
pub use retry::{RetryPolicy, call};
