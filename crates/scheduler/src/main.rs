//! `flotilla-scheduler`: parses flags and runs [`flotilla_scheduler::service`].

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
