//! Component tests of apply-once-only (seed `apply-once-only.md`): drift made in the member
//! (reverted with `off`, kept with `on`/`force`), template updates (applied in every mode),
//! member objects deleted by someone else (re-created with `off`/`on`, left deleted with `force`
//! until the next template change), execution restarts between steps, and the per-template
//! `flotilla.io/apply-once-only` annotation overriding the global flag.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use flotilla_e2e::Service;
use flotilla_e2e::wait::stays;
use k8s_openapi::api::apps::v1::Deployment;

fn with_mode(mut template: Deployment, mode: Option<&str>) -> Deployment {
    if let Some(mode) = mode {
        template.metadata.annotations =
            Some([("flotilla.io/apply-once-only".to_owned(), mode.to_owned())].into());
    }
    template
}

/// Runs the seed's three stories against one template whose effective mode is `mode`.
async fn stories(env: &mut flotilla_e2e::Env, name: &str, annotation: Option<&str>, mode: &str) {
    let cp = env.control_plane_client().await;
    let template = create_template(&cp, &with_mode(deployment("apps", name, 1, "app:v1"), annotation)).await;
    create_binding(&cp, &template, &[("member1", 1)], |_| {}).await;
    wait_image(env, 1, "apps", name, "app:v1").await;

    // Story: someone patches the image in the member.
    patch_member_image(env, 1, "apps", name, "app:hotfix").await;
    if mode == "off" {
        wait_image(env, 1, "apps", name, "app:v1").await;
    } else {
        stays(
            &format!("{mode}: the member-side patch is kept"),
            QUIET,
            || async { image_of(&member_deployment(env, 1, "apps", name).await.unwrap()) == "app:hotfix" },
        )
        .await;
    }

    // A restart of execution changes nothing: decisions come from the objects.
    env.restart(Service::Execution).await;
    if mode != "off" {
        stays(&format!("{mode}: still kept after a restart"), QUIET, || async {
            image_of(&member_deployment(env, 1, "apps", name).await.unwrap()) == "app:hotfix"
        })
        .await;
    }

    // Story: the template changes: applied in every mode.
    set_template_image(&cp, "apps", name, "app:v2").await;
    wait_image(env, 1, "apps", name, "app:v2").await;

    // Story: someone deletes the member object.
    delete_member(env, 1, "apps", name).await;
    if mode == "force" {
        stays("force: a deleted object stays deleted", QUIET, || async {
            member_deployment(env, 1, "apps", name).await.is_none()
        })
        .await;
        env.restart(Service::Execution).await;
        stays("force: still deleted after a restart", QUIET, || async {
            member_deployment(env, 1, "apps", name).await.is_none()
        })
        .await;
        // The next template change brings it back.
        set_template_image(&cp, "apps", name, "app:v3").await;
        wait_image(env, 1, "apps", name, "app:v3").await;
    } else {
        wait_image(env, 1, "apps", name, "app:v2").await;
    }
}

#[tokio::test]
async fn global_off_with_per_template_on_and_force() {
    let mut env = start(1, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    stories(&mut env, "plain", None, "off").await;
    stories(&mut env, "once", Some("on"), "on").await;
    stories(&mut env, "forced", Some("force"), "force").await;
}

#[tokio::test]
async fn global_force_with_per_template_off() {
    let mut env = start(1, &["--apply-once-only", "force"]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    stories(&mut env, "global", None, "force").await;
    stories(&mut env, "override", Some("off"), "off").await;
}

#[tokio::test]
async fn global_on() {
    let mut env = start(1, &["--apply-once-only=on"]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    stories(&mut env, "web", None, "on").await;
}
