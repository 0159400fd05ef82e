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
pub mod tools;
pub mod wait;

pub use apiserver::ApiServer;
pub use env::{Env, EnvOptions, Replica, Service};
pub use wait::{eventually, wait_until};

/// A TCP port on loopback that is free now and that no other part of this test process was
/// given. Ports come from below the kernel's ephemeral range, so an outgoing connection (every
/// kube client, every gRPC channel) cannot take one between this call and the child binding it
/// (with `127.0.0.1:0` that race made services fail to start now and then).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = port_range();
    let span = u32::from(high - low);
    // Test processes run one after another, but start each at its own offset anyway.
    let offset = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let port = low + u16::try_from((offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span).unwrap_or(0);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}

/// Ports below the ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), above 10000.
fn port_range() -> (u16, u16) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|v| v.parse::<u16>().ok()))
        .unwrap_or(32768);
    if ephemeral_low > 12000 {
        (10000, ephemeral_low)
    } else {
        // An unusual range: fall back to ports above it.
        (61000, 65000)
    }
}
