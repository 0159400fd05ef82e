//! Apply-once-only end to end (issue 8, seed `apply-once-only.md`): flotilla-execution's
//! `--apply-once-only=off|on|force`, the per-template `flotilla.io/apply-once-only` annotation,
//! and dispatch suspension winning over both; every assertion is on a member cluster, with
//! execution restarted between steps to prove the decision needs no memory of past events.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::time::Duration;

use flotilla_api::Work;
use flotilla_api::well_known::execution_namespace;
use flotilla_e2e::fixtures::{self, deployment_yaml, image_of, member_deployment};
use flotilla_e2e::wait::stays;
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// How long "execution leaves the member alone" is watched.
const QUIET: Duration = Duration::from_secs(3);

/// The annotation that overrides the global mode for one template.
const MODE_ANNOTATION: &str = "flotilla.io/apply-once-only";

/// The global mode of a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Off,
    On,
    Force,
}

impl Mode {
    fn flag(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::On => "on",
            Mode::Force => "force",
        }
    }
}

/// An installation whose execution runs with `--apply-once-only=<mode>` and `members` members.
async fn start(mode: Mode, members: usize) -> Env {
    Env::start(EnvOptions {
        members,
        service_args: BTreeMap::from([(
            Service::Execution,
            vec!["--apply-once-only".to_owned(), mode.flag().to_owned()],
        )]),
        ..Default::default()
    })
    .await
}

/// A PropagationPolicy placing every Deployment named in `templates` on `clusters`, with
/// `extra` appended under `spec:`.
fn policy_yaml(templates: &[&str], clusters: &[&str], extra: &str) -> String {
    let selectors: String = templates
        .iter()
        .map(|t| format!("  - apiVersion: apps/v1\n    kind: Deployment\n    name: {t}\n"))
        .collect();
    format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: apps
  namespace: default
spec:
  resourceSelectors:
{selectors}  placement:
    clusterAffinity:
      clusterNames: [{}]
{extra}"#,
        clusters.join(", ")
    )
}

/// A Deployment template, optionally annotated with a per-template mode.
fn template(name: &str, image: &str, mode: Option<&str>) -> String {
    let yaml = deployment_yaml("default", name, 1, image);
    match mode {
        None => yaml,
        Some(mode) => yaml.replacen(
            "metadata:\n",
            &format!("metadata:\n  annotations:\n    {MODE_ANNOTATION}: \"{mode}\"\n"),
            1,
        ),
    }
}

async fn image(member: &Client, name: &str) -> Option<String> {
    member_deployment(member, "default", name)
        .await
        .as_ref()
        .and_then(image_of)
}

async fn wait_image(member: &Client, name: &str, want: &str, what: &str) {
    fixtures::wait_member_deployment(member, "default", name, what, |d| {
        image_of(d).as_deref() == Some(want)
    })
    .await;
}

/// Changes the member object's image from the member side (someone else's edit).
async fn patch_member_image(member: &Client, name: &str, new_image: &str) {
    let api: Api<Deployment> = Api::namespaced(member.clone(), "default");
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": new_image}]}}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("member-side patch of {name}: {e}"));
}

/// Deletes the member object from the member side, and waits until that object (its uid) is
/// gone. Where execution re-creates it (modes off and on), a new object of the same name may be
/// there before any read sees the name free: waiting for the name to be free would be waiting
/// on that race.
async fn delete_member_object(member: &Client, name: &str) {
    let api: Api<Deployment> = Api::namespaced(member.clone(), "default");
    let deleted = member_deployment(member, "default", name)
        .await
        .and_then(|d| d.metadata.uid)
        .unwrap_or_else(|| panic!("member-side delete of {name}: it is not there"));
    let precondition = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(deleted.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete(name, &precondition)
        .await
        .unwrap_or_else(|e| panic!("member-side delete of {name}: {e}"));
    flotilla_e2e::eventually("the member-side deletion", fixtures::TIMEOUT, || async {
        member_deployment(member, "default", name)
            .await
            .is_none_or(|d| d.metadata.uid.as_ref() != Some(&deleted))
    })
    .await;
}

/// Waits until execution has marked the Work of `cluster` for Deployment `name` suspended.
async fn wait_work_suspended(cp: &Client, cluster: &str, name: &str) {
    let api: Api<Work> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    flotilla_e2e::eventually(
        &format!("the Work of {name} in {cluster} to be suspended"),
        fixtures::TIMEOUT,
        || async {
            let works = api
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            works.iter().any(|w| {
                w.spec
                    .workload
                    .manifests
                    .first()
                    .is_some_and(|m| m["metadata"]["name"] == name)
                    && w.spec.suspend_dispatching == Some(true)
                    && w.status.as_ref().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .any(|c| c.type_ == "Dispatching" && c.status == "False")
                    })
            })
        },
    )
    .await;
}

async fn keeps_image(member: &Client, name: &str, want: &str, what: &str) {
    stays(what, QUIET, || async {
        image(member, name).await.as_deref() == Some(want)
    })
    .await;
}

async fn stays_deleted(member: &Client, name: &str, what: &str) {
    stays(what, QUIET, || async {
        member_deployment(member, "default", name).await.is_none()
    })
    .await;
}

/// The whole story for one global mode: create, drift, restart, template update, deletion,
/// restart, next template change.
async fn walk(mode: Mode) {
    let mut env = start(mode, 1).await;
    let cp = env.control_plane_client().await;
    let member = env.member_client(1).await;
    fixtures::apply(&cp, &policy_yaml(&["web"], &["member1"], "")).await;

    // Create: the object appears.
    fixtures::apply(&cp, &template("web", "app:v1", None)).await;
    wait_image(&member, "web", "app:v1", "web created in member1").await;

    // Drift from the member side: off reverts it, on/force keep it.
    patch_member_image(&member, "web", "app:manual").await;
    match mode {
        Mode::Off => wait_image(&member, "web", "app:v1", "the drift to be reverted").await,
        Mode::On | Mode::Force => keeps_image(&member, "web", "app:manual", "the manual change stays").await,
    }
    // The same after a restart of execution (the decision is read from objects only).
    env.restart(Service::Execution).await;
    let drifted = if mode == Mode::Off { "app:v1" } else { "app:manual" };
    keeps_image(&member, "web", drifted, "the same outcome after a restart").await;

    // A template update reaches the member in every mode, replacing the manual change.
    fixtures::apply(&cp, &template("web", "app:v2", None)).await;
    wait_image(&member, "web", "app:v2", "the template update").await;

    // Deletion from the member side: off/on re-create, force leaves it deleted.
    delete_member_object(&member, "web").await;
    match mode {
        Mode::Off | Mode::On => wait_image(&member, "web", "app:v2", "web re-created").await,
        Mode::Force => stays_deleted(&member, "web", "web stays deleted (force)").await,
    }
    env.restart(Service::Execution).await;
    match mode {
        Mode::Off | Mode::On => keeps_image(&member, "web", "app:v2", "web present after a restart").await,
        Mode::Force => stays_deleted(&member, "web", "web stays deleted after a restart (force)").await,
    }

    // The next template change applies again in every mode (force re-creates).
    fixtures::apply(&cp, &template("web", "app:v3", None)).await;
    wait_image(&member, "web", "app:v3", "the next template change").await;
}

#[tokio::test]
async fn mode_off_reverts_drift_and_recreates_deleted_objects() {
    walk(Mode::Off).await;
}

#[tokio::test]
async fn mode_on_keeps_drift_and_recreates_deleted_objects() {
    walk(Mode::On).await;
}

#[tokio::test]
async fn mode_force_keeps_drift_and_deletion_until_the_template_changes() {
    walk(Mode::Force).await;
}

#[tokio::test]
async fn template_annotation_overrides_the_global_mode() {
    // Global `off`. `nginx` is docs/apply-once-only.md's example (annotated `on`, with its own
    // policy); `plain` follows the global mode; `sticky` is annotated `force`.
    let env = start(Mode::Off, 1).await;
    let cp = env.control_plane_client().await;
    let member = env.member_client(1).await;
    let blocks = fixtures::doc_yaml_blocks("apply-once-only.md");
    assert_eq!(blocks.len(), 1, "docs/apply-once-only.md YAML examples");
    fixtures::apply(&cp, &blocks[0]).await;
    fixtures::apply(&cp, &policy_yaml(&["plain", "sticky"], &["member1"], "")).await;
    fixtures::apply(&cp, &template("plain", "app:v1", None)).await;
    fixtures::apply(&cp, &template("sticky", "app:v1", Some("force"))).await;
    wait_image(&member, "nginx", "nginx:1.25", "nginx created").await;
    for name in ["plain", "sticky"] {
        wait_image(&member, name, "app:v1", &format!("{name} created")).await;
    }

    // Drift: `plain` (global off) is reverted, `nginx` (annotated on) keeps it.
    patch_member_image(&member, "plain", "app:manual").await;
    patch_member_image(&member, "nginx", "nginx:manual").await;
    wait_image(&member, "plain", "app:v1", "plain (off) reverted").await;
    keeps_image(
        &member,
        "nginx",
        "nginx:manual",
        "nginx (annotated on) keeps the drift",
    )
    .await;

    // Deletion: `nginx` (on) is re-created from its Work, `sticky` (force) stays deleted.
    delete_member_object(&member, "nginx").await;
    delete_member_object(&member, "sticky").await;
    wait_image(
        &member,
        "nginx",
        "nginx:1.25",
        "nginx (on) re-created from its Work",
    )
    .await;
    stays_deleted(&member, "sticky", "sticky (force) stays deleted").await;

    // Changing the annotation is a template change: applied once under the new mode.
    fixtures::apply(&cp, &template("sticky", "app:v1", Some("off"))).await;
    wait_image(
        &member,
        "sticky",
        "app:v1",
        "sticky re-created under its new mode",
    )
    .await;
    patch_member_image(&member, "sticky", "app:manual").await;
    wait_image(&member, "sticky", "app:v1", "sticky (now off) reverted").await;
}

#[tokio::test]
async fn suspension_wins_over_apply_once_only_and_resume_applies_the_latest_once() {
    let env = start(Mode::On, 2).await;
    let cp = env.control_plane_client().await;
    let member1 = env.member_client(1).await;
    let member2 = env.member_client(2).await;
    let clusters = ["member1", "member2"];
    fixtures::apply(&cp, &policy_yaml(&["web"], &clusters, "")).await;
    fixtures::apply(&cp, &template("web", "app:v1", None)).await;
    wait_image(&member1, "web", "app:v1", "web in member1").await;
    wait_image(&member2, "web", "app:v1", "web in member2").await;

    let suspend = "  suspension:\n    dispatching: true\n";
    fixtures::apply(&cp, &policy_yaml(&["web"], &clusters, suspend)).await;
    for cluster in clusters {
        wait_work_suspended(&cp, cluster, "web").await;
    }
    // While suspended nothing is applied: not the new revision, not a re-creation.
    fixtures::apply(&cp, &template("web", "app:v2", None)).await;
    delete_member_object(&member1, "web").await;
    stays_deleted(&member1, "web", "member1 stays empty while suspended").await;
    keeps_image(&member2, "web", "app:v1", "member2 keeps v1 while suspended").await;

    // Resume: the latest revision is applied once everywhere...
    fixtures::apply(&cp, &policy_yaml(&["web"], &clusters, "")).await;
    wait_image(&member1, "web", "app:v2", "member1 gets v2 on resume").await;
    wait_image(&member2, "web", "app:v2", "member2 gets v2 on resume").await;
    // ... and only once: drift made afterwards stays (mode on).
    patch_member_image(&member2, "web", "app:manual").await;
    keeps_image(&member2, "web", "app:manual", "drift after the resume stays").await;
}
