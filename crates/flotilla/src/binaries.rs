//! Finding the binaries `flotilla up` starts, and building them first when `flotilla` runs
//! from a cargo workspace checkout (`cargo run --release -p flotilla -- up`) and a source file
//! they are built from is newer than they are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde_json::Value;

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

/// The source files each workspace package's binaries are built from: its own files (except
/// its tests and benchmarks) and those of the workspace packages it depends on (normal and
/// build dependencies), plus the workspace manifest, the lock file and `proto/`.
#[derive(Clone, Debug, Default)]
pub struct SourceGraph {
    /// Package name -> its directory.
    dirs: BTreeMap<String, PathBuf>,
    /// Package name -> the workspace packages it depends on.
    deps: BTreeMap<String, BTreeSet<String>>,
    root: PathBuf,
}

impl SourceGraph {
    /// Reads the graph from `cargo metadata --no-deps` output (`metadata`).
    pub fn from_metadata(root: &Path, metadata: &Value) -> Self {
        let mut graph = SourceGraph {
            root: root.to_path_buf(),
            ..Default::default()
        };
        for package in metadata["packages"].as_array().into_iter().flatten() {
            let Some(name) = package["name"].as_str() else {
                continue;
            };
            let Some(dir) = package["manifest_path"]
                .as_str()
                .and_then(|m| Path::new(m).parent())
            else {
                continue;
            };
            graph.dirs.insert(name.to_owned(), dir.to_path_buf());
            let deps = package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["path"].is_string() && d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str().map(str::to_owned))
                .collect();
            graph.deps.insert(name.to_owned(), deps);
        }
        graph
    }

    /// Reads the graph of the workspace at `root` with `cargo metadata` (no network, no build).
    pub fn of_workspace(root: &Path) -> Option<Self> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = Command::new(cargo)
            .current_dir(root)
            .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        let metadata: Value = serde_json::from_slice(&output.stdout).ok()?;
        Some(Self::from_metadata(root, &metadata))
    }

    /// The workspace packages `package` is built from, itself included.
    pub fn closure(&self, package: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![package.to_owned()];
        while let Some(next) = stack.pop() {
            if self.dirs.contains_key(&next) && seen.insert(next.clone()) {
                stack.extend(self.deps.get(&next).into_iter().flatten().cloned());
            }
        }
        seen
    }

    /// The newest modification time among the files `package`'s binaries are built from.
    pub fn newest_source(&self, package: &str) -> Option<SystemTime> {
        let mut newest = None;
        let mut consider = |path: &Path| {
            if let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) {
                newest = newest.max(Some(modified));
            }
        };
        consider(&self.root.join("Cargo.toml"));
        consider(&self.root.join("Cargo.lock"));
        walk(&self.root.join("proto"), &mut consider);
        for member in self.closure(package) {
            let Some(dir) = self.dirs.get(&member) else {
                continue;
            };
            consider(&dir.join("Cargo.toml"));
            consider(&dir.join("build.rs"));
            walk(&dir.join("src"), &mut consider);
        }
        newest
    }
}

fn walk(dir: &Path, consider: &mut impl FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, consider),
            Ok(_) => consider(&path),
            Err(_) => {}
        }
    }
}

/// The packages among `packages` whose binary in `bin_dir` is missing or older than a source
/// file it is built from: the ones `flotilla up` must build before it starts anything.
pub fn stale<'a>(graph: &SourceGraph, bin_dir: &Path, packages: &[&'a str]) -> Vec<&'a str> {
    packages
        .iter()
        .copied()
        .filter(|package| {
            let built = std::fs::metadata(bin_dir.join(package)).and_then(|m| m.modified());
            match (built, graph.newest_source(package)) {
                (Ok(built), Some(newest)) => built < newest,
                _ => true,
            }
        })
        .collect()
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

    /// A workspace of three packages: `app` (a binary) depends on `lib`; `tool` depends on
    /// nothing.
    fn fake_workspace() -> (tempfile::TempDir, SourceGraph) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (package, deps) in [("app", vec!["lib"]), ("lib", vec![]), ("tool", vec![])] {
            std::fs::create_dir_all(root.join(package).join("src")).unwrap();
            std::fs::create_dir_all(root.join(package).join("tests")).unwrap();
            std::fs::write(root.join(package).join("Cargo.toml"), "").unwrap();
            std::fs::write(root.join(package).join("src/lib.rs"), "").unwrap();
            std::fs::write(root.join(package).join("tests/t.rs"), "").unwrap();
            let _ = deps;
        }
        std::fs::write(root.join("Cargo.toml"), "").unwrap();
        std::fs::write(root.join("Cargo.lock"), "").unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let package = |name: &str, deps: &[(&str, &str)]| {
            serde_json::json!({
                "name": name,
                "manifest_path": root.join(name).join("Cargo.toml").display().to_string(),
                "dependencies": deps.iter().map(|(d, kind)| serde_json::json!({
                    "name": d,
                    "path": root.join(d).display().to_string(),
                    "kind": if *kind == "normal" { serde_json::Value::Null } else { serde_json::json!(kind) },
                })).chain([serde_json::json!({"name": "serde", "kind": null})]).collect::<Vec<_>>(),
            })
        };
        let metadata = serde_json::json!({"packages": [
            package("app", &[("lib", "normal"), ("tool", "dev")]),
            package("lib", &[]),
            package("tool", &[]),
        ]});
        let graph = SourceGraph::from_metadata(root, &metadata);
        (dir, graph)
    }

    fn age(path: &Path, seconds_ago: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - std::time::Duration::from_secs(seconds_ago))
            .unwrap();
    }

    #[test]
    fn closure_follows_normal_and_build_dependencies_only() {
        let (_dir, graph) = fake_workspace();
        assert_eq!(graph.closure("app"), ["app", "lib"].map(String::from).into());
        assert_eq!(graph.closure("tool"), ["tool"].map(String::from).into());
        assert!(graph.closure("unknown").is_empty());
    }

    #[test]
    fn binaries_newer_than_their_sources_need_no_build() {
        let (dir, graph) = fake_workspace();
        let root = dir.path();
        let bin = root.join("bin");
        // Sources an hour old, binaries a minute old: nothing to build.
        for file in [
            "Cargo.toml",
            "Cargo.lock",
            "app/Cargo.toml",
            "app/src/lib.rs",
            "lib/Cargo.toml",
            "lib/src/lib.rs",
            "tool/Cargo.toml",
            "tool/src/lib.rs",
        ] {
            age(&root.join(file), 3600);
        }
        for name in ["app", "tool"] {
            std::fs::write(bin.join(name), "").unwrap();
            age(&bin.join(name), 60);
        }
        assert!(stale(&graph, &bin, &["app", "tool"]).is_empty());
        // A test file or a dev-dependency is not built into the binary.
        std::fs::write(root.join("app/tests/t.rs"), "// edited").unwrap();
        std::fs::write(root.join("tool/src/lib.rs"), "// edited").unwrap();
        assert_eq!(stale(&graph, &bin, &["app", "tool"]), vec!["tool"]);
        age(&root.join("tool/src/lib.rs"), 3600);
        // A dependency's source is.
        std::fs::write(root.join("lib/src/lib.rs"), "// edited").unwrap();
        assert_eq!(stale(&graph, &bin, &["app", "tool"]), vec!["app"]);
        age(&root.join("lib/src/lib.rs"), 3600);
        // So are the lock file and a missing binary.
        std::fs::write(root.join("Cargo.lock"), "# edited").unwrap();
        assert_eq!(stale(&graph, &bin, &["app", "tool"]), vec!["app", "tool"]);
        age(&root.join("Cargo.lock"), 3600);
        std::fs::remove_file(bin.join("tool")).unwrap();
        assert_eq!(stale(&graph, &bin, &["app", "tool"]), vec!["tool"]);
    }

    #[test]
    fn the_real_workspace_graph() {
        let graph = SourceGraph::of_workspace(&workspace()).unwrap();
        let closure = graph.closure(SCHEDULER);
        assert!(closure.contains("flotilla-api"), "{closure:?}");
        assert!(closure.contains("flotilla-proto"), "{closure:?}");
        assert!(
            !closure.contains("flotilla"),
            "the CLI is not built into the scheduler"
        );
        assert!(!closure.contains("flotilla-e2e"));
        assert!(graph.newest_source(SCHEDULER).is_some());
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
