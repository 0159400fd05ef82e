//! `flotilla.v1.DependencyDistributor/SyncDependencies`: the scheduler's fast path. The call
//! runs the same reconcile as a watch pickup, inline, so the caller's trace continues through
//! every attached binding it touches. It is idempotent; the watches are the guarantee.

use std::sync::Arc;

use flotilla_proto::v1::dependency_distributor_server::DependencyDistributor;
use flotilla_proto::v1::{BindingKind, Outcome, SyncDependenciesRequest, SyncDependenciesResponse};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::binding::BindingKey;
use crate::controller::{Context, ReconcileError};
use crate::watch::SyncGate;

/// How often a call redoes a reconcile that met a write conflict.
const CONFLICT_ATTEMPTS: u32 = 5;

/// The gRPC service name, for readiness.
pub const SERVICE_NAME: &str = "flotilla.v1.DependencyDistributor";

/// The service; `ctx` is `None` when the `PropagateDeps` feature gate is off.
pub struct Service {
    ctx: Option<(Arc<Context>, SyncGate)>,
    leadership: Option<flotilla_runtime::leader::LeaderElection>,
}

impl Service {
    /// The service of a running distributor.
    pub fn new(ctx: Arc<Context>, gate: SyncGate) -> Self {
        Self {
            ctx: Some((ctx, gate)),
            leadership: None,
        }
    }

    /// Serves only while this replica leads; a standby answers `UNAVAILABLE` (the caller
    /// retries, possibly reaching the leader, whose watches pick the binding up anyway).
    pub fn with_leadership(mut self, leadership: flotilla_runtime::leader::LeaderElection) -> Self {
        self.leadership = Some(leadership);
        self
    }

    /// The service of a distributor whose `PropagateDeps` gate is off.
    pub fn disabled() -> Self {
        Self {
            ctx: None,
            leadership: None,
        }
    }
}

/// The binding a request names.
pub fn binding_key(request: &SyncDependenciesRequest) -> Result<BindingKey, Status> {
    let Some(binding) = &request.binding else {
        return Err(Status::invalid_argument("binding is required"));
    };
    if binding.name.is_empty() {
        return Err(Status::invalid_argument("binding.name is required"));
    }
    match BindingKind::try_from(binding.kind) {
        Ok(BindingKind::ResourceBinding) if binding.namespace.is_empty() => Err(Status::invalid_argument(
            "binding.namespace is required for a ResourceBinding",
        )),
        Ok(BindingKind::ResourceBinding) => Ok(BindingKey::namespaced(&binding.namespace, &binding.name)),
        Ok(BindingKind::ClusterResourceBinding) => Ok(BindingKey::cluster(&binding.name)),
        _ => Err(Status::invalid_argument(
            "binding.kind must be BINDING_KIND_RESOURCE_BINDING or BINDING_KIND_CLUSTER_RESOURCE_BINDING",
        )),
    }
}

#[tonic::async_trait]
impl DependencyDistributor for Service {
    async fn sync_dependencies(
        &self,
        request: Request<SyncDependenciesRequest>,
    ) -> Result<Response<SyncDependenciesResponse>, Status> {
        let request = request.into_inner();
        let key = binding_key(&request)?;
        let Some((ctx, gate)) = &self.ctx else {
            return Err(Status::failed_precondition(
                "the PropagateDeps feature gate is off (--feature-gates=PropagateDeps=false): dependencies are not distributed",
            ));
        };
        if let Some(leadership) = &self.leadership
            && !leadership.is_leader()
        {
            return Err(Status::unavailable(format!(
                "this dependency-distributor replica is a standby ({:?}); the leader distributes the binding from its watches",
                leadership.role()
            )));
        }
        if !gate.is_open() {
            return Err(Status::unavailable(
                "the distributor's caches are still syncing; retry",
            ));
        }
        let span = tracing::info_span!("sync_dependencies", binding = %key);
        // A conflict means another writer (the detector, the scheduler, this process's own
        // worker) changed an object between read and write: read again and redo, a few times,
        // before handing the retry to the caller.
        let mut attempt = 1;
        let outcome = loop {
            match ctx.reconcile_binding(&key).instrument(span.clone()).await {
                Ok(outcome) => break outcome,
                Err(ReconcileError::Conflict { .. }) if attempt < CONFLICT_ATTEMPTS => attempt += 1,
                Err(error) => return Err(Status::unavailable(error.to_string())),
            }
        };
        let code = if !outcome.found {
            Outcome::NotFound
        } else if outcome.changed {
            Outcome::Done
        } else {
            Outcome::Unchanged
        };
        Ok(Response::new(SyncDependenciesResponse {
            outcome: code as i32,
            attached: outcome.attached.iter().map(|a| a.binding_ref()).collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use flotilla_proto::v1::BindingRef;

    use super::*;

    fn request(binding: Option<BindingRef>) -> SyncDependenciesRequest {
        SyncDependenciesRequest { binding }
    }

    #[test]
    fn requests_name_a_binding() {
        assert_eq!(
            binding_key(&request(Some(BindingRef::resource_binding(
                "default",
                "web-deployment",
                1,
                "u"
            ))))
            .unwrap(),
            BindingKey::namespaced("default", "web-deployment")
        );
        assert_eq!(
            binding_key(&request(Some(BindingRef::cluster_resource_binding(
                "pv-persistentvolume",
                1,
                "u"
            ))))
            .unwrap(),
            BindingKey::cluster("pv-persistentvolume")
        );
        for bad in [
            None,
            Some(BindingRef::resource_binding("", "web", 1, "u")),
            Some(BindingRef::resource_binding("default", "", 1, "u")),
            Some(BindingRef {
                kind: 0,
                name: "web".into(),
                ..Default::default()
            }),
            Some(BindingRef {
                kind: 99,
                name: "web".into(),
                ..Default::default()
            }),
        ] {
            let status = binding_key(&request(bad.clone())).unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_disabled_distributor_says_why() {
        let status = Service::disabled()
            .sync_dependencies(Request::new(request(Some(BindingRef::resource_binding(
                "default", "web", 1, "u",
            )))))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert!(status.message().contains("PropagateDeps"), "{}", status.message());
    }
}
