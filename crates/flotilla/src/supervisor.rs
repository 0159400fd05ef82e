//! Supervising child processes: each child's output goes to its own log file, a child that
//! exits unexpectedly is restarted with exponential backoff (and the restart is reported), and
//! stopping sends SIGTERM, waits a grace period, then SIGKILLs.
//!
//! Children run in their own process group, so a Ctrl-C in the terminal reaches only the
//! supervising process, which then stops the children in its own order (services before the
//! API servers they talk to). Each child's pid is kept in `<run dir>/<name>.pid` while it runs,
//! so a later supervisor can find children a crashed one left behind ([`reap_stale`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Errors starting a child.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// The log file or run directory cannot be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The program cannot be started.
    #[error("cannot start {name} ({program}): {source}")]
    Spawn {
        /// The child's name.
        name: String,
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// A short name, unique within the supervisor (`control-plane`, `flotilla-scheduler`).
    pub name: String,
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

/// Restart and stop timing.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Backoff before the first restart.
    pub initial_backoff: Duration,
    /// Upper bound of the backoff.
    pub max_backoff: Duration,
    /// A child that ran at least this long before exiting restarts after `initial_backoff`
    /// again.
    pub healthy_after: Duration,
    /// How long a child may take to exit after SIGTERM before it is SIGKILLed.
    pub grace: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            healthy_after: Duration::from_secs(30),
            grace: Duration::from_secs(10),
        }
    }
}

impl Policy {
    /// The backoff after `previous` (none: the first restart), given how long the child ran.
    pub fn next_backoff(&self, previous: Option<Duration>, ran: Duration) -> Duration {
        match previous {
            Some(previous) if ran < self.healthy_after => (previous * 2).min(self.max_backoff),
            _ => self.initial_backoff.min(self.max_backoff),
        }
    }
}

/// Something that happened to a child, for the supervising process to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The child was started (the first time or again) with this pid.
    Started {
        /// The child.
        name: String,
        /// Its pid.
        pid: u32,
    },
    /// The child exited while it was meant to be running; it restarts after `backoff`.
    Exited {
        /// The child.
        name: String,
        /// How it exited (`exit status: 1`, `signal: 9 (SIGKILL)`).
        status: String,
        /// The wait before it is started again.
        backoff: Duration,
        /// How many times it has been restarted so far, this restart included.
        restarts: u32,
    },
    /// The child could not be started again; another attempt follows after `backoff`.
    SpawnFailed {
        /// The child.
        name: String,
        /// Why.
        error: String,
        /// The wait before the next attempt.
        backoff: Duration,
    },
    /// The child was stopped.
    Stopped {
        /// The child.
        name: String,
        /// Whether it had to be SIGKILLed after the grace period.
        killed: bool,
    },
}

struct Handle {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    pid: Arc<Mutex<Option<u32>>>,
}

/// A set of supervised children.
pub struct Supervisor {
    run_dir: PathBuf,
    log_dir: PathBuf,
    policy: Policy,
    events: mpsc::UnboundedSender<Event>,
    children: BTreeMap<String, Handle>,
}

impl Supervisor {
    /// A supervisor writing logs to `log_dir/<name>.log` and pid files to `run_dir/<name>.pid`;
    /// events are sent to the returned receiver.
    pub fn new(log_dir: &Path, run_dir: &Path, policy: Policy) -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (events, receiver) = mpsc::unbounded_channel();
        (
            Self {
                run_dir: run_dir.to_path_buf(),
                log_dir: log_dir.to_path_buf(),
                policy,
                events,
                children: BTreeMap::new(),
            },
            receiver,
        )
    }

    /// The log file of child `name`.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.log"))
    }

    /// Starts `spec` and supervises it until [`Supervisor::stop`]. Fails when the first start
    /// fails (a missing binary is not worth retrying); later failures are retried.
    pub fn start(&mut self, spec: ChildSpec) -> Result<u32, SupervisorError> {
        for dir in [&self.log_dir, &self.run_dir] {
            std::fs::create_dir_all(dir).map_err(|source| SupervisorError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let log = self.log_path(&spec.name);
        let pid_file = self.run_dir.join(format!("{}.pid", spec.name));
        let child = spawn(&spec, &log)?;
        let pid = child.id().unwrap_or_default();
        write_pid(&pid_file, pid);
        let _ = self.events.send(Event::Started {
            name: spec.name.clone(),
            pid,
        });
        let stop = CancellationToken::new();
        let shared_pid = Arc::new(Mutex::new(Some(pid)));
        let task = tokio::spawn(supervise(Supervised {
            spec: spec.clone(),
            log,
            pid_file,
            policy: self.policy.clone(),
            events: self.events.clone(),
            stop: stop.clone(),
            pid: shared_pid.clone(),
            child,
        }));
        self.children.insert(
            spec.name,
            Handle {
                stop,
                task,
                pid: shared_pid,
            },
        );
        Ok(pid)
    }

    /// The current pid of child `name`, if it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        let handle = self.children.get(name)?;
        *handle.pid.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The names of the supervised children.
    pub fn names(&self) -> Vec<String> {
        self.children.keys().cloned().collect()
    }

    /// Stops the named children (all at once) and waits until they have exited.
    pub async fn stop(&mut self, names: &[String]) {
        let handles: Vec<Handle> = names.iter().filter_map(|n| self.children.remove(n)).collect();
        for handle in &handles {
            handle.stop.cancel();
        }
        for handle in handles {
            let _ = handle.task.await;
        }
    }

    /// Stops every child, `first` before the rest.
    pub async fn stop_all(&mut self, first: &[String]) {
        self.stop(first).await;
        let rest = self.names();
        self.stop(&rest).await;
    }
}

struct Supervised {
    spec: ChildSpec,
    log: PathBuf,
    pid_file: PathBuf,
    policy: Policy,
    events: mpsc::UnboundedSender<Event>,
    stop: CancellationToken,
    pid: Arc<Mutex<Option<u32>>>,
    child: Child,
}

impl Supervised {
    fn set_pid(&self, pid: Option<u32>) {
        *self.pid.lock().unwrap_or_else(|p| p.into_inner()) = pid;
        match pid {
            Some(pid) => write_pid(&self.pid_file, pid),
            None => {
                let _ = std::fs::remove_file(&self.pid_file);
            }
        }
    }

    fn note(&self, line: &str) {
        append_log(&self.log, &format!("--- flotilla up: {line}"));
    }
}

async fn supervise(mut s: Supervised) {
    let mut backoff: Option<Duration> = None;
    let mut restarts = 0u32;
    let mut started = Instant::now();
    loop {
        let status = tokio::select! {
            status = s.child.wait() => status,
            () = s.stop.cancelled() => {
                let killed = terminate(&mut s.child, s.policy.grace).await;
                s.set_pid(None);
                s.note(if killed { "stopped (SIGKILL after the grace period)" } else { "stopped" });
                let _ = s.events.send(Event::Stopped { name: s.spec.name.clone(), killed });
                return;
            }
        };
        s.set_pid(None);
        let delay = s.policy.next_backoff(backoff, started.elapsed());
        backoff = Some(delay);
        restarts += 1;
        let status = describe(status);
        s.note(&format!(
            "exited unexpectedly ({status}); restart {restarts} in {delay:?}"
        ));
        let _ = s.events.send(Event::Exited {
            name: s.spec.name.clone(),
            status,
            backoff: delay,
            restarts,
        });
        // Keep trying until a start succeeds or we are told to stop.
        let mut delay = delay;
        loop {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = s.stop.cancelled() => {
                    let _ = s.events.send(Event::Stopped { name: s.spec.name.clone(), killed: false });
                    return;
                }
            }
            match spawn(&s.spec, &s.log) {
                Ok(child) => {
                    s.child = child;
                    let pid = s.child.id().unwrap_or_default();
                    s.set_pid(Some(pid));
                    started = Instant::now();
                    let _ = s.events.send(Event::Started {
                        name: s.spec.name.clone(),
                        pid,
                    });
                    break;
                }
                Err(error) => {
                    delay = s.policy.next_backoff(Some(delay), Duration::ZERO);
                    backoff = Some(delay);
                    let _ = s.events.send(Event::SpawnFailed {
                        name: s.spec.name.clone(),
                        error: error.to_string(),
                        backoff: delay,
                    });
                }
            }
        }
    }
}

fn describe(status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(error) => format!("cannot wait for it: {error}"),
    }
}

fn spawn(spec: &ChildSpec, log: &Path) -> Result<Child, SupervisorError> {
    let io_error = |source| SupervisorError::Io {
        path: log.display().to_string(),
        source,
    };
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io_error)?;
    let err = out.try_clone().map_err(io_error)?;
    Command::new(&spec.program)
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Own process group: a terminal's Ctrl-C reaches the supervisor only.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| SupervisorError::Spawn {
            name: spec.name.clone(),
            program: spec.program.display().to_string(),
            source,
        })
}

/// Sends SIGTERM, waits up to `grace`, then SIGKILLs; returns whether SIGKILL was needed.
async fn terminate(child: &mut Child, grace: Duration) -> bool {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(_) => false,
        Err(_) => {
            let _ = child.kill().await;
            true
        }
    }
}

fn write_pid(path: &Path, pid: u32) {
    let _ = std::fs::write(path, format!("{pid}\n"));
}

fn append_log(path: &Path, line: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(file, "{line}");
    }
}

/// Stops processes a previous supervisor left behind in `run_dir` (it was killed before it
/// could stop its children): every `<name>.pid` whose process still runs `program_of(name)`.
/// Returns the names of the children it stopped.
pub async fn reap_stale(run_dir: &Path, program_of: impl Fn(&str) -> Option<PathBuf>) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut reaped = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".pid"))
            .map(str::to_owned)
        else {
            continue;
        };
        let pid = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        let stale = match (pid, program_of(&name)) {
            (Some(pid), Some(expected)) if runs_program(pid, &expected) => Some((pid, expected)),
            _ => None,
        };
        if let Some((pid, expected)) = stale {
            let target = Pid::from_raw(pid);
            let _ = kill(target, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while runs_program(pid, &expected) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if runs_program(pid, &expected) {
                let _ = kill(target, Signal::SIGKILL);
            }
            reaped.push(name);
        }
        let _ = std::fs::remove_file(&path);
    }
    reaped.sort();
    reaped
}

/// Whether process `pid` is alive and runs `program` (Linux: `/proc/<pid>/exe`).
fn runs_program(pid: i32, program: &Path) -> bool {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie (state Z) has exited; it only waits for its parent to reap it.
    let zombie = status
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    let program = program.canonicalize().unwrap_or_else(|_| program.to_path_buf());
    // A binary rebuilt since the process started shows as `<path> (deleted)`.
    let exe = exe.to_string_lossy();
    let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
    !zombie && Path::new(exe) == program
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets_after_a_healthy_run() {
        let policy = Policy {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
            healthy_after: Duration::from_secs(60),
            grace: Duration::from_secs(1),
        };
        let quick = Duration::from_secs(1);
        let mut backoff = None;
        let mut seen = Vec::new();
        for _ in 0..5 {
            let next = policy.next_backoff(backoff, quick);
            seen.push(next.as_secs());
            backoff = Some(next);
        }
        assert_eq!(seen, vec![1, 2, 4, 5, 5]);
        assert_eq!(
            policy.next_backoff(backoff, Duration::from_secs(61)),
            Duration::from_secs(1)
        );
    }
}
