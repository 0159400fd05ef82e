//! The services' RBAC is sufficient and minimal. Sufficient: every end-to-end test runs each
//! service as its own ServiceAccount with the roles of `deploy/manifests/<service>.yaml` (the
//! harness and `flotilla up` embed them). Minimal, here: for each rule of each service's
//! ClusterRole and Role in turn, the service is restarted with exactly that rule removed, the
//! request the rule exists for is provoked, and the service's log shows kube-apiserver's 403
//! naming a verb and resource the rule grants. The four services are checked concurrently in one
//! installation; each provocation creates its own objects, so the checks do not depend on each
//! other's timing.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flotilla_e2e::fixtures;
use flotilla_e2e::{Env, EnvOptions, Service};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// How long a provoked 403 may take to show in a service's log (the machine is loaded).
const DEADLINE: Duration = Duration::from_secs(90);

/// What makes the service make the request a rule exists for.
#[derive(Clone, Copy, Debug)]
enum Provocation {
    /// Starting is enough: lists, watches, Leases, the Cluster probe.
    Start,
    /// A Deployment with a ConfigMap dependency and a `propagateDeps` policy to `member1`.
    Propagate,
    /// The same, to `member2`, which has had no Work yet (its execution namespace is created).
    PropagateToFreshMember,
    /// Propagated, then the Deployment deleted (the binding's finalizer is removed).
    Delete,
    /// A policy that suspends dispatching (execution records `DispatchSuspended`).
    Suspend,
    /// Two bindings that disagree about a dependency they share (`DependencyConflict`).
    Conflict,
    /// A Deployment whose CPU request is not a quantity (the detector warns `InvalidTemplate`).
    InvalidTemplate,
    /// A Cluster whose API server cannot be reached (execution taints it `not-ready`).
    UnreachableCluster,
    /// Propagated to `member3`, which then gets a `NoExecute` taint nothing tolerates (the
    /// scheduler evicts the binding and records `EvictWorkloadFromClusterStarted`).
    Evict,
}

/// One rule of one role, and how to provoke its use.
struct Case {
    service: Service,
    kind: &'static str,
    index: usize,
    provocation: Provocation,
}

/// Every rule of every service's roles, with its provocation. A test below fails if a rule of
/// the manifests is missing here, so a new rule cannot escape the check.
fn cases() -> Vec<Case> {
    use Provocation::*;
    let case = |service, kind, index, provocation| Case {
        service,
        kind,
        index,
        provocation,
    };
    vec![
        // The detector: read/patch anything (templates, policies, bindings), create bindings,
        // core Warning events; its Lease.
        case(Service::Detector, "ClusterRole", 0, Start),
        case(Service::Detector, "ClusterRole", 1, Propagate),
        case(Service::Detector, "ClusterRole", 2, InvalidTemplate),
        case(Service::Detector, "Role", 0, Start),
        // The scheduler: bindings, their status, Clusters, eviction events.
        case(Service::Scheduler, "ClusterRole", 0, Start),
        case(Service::Scheduler, "ClusterRole", 1, Propagate),
        case(Service::Scheduler, "ClusterRole", 2, Start),
        case(Service::Scheduler, "ClusterRole", 3, Evict),
        // The dependency distributor: read anything, attached bindings, their conflict
        // condition, events; its Lease.
        case(Service::DependencyDistributor, "ClusterRole", 0, Start),
        case(Service::DependencyDistributor, "ClusterRole", 1, Propagate),
        case(Service::DependencyDistributor, "ClusterRole", 2, Conflict),
        case(Service::DependencyDistributor, "ClusterRole", 3, Conflict),
        case(Service::DependencyDistributor, "Role", 0, Start),
        // Execution: read anything, status, Works, the binding finalizer, the failover taints,
        // execution namespaces, events; its membership Lease. The fresh-member case runs before
        // any other execution case sends Works anywhere but member1.
        case(Service::Execution, "ClusterRole", 5, PropagateToFreshMember),
        case(Service::Execution, "ClusterRole", 0, Start),
        case(Service::Execution, "ClusterRole", 1, Propagate),
        case(Service::Execution, "ClusterRole", 2, Propagate),
        case(Service::Execution, "ClusterRole", 3, Delete),
        case(Service::Execution, "ClusterRole", 4, UnreachableCluster),
        case(Service::Execution, "ClusterRole", 6, Suspend),
        case(Service::Execution, "Role", 0, Start),
    ]
}

fn roles(service: Service) -> Vec<Value> {
    flotilla::identities::roles(service.binary()).unwrap()
}

fn role_of(service: Service, kind: &str) -> Value {
    roles(service)
        .into_iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("{} has no {kind}", service.binary()))
}

/// `Api` for a role object.
fn role_api(client: &Client, role: &Value) -> Api<DynamicObject> {
    let kind = role["kind"].as_str().unwrap();
    let plural = format!("{}s", kind.to_lowercase());
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
        &plural,
    );
    match role["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn set_rules(client: &Client, role: &Value, rules: &[Value]) {
    role_api(client, role)
        .patch(
            role["metadata"]["name"].as_str().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": rules})),
        )
        .await
        .unwrap();
}

/// A 403 a service logged: (verb, resource, API group), from kube-apiserver's message
/// `... cannot <verb> resource "<resource>" in API group "<group>" ...`.
fn forbidden_requests(log: &str) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for line in log.lines() {
        let line = line.replace("\\\"", "\"");
        let mut rest = line.as_str();
        while let Some(at) = rest.find("cannot ") {
            rest = &rest[at + "cannot ".len()..];
            let Some((verb, after)) = rest.split_once(" resource \"") else {
                continue;
            };
            let Some((resource, after)) = after.split_once("\" in API group \"") else {
                continue;
            };
            let Some((group, _)) = after.split_once('"') else {
                continue;
            };
            found.push((verb.to_owned(), resource.to_owned(), group.to_owned()));
        }
    }
    found
}

/// Whether `rule` names `verb` on `resource` (possibly `resource/subresource`) in `group`.
fn grants(rule: &Value, verb: &str, resource: &str, group: &str) -> bool {
    let has = |field: &str, wanted: &str| {
        rule[field]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i == "*" || i == wanted))
    };
    let resource_matches = rule["resources"].as_array().is_some_and(|items| {
        items.iter().any(|i| {
            i == "*"
                || i == resource
                || i.as_str()
                    .and_then(|i| i.strip_prefix("*/"))
                    .is_some_and(|sub| resource.split_once('/').is_some_and(|(_, s)| s == sub))
        })
    });
    has("verbs", verb) && has("apiGroups", group) && resource_matches
}

fn deployment(name: &str, config_map: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "containers": [{"name": "app", "image": "nginx:1.25", "resources": {"requests": {"cpu": cpu}}}],
                "volumes": [{"name": "c", "configMap": {"name": config_map}}],
            }},
        },
    })
}

fn policy(name: &str, deployments: &[&str], cluster: &str, extra: Value) -> Value {
    let selectors: Vec<Value> = deployments
        .iter()
        .map(|d| json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": d}))
        .collect();
    let mut spec = json!({
        "propagateDeps": true,
        "resourceSelectors": selectors,
        "placement": {"clusterAffinity": {"clusterNames": [cluster]}},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
        "data": {"key": "value"}})
}

/// Makes the service under test make its request; objects are named after `tag`.
async fn provoke(admin: &Client, provocation: Provocation, tag: &str) {
    let apply = |object: Value| async move {
        fixtures::apply_value(admin, &object).await;
    };
    let cm = format!("{tag}-cm");
    match provocation {
        Provocation::Start => {}
        Provocation::Propagate | Provocation::Delete => {
            apply(config_map(&cm)).await;
            apply(deployment(tag, &cm, "10m")).await;
            apply(policy(tag, &[tag], "member1", json!({}))).await;
        }
        Provocation::PropagateToFreshMember => {
            apply(config_map(&cm)).await;
            apply(deployment(tag, &cm, "10m")).await;
            apply(policy(tag, &[tag], "member2", json!({}))).await;
        }
        Provocation::Suspend => {
            apply(config_map(&cm)).await;
            apply(deployment(tag, &cm, "10m")).await;
            apply(policy(
                tag,
                &[tag],
                "member1",
                json!({"suspension": {"dispatching": true}}),
            ))
            .await;
        }
        Provocation::Conflict => {
            apply(config_map(&cm)).await;
            let (a, b) = (format!("{tag}-a"), format!("{tag}-b"));
            apply(deployment(&a, &cm, "10m")).await;
            apply(deployment(&b, &cm, "10m")).await;
            apply(policy(
                &a,
                &[&a],
                "member1",
                json!({"conflictResolution": "Overwrite", "preserveResourcesOnDeletion": true}),
            ))
            .await;
            apply(policy(&b, &[&b], "member1", json!({}))).await;
        }
        Provocation::InvalidTemplate => {
            apply(config_map(&cm)).await;
            apply(deployment(tag, &cm, "lots")).await;
            apply(policy(tag, &[tag], "member1", json!({}))).await;
        }
        Provocation::UnreachableCluster => {
            apply(
                json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": tag},
                "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:9"}}),
            )
            .await;
        }
        Provocation::Evict => {
            apply(config_map(&cm)).await;
            apply(deployment(tag, &cm, "10m")).await;
            apply(policy(tag, &[tag], "member3", json!({}))).await;
            wait_scheduled(admin, tag).await;
            let clusters: Api<flotilla_api::Cluster> = Api::all(admin.clone());
            clusters
                .patch(
                    "member3",
                    &PatchParams::default(),
                    // member3 is Ready and serves only this case: no other taint to keep.
                    &Patch::Merge(json!({"spec": {"taints": [{"key": tag, "effect": "NoExecute"}]}})),
                )
                .await
                .unwrap();
        }
    }
    if let Provocation::Delete = provocation {
        wait_scheduled(admin, tag).await;
        fixtures::delete(
            admin,
            &serde_yaml::to_string(&deployment(tag, &cm, "10m")).unwrap(),
        )
        .await;
    }
}

/// Waits until the binding of the Deployment `tag` has a target cluster.
async fn wait_scheduled(admin: &Client, tag: &str) {
    let bindings: Api<flotilla_api::ResourceBinding> = Api::namespaced(admin.clone(), "default");
    let name = format!("{tag}-deployment");
    flotilla_e2e::wait::eventually("the binding to be scheduled", DEADLINE, || {
        let bindings = bindings.clone();
        let name = name.clone();
        async move {
            bindings
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .is_some_and(|b: flotilla_api::ResourceBinding| !b.spec.clusters.is_empty())
        }
    })
    .await;
}

/// Removes the rule of `case`, restarts the service, provokes, and returns the 403s its log
/// shows that the removed rule grants; restores the rule and the service.
async fn check(env: &Mutex<Env>, admin: &Client, case: &Case) -> Result<(), String> {
    let role = role_of(case.service, case.kind);
    let rules: Vec<Value> = role["rules"].as_array().unwrap().clone();
    let removed = rules[case.index].clone();
    let mut reduced = rules.clone();
    reduced.remove(case.index);
    let what = format!(
        "{} {} rule {} {removed}",
        case.service.binary(),
        case.kind,
        case.index
    );
    set_rules(admin, &role, &reduced).await;
    let (offset, address) = {
        let mut env = env.lock().await;
        let offset = env.service(case.service).log().len();
        env.service(case.service).restart();
        (offset, env.metrics_address(case.service))
    };
    let tag = format!(
        "rbac-{}-{}-{}",
        case.service.binary().trim_start_matches("flotilla-"),
        case.kind.to_lowercase(),
        case.index
    );
    provoke(admin, case.provocation, &tag).await;
    let started = Instant::now();
    let outcome = loop {
        let log = env.lock().await.service(case.service).log();
        let since = &log[offset.min(log.len())..];
        let denied = forbidden_requests(since);
        if let Some(hit) = denied.iter().find(|(v, r, g)| grants(&removed, v, r, g)) {
            break Ok(hit.clone());
        }
        if started.elapsed() > DEADLINE {
            break Err(format!(
                "{what}: no 403 for what it grants within {DEADLINE:?}; 403s seen: {denied:?}; log tail:\n{}",
                since
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    set_rules(admin, &role, &rules).await;
    env.lock().await.service(case.service).restart();
    flotilla_e2e::wait::eventually(
        &format!("{} to be ready again", case.service.binary()),
        DEADLINE,
        || {
            let address = address.clone();
            async move {
                matches!(
                    flotilla_e2e::env::http_get(&address, "/readyz").await,
                    Some((200, _))
                )
            }
        },
    )
    .await;
    let (verb, resource, group) = outcome?;
    eprintln!(
        "{what}: needed ({verb} {resource} in API group {group:?} was forbidden without it, after {:.1}s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[test]
fn every_rule_of_every_service_role_has_a_case() {
    let cases = cases();
    for service in Service::ALL {
        for role in roles(service) {
            let kind = role["kind"].as_str().unwrap();
            let count = role["rules"].as_array().unwrap().len();
            for index in 0..count {
                assert!(
                    cases
                        .iter()
                        .any(|c| c.service == service && c.kind == kind && c.index == index),
                    "{} {kind} rule {index} has no case in tests/tests/rbac.rs",
                    service.binary()
                );
            }
        }
    }
    assert_eq!(
        cases.len(),
        Service::ALL
            .iter()
            .flat_map(|s| roles(*s))
            .map(|r| r["rules"].as_array().unwrap().len())
            .sum::<usize>(),
        "a case names a rule that does not exist"
    );
}

#[test]
fn forbidden_messages_are_read_from_service_logs() {
    let log = r#"WARN watch failed; retrying with backoff error=failed to perform initial object list: ApiError: resourcebindings.work.karmada.io is forbidden: User "system:serviceaccount:flotilla-system:flotilla-scheduler" cannot list resource "resourcebindings" in API group "work.karmada.io" at the cluster scope: Forbidden (ErrorResponse { message: "... cannot list resource \"resourcebindings\" in API group \"work.karmada.io\" ..." })"#;
    let found = forbidden_requests(log);
    assert_eq!(
        found[0],
        ("list".into(), "resourcebindings".into(), "work.karmada.io".into())
    );
    let status = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["patch"]});
    assert!(grants(&status, "patch", "works/status", "work.karmada.io"));
    assert!(!grants(&status, "patch", "works", "work.karmada.io"));
    let any = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]});
    assert!(grants(&any, "list", "secrets", ""));
    assert!(!grants(&any, "patch", "secrets", ""));
    let events = json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]});
    assert!(!grants(&events, "create", "events", "events.k8s.io"));
}

#[tokio::test]
async fn removing_any_rule_of_a_service_role_makes_the_service_fail_with_a_403() {
    let fast_leases = |prefix: &str| -> Vec<String> {
        [
            (format!("--{prefix}-lease-duration"), "3s"),
            (format!("--{prefix}-renew-deadline"), "2s"),
            (format!("--{prefix}-retry-period"), "500ms"),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag, value.to_owned()])
        .collect()
    };
    let mut leader = vec!["--leader-elect".to_owned()];
    leader.extend(fast_leases("leader-elect"));
    let env = Env::start(EnvOptions {
        members: 3,
        service_args: BTreeMap::from([
            (Service::Detector, leader.clone()),
            (Service::DependencyDistributor, leader),
            (Service::Execution, fast_leases("membership")),
        ]),
        ..EnvOptions::default()
    })
    .await;
    let admin = env.control_plane_client().await;
    let env = Mutex::new(env);
    let started = Instant::now();
    let cases = cases();
    // One sequence per service, the four at once.
    let runs = Service::ALL.map(|service| {
        let cases: Vec<&Case> = cases.iter().filter(|c| c.service == service).collect();
        let env = &env;
        let admin = &admin;
        async move {
            let mut failures = Vec::new();
            for case in cases {
                if let Err(failure) = check(env, admin, case).await {
                    failures.push(failure);
                }
            }
            failures
        }
    });
    let failures: Vec<String> = futures::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();
    eprintln!(
        "{} rules checked in {:.1}s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        env.lock().await.dump_logs(40);
        panic!(
            "{} rule(s) not shown to be needed:\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }
}

/// No log of an installation — the API servers', the services' (at debug level), the audit
/// log — holds a token (the admin's, a member's, a service's ServiceAccount token) or the data
/// of a Secret that propagates as a dependency.
#[tokio::test]
async fn no_log_holds_a_token_or_secret_data() {
    let env = Env::start(EnvOptions {
        members: 1,
        audit: true,
        ..EnvOptions::default()
    })
    .await;
    let admin = env.control_plane_client().await;
    let plain = format!("pa55-{}", flotilla_e2e::free_port());
    let encoded = base64(&plain);
    fixtures::apply_value(
        &admin,
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
            "stringData": {"password": plain}}),
    )
    .await;
    let mut app = deployment("app", "app-cm", "10m");
    app["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "s", "secret": {"secretName": "db"}}));
    fixtures::apply_value(&admin, &config_map("app-cm")).await;
    fixtures::apply_value(&admin, &app).await;
    fixtures::apply_value(&admin, &policy("app", &["app"], "member1", json!({}))).await;
    let member = env.member_client(1).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(member, "default");
    flotilla_e2e::wait::eventually("the Secret to reach member1", DEADLINE, || {
        let secrets = secrets.clone();
        async move { secrets.get_opt("db").await.ok().flatten().is_some() }
    })
    .await;
    // Edit it, so its data moves through every service once more.
    let changed = format!("{plain}-2");
    fixtures::apply_value(
        &admin,
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
            "data": {"password": base64(&changed)}}),
    )
    .await;
    flotilla_e2e::wait::eventually("the edited Secret to reach member1", DEADLINE, || {
        let secrets = secrets.clone();
        let changed = changed.clone();
        async move {
            secrets.get_opt("db").await.ok().flatten().is_some_and(|s| {
                s.data
                    .and_then(|d| d.get("password").map(|v| v.0.clone()))
                    .is_some_and(|v| v == changed.as_bytes())
            })
        }
    })
    .await;

    let token_of = |kubeconfig: &std::path::Path| -> String {
        let config: Value = serde_yaml::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
        config["users"][0]["user"]["token"].as_str().unwrap().to_owned()
    };
    let mut secrets = vec![
        (
            "the admin token".to_owned(),
            token_of(env.control_plane.kubeconfig()),
        ),
        (
            "member1's token".to_owned(),
            token_of(env.members[0].kubeconfig()),
        ),
        ("the Secret's value".to_owned(), plain.clone()),
        ("the Secret's value in base64".to_owned(), encoded),
        ("the edited value".to_owned(), changed.clone()),
        ("the edited value in base64".to_owned(), base64(&changed)),
    ];
    for service in Service::ALL {
        secrets.push((
            format!("{}'s token", service.binary()),
            token_of(&env.service_kubeconfig(service)),
        ));
    }
    let mut logs = 0;
    for entry in std::fs::read_dir(env.root()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        logs += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for (what, secret) in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "{} contains {what}",
                path.display()
            );
        }
    }
    // The control plane, the member, the four services and the audit log.
    assert!(logs >= 7, "only {logs} logs found in {}", env.root().display());
    let audit = env.audit_events();
    assert!(
        audit.iter().any(|e| e["user"]["username"]
            == "system:serviceaccount:flotilla-system:flotilla-execution"
            && e["objectRef"]["resource"] == "secrets"),
        "execution's reads of the Secret are audited"
    );
}

/// `text` in base64, as a Secret's `data` holds it.
fn base64(text: &str) -> String {
    serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec()))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}
