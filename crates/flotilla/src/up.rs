//! `flotilla up`: the whole product on one machine. A control-plane flotilla-apiserver, N
//! member flotilla-apiservers (simulating workloads) registered as Clusters `member1..N`, the
//! CRDs, and the service binaries as supervised child processes; one kubeconfig with a context
//! per server. Everything lives in the data dir, so running it again resumes the same state.
//!
//! Layout of the data dir:
//!
//! ```text
//! DIR/kubeconfig            contexts control-plane (current), member1..N
//! DIR/ports.json            the loopback ports, kept across restarts
//! DIR/<server>/             each API server's data and its own kubeconfig
//! DIR/control-plane/<service>.kubeconfig
//!                           each service's kubeconfig: a token of its own ServiceAccount
//! DIR/logs/<child>.log      each child's output
//! DIR/run/<child>.pid       pids of running children (and flotilla-up.pid)
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::binaries::{self, BinariesError};
use crate::identities::IdentityError;
use crate::join::JoinOptions;
use crate::kubeconfig::KubeconfigError;
use crate::ports::{self, Ports, PortsError};
use crate::probe;
use crate::setup::{self, SetupError};
use crate::supervisor::{ChildSpec, Event, Policy, Supervisor, SupervisorError};

/// The control plane's name (its context and data sub-directory).
pub const CONTROL_PLANE: &str = "control-plane";
/// What `flotilla up` prints once every component is healthy.
pub const READY_LINE: &str = "flotilla is ready";
/// How long an API server may take to become ready.
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a service may take to become ready.
const SERVICE_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// `--apply-once-only` of flotilla-execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ApplyOnceOnly {
    /// Member objects follow the template continuously.
    #[default]
    Off,
    /// Apply once per template revision; drift in members is left alone.
    On,
    /// Like `on`, and also for templates that opt out by annotation.
    Force,
}

impl ApplyOnceOnly {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Force => "force",
        }
    }
}

/// What `flotilla up` starts.
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// Number of member clusters.
    pub members: usize,
    /// The data dir.
    pub data_dir: PathBuf,
    /// Where the binaries are; default: next to the running `flotilla`.
    pub bin_dir: Option<PathBuf>,
    /// Passed to flotilla-execution.
    pub apply_once_only: ApplyOnceOnly,
    /// Apply the demo and show it arriving.
    pub demo: bool,
    /// `--log-level` of every child.
    pub log_level: String,
    /// Passed to the control-plane flotilla-apiserver: accept ClusterTaintPolicies with
    /// `NoExecute` taints.
    pub allow_no_execute_taint_policy: bool,
}

/// Errors of `flotilla up`.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    /// The data dir cannot be used.
    #[error("cannot use data dir {path}: {source}")]
    DataDir {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Another `flotilla up` runs on the same data dir.
    #[error("another flotilla up (pid {pid}) is running on {path}; stop it first")]
    AlreadyRunning {
        /// Its pid.
        pid: i32,
        /// The data dir.
        path: String,
    },
    /// At least one member is needed.
    #[error("--members must be at least 1")]
    NoMembers,
    /// Building or finding binaries failed.
    #[error(transparent)]
    Binaries(#[from] BinariesError),
    /// Ports could not be assigned.
    #[error(transparent)]
    Ports(#[from] PortsError),
    /// A child could not be started.
    #[error(transparent)]
    Supervisor(#[from] SupervisorError),
    /// A component did not become ready.
    #[error("{component} did not become ready within {waited:?}; last lines of {log}:\n{tail}")]
    NotReady {
        /// The component.
        component: String,
        /// How long we waited.
        waited: Duration,
        /// Its log file.
        log: String,
        /// The end of its log.
        tail: String,
    },
    /// A kubeconfig could not be used.
    #[error("cannot build a client from {path}")]
    Client {
        /// The kubeconfig.
        path: String,
    },
    /// CRDs or members could not be set up.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The merged kubeconfig could not be written.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// The services' ServiceAccounts, roles or kubeconfigs could not be set up.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Interrupted while starting.
    #[error("interrupted while starting; every component was stopped")]
    Interrupted,
}

/// A service binary and its peers, as the service contract defines them.
#[derive(Clone, Debug)]
pub(crate) struct ServiceSpec {
    pub(crate) binary: &'static str,
    /// (flag, peer binary).
    peers: &'static [(&'static str, &'static str)],
}

pub(crate) const SERVICES: [ServiceSpec; 4] = [
    ServiceSpec {
        binary: binaries::DETECTOR,
        peers: &[("--scheduler-addr", binaries::SCHEDULER)],
    },
    ServiceSpec {
        binary: binaries::SCHEDULER,
        peers: &[
            ("--execution-addr", binaries::EXECUTION),
            ("--dependency-distributor-addr", binaries::DEPENDENCY_DISTRIBUTOR),
        ],
    },
    ServiceSpec {
        binary: binaries::DEPENDENCY_DISTRIBUTOR,
        peers: &[("--scheduler-addr", binaries::SCHEDULER)],
    },
    ServiceSpec {
        binary: binaries::EXECUTION,
        peers: &[],
    },
];

/// The paths of an installation in a data dir.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The data dir (absolute).
    pub root: PathBuf,
}

impl Layout {
    /// The merged kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }
    /// The ports record.
    pub fn ports(&self) -> PathBuf {
        self.root.join("ports.json")
    }
    /// Child logs.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// Pid files.
    pub fn run(&self) -> PathBuf {
        self.root.join("run")
    }
    /// An API server's data dir.
    pub fn server_dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    /// The kubeconfig an API server writes.
    pub fn server_kubeconfig(&self, name: &str) -> PathBuf {
        self.server_dir(name).join("kubeconfig")
    }
    /// The kubeconfig of service `binary`: a token of its own ServiceAccount on the control
    /// plane.
    pub fn service_kubeconfig(&self, binary: &str) -> PathBuf {
        crate::identities::kubeconfig_path(&self.server_dir(CONTROL_PLANE), binary)
    }
}

/// The member names for `count` members.
pub fn member_names(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("member{i}")).collect()
}

/// The command line of API server `name` on `port`.
pub fn apiserver_args(layout: &Layout, name: &str, port: u16, member: bool) -> Vec<String> {
    let mut args = vec![
        "--data-dir".to_owned(),
        layout.server_dir(name).display().to_string(),
        "--listen".to_owned(),
        format!("127.0.0.1:{port}"),
        "--kubeconfig-out".to_owned(),
        layout.server_kubeconfig(name).display().to_string(),
        "--context-name".to_owned(),
        name.to_owned(),
    ];
    if member {
        args.push("--simulate-workloads".to_owned());
    }
    args
}

/// The environment an API server gets beyond flotilla's own (`member`: a member cluster's
/// rather than the control plane's): a member serves one execution and its own workload
/// simulation, and on one thread costs the least CPU beside the other servers on the machine
/// (ADR 0032); its store does not wait for `fdatasync`, as a simulated cluster's data is worth
/// less than the machine time (a member keeps what it acknowledged through its own `kill -9`,
/// not through a crash of the machine; ADR 0038). The control plane keeps both defaults. Given
/// as the environment, not as flags, so a `flotilla bench --baseline-bin-dir` of an API server
/// older than the flags still starts.
pub fn apiserver_env(member: bool) -> Vec<(String, String)> {
    if member {
        vec![
            ("FLOTILLA_APISERVER_WORKER_THREADS".to_owned(), "1".to_owned()),
            ("FLOTILLA_APISERVER_UNSAFE_NO_FSYNC".to_owned(), "true".to_owned()),
        ]
    } else {
        Vec::new()
    }
}

/// The command line of service `binary`, following the service contract.
fn service_args(layout: &Layout, service: &ServiceSpec, ports: &Ports, options: &UpOptions) -> Vec<String> {
    let own = ports.services.get(service.binary);
    let mut args = vec![
        "--kubeconfig".to_owned(),
        layout.service_kubeconfig(service.binary).display().to_string(),
        "--grpc-addr".to_owned(),
        format!("127.0.0.1:{}", own.map(|p| p.grpc).unwrap_or_default()),
        "--metrics-addr".to_owned(),
        format!("127.0.0.1:{}", own.map(|p| p.metrics).unwrap_or_default()),
        "--log-level".to_owned(),
        options.log_level.clone(),
    ];
    for (flag, peer) in service.peers {
        args.push((*flag).to_owned());
        // An empty address tells the service the peer does not run (it then never calls it).
        args.push(
            ports
                .services
                .get(*peer)
                .map(|p| format!("http://127.0.0.1:{}", p.grpc))
                .unwrap_or_default(),
        );
    }
    if service.binary == binaries::EXECUTION {
        args.push("--apply-once-only".to_owned());
        args.push(options.apply_once_only.as_str().to_owned());
    }
    args
}

/// Whether progress lines go to stderr (`flotilla bench --json` keeps stdout for the report).
static PROGRESS_ON_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sends the start-up progress lines to stderr instead of stdout.
pub fn progress_on_stderr() {
    PROGRESS_ON_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn step(text: &str) {
    use std::io::Write;
    if PROGRESS_ON_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{text}");
    } else {
        println!("{text}");
        let _ = std::io::stdout().flush();
    }
}

/// Runs `flotilla up` until `shutdown` is cancelled (SIGINT/SIGTERM), then stops every child.
pub async fn up(options: UpOptions, shutdown: CancellationToken) -> Result<(), UpError> {
    if options.members == 0 {
        return Err(UpError::NoMembers);
    }
    let layout = prepare_data_dir(&options.data_dir)?;
    let lock = lock(&layout).await?;
    step(&format!(
        "flotilla up: {} member(s), data in {}",
        options.members,
        layout.root.display()
    ));

    let bin_dir = match &options.bin_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let services = select_services(&options, &bin_dir)?;
    let apiserver = binaries::locate(&bin_dir, binaries::APISERVER)?;

    let program_of = |name: &str| -> Option<PathBuf> {
        if name == CONTROL_PLANE || name.starts_with("member") {
            Some(apiserver.clone())
        } else if name.starts_with("flotilla-") && name != "flotilla-up" {
            Some(bin_dir.join(name))
        } else {
            None
        }
    };
    let reaped = crate::supervisor::reap_stale(&layout.run(), program_of).await;
    if !reaped.is_empty() {
        step(&format!(
            "stopped processes a previous flotilla up left running: {}",
            reaped.join(", ")
        ));
    }
    // The reaper removes every pid file, ours included.
    lock.write()?;

    let members = member_names(options.members);
    let mut servers = vec![CONTROL_PLANE.to_owned()];
    servers.extend(members.iter().cloned());
    let service_names: Vec<String> = services.iter().map(|s| s.binary.to_owned()).collect();
    let recorded = ports::load(&layout.ports())?;
    let assignment = ports::assign(
        &recorded,
        &servers,
        &service_names,
        ports::port_is_free,
        ports::free_port,
    )?;
    for (component, old, new) in &assignment.moved {
        step(&format!(
            "warning: port {old} of {component} is in use by another process; using {new}"
        ));
    }
    let ports = assignment.ports;
    ports::save(&layout.ports(), &ports)?;

    let (mut supervisor, events) = Supervisor::new(&layout.logs(), &layout.run(), Policy::default());
    let reporter = tokio::spawn(report_events(events));
    let started = {
        let run = start(
            &layout,
            &options,
            &ports,
            &servers,
            &services,
            &apiserver,
            &bin_dir,
            &mut supervisor,
        );
        tokio::select! {
            result = run => result,
            () = shutdown.cancelled() => Err(UpError::Interrupted),
        }
    };
    let result = match started {
        Ok(()) => {
            print_ready(&layout, &members);
            if options.demo {
                tokio::spawn(run_demo(layout.clone(), members.clone()));
            }
            shutdown.cancelled().await;
            step("stopping (services first, then API servers) ...");
            Ok(())
        }
        Err(error) => Err(error),
    };
    supervisor.stop_all(&service_names).await;
    drop(supervisor);
    let _ = reporter.await;
    lock.release();
    if result.is_ok() {
        step("flotilla stopped");
    }
    result
}

/// The services to run (all four); in a workspace checkout, builds those of them (and the API
/// server) that are older than their sources first.
pub(crate) fn select_services(options: &UpOptions, bin_dir: &Path) -> Result<Vec<ServiceSpec>, UpError> {
    let checkout = options
        .bin_dir
        .is_none()
        .then(binaries::current_checkout)
        .flatten();
    let services: Vec<ServiceSpec> = SERVICES.to_vec();
    if let Some(checkout) = &checkout {
        let mut packages = vec![binaries::APISERVER];
        packages.extend(services.iter().map(|s| s.binary));
        if let Some(missing) = packages.iter().find(|p| !checkout.has_package(p)) {
            return Err(BinariesError::NotInWorkspace {
                package: (*missing).to_owned(),
                root: checkout.root.display().to_string(),
            }
            .into());
        }
        // Cargo's own no-op check reads hundreds of fingerprints; a binary newer than every
        // file it is built from needs no build at all.
        let stale = match binaries::SourceGraph::of_workspace(&checkout.root) {
            Some(graph) => binaries::stale(&graph, bin_dir, &packages),
            None => packages.clone(),
        };
        if stale.is_empty() {
            step("binaries are up to date (newer than their sources); not building");
        } else {
            step(&format!(
                "building {} ({} profile) ...",
                stale.join(", "),
                checkout.profile
            ));
            let started = Instant::now();
            binaries::build(checkout, &stale)?;
            step(&format!("built in {:.1}s", started.elapsed().as_secs_f64()));
        }
    }
    for service in &services {
        binaries::locate(bin_dir, service.binary)?;
    }
    Ok(services)
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn start(
    layout: &Layout,
    options: &UpOptions,
    ports: &Ports,
    servers: &[String],
    services: &[ServiceSpec],
    apiserver: &Path,
    bin_dir: &Path,
    supervisor: &mut Supervisor,
) -> Result<(), UpError> {
    step(&format!("starting API servers: {} ...", servers.join(", ")));
    for name in servers {
        let port = ports.apiservers.get(name).copied().unwrap_or_default();
        std::fs::create_dir_all(layout.server_dir(name)).map_err(|source| UpError::DataDir {
            path: layout.server_dir(name).display().to_string(),
            source,
        })?;
        supervisor.start(ChildSpec {
            name: name.clone(),
            program: apiserver.to_path_buf(),
            args: {
                let mut args = apiserver_args(layout, name, port, name != CONTROL_PLANE);
                if name == CONTROL_PLANE && options.allow_no_execute_taint_policy {
                    args.push("--allow-no-execute-taint-policy".to_owned());
                }
                args
            },
            env: apiserver_env(name != CONTROL_PLANE),
        })?;
    }
    for name in servers {
        let began = Instant::now();
        wait_apiserver(layout, name, supervisor).await?;
        step(&format!(
            "  {name} is ready on 127.0.0.1:{} ({:.1}s)",
            ports.apiservers.get(name).copied().unwrap_or_default(),
            began.elapsed().as_secs_f64()
        ));
    }

    let control_plane = probe::client_from(&layout.server_kubeconfig(CONTROL_PLANE), None)
        .await
        .ok_or_else(|| UpError::Client {
            path: layout.server_kubeconfig(CONTROL_PLANE).display().to_string(),
        })?;
    step("installing CRDs ...");
    setup::install_crds(&control_plane, Duration::from_secs(30)).await?;
    step("registering members ...");
    for name in servers.iter().filter(|n| *n != CONTROL_PLANE) {
        setup::register_member(
            &control_plane,
            name,
            &layout.server_kubeconfig(name),
            &JoinOptions::default(),
        )
        .await?;
        step(&format!("  Cluster {name} registered"));
    }
    let contexts: Vec<(String, PathBuf)> = servers
        .iter()
        .map(|name| (name.clone(), layout.server_kubeconfig(name)))
        .collect();
    crate::kubeconfig::write_merged(&contexts, &layout.kubeconfig())?;

    let names: Vec<&str> = services.iter().map(|s| s.binary).collect();
    step("giving each service its ServiceAccount, roles and kubeconfig ...");
    crate::identities::install_all(
        &control_plane,
        &layout.server_kubeconfig(CONTROL_PLANE),
        &names,
        &layout.server_dir(CONTROL_PLANE),
    )
    .await?;
    step(&format!("starting services: {} ...", names.join(", ")));
    for service in services {
        supervisor.start(ChildSpec {
            name: service.binary.to_owned(),
            program: bin_dir.join(service.binary),
            args: service_args(layout, service, ports, options),
            env: vec![],
        })?;
    }
    for service in services {
        let began = Instant::now();
        let address = format!(
            "127.0.0.1:{}",
            ports
                .services
                .get(service.binary)
                .map(|p| p.metrics)
                .unwrap_or_default()
        );
        wait_for(service.binary, SERVICE_READY_TIMEOUT, supervisor, || {
            let address = address.clone();
            async move { probe::service_ready(&address).await }
        })
        .await?;
        step(&format!(
            "  {} is ready ({:.1}s)",
            service.binary,
            began.elapsed().as_secs_f64()
        ));
    }
    Ok(())
}

async fn wait_apiserver(layout: &Layout, name: &str, supervisor: &Supervisor) -> Result<(), UpError> {
    let kubeconfig = layout.server_kubeconfig(name);
    wait_for(name, APISERVER_READY_TIMEOUT, supervisor, || {
        let kubeconfig = kubeconfig.clone();
        async move {
            match probe::client_from(&kubeconfig, None).await {
                Some(client) => probe::apiserver_ready(&client).await,
                None => false,
            }
        }
    })
    .await
}

async fn wait_for<F, Fut>(
    name: &str,
    timeout: Duration,
    supervisor: &Supervisor,
    mut ready: F,
) -> Result<(), UpError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(20);
    loop {
        if ready().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let log = supervisor.log_path(name);
            return Err(UpError::NotReady {
                component: name.to_owned(),
                waited: timeout,
                tail: tail(&log, 20),
                log: log.display().to_string(),
            });
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn print_ready(layout: &Layout, members: &[String]) {
    let kubeconfig = layout.kubeconfig();
    step(READY_LINE);
    step("");
    step(&format!("  export KUBECONFIG={}", kubeconfig.display()));
    step("");
    step("next steps:");
    step("  kubectl get clusters                      # the members, Ready");
    step("  kubectl apply -f <deployment and PropagationPolicy>");
    step("  kubectl get rb,works -A                   # bindings and works");
    if let Some(first) = members.first() {
        step(&format!(
            "  kubectl --context {first} get deploy -A    # what arrived in {first}"
        ));
    }
    step(&format!("logs: {}   stop: Ctrl-C", layout.logs().display()));
}

async fn run_demo(layout: Layout, members: Vec<String>) {
    let Some(client) = probe::client_from(&layout.kubeconfig(), Some(CONTROL_PLANE)).await else {
        step("demo: cannot build a control-plane client; skipped");
        return;
    };
    step(
        "demo: applying Deployment default/nginx, ConfigMap default/nginx-config and PropagationPolicy default/nginx-propagation ...",
    );
    if let Err(error) = crate::demo::apply(&client, &members).await {
        step(&format!("demo: cannot apply the example: {error}"));
        return;
    }
    let mut clients = Vec::new();
    for name in &members {
        match probe::client_from(&layout.kubeconfig(), Some(name)).await {
            Some(client) => clients.push((name.clone(), client)),
            None => step(&format!("demo: cannot build a client for {name}")),
        }
    }
    crate::demo::show_arrival(&clients, Duration::from_secs(120)).await;
}

/// Prints what happens to children after start-up: unexpected exits and restarts.
async fn report_events(mut events: mpsc::UnboundedReceiver<Event>) {
    let mut restarting = std::collections::BTreeSet::new();
    while let Some(event) = events.recv().await {
        match event {
            Event::Exited {
                name,
                status,
                backoff,
                restarts,
            } => {
                step(&format!(
                    "{name} exited unexpectedly ({status}); restarting in {backoff:?} (restart {restarts})"
                ));
                restarting.insert(name);
            }
            Event::Started { name, pid } if restarting.remove(&name) => {
                step(&format!("{name} restarted (pid {pid})"));
            }
            Event::SpawnFailed { name, error, backoff } => {
                step(&format!(
                    "{name} could not be restarted: {error}; next attempt in {backoff:?}"
                ));
            }
            Event::Stopped { name, killed: true } => {
                step(&format!("{name} did not stop in time and was killed"));
            }
            Event::Started { .. } | Event::Stopped { .. } => {}
        }
    }
}

pub(crate) fn prepare_data_dir(dir: &Path) -> Result<Layout, UpError> {
    let error = |source| UpError::DataDir {
        path: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(error)?;
    let root = dir.canonicalize().map_err(error)?;
    let layout = Layout { root };
    for sub in [layout.logs(), layout.run()] {
        std::fs::create_dir_all(&sub).map_err(error)?;
    }
    Ok(layout)
}

/// `run/flotilla-up.pid`: one `flotilla up` per data dir.
struct Lock {
    path: PathBuf,
}

async fn lock(layout: &Layout) -> Result<Lock, UpError> {
    let path = layout.run().join("flotilla-up.pid");
    if let Some(pid) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    {
        let ours = i32::try_from(std::process::id()).unwrap_or_default();
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let alive_flotilla = exe.is_some_and(|e| {
            e.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("flotilla"))
        });
        if pid != ours && alive_flotilla {
            return Err(UpError::AlreadyRunning {
                pid,
                path: layout.root.display().to_string(),
            });
        }
    }
    let lock = Lock { path };
    lock.write()?;
    Ok(lock)
}

impl Lock {
    fn write(&self) -> Result<(), UpError> {
        std::fs::write(&self.path, format!("{}\n", std::process::id())).map_err(|source| UpError::DataDir {
            path: self.path.display().to_string(),
            source,
        })
    }

    fn release(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::ServicePorts;

    fn layout() -> Layout {
        Layout {
            root: PathBuf::from("/data"),
        }
    }

    fn ports() -> Ports {
        let service = |grpc, metrics| ServicePorts { grpc, metrics };
        Ports {
            apiservers: [("control-plane".to_owned(), 7000)].into(),
            services: [
                (binaries::DETECTOR.to_owned(), service(7101, 9101)),
                (binaries::SCHEDULER.to_owned(), service(7102, 9102)),
                (binaries::EXECUTION.to_owned(), service(7104, 9104)),
            ]
            .into(),
        }
    }

    fn options() -> UpOptions {
        UpOptions {
            members: 2,
            data_dir: PathBuf::from("/data"),
            bin_dir: None,
            apply_once_only: ApplyOnceOnly::On,
            demo: false,
            log_level: "info".to_owned(),
            allow_no_execute_taint_policy: false,
        }
    }

    #[test]
    fn apiservers_follow_the_documented_command_line() {
        let args = apiserver_args(&layout(), "member1", 7001, true);
        assert_eq!(
            args.join(" "),
            "--data-dir /data/member1 --listen 127.0.0.1:7001 --kubeconfig-out /data/member1/kubeconfig \
             --context-name member1 --simulate-workloads"
        );
        let args = apiserver_args(&layout(), CONTROL_PLANE, 7000, false);
        assert!(!args.contains(&"--simulate-workloads".to_owned()));
        // Members on one thread and without fdatasync; the control plane keeps a thread per
        // core and synced commits.
        assert_eq!(
            apiserver_env(true),
            [
                ("FLOTILLA_APISERVER_WORKER_THREADS".to_owned(), "1".to_owned()),
                ("FLOTILLA_APISERVER_UNSAFE_NO_FSYNC".to_owned(), "true".to_owned()),
            ]
        );
        assert!(apiserver_env(false).is_empty());
    }

    #[test]
    fn services_follow_the_service_contract() {
        let scheduler = &SERVICES[1];
        let args = service_args(&layout(), scheduler, &ports(), &options());
        assert_eq!(
            args,
            [
                "--kubeconfig",
                "/data/control-plane/flotilla-scheduler.kubeconfig",
                "--grpc-addr",
                "127.0.0.1:7102",
                "--metrics-addr",
                "127.0.0.1:9102",
                "--log-level",
                "info",
                "--execution-addr",
                "http://127.0.0.1:7104",
                "--dependency-distributor-addr",
                "",
            ],
            "a peer that does not run gets an empty address"
        );
        let execution = &SERVICES[3];
        let args = service_args(&layout(), execution, &ports(), &options()).join(" ");
        assert!(args.ends_with("--apply-once-only on"), "{args}");
        let detector = &SERVICES[0];
        let args = service_args(&layout(), detector, &ports(), &options()).join(" ");
        assert!(args.ends_with("--scheduler-addr http://127.0.0.1:7102"), "{args}");
        assert!(!args.contains("apply-once-only"));
    }

    #[test]
    fn members_are_numbered_from_one() {
        assert_eq!(member_names(3), vec!["member1", "member2", "member3"]);
    }
}
