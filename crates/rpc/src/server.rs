//! Server side: continue the caller's trace and record RPC metrics, as one tower layer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use opentelemetry::propagation::Extractor;
use tracing::Instrument;

/// Wraps every request in a `grpc.server` span whose parent is the caller's trace context, and
/// records latency by method and status code.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceLayer;

impl<S> tower::Layer<S> for TraceLayer {
    type Service = TraceService<S>;
    fn layer(&self, inner: S) -> TraceService<S> {
        TraceService { inner }
    }
}

/// The service [`TraceLayer`] produces.
#[derive(Clone, Debug)]
pub struct TraceService<S> {
    inner: S,
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

impl<S, B, R> tower::Service<http::Request<B>> for TraceService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().to_owned();
        let span = tracing::info_span!("grpc.server", otel.kind = "server", rpc.method = %method, rpc.code = tracing::field::Empty);
        flotilla_telemetry::propagation::set_parent_from(&span, &HeaderExtractor(request.headers()));
        // Take the service that was polled ready and leave a fresh clone behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let started = Instant::now();
        Box::pin(
            async move {
                let result = inner.call(request).await;
                let code = match &result {
                    // Unary handlers that fail send a trailers-only response: the status is in
                    // the headers. Successful unary responses carry it in trailers (OK).
                    Ok(response) => response
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .map(tonic::Code::from)
                        .unwrap_or(tonic::Code::Ok),
                    Err(_) => tonic::Code::Internal,
                };
                tracing::Span::current().record("rpc.code", tracing::field::debug(code));
                crate::metrics::observe_server(&method, code, started.elapsed());
                result
            }
            .instrument(span),
        )
    }
}
