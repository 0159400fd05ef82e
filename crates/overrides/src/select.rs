//! Which policies and rules apply to an object in a cluster, and in which order: Karmada's
//! `ResourceSelectorPriority`, `ClusterMatches` (`pkg/util/selector.go`) and the ordering of
//! `getOverridersFromOverridePolicies` (`pkg/util/overridemanager`).
//!
//! Policies that select the object apply from the least specific to the most specific, so the
//! most specific one wins where they touch the same field: first those that select every object
//! of the kind (or have no selectors at all), then those that select it by labels, then those
//! that name it; policies of equal specificity apply by name, ascending.

use std::collections::BTreeMap;

use flotilla_api::policy::{ClusterAffinity, ResourceSelector};

use crate::doc::Doc;

/// How specifically a policy's selectors select an object (Karmada's `ImplicitPriority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Specificity {
    /// Not selected.
    Mismatch,
    /// Selected by apiVersion and kind alone (or the policy has no selectors).
    All,
    /// Selected by a label selector.
    Labels,
    /// Selected by name.
    Name,
}

/// What selectors read of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectFacts {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (string values only).
    pub labels: BTreeMap<String, String>,
}

impl ObjectFacts {
    /// Reads the facts of `object`.
    pub fn of(object: &Doc) -> Self {
        let text = |doc: Option<&Doc>| doc.and_then(Doc::as_str).unwrap_or_default().to_owned();
        let metadata = object.get("metadata");
        let labels = match metadata.and_then(|m| m.get("labels")) {
            Some(Doc::Object(members)) => members
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
            _ => BTreeMap::new(),
        };
        Self {
            api_version: text(object.get("apiVersion")),
            kind: text(object.get("kind")),
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name"))),
            labels,
        }
    }
}

/// How specifically one selector selects `object`.
pub fn selector_specificity(object: &ObjectFacts, selector: &ResourceSelector) -> Specificity {
    if object.api_version != selector.api_version
        || object.kind != selector.kind
        || selector.namespace().is_some_and(|ns| ns != object.namespace)
    {
        return Specificity::Mismatch;
    }
    if let Some(name) = selector.name() {
        return if name == object.name {
            Specificity::Name
        } else {
            Specificity::Mismatch
        };
    }
    match &selector.label_selector {
        None => Specificity::All,
        Some(labels) if label_selector_matches(labels, &object.labels) => Specificity::Labels,
        Some(_) => Specificity::Mismatch,
    }
}

/// How specifically a policy with `selectors` selects `object`: the best of its selectors, or
/// [`Specificity::All`] when it has none (a policy without selectors selects everything in its
/// scope).
pub fn policy_specificity(object: &ObjectFacts, selectors: &[ResourceSelector]) -> Specificity {
    if selectors.is_empty() {
        return Specificity::All;
    }
    selectors
        .iter()
        .map(|s| selector_specificity(object, s))
        .max()
        .unwrap_or(Specificity::Mismatch)
}

/// Kubernetes label selector semantics, shared with placements and ClusterTaintPolicies.
pub use flotilla_api::cluster_affinity::label_selector_matches;

/// What cluster selection reads of a Cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.provider`.
    pub provider: Option<String>,
    /// `spec.region`.
    pub region: Option<String>,
    /// `spec.zones` plus the deprecated `spec.zone`
    /// ([`flotilla_api::cluster_affinity::cluster_zones`]).
    pub zones: Vec<String>,
}

impl ClusterFacts {
    /// Reads the facts of a Cluster object.
    pub fn of(cluster: &flotilla_api::Cluster) -> Self {
        Self {
            name: cluster.metadata.name.clone().unwrap_or_default(),
            labels: cluster.metadata.labels.clone().unwrap_or_default(),
            provider: cluster.spec.provider.clone(),
            region: cluster.spec.region.clone(),
            zones: flotilla_api::cluster_affinity::cluster_zones(cluster),
        }
    }

    /// A cluster known by name only (no labels or fields).
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Default::default()
        }
    }
}

/// Whether a rule's `targetCluster` selects `cluster` (Karmada's `ClusterMatches`, the same
/// rules as placements: [`flotilla_api::cluster_affinity::cluster_matches`]).
pub fn cluster_matches(cluster: &ClusterFacts, affinity: &ClusterAffinity) -> bool {
    let facts = flotilla_api::cluster_affinity::ClusterFacts {
        name: &cluster.name,
        labels: &cluster.labels,
        provider: cluster.provider.as_deref().filter(|p| !p.is_empty()),
        region: cluster.region.as_deref().filter(|r| !r.is_empty()),
        zones: &cluster.zones,
    };
    flotilla_api::cluster_affinity::cluster_matches(&facts, affinity)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn object() -> ObjectFacts {
        ObjectFacts::of(&Doc::from(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx", "n": 1}},
        })))
    }

    fn selector(value: serde_json::Value) -> ResourceSelector {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn object_facts() {
        let facts = object();
        assert_eq!(facts.api_version, "apps/v1");
        assert_eq!(facts.namespace, "default");
        // Non-string label values are not labels.
        assert_eq!(facts.labels, labels(&[("app", "nginx")]));
    }

    #[test]
    fn specificity_per_selector() {
        use Specificity::*;
        let cases = [
            (json!({"apiVersion": "apps/v1", "kind": "Deployment"}), All),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default"}),
                All,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}),
                Mismatch,
            ),
            (json!({"apiVersion": "apps/v1", "kind": "StatefulSet"}), Mismatch),
            (
                json!({"apiVersion": "apps/v1beta1", "kind": "Deployment"}),
                Mismatch,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}),
                Name,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "other"}),
                Mismatch,
            ),
            // A name wins over the label selector, even a mismatching one.
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                       "labelSelector": {"matchLabels": {"app": "other"}}}),
                Name,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "nginx"}}}),
                Labels,
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "x"}}}),
                Mismatch,
            ),
            // An empty label selector selects everything, with label specificity (Karmada).
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {}}),
                Labels,
            ),
        ];
        for (s, expected) in cases {
            assert_eq!(
                selector_specificity(&object(), &selector(s.clone())),
                expected,
                "{s}"
            );
        }
    }

    #[test]
    fn policy_specificity_is_the_best_selector() {
        let by_kind = selector(json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        let by_name = selector(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}));
        let other = selector(json!({"apiVersion": "v1", "kind": "Service"}));
        assert_eq!(policy_specificity(&object(), &[]), Specificity::All);
        assert_eq!(
            policy_specificity(&object(), &[by_kind, by_name.clone()]),
            Specificity::Name
        );
        assert_eq!(
            policy_specificity(&object(), std::slice::from_ref(&other)),
            Specificity::Mismatch
        );
        assert_eq!(
            policy_specificity(&object(), &[other, by_name]),
            Specificity::Name
        );
    }

    #[test]
    fn label_selectors() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let req = |key: &str, operator: &str, values: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            ..Default::default()
        };
        assert!(label_selector_matches(&req("app", "In", &["web", "api"]), &l));
        assert!(!label_selector_matches(&req("app", "NotIn", &["web"]), &l));
        assert!(label_selector_matches(&req("missing", "NotIn", &["x"]), &l));
        assert!(label_selector_matches(&req("tier", "Exists", &[]), &l));
        assert!(label_selector_matches(&req("missing", "DoesNotExist", &[]), &l));
        // Malformed requirements match nothing.
        assert!(!label_selector_matches(&req("app", "In", &[]), &l));
        assert!(!label_selector_matches(&req("app", "Exists", &["web"]), &l));
        assert!(!label_selector_matches(&req("app", "Gt", &["1"]), &l));
        assert!(label_selector_matches(&LabelSelector::default(), &l));
    }

    fn cluster() -> ClusterFacts {
        ClusterFacts {
            name: "member1".into(),
            labels: labels(&[("env", "prod")]),
            provider: Some("aws".into()),
            region: Some("cn-north-1".into()),
            zones: vec!["z1".into(), "z2".into()],
        }
    }

    fn affinity(value: serde_json::Value) -> ClusterAffinity {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn target_clusters() {
        let cases = [
            (json!({}), true),
            (json!({"clusterNames": ["member1", "member2"]}), true),
            (json!({"clusterNames": ["member2"]}), false),
            (json!({"exclude": ["member1"]}), false),
            (json!({"exclude": ["member2"]}), true),
            (
                json!({"clusterNames": ["member1"], "exclude": ["member1"]}),
                false,
            ),
            (json!({"labelSelector": {"matchLabels": {"env": "prod"}}}), true),
            (json!({"labelSelector": {"matchLabels": {"env": "dev"}}}), false),
            (
                json!({"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["cn-north-1"]}]}}),
                true,
            ),
            (
                json!({"fieldSelector": {"matchExpressions": [{"key": "provider", "operator": "NotIn", "values": ["aws"]}]}}),
                false,
            ),
            (
                json!({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2", "z9"]}]}}),
                true,
            ),
            (
                json!({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}}),
                false,
            ),
            (
                json!({"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}),
                true,
            ),
            // All of labels, fields and names must hold.
            (
                json!({"labelSelector": {"matchLabels": {"env": "prod"}}, "clusterNames": ["member2"]}),
                false,
            ),
        ];
        for (a, expected) in cases {
            assert_eq!(cluster_matches(&cluster(), &affinity(a.clone())), expected, "{a}");
        }
        // A cluster without fields.
        let bare = ClusterFacts::named("member1");
        let region = affinity(json!({"fieldSelector": {"matchExpressions": [
            {"key": "region", "operator": "DoesNotExist"}]}}));
        assert!(cluster_matches(&bare, &region));
        let zone = affinity(json!({"fieldSelector": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z1"]}]}}));
        assert!(!cluster_matches(&bare, &zone));
    }

    #[test]
    fn cluster_facts_fall_back_to_the_single_zone() {
        let cluster: flotilla_api::Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "m", "labels": {"a": "b"}},
            "spec": {"zone": "z", "region": "r"},
        }))
        .unwrap();
        let facts = ClusterFacts::of(&cluster);
        assert_eq!(facts.zones, vec!["z"]);
        assert_eq!(facts.labels, labels(&[("a", "b")]));
        assert_eq!(facts.region.as_deref(), Some("r"));
    }
}
