//! # flotilla-patch
//!
//! Kubernetes' patch and field-management semantics over [`serde_json::Value`], so that
//! flotilla-apiserver answers `kubectl apply` (client- and server-side), `kubectl patch`,
//! `kubectl edit`, `kubectl label`, `kubectl scale`, kube-rs and the official clients exactly as
//! kube-apiserver does:
//!
//! - [`json_patch`]: RFC 6902 as evanphx/json-patch v4 applies it;
//! - [`merge_patch`]: RFC 7386;
//! - [`strategic_merge_patch`]: k8s.io/apimachinery strategic merge patch, driven by a
//!   [`Shape`];
//! - [`managed`]: server-side apply and `metadata.managedFields` tracking
//!   (sigs.k8s.io/structured-merge-diff and kube-apiserver's field managers);
//! - [`builtin`]: shapes of the built-in kinds.
//!
//! Pure functions, no I/O. Fidelity to kube-apiserver is the measure: where kube-apiserver has a
//! quirk that clients can observe, it is reproduced and documented at the function.
//!
//! How a server uses it, per request:
//!
//! ```
//! use flotilla_patch::{builtin, managed, strategic_merge_patch};
//! use serde_json::json;
//!
//! let shape = builtin::shape_ref("apps/v1", "Deployment");
//! let now = "2024-05-01T10:00:00Z";
//!
//! // PATCH application/apply-patch+yaml (server-side apply), here creating the object.
//! let config = json!({
//!     "apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "default"},
//!     "spec": {"replicas": 2}
//! });
//! let opts = managed::ApplyOptions { manager: "kubectl", force: false, api_version: "apps/v1", subresource: None, now };
//! let live = managed::apply(None, &config, shape, &opts).unwrap();
//! assert_eq!(live["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
//!
//! // PATCH application/strategic-merge-patch+json, then field tracking for the write.
//! let patched = strategic_merge_patch(&live, &json!({"spec": {"replicas": 3}}), shape).unwrap();
//! let opts = managed::UpdateOptions { manager: "kubectl-edit", api_version: "apps/v1", subresource: None, now };
//! let stored = managed::track_update(Some(&live), &patched, shape, &opts).unwrap();
//! // The editor owns spec.replicas now; kubectl's entry, left empty, is gone.
//! assert_eq!(stored["metadata"]["managedFields"][0]["manager"], "kubectl-edit");
//! assert_eq!(stored["metadata"]["managedFields"].as_array().unwrap().len(), 1);
//!
//! // The first manager now conflicts on the field the editor took over.
//! let again = managed::ApplyOptions { manager: "kubectl", force: false, api_version: "apps/v1", subresource: None, now };
//! let err = managed::apply(Some(&stored), &config, shape, &again).unwrap_err();
//! assert_eq!(err.message(), "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas");
//! ```

mod error;
mod gofmt;
mod json_patch;
mod merge_patch;
mod shape;
mod strategic;
mod time;

pub mod builtin;
pub mod managed;

pub use error::PatchError;
pub use json_patch::{MAX_OPERATIONS as MAX_JSON_PATCH_OPERATIONS, json_patch};
pub use merge_patch::merge_patch;
pub use shape::{ListType, Shape, SmpStrategy};
pub use strategic::strategic_merge_patch;

use thiserror::Error;

/// Why a server-side apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApplyError {
    /// The configuration changes fields other managers own (kube-apiserver: 409 Conflict).
    #[error("{}", managed::conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The request cannot be applied: wrong apiVersion or kind, `metadata.managedFields` set,
    /// or the configuration does not fit the schema (duplicate list keys, missing keys, ...).
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// kube-apiserver's message, e.g. `Apply failed with 1 conflict: conflict with
    /// "kubectl-client-side-apply" using apps/v1: .spec.replicas`.
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// The HTTP status kube-apiserver answers with: 409 for conflicts; 500 for configurations
    /// that cannot be converted to the schema (`failed to create typed patch object ...`) and
    /// undecodable managedFields; 400 otherwise.
    pub fn http_status(&self) -> u16 {
        match self {
            ApplyError::Conflicts(_) => 409,
            ApplyError::Invalid(m) if m.starts_with("failed to ") => 500,
            ApplyError::Invalid(_) => 400,
        }
    }
}

/// A field another manager owns and the applied configuration would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager's name (`kubectl-client-side-apply`).
    pub manager: String,
    /// The field, as kube-apiserver prints it (`.spec.replicas`,
    /// `.spec.template.spec.containers[name="web"].image`).
    pub field: String,
    /// The other manager's operation (`Apply` or `Update`).
    pub operation: String,
    /// The other manager's API version (empty for appliers, which kube-apiserver identifies
    /// without one).
    pub api_version: String,
    /// The other manager's subresource (empty for the main resource).
    pub subresource: String,
}
