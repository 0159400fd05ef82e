//! The gRPC `flotilla.v1.Execution/Dispatch` service: reconcile the named binding's Works now.
//! Idempotent; the caller's trace continues through the server layer of `flotilla-rpc`.
//!
//! At most `--dispatch-concurrency` calls reconcile at once. A call beyond that is answered
//! `OUTCOME_QUEUED` at once and its binding goes to the binding queue, which the binding
//! workers drain as they drain the watch's pickups: the scheduler sends one call per scheduled
//! binding without waiting, so a burst of thousands of templates would otherwise hold as many
//! reconciles (each with its binding, template and rendered Works) in memory at once.

use std::sync::Arc;

use flotilla_proto::v1::execution_server::Execution;
use flotilla_proto::v1::{BindingKind as ProtoKind, DispatchRequest, DispatchResponse, Outcome};
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

use crate::context::{BindingKey, Context};
use crate::dispatch::reconcile_binding;
use crate::works::BindingKind;

/// The `Execution` gRPC service.
pub struct ExecutionService {
    ctx: Arc<Context>,
    /// One permit per call that may reconcile at once.
    in_progress: Semaphore,
}

impl ExecutionService {
    /// A service over `ctx` reconciling at most `concurrency` calls at once (at least one).
    pub fn new(ctx: Arc<Context>, concurrency: usize) -> Self {
        Self {
            ctx,
            in_progress: Semaphore::new(concurrency.max(1)),
        }
    }
}

/// The binding a request names, or why the request is invalid.
pub fn binding_key(request: &DispatchRequest) -> Result<BindingKey, Status> {
    let binding = request
        .binding
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("binding is required"))?;
    if binding.name.is_empty() {
        return Err(Status::invalid_argument("binding.name is required"));
    }
    let kind = match ProtoKind::try_from(binding.kind) {
        Ok(ProtoKind::ResourceBinding) => {
            if binding.namespace.is_empty() {
                return Err(Status::invalid_argument(
                    "binding.namespace is required for a ResourceBinding",
                ));
            }
            BindingKind::ResourceBinding
        }
        Ok(ProtoKind::ClusterResourceBinding) => BindingKind::ClusterResourceBinding,
        _ => {
            return Err(Status::invalid_argument(
                "binding.kind must be BINDING_KIND_RESOURCE_BINDING or BINDING_KIND_CLUSTER_RESOURCE_BINDING",
            ));
        }
    };
    Ok(BindingKey::new(kind, &binding.namespace, &binding.name))
}

#[tonic::async_trait]
impl Execution for ExecutionService {
    async fn dispatch(
        &self,
        request: Request<DispatchRequest>,
    ) -> Result<Response<DispatchResponse>, Status> {
        let key = binding_key(request.get_ref())?.shared();
        let Ok(_permit) = self.in_progress.try_acquire() else {
            tracing::debug!(binding = %key, "Dispatch calls at their limit; the binding is queued");
            crate::metrics::metrics().dispatch_queued();
            self.ctx.binding_queue.add(key);
            return Ok(Response::new(DispatchResponse {
                outcome: Outcome::Queued as i32,
                works: vec![],
                suspended_clusters: vec![],
            }));
        };
        let outcome = reconcile_binding(&self.ctx, &key).await.map_err(|error| {
            // The watch-driven queue retries; the caller may too.
            self.ctx.binding_queue.add_rate_limited(key.clone());
            Status::unavailable(error.to_string())
        })?;
        let result = if outcome.not_owner {
            Outcome::NotOwner
        } else if !outcome.found {
            Outcome::NotFound
        } else if !outcome.scheduled {
            Outcome::Unchanged
        } else if !outcome.works.is_empty() && outcome.suspended_clusters.len() >= outcome.works.len() {
            Outcome::Deferred
        } else {
            Outcome::Done
        };
        Ok(Response::new(DispatchResponse {
            outcome: result as i32,
            works: outcome.works,
            suspended_clusters: outcome.suspended_clusters,
        }))
    }
}

#[cfg(test)]
mod tests {
    use flotilla_proto::v1::BindingRef;

    use super::*;

    fn request(binding: Option<BindingRef>) -> DispatchRequest {
        DispatchRequest { binding }
    }

    #[test]
    fn binding_keys_from_requests() {
        let key = binding_key(&request(Some(BindingRef::resource_binding(
            "default",
            "nginx-deployment",
            3,
            "u",
        ))))
        .unwrap();
        assert_eq!(key.kind, BindingKind::ResourceBinding);
        assert_eq!((&*key.namespace, &*key.name), ("default", "nginx-deployment"));
        let key = binding_key(&request(Some(BindingRef::cluster_resource_binding(
            "admin-clusterrole",
            1,
            "u",
        ))))
        .unwrap();
        assert_eq!(key.kind, BindingKind::ClusterResourceBinding);
        assert_eq!(&*key.namespace, "");
    }

    #[test]
    fn invalid_requests_are_rejected_with_the_field() {
        let cases = [
            (request(None), "binding is required"),
            (
                request(Some(BindingRef::resource_binding("", "x", 1, "u"))),
                "binding.namespace is required",
            ),
            (
                request(Some(BindingRef::resource_binding("ns", "", 1, "u"))),
                "binding.name is required",
            ),
            (
                request(Some(BindingRef {
                    kind: 0,
                    name: "x".into(),
                    ..Default::default()
                })),
                "binding.kind must be",
            ),
        ];
        for (request, expected) in cases {
            let status = binding_key(&request).unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().contains(expected), "{}", status.message());
        }
    }
}
