//! `flotilla-scheduler`: parses flags and runs [`flotilla_scheduler::service`].

use clap::Parser;

// mimalloc, started without transparent huge pages (ADR 0030).
flotilla_runtime::service_allocator!();

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
