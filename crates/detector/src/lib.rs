//! # flotilla-detector
//!
//! The resource detector: it watches PropagationPolicies, ClusterPropagationPolicies and every
//! resource kind they select (discovered at run time, built-in or CRD), decides which policy
//! claims each resource template, writes the claim onto the template and the template's
//! ResourceBinding (or ClusterResourceBinding), and implements lazy policy activation
//! (`activationPreference: Lazy`). After writing a binding it calls the scheduler's `Schedule`
//! (fast path; the scheduler also watches bindings).
//!
//! | module | owns |
//! |---|---|
//! | [`keys`] | kinds, template and policy keys, binding names |
//! | [`matching`] | selector matching, priorities, preemption, the claim decision (Karmada semantics, with source locations) |
//! | [`claim`] | claim labels and annotations |
//! | [`fingerprint`] | the template fingerprint ("the template changed"), re-exported from `flotilla-api` |
//! | [`content`] | a template as the watch cache holds it: metadata, and what is read of its content (fingerprint, replicas) |
//! | [`binding`] | the binding's desired spec and the merge patches of the detector's own fields |
//! | [`lazy`] | the lazy activation decision |
//! | [`overrides`] | which override policy generations are in effect for a binding (`flotilla.io/overrides`), override policy status |
//! | [`revision`] | when templates' content and policies' generations and selectors were written, in the API's order |
//! | [`plan`] | one template reconcile as a pure function |
//! | [`policy`] | policy views and the policy status the detector maintains |
//! | [`activate`] | `flotilla activate`'s mechanism |
//! | [`controller`] | caches, queues, reconciles and writes (the I/O) |
//! | [`events`], [`metrics`], [`api`] | plumbing (the work queue is `flotilla_runtime::queue`) |
//!
//! ## Decisions worth knowing
//!
//! - **Between policy kinds a PropagationPolicy wins** over any ClusterPropagationPolicy,
//!   whatever the explicit priorities, because Karmada's detector looks for a PropagationPolicy
//!   first (`pkg/detector/policy.go`, `propagateResource`). Preemption follows
//!   `pkg/detector/preemption.go`; see [`matching`].
//! - **Invalid policies** (`validate()` fails) get `Valid=False` (reason `InvalidPolicy`, the
//!   message lists every violation with its field) and a Warning event, and are ignored for
//!   matching. Templates they already claim stay claimed and are **frozen**: neither their claim
//!   nor their binding changes (not even through preemption or a template edit) until the
//!   policy is valid again or deleted.
//! - **A released template keeps its binding** (policy deleted or no longer matching): only the
//!   claim metadata is removed from template and binding; the binding and the member objects
//!   stay until another policy takes over or the template is deleted (garbage collection
//!   through the binding's ownerReference).
//! - **Lazy activation follows the API's order, not the detector's**: a Lazy policy's
//!   generation applies to a template whose content was written after it (resourceVersions
//!   compared, see [`revision`]), so the outcome is the same whatever order and timing the
//!   watches deliver events in, across restarts and relists; see [`lazy`]. Likewise an
//!   unclaimed template goes to the policy that matched it first in the API's order
//!   ([`matching::first_match`]).
//!   A binding whose Lazy policy change is pending carries `PolicyActivated=False` (reason
//!   `LazyActivationPending`) and the policy counts such templates in
//!   `status.pendingActivationTemplates`.
//! - **`flotilla activate`** sets `flotilla.io/activate` on a template (see [`activate`]); the
//!   annotation is left in place afterwards, harmlessly.
//! - A kind that is not served yet (CRD installed later) is retried until it is; a kind no
//!   policy selects any more stops being watched once its templates' claims are released. A
//!   kind removed from every policy while the detector is down keeps stale claims on its
//!   templates until a policy selects the kind again (then they are released or replaced).

pub mod activate;
pub mod api;
pub mod binding;
pub mod claim;
pub mod content;
pub mod controller;
pub mod events;
pub use flotilla_api::fingerprint;
pub mod keys;
pub mod lazy;
pub mod matching;
pub mod metrics;
pub mod overrides;
pub mod plan;
pub mod policy;
pub mod revision;

use std::net::SocketAddr;
use std::time::Duration;

pub use activate::{
    ActivateError, Activation, ActivationState, TemplateRef, activate, activate_overrides, activation_state,
};
pub use controller::{ControllerOptions, Detector};

/// Everything the detector process needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// gRPC listen address (health).
    pub grpc_addr: SocketAddr,
    /// Ops HTTP listen address (`/metrics`, `/healthz`, `/livez`, `/readyz`).
    pub metrics_addr: SocketAddr,
    /// Controller tunables (scheduler address, workers, resync).
    pub controller: ControllerOptions,
    /// Leader election (active/standby on the Lease `flotilla-system/flotilla-detector`).
    pub leader_election: flotilla_runtime::leader::LeaderElectArgs,
}

/// The name of the detector's leader Lease (and its `service` metric label).
pub const LEASE_NAME: &str = "flotilla-detector";

/// Errors starting the detector.
#[derive(Debug, thiserror::Error)]
pub enum DetectorError {
    /// A listener or the gRPC server failed.
    #[error(transparent)]
    Runtime(#[from] flotilla_runtime::RuntimeError),
    /// The scheduler address is invalid.
    #[error("--scheduler-addr: {0}")]
    Scheduler(#[from] flotilla_rpc::client::ClientError),
    /// The leader-election flags are inconsistent.
    #[error("{0}")]
    LeaderElection(String),
}

/// Runs the detector until `shutdown`: the ops endpoint, the gRPC health service, and the
/// controller.
pub async fn run(
    client: kube::Client,
    config: Config,
    shutdown: flotilla_runtime::Shutdown,
) -> Result<(), DetectorError> {
    let readiness = flotilla_rpc::Readiness::new(&[]);
    let ops = flotilla_runtime::ops::serve(config.metrics_addr, readiness.clone(), shutdown.clone()).await?;
    let grpc = flotilla_runtime::grpc::GrpcListener::bind(config.grpc_addr).await?;
    tracing::info!(metrics = %ops, grpc = %grpc.address(), "flotilla-detector starting");
    metrics::metrics();
    let leadership = if config.leader_election.leader_elect {
        let timings = config
            .leader_election
            .timings()
            .map_err(DetectorError::LeaderElection)?;
        let identity = flotilla_runtime::lease::identity(grpc.address().port());
        let election = flotilla_runtime::leader::LeaderElection::start(
            client.clone(),
            &config.leader_election.leader_elect_namespace,
            LEASE_NAME,
            &identity,
            LEASE_NAME,
            timings,
            Some(readiness.clone()),
        );
        // A leader that loses the Lease exits and comes back as a standby.
        election.exit_on_loss();
        election
    } else {
        flotilla_runtime::leader::LeaderElection::always_leader(LEASE_NAME)
    };
    let mut controller = config.controller;
    controller.leadership = Some(leadership.clone());
    let (detector, writers) = Detector::new(client, controller, readiness.clone())?;
    let server = tokio::spawn(grpc.serve(tonic::service::Routes::default(), readiness, shutdown.clone()));
    detector.run(writers, shutdown.clone()).await;
    // The workers are stopped: hand the Lease over at once.
    leadership.release().await;
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(result)) => result?,
        Ok(Err(join)) => tracing::warn!(error = %join, "gRPC server task failed"),
        Err(_) => tracing::warn!("gRPC server did not stop within 5s"),
    }
    tracing::info!("flotilla-detector stopped");
    Ok(())
}
