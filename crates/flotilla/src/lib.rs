//! # flotilla (the command line)
//!
//! The `flotilla` binary's logic, as a library so tests drive the same code users run:
//!
//! - [`join`]: register any Kubernetes cluster as a member (`flotilla join` / `flotilla unjoin`);
//! - [`up`]: the whole product on one machine (`flotilla up`), built from [`binaries`] (finding
//!   and building the binaries), [`ports`] (loopback ports kept across restarts),
//!   [`supervisor`] (child processes, restarts, ordered stop), [`setup`] (CRDs and member
//!   registration, shared with the end-to-end harness), [`identities`] (each service's
//!   ServiceAccount, roles and kubeconfig, from `deploy/manifests`, also shared with the
//!   harness), [`kubeconfig`] (one kubeconfig for every server), [`probe`] (readiness) and
//!   [`demo`] (`--demo`);
//! - [`activate`]: roll a pending Lazy policy change out to chosen templates (`flotilla activate`);
//! - [`suspend`]: `flotilla suspend` / `flotilla resume`, editing a policy's dispatch suspension;
//! - [`bench`]: propagation benchmarks (`flotilla bench`) against the embedded installation or
//!   any Karmada-API control plane;
//! - [`soak`]: fault injection (`flotilla soak`): kills, outages, bad input, gRPC abuse.

pub mod activate;
pub mod bench;
pub mod binaries;
pub mod demo;
pub mod identities;
pub mod join;
pub mod kubeconfig;
pub mod ports;
pub mod probe;
pub mod setup;
pub mod soak;
pub mod supervisor;
pub mod suspend;
pub mod up;
