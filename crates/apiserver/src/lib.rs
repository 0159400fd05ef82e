//! flotilla-apiserver: a Kubernetes-compatible API server on an embedded durable store.
//!
//! It is the control plane of `flotilla up` and the simulated member clusters, and the server
//! every end-to-end test runs against, so real clients (kubectl, kube-rs, client-go, the
//! Python client) must not be able to tell it from kube-apiserver for what it serves:
//! discovery, OpenAPI v3, built-in resources and CRDs, every verb and patch type, watch with
//! bookmarks and 410s, Table output, garbage collection, namespaces and finalizers.
//!
//! Layout: [`ops`] is the object layer (registry semantics); [`http`] and [`watch`] are the
//! HTTP front end, and [`coalesce`] sends a connection's answers that are ready together in one
//! write; [`auth`], [`clientcert`] and [`serviceaccount`] authenticate, [`impersonation`] acts as others, [`rbac`] and
//! [`requestinfo`] authorize, [`reviews`] answers access reviews and [`audit`] records requests;
//! [`gc`], [`simulate`] and [`rbac::aggregation`] are in-process controllers; [`builtin`],
//! [`crd`], [`admission`], [`table`], [`discovery`] and [`openapi`] describe and check kinds;
//! storage is the `flotilla-store` crate. See `docs/apiserver.md`.

pub mod admission;
pub mod audit;
pub mod auth;
pub mod builtin;
pub mod clientcert;
pub mod coalesce;
pub mod crd;
pub mod discovery;
pub mod errors;
mod fsutil;
pub mod gc;
pub mod http;
pub mod impersonation;
pub mod kubeconfig;
pub mod names;
pub mod objects;
pub mod openapi;
pub mod ops;
pub mod pki;
pub mod protobuf;
mod protobuf_schema;
pub mod rbac;
pub mod requestinfo;
pub mod resources;
pub mod reviews;
pub mod selectors;
pub mod serviceaccount;
pub mod simulate;
pub mod table;
pub mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// Command-line configuration (kube-apiserver-like flag names where it has one).
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "flotilla-apiserver",
    version,
    about = "Kubernetes-compatible API server on an embedded durable store",
    args_override_self = true
)]
pub struct Config {
    /// Directory holding the store, pki/, tokens.csv and the kubeconfig.
    #[arg(long, env = "FLOTILLA_APISERVER_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Address to listen on (port 0 picks a free port; the kubeconfig gets the real one).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Serving certificate (PEM); generated under <data-dir>/pki when not given.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Extra subject alternative names for the generated serving certificate.
    #[arg(long = "tls-san")]
    pub tls_sans: Vec<String>,
    /// Static token file (token,user,uid,"group1,group2"); default <data-dir>/tokens.csv,
    /// created with one random admin token on first start.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Serve requests without credentials as system:anonymous (group system:unauthenticated),
    /// subject to RBAC, which by default lets them reach /healthz, /livez, /readyz and /version
    /// only. `--anonymous-auth=false` answers them 401.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// CA bundle (PEM) client certificates must chain to (CN = user, O = groups); default the
    /// generated CA when the serving certificate is generated, else no client certificates.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// The `iss` of ServiceAccount tokens (and the audience they get by default).
    #[arg(long, default_value = serviceaccount::DEFAULT_ISSUER)]
    pub service_account_issuer: String,
    /// ECDSA P-256 private key (PKCS#8 PEM) that signs ServiceAccount tokens; default
    /// <data-dir>/pki/sa.key, generated on first start.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Audiences a token must carry one of (default: the issuer).
    #[arg(long = "api-audiences", value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// Longest lifetime a TokenRequest gets (e.g. 24h); longer requests are shortened to it.
    #[arg(long, value_parser = parse_duration_flag)]
    pub service_account_max_token_expiration: Option<i64>,
    /// Append one JSON line per request (audit.k8s.io/v1 Event, Metadata level) to this file.
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// Where to write the kubeconfig (default <data-dir>/kubeconfig).
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Context (and cluster/user) name in the kubeconfig.
    #[arg(long, default_value = "flotilla")]
    pub context_name: String,
    /// Revisions kept for watch resumption (older ones get 410 Gone).
    #[arg(long, default_value_t = 100_000)]
    pub watch_window: usize,
    /// Report workload status as if every pod were running and ready (simulated members).
    #[arg(long, default_value_t = false)]
    pub simulate_workloads: bool,
    /// Allow taints with effect NoExecute in ClusterTaintPolicies (karmada-webhook's flag, off
    /// by default as there: such a taint evicts every workload that does not tolerate it).
    #[arg(long, default_value_t = false)]
    pub allow_no_execute_taint_policy: bool,
    /// Exit when standard input reaches end-of-file (lets a parent process, e.g. a test
    /// harness or `flotilla up`, take the server down with it).
    #[arg(long, default_value_t = false)]
    pub exit_on_stdin_eof: bool,
    /// Threads that serve requests: 0 (the default) runs one per core (tokio's multi-thread
    /// runtime); 1 serves every request on the main thread (tokio's current-thread runtime),
    /// which costs the least CPU for a lightly loaded server sharing its cores with others, as
    /// the member API servers of `flotilla up` do (ADR 0032). Store commits run on a thread of
    /// their own either way.
    #[arg(
        long,
        env = "FLOTILLA_APISERVER_WORKER_THREADS",
        default_value_t = 0,
        value_parser = clap::value_parser!(u16).range(0..=1024)
    )]
    pub worker_threads: u16,
    /// Write the store's commits without waiting for `fdatasync` (etcd's flag of the same name).
    /// An acknowledged write still survives the server's `kill -9`, but not a crash of the
    /// machine: for servers whose data costs nothing to lose, such as the simulated members of
    /// `flotilla up` (ADR 0038). Never for a control plane.
    #[arg(long, env = "FLOTILLA_APISERVER_UNSAFE_NO_FSYNC", default_value_t = false)]
    pub unsafe_no_fsync: bool,
    /// Log format: text or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Log level or filter (RUST_LOG syntax).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

fn parse_duration_flag(text: &str) -> Result<i64, String> {
    serviceaccount::parse_duration(text)
}

/// Sets up tracing output.
pub fn init_logging(format: &str, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        let _ = builder.json().try_init();
    } else {
        let _ = builder.try_init();
    }
}

/// A started server.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// Path of the kubeconfig written.
    pub kubeconfig: PathBuf,
    /// The object layer (for in-process use).
    pub api: Arc<ops::Api>,
    shutdown: tokio::sync::watch::Sender<bool>,
    serve: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting, lets in-flight requests finish (watches are closed), closes the store.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.serve.await;
        self.api.store.close();
    }
}

/// Opens the store, prepares TLS and tokens, binds the listener, writes the kubeconfig and
/// starts serving.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let data_dir = config.data_dir.clone();
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating --data-dir {}", data_dir.display()))?;
    let store = flotilla_store::Store::open(
        data_dir.join("store"),
        flotilla_store::StoreOptions {
            window_revisions: config.watch_window.max(1),
            // Versions before the write-ahead log kept the store in this one redb file.
            import_from: Some(data_dir.join("store.redb")),
            fsync: !config.unsafe_no_fsync,
            ..flotilla_store::StoreOptions::default()
        },
    )
    .with_context(|| format!("opening the store in {}", data_dir.display()))?;
    if config.unsafe_no_fsync {
        tracing::warn!(
            data_dir = %data_dir.display(),
            "--unsafe-no-fsync: commits are not synced to disk; a crash of the machine may lose \
             acknowledged writes (a crash of this process does not)"
        );
    }
    let (token_file, create) = match &config.token_auth_file {
        Some(f) => (f.clone(), false),
        None => (data_dir.join("tokens.csv"), true),
    };
    let tokens = auth::Tokens::load_or_create(&token_file, create)?;
    let (cert, key, ca, generated_ca) = match (&config.tls_cert_file, &config.tls_private_key_file) {
        (Some(c), Some(k)) => (c.clone(), k.clone(), c.clone(), None),
        _ => {
            let files = pki::ensure_self_signed(&data_dir.join("pki"), &config.tls_sans)?;
            (files.cert, files.key, files.ca_cert.clone(), Some(files.ca_cert))
        }
    };
    let client_ca = config.client_ca_file.clone().or(generated_ca);
    let tls = pki::server_config(&cert, &key, client_ca.as_deref())?;
    let (sa_key, create_sa_key) = match &config.service_account_signing_key_file {
        Some(f) => (f.clone(), false),
        None => (data_dir.join("pki").join("sa.key"), true),
    };
    if create_sa_key {
        std::fs::create_dir_all(data_dir.join("pki"))
            .with_context(|| format!("creating {}", data_dir.join("pki").display()))?;
    }
    let service_accounts = Arc::new(serviceaccount::Issuer::load_or_create(
        &sa_key,
        create_sa_key,
        &config.service_account_issuer,
        &config.api_audiences,
        config.service_account_max_token_expiration,
    )?);
    let audit = config
        .audit_log_path
        .as_deref()
        .map(audit::AuditLog::open)
        .transpose()?;
    let admission = admission::Options {
        allow_no_execute_taint_policy: config.allow_no_execute_taint_policy,
    };
    let api = ops::Api::with_admission(store, admission)
        .await
        .map_err(|e| anyhow::anyhow!("initializing the API: {e}"))?;
    rbac::bootstrap::ensure(&api)
        .await
        .map_err(|e| anyhow::anyhow!("creating the default RBAC policy: {e}"))?;
    rbac::aggregation::spawn(api.clone());
    gc::spawn(api.clone());
    if config.simulate_workloads {
        simulate::spawn(api.clone());
    }

    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding --listen {}", config.listen))?;
    let addr = listener.local_addr()?;
    let host = match addr.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let address = format!("{host}:{}", addr.port());
    let admin = tokens.admin_token().unwrap_or_default().to_owned();
    let frontend = Arc::new(http::Frontend {
        api: api.clone(),
        authn: auth::Authenticator {
            tokens,
            service_accounts,
            anonymous: config.anonymous_auth,
        },
        audit,
        address: address.clone(),
        openapi: openapi::OpenApi::default(),
    });
    let kubeconfig_path = config
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| data_dir.join("kubeconfig"));
    let ca_pem = std::fs::read(&ca).with_context(|| format!("reading {}", ca.display()))?;
    let contents = kubeconfig::render(
        &format!("https://{address}"),
        &ca_pem,
        &admin,
        &config.context_name,
    );
    kubeconfig::write(&kubeconfig_path, &contents)
        .with_context(|| format!("writing the kubeconfig {}", kubeconfig_path.display()))?;
    tracing::info!(%address, kubeconfig = %kubeconfig_path.display(), revision = api.store.revision(), "flotilla-apiserver serving");

    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let serve = tokio::spawn(accept_loop(listener, tls, frontend, shutdown_rx));
    Ok(Running {
        addr,
        kubeconfig: kubeconfig_path,
        api,
        shutdown: shutdown_tx,
        serve,
    })
}

async fn accept_loop(
    listener: TcpListener,
    tls: pki::ServerTls,
    frontend: Arc<http::Frontend>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config);
    let client_verifier = tls.client_verifier;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let frontend = frontend.clone();
        let watcher = graceful.watcher();
        let client_verifier = client_verifier.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let certificate =
                clientcert::identify(client_verifier.as_ref(), tls.get_ref().1.peer_certificates());
            let connection = Arc::new(http::Connection { peer, certificate });
            let service = hyper::service::service_fn(move |req| {
                http::handle(frontend.clone(), connection.clone(), req)
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(1000);
            let conn =
                builder.serve_connection_with_upgrades(TokioIo::new(coalesce::Coalescing::new(tls)), service);
            let conn = watcher.watch(conn.into_owned());
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    // Watches never finish on their own: give in-flight requests a moment, then drop them.
    let _ = tokio::time::timeout(Duration::from_secs(3), graceful.shutdown()).await;
}

/// Runs until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let stdin_eof = config.exit_on_stdin_eof;
    let running = start(config).await?;
    if stdin_eof {
        tokio::select! {
            _ = wait_for_signal() => {}
            _ = wait_for_stdin_eof() => {}
        }
    } else {
        wait_for_signal().await;
    }
    tracing::info!("shutting down");
    running.shutdown().await;
    Ok(())
}

async fn wait_for_stdin_eof() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        loop {
            match std::io::Read::read(&mut std::io::stdin(), &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.await;
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
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
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
