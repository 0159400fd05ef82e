//! `flotilla-dependency-distributor`: parses flags and runs the service (see the library).

// Many small, short-lived JSON allocations across threads: glibc malloc's per-thread arenas
// fragmented (RSS kept growing with the caches); mimalloc returns memory and is faster here
// (see docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use flotilla_dependency_distributor::{Args, run};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    run(args).await?;
    Ok(())
}
