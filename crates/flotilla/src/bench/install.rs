//! The embedded installation `flotilla bench` and `flotilla soak` run against by default: the
//! same control plane, members and services `flotilla up` starts (its code, not a copy), in a
//! temporary data dir, with handles to the child processes so the soak can kill and restart
//! them and the footprint scenario can read their `/proc` entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::binaries;
use crate::ports::{self, Ports};
use crate::supervisor::{ChildSpec, Event, Policy, Supervisor};
use crate::up::{self, ApplyOnceOnly, CONTROL_PLANE, Layout, UpError, UpOptions};

/// The four service binaries, in start order.
pub const SERVICES: [&str; 4] = [
    binaries::DETECTOR,
    binaries::SCHEDULER,
    binaries::DEPENDENCY_DISTRIBUTOR,
    binaries::EXECUTION,
];

/// How to start an [`Installation`].
#[derive(Clone, Debug)]
pub struct InstallOptions {
    /// Number of members (`member1..N`).
    pub members: usize,
    /// Where the binaries are (default: next to the running `flotilla`).
    pub bin_dir: Option<PathBuf>,
    /// `--log-level` of every child.
    pub log_level: String,
    /// Restart timing of the supervisor.
    pub policy: Policy,
    /// Keep the data dir after the run (its path is printed).
    pub keep: bool,
}

/// A running embedded installation; [`Installation::shutdown`] stops it.
pub struct Installation {
    /// The data dir layout.
    pub layout: Layout,
    /// Every component's port.
    pub ports: Ports,
    /// The member names.
    pub members: Vec<String>,
    supervisor: Supervisor,
    apiserver: PathBuf,
    exits: Arc<Mutex<BTreeMap<String, u32>>>,
    keep: bool,
}

impl Installation {
    /// Starts a control plane, `members` members and the four services in a new temporary data
    /// dir, and waits until every component is ready.
    pub async fn start(options: &InstallOptions) -> Result<Installation, UpError> {
        if options.members == 0 {
            return Err(UpError::NoMembers);
        }
        up::progress_on_stderr();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!("flotilla-bench-{}-{stamp}", std::process::id()));
        let layout = up::prepare_data_dir(&dir)?;
        let up_options = UpOptions {
            members: options.members,
            data_dir: layout.root.clone(),
            bin_dir: options.bin_dir.clone(),
            apply_once_only: ApplyOnceOnly::Off,
            demo: false,
            log_level: options.log_level.clone(),
            allow_no_execute_taint_policy: false,
        };
        let bin_dir = match &options.bin_dir {
            Some(dir) => dir.clone(),
            None => std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(Path::to_path_buf))
                .unwrap_or_else(|| PathBuf::from(".")),
        };
        let services = up::select_services(&up_options, &bin_dir)?;
        let apiserver = binaries::locate(&bin_dir, binaries::APISERVER)?;
        let members = up::member_names(options.members);
        let mut servers = vec![CONTROL_PLANE.to_owned()];
        servers.extend(members.iter().cloned());
        let service_names: Vec<String> = services.iter().map(|s| s.binary.to_owned()).collect();
        let ports = ports::assign(
            &Ports::default(),
            &servers,
            &service_names,
            ports::port_is_free,
            ports::free_port,
        )?
        .ports;
        ports::save(&layout.ports(), &ports)?;
        let (mut supervisor, events) = Supervisor::new(&layout.logs(), &layout.run(), options.policy.clone());
        let exits = Arc::new(Mutex::new(BTreeMap::new()));
        tokio::spawn(count_exits(events, exits.clone()));
        let started = up::start(
            &layout,
            &up_options,
            &ports,
            &servers,
            &services,
            &apiserver,
            &bin_dir,
            &mut supervisor,
        )
        .await;
        let installation = Installation {
            layout,
            ports,
            members,
            supervisor,
            apiserver,
            exits,
            keep: options.keep,
        };
        match started {
            Ok(()) => Ok(installation),
            Err(error) => {
                installation.shutdown().await;
                Err(error)
            }
        }
    }

    /// The merged kubeconfig (contexts `control-plane`, `member1..N`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.layout.kubeconfig()
    }

    /// The current pid of child `name` (a service binary, `control-plane` or `memberN`).
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.supervisor.pid(name)
    }

    /// `(name, pid)` of every running child.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.supervisor
            .names()
            .into_iter()
            .filter_map(|name| self.pid(&name).map(|pid| (name, pid)))
            .collect()
    }

    /// Sends SIGKILL to child `name`; the supervisor starts it again after its backoff.
    /// Returns the killed pid.
    pub fn kill9(&self, name: &str) -> Option<u32> {
        let pid = self.pid(name)?;
        let raw = i32::try_from(pid).ok()?;
        kill(Pid::from_raw(raw), Signal::SIGKILL).ok()?;
        Some(pid)
    }

    /// How many times each child exited while it was meant to run (kills included).
    pub fn exits(&self) -> BTreeMap<String, u32> {
        self.exits.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops API server `name` (SIGTERM, as an operator stopping a cluster would).
    pub async fn stop_apiserver(&mut self, name: &str) {
        self.supervisor.stop(&[name.to_owned()]).await;
    }

    /// Starts API server `name` again on its data dir and port.
    pub fn start_apiserver(&mut self, name: &str) -> Result<u32, UpError> {
        let port = self.ports.apiservers.get(name).copied().unwrap_or_default();
        Ok(self.supervisor.start(ChildSpec {
            name: name.to_owned(),
            program: self.apiserver.clone(),
            args: up::apiserver_args(&self.layout, name, port, name != CONTROL_PLANE),
            env: up::apiserver_env(name != CONTROL_PLANE),
        })?)
    }

    /// The ops address (`127.0.0.1:port`) of service `binary`.
    pub fn metrics_address(&self, binary: &str) -> Option<String> {
        self.ports
            .services
            .get(binary)
            .map(|p| format!("127.0.0.1:{}", p.metrics))
    }

    /// The gRPC address (`http://127.0.0.1:port`) of service `binary`.
    pub fn grpc_address(&self, binary: &str) -> Option<String> {
        self.ports
            .services
            .get(binary)
            .map(|p| format!("http://127.0.0.1:{}", p.grpc))
    }

    /// The last `lines` lines of child `name`'s log.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let text = std::fs::read_to_string(self.supervisor.log_path(name)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops every child (services first) and removes the data dir unless asked to keep it.
    pub async fn shutdown(mut self) {
        let services: Vec<String> = SERVICES.iter().map(|s| (*s).to_owned()).collect();
        self.supervisor.stop_all(&services).await;
        if self.keep {
            eprintln!("kept the data dir {}", self.layout.root.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.layout.root);
        }
    }
}

async fn count_exits(
    mut events: tokio::sync::mpsc::UnboundedReceiver<Event>,
    exits: Arc<Mutex<BTreeMap<String, u32>>>,
) {
    while let Some(event) = events.recv().await {
        if let Event::Exited { name, .. } = event {
            *exits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(name)
                .or_default() += 1;
        }
    }
}
