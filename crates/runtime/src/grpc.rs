//! The gRPC server of a service: its own services plus `grpc.health.v1.Health`, behind the
//! tracing and metrics layer.

use std::net::SocketAddr;

use flotilla_rpc::Readiness;
use flotilla_rpc::server::TraceLayer;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;

use crate::RuntimeError;

/// A bound gRPC listener, ready to serve.
pub struct GrpcListener {
    listener: tokio::net::TcpListener,
    address: SocketAddr,
}

impl GrpcListener {
    /// Binds `address` (port 0 picks a free port).
    pub async fn bind(address: SocketAddr) -> Result<Self, RuntimeError> {
        flotilla_rpc::register_metrics();
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| RuntimeError::Bind {
                address: address.to_string(),
                source,
            })?;
        let address = listener.local_addr().map_err(|source| RuntimeError::Bind {
            address: address.to_string(),
            source,
        })?;
        Ok(Self { listener, address })
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves `routes` and the health service until `shutdown`.
    pub async fn serve(
        self,
        routes: Routes,
        readiness: Readiness,
        shutdown: CancellationToken,
    ) -> Result<(), RuntimeError> {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(self.listener);
        tonic::transport::Server::builder()
            .layer(TraceLayer)
            .add_routes(routes)
            .add_service(readiness.grpc_service())
            .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
            .await
            .map_err(|error| RuntimeError::Serve {
                server: "gRPC",
                message: error.to_string(),
            })
    }
}
