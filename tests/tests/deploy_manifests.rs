//! The deployment manifests under `deploy/`: every plain manifest and both kustomize renderings
//! (the base and the example overlay) pass `kubectl apply --dry-run=server` against a real
//! flotilla-apiserver, and the Helm chart mirrors the plain manifests.
//!
//! Helm is not installed in CI (and tests download nothing), so the chart is not rendered here.
//! Instead `helm_chart_mirrors_the_plain_manifests` checks what would drift: the chart's CRDs
//! are the generated ones, each service's RBAC rules are the plain manifests' rules verbatim,
//! the chart emits the same kinds per service, passes the same flags, and its default values
//! (replicas, resources, security contexts) equal the plain manifests'. The plain manifests are
//! the ones proven against an API server.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use flotilla_e2e::ApiServer;
use flotilla_e2e::apiserver::ApiServerOptions;
use serde_json::Value;

const SERVICES: [&str; 4] = ["detector", "scheduler", "dependency-distributor", "execution"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn deploy(path: &str) -> PathBuf {
    repo().join("deploy").join(path)
}

/// Runs kubectl against `server`; returns stdout, panics with stderr on failure.
async fn kubectl(server: &ApiServer, args: &[&str]) -> String {
    let output = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run kubectl (is it installed?): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {} failed:\n{}\n{stdout}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    files
}

fn documents(text: &str) -> Vec<Value> {
    flotilla_e2e::fixtures::documents(text)
}

/// An apiserver with the CRDs and the `flotilla-system` namespace really applied (a dry run of
/// namespaced objects needs their namespace, and custom resources their CRDs).
async fn prepared_server(root: &Path) -> ApiServer {
    let server = ApiServer::start("deploy", root, &ApiServerOptions::default()).await;
    let crds = deploy("crds");
    kubectl(&server, &["apply", "-f", crds.to_str().unwrap()]).await;
    let namespace = deploy("manifests/namespace.yaml");
    kubectl(&server, &["apply", "-f", namespace.to_str().unwrap()]).await;
    server
}

async fn dry_run(server: &ApiServer, file: &Path) -> String {
    kubectl(
        server,
        &["apply", "--dry-run=server", "-f", file.to_str().unwrap()],
    )
    .await
}

#[tokio::test]
async fn plain_manifests_pass_a_server_side_dry_run() {
    let root = tempfile::tempdir().unwrap();
    let server = prepared_server(root.path()).await;
    let mut kinds = BTreeSet::new();
    for file in yaml_files(&deploy("crds"))
        .into_iter()
        .chain(yaml_files(&deploy("manifests")))
    {
        let out = dry_run(&server, &file).await;
        let text = std::fs::read_to_string(&file).unwrap();
        let docs = documents(&text);
        // One "... (server dry run)" line per object: nothing was skipped.
        assert_eq!(
            out.lines().filter(|l| l.ends_with("(server dry run)")).count(),
            docs.len(),
            "{}: {out}",
            file.display()
        );
        kinds.extend(docs.iter().map(|d| d["kind"].as_str().unwrap().to_owned()));
    }
    for kind in [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains(kind), "no {kind} in deploy/: {kinds:?}");
    }
    // A dry run writes nothing.
    let deployments = kubectl(
        &server,
        &["get", "deployments", "-n", "flotilla-system", "-o", "name"],
    )
    .await;
    assert_eq!(deployments.trim(), "", "the dry run created Deployments");
}

#[tokio::test]
async fn kustomize_base_and_example_overlay_render_and_pass_a_dry_run() {
    let root = tempfile::tempdir().unwrap();
    let server = prepared_server(root.path()).await;
    for (layer, image, scheduler_replicas, apply_once_only) in [
        ("kustomize/base", "ghcr.io/flotilla-dev/flotilla:0.1.0", 2, "off"),
        (
            "kustomize/overlays/example",
            "registry.example.com/platform/flotilla:0.1.0",
            2,
            "on",
        ),
    ] {
        let rendered = kubectl(&server, &["kustomize", deploy(layer).to_str().unwrap()]).await;
        let file = root.path().join(format!("{}.yaml", layer.replace('/', "-")));
        std::fs::write(&file, &rendered).unwrap();
        let docs = documents(&rendered);
        let out = dry_run(&server, &file).await;
        assert_eq!(
            out.lines().filter(|l| l.ends_with("(server dry run)")).count(),
            docs.len(),
            "{layer}: {out}"
        );
        let deployments: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Deployment").collect();
        assert_eq!(deployments.len(), 4, "{layer}");
        for deployment in &deployments {
            let container = &deployment["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(container["image"], image, "{layer}");
        }
        let scheduler = deployments
            .iter()
            .find(|d| d["metadata"]["name"] == "flotilla-scheduler")
            .unwrap();
        assert_eq!(scheduler["spec"]["replicas"], scheduler_replicas, "{layer}");
        let execution = deployments
            .iter()
            .find(|d| d["metadata"]["name"] == "flotilla-execution")
            .unwrap();
        let args = execution["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        assert!(
            args.contains(&format!("--apply-once-only={apply_once_only}")),
            "{layer}: {args}"
        );
        assert_eq!(
            docs.iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition")
                .count(),
            6
        );
    }
}

/// The `rules:` block of the first document of `kind` in a manifest or template text.
fn rules_block(text: &str, kind: &str) -> Option<String> {
    let doc = text
        .split("\n---\n")
        .find(|d| d.lines().any(|l| l == format!("kind: {kind}")))?;
    let start = doc.find("rules:\n")? + "rules:\n".len();
    Some(doc[start..].trim_end().to_owned())
}

/// `kind:` lines at the start of a line, in order of appearance.
fn kinds_in(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .map(|k| k.trim().to_owned())
        .collect()
}

/// The flag names (`--grpc-addr`) a container passes.
fn flags(args: &Value) -> BTreeSet<String> {
    args.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().split('=').next().unwrap().to_owned())
        .collect()
}

#[test]
fn helm_chart_mirrors_the_plain_manifests() {
    let chart = deploy("helm/flotilla");
    // The chart installs exactly the generated CRDs.
    let generated: Vec<PathBuf> = yaml_files(&deploy("crds"));
    let packaged: Vec<PathBuf> = yaml_files(&chart.join("crds"));
    let names = |files: &[PathBuf]| -> Vec<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        names(&generated),
        names(&packaged),
        "copy deploy/crds/*.yaml to the chart's crds/"
    );
    for (a, b) in generated.iter().zip(&packaged) {
        assert_eq!(
            std::fs::read_to_string(a).unwrap(),
            std::fs::read_to_string(b).unwrap(),
            "{} differs from {}: copy deploy/crds/*.yaml to the chart's crds/",
            b.display(),
            a.display()
        );
    }

    let helpers = std::fs::read_to_string(chart.join("templates/_helpers.tpl")).unwrap();
    let values: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart.join("values.yaml")).unwrap()).unwrap();
    for service in SERVICES {
        let plain = std::fs::read_to_string(deploy(&format!("manifests/{service}.yaml"))).unwrap();
        let template = std::fs::read_to_string(chart.join(format!("templates/{service}.yaml"))).unwrap();
        for kind in ["ClusterRole", "Role"] {
            assert_eq!(
                rules_block(&plain, kind),
                rules_block(&template, kind),
                "{service}: the chart's {kind} rules differ from deploy/manifests/{service}.yaml"
            );
        }
        // The same kinds: the per-service template plus the shared service template.
        let mut chart_kinds = kinds_in(&template);
        chart_kinds.extend(kinds_in(&helpers));
        if rules_block(&plain, "Role").is_none() {
            chart_kinds.remove("Role");
            chart_kinds.remove("RoleBinding");
        }
        assert_eq!(kinds_in(&plain), chart_kinds, "{service}: kinds differ");

        let docs = documents(&plain);
        let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        // Every flag of the plain manifest is passed by the chart too.
        let chart_text = format!("{template}\n{helpers}");
        for flag in flags(&container["args"]) {
            assert!(
                chart_text.contains(&flag),
                "{service}: the chart does not pass {flag}"
            );
        }
        // Default values equal the plain manifests.
        let key = match service {
            "dependency-distributor" => "dependencyDistributor",
            other => other,
        };
        assert_eq!(
            values[key]["replicas"], deployment["spec"]["replicas"],
            "{service} replicas"
        );
        assert_eq!(
            values[key]["resources"], container["resources"],
            "{service} resources"
        );
        assert_eq!(
            values["podSecurityContext"], pod["securityContext"],
            "{service} pod securityContext"
        );
        assert_eq!(
            values["securityContext"], container["securityContext"],
            "{service} securityContext"
        );
    }
}
