//! `flotilla-execution`: parses flags and runs the service (see the `flotilla_execution` crate).

// Many small, short-lived JSON allocations across threads: glibc malloc's per-thread arenas
// fragmented (RSS kept growing with the caches); mimalloc returns memory and is faster here
// (see docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    flotilla_execution::service::run(flotilla_execution::service::Args::parse()).await
}
