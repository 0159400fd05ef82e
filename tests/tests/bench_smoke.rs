//! `flotilla bench --scenario all` with tiny sizes against the embedded installation: the real
//! binary, its JSON report, and sane values in every scenario; SIGTERM in the middle of a run
//! stops everything the run started; and `flotilla-apiserver-bench` with tiny sizes prints
//! every phase.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::process::Command;

use serde_json::Value;

fn number(report: &Value, path: &[&str]) -> f64 {
    let mut value = report;
    for key in path {
        value = &value[*key];
    }
    value
        .as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {report:#}", path.join(".")))
}

#[test]
fn bench_all_scenarios_report_sane_figures() {
    let flotilla = flotilla_e2e::binaries::binary("flotilla");
    let output = Command::new(&flotilla)
        .args([
            "bench",
            "--scenario",
            "all",
            "--runs",
            "5",
            "--latency-members",
            "2",
            "--templates",
            "20",
            "--members",
            "2",
            "--policy-templates",
            "10",
            "--timeout",
            "120",
            "--json",
            // The harness built every binary; a build by `flotilla` itself (another package
            // set, other feature unification) would rebuild dependencies.
            "--bin-dir",
        ])
        .arg(flotilla_e2e::binaries::bin_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "flotilla bench failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not the JSON report ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    });

    assert_eq!(report["target"], "embedded");
    assert_eq!(report["members"].as_array().unwrap().len(), 2);
    assert!(number(&report, &["machine", "cpus"]) >= 1.0);

    // Latency: 5 measured runs to 2 members, ordered percentiles, positive and bounded.
    assert_eq!(number(&report, &["latency", "runs"]), 5.0);
    assert_eq!(number(&report, &["latency", "members"]), 2.0);
    let p50 = number(&report, &["latency", "p50_ms"]);
    let p95 = number(&report, &["latency", "p95_ms"]);
    let p99 = number(&report, &["latency", "p99_ms"]);
    assert!(0.0 < p50 && p50 <= p95 && p95 <= p99, "{report:#}");
    assert!(p99 < 60_000.0, "{report:#}");

    // Throughput: 20 Deployments + 20 ConfigMaps to 2 members.
    assert_eq!(number(&report, &["throughput", "member_objects"]), 80.0);
    assert_eq!(report["throughput"]["deps"], true);
    let seconds = number(&report, &["throughput", "seconds"]);
    let rate = number(&report, &["throughput", "objects_per_second"]);
    assert!(seconds > 0.0 && rate > 0.0, "{report:#}");
    assert!((rate - 80.0 / seconds).abs() <= 0.01 * rate + 1.0, "{report:#}");
    assert!(number(&report, &["throughput", "first_arrival_seconds"]) <= seconds);

    // Footprint: the four services, the API servers and the bench itself, with memory and CPU.
    let processes = report["footprint"]["processes"].as_array().unwrap();
    for service in [
        "flotilla-detector",
        "flotilla-scheduler",
        "flotilla-execution",
        "flotilla-dependency-distributor",
        "control-plane",
        "flotilla bench",
    ] {
        let process = processes
            .iter()
            .find(|p| p["name"] == service)
            .unwrap_or_else(|| panic!("{service} missing in {report:#}"));
        assert!(process["rss_peak_mib"].as_f64().unwrap() > 1.0, "{process}");
        assert!(process["rss_after_mib"].as_f64().unwrap() > 1.0, "{process}");
        assert!(process["cpu_seconds"].as_f64().unwrap() >= 0.0, "{process}");
    }
    let total = number(&report, &["footprint", "services_total", "rss_peak_mib"]);
    assert!(total > 4.0 && total < 4096.0, "{report:#}");
    // The whole machine was busy at least as long as the processes it ran were, together.
    let busy = number(&report, &["footprint", "machine_cpu", "busy_seconds"]);
    let processes_cpu: f64 = processes.iter().map(|p| p["cpu_seconds"].as_f64().unwrap()).sum();
    assert!(busy > 0.0 && busy + 0.5 >= processes_cpu * 0.9, "{report:#}");
    let per_object = number(
        &report,
        &["footprint", "machine_cpu", "busy_ms_per_member_object"],
    );
    assert!(
        (per_object - busy * 1000.0 / 80.0).abs() <= 0.01 * per_object + 0.01,
        "{report:#}"
    );

    // Policy change: eager moves every template; Lazy writes nothing.
    assert_eq!(number(&report, &["policy_change", "templates"]), 10.0);
    assert!(number(&report, &["policy_change", "eager", "seconds"]) > 0.0);
    assert!(
        number(&report, &["policy_change", "eager", "member_writes"]) >= 20.0,
        "{report:#}"
    );
    assert_eq!(
        number(&report, &["policy_change", "lazy", "member_writes"]),
        0.0,
        "{report:#}"
    );
    assert_eq!(
        number(&report, &["policy_change", "lazy", "binding_spec_writes"]),
        0.0,
        "{report:#}"
    );
    assert_eq!(report["policy_change"]["lazy_ok"], true);
}

/// The pids of the running processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                // Fields after the command (which may hold spaces) start after the last ')'.
                .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.to_owned()))
                .and_then(|rest| rest.split_whitespace().nth(1).map(str::to_owned))
                .is_some_and(|ppid| ppid == parent.to_string())
        })
        .collect()
}

/// Whether `pid` is still a live (non-zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// SIGTERM in the middle of a run stops the embedded installation: every child process is gone
/// once `flotilla bench` has exited, its temporary data dir is removed, and the command fails
/// saying it was interrupted.
#[test]
fn sigterm_stops_the_embedded_installation() {
    use std::io::{BufRead, BufReader};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    let tmp = tempfile::tempdir().unwrap();
    let flotilla = flotilla_e2e::binaries::binary("flotilla");
    let mut child = Command::new(&flotilla)
        .args([
            "bench",
            "--scenario",
            "throughput",
            "--templates",
            "3000",
            "--members",
            "2",
        ])
        .arg("--bin-dir")
        .arg(flotilla_e2e::binaries::bin_dir())
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let (stderr, lines) = (child.stderr.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        })
    };
    // Wait until the scenario runs: the installation is up and creating templates.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !lines.lock().unwrap().iter().any(|l| l.starts_with("throughput:")) {
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the throughput scenario did not start:\n{}",
            lines.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let children = children_of(child.id());
    assert!(
        children.len() >= 3,
        "expected the API servers and services as children, found {children:?}"
    );
    // ADR 0030: the services run without transparent huge pages; the API servers keep them
    // (where the kernel has them at all).
    let kernel_has_thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
    let mut services = std::collections::BTreeSet::new();
    for pid in &children {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
        };
        let Some(name) = field("Name:") else { continue };
        let apiserver = name.starts_with("flotilla-apiser");
        if !apiserver {
            services.insert(name.clone());
        }
        // The line exists from Linux 5.0 on.
        if let Some(thp) = field("THP_enabled:") {
            let expected = if apiserver && kernel_has_thp { "1" } else { "0" };
            assert_eq!(thp, expected, "THP_enabled of {name} (pid {pid})");
        }
        // Off from the first allocation on: not a huge page even in the arena mimalloc maps
        // before `main`.
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let huge = rollup.lines().find_map(|l| l.strip_prefix("AnonHugePages:"));
        if let (false, Some(huge)) = (apiserver, huge) {
            assert_eq!(huge.trim(), "0 kB", "AnonHugePages of {name} (pid {pid})");
        }
    }
    // Each under its own name (at most 15 characters in `Name:`), also after executing itself
    // again to start without huge pages.
    let expected: std::collections::BTreeSet<String> = [
        "flotilla-depend",
        "flotilla-detect",
        "flotilla-execut",
        "flotilla-schedu",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(services, expected, "the services among the children {children:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!(
                "flotilla bench did not exit within 60 s of SIGTERM:\n{}",
                lines.lock().unwrap().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    reader.join().unwrap();
    let left: Vec<u32> = children.into_iter().filter(|pid| alive(*pid)).collect();
    for pid in &left {
        // Do not leak them when this test fails.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(*pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let stderr = lines.lock().unwrap().join("\n");
    assert!(
        left.is_empty(),
        "children still running after the bench exited: {left:?}"
    );
    assert!(!status.success(), "an interrupted run must fail:\n{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let dirs: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|name| name.to_string_lossy().starts_with("flotilla-bench-"))
        .collect();
    assert!(dirs.is_empty(), "the data dir was left behind: {dirs:?}");
}

/// `flotilla-apiserver-bench` against a real `flotilla-apiserver`, every phase at a tiny size:
/// each prints its row, with operations done and the server's CPU per operation read.
#[test]
fn apiserver_bench_prints_every_phase() {
    let bench = flotilla_e2e::binaries::binary("flotilla-apiserver-bench");
    let output = Command::new(&bench)
        .args([
            "--clients",
            "2",
            "--seconds",
            "1",
            "--fanout-watchers",
            "0",
            "--watchers",
            "2",
            "--watch-events",
            "5",
            "--list-objects",
            "300",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "flotilla-apiserver-bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Each row is a name and a result, the result after the last run of two spaces.
    let row = |name: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit_once("  "))
            .map(|(_, value)| value.trim().to_owned())
            .unwrap_or_else(|| panic!("no row {name:?} in:\n{stdout}"))
    };
    let positive = |name: &str| {
        let value = row(name);
        let number: f64 = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {value:?} is not a number in:\n{stdout}"));
        assert!(number > 0.0, "{name}: {value} in:\n{stdout}");
    };
    for phase in ["durable creates/s", "durable updates/s", "gets/s"] {
        positive(&format!("{phase}, 1 KiB, 2 clients"));
    }
    for op in ["create", "update", "get"] {
        positive(&format!("  server CPU ms per {op}, 2 clients"));
    }
    positive("fan-out: creates/s, 16 clients, 0 watchers");
    // Two watchers, five events each.
    assert_eq!(row("watch events received"), "10", "{stdout}");
    positive("watch delivery p99, 2 watchers (ms)");
    let list = stdout
        .lines()
        .find_map(|l| l.strip_prefix("list all "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no list row in:\n{stdout}"));
    assert!(list >= 300, "listed {list} objects:\n{stdout}");
}
