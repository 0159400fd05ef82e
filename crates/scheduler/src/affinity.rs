//! Whether a cluster matches a `ClusterAffinity`, with Karmada's rules (`pkg/util/selector.go`,
//! `ClusterMatches`). The rules live in [`flotilla_api::cluster_affinity`], shared with
//! execution's ClusterTaintPolicies; this is the scheduler's entry point over its
//! [`ClusterView`].

use flotilla_api::policy::ClusterAffinity;

use crate::cluster::ClusterView;

pub use flotilla_api::cluster_affinity::label_selector_matches;

/// Whether `cluster` is selected by `affinity` (see
/// [`flotilla_api::cluster_affinity::cluster_matches`]).
pub fn cluster_matches(cluster: &ClusterView, affinity: &ClusterAffinity) -> bool {
    flotilla_api::cluster_affinity::cluster_matches(&cluster.facts(), affinity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::policy::FieldSelector;
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;

    #[test]
    fn the_view_s_facts_are_matched() {
        let cluster = ClusterView {
            region: Some("eu".into()),
            zones: vec!["eu-1".into()],
            labels: [("env".to_owned(), "prod".to_owned())].into(),
            ..ClusterView::new("m1")
        };
        let requirement = |key: &str, value: &str| NodeSelectorRequirement {
            key: key.into(),
            operator: "In".into(),
            values: Some(vec![value.into()]),
        };
        let affinity = ClusterAffinity {
            cluster_names: vec!["m1".into()],
            field_selector: Some(FieldSelector {
                match_expressions: vec![requirement("region", "eu"), requirement("zone", "eu-1")],
            }),
            ..ClusterAffinity::default()
        };
        assert!(cluster_matches(&cluster, &affinity));
        let elsewhere = ClusterAffinity {
            exclude_clusters: vec!["m1".into()],
            ..affinity
        };
        assert!(!cluster_matches(&cluster, &elsewhere));
    }
}
