//! Authorization: kube-apiserver's RBAC authorizer (Role, ClusterRole, RoleBinding,
//! ClusterRoleBinding) behind a `system:masters` bypass, over an index of the RBAC objects that
//! is rebuilt from the store after any RBAC write (so a binding works on the very next request).
//!
//! [`rules`] matches requests against rules; [`bootstrap`] creates the ClusterRoles and bindings
//! kube ships; [`aggregation`] maintains aggregated ClusterRoles; [`escalation`] refuses roles
//! and bindings that grant more than their creator holds.

pub mod aggregation;
pub mod bootstrap;
pub mod escalation;
pub mod rules;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use serde::Deserialize;

use crate::auth::{MASTERS, User};
use rules::{Attributes, PolicyRule, rule_allows};

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

const CLUSTER_ROLES: &str = "/registry/rbac.authorization.k8s.io/clusterroles/";
const ROLES: &str = "/registry/rbac.authorization.k8s.io/roles/";
const CLUSTER_ROLE_BINDINGS: &str = "/registry/rbac.authorization.k8s.io/clusterrolebindings/";
const ROLE_BINDINGS: &str = "/registry/rbac.authorization.k8s.io/rolebindings/";

/// A binding's `roleRef`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// Always `rbac.authorization.k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    #[serde(default)]
    pub kind: String,
    /// The role's name.
    #[serde(default)]
    pub name: String,
}

/// A binding's subject.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// ServiceAccount namespace (defaults to a RoleBinding's own).
    #[serde(default)]
    pub namespace: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingObject {
    #[serde(default)]
    metadata: NameOnly,
    #[serde(default)]
    role_ref: RoleRef,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct NameOnly {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct RoleObject {
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// Name.
    pub name: String,
    /// Namespace (`""` for a ClusterRoleBinding).
    pub namespace: String,
    /// The role granted.
    pub role_ref: RoleRef,
    /// Who gets it.
    pub subjects: Vec<Subject>,
}

/// Every RBAC object, ready for authorization.
#[derive(Debug, Default)]
pub struct Index {
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    roles: HashMap<(String, String), Arc<[PolicyRule]>>,
    cluster_role_bindings: Vec<Binding>,
    role_bindings: HashMap<String, Vec<Binding>>,
}

/// Where an allowing rule came from (kube's describer: `ClusterRoleBinding "x" of ClusterRole
/// "y" to Group "z"`).
pub struct Source<'a> {
    binding: &'a Binding,
    subject: &'a Subject,
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.binding;
        let subject = match self.subject.kind.as_str() {
            "ServiceAccount" => {
                let ns = if self.subject.namespace.is_empty() {
                    &b.namespace
                } else {
                    &self.subject.namespace
                };
                format!("ServiceAccount {:?}", format!("{}/{ns}", self.subject.name))
            }
            kind => format!("{kind} {:?}", self.subject.name),
        };
        if b.namespace.is_empty() {
            write!(
                f,
                "ClusterRoleBinding {:?} of {} {:?} to {subject}",
                b.name, b.role_ref.kind, b.role_ref.name
            )
        } else {
            write!(
                f,
                "RoleBinding {:?} of {} {:?} to {subject}",
                format!("{}/{}", b.name, b.namespace),
                b.role_ref.kind,
                b.role_ref.name
            )
        }
    }
}

/// kube's `appliesToUser`.
fn applies_to(user: &User, subject: &Subject, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.in_group(&subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                namespace
            } else {
                &subject.namespace
            };
            !ns.is_empty() && crate::serviceaccount::is_user_name(&user.name, ns, &subject.name)
        }
        _ => false,
    }
}

impl Index {
    /// Builds the index from every RBAC object in `snapshot`.
    pub fn from_snapshot(snapshot: &flotilla_store::Snapshot) -> Index {
        let mut index = Index::default();
        for (prefix, kind) in [
            (CLUSTER_ROLES, "ClusterRole"),
            (ROLES, "Role"),
            (CLUSTER_ROLE_BINDINGS, "ClusterRoleBinding"),
            (ROLE_BINDINGS, "RoleBinding"),
        ] {
            for kv in snapshot.range(prefix, None) {
                index.add(kind, crate::objects::decode_stored(&kv.value, kv.mod_revision));
            }
        }
        index
    }

    /// Builds an index from RBAC objects (each says its `kind`).
    pub fn from_objects(objects: impl IntoIterator<Item = serde_json::Value>) -> Index {
        let mut index = Index::default();
        for obj in objects {
            let kind = obj["kind"].as_str().unwrap_or_default().to_owned();
            index.add(&kind, obj);
        }
        index
    }

    fn add(&mut self, kind: &str, obj: serde_json::Value) {
        let name = crate::objects::meta_str(&obj, "name")
            .unwrap_or_default()
            .to_owned();
        let namespace = crate::objects::meta_str(&obj, "namespace")
            .unwrap_or_default()
            .to_owned();
        match kind {
            "ClusterRole" | "Role" => {
                let role: RoleObject = serde_json::from_value(obj).unwrap_or_default();
                let rules: Arc<[PolicyRule]> = role.rules.unwrap_or_default().into();
                if kind == "ClusterRole" {
                    self.cluster_roles.insert(name, rules);
                } else {
                    self.roles.insert((namespace, name), rules);
                }
            }
            "ClusterRoleBinding" | "RoleBinding" => {
                let b: BindingObject = serde_json::from_value(obj).unwrap_or_default();
                let mut binding = Binding {
                    name: b.metadata.name,
                    namespace: b.metadata.namespace,
                    role_ref: b.role_ref,
                    subjects: b.subjects.unwrap_or_default(),
                };
                if kind == "ClusterRoleBinding" {
                    binding.namespace.clear();
                    self.cluster_role_bindings.push(binding);
                } else {
                    self.role_bindings.entry(namespace).or_default().push(binding);
                }
            }
            _ => {}
        }
    }

    /// The rules a binding grants in `namespace` (kube's `GetRoleReferenceRules`).
    pub fn role_ref_rules(&self, role_ref: &RoleRef, namespace: &str) -> Result<&[PolicyRule], String> {
        match role_ref.kind.as_str() {
            "ClusterRole" => self
                .cluster_roles
                .get(&role_ref.name)
                .map(|r| &r[..])
                .ok_or_else(|| {
                    format!(
                        "clusterrole.rbac.authorization.k8s.io {:?} not found",
                        role_ref.name
                    )
                }),
            "Role" => self
                .roles
                .get(&(namespace.to_owned(), role_ref.name.clone()))
                .map(|r| &r[..])
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {:?} not found", role_ref.name)),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }

    /// Calls `visit` with every rule that applies to `user` in `namespace` (cluster-wide
    /// bindings first) and every error resolving a binding's role; stops when `visit` returns
    /// false (kube's `VisitRulesFor`).
    pub fn visit_rules_for<'a>(
        &'a self,
        user: &User,
        namespace: &str,
        mut visit: impl FnMut(Option<Source<'a>>, Option<&'a PolicyRule>, Option<String>) -> bool,
    ) {
        let namespaced = if namespace.is_empty() {
            None
        } else {
            self.role_bindings.get(namespace)
        };
        let bindings = self
            .cluster_role_bindings
            .iter()
            .map(|b| (b, ""))
            .chain(namespaced.into_iter().flatten().map(|b| (b, namespace)));
        for (binding, ns) in bindings {
            let Some(subject) = binding.subjects.iter().find(|s| applies_to(user, s, ns)) else {
                continue;
            };
            match self.role_ref_rules(&binding.role_ref, ns) {
                Err(e) => {
                    if !visit(None, None, Some(e)) {
                        return;
                    }
                }
                Ok(rules) => {
                    for rule in rules {
                        if !visit(Some(Source { binding, subject }), Some(rule), None) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Every rule that applies to `user` in `namespace`, and the errors met resolving them.
    pub fn rules_for(&self, user: &User, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit_rules_for(user, namespace, |_, rule, error| {
            if let Some(rule) = rule {
                rules.push(rule.clone());
            }
            if let Some(error) = error {
                errors.push(error);
            }
            true
        });
        (rules, errors)
    }
}

/// An authorization decision and kube's reason for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed (`RBAC: allowed by ...`, or empty for `system:masters`).
    Allow(String),
    /// Not allowed; the reason lists errors met resolving bindings (often empty).
    Deny(String),
}

impl Decision {
    /// Whether the request is allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// Formats errors like Go's `utilerrors.NewAggregate(...).Error()`.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Authorizes `attrs` for `user`: `system:masters` may do anything; everyone else needs an
/// RBAC rule that allows it.
pub fn authorize(index: &Index, user: &User, attrs: &Attributes) -> Decision {
    decide(index, user, attrs, true)
}

/// [`authorize`] for a caller that does not read why a request is allowed: an allowed request
/// is `Decision::Allow("")` (kube records the reason only in the audit log; a denial's reason,
/// which the 403 carries, is the same as [`authorize`]'s).
pub fn authorize_unexplained(index: &Index, user: &User, attrs: &Attributes) -> Decision {
    decide(index, user, attrs, false)
}

fn decide(index: &Index, user: &User, attrs: &Attributes, explain: bool) -> Decision {
    if user.in_group(MASTERS) {
        return Decision::Allow(String::new());
    }
    let mut allowed_by = None;
    let mut errors = Vec::new();
    index.visit_rules_for(user, &attrs.namespace, |source, rule, error| {
        if let (Some(source), Some(rule)) = (source, rule)
            && rule_allows(attrs, rule)
        {
            allowed_by = Some(if explain {
                format!("RBAC: allowed by {source}")
            } else {
                String::new()
            });
            return false;
        }
        if let Some(error) = error {
            errors.push(error);
        }
        true
    });
    match allowed_by {
        Some(reason) => Decision::Allow(reason),
        None if errors.is_empty() => Decision::Deny(String::new()),
        None => Decision::Deny(format!("RBAC: {}", aggregate(&errors))),
    }
}

/// The RBAC index of a store, rebuilt lazily after RBAC writes.
#[derive(Default)]
pub struct Cache {
    generation: AtomicU64,
    current: RwLock<Option<(u64, Arc<Index>)>>,
    changed: tokio::sync::Notify,
}

impl Cache {
    /// Marks the index stale (called after every RBAC write) and wakes the aggregation
    /// controller.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// The index as of now.
    pub fn index(&self, store: &flotilla_store::Store) -> Arc<Index> {
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some((built, index)) = &*self.current.read()
            && *built == generation
        {
            return index.clone();
        }
        // Read the generation before the snapshot: a write that lands after it bumps the
        // generation again, so the next request rebuilds.
        let index = Arc::new(Index::from_snapshot(&store.snapshot()));
        let mut current = self.current.write();
        if current.as_ref().is_none_or(|(built, _)| *built <= generation) {
            *current = Some((generation, index.clone()));
        }
        index
    }

    /// Resolves when an RBAC object changed since the last call.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests;
