//! # flotilla-api
//!
//! The Karmada-compatible API that every flotilla component speaks, in one place:
//!
//! - [`policy`]: `policy.karmada.io/v1alpha1` PropagationPolicy and ClusterPropagationPolicy;
//! - [`overrides`]: `policy.karmada.io/v1alpha1` OverridePolicy and ClusterOverridePolicy;
//! - [`work`]: `work.karmada.io/v1alpha2` ResourceBinding and ClusterResourceBinding, and
//!   `work.karmada.io/v1alpha1` Work; [`watched`]: bindings as the services' watches decode
//!   them, without the member objects' statuses; [`lean`]: any object as the services' watches
//!   decode it, without `metadata.managedFields`;
//! - [`taint_policy`]: `policy.karmada.io/v1alpha1` ClusterTaintPolicy;
//! - [`cluster`]: `cluster.karmada.io/v1alpha1` Cluster, and [`cluster_affinity`], which
//!   clusters a `ClusterAffinity` selects;
//! - [`well_known`]: the labels, annotations, condition types and reasons that components use
//!   to talk to each other through objects;
//! - [`validation`]: the semantic checks that both the apiserver's admission and the services
//!   run, so a user sees the same message wherever a bad policy is caught;
//! - [`crds`]: the CustomResourceDefinitions generated from the types (checked in under
//!   `deploy/crds/`, see the `flotilla-crdgen` binary).
//!
//! Group, version, kind, plural, short names and JSON field names are Karmada's, so existing
//! Karmada YAML applies unchanged. Where the design seeds and Karmada's released API differ (the
//! suspension field names), both spellings are accepted; see [`policy::Suspension`].
//!
//! Unknown fields are ignored when deserializing (forward compatibility: a newer API server may
//! carry fields this version does not know), and the generated CRDs are structural, so an API
//! server prunes unknown fields before they are stored. See `docs/adr/0001-api-compatibility.md`.

// `#[kube(printcolumn(type_ = ...))]` repeats keys by design; clippy mistakes them for duplicates.
#![allow(clippy::duplicated_attributes)]

#[macro_use]
mod string_enum;

pub mod cluster;
pub mod cluster_affinity;
pub mod conditions;
pub mod crds;
pub mod fingerprint;
pub mod image_reference;
pub mod lean;
pub mod overrides;
pub mod policy;
pub mod revision;
pub mod taint_policy;
pub mod validation;
pub mod watched;
pub mod well_known;
pub mod work;

mod schema;

pub use cluster::{Cluster, ClusterSpec, ClusterStatus};
pub use overrides::{ClusterOverridePolicy, OverridePolicy, OverrideSpec};
pub use policy::{
    ActivationPreference, ClusterPropagationPolicy, ConflictResolution, Placement, PreemptionBehavior,
    PropagationPolicy, PropagationSpec, ResourceSelector, Suspension,
};
pub use taint_policy::{ClusterTaintPolicy, ClusterTaintPolicySpec};
pub use validation::{Violation, Violations};
pub use work::{
    BindingSnapshot, ClusterResourceBinding, GracefulEvictionTask, ObjectReference, ResourceBinding,
    ResourceBindingSpec, ResourceBindingStatus, TargetCluster, Work, WorkSpec, WorkStatus,
};
