//! # flotilla-execution
//!
//! The only flotilla service that talks to member clusters. It turns each scheduled
//! ResourceBinding and ClusterResourceBinding into one Work per target cluster (namespace
//! `karmada-es-<cluster>`), applies each Work's manifests to its member cluster with
//! server-side apply, and reports back: the Work's `Applied` and `Dispatching` conditions and
//! manifest statuses, the binding's `aggregatedStatus` and `FullyApplied`, the template's
//! `status`, and each Cluster's `Ready` condition and version.
//!
//! It implements two design seeds in full: dispatch suspension (`binding.spec.suspension` into
//! `Work.spec.suspendDispatching`; nothing changes in a suspended cluster) and apply-once-only
//! (`--apply-once-only=off|on|force`, overridable per template with the
//! `flotilla.io/apply-once-only` annotation). Its part of failover: the Clusters' taints
//! ([`taints`]: `cluster.karmada.io/not-ready` / `unreachable` from the `Ready` condition, and
//! ClusterTaintPolicies, [`taint_policies`]), and keeping or purging the copies in clusters a
//! binding is evicted from ([`works`]).
//!
//! Pure decisions live in plain modules with exhaustive unit tests:
//! [`naming`] (Work names), [`manifest`] (template to manifest, hashes, revisions), [`works`]
//! (binding to Works, suspension and eviction per cluster, override policies per cluster),
//! [`overrides`] (which override policies render a binding, its `OverridesApplied`
//! condition), [`taints`] (cluster taints from the `Ready` condition and the policies),
//! [`taint_policies`] (ClusterTaintPolicy matching), [`apply_once`] (the apply decision), [`member`]
//! (marks, ownership and conflicts, drift comparison) and [`status`] (aggregation).
//!
//! The I/O around them: [`dispatch`] (binding controller and status aggregation), [`apply`]
//! (per-cluster Work workers: member apply, suspension, deletion), [`namespaces`] (namespace
//! auto-propagation), [`clusters`] (member access, health probe, member watches),
//! [`watches`] (control-plane watches; [`cache`] keeps Works there without their manifests,
//! [`arrivals`] holds a queued Work for its worker), [`server`] (gRPC `Dispatch`), [`service`] (the process),
//! [`kinds`], [`context`] and [`metrics`]; the work queues are `flotilla_runtime::queue`.
//!
//! Contracts with other services are in `docs/architecture.md` ("Objects, names and
//! bookkeeping") and `docs/execution.md`.

pub mod apply;
pub mod apply_once;
pub mod arrivals;
pub mod cache;
pub mod clusters;
pub mod context;
pub mod dispatch;
pub mod error;
pub mod kinds;
pub mod manifest;
pub mod member;
pub mod metrics;
pub mod namespaces;
pub mod naming;
pub mod overrides;
pub mod server;
pub mod service;
pub mod status;
pub mod taint_policies;
pub mod taints;
pub mod watches;
pub mod works;
