//! # flotilla (the command line)
//!
//! The `flotilla` binary's logic, as a library so tests drive the same code users run:
//!
//! - [`join`]: register any Kubernetes cluster as a member (`flotilla join` / `flotilla unjoin`).

pub mod join;
