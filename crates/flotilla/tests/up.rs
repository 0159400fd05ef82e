//! `flotilla up` end to end: the real binary on a temporary data dir with two members. It
//! becomes ready, its kubeconfig works for every context, a killed child is restarted, SIGTERM
//! stops every child, and a restart on the same data dir resumes the same state.
//!
//! The first run builds the other binaries when they are older than their sources (`flotilla
//! up` does so from a checkout), so its ready deadline is generous; the second finds them up to
//! date and builds nothing.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flotilla_api::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Includes building every binary on a cold target dir.
const READY_TIMEOUT: Duration = Duration::from_secs(1200);
const TIMEOUT: Duration = Duration::from_secs(60);

/// A running `flotilla up` whose stdout lines are collected.
struct Up {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Up {
    fn start(data_dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["up", "--members", "2", "--data-dir"])
            .arg(data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                println!("[flotilla up] {line}");
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stdout line containing `text`.
    fn wait_line(&mut self, text: &str, timeout: Duration) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line containing {text:?} within {timeout:?}; output so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn terminate(&mut self) {
        kill(self.pid(), Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "flotilla up exited with {status}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "flotilla up did not stop within {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill(self.pid(), Signal::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

async fn client(kubeconfig: &Path, context: &str) -> Client {
    let config = Kubeconfig::read_from(kubeconfig).unwrap();
    let options = KubeConfigOptions {
        context: Some(context.to_owned()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(config, &options)
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + TIMEOUT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn clusters_ready(control_plane: &Client) -> bool {
    let Ok(list) = Api::<Cluster>::all(control_plane.clone())
        .list(&ListParams::default())
        .await
    else {
        return false;
    };
    let ready = |c: &Cluster| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
    };
    list.items.len() == 2 && list.items.iter().all(ready)
}

/// The pids of every supervised child, from the pid files.
fn child_pids(data_dir: &Path) -> Vec<(String, i32)> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(data_dir.join("run")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = name.strip_suffix(".pid") else {
            continue;
        };
        if name == "flotilla-up" {
            continue;
        }
        let pid = std::fs::read_to_string(entry.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        pids.push((name.to_owned(), pid));
    }
    pids.sort();
    pids
}

fn alive(pid: i32) -> bool {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !state.is_empty()
        && !state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

fn server_urls(kubeconfig: &Path) -> Vec<String> {
    let config = Kubeconfig::read_from(kubeconfig).unwrap();
    config
        .clusters
        .iter()
        .map(|c| {
            format!(
                "{}={}",
                c.name,
                c.cluster
                    .as_ref()
                    .and_then(|c| c.server.clone())
                    .unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test]
async fn up_supervises_stops_and_resumes() {
    let data = tempfile::Builder::new().prefix("flotilla-up-").tempdir().unwrap();
    let data_dir: PathBuf = data.path().to_path_buf();
    let kubeconfig = data_dir.join("kubeconfig");

    let mut up = Up::start(&data_dir);
    up.wait_line("flotilla is ready", READY_TIMEOUT);
    let export = up.wait_line("export KUBECONFIG=", TIMEOUT);
    assert!(export.contains(&kubeconfig.display().to_string()), "{export}");

    // Every context of the kubeconfig reaches its server; control-plane is the current one.
    let merged = Kubeconfig::read_from(&kubeconfig).unwrap();
    assert_eq!(merged.current_context.as_deref(), Some("control-plane"));
    let contexts: Vec<&str> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(contexts, vec!["control-plane", "member1", "member2"]);
    for context in ["control-plane", "member1", "member2"] {
        let namespaces = Api::<Namespace>::all(client(&kubeconfig, context).await);
        namespaces
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("context {context}: {e}"));
    }
    let control_plane = client(&kubeconfig, "control-plane").await;
    eventually("both Clusters to be Ready", || clusters_ready(&control_plane)).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(control_plane.clone(), "default");
    let survivor = ConfigMap {
        metadata: ObjectMeta {
            name: Some("survivor".to_owned()),
            ..Default::default()
        },
        data: Some([("created".to_owned(), "before the restart".to_owned())].into()),
        ..Default::default()
    };
    config_maps
        .create(&PostParams::default(), &survivor)
        .await
        .unwrap();

    // A service killed with SIGKILL is restarted, and the restart is reported.
    let pids = child_pids(&data_dir);
    let names: Vec<&str> = pids.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["control-plane", "member1", "member2", "flotilla-scheduler"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let scheduler = pids.iter().find(|(n, _)| n == "flotilla-scheduler").unwrap().1;
    kill(Pid::from_raw(scheduler), Signal::SIGKILL).unwrap();
    up.wait_line("flotilla-scheduler exited unexpectedly", TIMEOUT);
    let restarted = up.wait_line("flotilla-scheduler restarted", TIMEOUT);
    let new_pid: i32 = restarted
        .rsplit_once("pid ")
        .and_then(|(_, rest)| rest.trim_end_matches(')').parse().ok())
        .unwrap();
    assert_ne!(new_pid, scheduler);
    assert!(alive(new_pid));
    let log = std::fs::read_to_string(data_dir.join("logs/flotilla-scheduler.log")).unwrap();
    assert!(
        log.contains("exited unexpectedly"),
        "the child's log records the restart"
    );

    // SIGTERM stops every child.
    let pids = child_pids(&data_dir);
    let urls = server_urls(&kubeconfig);
    up.terminate();
    up.wait_line("flotilla stopped", TIMEOUT);
    for (name, pid) in &pids {
        assert!(
            !alive(*pid),
            "{name} (pid {pid}) is still running after flotilla up stopped"
        );
    }
    assert!(child_pids(&data_dir).is_empty(), "pid files are removed");

    // Restarting on the same data dir resumes: same addresses, same objects, Clusters Ready.
    // The binaries are newer than their sources now, so nothing is built, not even by a cargo
    // no-op.
    let mut up = Up::start(&data_dir);
    up.wait_line("binaries are up to date", TIMEOUT);
    up.wait_line("flotilla is ready", TIMEOUT);
    assert!(
        !up.seen.iter().any(|l| l.contains("building ")),
        "built although nothing changed:\n{}",
        up.seen.join("\n")
    );
    assert_eq!(server_urls(&kubeconfig), urls, "every server keeps its address");
    let control_plane = client(&kubeconfig, "control-plane").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(control_plane.clone(), "default");
    let survivor = config_maps.get("survivor").await.unwrap();
    assert_eq!(
        survivor.data.unwrap().get("created").map(String::as_str),
        Some("before the restart")
    );
    eventually("both Clusters to be Ready after the restart", || {
        clusters_ready(&control_plane)
    })
    .await;
    up.terminate();
}
