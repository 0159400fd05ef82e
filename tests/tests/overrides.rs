//! Override policies end to end (issue 16): Karmada's OverridePolicy and ClusterOverridePolicy
//! applied per member cluster when Works are rendered. Every assertion is on the member
//! clusters' objects (and on what users see: Works, binding conditions, events, `kubectl get`).
//!
//! Sections:
//!
//! 1. Karmada's documented examples, one test each (or one per small family of examples of one
//!    overrider), named after the example's title in Karmada's Override Policy user guide or its
//!    end-to-end tests: each applies the YAML of `docs/overrides.md` (the guide's set-up, then
//!    the example) on the smallest installation that renders Works, and checks a cluster the
//!    rules target, one they do not, and the Works' `applied-overrides` records.
//! 2. [`karmada_documented_overriders_in_the_user_guide`]: every block of the guide back to back,
//!    as a directory is applied: the examples compose (the Works record every rule, two policies
//!    on one field apply in name order, nothing fails); then edits apply at once (eager), a
//!    Cluster relabelled re-renders, a deleted policy's changes go, and a ClusterOverridePolicy
//!    changes a propagated namespace.
//! 3. [`bad_input_skips_the_rule_in_that_cluster_and_says_so`]: admission refusals, a rule that
//!    fails in one cluster only (condition and event on the binding naming the policy and the
//!    rule; the other rules and clusters applied; nothing else disturbed), the fix, and a
//!    `propagateDeps` dependency following an override policy.
//! 4. [`lazy_override_policy_rolls_out_gradually`]: `activationPreference: Lazy` with
//!    back-to-back applies, the detector killed between steps, and `flotilla activate --max`.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::process::Command;
use std::time::Duration;

use flotilla_api::Work;
use flotilla_api::well_known::execution_namespace;
use flotilla_e2e::fixtures::{self, TIMEOUT};
use flotilla_e2e::tools::stdout_of;
use flotilla_e2e::wait::{eventually, stays, wait_until};
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// How long "nothing changes" is watched once the change demonstrably reached the services.
const HOLD: Duration = Duration::from_secs(3);

/// Two members labelled `env: prod` and `env: dev`, as in the guide's set-up.
fn two_labelled_members() -> EnvOptions {
    EnvOptions {
        members: 2,
        member_labels: [
            (0, [("env".to_owned(), "prod".to_owned())].into()),
            (1, [("env".to_owned(), "dev".to_owned())].into()),
        ]
        .into(),
        ..Default::default()
    }
}

/// An installation with every service and two labelled members.
async fn start() -> (Env, Client) {
    let env = Env::start(two_labelled_members()).await;
    let cp = env.control_plane_client().await;
    (env, cp)
}

/// The YAML blocks of `docs/overrides.md`, in order.
fn guide() -> Vec<String> {
    fixtures::doc_yaml_blocks("overrides.md")
}

/// The guide's block that defines an object named `name` (a policy, or a template with its
/// policy).
fn guide_block(name: &str) -> String {
    let line = format!("  name: {name}");
    let mut found = guide().into_iter().filter(|b| b.lines().any(|l| l == line));
    let block = found
        .next()
        .unwrap_or_else(|| panic!("docs/overrides.md has no block naming {name}"));
    assert!(
        found.next().is_none(),
        "docs/overrides.md has two blocks naming {name}"
    );
    block
}

/// The guide's set-up on the smallest installation that renders Works (no dependency
/// distributor: the guide does not use `propagateDeps`): the Clusters' region, provider and
/// zone, then the namespace, the propagation policy and the templates.
async fn guide_installation() -> (Env, Client) {
    let env = Env::start(EnvOptions {
        services: vec![Service::Detector, Service::Scheduler, Service::Execution],
        ..two_labelled_members()
    })
    .await;
    let cp = env.control_plane_client().await;
    patch_cluster(&cp, "member1", json!({"spec": {"region": "cn-north-1"}})).await;
    patch_cluster(&cp, "member2", json!({"spec": {"provider": "aws", "zone": "us"}})).await;
    let blocks = guide();
    assert!(blocks[0].contains("kind: Namespace") && blocks[1].contains("name: myapp"));
    for block in &blocks[..2] {
        fixtures::apply(&cp, block).await;
    }
    (env, cp)
}

/// A template or member object: apiVersion, kind, namespace, name.
type Object = (&'static str, &'static str, &'static str, &'static str);

const MYAPP: Object = deployment("shop", "myapp");
const MYCONFIGMAP: Object = configmap("shop", "myconfigmap");

/// A named check of a member object.
type Check<'a> = (&'a str, &'a dyn Fn(&Value) -> bool);

/// Waits until member `i`'s object passes every named check; on timeout, names the checks that
/// fail and shows the object.
async fn settled(
    env: &Env,
    i: usize,
    (api_version, kind, namespace, name): Object,
    checks: &[Check<'_>],
) -> Value {
    let read = || member_object(env, i, api_version, kind, namespace, name);
    flotilla_e2e::wait::wait_until_explained(
        &format!("member{i} {kind} {namespace}/{name} to be rendered"),
        TIMEOUT,
        || async {
            let object = read().await?;
            checks.iter().all(|(_, check)| check(&object)).then_some(object)
        },
        || async {
            match read().await {
                None => "it does not exist".to_owned(),
                Some(object) => {
                    let failing: Vec<&str> = checks
                        .iter()
                        .filter(|(_, check)| !check(&object))
                        .map(|(name, _)| *name)
                        .collect();
                    format!("failing: {failing:?}; object: {object:#}")
                }
            }
        },
    )
    .await
}

/// The object `kind` `namespace/name` in member `i` (1-based) as JSON, if present.
async fn member_object(
    env: &Env,
    i: usize,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<Value> {
    let member = env.member_client(i).await;
    fixtures::get(&member, api_version, kind, Some(namespace), name)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
}

/// Waits until member `i`'s `kind` `namespace/name` satisfies `check`; returns it.
async fn wait_member(
    env: &Env,
    i: usize,
    (api_version, kind, namespace, name): (&str, &str, &str, &str),
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_until(
        &format!("member{i} {kind} {namespace}/{name}: {what}"),
        TIMEOUT,
        || async {
            member_object(env, i, api_version, kind, namespace, name)
                .await
                .filter(|o| check(o))
        },
    )
    .await
}

const fn deployment(namespace: &'static str, name: &'static str) -> Object {
    ("apps/v1", "Deployment", namespace, name)
}

const fn configmap(namespace: &'static str, name: &'static str) -> Object {
    ("v1", "ConfigMap", namespace, name)
}

fn container(object: &Value) -> &Value {
    &object["spec"]["template"]["spec"]["containers"][0]
}

/// The image of every container of a workload's pod template.
fn container_images(object: &Value) -> Vec<&str> {
    object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["image"].as_str().unwrap_or_default())
        .collect()
}

fn env_names(object: &Value) -> Vec<String> {
    container(object)["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}={}",
                e["name"].as_str().unwrap_or_default(),
                e["value"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["labels"][key].as_str()
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["annotations"][key].as_str()
}

/// Runs `kubectl` against the control plane; returns stdout.
fn kubectl(env: &Env, args: &[&str]) -> String {
    stdout_of(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(env.control_plane.kubeconfig())
            .args(args),
    )
}

/// Runs the real `flotilla` binary against the control plane; returns stdout.
fn flotilla(env: &Env, args: &[&str]) -> String {
    stdout_of(
        Command::new(flotilla_e2e::binaries::binary("flotilla"))
            .args(args)
            .arg("--kubeconfig")
            .arg(env.control_plane.kubeconfig()),
    )
}

/// The cell of kubectl table output in the row starting with `row` under header `column`.
fn cell(table: &str, row: &str, column: &str) -> String {
    let header = table.lines().next().unwrap_or_default();
    let start = header
        .find(column)
        .unwrap_or_else(|| panic!("no column {column} in\n{table}"));
    let line = table
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no row {row} in\n{table}"));
    line.get(start..)
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Merge-patches the Cluster `name` (labels or spec, as `kubectl label/patch cluster` would).
async fn patch_cluster(cp: &Client, name: &str, patch: Value) {
    Api::<flotilla_api::Cluster>::all(cp.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The binding of template `kind` `namespace/name`, as JSON.
async fn binding(cp: &Client, namespace: &str, name: &str, kind: &str) -> Option<Value> {
    fixtures::get(
        cp,
        "work.karmada.io/v1alpha2",
        "ResourceBinding",
        Some(namespace),
        &format!("{name}-{}", kind.to_lowercase()),
    )
    .await
    .map(|o| serde_json::to_value(o).unwrap())
}

/// Waits until the binding's condition `type_` satisfies `check`; returns the condition.
async fn wait_binding_condition(
    cp: &Client,
    (namespace, name, kind): (&str, &str, &str),
    type_: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_until(
        &format!("{kind} {namespace}/{name}'s binding: {what}"),
        TIMEOUT,
        || async {
            let binding = binding(cp, namespace, name, kind).await?;
            fixtures::condition(&binding, type_).filter(|c| check(c)).cloned()
        },
    )
    .await
}

/// The Work in `cluster` whose manifest is `kind` `name`.
async fn work_of(cp: &Client, cluster: &str, kind: &str, name: &str) -> Option<Work> {
    let api: Api<Work> = Api::namespaced(cp.clone(), &execution_namespace(cluster));
    api.list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|w| {
            w.spec
                .workload
                .manifests
                .first()
                .is_some_and(|m| m["kind"] == kind && m["metadata"]["name"] == name)
        })
}

/// Karmada's record of the OverridePolicy rules that applied to a Work.
const OVERRIDES: &str = "policy.karmada.io/applied-overrides";
/// Karmada's record of the ClusterOverridePolicy rules that applied to a Work.
const CLUSTER_OVERRIDES: &str = "policy.karmada.io/applied-cluster-overrides";

/// A Work's `applied(-cluster)-overrides` record, one `policy: overrider,...` per entry (the
/// overriders of the rule, sorted); empty without the annotation.
fn applied(work: &Work, annotation: &str) -> Vec<String> {
    let Some(text) = work.annotations().get(annotation) else {
        return Vec::new();
    };
    let list: Vec<Value> =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{annotation} is not JSON ({e}): {text}"));
    list.iter()
        .map(|item| {
            let overriders = item["overriders"]
                .as_object()
                .unwrap_or_else(|| panic!("each item has overriders: {text}"));
            let mut kinds: Vec<&str> = overriders.keys().map(String::as_str).collect();
            kinds.sort_unstable();
            format!("{}: {}", item["policyName"].as_str().unwrap(), kinds.join(","))
        })
        .collect()
}

/// Waits until the Work of template `object` in `cluster` records exactly `expected` in
/// `annotation` (see [`applied`]).
async fn wait_applied(
    cp: &Client,
    cluster: &str,
    (_, kind, _, name): Object,
    annotation: &str,
    expected: &[&str],
) {
    let record = || async { Some(applied(&work_of(cp, cluster, kind, name).await?, annotation)) };
    flotilla_e2e::wait::wait_until_explained(
        &format!("{cluster}'s Work of {kind} {name} to record {expected:?} in {annotation}"),
        TIMEOUT,
        || async { record().await.filter(|r| r == expected) },
        || async { format!("it records {:?}", record().await) },
    )
    .await;
}

/// What one member cluster receives in an example: its object passes `checks`, and the Work
/// records `applied` (see [`applied`]) in `policy.karmada.io/applied-overrides`.
struct Expected<'a> {
    checks: &'a [Check<'a>],
    applied: &'a [&'a str],
}

/// One documented example: the guide's set-up and then the block naming `example`, back to
/// back; then waits until `member1` and `member2` receive template `object` as `expected` says:
/// first the members a rule targets (their record is not empty), then the others, so what an
/// untargeted member shows is seen once the policy is in effect.
async fn example(example: &str, object: Object, expected: [Expected<'_>; 2]) -> (Env, Client) {
    let (env, cp) = guide_installation().await;
    fixtures::apply(&cp, &guide_block(example)).await;
    let mut members: Vec<(usize, Expected<'_>)> = (1..).zip(expected).collect();
    members.sort_by_key(|(_, e)| e.applied.is_empty());
    for (i, member) in members {
        settled(&env, i, object, member.checks).await;
        wait_applied(&cp, &format!("member{i}"), object, OVERRIDES, member.applied).await;
    }
    (env, cp)
}

/// The events about binding `name` in `namespace` with `reason`.
async fn binding_events(cp: &Client, namespace: &str, name: &str, reason: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(cp.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. Karmada's documented examples, one test each
// ---------------------------------------------------------------------------------------------

/// Karmada's imageOverrider Example 1, "add the registry" (member1), and Example 2, "replace
/// the repository" (member2).
#[tokio::test]
async fn image_overrider_add_the_registry_and_replace_the_repository() {
    let applied = &["image: imageOverrider"];
    example(
        "image",
        MYAPP,
        [
            Expected {
                checks: &[("registry test-repo added", &|d| {
                    container_images(d) == ["test-repo/myapp:1.0.0"]
                })],
                applied,
            },
            Expected {
                checks: &[("repository replaced by myapp2", &|d| {
                    container_images(d) == ["myapp2:1.0.0"]
                })],
                applied,
            },
        ],
    )
    .await;
}

/// Karmada's imageOverrider Example 3, "remove the tag" (member1).
#[tokio::test]
async fn image_overrider_remove_the_tag() {
    example(
        "image-remove-tag",
        MYAPP,
        [
            Expected {
                checks: &[("tag removed", &|d| container_images(d) == ["myapp"])],
                applied: &["image-remove-tag: imageOverrider"],
            },
            Expected {
                checks: &[("as the template", &|d| container_images(d) == ["myapp:1.0.0"])],
                applied: &[],
            },
        ],
    )
    .await;
}

/// Karmada's end-to-end cases "Deployment override all images in container list" (member1)
/// and "Deployment override specific images in container list", by `predicate` (member2).
#[tokio::test]
async fn image_overrider_override_all_images_and_specific_images_in_container_list() {
    let applied = &["nginx-images: imageOverrider"];
    example(
        "nginx-images",
        deployment("shop", "nginx"),
        [
            Expected {
                checks: &[("every container's image replaced", &|d| {
                    container_images(d) == ["fictional.registry.us/busybox:1.0"; 2]
                })],
                applied,
            },
            Expected {
                checks: &[("only the predicate's image changed", &|d| {
                    container_images(d) == ["fictional.registry.us/nginx:1.19.0", "busybox:1.36"]
                })],
                applied,
            },
        ],
    )
    .await;
}

/// Karmada's commandOverrider Example 1, "add flags" (member1), and Example 2, "remove flags"
/// (every cluster), with an argsOverrider.
#[tokio::test]
async fn command_and_args_overrider_add_and_remove_flags() {
    let args: Check<'_> = ("args --v=2 added", &|d| container(d)["args"] == json!(["--v=2"]));
    let everywhere = "command: argsOverrider,commandOverrider";
    example(
        "command",
        MYAPP,
        [
            Expected {
                checks: &[
                    args,
                    ("--parameter1=foo removed, --cluster=member1 added", &|d| {
                        container(d)["command"] == json!(["./myapp", "--parameter2=bar", "--cluster=member1"])
                    }),
                ],
                applied: &[everywhere, "command: commandOverrider"],
            },
            Expected {
                checks: &[
                    args,
                    ("--parameter1=foo removed, nothing added", &|d| {
                        container(d)["command"] == json!(["./myapp", "--parameter2=bar"])
                    }),
                ],
                applied: &[everywhere],
            },
        ],
    )
    .await;
}

/// Karmada's labelsOverrider Example 1, "add/remove/replace labels", and its end-to-end case
/// "deployment annotationsOverrider testing" (member1).
#[tokio::test]
async fn labels_and_annotations_overrider_add_remove_replace() {
    example(
        "labels",
        MYAPP,
        [
            Expected {
                checks: &[
                    ("bar added", &|d| label(d, "bar") == Some("bar")),
                    ("foo replaced", &|d| label(d, "foo") == Some("exist")),
                    ("baz removed", &|d| label(d, "baz").is_none()),
                    ("annotation added", &|d| {
                        annotation(d, "example.com/owner") == Some("team-a")
                    }),
                    ("a missing annotation is not replaced", &|d| {
                        annotation(d, "example.com/team").is_none()
                    }),
                ],
                applied: &["labels: annotationsOverrider,labelsOverrider"],
            },
            Expected {
                checks: &[
                    ("the template's labels", &|d| {
                        (label(d, "foo"), label(d, "baz"), label(d, "bar"))
                            == (Some("foo"), Some("baz"), None)
                    }),
                    ("no annotation", &|d| annotation(d, "example.com/owner").is_none()),
                ],
                applied: &[],
            },
        ],
    )
    .await;
}

/// Karmada's fieldOverrider Example 1, "replace the database port" in YAML (member1), and its
/// end-to-end case "update JSON values in ConfigMap" (member2).
#[tokio::test]
async fn field_overrider_json_and_yaml_in_a_configmap() {
    let applied = &["field: fieldOverrider"];
    example(
        "field",
        MYCONFIGMAP,
        [
            Expected {
                checks: &[
                    ("YAML port replaced by the string 3306", &|c| {
                        c["data"]["config.yaml"] == "app:\n  database:\n    port: '3306'\n"
                    }),
                    ("JSON as the template", &|c| {
                        c["data"]["config.json"] == r#"{"db": {"host": "db.local", "port": 5432}}"#
                    }),
                ],
                applied,
            },
            Expected {
                checks: &[
                    ("JSON host replaced, pool added, port removed", &|c| {
                        c["data"]["config.json"] == r#"{"db":{"host":"db.member2.local","pool":10}}"#
                    }),
                    ("YAML as the template", &|c| {
                        c["data"]["config.yaml"] == "app:\n  database:\n    port: 5432\n"
                    }),
                ],
                applied,
            },
        ],
    )
    .await;
}

/// Karmada's plaintext Example 2, "add/replace/remove container env" (member2).
#[tokio::test]
async fn plaintext_add_replace_remove_container_env() {
    example(
        "plaintext",
        MYAPP,
        [
            Expected {
                checks: &[("the template's env", &|d| {
                    env_names(d) == ["region=region1", "zone=zone1"]
                })],
                applied: &[],
            },
            Expected {
                checks: &[("added at the end, inserted first, replaced, removed", &|d| {
                    env_names(d) == ["provider=provider1", "region=region2", "cluster=cluster1"]
                })],
                applied: &["plaintext: plaintext"],
            },
        ],
    )
    .await;
}

/// Karmada's targetCluster examples: `labelSelector` (with the plaintext Example 1, "replace
/// configmap data"), `fieldSelector` by region, by provider and zone, and `exclude`.
#[tokio::test]
async fn target_cluster_label_selector_field_selector_and_exclude() {
    let annotations = "targets: annotationsOverrider";
    example(
        "targets",
        MYCONFIGMAP,
        [
            Expected {
                checks: &[
                    ("labelSelector env: prod", &|c| c["data"]["example"] == "2"),
                    ("fieldSelector region", &|c| {
                        annotation(c, "region") == Some("cn-north-1")
                    }),
                    ("fieldSelector provider and zone: no", &|c| {
                        annotation(c, "provider-zone").is_none()
                    }),
                    ("exclude member1", &|c| {
                        annotation(c, "excluded-member1").is_none()
                    }),
                ],
                applied: &["targets: plaintext", annotations],
            },
            Expected {
                checks: &[
                    ("labelSelector env: prod: no", &|c| c["data"]["example"] == "1"),
                    ("fieldSelector region: no", &|c| annotation(c, "region").is_none()),
                    ("fieldSelector provider and zone", &|c| {
                        annotation(c, "provider-zone") == Some("aws-us")
                    }),
                    ("exclude member1: not member2", &|c| {
                        annotation(c, "excluded-member1") == Some("true")
                    }),
                ],
                applied: &[annotations, annotations],
            },
        ],
    )
    .await;
}

/// Karmada's deprecated `targetCluster` + `overriders` at the top of the spec (the form of its
/// "[OverridePolicy] apply overriders testing" end-to-end cases), replacing the replicas.
#[tokio::test]
async fn deprecated_target_cluster_and_overriders_replace_the_replicas() {
    example(
        "legacy",
        MYAPP,
        [
            Expected {
                checks: &[("the template's replicas", &|d| d["spec"]["replicas"] == 1)],
                applied: &[],
            },
            Expected {
                checks: &[("replicas replaced", &|d| d["spec"]["replicas"] == 2)],
                applied: &["legacy: plaintext"],
            },
        ],
    )
    .await;
}

/// Karmada's rule "for namespaced scoped resources, ClusterOverridePolicy is applied first,
/// followed by OverridePolicy": the OverridePolicy (member1) selects by a label the
/// ClusterOverridePolicy (every cluster) adds, and overrides another.
#[tokio::test]
async fn cluster_override_policy_before_override_policy() {
    let team: Check<'_> = ("the ClusterOverridePolicy's label", &|d| {
        label(d, "team") == Some("shop")
    });
    let (_env, cp) = example(
        "shop-wide",
        MYAPP,
        [
            Expected {
                checks: &[
                    team,
                    ("the OverridePolicy applied last", &|d| {
                        label(d, "tier") == Some("frontend")
                    }),
                ],
                applied: &["z-by-labels: labelsOverrider"],
            },
            Expected {
                checks: &[
                    team,
                    ("the ClusterOverridePolicy alone", &|d| {
                        label(d, "tier") == Some("backend")
                    }),
                ],
                applied: &[],
            },
        ],
    )
    .await;
    for cluster in ["member1", "member2"] {
        wait_applied(
            &cp,
            cluster,
            MYAPP,
            CLUSTER_OVERRIDES,
            &["shop-wide: labelsOverrider"],
        )
        .await;
    }
}

// ---------------------------------------------------------------------------------------------
// 2. The whole guide back to back: composition, eager edits, relabelling, deletion
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn karmada_documented_overriders_in_the_user_guide() {
    let (env, cp) = guide_installation().await;
    let blocks = guide();
    assert_eq!(
        blocks.len(),
        13,
        "the guide's YAML: set-up, templates, 10 examples, the Lazy one"
    );
    // Every example back to back after the set-up, as a user applies a directory.
    for block in blocks[2..]
        .iter()
        .filter(|b| !b.contains("activationPreference: Lazy"))
    {
        fixtures::apply(&cp, block).await;
    }

    // The examples compose: each Work records every rule that applied to it, sorted by policy
    // name; two policies naming the template change one image in name order; no rule fails.
    wait_applied(
        &cp,
        "member1",
        MYAPP,
        OVERRIDES,
        &[
            "command: argsOverrider,commandOverrider",
            "command: commandOverrider",
            "image: imageOverrider",
            "image-remove-tag: imageOverrider",
            "labels: annotationsOverrider,labelsOverrider",
            "z-by-labels: labelsOverrider",
        ],
    )
    .await;
    wait_applied(
        &cp,
        "member2",
        MYAPP,
        OVERRIDES,
        &[
            "command: argsOverrider,commandOverrider",
            "image: imageOverrider",
            "legacy: plaintext",
            "plaintext: plaintext",
        ],
    )
    .await;
    wait_applied(
        &cp,
        "member1",
        MYCONFIGMAP,
        OVERRIDES,
        &[
            "field: fieldOverrider",
            "targets: plaintext",
            "targets: annotationsOverrider",
        ],
    )
    .await;
    settled(
        &env,
        1,
        MYAPP,
        &[(
            "image's registry added, then image-remove-tag's tag removed",
            &|d| container_images(d) == ["test-repo/myapp"],
        )],
    )
    .await;
    for (name, kind) in [
        ("myapp", "Deployment"),
        ("nginx", "Deployment"),
        ("myconfigmap", "ConfigMap"),
    ] {
        wait_binding_condition(&cp, ("shop", name, kind), "OverridesApplied", "True", |c| {
            c["status"] == "True"
        })
        .await;
    }

    // kubectl shows the policies with useful columns.
    let table = kubectl(&env, &["get", "op", "-n", "shop"]);
    assert_eq!(cell(&table, "image ", "RESOURCES"), "Deployment", "{table}");
    assert_eq!(cell(&table, "field ", "RESOURCES"), "ConfigMap", "{table}");
    eventually("the policies are marked valid", TIMEOUT, || async {
        cell(&kubectl(&env, &["get", "op", "-n", "shop"]), "image ", "VALID") == "True"
    })
    .await;
    let table = kubectl(&env, &["get", "cop"]);
    assert!(table.lines().any(|l| l.starts_with("shop-wide ")), "{table}");

    // Editing a policy changes the members at once (eager), only where its rules apply.
    fixtures::apply(
        &cp,
        &guide_block("image").replace(
            "- component: Repository\n        operator: replace\n        value: myapp2",
            "- component: Tag\n        operator: replace\n        value: 2.0.0",
        ),
    )
    .await;
    wait_member(&env, 2, MYAPP, "the edited image rule", |d| {
        container(d)["image"] == "myapp:2.0.0"
    })
    .await;
    assert_eq!(
        container(
            &member_object(&env, 1, "apps/v1", "Deployment", "shop", "myapp")
                .await
                .unwrap()
        )["image"],
        "test-repo/myapp"
    );

    // A Cluster's labels change: the rules that select by them follow ("kubectl label cluster").
    patch_cluster(&cp, "member2", json!({"metadata": {"labels": {"env": "prod"}}})).await;
    wait_member(
        &env,
        2,
        MYCONFIGMAP,
        "target_cluster_label_selector after relabelling",
        |c| c["data"]["example"] == "2",
    )
    .await;

    // A deleted policy's changes go.
    fixtures::delete(&cp, &guide_block("legacy")).await;
    wait_applied(
        &cp,
        "member2",
        MYAPP,
        OVERRIDES,
        &[
            "command: argsOverrider,commandOverrider",
            "image: imageOverrider",
            "plaintext: plaintext",
        ],
    )
    .await;
    wait_member(&env, 2, MYAPP, "the deprecated-form policy deleted", |d| {
        d["spec"]["replicas"] == 1
    })
    .await;

    // Karmada's "Namespace labelOverride testing": a ClusterOverridePolicy changes the namespace
    // flotilla propagates.
    fixtures::apply(
        &cp,
        "apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: namespace-labels
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: Namespace
    name: shop
  overrideRules:
  - targetCluster:
      clusterNames: [member1]
    overriders:
      labelsOverrider:
      - operator: add
        value:
          cost-center: shop
",
    )
    .await;
    wait_member(
        &env,
        1,
        ("v1", "Namespace", "", "shop"),
        "namespace_label_override",
        |n| label(n, "cost-center") == Some("shop"),
    )
    .await;
    let other = member_object(&env, 2, "v1", "Namespace", "", "shop")
        .await
        .unwrap();
    assert_eq!(label(&other, "cost-center"), None);
}

// ---------------------------------------------------------------------------------------------
// 3. Bad input
// ---------------------------------------------------------------------------------------------

const WEB_POLICY: &str = "apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web
  namespace: default
spec:
  propagateDeps: true
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
";

#[tokio::test]
async fn bad_input_skips_the_rule_in_that_cluster_and_says_so() {
    let (env, cp) = start().await;

    // What can be refused statically is refused at apply, naming the field and the fix.
    let bad = "apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: bad
  namespace: default
spec:
  overrideRules:
  - overriders:
      plaintext:
      - path: spec/replicas
        operator: replace
        value: 2
      imageOverrider:
      - component: Tag
        operator: replace
        value: -not-a-tag
";
    let error = fixtures::try_apply(&cp, bad).await.unwrap_err().to_string();
    for expected in [
        "spec.overrideRules[0].overriders.plaintext[0].path",
        "is not a JSON pointer",
        "spec.overrideRules[0].overriders.imageOverrider[0].value",
        "is neither a tag",
    ] {
        assert!(error.contains(expected), "{expected:?} not in {error}");
    }
    let error = fixtures::try_apply(
        &cp,
        "apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: bad
  namespace: default
spec:
  overrideRules:
  - overriders:
      labelsOverrider:
      - operator: upsert
        value: {a: b}
",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("operator"), "{error}");

    // A rule that fails in one cluster only: the ClusterOverridePolicy adds an annotation in
    // member2; the OverridePolicy removes it, which fails in member1 where it was never added.
    fixtures::apply(&cp, WEB_POLICY).await;
    fixtures::apply(&cp, &fixtures::deployment_yaml("default", "web", 1, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        &fixtures::deployment_yaml("default", "calm", 1, "nginx:1.25"),
    )
    .await;
    let broken = "apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: member2-marker
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  overrideRules:
  - targetCluster:
      clusterNames: [member2]
    overriders:
      annotationsOverrider:
      - operator: add
        value:
          marker: member2
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: broken
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  overrideRules:
  - overriders:
      plaintext:
      - path: /metadata/annotations/marker
        operator: remove
  - overriders:
      labelsOverrider:
      - operator: add
        value:
          good: rule
";
    fixtures::apply(&cp, broken).await;
    let web = deployment("default", "web");
    let m1 = wait_member(&env, 1, web, "the good rule applied", |d| {
        label(d, "good") == Some("rule")
    })
    .await;
    assert_eq!(annotation(&m1, "marker"), None);
    // In member2 both rules applied: the marker was added, then removed.
    let m2 = wait_member(&env, 2, web, "both rules applied", |d| {
        label(d, "good") == Some("rule")
    })
    .await;
    assert_eq!(annotation(&m2, "marker"), None);
    let condition = wait_binding_condition(
        &cp,
        ("default", "web", "Deployment"),
        "OverridesApplied",
        "False",
        |c| c["status"] == "False",
    )
    .await;
    assert_eq!(condition["reason"], "ApplyOverridePolicyFailed");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with("1 override rule skipped (the other rules and clusters applied): cluster member1: OverridePolicy default/broken spec.overrideRules[0].overriders.plaintext[0]: "),
        "{message}"
    );
    assert!(message.contains("/metadata/annotations/marker"), "{message}");
    let events = wait_until("a Warning event on the binding", TIMEOUT, || async {
        let events = binding_events(&cp, "default", "web-deployment", "ApplyOverridePolicyFailed").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert!(events.iter().any(|e| e == message), "{events:?}");
    // Nothing else is disturbed: the other template has no condition and is as it was.
    let calm = deployment("default", "calm");
    for i in [1, 2] {
        let d = wait_member(&env, i, calm, "propagated unchanged", |d| {
            container(d)["image"] == "nginx:1.25"
        })
        .await;
        assert_eq!(label(&d, "good"), None);
    }
    let calm_binding = binding(&cp, "default", "calm", "Deployment").await.unwrap();
    assert!(fixtures::condition(&calm_binding, "OverridesApplied").is_none());

    // Fixed: the condition turns True and says so with an event.
    fixtures::apply(
        &cp,
        &broken.replace(
            "      plaintext:\n      - path: /metadata/annotations/marker\n        operator: remove\n",
            "      plaintext:\n      - path: /metadata/annotations/fixed\n        operator: add\n        value: \"yes\"\n",
        ),
    )
    .await;
    wait_binding_condition(
        &cp,
        ("default", "web", "Deployment"),
        "OverridesApplied",
        "True again",
        |c| c["status"] == "True",
    )
    .await;
    eventually("a Normal event says the rules apply again", TIMEOUT, || async {
        !binding_events(&cp, "default", "web-deployment", "ApplyOverridePolicySucceed")
            .await
            .is_empty()
    })
    .await;
    wait_member(&env, 1, web, "the fixed rule applied", |d| {
        annotation(d, "fixed") == Some("yes")
    })
    .await;

    // A dependency propagated by propagateDeps follows the override policies that select it.
    fixtures::apply(
        &cp,
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: default
data:
  mode: base
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: web-config
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: ConfigMap
    name: web-config
  overrideRules:
  - targetCluster:
      clusterNames: [member2]
    overriders:
      plaintext:
      - path: /data/mode
        operator: replace
        value: member2
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: with-deps
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: with-deps}
  template:
    metadata:
      labels: {app: with-deps}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        envFrom:
        - configMapRef: {name: web-config}
",
    )
    .await;
    let dependency = configmap("default", "web-config");
    wait_member(&env, 2, dependency, "the dependency overridden", |c| {
        c["data"]["mode"] == "member2"
    })
    .await;
    let c1 = wait_member(&env, 1, dependency, "the dependency propagated", |c| {
        c["data"]["mode"].is_string()
    })
    .await;
    assert_eq!(c1["data"]["mode"], "base");
}

// ---------------------------------------------------------------------------------------------
// 4. Lazy activation
// ---------------------------------------------------------------------------------------------

fn web(name: &str) -> String {
    fixtures::deployment_yaml("shop", name, 1, "nginx:1.25").replace(&format!("app: {name}"), "app: web")
}

async fn images(env: &Env, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for i in [1, 2] {
        let image = member_object(env, i, "apps/v1", "Deployment", "shop", name)
            .await
            .map(|d| container(&d)["image"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        out.push(image);
    }
    out
}

async fn wait_images(env: &Env, name: &str, image: &str) {
    eventually(
        &format!("{name} runs {image} in both members"),
        TIMEOUT,
        || async { images(env, name).await.iter().all(|i| i == image) },
    )
    .await;
}

#[tokio::test]
async fn lazy_override_policy_rolls_out_gradually() {
    let (mut env, cp) = start().await;
    let blocks = fixtures::doc_yaml_blocks("overrides.md");
    let rollout = blocks
        .iter()
        .find(|b| b.contains("activationPreference: Lazy"))
        .unwrap()
        .clone();
    fixtures::apply(&cp, &blocks[0]).await;
    // Back to back: the Lazy policy, then the templates it selects (created after it: the
    // policy applies to them at once, whatever the services saw first).
    fixtures::apply(&cp, &rollout).await;
    for name in ["web-1", "web-2", "web-3"] {
        fixtures::apply(&cp, &web(name)).await;
    }
    for name in ["web-1", "web-2", "web-3"] {
        wait_images(&env, name, "mirror.example.com/nginx:1.25").await;
    }

    // An edit of the Lazy policy waits for each template.
    let edited = rollout.replace("value: mirror.example.com", "value: mirror2.example.com");
    fixtures::apply(&cp, &edited).await;
    let condition = wait_binding_condition(
        &cp,
        ("shop", "web-1", "Deployment"),
        "OverridesActivated",
        "pending",
        |c| c["status"] == "False",
    )
    .await;
    assert_eq!(condition["reason"], "LazyActivationPending");
    assert_eq!(
        condition["message"],
        "OverridePolicy shop/rollout generation 2 is pending: it takes effect when the template next changes (or with flotilla activate)"
    );
    stays("every web Deployment keeps the first mirror", HOLD, || async {
        for name in ["web-1", "web-2", "web-3"] {
            if images(&env, name).await != ["mirror.example.com/nginx:1.25"; 2] {
                return false;
            }
        }
        true
    })
    .await;

    // The detector is killed; a template changes meanwhile; after the restart the change
    // applies to that template only.
    env.kill(Service::Detector);
    fixtures::apply(&cp, &web("web-3").replace("replicas: 1", "replicas: 2")).await;
    env.start_again(Service::Detector).await;
    wait_images(&env, "web-3", "mirror2.example.com/nginx:1.25").await;
    stays("web-1 and web-2 keep the first mirror", HOLD, || async {
        images(&env, "web-1").await == ["mirror.example.com/nginx:1.25"; 2]
            && images(&env, "web-2").await == ["mirror.example.com/nginx:1.25"; 2]
    })
    .await;

    // flotilla activate rolls it out a template at a time.
    let out = flotilla(
        &env,
        &[
            "activate",
            "deployments",
            "-l",
            "app=web",
            "-n",
            "shop",
            "--max",
            "1",
            "--wait",
        ],
    );
    assert!(
        out.contains("activated deployment.apps/web-1 -n shop (OverridePolicy shop/rollout generation 2)"),
        "{out}"
    );
    assert!(
        out.contains("1 activated, 1 already current, 0 already requested, 1 still pending"),
        "{out}"
    );
    wait_images(&env, "web-1", "mirror2.example.com/nginx:1.25").await;
    stays("web-2 still waits", HOLD, || async {
        images(&env, "web-2").await == ["mirror.example.com/nginx:1.25"; 2]
    })
    .await;
    let out = flotilla(
        &env,
        &["activate", "deployments", "-l", "app=web", "-n", "shop", "--wait"],
    );
    assert!(out.contains("1 activated, 2 already current"), "{out}");
    wait_images(&env, "web-2", "mirror2.example.com/nginx:1.25").await;
    wait_binding_condition(
        &cp,
        ("shop", "web-2", "Deployment"),
        "OverridesActivated",
        "activated",
        |c| c["status"] == "True",
    )
    .await;

    // Deleting the policy removes its changes at once, Lazy or not.
    fixtures::delete(&cp, &rollout).await;
    for name in ["web-1", "web-2", "web-3"] {
        wait_images(&env, name, "nginx:1.25").await;
    }
}
