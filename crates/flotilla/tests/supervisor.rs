//! The supervisor with real processes (`sleep`, `sh`): restarts after a crash, stops with
//! SIGTERM then SIGKILL, stops groups in order, and reaps children a crashed supervisor left.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flotilla::supervisor::{ChildSpec, Event, Policy, Supervisor, reap_stale};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::sync::mpsc::UnboundedReceiver;

const TIMEOUT: Duration = Duration::from_secs(20);

fn program(name: &str) -> PathBuf {
    ["/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{name} not found"))
}

fn sleeper(name: &str) -> ChildSpec {
    ChildSpec {
        name: name.to_owned(),
        program: program("sleep"),
        args: vec!["1000".to_owned()],
        env: vec![],
    }
}

fn fast() -> Policy {
    Policy {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        healthy_after: Duration::from_secs(30),
        grace: Duration::from_secs(5),
    }
}

fn alive(pid: u32) -> bool {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !state.is_empty()
        && !state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

async fn next_event(events: &mut UnboundedReceiver<Event>, matches: impl Fn(&Event) -> bool) -> Event {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some(event)) if matches(&event) => return event,
            Ok(Some(_)) => {}
            _ => panic!("no matching event within {TIMEOUT:?}"),
        }
    }
}

#[tokio::test]
async fn a_crashed_child_is_restarted_with_backoff_and_the_restart_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let (mut supervisor, mut events) =
        Supervisor::new(&dir.path().join("logs"), &dir.path().join("run"), fast());
    let first = supervisor.start(sleeper("worker")).unwrap();
    assert_eq!(supervisor.pid("worker"), Some(first));
    let pid_file = dir.path().join("run/worker.pid");
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        first.to_string()
    );

    for round in 1..=2u32 {
        let pid = supervisor.pid("worker").unwrap();
        kill(Pid::from_raw(i32::try_from(pid).unwrap()), Signal::SIGKILL).unwrap();
        let exited = next_event(&mut events, |e| matches!(e, Event::Exited { .. })).await;
        let Event::Exited {
            status,
            backoff,
            restarts,
            ..
        } = exited
        else {
            unreachable!()
        };
        assert!(status.contains("signal: 9"), "{status}");
        assert_eq!(restarts, round);
        assert_eq!(
            backoff,
            Duration::from_millis(50 * 2u64.pow(round - 1)),
            "doubles"
        );
        let started = next_event(&mut events, |e| matches!(e, Event::Started { .. })).await;
        let Event::Started { pid: new_pid, .. } = started else {
            unreachable!()
        };
        assert_ne!(new_pid, pid);
        assert!(alive(new_pid));
        assert_eq!(supervisor.pid("worker"), Some(new_pid));
        assert_eq!(
            std::fs::read_to_string(&pid_file).unwrap().trim(),
            new_pid.to_string()
        );
    }
    let log = std::fs::read_to_string(supervisor.log_path("worker")).unwrap();
    assert!(log.contains("exited unexpectedly (signal: 9"), "{log}");
    assert!(log.contains("restart 2"), "{log}");

    let last = supervisor.pid("worker").unwrap();
    supervisor.stop_all(&[]).await;
    assert!(!alive(last));
    assert!(!pid_file.exists(), "the pid file goes with the child");
}

#[tokio::test]
async fn stopping_terminates_then_kills_and_goes_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let policy = Policy {
        grace: Duration::from_millis(300),
        ..fast()
    };
    let (mut supervisor, mut events) =
        Supervisor::new(&dir.path().join("logs"), &dir.path().join("run"), policy);
    let stubborn = supervisor
        .start(ChildSpec {
            name: "stubborn".to_owned(),
            program: program("sh"),
            args: vec![
                "-c".to_owned(),
                "trap '' TERM; while true; do sleep 1; done".to_owned(),
            ],
            env: vec![],
        })
        .unwrap();
    let polite = supervisor.start(sleeper("polite")).unwrap();
    let first = supervisor.start(sleeper("first")).unwrap();
    // Let the shell install its trap before it is signalled.
    tokio::time::sleep(Duration::from_millis(200)).await;

    supervisor.stop_all(&["first".to_owned()]).await;
    for pid in [stubborn, polite, first] {
        assert!(!alive(pid), "pid {pid} still runs");
    }
    let mut stopped = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Event::Stopped { name, killed } = event {
            stopped.push((name, killed));
        }
    }
    assert_eq!(
        stopped[0],
        ("first".to_owned(), false),
        "the first group stops first: {stopped:?}"
    );
    assert!(stopped.contains(&("polite".to_owned(), false)), "{stopped:?}");
    assert!(stopped.contains(&("stubborn".to_owned(), true)), "{stopped:?}");
    assert!(supervisor.names().is_empty());
}

#[tokio::test]
async fn a_missing_program_fails_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut supervisor, _events) =
        Supervisor::new(&dir.path().join("logs"), &dir.path().join("run"), fast());
    let error = supervisor
        .start(ChildSpec {
            name: "ghost".to_owned(),
            program: dir.path().join("no-such-binary"),
            args: vec![],
            env: vec![],
        })
        .unwrap_err()
        .to_string();
    assert!(error.contains("cannot start ghost"), "{error}");
}

#[tokio::test]
async fn children_left_by_a_crashed_supervisor_are_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut orphan = std::process::Command::new(program("sleep"))
        .arg("1000")
        .spawn()
        .unwrap();
    std::fs::write(run.join("orphan.pid"), format!("{}\n", orphan.id())).unwrap();
    // A pid file whose process is gone, and one naming a process that runs another program.
    std::fs::write(run.join("gone.pid"), "999999999\n").unwrap();
    let mut other = std::process::Command::new(program("sh"))
        .args(["-c", "sleep 1000"])
        .spawn()
        .unwrap();
    std::fs::write(run.join("other.pid"), format!("{}\n", other.id())).unwrap();

    let sleep = program("sleep");
    let reaped = reap_stale(&run, |name| (name != "unknown").then(|| sleep.clone())).await;
    assert_eq!(reaped, vec!["orphan".to_owned()]);
    let status = orphan.wait().unwrap();
    assert!(!status.success(), "the orphan was signalled: {status}");
    assert!(
        std::fs::read_dir(&run).unwrap().next().is_none(),
        "every pid file is removed"
    );
    assert!(
        other.try_wait().unwrap().is_none(),
        "a process running another program is left alone"
    );
    other.kill().unwrap();
    other.wait().unwrap();
}
