//! `flotilla soak --smoke`: the real binary kills every service, stops a member, kills the
//! control-plane API server, fires bad input and abuses gRPC, then verifies the end state; it
//! must exit successfully with every check passed.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::process::Command;

use serde_json::Value;

#[test]
fn soak_smoke_survives_every_fault() {
    let flotilla = flotilla_e2e::binaries::binary("flotilla");
    let output = Command::new(&flotilla)
        .args(["soak", "--smoke", "--json", "--bin-dir"])
        // The harness built every binary; a build by `flotilla` itself (another package set,
        // other feature unification) would rebuild dependencies.
        .arg(flotilla_e2e::binaries::bin_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "flotilla soak --smoke failed:\n{stderr}");
    let outcome: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the JSON outcome ({e}):\n{stderr}"));
    let checks = outcome["checks"].as_array().unwrap();
    for scenario in [
        "kill -9 services",
        "kill -9 control plane",
        "member outage",
        "workload",
        "bad input storm",
        "grpc abuse",
        "convergence",
        "acknowledged writes",
        "no orphans",
        "lazy activation",
        "suspended dispatching",
        "no crashes",
        "services healthy",
    ] {
        let check = checks
            .iter()
            .find(|c| c["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no {scenario:?} check in {outcome:#}"));
        assert_eq!(check["passed"], true, "{check}");
    }
    assert!(!outcome["grpc"].as_array().unwrap().is_empty());
}
