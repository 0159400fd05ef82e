//! `flotilla bench --scenario all` with tiny sizes against the embedded installation: the real
//! binary, its JSON report, and sane values in every scenario.

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

    // Footprint: the four services and the API servers, with memory and CPU.
    let processes = report["footprint"]["processes"].as_array().unwrap();
    for service in [
        "flotilla-detector",
        "flotilla-scheduler",
        "flotilla-execution",
        "flotilla-dependency-distributor",
        "control-plane",
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
