//! The ClusterRole aggregation controller (kube-controller-manager's
//! `clusterrole-aggregation`): a ClusterRole with an `aggregationRule` gets as its rules the
//! union, without duplicates, of the rules of every other ClusterRole its selectors match, in
//! name order. Level-triggered: every RBAC write wakes it and it recomputes every aggregated
//! role from the current state, so a restart or a missed wake-up loses nothing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::GROUP;
use super::rules::PolicyRule;
use crate::errors::{ApiError, ApiResult};
use crate::ops::{Api, Subresource, WriteOptions};
use crate::selectors::LabelSelector;

/// The field manager of the rules it writes.
pub const MANAGER: &str = "clusterrole-aggregation-controller";

/// The rules an aggregated role should have, given every ClusterRole (sorted by name), or None
/// when `role` has no aggregationRule. Selectors that do not parse select nothing.
pub fn aggregated_rules(role: &Value, all: &[Value]) -> Option<Vec<PolicyRule>> {
    let selectors = role.get("aggregationRule").filter(|a| !a.is_null())?["clusterRoleSelectors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let name = crate::objects::meta_str(role, "name");
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in selectors {
        let Ok(selector) = LabelSelector::from_json(&selector) else {
            continue;
        };
        for other in all {
            if crate::objects::meta_str(other, "name") == name
                || !selector.matches(&crate::objects::labels(other))
            {
                continue;
            }
            let other_rules: Vec<PolicyRule> =
                serde_json::from_value(other["rules"].clone()).unwrap_or_default();
            for rule in other_rules {
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    Some(rules)
}

/// Brings every aggregated ClusterRole up to date; returns how many it rewrote.
pub async fn reconcile(api: &Api) -> ApiResult<usize> {
    let def = api
        .catalog()
        .get(GROUP, "v1", "clusterroles")
        .ok_or_else(|| ApiError::internal("clusterroles are not served"))?;
    let snapshot = api.store.snapshot();
    let all: Vec<Value> = snapshot
        .range(&def.list_prefix(None), None)
        .map(|kv| api.to_value(&def, &kv.value, kv.mod_revision))
        .collect();
    let mut written = 0;
    for role in &all {
        let Some(rules) = aggregated_rules(role, &all) else {
            continue;
        };
        let current: Vec<PolicyRule> = serde_json::from_value(role["rules"].clone()).unwrap_or_default();
        if current == rules {
            continue;
        }
        let name = crate::objects::meta_str(role, "name")
            .unwrap_or_default()
            .to_owned();
        let mut updated = role.clone();
        updated["rules"] = json!(rules);
        let options = WriteOptions {
            field_manager: Some(MANAGER.into()),
            ..WriteOptions::default()
        };
        api.update(&def, None, &name, updated, Subresource::Main, &options)
            .await?;
        tracing::debug!(clusterrole = %name, rules = rules.len(), "aggregated ClusterRole updated");
        written += 1;
    }
    Ok(written)
}

/// Runs the controller until the process ends.
pub fn spawn(api: Arc<Api>) {
    tokio::spawn(async move {
        loop {
            match reconcile(&api).await {
                Ok(_) => api.rbac.changed().await,
                Err(error) => {
                    tracing::warn!(%error, "aggregating ClusterRoles failed; retrying");
                    tokio::select! {
                        () = api.rbac.changed() => {}
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn unions_matching_roles_in_name_order_without_duplicates() {
        let get_pods = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let list_pods = json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]});
        let edit = json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]});
        let aggregated = json!({
            "metadata": {"name": "agg", "labels": {"x": "1"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "1"}}, {"matchLabels": {"y": "1"}}]},
            "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        });
        let all = vec![
            role(
                "a",
                json!({"x": "1"}),
                json!([get_pods.clone(), list_pods.clone()]),
            ),
            aggregated.clone(),
            role("b", json!({"y": "1"}), json!([get_pods.clone(), edit.clone()])),
            role(
                "c",
                json!({"x": "2"}),
                json!([{"verbs": ["delete"], "apiGroups": [""], "resources": ["pods"]}]),
            ),
        ];
        let rules = aggregated_rules(&aggregated, &all).unwrap_or_default();
        let expected: Vec<PolicyRule> =
            serde_json::from_value(json!([get_pods, list_pods, edit])).unwrap_or_default();
        assert_eq!(
            rules, expected,
            "its own rules are replaced, c is not selected, a's get is not repeated"
        );
        assert_eq!(aggregated_rules(&all[0], &all), None);
        let nothing = json!({"metadata": {"name": "n"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"z": "9"}}]}});
        assert_eq!(aggregated_rules(&nothing, &all), Some(vec![]));
        let no_selectors = json!({"metadata": {"name": "n"}, "aggregationRule": {}});
        assert_eq!(aggregated_rules(&no_selectors, &all), Some(vec![]));
    }
}
