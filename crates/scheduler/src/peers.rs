//! Telling the peers about a new scheduling result: execution's `Dispatch` and, for bindings
//! with `propagateDeps`, the dependency distributor's `SyncDependencies`.
//!
//! The calls are the fast path only: both peers watch bindings and repair a lost call, so a
//! failure is logged and counted, never retried beyond `flotilla_rpc::call`'s own retries, and
//! never delays scheduling (the calls run on their own task, inside the scheduling span so the
//! trace continues).

use flotilla_proto::v1::dependency_distributor_client::DependencyDistributorClient;
use flotilla_proto::v1::execution_client::ExecutionClient;
use flotilla_proto::v1::{BindingRef, DispatchRequest, SyncDependenciesRequest};
use flotilla_rpc::{ClientOptions, RetryPolicy, TracedChannel};
use tracing::Instrument;

use crate::metrics::metrics;

/// Clients of the peer services; a peer without an address is not called.
#[derive(Clone, Debug, Default)]
pub struct Peers {
    execution: Option<ExecutionClient<TracedChannel>>,
    distributor: Option<DependencyDistributorClient<TracedChannel>>,
    retry: RetryPolicy,
}

impl Peers {
    /// Clients for the peers at `execution` and `distributor` (`host:port` or a URL; empty
    /// means "do not call").
    pub fn new(execution: &str, distributor: &str) -> Result<Self, flotilla_rpc::client::ClientError> {
        let options = ClientOptions::default();
        let execution = (!execution.is_empty())
            .then(|| flotilla_rpc::connect(execution, &options).map(ExecutionClient::new))
            .transpose()?;
        let distributor = (!distributor.is_empty())
            .then(|| flotilla_rpc::connect(distributor, &options).map(DependencyDistributorClient::new))
            .transpose()?;
        Ok(Self {
            execution,
            distributor,
            retry: RetryPolicy::default(),
        })
    }

    /// Calls `Dispatch` (and `SyncDependencies` when `propagate_deps`) for `binding` on a task of
    /// its own, in the current span.
    pub fn notify(&self, binding: BindingRef, propagate_deps: bool) {
        let peers = self.clone();
        let span = tracing::Span::current();
        tokio::spawn(
            async move {
                peers.dispatch(binding.clone()).await;
                if propagate_deps {
                    peers.sync_dependencies(binding).await;
                }
            }
            .instrument(span),
        );
    }

    async fn dispatch(&self, binding: BindingRef) {
        let Some(client) = &self.execution else {
            return;
        };
        let key = binding.key();
        let result = flotilla_rpc::call("flotilla.v1.Execution/Dispatch", &self.retry, || {
            let mut client = client.clone();
            let request = DispatchRequest {
                binding: Some(binding.clone()),
            };
            async move { client.dispatch(request).await }
        })
        .await;
        if let Err(status) = result {
            metrics().error("dispatch");
            tracing::warn!(binding = %key, code = ?status.code(), message = status.message(),
                "Dispatch failed; execution's watch will pick the binding up");
        }
    }

    async fn sync_dependencies(&self, binding: BindingRef) {
        let Some(client) = &self.distributor else {
            return;
        };
        let key = binding.key();
        let result = flotilla_rpc::call(
            "flotilla.v1.DependencyDistributor/SyncDependencies",
            &self.retry,
            || {
                let mut client = client.clone();
                let request = SyncDependenciesRequest {
                    binding: Some(binding.clone()),
                };
                async move { client.sync_dependencies(request).await }
            },
        )
        .await;
        if let Err(status) = result {
            metrics().error("sync-dependencies");
            tracing::warn!(binding = %key, code = ?status.code(), message = status.message(),
                "SyncDependencies failed; the dependency distributor's watch will pick the binding up");
        }
    }
}
