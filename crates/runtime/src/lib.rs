//! # flotilla-runtime
//!
//! The process scaffolding shared by flotilla's service binaries, so each `main.rs` only wires
//! flags to its library:
//!
//! - [`KubeArgs`] and [`kube_client`]: `--kubeconfig`/`--context`, falling back to in-cluster
//!   configuration;
//! - [`transport`]: the control-plane client's HTTP/2 transport (one connection per service);
//! - [`api_probe`]: the `control-plane` readiness check (does the API answer);
//! - [`feature_gates`]: parsing `--feature-gates` (Karmada's `Name=bool,...`);
//! - [`events`]: Kubernetes Events, one per distinct note (kube's recorder folds different notes into one series);
//! - [`ThreadArgs`] and [`block_on`]: `--worker-threads`, the threads a service's tasks run on
//!   (one by default, ADR 0025);
//! - [`shutdown_token`]: a cancellation token fired by SIGTERM or SIGINT;
//! - [`ops`]: the HTTP endpoint for Prometheus metrics, liveness and readiness;
//! - [`grpc`]: binding and serving a tonic server with tracing, metrics and health;
//! - [`leader`]: active/standby leader election on a `coordination.k8s.io/v1` Lease;
//! - [`membership`]: replica membership on Leases and ownership of keys, for sharded services;
//! - [`lease`]: the pure decisions behind both (claims, expiry, rendezvous ownership);
//! - [`requests`]: counting the requests each service sends to the control-plane API;
//! - [`lean`]: writes answered with the written object's metadata only;
//! - [`object`]: reading an object of any kind as a JSON tree without its managedFields;
//! - [`queue`]: the controllers' deduplicating work queue (client-go's workqueue semantics);
//! - [`watch`]: reflector-backed watches feeding the controllers' queues;
//! - [`cache`]: compact watch caches holding a value of the caller's type per object;
//! - [`packed`]: cache records kept as JSON compressed against a dictionary of their kind;
//! - [`intern`]: one shared copy of values many cached objects repeat.

pub mod api_probe;
pub mod cache;
pub mod events;
pub mod feature_gates;
pub mod grpc;
pub mod intern;
pub mod leader;
pub mod lean;
pub mod lease;
mod lz4;
pub mod membership;
pub mod memory;
pub mod object;
pub mod ops;
pub mod packed;
pub mod queue;
pub mod requests;
pub mod transport;
pub mod watch;

use std::future::Future;
use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;

pub use tokio_util::sync::CancellationToken as Shutdown;

/// How a service reaches the control-plane API.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct KubeArgs {
    /// Kubeconfig of the control-plane API. Default: in-cluster configuration, then
    /// `$KUBECONFIG`, then `~/.kube/config`.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig. Default: the current context.
    #[arg(long)]
    pub context: Option<String>,
}

/// Errors setting up a service process.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The kubeconfig could not be read or used.
    #[error("cannot use kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No configuration could be inferred.
    #[error("no Kubernetes configuration found (pass --kubeconfig or run in a cluster): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be built.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    /// The kubeconfig's cluster names a proxy; the services connect directly.
    #[error(
        "cannot use proxy-url {url} of the kubeconfig's cluster: the flotilla services connect to the API server directly; remove proxy-url (kube's client without its proxy features refuses it too)"
    )]
    Proxy {
        /// The configured proxy.
        url: String,
    },
    /// The kubeconfig's `tls-server-name` is not a DNS name or IP address.
    #[error(
        "cannot use tls-server-name {name:?} of the kubeconfig's cluster: {message}; set it to the DNS name or IP address the API server's certificate names"
    )]
    TlsServerName {
        /// The configured name.
        name: String,
        /// Why it is not a server name.
        message: String,
    },
    /// A listener could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The async runtime could not be started.
    #[error(
        "cannot start the service's runtime with --worker-threads {threads}: {source}; lower --worker-threads or raise the process's thread limit"
    )]
    Threads {
        /// The requested worker threads.
        threads: u16,
        /// Why.
        source: std::io::Error,
    },
    /// A server failed.
    #[error("{server} server failed: {message}")]
    Serve {
        /// Which server.
        server: &'static str,
        /// Why.
        message: String,
    },
}

/// The threads a service runs its tasks on (ADR 0025).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct ThreadArgs {
    /// Threads that run the service's tasks. With 1 (the default) every task runs on the main
    /// thread, which measured the least memory (ADR 0025); more threads use more cores.
    #[arg(
        long,
        env = "FLOTILLA_WORKER_THREADS",
        default_value_t = 1,
        value_parser = clap::value_parser!(u16).range(1..=1024)
    )]
    pub worker_threads: u16,
}

impl Default for ThreadArgs {
    fn default() -> Self {
        Self { worker_threads: 1 }
    }
}

/// Runs `future` to completion on a runtime of `args.worker_threads` threads: the calling
/// thread alone for 1 (tokio's current-thread runtime), a multi-thread runtime otherwise. I/O
/// and timers are enabled; blocking work still has tokio's blocking pool.
pub fn block_on<F: Future>(args: ThreadArgs, future: F) -> Result<F::Output, RuntimeError> {
    let mut builder = match args.worker_threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        threads => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(usize::from(threads));
            builder
        }
    };
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|source| RuntimeError::Threads {
            threads: args.worker_threads,
            source,
        })?;
    Ok(runtime.block_on(future))
}

/// The kube client configuration for `args`.
pub async fn kube_config(args: &KubeArgs) -> Result<kube::Config, RuntimeError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|source| RuntimeError::Kubeconfig {
                path: path.display().to_string(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source| RuntimeError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                })
        }
        None => Ok(kube::Config::infer().await?),
    }
}

/// A kube client for `args`, speaking HTTP/2 when the API server offers it ([`transport`]) and
/// counting its requests in `flotilla_control_plane_requests_total` ([`requests`]).
pub async fn kube_client(args: &KubeArgs) -> Result<kube::Client, RuntimeError> {
    let config = kube_config(args).await?;
    requests::register_metrics();
    Ok(transport::client_builder(&config)?
        .with_layer(&requests::count_requests())
        .build())
}

/// A token cancelled when the process receives SIGTERM or SIGINT.
pub fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested");
        trigger.cancel();
    });
    token
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tokio::runtime::{Handle, RuntimeFlavor};

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        threads: ThreadArgs,
    }

    fn parse(args: &[&str]) -> Result<ThreadArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("service").chain(args.iter().copied())).map(|cli| cli.threads)
    }

    #[test]
    fn worker_threads_default_to_one_and_reject_zero() {
        assert_eq!(parse(&[]).unwrap().worker_threads, 1);
        assert_eq!(ThreadArgs::default().worker_threads, 1);
        assert_eq!(parse(&["--worker-threads", "4"]).unwrap().worker_threads, 4);
        for bad in ["0", "-1", "many", "1025"] {
            let error = parse(&[&format!("--worker-threads={bad}")])
                .unwrap_err()
                .to_string();
            assert!(error.contains("--worker-threads"), "{bad}: {error}");
        }
    }

    /// What a service's tasks see on `worker_threads` threads: the runtime's flavour, its
    /// workers, and whether a spawned task ran on the thread that called [`block_on`].
    fn observe(worker_threads: u16) -> (RuntimeFlavor, usize, bool) {
        let caller = std::thread::current().id();
        block_on(ThreadArgs { worker_threads }, async move {
            let handle = Handle::current();
            let spawned = tokio::spawn(async { std::thread::current().id() }).await.unwrap();
            (
                handle.runtime_flavor(),
                handle.metrics().num_workers(),
                spawned == caller,
            )
        })
        .unwrap()
    }

    #[test]
    fn one_worker_thread_runs_every_task_on_the_calling_thread() {
        assert_eq!(observe(1), (RuntimeFlavor::CurrentThread, 1, true));
    }

    #[test]
    fn more_worker_threads_run_a_multi_thread_runtime_of_that_size() {
        assert_eq!(observe(3), (RuntimeFlavor::MultiThread, 3, false));
    }
}
