//! The default RBAC policy (`bootstrap.yaml`): the ClusterRoles and ClusterRoleBindings
//! kube-apiserver creates on start that real clients need (`cluster-admin` for
//! `system:masters`, `system:discovery` and `system:basic-user` for every authenticated user,
//! `system:public-info-viewer` for everyone, and the aggregated `admin`, `edit` and `view`).
//! Like kube's policy reconciliation, each start creates what is missing and adds back rules and
//! subjects removed from objects still marked `rbac.authorization.kubernetes.io/autoupdate: "true"`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::GROUP;
use super::rules::{PolicyRule, covers};
use crate::errors::{ApiError, ApiResult};
use crate::ops::{Api, WriteOptions};

/// The annotation that lets a start reconcile a default object.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
const SOURCE: &str = include_str!("bootstrap.yaml");

/// The default objects, labelled and annotated as kube labels its own.
pub fn objects() -> Vec<Value> {
    serde_yaml::Deserializer::from_str(SOURCE)
        .filter_map(|doc| Value::deserialize(doc).ok())
        .filter(Value::is_object)
        .map(|mut obj| {
            if let Some(meta) = crate::objects::metadata_mut(&mut obj) {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
                meta.insert("annotations".into(), json!({ AUTOUPDATE: "true" }));
            }
            obj
        })
        .collect()
}

fn rules(obj: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(obj["rules"].clone()).unwrap_or_default()
}

/// `current` with what `wanted` has and it lacks added back (rules, aggregation selectors,
/// subjects, labels), or None when nothing is missing.
fn reconcile(current: &Value, wanted: &Value) -> Option<Value> {
    if current["metadata"]["annotations"][AUTOUPDATE] == "false" {
        return None;
    }
    let mut merged = current.clone();
    let mut changed = false;
    let mut merged_rules = rules(current);
    for rule in rules(wanted) {
        if covers(&merged_rules, std::slice::from_ref(&rule)).is_err() {
            merged_rules.push(rule);
            changed = true;
        }
    }
    if changed {
        merged["rules"] = json!(merged_rules);
    }
    for (list, key) in [("aggregationRule", "clusterRoleSelectors"), ("", "subjects")] {
        let wanted_items = if list.is_empty() {
            &wanted[key]
        } else {
            &wanted[list][key]
        };
        let Some(wanted_items) = wanted_items.as_array() else {
            continue;
        };
        let current_items = if list.is_empty() {
            &current[key]
        } else {
            &current[list][key]
        };
        let mut items = current_items.as_array().cloned().unwrap_or_default();
        for item in wanted_items {
            if !items.contains(item) {
                items.push(item.clone());
                changed = true;
            }
        }
        if list.is_empty() {
            merged[key] = json!(items);
        } else {
            merged[list][key] = json!(items);
        }
    }
    if let Some(labels) = wanted["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            if merged["metadata"]["labels"][k] != *v {
                if !merged["metadata"]["labels"].is_object() {
                    merged["metadata"]["labels"] = json!({});
                }
                merged["metadata"]["labels"][k] = v.clone();
                changed = true;
            }
        }
    }
    changed.then_some(merged)
}

/// Creates the default policy objects that are missing and reconciles the others.
pub async fn ensure(api: &Api) -> ApiResult<()> {
    let catalog = api.catalog();
    let options = WriteOptions {
        field_manager: Some("flotilla-apiserver".into()),
        ..WriteOptions::default()
    };
    for wanted in objects() {
        let plural = match wanted["kind"].as_str() {
            Some("ClusterRole") => "clusterroles",
            Some("ClusterRoleBinding") => "clusterrolebindings",
            _ => continue,
        };
        let def = catalog
            .get(GROUP, "v1", plural)
            .ok_or_else(|| ApiError::internal(format!("{plural}.{GROUP} are not served")))?;
        let name = crate::objects::meta_str(&wanted, "name")
            .unwrap_or_default()
            .to_owned();
        match api.store.get(&def.key(None, &name)) {
            None => match api.create(&def, None, wanted, &options).await {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            },
            Some(kv) => {
                let current = api.to_value(&def, &kv.value, kv.mod_revision);
                if let Some(merged) = reconcile(&current, &wanted) {
                    tracing::info!(kind = %def.kind, %name, "restoring the default RBAC policy");
                    api.update(&def, None, &name, merged, crate::ops::Subresource::Main, &options)
                        .await?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    #[test]
    fn defaults_real_clients_need_are_there() {
        let objects = objects();
        for role in [
            "cluster-admin",
            "system:discovery",
            "system:basic-user",
            "system:public-info-viewer",
            "admin",
            "edit",
            "view",
            "system:aggregate-to-admin",
            "system:aggregate-to-edit",
            "system:aggregate-to-view",
        ] {
            let obj = find(&objects, "ClusterRole", role);
            assert_eq!(obj["metadata"]["annotations"][AUTOUPDATE], "true");
            assert_eq!(
                obj["metadata"]["labels"]["kubernetes.io/bootstrapping"],
                "rbac-defaults"
            );
        }
        let public = find(&objects, "ClusterRoleBinding", "system:public-info-viewer");
        assert_eq!(public["subjects"][1]["name"], "system:unauthenticated");
        let masters = find(&objects, "ClusterRoleBinding", "cluster-admin");
        assert_eq!(masters["subjects"][0]["name"], "system:masters");
        assert_eq!(
            find(&objects, "ClusterRole", "view")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
            "true"
        );
    }

    #[test]
    fn reconciliation_adds_back_only_what_is_missing() {
        let objects = objects();
        let wanted = find(&objects, "ClusterRole", "system:public-info-viewer");
        assert_eq!(reconcile(wanted, wanted), None);
        let mut trimmed = wanted.clone();
        trimmed["rules"] = json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]);
        let restored = reconcile(&trimmed, wanted).unwrap_or_default();
        assert_eq!(restored["rules"].as_array().map(Vec::len), Some(2));
        // Extra rules someone added stay.
        let mut extended = wanted.clone();
        if let Some(rules) = extended["rules"].as_array_mut() {
            rules.push(json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]}));
        }
        assert_eq!(reconcile(&extended, wanted), None);
        let mut opted_out = trimmed.clone();
        opted_out["metadata"]["annotations"][AUTOUPDATE] = json!("false");
        assert_eq!(reconcile(&opted_out, wanted), None);
        let binding = find(&objects, "ClusterRoleBinding", "system:public-info-viewer");
        let mut lonely = binding.clone();
        lonely["subjects"] = json!([]);
        assert_eq!(
            reconcile(&lonely, binding).unwrap_or_default()["subjects"],
            binding["subjects"]
        );
    }
}
