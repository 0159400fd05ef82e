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
//! - [`shutdown_token`]: a cancellation token fired by SIGTERM or SIGINT;
//! - [`ops`]: the HTTP endpoint for Prometheus metrics, liveness and readiness;
//! - [`grpc`]: binding and serving a tonic server with tracing, metrics and health;
//! - [`leader`]: active/standby leader election on a `coordination.k8s.io/v1` Lease;
//! - [`membership`]: replica membership on Leases and ownership of keys, for sharded services;
//! - [`lease`]: the pure decisions behind both (claims, expiry, rendezvous ownership);
//! - [`requests`]: counting the requests each service sends to the control-plane API;
//! - [`lean`]: writes answered with the written object's metadata only;
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
pub mod membership;
pub mod ops;
pub mod packed;
pub mod queue;
pub mod requests;
pub mod transport;
pub mod watch;

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
    /// A server failed.
    #[error("{server} server failed: {message}")]
    Serve {
        /// Which server.
        server: &'static str,
        /// Why.
        message: String,
    },
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
