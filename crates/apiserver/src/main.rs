//! `flotilla-apiserver`: parses flags and runs the server (the logic lives in the library).

use clap::Parser;

// mimalloc: fewer allocator stalls under many small JSON allocations, and freed memory (large
// list responses) goes back to the OS instead of staying in glibc arenas.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The name of the runtime's worker threads (the kernel keeps 15 bytes of it).
const WORKER_THREAD_NAME: &str = "api-worker";

fn main() -> anyhow::Result<()> {
    let config = flotilla_apiserver::Config::parse();
    let mut builder = match config.worker_threads {
        0 => tokio::runtime::Builder::new_multi_thread(),
        1 => tokio::runtime::Builder::new_current_thread(),
        threads => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(usize::from(threads));
            builder
        }
    };
    // Named so that an operator (and the tests) can count them in /proc/<pid>/task/*/comm.
    let runtime = builder
        .thread_name(WORKER_THREAD_NAME)
        .enable_all()
        .build()
        .map_err(|error| {
            anyhow::anyhow!(
                "cannot start the runtime of --worker-threads {}: {error}",
                config.worker_threads
            )
        })?;
    runtime.block_on(async {
        flotilla_apiserver::init_logging(&config.log_format, &config.log_level);
        flotilla_apiserver::run(config).await
    })
}
