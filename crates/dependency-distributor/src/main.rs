//! `flotilla-dependency-distributor`: parses flags and runs the service (see the library).

use clap::Parser;
use flotilla_dependency_distributor::{Args, run};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    flotilla_runtime::block_on(args.threads, run(args))??;
    Ok(())
}
