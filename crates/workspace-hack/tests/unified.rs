//! Every way of building the workspace enables the same features of every dependency, so they
//! all share one set of compiled dependencies: `cargo run -p flotilla -- up` (flotilla alone),
//! the build `flotilla up` runs (the API server and the four services), `cargo build
//! --workspace`, `cargo test --workspace` (dev-dependencies too), the e2e harness's build (the
//! six binaries) and `cargo test -p flotilla-e2e`. Read from `cargo tree` (no build); a
//! failure names the crate and the features to add to this crate's `Cargo.toml`.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Package (`name version`) -> the feature sets it is built with in one build (a crate built
/// for the host, by a build script or a proc-macro, and for the target may differ).
type Features = BTreeMap<String, BTreeSet<String>>;

fn features(packages: &[&str], edges: &str) -> Features {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .args(["-e", edges, "-f", "{p}|{f}"]);
    for package in packages {
        command.args(["-p", package]);
    }
    if packages.is_empty() {
        command.arg("--workspace");
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut features = Features::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let line = line.replace(" (*)", "").replace(" (proc-macro)", "");
        let Some((package, enabled)) = line.split_once('|') else {
            continue;
        };
        let package: Vec<&str> = package.split_whitespace().take(2).collect();
        features
            .entry(package.join(" "))
            .or_default()
            .insert(enabled.trim().to_owned());
    }
    features
}

const SERVICES: [&str; 5] = [
    "flotilla-apiserver",
    "flotilla-detector",
    "flotilla-scheduler",
    "flotilla-execution",
    "flotilla-dependency-distributor",
];

#[test]
fn every_way_of_building_enables_the_same_features() {
    let reference = features(&[], "normal,build");
    let harness: Vec<&str> = SERVICES.iter().copied().chain(["flotilla"]).collect();
    let mut builds: Vec<(String, Features)> = vec![
        ("cargo test --workspace".into(), features(&[], "normal,build,dev")),
        (
            "cargo run -p flotilla".into(),
            features(&["flotilla"], "normal,build"),
        ),
        (
            "flotilla up's build of the services".into(),
            features(&SERVICES, "normal,build"),
        ),
        (
            "the e2e harness's build".into(),
            features(&harness, "normal,build"),
        ),
        (
            "cargo test -p flotilla-e2e".into(),
            features(&["flotilla-e2e"], "normal,build,dev"),
        ),
    ];
    for service in SERVICES {
        builds.push((
            format!("cargo build -p {service}"),
            features(&[service], "normal,build"),
        ));
    }
    // A build reuses what `cargo build --workspace` compiled when it builds every crate with a
    // feature set the workspace build also compiled it with (a crate can be compiled twice
    // there: for build scripts and proc-macros, and for the binaries).
    let mut differences = Vec::new();
    for (build, found) in &builds {
        for (package, enabled) in found {
            // Crates only tests use (pretty_assertions, ...) have nothing to share.
            let Some(expected) = reference.get(package).cloned() else {
                continue;
            };
            let extra: Vec<&String> = enabled.difference(&expected).collect();
            if !extra.is_empty() {
                differences.push(format!(
                    "{package}: {build} enables {extra:?}; `cargo build --workspace` enables {expected:?}"
                ));
            }
        }
    }
    // And `cargo test --workspace` compiles exactly what `cargo build --workspace` does.
    let tests = &builds[0].1;
    for (package, expected) in &reference {
        if tests.get(package).is_some_and(|enabled| enabled != expected) {
            differences.push(format!(
                "{package}: `cargo build --workspace` enables {expected:?}, `cargo test --workspace` enables {:?}",
                tests[package]
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "builds enable different features, so each compiles its own copy of these crates (and of \
         everything above them); list the union in crates/workspace-hack/Cargo.toml:\n{}",
        differences.join("\n")
    );
    // The comparison found the crates it is about.
    for package in ["tokio", "libc", "hyper-util", "jiff"] {
        assert!(
            reference.keys().any(|p| p.starts_with(&format!("{package} "))),
            "{package} not in the workspace's tree"
        );
    }
}
