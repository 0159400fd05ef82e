//! `flotilla-apiserver`: parses flags and runs the server (the logic lives in the library).

use clap::Parser;

// mimalloc: fewer allocator stalls under many small JSON allocations, and freed memory (large
// list responses) goes back to the OS instead of staying in glibc arenas.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = flotilla_apiserver::Config::parse();
    flotilla_apiserver::init_logging(&config.log_format, &config.log_level);
    flotilla_apiserver::run(config).await
}
