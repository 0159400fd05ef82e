//! The ops HTTP endpoint: `/metrics` (Prometheus text), `/healthz` and `/livez` (the process
//! answers), `/readyz` (every readiness check passes; `?verbose` lists them).

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use flotilla_rpc::Readiness;
use tokio_util::sync::CancellationToken;

use crate::RuntimeError;

/// Binds `address` and serves the ops endpoint until `shutdown`; returns the bound address.
pub async fn serve(
    address: SocketAddr,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<SocketAddr, RuntimeError> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| RuntimeError::Bind {
            address: address.to_string(),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| RuntimeError::Bind {
        address: address.to_string(),
        source,
    })?;
    flotilla_telemetry::metrics::register_queue_metrics();
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(alive))
        .route("/livez", get(alive))
        .route("/readyz", get(ready))
        .with_state(readiness);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "ops endpoint failed");
        }
    });
    Ok(bound)
}

async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        flotilla_telemetry::metrics::encode_text(),
    )
}

async fn alive() -> &'static str {
    "ok"
}

async fn ready(
    State(readiness): State<Readiness>,
    Query(query): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    let ready = readiness.is_ready();
    let mut body = String::new();
    if query.contains_key("verbose") {
        for (name, ok, message) in readiness.report() {
            body.push_str(&format!("[{}] {name}: {message}\n", if ok { "+" } else { "-" }));
        }
    }
    body.push_str(if ready { "ok" } else { "not ready" });
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        body,
    )
}
