//! `flotilla-execution`: parses flags and runs the service (see the `flotilla_execution` crate).

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = flotilla_execution::service::Args::parse();
    flotilla_runtime::block_on(args.threads, flotilla_execution::service::run(args))?
}
