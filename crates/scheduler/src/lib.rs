//! # flotilla-scheduler
//!
//! The scheduling algorithm of flotilla, compatible with Karmada's: given a binding's placement,
//! its replica count, the registered member clusters and the previous result, decide which
//! clusters the binding goes to and how many replicas each runs. Pure functions over plain
//! data. Around them, the `flotilla-scheduler` service (see [the service modules](#the-service))
//! schedules every binding in the control plane.
//!
//! ```
//! use flotilla_api::Placement;
//! use flotilla_api::policy::{ReplicaSchedulingStrategy, ReplicaSchedulingType};
//! use flotilla_scheduler::{ClusterView, ScheduleInput, schedule};
//!
//! let clusters = [ClusterView::new("member1"), ClusterView::new("member2")];
//! let placement = Placement {
//!     replica_scheduling: Some(ReplicaSchedulingStrategy {
//!         replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let result = schedule(&ScheduleInput::new(&placement, 3, &clusters)).unwrap();
//! let replicas: Vec<i32> = result.clusters.iter().map(|t| t.replicas).collect();
//! assert_eq!(replicas, vec![2, 1]);
//! ```
//!
//! The pipeline, each step in its own module (the module docs name the Karmada source of every
//! rule):
//!
//! 1. filtering (`filter.rs`, matching in `affinity.rs`) — clusters that can take the binding at
//!    all: cluster affinity, taints and tolerations (a cluster that is not ready counts as
//!    tainted `cluster.karmada.io/not-ready:NoSchedule`), API enablement, spread fields;
//!    clusters being deleted, and clusters the binding is being evicted from, never. When none is left, the error reads like Karmada's: `0/3
//!    clusters are available: 1 cluster(s) did not match the placement cluster affinity
//!    constraint, 2 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}.`
//! 2. selection (`placement.rs`) — which of them, honouring spread constraints and preferring
//!    clusters that already hold the binding;
//! 3. division (`division.rs`, `webster.rs`) — replicas per cluster: duplicated, static weights
//!    (Webster method), dynamic weights or aggregated, adjusting the previous result rather
//!    than starting over.
//!
//! `clusterAffinities` groups are tried in order from the one the previous result used
//! (`schedule.rs`). Karmada's defaults for an unset replica strategy, division preference and
//! spread constraint are applied here (`strategy.rs`), so a placement straight from the API
//! schedules as it would in Karmada. [`union_clusters`] gives attached (dependency) bindings
//! their clusters.
//!
//! ## Where flotilla differs from Karmada
//!
//! - No capacity information: every cluster is taken to hold all replicas (as Karmada without
//!   any replica estimator answering). Dynamic weights are therefore equal, and `Aggregated`
//!   packs replicas onto as few clusters as possible, preferring those that already run some.
//! - Filters run in a fixed order (affinity, taints, API enablement, spread fields), so the
//!   reason reported for a cluster failing several is stable; clusters being deleted are
//!   counted in the message as `cluster(s) were being deleted`.
//! - A cluster that reports no API list is not filtered by API enablement.
//! - `replicas == 0` always propagates to every selected cluster with 0 replicas, so a workload
//!   scaled to zero stays on its clusters (Karmada's `--enable-empty-workload-propagation`).
//! - `maxGroups` unset means unbounded (Karmada selects no cluster at all).
//! - Spreading by `zone`, `provider` or a label groups clusters the way Karmada spreads by
//!   region (Karmada's selection only implements region and cluster, and rejects or ignores the
//!   others); when several are given, region wins, then zone, provider, label.
//! - The exhaustive search over combinations of regions is capped; past the cap a greedy
//!   choice is made instead of stalling.
//! - Spread and strategy failures are reported as `Unschedulable` (Karmada: `SchedulerError`).
//! - Overflow affinities (`clusterAffinities[].overflowAffinities`, a recent Karmada addition)
//!   are ignored.
//! - Webster priorities are compared exactly in integers (Karmada: `float64`).
//!
//! ## The service
//!
//! `flotilla-scheduler` is stateless; any number of replicas serve `Schedule` behind one
//! address. Each watches ResourceBindings, ClusterResourceBindings and Clusters and reconciles
//! every binding whenever it or the cluster inventory changes; a binding's result is
//! recomputed in memory and written only when it differs.
//!
//! - [`decision`] — what to write for one binding, without I/O: the clusters (attached bindings
//!   follow their `requiredBy`), the eviction tasks, the status, the patches;
//! - [`failover`] — Karmada's cluster failover (taint manager), application failover and
//!   graceful eviction as one pure decision: which clusters a binding is evicted from, which of
//!   its `gracefulEvictionTasks` end (`docs/failover.md`);
//! - [`reconcile`] — reading, deciding and writing one binding with resourceVersion
//!   preconditions, retrying on conflicts, so concurrent replicas agree; [`attempts`] — one
//!   attempt per binding at a time in a process, watch copies older than what it wrote skipped;
//! - [`controller`] — the watches; [`inventory`] — the clusters as the algorithm sees them;
//! - [`grpc`] — the `Schedule` handler; [`peers`] — `Dispatch` and `SyncDependencies` after a new
//!   result; [`metrics`]; [`service`] — flags and wiring; [`binding`] — the two binding kinds.

mod affinity;
mod attached;
mod cluster;
mod division;
mod error;
mod filter;
mod placement;
mod schedule;
mod strategy;
mod webster;

pub mod attempts;
pub mod binding;
pub mod controller;
pub mod decision;
pub mod failover;
pub mod grpc;
pub mod inventory;
pub mod metrics;
pub mod peers;
pub mod reconcile;
pub mod service;

pub use affinity::{cluster_matches, label_selector_matches};
pub use attached::union_clusters;
pub use cluster::{ApiKind, ClusterView, NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY};
pub use error::{ScheduleError, ScheduleErrorReason};
pub use failover::{FailoverOptions, TaintVerdict, taint_verdict};
pub use schedule::{ScheduleInput, ScheduleResult, schedule};
pub use webster::{TieBreak, allocate};
