//! Admission for flotilla's own kinds: PropagationPolicy, ClusterPropagationPolicy,
//! OverridePolicy, ClusterOverridePolicy, ClusterTaintPolicy and Cluster objects are checked with
//! `flotilla_api`'s semantic validation after schema validation, so a user's `kubectl apply`
//! fails with the same message the services would report. ClusterTaintPolicies with `NoExecute`
//! taints are refused unless `--allow-no-execute-taint-policy` (karmada-webhook's rule and flag).

use serde_json::Value;

use crate::errors::{ApiError, Cause};

/// Admission settings (flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Accept ClusterTaintPolicies with `NoExecute` taints (`--allow-no-execute-taint-policy`).
    pub allow_no_execute_taint_policy: bool,
}

/// Runs the flotilla admission checks for `obj` if its kind has any.
pub fn admit(options: &Options, group: &str, kind: &str, obj: &Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let result = match (group, kind) {
        ("policy.karmada.io", "PropagationPolicy") => {
            check::<flotilla_api::PropagationPolicy>(obj, |p| p.validate())
        }
        ("policy.karmada.io", "ClusterPropagationPolicy") => {
            check::<flotilla_api::ClusterPropagationPolicy>(obj, |p| p.validate())
        }
        ("policy.karmada.io", "OverridePolicy") => {
            check::<flotilla_api::OverridePolicy>(obj, |p| p.validate())
        }
        ("policy.karmada.io", "ClusterOverridePolicy") => {
            check::<flotilla_api::ClusterOverridePolicy>(obj, |p| p.validate())
        }
        ("policy.karmada.io", "ClusterTaintPolicy") => check::<flotilla_api::ClusterTaintPolicy>(obj, |p| {
            p.validate_admission(options.allow_no_execute_taint_policy)
        }),
        ("cluster.karmada.io", "Cluster") => check::<flotilla_api::Cluster>(obj, |c| c.validate()),
        _ => return Ok(()),
    };
    result.map_err(|causes| ApiError::invalid(group, kind, name, causes))
}

fn check<T: serde::de::DeserializeOwned>(
    obj: &Value,
    validate: impl Fn(&T) -> Result<(), flotilla_api::Violations>,
) -> Result<(), Vec<Cause>> {
    let typed: T = serde_path_to_error::deserialize(obj).map_err(|e| {
        vec![Cause::new(
            "FieldValueInvalid",
            e.path().to_string(),
            format!("Invalid value: {}", e.inner()),
        )]
    })?;
    validate(&typed).map_err(|violations| {
        violations
            .0
            .into_iter()
            .map(|v| Cause::new("FieldValueInvalid", v.field, v.message))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn bad_policy_gets_one_cause_per_violation() {
        let pp = json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": []}
        });
        let err = admit(&Options::default(), "policy.karmada.io", "PropagationPolicy", &pp).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .starts_with("PropagationPolicy.policy.karmada.io \"p\" is invalid"),
            "{}",
            err.message
        );
        let causes = err.to_status()["details"]["causes"].clone();
        assert_eq!(causes[0]["field"], "spec.resourceSelectors");
    }

    #[test]
    fn good_policy_and_other_kinds_pass() {
        let pp = json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}
        });
        admit(&Options::default(), "policy.karmada.io", "PropagationPolicy", &pp).unwrap();
        admit(&Options::default(), "example.com", "Widget", &json!({})).unwrap();
    }

    #[test]
    fn no_execute_taint_policies_only_when_allowed() {
        let policy = json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
            "metadata": {"name": "t"},
            "spec": {
                "addOnConditions": [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}],
                "taints": [{"key": "not-ready", "effect": "NoExecute"}]
            }
        });
        let err = admit(
            &Options::default(),
            "policy.karmada.io",
            "ClusterTaintPolicy",
            &policy,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        let causes = err.to_status()["details"]["causes"].clone();
        assert_eq!(causes[0]["field"], "spec.taints[0].effect");
        let allowed = Options {
            allow_no_execute_taint_policy: true,
        };
        admit(&allowed, "policy.karmada.io", "ClusterTaintPolicy", &policy).unwrap();
    }

    #[test]
    fn override_policies_are_checked() {
        let op = json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "op", "namespace": "default"},
            "spec": {"overrideRules": [{"overriders": {
                "plaintext": [{"path": "spec/replicas", "operator": "replace", "value": 1}],
            }}]}
        });
        let err = admit(&Options::default(), "policy.karmada.io", "OverridePolicy", &op).unwrap_err();
        assert_eq!(err.code, 422);
        let causes = err.to_status()["details"]["causes"].clone();
        assert_eq!(
            causes[0]["field"],
            "spec.overrideRules[0].overriders.plaintext[0].path"
        );
        let cop = json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": "cop"},
            "spec": {"overrideRules": [{"overriders": {
                "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "example.com"}],
            }}]}
        });
        admit(
            &Options::default(),
            "policy.karmada.io",
            "ClusterOverridePolicy",
            &cop,
        )
        .unwrap();
        let bad_cop = json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": "cop"},
            "spec": {"overrideRules": [{"overriders": {
                "imageOverrider": [{"component": "Tag", "operator": "replace", "value": "-x"}],
            }}]}
        });
        assert!(
            admit(
                &Options::default(),
                "policy.karmada.io",
                "ClusterOverridePolicy",
                &bad_cop
            )
            .is_err()
        );
    }
}
