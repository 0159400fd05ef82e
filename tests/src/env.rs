//! A whole flotilla installation on loopback: a control-plane apiserver, N member apiservers
//! (simulating workload controllers) registered as `member1..memberN`, the CRDs, and the service
//! binaries wired to each other. Service flags follow the contract every service implements:
//! `--kubeconfig`, `--grpc-addr`, `--metrics-addr`, `--log-level`, plus the peer addresses
//! (`--scheduler-addr`, `--execution-addr`, `--dependency-distributor-addr`). Each service runs
//! as its own ServiceAccount with the roles of `deploy/manifests` (as under `flotilla up`), so
//! every scenario proves those roles suffice.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::Client;

use crate::apiserver::{ApiServer, ApiServerOptions};
use crate::process::Process;
use crate::wait::eventually;

/// A flotilla service binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// flotilla-detector.
    Detector,
    /// flotilla-scheduler.
    Scheduler,
    /// flotilla-dependency-distributor.
    DependencyDistributor,
    /// flotilla-execution.
    Execution,
}

impl Service {
    /// Every service.
    pub const ALL: [Service; 4] = [
        Service::Detector,
        Service::Scheduler,
        Service::DependencyDistributor,
        Service::Execution,
    ];

    /// The binary name.
    pub fn binary(self) -> &'static str {
        match self {
            Service::Detector => "flotilla-detector",
            Service::Scheduler => "flotilla-scheduler",
            Service::DependencyDistributor => "flotilla-dependency-distributor",
            Service::Execution => "flotilla-execution",
        }
    }
}

/// How to start an [`Env`].
#[derive(Clone, Debug)]
pub struct EnvOptions {
    /// Number of member clusters (`member1..memberN`).
    pub members: usize,
    /// Which services to start.
    pub services: Vec<Service>,
    /// Labels of each member's Cluster object, by member index (0-based).
    pub member_labels: BTreeMap<usize, BTreeMap<String, String>>,
    /// Extra flags per service.
    pub service_args: BTreeMap<Service, Vec<String>>,
    /// Extra flags of the control-plane apiserver (e.g. `--allow-no-execute-taint-policy`).
    pub control_plane_args: Vec<String>,
    /// Extra flags of every member apiserver (e.g. `--watch-window 1`).
    pub member_args: Vec<String>,
    /// Members (0-based) whose apiserver runs without `--simulate-workloads`: no controller
    /// ever writes the status of their workloads.
    pub members_without_controllers: BTreeSet<usize>,
    /// Extra environment per service (e.g. `OTEL_*`).
    pub service_env: Vec<(String, String)>,
    /// `--log-level` of the services.
    pub log_level: String,
    /// Whether the control plane writes an audit log (see [`Env::audit_events`]).
    pub audit: bool,
}

impl Default for EnvOptions {
    fn default() -> Self {
        Self {
            members: 3,
            services: Service::ALL.to_vec(),
            member_labels: BTreeMap::new(),
            service_args: BTreeMap::new(),
            control_plane_args: vec![],
            member_args: vec![],
            members_without_controllers: BTreeSet::new(),
            service_env: vec![],
            log_level: "info,flotilla_detector=debug,flotilla_scheduler=debug,flotilla_execution=debug,flotilla_dependency_distributor=debug".to_owned(),
            audit: false,
        }
    }
}

struct Ports {
    grpc: u16,
    metrics: u16,
}

/// An extra replica of a service (see [`Env::start_replica`]); stopped when dropped.
pub struct Replica {
    /// The process.
    pub process: Process,
    /// Its gRPC address (`http://127.0.0.1:<port>`).
    pub grpc_address: String,
    /// Its ops endpoint (`127.0.0.1:<port>`).
    pub metrics_address: String,
}

/// A running installation. Dropping it stops every process; if the test is panicking, the tail
/// of every process's log is printed first.
pub struct Env {
    root: tempfile::TempDir,
    /// The control-plane apiserver.
    pub control_plane: ApiServer,
    /// The member apiservers, `member1` first.
    pub members: Vec<ApiServer>,
    services: BTreeMap<Service, Process>,
    ports: BTreeMap<Service, Ports>,
    /// Extra flags per service, also given to replicas started with [`Env::start_replica`].
    service_args: BTreeMap<Service, Vec<String>>,
    // Last, so it is released after every process above has stopped.
    _slot: Slot,
}

/// Bounds how many installations one test process runs at once (`FLOTILLA_E2E_ENVS`, default
/// 3): cargo runs a test file's tests in parallel, and each installation is a handful of
/// processes on a two-core CI machine. Tests beyond the bound wait for a slot instead of
/// starving each other into timeouts.
struct Slot;

static SLOTS: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

impl Slot {
    fn acquire() -> Slot {
        let limit = std::env::var("FLOTILLA_E2E_ENVS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(3);
        let (lock, freed) = &SLOTS;
        let mut used = lock.lock().unwrap_or_else(|p| p.into_inner());
        while *used >= limit {
            used = freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        *used += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (lock, freed) = &SLOTS;
        let mut used = lock.lock().unwrap_or_else(|p| p.into_inner());
        *used -= 1;
        freed.notify_one();
    }
}

impl Env {
    /// Starts everything and waits until every service reports ready.
    pub async fn start(options: EnvOptions) -> Env {
        // Blocking is fine: every `#[tokio::test]` has its own runtime.
        let slot = Slot::acquire();
        let root = tempfile::Builder::new()
            .prefix("flotilla-e2e-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
        // `FLOTILLA_E2E_AUDIT_COLLECT=<dir>` keeps every control plane's audit log there, to see
        // which requests each service makes (see docs/operations.md, "RBAC of the services").
        let collect = std::env::var_os("FLOTILLA_E2E_AUDIT_COLLECT");
        let mut control_plane_options = ApiServerOptions {
            extra_args: options.control_plane_args.clone(),
            ..Default::default()
        };
        if options.audit || collect.is_some() {
            control_plane_options.extra_args.extend([
                "--audit-log-path".to_owned(),
                root.path().join("control-plane-audit.log").display().to_string(),
            ]);
        }
        let control_plane = ApiServer::start("control-plane", root.path(), &control_plane_options).await;
        let mut members = Vec::new();
        for i in 1..=options.members {
            let options = ApiServerOptions {
                simulate_workloads: !options.members_without_controllers.contains(&(i - 1)),
                extra_args: options.member_args.clone(),
                // As `flotilla up` starts its members: on one thread (ADR 0032).
                env: flotilla::up::apiserver_env(true),
            };
            members.push(ApiServer::start(&format!("member{i}"), root.path(), &options).await);
        }
        let client = control_plane.client().await;
        install_crds(&client).await;
        for (i, member) in members.iter().enumerate() {
            let join_options = flotilla::join::JoinOptions {
                labels: options.member_labels.get(&i).cloned().unwrap_or_default(),
                ..Default::default()
            };
            flotilla::setup::register_member(&client, member.name(), member.kubeconfig(), &join_options)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let binaries: Vec<&str> = Service::ALL.iter().map(|s| s.binary()).collect();
        flotilla::identities::install_all(
            &client,
            control_plane.kubeconfig(),
            &binaries,
            control_plane.data_dir(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));

        let ports: BTreeMap<Service, Ports> = Service::ALL
            .iter()
            .map(|s| {
                (
                    *s,
                    Ports {
                        grpc: crate::free_port(),
                        metrics: crate::free_port(),
                    },
                )
            })
            .collect();
        let mut env = Env {
            root,
            control_plane,
            members,
            services: BTreeMap::new(),
            ports,
            service_args: options.service_args.clone(),
            _slot: slot,
        };
        for service in &options.services {
            let mut args = env.service_command_line(*service, &options.log_level);
            args.extend(options.service_args.get(service).cloned().unwrap_or_default());
            let binary = crate::binaries::binary(service.binary());
            let process = Process::start(
                service.binary(),
                &binary,
                args,
                options.service_env.clone(),
                env.root.path(),
            );
            env.services.insert(*service, process);
        }
        for service in options.services {
            env.wait_service_ready(service).await;
        }
        if env.services.contains_key(&Service::Execution) {
            env.wait_clusters_ready().await;
        }
        env
    }

    /// Waits until execution has probed every member and marked its Cluster `Ready`, as an
    /// operator would before relying on the installation: a template created earlier is
    /// unschedulable at first and placed only when the clusters become ready, which is a test
    /// of its own, not what every scenario should start with.
    async fn wait_clusters_ready(&self) {
        let client = self.control_plane_client().await;
        let clusters: kube::Api<flotilla_api::Cluster> = kube::Api::all(client);
        let expected = self.members.len();
        crate::wait::eventually(
            "every member Cluster to be Ready",
            Duration::from_secs(60),
            || {
                let clusters = clusters.clone();
                async move {
                    let Ok(list) = clusters.list(&Default::default()).await else {
                        return false;
                    };
                    let ready = list
                        .items
                        .iter()
                        .filter(|c| {
                            c.status.as_ref().is_some_and(|s| {
                                flotilla_api::conditions::find(&s.conditions, "Ready")
                                    .is_some_and(|c| c.status == "True")
                            })
                        })
                        .count();
                    ready >= expected
                }
            },
        )
        .await;
    }

    fn address(&self, service: Service) -> String {
        format!("http://127.0.0.1:{}", self.ports[&service].grpc)
    }

    /// The gRPC address of `service`, `http://127.0.0.1:<port>`.
    pub fn grpc_address(&self, service: Service) -> String {
        self.address(service)
    }

    /// Starts another replica of `service` (its own ports, the same control plane and peers)
    /// and waits until it is ready. Used to test services that run several replicas.
    pub async fn start_replica(&self, service: Service, name: &str) -> Replica {
        let grpc = crate::free_port();
        let metrics = crate::free_port();
        let mut args = self.service_command_line(service, "info,flotilla=debug");
        let set = |args: &mut Vec<String>, flag: &str, value: String| {
            if let Some(i) = args.iter().position(|a| a == flag) {
                args[i + 1] = value;
            }
        };
        set(&mut args, "--grpc-addr", format!("127.0.0.1:{grpc}"));
        set(&mut args, "--metrics-addr", format!("127.0.0.1:{metrics}"));
        args.extend(self.service_args.get(&service).cloned().unwrap_or_default());
        let binary = crate::binaries::binary(service.binary());
        let process = Process::start(name, &binary, args, vec![], self.root.path());
        let replica = Replica {
            process,
            grpc_address: format!("http://127.0.0.1:{grpc}"),
            metrics_address: format!("127.0.0.1:{metrics}"),
        };
        let address = replica.metrics_address.clone();
        eventually(
            &format!("{name} to become ready"),
            Duration::from_secs(60),
            || {
                let address = address.clone();
                async move { matches!(http_get(&address, "/readyz").await, Some((200, _))) }
            },
        )
        .await;
        replica
    }

    fn service_command_line(&self, service: Service, log_level: &str) -> Vec<String> {
        let ports = &self.ports[&service];
        let mut args = vec![
            "--kubeconfig".to_owned(),
            self.service_kubeconfig(service).display().to_string(),
            "--grpc-addr".to_owned(),
            format!("127.0.0.1:{}", ports.grpc),
            "--metrics-addr".to_owned(),
            format!("127.0.0.1:{}", ports.metrics),
            "--log-level".to_owned(),
            log_level.to_owned(),
        ];
        let peers: &[(&str, Service)] = match service {
            Service::Detector => &[("--scheduler-addr", Service::Scheduler)],
            Service::Scheduler => &[
                ("--execution-addr", Service::Execution),
                ("--dependency-distributor-addr", Service::DependencyDistributor),
            ],
            Service::DependencyDistributor => &[("--scheduler-addr", Service::Scheduler)],
            Service::Execution => &[],
        };
        for (flag, peer) in peers {
            args.push((*flag).to_owned());
            args.push(self.address(*peer));
        }
        args
    }

    /// The kubeconfig `service` runs with: a token of its own ServiceAccount.
    pub fn service_kubeconfig(&self, service: Service) -> std::path::PathBuf {
        flotilla::identities::kubeconfig_path(self.control_plane.data_dir(), service.binary())
    }

    /// A client for the control plane (as the admin, `system:masters`).
    pub async fn control_plane_client(&self) -> Client {
        self.control_plane.client().await
    }

    /// A client for member `i` (1-based, as in `member1`).
    pub async fn member_client(&self, i: usize) -> Client {
        self.members[i - 1].client().await
    }

    /// The temporary directory holding data dirs and logs.
    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }

    /// The metrics endpoint of `service`.
    pub fn metrics_address(&self, service: Service) -> String {
        format!("127.0.0.1:{}", self.ports[&service].metrics)
    }

    /// The process of `service`.
    pub fn service(&mut self, service: Service) -> &mut Process {
        self.services
            .get_mut(&service)
            .unwrap_or_else(|| panic!("{service:?} was not started"))
    }

    /// Kills `service` with SIGKILL.
    pub fn kill(&mut self, service: Service) {
        self.service(service).kill();
    }

    /// Pauses `service` (SIGSTOP): it stops processing but keeps its connections and state.
    pub fn pause(&mut self, service: Service) {
        self.service(service).pause();
    }

    /// Resumes a paused `service` (SIGCONT).
    pub fn resume(&mut self, service: Service) {
        self.service(service).resume();
    }

    /// Starts a killed `service` again and waits until it is ready.
    pub async fn start_again(&mut self, service: Service) {
        self.service(service).start_again();
        self.wait_service_ready(service).await;
    }

    /// Kills `service` with SIGKILL, starts it again and waits until it is ready.
    pub async fn restart(&mut self, service: Service) {
        self.service(service).restart();
        self.wait_service_ready(service).await;
    }

    /// GET `path` on `service`'s metrics endpoint: (status code, body).
    pub async fn http_get(&self, service: Service, path: &str) -> Option<(u16, String)> {
        http_get(&self.metrics_address(service), path).await
    }

    /// The value of the sample `name` on `service`'s `/metrics` (see [`metric_sample`]).
    pub async fn metric_sample(&self, service: Service, name: &str) -> Option<f64> {
        metric_sample(&self.metrics_address(service), name).await
    }

    /// Waits until `service` answers `/readyz` with 200.
    pub async fn wait_service_ready(&mut self, service: Service) {
        let address = self.metrics_address(service);
        let log = self
            .services
            .get(&service)
            .map(|p| p.log_tail(30))
            .unwrap_or_default();
        eventually(
            &format!("{service:?} to become ready; log tail:\n{log}"),
            Duration::from_secs(60),
            || {
                let address = address.clone();
                async move { matches!(http_get(&address, "/readyz").await, Some((200, _))) }
            },
        )
        .await;
    }

    /// The control plane's audit events so far (needs [`EnvOptions::audit`]).
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.root.path().join("control-plane-audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Prints the tail of every process's log to stderr.
    pub fn dump_logs(&self, lines: usize) {
        eprintln!("----- flotilla e2e logs ({}) -----", self.root.path().display());
        eprintln!("== control-plane ==\n{}", self.control_plane.log_tail(lines));
        for member in &self.members {
            eprintln!("== {} ==\n{}", member.name(), member.log_tail(lines));
        }
        for (service, process) in &self.services {
            eprintln!("== {service:?} ==\n{}", process.log_tail(lines));
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(dir) = std::env::var_os("FLOTILLA_E2E_AUDIT_COLLECT") {
            let name = format!(
                "{}-{}.log",
                std::thread::current().name().unwrap_or("env").replace("::", "-"),
                crate::free_port()
            );
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::copy(
                self.root.path().join("control-plane-audit.log"),
                std::path::Path::new(&dir).join(name),
            );
        }
        if std::thread::panicking() {
            self.dump_logs(60);
            // Keep the directory for inspection when asked to.
            if std::env::var_os("FLOTILLA_E2E_KEEP").is_some() {
                let path = self.root.path().to_path_buf();
                eprintln!("keeping {}", path.display());
                std::mem::forget(std::mem::replace(
                    &mut self.root,
                    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
                ));
            }
        }
    }
}

/// Creates every flotilla CRD and waits until the API serves them (the same steps as
/// `flotilla up`).
pub async fn install_crds(client: &Client) {
    flotilla::setup::install_crds(client, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A minimal HTTP/1.0 GET on loopback: (status code, body).
pub async fn http_get(address: &str, path: &str) -> Option<(u16, String)> {
    flotilla::probe::http_get(address, path).await
}

/// The value of the sample `name` (with its labels, exactly as exposed, e.g.
/// `flotilla_scheduler_clusters{ready="true"}`) on `address`'s `/metrics`, if present.
pub async fn metric_sample(address: &str, name: &str) -> Option<f64> {
    let (code, body) = http_get(address, "/metrics").await?;
    if code != 200 {
        return None;
    }
    sample_in(&body, name)
}

/// The value of the sample `name` (with its labels, exactly as exposed) in `/metrics` text
/// `body`, if present.
pub fn sample_in(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// The sum of the series of metric `family` in `/metrics` text `body` whose labels include
/// every one of `labels` (`name="value"`).
pub fn series_sum(body: &str, family: &str, labels: &[&str]) -> f64 {
    let prefix = format!("{family}{{");
    body.lines()
        .filter(|line| line.starts_with(&prefix) && labels.iter().all(|l| line.contains(l)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
