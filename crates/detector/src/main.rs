//! `flotilla-detector`: parses flags and runs [`flotilla_detector::run`].

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use flotilla_detector::{Config, ControllerOptions};
use flotilla_runtime::KubeArgs;
use flotilla_telemetry::LogArgs;

// mimalloc, started without transparent huge pages (ADR 0030).
flotilla_runtime::service_allocator!();

/// flotilla's resource detector: matches templates to (Cluster)PropagationPolicies, claims
/// them, writes their bindings and implements lazy activation.
#[derive(Debug, Parser)]
#[command(name = "flotilla-detector", version)]
struct Args {
    #[command(flatten)]
    kube: KubeArgs,
    /// gRPC listen address (health service).
    #[arg(long, default_value = "127.0.0.1:7101")]
    grpc_addr: SocketAddr,
    /// Ops HTTP listen address: /metrics, /healthz, /livez, /readyz.
    #[arg(long, default_value = "127.0.0.1:9101")]
    metrics_addr: SocketAddr,
    /// The scheduler's gRPC address; empty disables the fast-path Schedule call.
    #[arg(long, default_value = "http://127.0.0.1:7102")]
    scheduler_addr: String,
    /// Concurrent template reconciles.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Seconds between full resyncs of every template (a safety net; events drive the work).
    #[arg(long, default_value_t = 600)]
    resync_seconds: u64,
    #[command(flatten)]
    leader_election: flotilla_runtime::leader::LeaderElectArgs,
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    threads: flotilla_runtime::ThreadArgs,
}

fn main() -> anyhow::Result<()> {
    flotilla_runtime::memory::start_without_huge_pages();
    let args = Args::parse();
    flotilla_runtime::block_on(args.threads, run(args))?
}

async fn run(args: Args) -> anyhow::Result<()> {
    let _telemetry = flotilla_telemetry::init("flotilla-detector", &args.log)?;
    let client = flotilla_runtime::kube_client(&args.kube)
        .await
        .context("cannot reach the control-plane API")?;
    let config = Config {
        grpc_addr: args.grpc_addr,
        metrics_addr: args.metrics_addr,
        controller: ControllerOptions {
            scheduler_addr: Some(args.scheduler_addr).filter(|a| !a.is_empty()),
            workers: args.workers,
            resync: Duration::from_secs(args.resync_seconds.max(1)),
            ..ControllerOptions::default()
        },
        leader_election: args.leader_election,
    };
    flotilla_detector::run(client, config, flotilla_runtime::shutdown_token()).await?;
    Ok(())
}
