//! `flotilla-execution`: parses flags and runs the service (see the `flotilla_execution` crate).

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    flotilla_execution::service::run(flotilla_execution::service::Args::parse()).await
}
