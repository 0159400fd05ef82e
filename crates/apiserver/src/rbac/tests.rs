//! The authorizer over bindings and roles: subjects (User, Group, ServiceAccount with and
//! without a namespace), RoleBindings to Roles and to ClusterRoles, cluster-wide vs namespaced
//! grants, missing roles, `system:masters`, and kube's reasons.

use serde_json::{Value, json};

use super::*;
use crate::requestinfo::attributes;

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

fn role(ns: &str, name: &str, rules: Vec<Value>) -> Value {
    json!({"kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

fn crb(name: &str, role: &str, subjects: Value) -> Value {
    json!({"kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}, "subjects": subjects})
}

fn rb(ns: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({"kind": "RoleBinding", "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role}, "subjects": subjects})
}

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

fn index() -> Index {
    Index::from_objects([
        cluster_role(
            "pod-reader",
            vec![rule(&["get", "list", "watch"], &[""], &["pods"])],
        ),
        cluster_role(
            "deployer",
            vec![rule(&["*"], &["apps"], &["deployments", "deployments/scale"])],
        ),
        cluster_role(
            "health",
            vec![json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]})],
        ),
        role(
            "team-a",
            "cm-editor",
            vec![rule(&["create", "update"], &[""], &["configmaps"])],
        ),
        role(
            "team-b",
            "cm-editor",
            vec![rule(&["delete"], &[""], &["configmaps"])],
        ),
        crb(
            "alice-reads",
            "pod-reader",
            json!([{"kind": "User", "name": "alice"}]),
        ),
        crb(
            "devs-health",
            "health",
            json!([{"kind": "Group", "name": "devs"}]),
        ),
        crb(
            "robot-deploys",
            "deployer",
            json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "ci"}]),
        ),
        // A ServiceAccount subject without a namespace never matches cluster-wide.
        crb(
            "nobody",
            "deployer",
            json!([{"kind": "ServiceAccount", "name": "robot"}]),
        ),
        rb(
            "team-a",
            "bob-edits",
            "Role",
            "cm-editor",
            json!([{"kind": "User", "name": "bob"}]),
        ),
        // ...but in a RoleBinding it means the binding's namespace.
        rb(
            "team-a",
            "local-sa-reads",
            "ClusterRole",
            "pod-reader",
            json!([{"kind": "ServiceAccount", "name": "builder"}]),
        ),
        rb(
            "team-b",
            "dangling",
            "Role",
            "missing",
            json!([{"kind": "User", "name": "bob"}]),
        ),
        rb(
            "team-b",
            "dangling-cr",
            "ClusterRole",
            "gone",
            json!([{"kind": "Group", "name": "devs"}]),
        ),
    ])
}

#[test]
fn decisions_follow_bindings() {
    let index = index();
    let alice = user("alice", &["system:authenticated"]);
    let bob = user("bob", &["devs", "system:authenticated"]);
    let robot = user("system:serviceaccount:ci:robot", &["system:serviceaccounts"]);
    let builder = user("system:serviceaccount:team-a:builder", &[]);
    let admin = user("root", &["system:masters"]);
    let nobody = user("mallory", &[]);
    // (user, method, path, allowed)
    let table: Vec<(&User, &str, &str, bool)> = vec![
        (&alice, "GET", "/api/v1/namespaces/x/pods", true),
        (&alice, "GET", "/api/v1/pods", true),
        (&alice, "GET", "/api/v1/namespaces/x/pods/p", true),
        (&alice, "DELETE", "/api/v1/namespaces/x/pods/p", false),
        (&alice, "GET", "/api/v1/namespaces/x/pods/p/log", false),
        (&alice, "GET", "/api/v1/namespaces/x/services", false),
        (&alice, "GET", "/healthz", false),
        (&bob, "GET", "/healthz", true),
        (&bob, "GET", "/apis/apps/v1", true),
        (&bob, "GET", "/apis", false),
        (&bob, "POST", "/api/v1/namespaces/team-a/configmaps", true),
        (&bob, "PUT", "/api/v1/namespaces/team-a/configmaps/c", true),
        (&bob, "DELETE", "/api/v1/namespaces/team-a/configmaps/c", false),
        // The Role of the same name in another namespace is not bob's.
        (&bob, "POST", "/api/v1/namespaces/team-b/configmaps", false),
        (&bob, "POST", "/api/v1/configmaps", false),
        (&robot, "PATCH", "/apis/apps/v1/namespaces/x/deployments/d", true),
        (
            &robot,
            "PUT",
            "/apis/apps/v1/namespaces/x/deployments/d/scale",
            true,
        ),
        (
            &robot,
            "PUT",
            "/apis/apps/v1/namespaces/x/deployments/d/status",
            false,
        ),
        (&robot, "DELETE", "/apis/apps/v1/deployments", true),
        (&robot, "GET", "/apis/apps/v1/namespaces/x/statefulsets", false),
        (&builder, "GET", "/api/v1/namespaces/team-a/pods", true),
        (&builder, "GET", "/api/v1/namespaces/team-b/pods", false),
        (&builder, "GET", "/api/v1/pods", false),
        (&admin, "DELETE", "/api/v1/namespaces/kube-system", true),
        (&admin, "POST", "/anything", true),
        (&nobody, "GET", "/api/v1/namespaces/x/pods", false),
        (&nobody, "GET", "/version", false),
    ];
    for (user, method, path, want) in table {
        let attrs = attributes(method, path, &[]);
        let decision = authorize(&index, user, &attrs);
        assert_eq!(
            decision.allowed(),
            want,
            "{} {method} {path}: {decision:?}",
            user.name
        );
        // Without the reason of an allowance, the same decision; a denial keeps its reason.
        let unexplained = authorize_unexplained(&index, user, &attrs);
        match &decision {
            Decision::Allow(_) => assert_eq!(unexplained, Decision::Allow(String::new())),
            Decision::Deny(_) => assert_eq!(unexplained, decision),
        }
    }
}

#[test]
fn reasons_name_the_binding_or_the_broken_reference() {
    let index = index();
    let alice = user("alice", &[]);
    assert_eq!(
        authorize(&index, &alice, &attributes("GET", "/api/v1/pods", &[])),
        Decision::Allow(r#"RBAC: allowed by ClusterRoleBinding "alice-reads" of ClusterRole "pod-reader" to User "alice""#.into())
    );
    let builder = user("system:serviceaccount:team-a:builder", &[]);
    assert_eq!(
        authorize(&index, &builder, &attributes("GET", "/api/v1/namespaces/team-a/pods", &[])),
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "local-sa-reads/team-a" of ClusterRole "pod-reader" to ServiceAccount "builder/team-a""#.into()
        )
    );
    let robot = user("system:serviceaccount:ci:robot", &[]);
    assert_eq!(
        authorize(&index, &robot, &attributes("GET", "/apis/apps/v1/deployments", &[])),
        Decision::Allow(
            r#"RBAC: allowed by ClusterRoleBinding "robot-deploys" of ClusterRole "deployer" to ServiceAccount "robot/ci""#.into()
        )
    );
    // Denials mention roles that bindings reference but that do not exist.
    let bob = user("bob", &["devs"]);
    assert_eq!(
        authorize(&index, &bob, &attributes("GET", "/api/v1/namespaces/team-b/secrets", &[])),
        Decision::Deny(
            r#"RBAC: [role.rbac.authorization.k8s.io "missing" not found, clusterrole.rbac.authorization.k8s.io "gone" not found]"#
                .into()
        )
    );
    assert_eq!(
        authorize(
            &index,
            &alice,
            &attributes("DELETE", "/api/v1/namespaces/x/pods/p", &[])
        ),
        Decision::Deny(String::new())
    );
    assert_eq!(
        authorize(
            &index,
            &user("x", &["system:masters"]),
            &attributes("GET", "/", &[])
        ),
        Decision::Allow(String::new())
    );
}

#[test]
fn rules_for_collects_cluster_and_namespace_rules() {
    let index = index();
    let bob = user("bob", &["devs"]);
    let (rules, errors) = index.rules_for(&bob, "team-a");
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(errors.is_empty());
    let (rules, errors) = index.rules_for(&bob, "team-b");
    assert_eq!(rules.len(), 1, "the health rule only: {rules:?}");
    assert_eq!(errors.len(), 2);
    let (rules, _) = index.rules_for(&bob, "");
    assert_eq!(rules.len(), 1);
}

#[test]
fn aggregate_formats_like_go() {
    assert_eq!(aggregate(&[]), "");
    assert_eq!(aggregate(&["a".into()]), "a");
    assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
}
