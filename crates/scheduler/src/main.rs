//! `flotilla-scheduler`: parses flags and runs [`flotilla_scheduler::service`].

// Many small, short-lived JSON allocations across threads: glibc malloc's per-thread arenas
// fragmented (RSS kept growing with the caches); mimalloc returns memory and is faster here
// (see docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;

/// flotilla's scheduler: decides the target clusters of every binding.
#[derive(Parser)]
#[command(name = "flotilla-scheduler", version)]
struct Cli {
    #[command(flatten)]
    service: flotilla_scheduler::service::Args,
    #[command(flatten)]
    log: flotilla_telemetry::LogArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _telemetry = flotilla_telemetry::init("flotilla-scheduler", &cli.log)?;
    let shutdown = flotilla_runtime::shutdown_token();
    flotilla_scheduler::service::run(cli.service, shutdown).await?;
    Ok(())
}
