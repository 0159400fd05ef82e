//! Conformance with the official Python client (`pip install kubernetes`; `.ci/run` installs
//! it): runs tests/python/conformance.py against a real server.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::process::Command;

#[test]
fn official_python_client_conformance() {
    let probe = Command::new("python3")
        .args(["-c", "import kubernetes"])
        .output()
        .expect("python3 is required");
    assert!(
        probe.status.success(),
        "the Python kubernetes client is missing: run `pip install kubernetes` ({})",
        String::from_utf8_lossy(&probe.stderr)
    );
    let server = common::shared();
    let out = Command::new("python3")
        .arg(common::fixture("python/conformance.py"))
        .arg(&server.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python conformance failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("python conformance: ok"));
}
