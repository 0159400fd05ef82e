//! `flotilla-dependency-distributor`: parses flags and runs the service (see the library).

use clap::Parser;
use flotilla_dependency_distributor::{Args, run};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    run(args).await?;
    Ok(())
}
