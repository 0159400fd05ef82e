//! `flotilla-dependency-distributor`: parses flags and runs the service (see the library).

use clap::Parser;
use flotilla_dependency_distributor::{Args, run};

// mimalloc, started without transparent huge pages (ADR 0030).
flotilla_runtime::service_allocator!();

fn main() -> anyhow::Result<()> {
    flotilla_runtime::memory::start_without_huge_pages();
    let args = Args::parse();
    flotilla_runtime::block_on(args.threads, run(args))??;
    Ok(())
}
