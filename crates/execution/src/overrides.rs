//! Override policies in execution: which ones render a binding's Works, and what the binding's
//! `OverridesApplied` condition says about them (pure; the engine is `flotilla-overrides`).
//!
//! A binding the detector manages (a policy claims it, or the detector refreshed it from one:
//! it carries claim annotations or `flotilla.io/policy-generation`) is rendered
//! with exactly the override policy generations its `flotilla.io/overrides` annotation records:
//! the detector decides what is in effect (eager policies at once, Lazy ones per lazy
//! activation), so a restart of any service changes nothing. A binding the detector does not
//! manage (an attached binding the dependency distributor made for a `propagateDeps`
//! dependency) and a namespace's Works are rendered with the valid override policies as they are
//! now, Lazy or not, as Karmada renders every Work.

use std::collections::BTreeMap;

use flotilla_api::overrides::{ClusterOverridePolicy, OverridePolicy, OverridePolicyKind, OverrideSnapshot};
use flotilla_api::well_known::{
    CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION, OVERRIDES_ANNOTATION, POLICY_GENERATION_ANNOTATION,
    PROPAGATION_POLICY_NAME_ANNOTATION, reasons,
};
use flotilla_overrides::{ClusterFacts, PolicySource, RuleFailure};

/// What rendering a binding's Works with overrides needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OverrideInputs {
    /// The policies in effect.
    pub policies: Vec<PolicySource>,
    /// What target-cluster selection reads of each registered cluster.
    pub clusters: BTreeMap<String, ClusterFacts>,
}

impl OverrideInputs {
    /// The facts of `cluster` (its name only, when it is not registered).
    pub fn cluster(&self, cluster: &str) -> ClusterFacts {
        self.clusters
            .get(cluster)
            .cloned()
            .unwrap_or_else(|| ClusterFacts::named(cluster))
    }
}

/// Override rules skipped because they failed, with the cluster each failed in.
pub type ClusterFailures = Vec<(String, RuleFailure)>;

/// The annotations of a binding the detector manages, any one of which says so (see
/// [`detector_managed`]).
pub const DETECTOR_MANAGED_ANNOTATIONS: [&str; 3] = [
    POLICY_GENERATION_ANNOTATION,
    PROPAGATION_POLICY_NAME_ANNOTATION,
    CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION,
];

/// Whether the detector manages the binding with these annotations (then its
/// `flotilla.io/overrides` is what is in effect): a policy claims it, or the detector refreshed
/// it from one (a binding whose policy went keeps `flotilla.io/policy-generation`). Bindings the
/// dependency distributor made for a dependency alone have neither.
pub fn detector_managed(annotations: &BTreeMap<String, String>) -> bool {
    DETECTOR_MANAGED_ANNOTATIONS
        .iter()
        .any(|key| annotations.contains_key(*key))
}

/// The policies recorded in a binding's `flotilla.io/overrides`.
pub fn recorded_policies(annotations: &BTreeMap<String, String>) -> Vec<PolicySource> {
    OverrideSnapshot::parse_annotation(annotations.get(OVERRIDES_ANNOTATION).map(String::as_str))
        .into_iter()
        .map(|entry| PolicySource {
            kind: entry.kind,
            namespace: entry.namespace,
            name: entry.name,
            spec: entry.spec,
        })
        .collect()
}

/// The valid override policies as they are now: every ClusterOverridePolicy, and the
/// OverridePolicies of `namespace` (none for a cluster-scoped object).
pub fn current_policies(
    override_policies: &[std::sync::Arc<OverridePolicy>],
    cluster_override_policies: &[std::sync::Arc<ClusterOverridePolicy>],
    namespace: Option<&str>,
) -> Vec<PolicySource> {
    let cluster = cluster_override_policies
        .iter()
        .filter(|p| p.validate().is_ok())
        .map(|p| PolicySource {
            kind: OverridePolicyKind::ClusterOverridePolicy,
            namespace: None,
            name: p.metadata.name.clone().unwrap_or_default(),
            spec: p.spec.0.clone(),
        });
    let namespaced = override_policies
        .iter()
        .filter(|p| {
            namespace.is_some() && p.metadata.namespace.as_deref() == namespace && p.validate().is_ok()
        })
        .map(|p| PolicySource {
            kind: OverridePolicyKind::OverridePolicy,
            namespace: p.metadata.namespace.clone(),
            name: p.metadata.name.clone().unwrap_or_default(),
            spec: p.spec.clone(),
        });
    cluster.chain(namespaced).collect()
}

/// The longest `OverridesApplied` message (a condition message is meant to be read).
const MESSAGE_MAX: usize = 4096;

/// What the binding's `OverridesApplied` condition should say after rendering its Works:
/// `None` when no override policy is in effect (the condition is removed); else `True`, or
/// `False` naming every rule skipped and where.
pub fn applied_condition(
    policies_in_effect: bool,
    failures: &[(String, RuleFailure)],
) -> Option<(bool, &'static str, String)> {
    if failures.is_empty() {
        return policies_in_effect.then(|| {
            (
                true,
                reasons::APPLY_OVERRIDE_POLICY_SUCCEED,
                "every override rule in effect applied in every cluster".to_owned(),
            )
        });
    }
    let mut message = format!(
        "{} override rule{} skipped (the other rules and clusters applied): ",
        failures.len(),
        if failures.len() == 1 { "" } else { "s" }
    );
    for (i, (cluster, failure)) in failures.iter().enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(&format!("cluster {cluster}: {failure}"));
    }
    if message.len() > MESSAGE_MAX {
        let mut end = MESSAGE_MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" ...");
    }
    Some((false, reasons::APPLY_OVERRIDE_POLICY_FAILED, message))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn failure(message: &str) -> RuleFailure {
        RuleFailure {
            policy: "OverridePolicy default/op".into(),
            rule: "spec.overrideRules[0]".into(),
            overrider: "plaintext[0]".into(),
            message: message.into(),
        }
    }

    #[test]
    fn conditions() {
        assert_eq!(applied_condition(false, &[]), None);
        assert_eq!(
            applied_condition(true, &[]),
            Some((
                true,
                "ApplyOverridePolicySucceed",
                "every override rule in effect applied in every cluster".to_owned()
            ))
        );
        let (status, reason, message) = applied_condition(
            true,
            &[
                ("member1".into(), failure("doc is missing path")),
                ("member2".into(), failure("doc is missing path")),
            ],
        )
        .unwrap();
        assert!(!status);
        assert_eq!(reason, "ApplyOverridePolicyFailed");
        assert_eq!(
            message,
            "2 override rules skipped (the other rules and clusters applied): cluster member1: OverridePolicy \
             default/op spec.overrideRules[0].overriders.plaintext[0]: doc is missing path; cluster member2: \
             OverridePolicy default/op spec.overrideRules[0].overriders.plaintext[0]: doc is missing path"
        );
        let many: Vec<(String, RuleFailure)> = (0..200)
            .map(|i| (format!("member{i}"), failure(&"x".repeat(50))))
            .collect();
        let (_, _, message) = applied_condition(true, &many).unwrap();
        assert!(message.len() <= MESSAGE_MAX + 4);
        assert!(message.ends_with(" ..."));
    }

    #[test]
    fn where_the_policies_come_from() {
        let managed = BTreeMap::from([
            (POLICY_GENERATION_ANNOTATION.to_owned(), "uid/1".to_owned()),
            (
                OVERRIDES_ANNOTATION.to_owned(),
                json!([{"kind": "OverridePolicy", "namespace": "default", "name": "op", "uid": "u", "generation": 2,
                        "spec": {"overrideRules": []}}])
                .to_string(),
            ),
        ]);
        assert!(detector_managed(&managed));
        assert!(detector_managed(&BTreeMap::from([(
            PROPAGATION_POLICY_NAME_ANNOTATION.to_owned(),
            "pp".to_owned()
        )])));
        // The dependency distributor's bindings carry a fingerprint, not a claim.
        assert!(!detector_managed(&BTreeMap::from([(
            flotilla_api::well_known::TEMPLATE_FINGERPRINT_ANNOTATION.to_owned(),
            "fp".to_owned()
        )])));
        let recorded = recorded_policies(&managed);
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].name, "op");
        assert!(!detector_managed(&BTreeMap::new()));
        assert!(recorded_policies(&BTreeMap::new()).is_empty());

        let op = |namespace: &str, name: &str, spec: serde_json::Value| {
            std::sync::Arc::new(
                serde_json::from_value::<OverridePolicy>(json!({
                    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
                    "metadata": {"name": name, "namespace": namespace}, "spec": spec,
                }))
                .unwrap(),
            )
        };
        let cop = std::sync::Arc::new(
            serde_json::from_value::<ClusterOverridePolicy>(json!({
                "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterOverridePolicy",
                "metadata": {"name": "cop"}, "spec": {},
            }))
            .unwrap(),
        );
        let ops = vec![
            op("default", "mine", json!({})),
            op("other", "theirs", json!({})),
            // Invalid: never applied.
            op(
                "default",
                "broken",
                json!({"overrideRules": [{"overriders": {"plaintext": [{"path": "x", "operator": "remove"}]}}]}),
            ),
        ];
        let names = |policies: Vec<PolicySource>| policies.into_iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(
            names(current_policies(
                &ops,
                std::slice::from_ref(&cop),
                Some("default")
            )),
            vec!["cop", "mine"]
        );
        assert_eq!(
            names(current_policies(&ops, std::slice::from_ref(&cop), None)),
            vec!["cop"]
        );
    }
}
