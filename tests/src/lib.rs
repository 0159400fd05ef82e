//! # flotilla-e2e
//!
//! The harness every end-to-end test uses: it builds the workspace's binaries once, starts real
//! `flotilla-apiserver` processes (a control plane and members) and real service binaries on
//! loopback, registers members, and hands out real kube clients. Nothing is mocked.
//!
//! - [`binaries`]: building and locating the binaries;
//! - [`process`]: a child process with captured logs, SIGKILL/SIGTERM and restart;
//! - [`apiserver`]: one flotilla-apiserver on its own data dir;
//! - [`env`]: a whole installation (control plane, members, services);
//! - [`wait`]: waiting on conditions with a deadline (never fixed sleeps);
//! - [`fixtures`]: applying YAML like `kubectl apply --server-side`, templates, member reads.

pub mod apiserver;
pub mod binaries;
pub mod env;
pub mod fixtures;
pub mod process;
pub mod wait;

pub use apiserver::ApiServer;
pub use env::{Env, EnvOptions, Replica, Service};
pub use wait::{eventually, wait_until};

/// A free TCP port on loopback (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}
