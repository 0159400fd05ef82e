//! Conformance with the official Python client: runs tests/python/conformance.py against a real
//! server. The client is the installed `kubernetes` package, or else one installed with pip
//! under `<target>/test-tools/python` (`.ci/run` installs it system-wide), so `cargo test`
//! needs no set-up beyond python3 and access to PyPI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::process::Command;

#[test]
fn official_python_client_conformance() {
    let path = common::python_client_path();
    let server = common::shared();
    let mut conformance = Command::new("python3");
    conformance
        .arg(common::fixture("python/conformance.py"))
        .arg(&server.kubeconfig);
    if let Some(path) = &path {
        conformance.env("PYTHONPATH", path);
    }
    let out = conformance.output().unwrap();
    assert!(
        out.status.success(),
        "python conformance failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("python conformance: ok"));
}
