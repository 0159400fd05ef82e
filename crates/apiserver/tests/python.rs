//! Conformance with the official Python client: runs tests/python/conformance.py against a real
//! server. The client is the installed `kubernetes` package, or else one installed with pip
//! under `<target>/test-tools/python` (`.ci/run` installs it system-wide), so `cargo test`
//! needs no set-up beyond python3 and access to PyPI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::PathBuf;
use std::process::Command;

/// Where a missing client is installed: `<target>/test-tools/python`.
fn tools_dir() -> PathBuf {
    // The test executable is <target>/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .expect("the test executable lives under <target>/<profile>/deps")
        .join("test-tools")
        .join("python")
}

/// Whether `import kubernetes` works with `PYTHONPATH` = `path` (or unset).
fn importable(path: Option<&PathBuf>) -> Result<(), String> {
    let mut probe = Command::new("python3");
    probe.args(["-c", "import kubernetes"]);
    if let Some(path) = path {
        probe.env("PYTHONPATH", path);
    }
    let out = probe.output().expect("python3 is required");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The `PYTHONPATH` under which the client imports: none when installed, else the tools
/// directory (installing it there first).
fn client_path() -> Option<PathBuf> {
    if importable(None).is_ok() {
        return None;
    }
    let dir = tools_dir();
    if importable(Some(&dir)).is_err() {
        let out = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--upgrade",
                "--target",
            ])
            .arg(&dir)
            .arg("kubernetes")
            .output()
            .expect("python3 is required");
        assert!(
            out.status.success(),
            "the Python kubernetes client is missing and `pip install --target {} kubernetes` failed; run `pip install kubernetes`:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Err(error) = importable(Some(&dir)) {
            panic!(
                "the kubernetes client installed under {} does not import: {error}",
                dir.display()
            );
        }
    }
    Some(dir)
}

#[test]
fn official_python_client_conformance() {
    let path = client_path();
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
