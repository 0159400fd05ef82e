//! Conformance with kubectl (1.27 and 1.33, and the image's default dispatcher): create,
//! client-side apply, get (tables), label, scale, patch (json, merge), delete with cascade
//! policies, explain, `get -w` and strict field validation.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, rand_suffix, shared};

const KUBECTLS: [&str; 3] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    "kubectl",
];

fn deployment_yaml(ns: &str, image: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {ns}
  labels: {{app: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: nginx
        image: {image}
        ports: [{{containerPort: 80}}]
        env: [{{name: A, value: "1"}}]
"#
    )
}

#[track_caller]
fn run(server: &Server, kubectl: &str, args: &[&str]) -> String {
    let out = server.kubectl_with(kubectl, args, None);
    assert!(
        out.ok,
        "{kubectl} {args:?} failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

#[track_caller]
fn run_stdin(server: &Server, kubectl: &str, args: &[&str], stdin: &str) -> String {
    let out = server.kubectl_with(kubectl, args, Some(stdin));
    assert!(
        out.ok,
        "{kubectl} {args:?} failed:\n{}\n{}\ninput:\n{stdin}",
        out.stdout, out.stderr
    );
    out.stdout
}

fn create_ns(server: &Server, ns: &str) {
    server
        .kubectl_stdin(
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"),
        )
        .success();
}

fn create_cm(server: &Server, ns: &str, name: &str) {
    server
        .kubectl_stdin(
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\n"),
        )
        .success();
}

#[test]
fn kubectl_versions_create_apply_get_label_scale_patch_delete() {
    let server = shared();
    for kubectl in KUBECTLS {
        let ns = format!("kubectl-{}", rand_suffix());
        run_stdin(
            server,
            kubectl,
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"),
        );
        // create + get with the usual columns
        run_stdin(
            server,
            kubectl,
            &["create", "-f", "-"],
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}}}\ndata: {{a: '1', b: '2'}}\n"
            ),
        );
        let out = run(server, kubectl, &["get", "configmap", "settings", "-n", &ns]);
        let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, vec!["NAME", "DATA", "AGE"], "{kubectl}: {out}");
        assert!(
            out.lines().nth(1).unwrap().starts_with("settings   2"),
            "{kubectl}: {out}"
        );

        // client-side apply, twice
        let out = run_stdin(
            server,
            kubectl,
            &["apply", "-f", "-"],
            &deployment_yaml(&ns, "nginx:1.25", 2),
        );
        assert!(out.contains("deployment.apps/web created"), "{kubectl}: {out}");
        let out = run_stdin(
            server,
            kubectl,
            &["apply", "-f", "-"],
            &deployment_yaml(&ns, "nginx:1.26", 2),
        );
        assert!(out.contains("deployment.apps/web configured"), "{kubectl}: {out}");
        let out = run_stdin(
            server,
            kubectl,
            &["apply", "-f", "-"],
            &deployment_yaml(&ns, "nginx:1.26", 2),
        );
        assert!(out.contains("deployment.apps/web unchanged"), "{kubectl}: {out}");
        let got = run(
            server,
            kubectl,
            &[
                "get",
                "deploy",
                "web",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.template.spec.containers[0].image} {.metadata.generation} {.metadata.annotations}",
            ],
        );
        assert!(got.starts_with("nginx:1.26 2 "), "{kubectl}: {got}");
        assert!(got.contains("last-applied-configuration"), "{kubectl}: {got}");
        let out = run(server, kubectl, &["get", "deployments", "-n", &ns]);
        let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
            "{kubectl}: {out}"
        );

        // label, annotate, scale, patch
        run(
            server,
            kubectl,
            &["label", "deploy", "web", "-n", &ns, "tier=frontend"],
        );
        run(
            server,
            kubectl,
            &["annotate", "deploy", "web", "-n", &ns, "note=hello"],
        );
        run(
            server,
            kubectl,
            &["scale", "deploy", "web", "-n", &ns, "--replicas=4"],
        );
        run(
            server,
            kubectl,
            &[
                "patch",
                "deploy",
                "web",
                "-n",
                &ns,
                "--type=merge",
                "-p",
                r#"{"spec":{"minReadySeconds":5}}"#,
            ],
        );
        run(
            server,
            kubectl,
            &[
                "patch",
                "deploy",
                "web",
                "-n",
                &ns,
                "--type=json",
                "-p",
                r#"[{"op":"add","path":"/metadata/labels/patched","value":"yes"}]"#,
            ],
        );
        run(
            server,
            kubectl,
            &[
                "patch",
                "deploy",
                "web",
                "-n",
                &ns,
                "-p",
                r#"{"spec":{"revisionHistoryLimit":3}}"#,
            ],
        );
        let got = run(
            server,
            kubectl,
            &[
                "get",
                "deploy",
                "web",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.replicas} {.metadata.labels.tier} {.metadata.labels.patched} {.spec.minReadySeconds} {.spec.revisionHistoryLimit} {.metadata.annotations.note}",
            ],
        );
        assert_eq!(got, "4 frontend yes 5 3 hello", "{kubectl}");
        let shown = run(
            server,
            kubectl,
            &["get", "deploy", "-n", &ns, "-l", "tier=frontend", "-o", "name"],
        );
        assert_eq!(shown.trim(), "deployment.apps/web");
        let all = run(server, kubectl, &["get", "all", "-n", &ns]);
        assert!(all.contains("deployment.apps/web"), "{kubectl}: {all}");

        // explain uses the OpenAPI v3 documents
        let explain = run(server, kubectl, &["explain", "deployment.spec.replicas"]);
        assert!(
            explain.contains("replicas") && explain.contains("integer"),
            "{kubectl}: {explain}"
        );

        // strict field validation from the server
        let err = server
            .kubectl_with(
                kubectl,
                &["apply", "-f", "-"],
                Some(&format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bad, namespace: {ns}}}\nbogus: 1\n"
                )),
            )
            .failure()
            .to_owned();
        assert!(err.contains("unknown field \"bogus\""), "{kubectl}: {err}");

        // delete: the object and then the namespace
        run(server, kubectl, &["delete", "deploy", "web", "-n", &ns]);
        let err = server
            .kubectl_with(kubectl, &["get", "deploy", "web", "-n", &ns], None)
            .failure()
            .to_owned();
        assert!(
            err.contains("NotFound") || err.contains("not found"),
            "{kubectl}: {err}"
        );
        run(
            server,
            kubectl,
            &["delete", "namespace", &ns, "--wait=true", "--timeout=30s"],
        );
    }
}

#[test]
fn kubectl_delete_cascade_policies() {
    let server = shared();
    let ns = format!("cascade-{}", rand_suffix());
    create_ns(server, &ns);
    create_cm(server, &ns, "owner");
    let uid = server
        .kubectl(&["get", "cm", "owner", "-n", &ns, "-o", "jsonpath={.metadata.uid}"])
        .success()
        .to_owned();
    let dependent = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep\n  namespace: {ns}\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}}}\n"
    );
    server.kubectl_stdin(&["create", "-f", "-"], &dependent).success();
    server
        .kubectl(&["delete", "cm", "owner", "-n", &ns, "--cascade=orphan"])
        .success();
    // --cascade=orphan waits for the owner to go; the dependent stays without its reference.
    let refs = server
        .kubectl(&[
            "get",
            "cm",
            "dep",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.ownerReferences}",
        ])
        .success()
        .to_owned();
    assert_eq!(refs, "");
    server
        .kubectl(&["delete", "cm", "dep", "-n", &ns, "--cascade=foreground"])
        .success();
    server.kubectl(&["delete", "namespace", &ns]).success();
}

#[test]
fn kubectl_get_watch_streams_changes() {
    let server = shared();
    let ns = format!("watch-{}", rand_suffix());
    create_ns(server, &ns);
    create_cm(server, &ns, "before");
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", &server.kubeconfig)
        .args(["get", "configmaps", "-w", "-n", &ns, "--request-timeout=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut created = false;
    while !lines.iter().any(|l: &String| l.starts_with("after")) {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(line);
        }
        if !created && lines.iter().any(|l| l.starts_with("before")) {
            create_cm(server, &ns, "after");
            created = true;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl get -w did not show the new object: {lines:?}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(lines[0].starts_with("NAME"), "{lines:?}");
    server.kubectl(&["delete", "namespace", &ns]).success();
}
