//! Finding the binaries `flotilla up` starts, and building them first when `flotilla` runs
//! from a cargo workspace checkout (`cargo run --release -p flotilla -- up`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The API server binary.
pub const APISERVER: &str = "flotilla-apiserver";
/// The detector binary.
pub const DETECTOR: &str = "flotilla-detector";
/// The scheduler binary.
pub const SCHEDULER: &str = "flotilla-scheduler";
/// The execution binary.
pub const EXECUTION: &str = "flotilla-execution";
/// The dependency-distributor binary.
pub const DEPENDENCY_DISTRIBUTOR: &str = "flotilla-dependency-distributor";

/// Every package `flotilla up` runs a binary of (each package's binary has its name).
pub const PACKAGES: [&str; 5] = [APISERVER, DETECTOR, SCHEDULER, EXECUTION, DEPENDENCY_DISTRIBUTOR];

/// Errors building or finding binaries.
#[derive(Debug, thiserror::Error)]
pub enum BinariesError {
    /// cargo could not be run.
    #[error("cannot run {cargo}: {source}")]
    Cargo {
        /// The cargo program.
        cargo: String,
        /// Why.
        source: std::io::Error,
    },
    /// The build failed.
    #[error("`{command}` failed ({status}); fix the build errors above and run again")]
    Build {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
    },
    /// The workspace lacks a package `flotilla up` needs.
    #[error("package {package} is not in the workspace at {root}; update the checkout (git pull)")]
    NotInWorkspace {
        /// The package.
        package: String,
        /// The workspace root.
        root: String,
    },
    /// A binary is missing.
    #[error("{path} does not exist; build it (cargo build --release -p {name}) or pass --bin-dir")]
    Missing {
        /// The binary's name.
        name: String,
        /// Where it was looked for.
        path: String,
    },
}

/// A cargo workspace the running `flotilla` was built in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkout {
    /// The workspace root (holds `Cargo.toml` with `[workspace]`).
    pub root: PathBuf,
    /// The cargo profile of the running binary: `dev`, `release`, or a custom one.
    pub profile: String,
}

impl Checkout {
    /// The `cargo build` arguments selecting this checkout's profile.
    pub fn profile_args(&self) -> Vec<String> {
        match self.profile.as_str() {
            "dev" => vec![],
            "release" => vec!["--release".to_owned()],
            other => vec!["--profile".to_owned(), other.to_owned()],
        }
    }

    /// Whether the workspace has package `package` (`crates/<name without flotilla->`).
    pub fn has_package(&self, package: &str) -> bool {
        package_exists(&self.root, package)
    }
}

/// Whether the workspace at `root` has package `package`, by flotilla's layout: package
/// `flotilla-x` lives in `crates/x`, package `flotilla` in `crates/flotilla`.
pub fn package_exists(root: &Path, package: &str) -> bool {
    let dir = package.strip_prefix("flotilla-").unwrap_or(package);
    let manifest = root.join("crates").join(dir).join("Cargo.toml");
    std::fs::read_to_string(manifest).is_ok_and(|text| text.contains(&format!("name = \"{package}\"")))
}

/// The workspace checkout `exe` was built in, if it runs from the checkout's target directory:
/// `<target>/<profile dir>/flotilla` where `<target>` is `<root>/target` or `$CARGO_TARGET_DIR`.
/// `root` is the workspace this crate was compiled in; a binary copied or installed elsewhere
/// is not in a checkout.
pub fn checkout_of(exe: &Path, root: &Path, cargo_target_dir: Option<&Path>) -> Option<Checkout> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    if !manifest.contains("[workspace]") {
        return None;
    }
    let profile_dir = exe.parent()?;
    let target = profile_dir.parent()?;
    let in_target = target == root.join("target") || cargo_target_dir.is_some_and(|t| t == target);
    if !in_target {
        return None;
    }
    let profile = match profile_dir.file_name()?.to_str()? {
        "debug" => "dev".to_owned(),
        other => other.to_owned(),
    };
    Some(Checkout {
        root: root.to_path_buf(),
        profile,
    })
}

/// The checkout the running binary belongs to (see [`checkout_of`]).
pub fn current_checkout() -> Option<Checkout> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .ok()?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .and_then(|t| t.canonicalize().ok());
    checkout_of(&exe, &root, target_dir.as_deref())
}

/// Runs `cargo build` for `packages` in `checkout` with its profile; cargo's own progress goes
/// to the terminal. A no-op when the binaries are fresh.
pub fn build(checkout: &Checkout, packages: &[&str]) -> Result<(), BinariesError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args = vec!["build".to_owned()];
    args.extend(checkout.profile_args());
    for package in packages {
        args.push("-p".to_owned());
        args.push((*package).to_owned());
    }
    let status = Command::new(&cargo)
        .current_dir(&checkout.root)
        .args(&args)
        .status()
        .map_err(|source| BinariesError::Cargo {
            cargo: cargo.clone(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(BinariesError::Build {
            command: format!("{cargo} {}", args.join(" ")),
            status: status.to_string(),
        })
    }
}

/// The path of binary `name` in `dir`, which must exist.
pub fn locate(dir: &Path, name: &str) -> Result<PathBuf, BinariesError> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(BinariesError::Missing {
            name: name.to_owned(),
            path: path.display().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .unwrap()
    }

    #[test]
    fn recognises_binaries_in_the_checkouts_target_dir() {
        let root = workspace();
        let release = checkout_of(&root.join("target/release/flotilla"), &root, None).unwrap();
        assert_eq!(release.profile, "release");
        assert_eq!(release.profile_args(), vec!["--release"]);
        let dev = checkout_of(&root.join("target/debug/flotilla"), &root, None).unwrap();
        assert_eq!(dev.profile, "dev");
        assert!(dev.profile_args().is_empty());
        let custom = checkout_of(&root.join("target/bench/flotilla"), &root, None).unwrap();
        assert_eq!(custom.profile_args(), vec!["--profile", "bench"]);
        let elsewhere = Path::new("/opt/target");
        assert!(checkout_of(&elsewhere.join("release/flotilla"), &root, Some(elsewhere)).is_some());
        assert_eq!(
            checkout_of(Path::new("/usr/local/bin/flotilla"), &root, None),
            None
        );
        assert_eq!(
            checkout_of(
                &root.join("target/release/flotilla"),
                Path::new("/nonexistent"),
                None
            ),
            None
        );
    }

    #[test]
    fn finds_packages_by_layout() {
        let root = workspace();
        assert!(package_exists(&root, "flotilla"));
        assert!(package_exists(&root, "flotilla-api"));
        assert!(!package_exists(&root, "flotilla-no-such-package"));
    }

    #[test]
    fn missing_binaries_say_how_to_fix_it() {
        let error = locate(Path::new("/nonexistent"), SCHEDULER)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cargo build --release -p flotilla-scheduler"),
            "{error}"
        );
    }
}
