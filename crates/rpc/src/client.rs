//! Client channels: lazy connection, per-call deadline, trace-context injection.

use std::collections::HashMap;
use std::time::Duration;

use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

/// How a client reaches a peer service.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Deadline of one call attempt.
    pub timeout: Duration,
    /// Deadline of establishing a connection.
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
        }
    }
}

/// Errors creating a client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The peer address is not a valid URI.
    #[error("invalid peer address {address:?}: {source}; use e.g. http://127.0.0.1:7100")]
    Address {
        /// The address as given.
        address: String,
        /// Why it is invalid.
        source: tonic::transport::Error,
    },
}

/// A channel whose every request carries the caller's W3C trace context.
pub type TracedChannel = InterceptedService<Channel, TraceContextInterceptor>;

/// A lazily connecting channel to `address` (`http://host:port`; a bare `host:port` gets
/// `http://`). Connecting happens on first use, so a peer that is down does not keep a
/// service from starting.
pub fn connect(address: &str, options: &ClientOptions) -> Result<TracedChannel, ClientError> {
    let uri = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(|source| ClientError::Address {
            address: address.to_owned(),
            source,
        })?
        .timeout(options.timeout)
        .connect_timeout(options.connect_timeout)
        .tcp_nodelay(true);
    Ok(InterceptedService::new(
        endpoint.connect_lazy(),
        TraceContextInterceptor,
    ))
}

/// Injects the current span's trace context into outgoing request metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceContextInterceptor;

impl tonic::service::Interceptor for TraceContextInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let mut headers = HashMap::new();
        flotilla_telemetry::propagation::inject_current(&mut headers);
        for (key, value) in headers {
            if let (Ok(key), Ok(value)) = (
                MetadataKey::from_bytes(key.as_bytes()),
                MetadataValue::try_from(value),
            ) {
                request.metadata_mut().insert(key, value);
            }
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn addresses() {
        assert!(connect("127.0.0.1:7100", &ClientOptions::default()).is_ok());
        assert!(connect("http://localhost:7100", &ClientOptions::default()).is_ok());
        let err = connect("http://bad host:1", &ClientOptions::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid peer address \"http://bad host:1\""),
            "{err}"
        );
    }
}
