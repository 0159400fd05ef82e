//! `flotilla-scheduler`: parses flags and runs [`flotilla_scheduler::service`].

use clap::Parser;

// mimalloc (ADR 0030): the services' allocation-heavy paths (JSON, watch events, request
// bodies) cost a fifth less CPU than with glibc's allocator. `main` first makes sure the process
// runs without transparent huge pages, which would make each service 10 to 14 MiB larger.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// flotilla's scheduler: decides the target clusters of every binding.
#[derive(Parser)]
#[command(name = "flotilla-scheduler", version)]
struct Cli {
    #[command(flatten)]
    service: flotilla_scheduler::service::Args,
    #[command(flatten)]
    log: flotilla_telemetry::LogArgs,
    #[command(flatten)]
    threads: flotilla_runtime::ThreadArgs,
}

fn main() -> anyhow::Result<()> {
    flotilla_runtime::memory::start_without_huge_pages();
    let cli = Cli::parse();
    flotilla_runtime::block_on(cli.threads, async move {
        let _telemetry = flotilla_telemetry::init("flotilla-scheduler", &cli.log)?;
        let shutdown = flotilla_runtime::shutdown_token();
        flotilla_scheduler::service::run(cli.service, shutdown).await?;
        Ok(())
    })?
}
