//! Lazy activation (`activationPreference: Lazy`, seed `lazy-activation-preference.md`) end to
//! end: every scenario of the seed's Test Plan, the default behaviour of the seed's four cases
//! for contrast, restart safety, what users see (binding condition, `kubectl get rb`, policy
//! status), `flotilla activate`, and the user guide's YAML. Every test asserts on the member
//! clusters: present, absent, or unchanged (held for a few seconds with `stays`).

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::process::Command;
use std::time::Duration;

use flotilla_e2e::fixtures::{self, TIMEOUT};
use flotilla_e2e::tools::stdout_of;
use flotilla_e2e::wait::{eventually, stays, wait_until};
use flotilla_e2e::{Env, EnvOptions, Service};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// How long "propagation unchanged" must hold once the detector demonstrably processed the
/// change.
const HOLD: Duration = Duration::from_secs(3);

const NS: &str = "default";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A policy. `kind` is `PropagationPolicy` (namespace `default`) or `ClusterPropagationPolicy`;
/// `selectors` is YAML flow for `resourceSelectors`; `extra` more spec lines (2-space indented).
fn policy(kind: &str, name: &str, selectors: &str, cluster: &str, lazy: bool, extra: &str) -> String {
    let namespace = if kind == "PropagationPolicy" {
        format!("\n  namespace: {NS}")
    } else {
        String::new()
    };
    let lazy = if lazy {
        "\n  activationPreference: Lazy"
    } else {
        ""
    };
    format!(
        "apiVersion: policy.karmada.io/v1alpha1
kind: {kind}
metadata:
  name: {name}{namespace}
spec:{lazy}
  resourceSelectors: {selectors}
  placement:
    clusterAffinity:
      clusterNames: [{cluster}]
{extra}"
    )
}

fn nginx_selector() -> &'static str {
    "[{apiVersion: apps/v1, kind: Deployment, name: nginx}]"
}

fn pp(name: &str, cluster: &str, lazy: bool) -> String {
    policy("PropagationPolicy", name, nginx_selector(), cluster, lazy, "")
}

fn cpp(name: &str, cluster: &str, lazy: bool) -> String {
    policy(
        "ClusterPropagationPolicy",
        name,
        nginx_selector(),
        cluster,
        lazy,
        "",
    )
}

/// An installation with two members (every scenario needs two; fewer processes on CI).
async fn start() -> (Env, Client) {
    let env = Env::start(EnvOptions {
        members: 2,
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    (env, cp)
}

async fn create_nginx(cp: &Client, name: &str) {
    fixtures::apply(cp, &fixtures::deployment_yaml(NS, name, 1, "nginx:1.25")).await;
}

/// A Deployment `name` mounting ConfigMap `config` (a dependency for propagateDeps).
fn nginx_with_configmap(name: &str, config: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {NS}
  labels: {{app: nginx}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: nginx}}
  template:
    metadata:
      labels: {{app: nginx}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        volumeMounts: [{{name: config, mountPath: /etc/nginx/conf.d}}]
      volumes:
      - name: config
        configMap: {{name: {config}}}
"
    )
}

fn configmap(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NS}\ndata:\n  nginx.conf: 'server {{}}'\n"
    )
}

/// A user edit of the template, as in the seed: `refresh-time=<value>` label.
async fn touch(cp: &Client, name: &str, value: &str) {
    let api: Api<Deployment> = Api::namespaced(cp.clone(), NS);
    let patch = json!({"metadata": {"labels": {"refresh-time": value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The members (1-based) that have Deployment `name`.
async fn deployment_on(env: &Env, name: &str) -> Vec<usize> {
    let mut on = Vec::new();
    for i in 1..=env.members.len() {
        if fixtures::member_deployment(&env.member_client(i).await, NS, name)
            .await
            .is_some()
        {
            on.push(i);
        }
    }
    on
}

/// The members (1-based) that have ConfigMap `name`.
async fn configmap_on(env: &Env, name: &str) -> Vec<usize> {
    let mut on = Vec::new();
    for i in 1..=env.members.len() {
        let api: Api<ConfigMap> = Api::namespaced(env.member_client(i).await, NS);
        if api.get_opt(name).await.unwrap().is_some() {
            on.push(i);
        }
    }
    on
}

/// Waits until exactly `members` have Deployment `name`.
async fn wait_deployment_on(env: &Env, name: &str, members: &[usize]) {
    eventually(
        &format!("{name} on exactly members {members:?}"),
        TIMEOUT,
        || async { deployment_on(env, name).await == members },
    )
    .await;
}

/// Waits until exactly `members` have ConfigMap `name`.
async fn wait_configmap_on(env: &Env, name: &str, members: &[usize]) {
    eventually(
        &format!("ConfigMap {name} on exactly members {members:?}"),
        TIMEOUT,
        || async { configmap_on(env, name).await == members },
    )
    .await;
}

/// Asserts that Deployment `name` stays on exactly `members`, with its member `generation`s
/// unchanged (no member write of its spec), for [`HOLD`].
async fn deployment_stays_on(env: &Env, name: &str, members: &[usize]) {
    let generations = member_generations(env, name).await;
    stays(
        &format!("{name} unchanged on exactly members {members:?}"),
        HOLD,
        || async {
            deployment_on(env, name).await == members && member_generations(env, name).await == generations
        },
    )
    .await;
}

async fn member_generations(env: &Env, name: &str) -> Vec<Option<i64>> {
    let mut out = Vec::new();
    for i in 1..=env.members.len() {
        let d = fixtures::member_deployment(&env.member_client(i).await, NS, name).await;
        out.push(d.and_then(|d| d.metadata.generation));
    }
    out
}

/// Asserts that ConfigMap `name` stays on exactly `members` for [`HOLD`].
async fn configmap_stays_on(env: &Env, name: &str, members: &[usize]) {
    stays(
        &format!("ConfigMap {name} on exactly members {members:?}"),
        HOLD,
        || async { configmap_on(env, name).await == members },
    )
    .await;
}

async fn binding(cp: &Client, name: &str) -> Option<Value> {
    fixtures::get(cp, "work.karmada.io/v1alpha2", "ResourceBinding", Some(NS), name)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
}

/// `(status, reason, message)` of the binding's `PolicyActivated` condition.
fn activated(binding: &Value) -> Option<(String, String, String)> {
    let c = fixtures::condition(binding, "PolicyActivated")?;
    Some((
        c["status"].as_str()?.to_owned(),
        c["reason"].as_str()?.to_owned(),
        c["message"].as_str()?.to_owned(),
    ))
}

/// Waits until binding `name` says a Lazy change of `policy` (e.g. `PropagationPolicy
/// default/p`) generation `generation` is pending: the detector has processed the edit.
async fn wait_pending(cp: &Client, name: &str, policy: &str, generation: i64) -> Value {
    let wanted = format!("policy {policy} generation {generation} is pending");
    wait_until(&format!("{name}: {wanted}"), TIMEOUT, || async {
        let b = binding(cp, name).await?;
        let (status, reason, message) = activated(&b)?;
        (status == "False" && reason == "LazyActivationPending" && message.contains(&wanted)).then_some(b)
    })
    .await
}

/// The template's claim: the value of `annotation` (a `*.karmada.io/name` annotation).
async fn template_annotation(cp: &Client, kind: &str, name: &str, annotation: &str) -> Option<String> {
    let api_version = if kind == "Deployment" { "apps/v1" } else { "v1" };
    let object = fixtures::get(cp, api_version, kind, Some(NS), name).await?;
    object.metadata.annotations?.get(annotation).cloned()
}

const PP_NAME: &str = "propagationpolicy.karmada.io/name";
const CPP_NAME: &str = "clusterpropagationpolicy.karmada.io/name";

/// Waits until `kind/name` is claimed by the policy named `policy` (claim annotation `key`), or
/// by nothing (`None`).
async fn wait_claim(cp: &Client, kind: &str, name: &str, key: &str, policy: Option<&str>) {
    eventually(
        &format!("{kind} {name} claimed via {key} by {policy:?}"),
        TIMEOUT,
        || async { template_annotation(cp, kind, name, key).await.as_deref() == policy },
    )
    .await;
}

async fn policy_status(cp: &Client, kind: &str, name: &str) -> Value {
    let namespace = (kind == "PropagationPolicy").then_some(NS);
    let object = fixtures::get(cp, "policy.karmada.io/v1alpha1", kind, namespace, name)
        .await
        .unwrap();
    serde_json::to_value(object).unwrap()["status"].clone()
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

/// The cell of kubectl table output in the row starting with `row` under header `column`
/// (cells start where their header starts; empty cells are empty strings).
fn cell(table: &str, row: &str, column: &str) -> String {
    let header = table.lines().next().unwrap_or_default();
    let start = header
        .find(&format!(" {column}"))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no column {column} in\n{table}"));
    let line = table
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no row {row} in\n{table}"));
    let rest = line.get(start..).unwrap_or_default();
    if rest.starts_with(' ') {
        String::new()
    } else {
        rest.split_whitespace().next().unwrap_or_default().to_owned()
    }
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

// ---------------------------------------------------------------------------------------------
// The seed's Test Plan: Simple Cases
// ---------------------------------------------------------------------------------------------

/// Simple Case 1: the policy exists first, so the template propagates at once; deleting the
/// policy leaves propagation unchanged.
#[tokio::test]
async fn simple_case_1_policy_created_before_resource() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &pp("pp", "member1", true)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;

    fixtures::delete(&cp, &pp("pp", "member1", true)).await;
    wait_claim(&cp, "Deployment", "nginx", PP_NAME, None).await;
    deployment_stays_on(&env, "nginx", &[1]).await;
}

/// Simple Case 2: the template exists first; a Lazy policy created later does not propagate it
/// until the template changes.
#[tokio::test]
async fn simple_case_2_policy_created_after_resource() {
    let (env, cp) = start().await;
    // Back to back: the API's order decides, not the clock or the detector's timing.
    create_nginx(&cp, "nginx").await;
    fixtures::apply(&cp, &pp("pp", "member1", true)).await;
    wait_claim(&cp, "Deployment", "nginx", PP_NAME, Some("pp")).await;
    deployment_stays_on(&env, "nginx", &[]).await;
    assert!(binding(&cp, "nginx-deployment").await.is_none(), "no binding yet");

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[1]).await;
}

/// Simple Case 3: Lazy to immediate — removing `activationPreference` together with a placement
/// change applies the change at once.
#[tokio::test]
async fn simple_case_3_lazy_to_immediate() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &pp("pp", "member1", true)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;

    fixtures::apply(&cp, &pp("pp", "member2", false)).await;
    wait_deployment_on(&env, "nginx", &[2]).await;
}

/// Simple Case 4: immediate to Lazy — the placement change made together with
/// `activationPreference: Lazy` waits for the template's next change. Also what users see
/// meanwhile: the binding's `PolicyActivated=False` condition (in `kubectl get rb`), and the
/// policy's count of templates on an older generation.
#[tokio::test]
async fn simple_case_4_immediate_to_lazy() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &pp("pp", "member1", false)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;
    let before = binding(&cp, "nginx-deployment").await.unwrap();

    fixtures::apply(&cp, &pp("pp", "member2", true)).await;
    let pending = wait_pending(&cp, "nginx-deployment", "PropagationPolicy default/pp", 2).await;
    deployment_stays_on(&env, "nginx", &[1]).await;
    assert_eq!(
        pending["metadata"]["generation"], before["metadata"]["generation"],
        "no binding spec write"
    );
    assert_eq!(
        activated(&pending).unwrap().2,
        "policy PropagationPolicy default/pp generation 2 is pending: it takes effect when the template next changes"
    );
    // `kubectl get rb` shows it (ACTIVATED column), and the policy counts it.
    let table = kubectl(&env, &["get", "rb", "-n", NS]);
    assert_eq!(cell(&table, "nginx-deployment", "ACTIVATED"), "False", "{table}");
    let wide = kubectl(&env, &["get", "rb", "-n", NS, "-o", "wide"]);
    assert!(wide.contains("LazyActivationPending"), "{wide}");
    eventually("the policy counts one pending template", TIMEOUT, || async {
        let status = policy_status(&cp, "PropagationPolicy", "pp").await;
        status["pendingActivationTemplates"] == 1 && status["boundTemplates"] == 1
    })
    .await;
    let policies = kubectl(&env, &["get", "pp", "-n", NS]);
    assert_eq!(cell(&policies, "pp ", "PENDING"), "1", "{policies}");

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[2]).await;
    eventually("activated after the edit", TIMEOUT, || async {
        let status = policy_status(&cp, "PropagationPolicy", "pp").await;
        let b = binding(&cp, "nginx-deployment").await.unwrap();
        status["pendingActivationTemplates"] == 0
            && activated(&b).is_some_and(|(s, r, _)| s == "True" && r == "PolicyActivated")
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The seed's Test Plan: Combined Cases
// ---------------------------------------------------------------------------------------------

/// Combined Case 1: the claiming Lazy policy is deleted; the next Lazy policy takes the claim
/// but propagation waits for the template's change.
#[tokio::test]
async fn combined_case_1_policy_deleted() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &pp("pp1", "member1", true)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;

    fixtures::apply(&cp, &pp("pp2", "member2", true)).await;
    fixtures::delete(&cp, &pp("pp1", "member1", true)).await;
    wait_claim(&cp, "Deployment", "nginx", PP_NAME, Some("pp2")).await;
    wait_pending(&cp, "nginx-deployment", "PropagationPolicy default/pp2", 1).await;
    deployment_stays_on(&env, "nginx", &[1]).await;

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[2]).await;
}

/// Combined Case 2: the claiming Lazy ClusterPropagationPolicy no longer matches; the next one
/// takes the claim but propagation waits for the template's change.
#[tokio::test]
async fn combined_case_2_policy_no_longer_matches() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &cpp("cpp1", "member1", true)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;

    fixtures::apply(&cp, &cpp("cpp2", "member2", true)).await;
    let other = "[{apiVersion: apps/v1, kind: Deployment, name: other}]";
    fixtures::apply(
        &cp,
        &policy("ClusterPropagationPolicy", "cpp1", other, "member1", true, ""),
    )
    .await;
    wait_claim(&cp, "Deployment", "nginx", CPP_NAME, Some("cpp2")).await;
    wait_pending(&cp, "nginx-deployment", "ClusterPropagationPolicy cpp2", 1).await;
    deployment_stays_on(&env, "nginx", &[1]).await;

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[2]).await;
}

/// Combined Case 3: a non-Lazy PropagationPolicy preempts a Lazy ClusterPropagationPolicy; the
/// new (immediate) policy applies at once.
#[tokio::test]
async fn combined_case_3_preemption_by_immediate_policy() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &cpp("cpp1", "member1", true)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;

    let preempting = policy(
        "PropagationPolicy",
        "pp2",
        nginx_selector(),
        "member2",
        false,
        "  priority: 2\n  preemption: Always\n",
    );
    fixtures::apply(&cp, &preempting).await;
    wait_deployment_on(&env, "nginx", &[2]).await;
    wait_claim(&cp, "Deployment", "nginx", PP_NAME, Some("pp2")).await;
}

/// Combined Case 4: a Lazy PropagationPolicy preempts a Lazy one; the claim moves at once,
/// propagation waits for the template's change.
#[tokio::test]
async fn combined_case_4_preemption_by_lazy_policy() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &pp("pp1", "member1", true)).await;
    create_nginx(&cp, "nginx").await;
    wait_deployment_on(&env, "nginx", &[1]).await;

    let preempting = policy(
        "PropagationPolicy",
        "pp2",
        nginx_selector(),
        "member2",
        true,
        "  priority: 2\n  preemption: Always\n",
    );
    fixtures::apply(&cp, &preempting).await;
    wait_claim(&cp, "Deployment", "nginx", PP_NAME, Some("pp2")).await;
    wait_pending(&cp, "nginx-deployment", "PropagationPolicy default/pp2", 1).await;
    deployment_stays_on(&env, "nginx", &[1]).await;

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[2]).await;
}

/// Combined Case 5: with propagateDeps, a Lazy placement edit moves neither the workload nor
/// its ConfigMap until the workload changes; then both move.
#[tokio::test]
async fn combined_case_5_propagate_deps_follow_the_workload() {
    let (env, cp) = start().await;
    let with_deps = |cluster: &str| {
        policy(
            "PropagationPolicy",
            "pp",
            nginx_selector(),
            cluster,
            true,
            "  propagateDeps: true\n",
        )
    };
    fixtures::apply(&cp, &with_deps("member1")).await;
    fixtures::apply(&cp, &configmap("nginx-config")).await;
    configmap_stays_on(&env, "nginx-config", &[]).await;
    fixtures::apply(&cp, &nginx_with_configmap("nginx", "nginx-config")).await;
    wait_deployment_on(&env, "nginx", &[1]).await;
    wait_configmap_on(&env, "nginx-config", &[1]).await;

    fixtures::apply(&cp, &with_deps("member2")).await;
    wait_pending(&cp, "nginx-deployment", "PropagationPolicy default/pp", 2).await;
    deployment_stays_on(&env, "nginx", &[1]).await;
    configmap_stays_on(&env, "nginx-config", &[1]).await;

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[2]).await;
    wait_configmap_on(&env, "nginx-config", &[2]).await;
}

/// Combined Case 6: templates older than the Lazy policy wait; turning propagateDeps on is a
/// propagation change that waits too, and the dependency follows when the workload changes.
#[tokio::test]
async fn combined_case_6_propagate_deps_enabled_lazily() {
    let (env, cp) = start().await;
    fixtures::apply(&cp, &nginx_with_configmap("nginx", "nginx-config")).await;
    fixtures::apply(&cp, &configmap("nginx-config")).await;
    let both = "[{apiVersion: apps/v1, kind: Deployment, name: nginx}, {apiVersion: v1, kind: ConfigMap, name: nginx-config}]";
    let deps = |cluster: &str, on: bool| {
        policy(
            "PropagationPolicy",
            "pp",
            both,
            cluster,
            true,
            &format!("  propagateDeps: {on}\n"),
        )
    };
    fixtures::apply(&cp, &deps("member1", false)).await;
    wait_claim(&cp, "Deployment", "nginx", PP_NAME, Some("pp")).await;
    wait_claim(&cp, "ConfigMap", "nginx-config", PP_NAME, Some("pp")).await;
    deployment_stays_on(&env, "nginx", &[]).await;
    configmap_stays_on(&env, "nginx-config", &[]).await;

    touch(&cp, "nginx", "1").await;
    wait_deployment_on(&env, "nginx", &[1]).await;
    configmap_stays_on(&env, "nginx-config", &[]).await;

    fixtures::apply(&cp, &deps("member2", true)).await;
    wait_pending(&cp, "nginx-deployment", "PropagationPolicy default/pp", 2).await;
    deployment_stays_on(&env, "nginx", &[1]).await;
    configmap_stays_on(&env, "nginx-config", &[]).await;

    touch(&cp, "nginx", "2").await;
    wait_deployment_on(&env, "nginx", &[2]).await;
    wait_configmap_on(&env, "nginx-config", &[2]).await;
}

// ---------------------------------------------------------------------------------------------
// The default behaviour of the seed's four cases, for contrast
// ---------------------------------------------------------------------------------------------

/// Without `activationPreference`, each of the seed's four cases refreshes the binding at once:
/// Case 1 (policy still matches, placement edited), Case 2 (policy deleted, another takes
/// over), Case 3 (preemption), Case 4 (hit: the template existed before the policy). One
/// Deployment per case, in one installation.
#[tokio::test]
async fn default_cases_1_to_4_apply_policy_changes_at_once() {
    let (env, cp) = start().await;
    let select = |name: &str| format!("[{{apiVersion: apps/v1, kind: Deployment, name: {name}}}]");
    let immediate = |policy_name: &str, target: &str, cluster: &str, extra: &str| {
        policy(
            "PropagationPolicy",
            policy_name,
            &select(target),
            cluster,
            false,
            extra,
        )
    };
    // Case 4 needs the template first.
    create_nginx(&cp, "case4").await;
    fixtures::apply(&cp, &immediate("c1", "case1", "member1", "")).await;
    fixtures::apply(&cp, &immediate("c2-old", "case2", "member1", "")).await;
    fixtures::apply(&cp, &immediate("c3-old", "case3", "member1", "")).await;
    for name in ["case1", "case2", "case3"] {
        create_nginx(&cp, name).await;
    }
    for name in ["case1", "case2", "case3"] {
        wait_deployment_on(&env, name, &[1]).await;
    }
    // Case 1: placement edit.
    fixtures::apply(&cp, &immediate("c1", "case1", "member2", "")).await;
    // Case 2: the claiming policy is deleted, another one matches.
    fixtures::apply(&cp, &immediate("c2-new", "case2", "member2", "")).await;
    fixtures::delete(&cp, &immediate("c2-old", "case2", "member1", "")).await;
    // Case 3: preemption.
    let preempt = "  priority: 2\n  preemption: Always\n";
    fixtures::apply(&cp, &immediate("c3-new", "case3", "member2", preempt)).await;
    // Case 4: hit.
    fixtures::apply(&cp, &immediate("c4", "case4", "member2", "")).await;
    for name in ["case1", "case2", "case3", "case4"] {
        wait_deployment_on(&env, name, &[2]).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Restart safety
// ---------------------------------------------------------------------------------------------

async fn lazy_edit_then(env: &mut Env, cp: &Client, restart: &[Service]) {
    fixtures::apply(cp, &pp("pp", "member1", true)).await;
    create_nginx(cp, "nginx").await;
    wait_deployment_on(env, "nginx", &[1]).await;

    // Kill -9 right after the edit: whether or not the services saw it, nothing may move.
    fixtures::apply(cp, &pp("pp", "member2", true)).await;
    for service in restart {
        env.kill(*service);
    }
    // A second edit while they are down.
    fixtures::apply(cp, &pp("pp", "member1, member2", true)).await;
    for service in restart {
        env.start_again(*service).await;
    }
    wait_pending(cp, "nginx-deployment", "PropagationPolicy default/pp", 3).await;
    deployment_stays_on(env, "nginx", &[1]).await;

    touch(cp, "nginx", "1").await;
    wait_deployment_on(env, "nginx", &[1, 2]).await;
}

/// The detector is killed right after a Lazy policy edit and restarted (a second edit made
/// while it is down): propagation stays unchanged until the template changes, then it moves.
#[tokio::test]
async fn restart_of_the_detector_keeps_a_lazy_change_pending() {
    let (mut env, cp) = start().await;
    lazy_edit_then(&mut env, &cp, &[Service::Detector]).await;
}

/// Every service is killed right after a Lazy policy edit and restarted: the same.
#[tokio::test]
async fn restart_of_all_services_keeps_a_lazy_change_pending() {
    let (mut env, cp) = start().await;
    lazy_edit_then(&mut env, &cp, &Service::ALL).await;
}

// ---------------------------------------------------------------------------------------------
// The user guide (docs/lazy-activation.md) and `flotilla activate`
// ---------------------------------------------------------------------------------------------

/// A Deployment `name` in `team-a` labelled `app: web`.
fn web(name: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: team-a
  labels: {{app: web}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
"
    )
}

async fn team_a_on(env: &Env, name: &str) -> Vec<usize> {
    let mut on = Vec::new();
    for i in 1..=env.members.len() {
        if fixtures::member_deployment(&env.member_client(i).await, "team-a", name)
            .await
            .is_some()
        {
            on.push(i);
        }
    }
    on
}

async fn wait_team_a_on(env: &Env, names: &[&str], members: &[usize]) {
    for name in names {
        eventually(
            &format!("team-a/{name} on exactly {members:?}"),
            TIMEOUT,
            || async { team_a_on(env, name).await == members },
        )
        .await;
    }
}

/// The user guide's gradual rollout, with its YAML as written and the real `flotilla activate`
/// binary: edit a Lazy policy, see what is pending, activate two (`--max 2`), one by name, the
/// rest across all namespaces; each step moves exactly the activated templates.
#[tokio::test]
async fn user_guide_gradual_rollout_with_flotilla_activate() {
    let (env, cp) = start().await;
    let blocks = fixtures::doc_yaml_blocks("lazy-activation.md");
    assert_eq!(blocks.len(), 2, "the guide's YAML: the policy, then its edit");
    fixtures::apply(&cp, &blocks[0]).await;
    let all = ["web-1", "web-2", "web-3", "web-4", "web-5"];
    for name in all {
        fixtures::apply(&cp, &web(name)).await;
    }
    wait_team_a_on(&env, &all, &[1]).await;

    // 2. Edit the policy: nothing moves.
    fixtures::apply(&cp, &blocks[1]).await;
    eventually("the policy counts five pending templates", TIMEOUT, || async {
        let status = policy_status_in(&cp, "team-a", "web").await;
        status["pendingActivationTemplates"] == 5 && status["observedGeneration"] == 2
    })
    .await;
    stays("every web Deployment still on member1 only", HOLD, || async {
        for name in all {
            if team_a_on(&env, name).await != [1] {
                return false;
            }
        }
        true
    })
    .await;
    // 3. Inspect: kubectl shows the pending bindings.
    let table = kubectl(&env, &["get", "rb", "-n", "team-a"]);
    assert_eq!(
        table.lines().filter(|l| l.contains(" False ")).count(),
        5,
        "{table}"
    );

    // 4. Activate a few.
    let out = flotilla(
        &env,
        &[
            "activate",
            "deployments",
            "-l",
            "app=web",
            "-n",
            "team-a",
            "--max",
            "2",
            "--wait",
        ],
    );
    assert!(
        out.contains("activated deployment.apps/web-1 -n team-a (PropagationPolicy team-a/web generation 2)"),
        "{out}"
    );
    assert!(out.contains("activated deployment.apps/web-2 -n team-a"), "{out}");
    assert!(
        out.contains("2 activated, 0 already current, 0 already requested, 3 still pending"),
        "{out}"
    );
    wait_team_a_on(&env, &["web-1", "web-2"], &[2]).await;
    // 5. Verify: exactly those moved.
    stays("the others stay on member1", HOLD, || async {
        for name in ["web-3", "web-4", "web-5"] {
            if team_a_on(&env, name).await != [1] {
                return false;
            }
        }
        true
    })
    .await;
    eventually("three still pending", TIMEOUT, || async {
        policy_status_in(&cp, "team-a", "web").await["pendingActivationTemplates"] == 3
    })
    .await;

    // One by name; a dry run writes nothing.
    let dry = flotilla(
        &env,
        &["activate", "deployment/web-5", "-n", "team-a", "--dry-run"],
    );
    assert!(dry.contains("would activate deployment.apps/web-5"), "{dry}");
    let out = flotilla(&env, &["activate", "deployment/web-5", "-n", "team-a"]);
    assert!(out.contains("activated deployment.apps/web-5 -n team-a"), "{out}");
    wait_team_a_on(&env, &["web-5"], &[2]).await;

    // 6. The rest, across all namespaces.
    let out = flotilla(
        &env,
        &["activate", "deployments", "-l", "app=web", "-A", "--wait"],
    );
    assert!(out.contains("activated deployment.apps/web-3 -n team-a"), "{out}");
    assert!(out.contains("activated deployment.apps/web-4 -n team-a"), "{out}");
    assert!(
        out.contains("already current deployment.apps/web-1 -n team-a"),
        "{out}"
    );
    assert!(out.contains("2 activated, 3 already current"), "{out}");
    wait_team_a_on(&env, &all, &[2]).await;
    let again = flotilla(
        &env,
        &["activate", "deployments", "-l", "app=web", "-n", "team-a"],
    );
    assert!(again.contains("0 activated, 5 already current"), "{again}");
    eventually("nothing pending", TIMEOUT, || async {
        policy_status_in(&cp, "team-a", "web").await["pendingActivationTemplates"] == 0
    })
    .await;
}

async fn policy_status_in(cp: &Client, namespace: &str, name: &str) -> Value {
    let object = fixtures::get(
        cp,
        "policy.karmada.io/v1alpha1",
        "PropagationPolicy",
        Some(namespace),
        name,
    )
    .await
    .unwrap();
    serde_json::to_value(object).unwrap()["status"].clone()
}

// ---------------------------------------------------------------------------------------------
// Scale measurement (not run in CI)
// ---------------------------------------------------------------------------------------------

/// A value of the detector's `/metrics` (0 when absent).
async fn detector_metric(env: &Env, series: &str) -> f64 {
    let (_, body) = env
        .http_get(Service::Detector, "/metrics")
        .await
        .unwrap_or_default();
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `name -> (metadata.generation, resourceVersion)` of every ResourceBinding in `default`.
async fn binding_versions(cp: &Client) -> std::collections::BTreeMap<String, (i64, String)> {
    let api: Api<flotilla_api::work::ResourceBinding> = Api::namespaced(cp.clone(), NS);
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|b| {
            let name = b.metadata.name.clone().unwrap_or_default();
            (
                name,
                (
                    b.metadata.generation.unwrap_or_default(),
                    b.metadata.resource_version.clone().unwrap_or_default(),
                ),
            )
        })
        .collect()
}

/// `name -> resourceVersion` of member `i`'s bench ConfigMaps.
async fn member_configmaps(env: &Env, i: usize) -> std::collections::BTreeMap<String, String> {
    let api: Api<ConfigMap> = Api::namespaced(env.member_client(i).await, NS);
    api.list(&kube::api::ListParams::default().labels("bench=lazy"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.unwrap_or_default(),
                c.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

/// The closing note's figures: N templates (default 5,000; `FLOTILLA_BENCH_TEMPLATES`) under
/// one Lazy policy, the whole pipeline. Editing the placement writes no binding spec and no
/// member object (counted from resourceVersions and generations, and the detector's write
/// metric); `flotilla activate --max 100` moves exactly 100. Prints the detector's time to
/// process the edit.
///
/// `cargo test -p flotilla-e2e --release --test lazy_activation -- --ignored --nocapture scale`
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "scale measurement; run on demand"]
async fn scale_lazy_edit_and_activate_100() {
    use std::time::Instant;
    let n: usize = std::env::var("FLOTILLA_BENCH_TEMPLATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let long = Duration::from_secs(3600);
    let (env, cp) = start().await;
    let bench = |cluster: &str| {
        policy(
            "PropagationPolicy",
            "bench",
            "[{apiVersion: v1, kind: ConfigMap, labelSelector: {matchLabels: {bench: lazy}}}]",
            cluster,
            true,
            "",
        )
    };
    fixtures::apply(&cp, &bench("member1")).await;
    let started = Instant::now();
    let configmaps: Api<ConfigMap> = Api::namespaced(cp.clone(), NS);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        if tasks.len() >= 32 {
            tasks.join_next().await.unwrap().unwrap();
        }
        let configmaps = configmaps.clone();
        tasks.spawn(async move {
            let cm: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": format!("cm-{i:05}"), "labels": {"bench": "lazy"}},
                "data": {"index": i.to_string()},
            }))
            .unwrap();
            configmaps.create(&Default::default(), &cm).await.unwrap();
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    eprintln!("created {n} ConfigMaps in {:?}", started.elapsed());
    wait_until("every ConfigMap on member1", long, || async {
        (member_configmaps(&env, 1).await.len() == n).then_some(())
    })
    .await;
    eprintln!("{n} ConfigMaps on member1 after {:?}", started.elapsed());
    wait_until("the policy status to settle", long, || async {
        let status = policy_status(&cp, "PropagationPolicy", "bench").await;
        (status["boundTemplates"] == n && status["pendingActivationTemplates"] == 0).then_some(())
    })
    .await;
    let bindings_before = binding_versions(&cp).await;
    let member1_before = member_configmaps(&env, 1).await;
    assert_eq!(bindings_before.len(), n);
    let spec_writes_before =
        detector_metric(&env, "flotilla_detector_binding_writes_total{write=\"spec\"}").await;
    let status_writes_before =
        detector_metric(&env, "flotilla_detector_binding_writes_total{write=\"status\"}").await;

    // The edit.
    let edited = Instant::now();
    fixtures::apply(&cp, &bench("member2")).await;
    wait_until("every binding pending", long, || async {
        (detector_metric(&env, "flotilla_detector_pending_lazy_bindings").await >= n as f64).then_some(())
    })
    .await;
    let processed = edited.elapsed();
    wait_until("the policy to count every template pending", long, || async {
        let status = policy_status(&cp, "PropagationPolicy", "bench").await;
        (status["pendingActivationTemplates"] == n && status["observedGeneration"] == 2).then_some(())
    })
    .await;
    let counted = edited.elapsed();
    // Hold a while: nothing may follow.
    stays("no ConfigMap on member2", HOLD, || async {
        member_configmaps(&env, 2).await.is_empty()
    })
    .await;
    let bindings_after = binding_versions(&cp).await;
    let member1_after = member_configmaps(&env, 1).await;
    let member2_after = member_configmaps(&env, 2).await;
    let spec_changed = bindings_before
        .iter()
        .filter(|(name, (generation, _))| bindings_after.get(*name).map(|a| a.0) != Some(*generation))
        .count();
    let rv_changed = bindings_before
        .iter()
        .filter(|(name, (_, rv))| bindings_after.get(*name).map(|a| &a.1) != Some(rv))
        .count();
    let member_writes = member1_before
        .iter()
        .filter(|(name, rv)| member1_after.get(*name) != Some(rv))
        .count()
        + member2_after.len();
    let spec_writes = detector_metric(&env, "flotilla_detector_binding_writes_total{write=\"spec\"}").await
        - spec_writes_before;
    let status_writes = detector_metric(&env, "flotilla_detector_binding_writes_total{write=\"status\"}")
        .await
        - status_writes_before;
    eprintln!(
        "LAZY EDIT over {n} templates: detector processed it in {processed:?} (policy status counted {n} pending after {counted:?}); \
         binding spec writes: {spec_writes} (metric), bindings whose generation changed: {spec_changed}; \
         bindings whose resourceVersion changed (PolicyActivated condition): {rv_changed}, detector status writes: {status_writes}; \
         member writes: {member_writes} (member1 objects changed or gone + member2 objects)"
    );
    assert_eq!(spec_changed, 0);
    assert_eq!(spec_writes, 0.0);
    assert_eq!(member_writes, 0);

    // Activate 100.
    let activating = Instant::now();
    let out = flotilla(
        &env,
        &[
            "activate",
            "configmaps",
            "-l",
            "bench=lazy",
            "-n",
            NS,
            "--max",
            "100",
            "--wait",
            "--timeout",
            "600",
        ],
    );
    let activated_in = activating.elapsed();
    assert!(
        out.lines()
            .last()
            .unwrap_or_default()
            .starts_with("100 activated, 0 already current"),
        "{}",
        out.lines().last().unwrap_or_default()
    );
    let expected: Vec<String> = (0..100).map(|i| format!("cm-{i:05}")).collect();
    wait_until("the 100 on member2 and gone from member1", long, || async {
        let m2 = member_configmaps(&env, 2).await;
        let m1 = member_configmaps(&env, 1).await;
        (m2.keys().cloned().collect::<Vec<_>>() == expected && m1.len() == n - 100).then_some(())
    })
    .await;
    let moved_in = activating.elapsed();
    let bindings_final = binding_versions(&cp).await;
    let refreshed: Vec<&String> = bindings_before
        .iter()
        .filter(|(name, (generation, _))| bindings_final.get(*name).map(|a| a.0) != Some(*generation))
        .map(|(name, _)| name)
        .collect();
    let member1_final = member_configmaps(&env, 1).await;
    let untouched = member1_before
        .iter()
        .filter(|(name, rv)| member1_final.get(*name) == Some(rv))
        .count();
    eprintln!(
        "ACTIVATE --max 100: command (with --wait) took {activated_in:?}, members converged after {moved_in:?}; \
         bindings whose spec changed: {}; member2 objects: {}; member1 objects untouched: {untouched} of {}",
        refreshed.len(),
        member_configmaps(&env, 2).await.len(),
        n - 100
    );
    assert_eq!(refreshed.len(), 100);
    assert_eq!(untouched, n - 100);
}

// ---------------------------------------------------------------------------------------------
// The seed's Test Plan in the API's order: every case again with its steps applied back to
// back, with the detector paused (SIGSTOP) while they happen, and with the detector killed
// between them. The outcome must follow the order of the writes in the API, never the order or
// timing in which the detector's watches deliver them (issue 15). The cases share one
// installation per mode; each has its own objects (prefixed with the case's id).
// ---------------------------------------------------------------------------------------------

/// One user action.
enum Step {
    /// `kubectl apply` of a YAML document.
    Apply(String),
    /// `kubectl delete` of a YAML document's object.
    Delete(String),
    /// A user edit of a Deployment (the seed's `refresh-time` label).
    Touch(String),
}

/// What the seed says the user sees once the steps of a phase are done.
enum Expect {
    /// The Deployment reaches exactly these members.
    On(String, Vec<usize>),
    /// The Deployment stays (unchanged) on exactly these members.
    Stays(String, Vec<usize>),
    /// The ConfigMap reaches exactly these members.
    ConfigMapOn(String, Vec<usize>),
    /// The ConfigMap stays on exactly these members.
    ConfigMapStays(String, Vec<usize>),
    /// The template (`kind`, name) is claimed via the claim annotation `key` by the policy
    /// named (or by none).
    Claimed(&'static str, String, &'static str, Option<String>),
    /// The binding says the policy's generation is pending (`binding`, `policy` as in the
    /// condition message, generation).
    Pending(String, String, i64),
    /// The template has no binding.
    NoBinding(String),
}

/// Steps the seed applies together, then what it expects.
struct Phase {
    steps: Vec<Step>,
    expect: Vec<Expect>,
}

/// One case of the seed's Test Plan (or of Karmada's issue), with its own objects.
struct Case {
    name: &'static str,
    phases: Vec<Phase>,
}

/// How the steps of a phase meet the detector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Applied back to back while everything runs.
    BackToBack,
    /// Applied while the detector is paused (SIGSTOP), which is resumed afterwards.
    DetectorPaused,
    /// The detector is killed (SIGKILL) after the first step and started again after the last.
    DetectorKilled,
}

fn phase(steps: Vec<Step>, expect: Vec<Expect>) -> Phase {
    Phase { steps, expect }
}

fn selects(deployment: &str) -> String {
    format!("[{{apiVersion: apps/v1, kind: Deployment, name: {deployment}}}]")
}

fn lazy_pp(name: &str, deployment: &str, cluster: &str, lazy: bool) -> String {
    policy("PropagationPolicy", name, &selects(deployment), cluster, lazy, "")
}

fn lazy_cpp(name: &str, deployment: &str, cluster: &str, lazy: bool) -> String {
    policy(
        "ClusterPropagationPolicy",
        name,
        &selects(deployment),
        cluster,
        lazy,
        "",
    )
}

fn nginx_named(name: &str) -> String {
    fixtures::deployment_yaml(NS, name, 1, "nginx:1.25")
}

const PREEMPT: &str = "  priority: 2\n  preemption: Always\n";

/// Every lazy case of the seed's Test Plan, and Karmada #5348 ("a deleted, never-activated
/// lazy policy does not block later policies", with an immediate and with a Lazy successor).
fn seed_cases() -> Vec<Case> {
    use Expect::*;
    use Step::*;
    let d = |id: &str| format!("{id}-nginx");
    let rb = |id: &str| format!("{id}-nginx-deployment");
    let pp_ref = |name: &str| format!("PropagationPolicy {NS}/{name}");
    let s = String::from;
    vec![
        Case {
            name: "Simple Case 1 (policy created before resource)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_pp("sc1-pp", &d("sc1"), "member1", true)),
                        Apply(nginx_named(&d("sc1"))),
                    ],
                    vec![On(d("sc1"), vec![1])],
                ),
                phase(
                    vec![Delete(lazy_pp("sc1-pp", &d("sc1"), "member1", true))],
                    vec![
                        Claimed("Deployment", d("sc1"), PP_NAME, None),
                        Stays(d("sc1"), vec![1]),
                    ],
                ),
            ],
        },
        Case {
            name: "Simple Case 2 (policy created after resource)",
            phases: vec![
                phase(
                    vec![
                        Apply(nginx_named(&d("sc2"))),
                        Apply(lazy_pp("sc2-pp", &d("sc2"), "member1", true)),
                    ],
                    vec![
                        Claimed("Deployment", d("sc2"), PP_NAME, Some(s("sc2-pp"))),
                        Stays(d("sc2"), vec![]),
                        NoBinding(rb("sc2")),
                    ],
                ),
                phase(vec![Touch(d("sc2"))], vec![On(d("sc2"), vec![1])]),
            ],
        },
        Case {
            name: "Simple Case 3 (lazy to immediate)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_pp("sc3-pp", &d("sc3"), "member1", true)),
                        Apply(nginx_named(&d("sc3"))),
                    ],
                    vec![On(d("sc3"), vec![1])],
                ),
                phase(
                    vec![Apply(lazy_pp("sc3-pp", &d("sc3"), "member2", false))],
                    vec![On(d("sc3"), vec![2])],
                ),
            ],
        },
        Case {
            name: "Simple Case 4 (immediate to lazy)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_pp("sc4-pp", &d("sc4"), "member1", false)),
                        Apply(nginx_named(&d("sc4"))),
                    ],
                    vec![On(d("sc4"), vec![1])],
                ),
                phase(
                    vec![Apply(lazy_pp("sc4-pp", &d("sc4"), "member2", true))],
                    vec![Pending(rb("sc4"), pp_ref("sc4-pp"), 2), Stays(d("sc4"), vec![1])],
                ),
                phase(vec![Touch(d("sc4"))], vec![On(d("sc4"), vec![2])]),
            ],
        },
        Case {
            name: "Combined Case 1 (policy deleted)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_pp("cc1-pp1", &d("cc1"), "member1", true)),
                        Apply(nginx_named(&d("cc1"))),
                    ],
                    vec![On(d("cc1"), vec![1])],
                ),
                phase(
                    vec![
                        Apply(lazy_pp("cc1-pp2", &d("cc1"), "member2", true)),
                        Delete(lazy_pp("cc1-pp1", &d("cc1"), "member1", true)),
                    ],
                    vec![
                        Claimed("Deployment", d("cc1"), PP_NAME, Some(s("cc1-pp2"))),
                        Pending(rb("cc1"), pp_ref("cc1-pp2"), 1),
                        Stays(d("cc1"), vec![1]),
                    ],
                ),
                phase(vec![Touch(d("cc1"))], vec![On(d("cc1"), vec![2])]),
            ],
        },
        Case {
            name: "Combined Case 2 (policy no longer match)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_cpp("cc2-cpp1", &d("cc2"), "member1", true)),
                        Apply(nginx_named(&d("cc2"))),
                    ],
                    vec![On(d("cc2"), vec![1])],
                ),
                phase(
                    vec![
                        Apply(lazy_cpp("cc2-cpp2", &d("cc2"), "member2", true)),
                        Apply(lazy_cpp("cc2-cpp1", "cc2-other", "member1", true)),
                    ],
                    vec![
                        Claimed("Deployment", d("cc2"), CPP_NAME, Some(s("cc2-cpp2"))),
                        Pending(rb("cc2"), s("ClusterPropagationPolicy cc2-cpp2"), 1),
                        Stays(d("cc2"), vec![1]),
                    ],
                ),
                phase(vec![Touch(d("cc2"))], vec![On(d("cc2"), vec![2])]),
            ],
        },
        Case {
            name: "Combined Case 3 (policy preemption, immediate)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_cpp("cc3-cpp1", &d("cc3"), "member1", true)),
                        Apply(nginx_named(&d("cc3"))),
                    ],
                    vec![On(d("cc3"), vec![1])],
                ),
                phase(
                    vec![Apply(policy(
                        "PropagationPolicy",
                        "cc3-pp2",
                        &selects(&d("cc3")),
                        "member2",
                        false,
                        PREEMPT,
                    ))],
                    vec![
                        On(d("cc3"), vec![2]),
                        Claimed("Deployment", d("cc3"), PP_NAME, Some(s("cc3-pp2"))),
                    ],
                ),
            ],
        },
        Case {
            name: "Combined Case 4 (policy preemption, lazy)",
            phases: vec![
                phase(
                    vec![
                        Apply(lazy_pp("cc4-pp1", &d("cc4"), "member1", true)),
                        Apply(nginx_named(&d("cc4"))),
                    ],
                    vec![On(d("cc4"), vec![1])],
                ),
                phase(
                    vec![Apply(policy(
                        "PropagationPolicy",
                        "cc4-pp2",
                        &selects(&d("cc4")),
                        "member2",
                        true,
                        PREEMPT,
                    ))],
                    vec![
                        Claimed("Deployment", d("cc4"), PP_NAME, Some(s("cc4-pp2"))),
                        Pending(rb("cc4"), pp_ref("cc4-pp2"), 1),
                        Stays(d("cc4"), vec![1]),
                    ],
                ),
                phase(vec![Touch(d("cc4"))], vec![On(d("cc4"), vec![2])]),
            ],
        },
        {
            let with_deps = |cluster: &str| {
                policy(
                    "PropagationPolicy",
                    "cc5-pp",
                    &selects(&d("cc5")),
                    cluster,
                    true,
                    "  propagateDeps: true\n",
                )
            };
            Case {
                name: "Combined Case 5 (propagate dependencies)",
                phases: vec![
                    phase(
                        vec![Apply(with_deps("member1")), Apply(configmap("cc5-config"))],
                        vec![ConfigMapStays(s("cc5-config"), vec![])],
                    ),
                    phase(
                        vec![Apply(nginx_with_configmap(&d("cc5"), "cc5-config"))],
                        vec![On(d("cc5"), vec![1]), ConfigMapOn(s("cc5-config"), vec![1])],
                    ),
                    phase(
                        vec![Apply(with_deps("member2"))],
                        vec![
                            Pending(rb("cc5"), pp_ref("cc5-pp"), 2),
                            Stays(d("cc5"), vec![1]),
                            ConfigMapStays(s("cc5-config"), vec![1]),
                        ],
                    ),
                    phase(
                        vec![Touch(d("cc5"))],
                        vec![On(d("cc5"), vec![2]), ConfigMapOn(s("cc5-config"), vec![2])],
                    ),
                ],
            }
        },
        {
            let both = format!(
                "[{{apiVersion: apps/v1, kind: Deployment, name: {}}}, {{apiVersion: v1, kind: ConfigMap, name: cc6-config}}]",
                d("cc6")
            );
            let deps = move |cluster: &str, on: bool| {
                policy(
                    "PropagationPolicy",
                    "cc6-pp",
                    &both,
                    cluster,
                    true,
                    &format!("  propagateDeps: {on}\n"),
                )
            };
            Case {
                name: "Combined Case 6 (propagate dependencies)",
                phases: vec![
                    phase(
                        vec![
                            Apply(nginx_with_configmap(&d("cc6"), "cc6-config")),
                            Apply(configmap("cc6-config")),
                            Apply(deps("member1", false)),
                        ],
                        vec![
                            Claimed("Deployment", d("cc6"), PP_NAME, Some(s("cc6-pp"))),
                            Claimed("ConfigMap", s("cc6-config"), PP_NAME, Some(s("cc6-pp"))),
                            Stays(d("cc6"), vec![]),
                            ConfigMapStays(s("cc6-config"), vec![]),
                        ],
                    ),
                    phase(
                        vec![Touch(d("cc6"))],
                        vec![On(d("cc6"), vec![1]), ConfigMapStays(s("cc6-config"), vec![])],
                    ),
                    phase(
                        vec![Apply(deps("member2", true))],
                        vec![
                            Pending(rb("cc6"), pp_ref("cc6-pp"), 2),
                            Stays(d("cc6"), vec![1]),
                            ConfigMapStays(s("cc6-config"), vec![]),
                        ],
                    ),
                    phase(
                        vec![Touch(d("cc6"))],
                        vec![On(d("cc6"), vec![2]), ConfigMapOn(s("cc6-config"), vec![2])],
                    ),
                ],
            }
        },
        Case {
            name: "Karmada #5348 (deleted lazy policy, then an immediate one)",
            phases: vec![
                phase(
                    vec![
                        Apply(nginx_named(&d("k1"))),
                        Apply(lazy_pp("k1-lazy", &d("k1"), "member1", true)),
                    ],
                    vec![
                        Claimed("Deployment", d("k1"), PP_NAME, Some(s("k1-lazy"))),
                        Stays(d("k1"), vec![]),
                    ],
                ),
                phase(
                    vec![
                        Delete(lazy_pp("k1-lazy", &d("k1"), "member1", true)),
                        Apply(lazy_pp("k1-next", &d("k1"), "member2", false)),
                    ],
                    vec![
                        On(d("k1"), vec![2]),
                        Claimed("Deployment", d("k1"), PP_NAME, Some(s("k1-next"))),
                    ],
                ),
            ],
        },
        Case {
            name: "Karmada #5348 (deleted lazy policy, then a lazy one)",
            phases: vec![
                phase(
                    vec![
                        Apply(nginx_named(&d("k2"))),
                        Apply(lazy_pp("k2-lazy", &d("k2"), "member1", true)),
                    ],
                    vec![
                        Claimed("Deployment", d("k2"), PP_NAME, Some(s("k2-lazy"))),
                        Stays(d("k2"), vec![]),
                    ],
                ),
                phase(
                    vec![
                        Delete(lazy_pp("k2-lazy", &d("k2"), "member1", true)),
                        Apply(lazy_pp("k2-next", &d("k2"), "member2", true)),
                    ],
                    vec![
                        Claimed("Deployment", d("k2"), PP_NAME, Some(s("k2-next"))),
                        Stays(d("k2"), vec![]),
                        NoBinding(rb("k2")),
                    ],
                ),
                phase(vec![Touch(d("k2"))], vec![On(d("k2"), vec![2])]),
            ],
        },
    ]
}

async fn run_step(cp: &Client, step: &Step) {
    match step {
        Step::Apply(yaml) => {
            fixtures::apply(cp, yaml).await;
        }
        Step::Delete(yaml) => fixtures::delete(cp, yaml).await,
        Step::Touch(deployment) => {
            // Every edit a new value: an edit that changes nothing is no edit.
            static EDITS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = EDITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            touch(cp, deployment, &format!("edit-{n}")).await;
        }
    }
}

async fn check(env: &Env, cp: &Client, expect: &Expect) {
    match expect {
        Expect::On(name, members) => wait_deployment_on(env, name, members).await,
        Expect::Stays(name, members) => deployment_stays_on(env, name, members).await,
        Expect::ConfigMapOn(name, members) => wait_configmap_on(env, name, members).await,
        Expect::ConfigMapStays(name, members) => configmap_stays_on(env, name, members).await,
        Expect::Claimed(kind, name, key, policy) => wait_claim(cp, kind, name, key, policy.as_deref()).await,
        Expect::Pending(binding, policy, generation) => {
            wait_pending(cp, binding, policy, *generation).await;
        }
        Expect::NoBinding(name) => assert!(binding(cp, name).await.is_none(), "{name}: no binding"),
    }
}

/// Runs every case's phases in `mode`: the steps of phase N of every case, then the
/// expectations of phase N of every case (cases in parallel, each case's expectations in
/// order).
async fn run_seed_cases(mode: Mode) {
    let (mut env, cp) = start().await;
    let cases = seed_cases();
    let phases = cases.iter().map(|c| c.phases.len()).max().unwrap_or(0);
    for n in 0..phases {
        let current: Vec<(&str, &Phase)> = cases
            .iter()
            .filter_map(|c| c.phases.get(n).map(|p| (c.name, p)))
            .collect();
        // The first step of every case's phase, then the rest, each case's steps in order.
        let (firsts, rests): (Vec<_>, Vec<_>) = current
            .iter()
            .map(|(_, p)| {
                p.steps
                    .split_first()
                    .map_or((None, &[][..]), |(f, r)| (Some(f), r))
            })
            .unzip();
        match mode {
            Mode::BackToBack => {}
            Mode::DetectorPaused => env.pause(Service::Detector),
            Mode::DetectorKilled => {}
        }
        futures::future::join_all(firsts.iter().flatten().map(|step| run_step(&cp, step))).await;
        if mode == Mode::DetectorKilled {
            env.kill(Service::Detector);
        }
        futures::future::join_all(rests.iter().map(|steps| async {
            for step in *steps {
                run_step(&cp, step).await;
            }
        }))
        .await;
        match mode {
            Mode::BackToBack => {}
            Mode::DetectorPaused => env.resume(Service::Detector),
            Mode::DetectorKilled => env.start_again(Service::Detector).await,
        }
        futures::future::join_all(current.iter().map(|(name, p)| {
            let (env, cp) = (&env, &cp);
            async move {
                for expect in &p.expect {
                    check(env, cp, expect).await;
                }
                eprintln!("{mode:?}: {name}: phase {} as the seed says", n + 1);
            }
        }))
        .await;
    }
}

/// Every seed case with its steps applied back to back (no waiting for any service between
/// them): a template and a Lazy policy applied 0.1 s apart are ordered by the API.
#[tokio::test]
async fn seed_cases_with_back_to_back_applies() {
    run_seed_cases(Mode::BackToBack).await;
}

/// Every seed case with the detector paused (SIGSTOP) while the steps happen, then resumed:
/// it sees all of them at once and still decides as if it had seen each in turn.
#[tokio::test]
async fn seed_cases_with_the_detector_paused_during_the_steps() {
    run_seed_cases(Mode::DetectorPaused).await;
}

/// Every seed case with the detector killed (SIGKILL) after the first step and started again
/// after the last: a fresh process, with nothing but the API's state, decides the same.
#[tokio::test]
async fn seed_cases_with_the_detector_killed_between_the_steps() {
    run_seed_cases(Mode::DetectorKilled).await;
}
