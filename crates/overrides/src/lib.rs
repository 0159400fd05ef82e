//! # flotilla-overrides
//!
//! Applies Karmada's OverridePolicies and ClusterOverridePolicies (`policy.karmada.io/v1alpha1`)
//! to the manifest one member cluster receives, with Karmada's semantics, so a Karmada user's
//! override policies change flotilla's Works exactly as they change Karmada's:
//!
//! - [`render()`]: which policies and rules apply (ClusterOverridePolicies first, then the
//!   OverridePolicies of the object's namespace; within each, least specific selectors first,
//!   then by name; rules in order, each for the clusters its `targetCluster` selects) and the
//!   manifest they produce, with Karmada's `applied-overrides` records ([`applied`]);
//! - [`overriders`]: each overrider (image, command, args, labels, annotations, field,
//!   plaintext);
//! - [`patch`]: JSON patch as evanphx/json-patch v5 applies it (what happens to a `remove` of a
//!   missing path, negative indices, ...), on [`doc::Doc`], a JSON value that keeps member order
//!   and number spelling;
//! - [`subdocument`]: the JSON and YAML documents a field overrider edits inside a string field;
//! - [`select`]: resource selectors, their specificity, and `targetCluster` matching.
//!
//! Unlike Karmada, a rule that fails (a `remove` of a path that does not exist, an image that
//! does not parse, a field that is not a string) does not fail the whole Work: that rule is
//! skipped in that cluster and reported ([`RuleFailure`]), the others apply.
//!
//! Pure functions, no I/O: execution calls [`render()`] for each Work it writes, with the
//! policies in effect for the binding.

pub mod applied;
pub mod doc;
pub mod overriders;
pub mod patch;
pub mod render;
pub mod select;
pub mod subdocument;

pub use applied::{APPLIED_CLUSTER_OVERRIDES_ANNOTATION, APPLIED_OVERRIDES_ANNOTATION};
pub use render::{PolicySource, Rendered, RuleFailure, render};
pub use select::ClusterFacts;

#[cfg(test)]
mod tests;
