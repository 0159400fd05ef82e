//! Escalation prevention, as kube-apiserver's RBAC storage does it: a user may create or update
//! a Role or ClusterRole only with rules it already holds (where the role applies), unless it may
//! `escalate` roles; a user may bind a role only if it holds every rule of that role (in the
//! binding's namespace), unless it may `bind` that role. Setting or changing an aggregationRule
//! needs full authority. `system:masters` and the server's own controllers are exempt.
//!
//! Also the binding checks kube's validation makes: `roleRef` names a Role or ClusterRole of
//! the RBAC group and never changes.

use serde_json::Value;

use super::rules::{Attributes, PolicyRule, covers, describe_missing, go_quoted_list};
use super::{GROUP, Index, RoleRef, authorize};
use crate::auth::{MASTERS, User};
use crate::errors::{ApiError, ApiResult, Cause};
use crate::ops::Api;
use crate::resources::ResourceDef;

/// `*` on everything: what an aggregationRule can gather.
fn full_authority() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: vec!["*".into()],
            non_resource_urls: vec!["*".into()],
            ..PolicyRule::default()
        },
    ]
}

fn role_ref(obj: &Value) -> RoleRef {
    serde_json::from_value(obj["roleRef"].clone()).unwrap_or_default()
}

fn policy_rules(obj: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(obj["rules"].clone()).unwrap_or_default()
}

fn has_aggregation_rule(obj: &Value) -> bool {
    obj.get("aggregationRule").is_some_and(|a| !a.is_null())
}

/// Whether an update changes nothing but what the garbage collector writes (kube's
/// `IsOnlyMutatingGCFields`): such updates skip the escalation checks.
fn only_gc_fields_changed(new: &Value, old: &Value) -> bool {
    let normalize = |obj: &Value, from: &Value| {
        let mut obj = obj.clone();
        if let Some(meta) = crate::objects::metadata_mut(&mut obj) {
            for field in ["ownerReferences", "finalizers", "managedFields", "selfLink"] {
                match from["metadata"].get(field) {
                    Some(v) => {
                        meta.insert(field.into(), v.clone());
                    }
                    None => {
                        meta.remove(field);
                    }
                }
            }
            meta.remove("resourceVersion");
        }
        obj
    };
    normalize(new, old) == normalize(old, old)
}

/// Checks a Role, ClusterRole, RoleBinding or ClusterRoleBinding about to be written (`old` is
/// the current object on updates) by `user` (None for the server's own controllers).
pub fn check(
    api: &Api,
    def: &ResourceDef,
    new: &Value,
    old: Option<&Value>,
    user: Option<&User>,
) -> ApiResult<()> {
    if def.group != GROUP {
        return Ok(());
    }
    let binding = matches!(def.plural.as_str(), "rolebindings" | "clusterrolebindings");
    if binding {
        validate_role_ref(def, new, old)?;
    }
    let Some(user) = user else {
        return Ok(());
    };
    if user.in_group(MASTERS) || old.is_some_and(|old| only_gc_fields_changed(new, old)) {
        return Ok(());
    }
    let name = crate::objects::meta_str(new, "name").unwrap_or_default();
    let namespace = if def.namespaced {
        crate::objects::meta_str(new, "namespace").unwrap_or_default()
    } else {
        ""
    };
    let index = api.rbac.index(&api.store);
    let forbidden = |why: String| ApiError::forbidden(&def.group, &def.plural, name, &why);
    let may = |verb: &str, resource: &str, group: &str, object: &str| {
        let attrs = Attributes {
            resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            api_version: "*".into(),
            namespace: namespace.into(),
            resource: resource.into(),
            name: object.into(),
            ..Attributes::default()
        };
        authorize(&index, user, &attrs).allowed()
    };
    if binding {
        let role_ref = role_ref(new);
        let resource = if role_ref.kind == "ClusterRole" {
            "clusterroles"
        } else {
            "roles"
        };
        if may("bind", resource, &role_ref.api_group, &role_ref.name) {
            return Ok(());
        }
        let rules = index.role_ref_rules(&role_ref, namespace).map_err(&forbidden)?;
        return confirm_no_escalation(&index, user, namespace, rules).map_err(forbidden);
    }
    if may("escalate", &def.plural, &def.group, name) {
        return Ok(());
    }
    confirm_no_escalation(&index, user, namespace, &policy_rules(new)).map_err(&forbidden)?;
    if def.plural == "clusterroles"
        && (has_aggregation_rule(new) || old.is_some_and(has_aggregation_rule))
        && confirm_no_escalation(&index, user, "", &full_authority()).is_err()
    {
        let article = if old.is_some() { "an" } else { "the" };
        return Err(forbidden(format!(
            "must have cluster-admin privileges to use {article} aggregationRule"
        )));
    }
    Ok(())
}

/// kube's `ConfirmNoEscalation`: the user's rules in `namespace` must cover `rules`.
pub fn confirm_no_escalation(
    index: &Index,
    user: &User,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owned, errors) = index.rules_for(user, namespace);
    let Err(missing) = covers(&owned, rules) else {
        return Ok(());
    };
    let mut message = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_quoted_list(&user.groups),
        describe_missing(&missing).join("\n")
    );
    if !errors.is_empty() {
        message.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(message)
}

fn validate_role_ref(def: &ResourceDef, new: &Value, old: Option<&Value>) -> ApiResult<()> {
    let name = crate::objects::meta_str(new, "name").unwrap_or_default();
    let reference = role_ref(new);
    let kinds: &[&str] = if def.namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let mut causes = Vec::new();
    if reference.api_group != GROUP {
        causes.push(Cause::unsupported(
            "roleRef.apiGroup",
            &new["roleRef"]["apiGroup"],
            &[GROUP],
        ));
    }
    if !kinds.contains(&reference.kind.as_str()) {
        causes.push(Cause::unsupported("roleRef.kind", &new["roleRef"]["kind"], kinds));
    }
    if reference.name.is_empty() {
        causes.push(Cause::required("roleRef.name", ""));
    }
    if let Some(old) = old {
        let before = role_ref(old);
        if before != reference {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "roleRef",
                format!(
                    "Invalid value: rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}: cannot change roleRef",
                    reference.api_group, reference.kind, reference.name
                ),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..User::default()
        }
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        PolicyRule {
            verbs: v(verbs),
            api_groups: v(groups),
            resources: v(resources),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn escalation_messages_match_kube() {
        let index = Index::from_objects([
            json!({"kind": "ClusterRole", "metadata": {"name": "reader"},
                "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "reader"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
        ]);
        let bob = user("bob", &["system:authenticated"]);
        assert!(confirm_no_escalation(&index, &bob, "ns", &[rule(&["get"], &[""], &["pods"])]).is_ok());
        let err = confirm_no_escalation(
            &index,
            &bob,
            "ns",
            &[rule(&["get", "delete"], &[""], &["pods", "secrets"])],
        )
        .unwrap_err();
        assert_eq!(
            err,
            "user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
        );
        assert!(confirm_no_escalation(&index, &bob, "", &full_authority()).is_err());
    }

    #[test]
    fn gc_only_updates_are_recognised() {
        let old =
            json!({"metadata": {"name": "r", "resourceVersion": "5", "finalizers": ["a"]}, "rules": []});
        let gc = json!({"metadata": {"name": "r", "ownerReferences": [{"uid": "x"}]}, "rules": []});
        assert!(only_gc_fields_changed(&gc, &old));
        let more = json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["*"]}]});
        assert!(!only_gc_fields_changed(&more, &old));
        let labels = json!({"metadata": {"name": "r", "labels": {"a": "b"}}, "rules": []});
        assert!(!only_gc_fields_changed(&labels, &old));
    }
}
