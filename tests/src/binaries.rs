//! Building and locating the workspace's binaries.
//!
//! `cargo test` builds test targets, not necessarily every package's binaries, so the harness
//! runs `cargo build --bins` for the packages it needs once per test process (a no-op when they
//! are fresh). The binaries are then found next to the test executable's `deps/` directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Packages whose binaries end-to-end tests start.
const PACKAGES: &[&str] = &[
    "flotilla-apiserver",
    "flotilla-detector",
    "flotilla-scheduler",
    "flotilla-execution",
    "flotilla-dependency-distributor",
    "flotilla",
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory holding the binaries of the profile the tests run with.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("cannot locate the test executable: {e}"));
    // target/<profile>/deps/<test>-<hash>
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("unexpected test path {}", exe.display()))
}

/// Whether `key` is one of the variables cargo sets for the package being tested (not for
/// cargo itself, like `CARGO_HOME` or `CARGO_TARGET_DIR`).
fn is_package_variable(key: &str) -> bool {
    ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_"]
        .iter()
        .any(|prefix| key.starts_with(prefix))
        || [
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "OUT_DIR",
        ]
        .contains(&key)
}

fn workspace_has(package: &str) -> bool {
    flotilla::binaries::package_exists(&workspace_root(), package)
}

/// Builds every binary the harness may start (once per process) and returns the path of `name`.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<bool>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(false));
    let mut done = built.lock().unwrap_or_else(|p| p.into_inner());
    if !*done {
        let release = bin_dir().ends_with("release");
        let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
        command
            .current_dir(workspace_root())
            .args(["build", "--bins", "--quiet"]);
        // cargo runs this test with the variables it sets for the test's own package
        // (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, ...). Build scripts such as ring's declare
        // `rerun-if-env-changed` on them, and cargo compares those against its own environment:
        // passing them on makes this build and the next `cargo test` invalidate each other, and
        // rebuild ring, rustls and kube every run.
        for (key, _) in std::env::vars_os() {
            let Some(key) = key.to_str() else { continue };
            if is_package_variable(key) {
                command.env_remove(key);
            }
        }
        if release {
            command.arg("--release");
        }
        for package in PACKAGES.iter().filter(|p| workspace_has(p)) {
            command.args(["-p", package]);
        }
        let status = command
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo build: {e}"));
        assert!(status.success(), "cargo build of the flotilla binaries failed");
        *done = true;
    }
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "binary {} not found after building",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    use super::is_package_variable;

    #[test]
    fn package_variables_are_told_apart_from_configuration() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_EXE_flotilla",
            "CARGO_TARGET_TMPDIR",
        ] {
            assert!(is_package_variable(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_JOBS",
            "PATH",
        ] {
            assert!(!is_package_variable(name), "{name}");
        }
    }
}
