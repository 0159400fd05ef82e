//! `flotilla-execution`: parses flags and runs the service (see the `flotilla_execution` crate).

use clap::Parser;

// mimalloc, started without transparent huge pages (ADR 0030).
flotilla_runtime::service_allocator!();

fn main() -> anyhow::Result<()> {
    flotilla_runtime::memory::start_without_huge_pages();
    let args = flotilla_execution::service::Args::parse();
    flotilla_runtime::block_on(args.threads, flotilla_execution::service::run(args))?
}
