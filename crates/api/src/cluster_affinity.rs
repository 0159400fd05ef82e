//! Whether a member cluster matches a `ClusterAffinity` (Karmada's `util.ClusterMatches`):
//! exclusion, label selector, field selector and cluster names. Placements
//! (`placement.clusterAffinity`, the scheduler) and ClusterTaintPolicies (`spec.targetClusters`,
//! execution) select clusters with the same rules, so they share this one implementation.
//!
//! A malformed requirement (unknown operator, `In` without values, `Exists` with values, `Gt`
//! with a non-integer) makes the whole affinity match nothing, as Karmada's selector conversion
//! errors do. Key and value syntax is not re-checked here: [`crate::validation`] rejects it
//! before a policy is used.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::cluster::Cluster;
use crate::policy::{ClusterAffinity, FieldSelector};

/// The facts about a cluster that cluster affinities read.
#[derive(Clone, Copy, Debug)]
pub struct ClusterFacts<'a> {
    /// Cluster name (`metadata.name`).
    pub name: &'a str,
    /// Labels of the Cluster object.
    pub labels: &'a BTreeMap<String, String>,
    /// `spec.provider`; `None` when unset or empty.
    pub provider: Option<&'a str>,
    /// `spec.region`; `None` when unset or empty.
    pub region: Option<&'a str>,
    /// `spec.zones` plus `spec.zone` ([`cluster_zones`]).
    pub zones: &'a [String],
}

/// A cluster's zones as affinities and zone spreading read them: `spec.zones` plus Karmada's
/// deprecated `spec.zone` (older Cluster objects only set that), without empty or repeated
/// entries.
pub fn cluster_zones(cluster: &Cluster) -> Vec<String> {
    let mut zones: Vec<String> = Vec::new();
    for zone in cluster.spec.zones.iter().chain(cluster.spec.zone.iter()) {
        if !zone.is_empty() && !zones.contains(zone) {
            zones.push(zone.clone());
        }
    }
    zones
}

/// Whether `cluster` is selected by `affinity`.
///
/// Rules, in Karmada's order: a cluster in `exclude` never matches; a label selector, when
/// present, must match the Cluster's labels (an empty selector matches everything); a field
/// selector must match `provider`, `region` and `zones`; a non-empty `clusterNames` must list
/// the cluster.
pub fn cluster_matches(cluster: &ClusterFacts<'_>, affinity: &ClusterAffinity) -> bool {
    if affinity
        .exclude_clusters
        .iter()
        .any(|excluded| excluded == cluster.name)
    {
        return false;
    }
    if let Some(selector) = &affinity.label_selector
        && !label_selector_matches(selector, cluster.labels)
    {
        return false;
    }
    if let Some(fields) = &affinity.field_selector
        && !field_selector_matches(fields, cluster)
    {
        return false;
    }
    affinity.cluster_names.is_empty() || affinity.cluster_names.iter().any(|name| name == cluster.name)
}

/// Kubernetes label selector semantics (`metav1.LabelSelectorAsSelector`): `matchLabels` and
/// every `matchExpressions` requirement must hold.
pub fn label_selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_hold = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_hold = selector.match_expressions.iter().flatten().all(|req| {
        requirement_matches(
            &req.operator,
            req.values.as_deref().unwrap_or_default(),
            labels.get(&req.key).map(String::as_str),
            false,
        )
    });
    labels_hold && expressions_hold
}

/// Karmada's field selector: `zone` requirements are matched against the cluster's zones with
/// set semantics (`matchZones`); every other key against `provider` / `region` as labels
/// (`NodeSelectorRequirementsAsSelector`), an unknown key being an absent label.
fn field_selector_matches(selector: &FieldSelector, cluster: &ClusterFacts<'_>) -> bool {
    selector.match_expressions.iter().all(|req| {
        if req.key == "zone" {
            zones_match(req, cluster.zones)
        } else {
            let field = match req.key.as_str() {
                "provider" => cluster.provider,
                "region" => cluster.region,
                _ => None,
            }
            .filter(|value| !value.is_empty());
            requirement_matches(
                &req.operator,
                req.values.as_deref().unwrap_or_default(),
                field,
                true,
            )
        }
    })
}

fn zones_match(req: &NodeSelectorRequirement, zones: &[String]) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => zones.iter().any(|zone| values.contains(zone)),
        "NotIn" => !zones.iter().any(|zone| values.contains(zone)),
        "Exists" => !zones.is_empty(),
        "DoesNotExist" => zones.is_empty(),
        _ => false,
    }
}

/// One selector requirement against one (possibly absent) label value. `numeric` enables the
/// node-selector operators `Gt` and `Lt`.
fn requirement_matches(operator: &str, values: &[String], actual: Option<&str>, numeric: bool) -> bool {
    match operator {
        "In" => !values.is_empty() && actual.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !values.is_empty() && actual.is_none_or(|v| values.iter().all(|x| x != v)),
        "Exists" => values.is_empty() && actual.is_some(),
        "DoesNotExist" => values.is_empty() && actual.is_none(),
        "Gt" | "Lt" if numeric => {
            let [bound] = values else {
                return false;
            };
            let (Ok(bound), Some(Ok(actual))) = (bound.parse::<i64>(), actual.map(str::parse::<i64>)) else {
                return false;
            };
            if operator == "Gt" {
                actual > bound
            } else {
                actual < bound
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn field(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn fields(reqs: Vec<NodeSelectorRequirement>) -> ClusterAffinity {
        ClusterAffinity {
            field_selector: Some(FieldSelector {
                match_expressions: reqs,
            }),
            ..ClusterAffinity::default()
        }
    }

    /// An owned cluster for the tests.
    #[derive(Default)]
    struct TestCluster {
        name: String,
        labels: BTreeMap<String, String>,
        provider: Option<String>,
        region: Option<String>,
        zones: Vec<String>,
    }

    impl TestCluster {
        fn new(name: &str) -> Self {
            Self {
                name: name.into(),
                ..Self::default()
            }
        }
    }

    /// [`super::cluster_matches`] on an owned test cluster.
    fn cluster_matches(cluster: &TestCluster, affinity: &ClusterAffinity) -> bool {
        let facts = ClusterFacts {
            name: &cluster.name,
            labels: &cluster.labels,
            provider: cluster.provider.as_deref(),
            region: cluster.region.as_deref(),
            zones: &cluster.zones,
        };
        super::cluster_matches(&facts, affinity)
    }

    fn cluster() -> TestCluster {
        TestCluster {
            provider: Some("aws".into()),
            region: Some("eu".into()),
            zones: vec!["eu-1".into(), "eu-2".into()],
            labels: labels(&[("env", "prod"), ("tier", "gold"), ("size", "5")]),
            ..TestCluster::new("m1")
        }
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("env", "prod"), ("tier", "gold")]);
        let cases: Vec<(LabelSelector, bool)> = vec![
            (LabelSelector::default(), true),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("env", "prod")])),
                    ..LabelSelector::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("env", "dev")])),
                    ..LabelSelector::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("missing", "x")])),
                    ..LabelSelector::default()
                },
                false,
            ),
        ];
        for (selector, want) in cases {
            assert_eq!(label_selector_matches(&selector, &l), want, "{selector:?}");
        }

        let with = |req: LabelSelectorRequirement| LabelSelector {
            match_expressions: Some(vec![req]),
            ..LabelSelector::default()
        };
        let expression_cases = [
            (expr("env", "In", &["prod", "dev"]), true),
            (expr("env", "In", &["dev"]), false),
            (expr("missing", "In", &["x"]), false),
            (expr("env", "In", &[]), false),
            (expr("env", "NotIn", &["dev"]), true),
            (expr("env", "NotIn", &["prod"]), false),
            (expr("missing", "NotIn", &["x"]), true),
            (expr("env", "NotIn", &[]), false),
            (expr("env", "Exists", &[]), true),
            (expr("missing", "Exists", &[]), false),
            (expr("env", "Exists", &["prod"]), false),
            (expr("missing", "DoesNotExist", &[]), true),
            (expr("env", "DoesNotExist", &[]), false),
            (expr("env", "Gt", &["1"]), false),
            (expr("env", "Bogus", &["prod"]), false),
        ];
        for (req, want) in expression_cases {
            assert_eq!(label_selector_matches(&with(req.clone()), &l), want, "{req:?}");
        }
    }

    #[test]
    fn label_selector_requirements_are_anded() {
        let l = labels(&[("env", "prod"), ("tier", "gold")]);
        let selector = LabelSelector {
            match_labels: Some(labels(&[("env", "prod")])),
            match_expressions: Some(vec![expr("tier", "In", &["silver"])]),
        };
        assert!(!label_selector_matches(&selector, &l));
    }

    #[test]
    fn field_selector_on_provider_region_and_zones() {
        let c = cluster();
        let cases = [
            (field("provider", "In", &["aws", "gcp"]), true),
            (field("provider", "In", &["gcp"]), false),
            (field("provider", "NotIn", &["gcp"]), true),
            (field("provider", "NotIn", &["aws"]), false),
            (field("region", "In", &["eu"]), true),
            (field("region", "NotIn", &["eu"]), false),
            (field("region", "In", &[]), false),
            (field("zone", "In", &["eu-2", "us-1"]), true),
            (field("zone", "In", &["us-1"]), false),
            (field("zone", "NotIn", &["us-1"]), true),
            (field("zone", "NotIn", &["eu-1"]), false),
            (field("zone", "Exists", &[]), true),
            (field("zone", "DoesNotExist", &[]), false),
            (field("zone", "Gt", &["1"]), false),
            (field("unknown", "In", &["x"]), false),
            (field("unknown", "NotIn", &["x"]), true),
            (field("region", "Exists", &[]), true),
            (field("region", "Bogus", &["eu"]), false),
        ];
        for (req, want) in cases {
            assert_eq!(cluster_matches(&c, &fields(vec![req.clone()])), want, "{req:?}");
        }
    }

    #[test]
    fn field_selector_on_a_cluster_without_fields() {
        let c = TestCluster::new("bare");
        assert!(!cluster_matches(
            &c,
            &fields(vec![field("region", "In", &["eu"])])
        ));
        assert!(cluster_matches(
            &c,
            &fields(vec![field("region", "NotIn", &["eu"])])
        ));
        assert!(!cluster_matches(
            &c,
            &fields(vec![field("zone", "In", &["eu-1"])])
        ));
        assert!(cluster_matches(
            &c,
            &fields(vec![field("zone", "NotIn", &["eu-1"])])
        ));
        assert!(cluster_matches(
            &c,
            &fields(vec![field("zone", "DoesNotExist", &[])])
        ));
    }

    #[test]
    fn numeric_field_operators() {
        let mut c = cluster();
        c.region = Some("7".into());
        assert!(cluster_matches(&c, &fields(vec![field("region", "Gt", &["5"])])));
        assert!(!cluster_matches(&c, &fields(vec![field("region", "Lt", &["5"])])));
        assert!(!cluster_matches(&c, &fields(vec![field("region", "Gt", &["x"])])));
        assert!(!cluster_matches(
            &c,
            &fields(vec![field("region", "Gt", &["1", "2"])])
        ));
        assert!(!cluster_matches(
            &cluster(),
            &fields(vec![field("region", "Gt", &["1"])])
        ));
    }

    #[test]
    fn names_exclusion_and_combination() {
        let c = cluster();
        let names = |names: &[&str]| ClusterAffinity {
            cluster_names: names.iter().map(|n| n.to_string()).collect(),
            ..ClusterAffinity::default()
        };
        assert!(cluster_matches(&c, &ClusterAffinity::default()));
        assert!(cluster_matches(&c, &names(&["m0", "m1"])));
        assert!(!cluster_matches(&c, &names(&["m0"])));
        let excluded = ClusterAffinity {
            exclude_clusters: vec!["m1".into()],
            ..names(&["m1"])
        };
        assert!(!cluster_matches(&c, &excluded), "exclude wins over clusterNames");
        let all = ClusterAffinity {
            label_selector: Some(LabelSelector {
                match_labels: Some(labels(&[("env", "prod")])),
                ..LabelSelector::default()
            }),
            field_selector: Some(FieldSelector {
                match_expressions: vec![field("provider", "In", &["aws"])],
            }),
            ..names(&["m1"])
        };
        assert!(cluster_matches(&c, &all));
        let wrong_label = ClusterAffinity {
            label_selector: Some(LabelSelector {
                match_labels: Some(labels(&[("env", "dev")])),
                ..LabelSelector::default()
            }),
            ..all.clone()
        };
        assert!(!cluster_matches(&c, &wrong_label));
    }

    #[test]
    fn zones_fold_the_deprecated_zone_field() {
        let mut cluster = Cluster::new("m1", crate::cluster::ClusterSpec::default());
        cluster.spec.zones = vec!["a".into(), String::new(), "b".into()];
        cluster.spec.zone = Some("a".into());
        assert_eq!(cluster_zones(&cluster), ["a", "b"]);
        cluster.spec.zone = Some("c".into());
        assert_eq!(cluster_zones(&cluster), ["a", "b", "c"]);
    }
}
