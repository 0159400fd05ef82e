//! `flotilla-execution`: parses flags and runs the service (see the `flotilla_execution` crate).

use clap::Parser;

// mimalloc (ADR 0030): the services' allocation-heavy paths (JSON, watch events, request
// bodies) cost a fifth less CPU than with glibc's allocator. `main` first makes sure the process
// runs without transparent huge pages, which would make each service 10 to 14 MiB larger.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    flotilla_runtime::memory::start_without_huge_pages();
    let args = flotilla_execution::service::Args::parse();
    flotilla_runtime::block_on(args.threads, flotilla_execution::service::run(args))?
}
