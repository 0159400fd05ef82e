//! A child process with its output captured to a log file, that can be killed (SIGKILL),
//! terminated (SIGTERM) and restarted with the same command line.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A managed child process.
pub struct Process {
    name: String,
    binary: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// Starts `binary` with `args`, appending its stdout and stderr to `log_dir/<name>.log`.
    pub fn start(
        name: &str,
        binary: &Path,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log_dir: &Path,
    ) -> Self {
        let mut process = Self {
            name: name.to_owned(),
            binary: binary.to_path_buf(),
            args,
            env,
            log: log_dir.join(format!("{name}.log")),
            child: None,
        };
        process.spawn();
        process
    }

    fn spawn(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.log.display()));
        let err = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot clone log handle: {e}"));
        let child = Command::new(&self.binary)
            .args(&self.args)
            // An error returned from `main` prints its message first and then, when backtraces
            // are on for the test run, dozens of frames that push the message out of the log
            // tail a failing test shows: errors carry no backtrace (panics still do).
            .env("RUST_LIB_BACKTRACE", "0")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({}): {e}", self.name, self.binary.display()));
        self.child = Some(child);
    }

    /// The process name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The OS process id, if running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The command-line arguments.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits up to `grace` for the process to exit, then SIGKILLs it. Returns
    /// whether it exited on its own.
    pub fn terminate(&mut self, grace: Duration) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let Ok(pid) = i32::try_from(child.id()) else {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        };
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Stops the process where it is (SIGSTOP), as a process that stalls: it keeps its
    /// connections and state but does nothing until [`Process::resume`].
    ///
    /// Returns once every thread of the process has stopped: kill(2) returns before that, and a
    /// request sent at once could still be served.
    pub fn pause(&mut self) {
        let pid = self.signal(Signal::SIGSTOP);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !every_thread_stopped(pid) {
            assert!(
                Instant::now() < deadline,
                "{} (pid {pid}) did not stop within 10s of SIGSTOP",
                self.name
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&mut self) {
        self.signal(Signal::SIGCONT);
    }

    /// Sends `signal` to the running process; returns its pid.
    fn signal(&mut self, signal: Signal) -> i32 {
        let pid = self.pid().and_then(|pid| i32::try_from(pid).ok());
        let Some(pid) = pid else {
            panic!("{} is not running; cannot send {signal}", self.name);
        };
        kill(Pid::from_raw(pid), signal).unwrap_or_else(|e| panic!("{signal} to {}: {e}", self.name));
        pid
    }

    /// Starts the process again with the same command line (kills it first if running).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts the process again if it is not running.
    pub fn start_again(&mut self) {
        if !self.is_running() {
            self.spawn();
        }
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether every thread of process `pid` is stopped (state `T` in `/proc/<pid>/task/*/stat`).
fn every_thread_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                // The state follows the command name, which is in parentheses and may hold any byte.
                let (_, rest) = stat.rsplit_once(')')?;
                Some(rest.trim_start().starts_with('T'))
            })
            .unwrap_or(false)
    })
}
