//! Target clusters of attached bindings: the bindings the dependency distributor creates for
//! the ConfigMaps, Secrets, PVCs and ServiceAccounts a workload references (`propagateDeps`).

use std::collections::BTreeSet;

use flotilla_api::{BindingSnapshot, TargetCluster};

/// The target clusters of an attached (dependency) binding: every cluster of every `requiredBy`
/// snapshot, plus the binding's own scheduling result when a policy of its own also matches it
/// (pass an empty `own` otherwise). Each cluster once, with 0 replicas (dependencies have none),
/// sorted by name; entries with an empty name are ignored.
///
/// This mirrors Karmada, where a dependency follows every workload that requires it
/// (`ObtainBindingSpecExistingClusters` in `pkg/util/helper/binding.go` counts `requiredBy`
/// clusters as the binding's clusters).
pub fn union_clusters(own: &[TargetCluster], required_by: &[BindingSnapshot]) -> Vec<TargetCluster> {
    let names: BTreeSet<&str> = own
        .iter()
        .chain(required_by.iter().flat_map(|snapshot| snapshot.clusters.iter()))
        .map(|t| t.name.as_str())
        .filter(|name| !name.is_empty())
        .collect();
    names
        .into_iter()
        .map(|name| TargetCluster {
            name: name.to_owned(),
            replicas: 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, replicas: i32) -> TargetCluster {
        TargetCluster {
            name: name.into(),
            replicas,
        }
    }

    fn snapshot(name: &str, clusters: Vec<TargetCluster>) -> BindingSnapshot {
        BindingSnapshot {
            namespace: Some("default".into()),
            name: name.into(),
            clusters,
        }
    }

    fn names(result: &[TargetCluster]) -> Vec<(&str, i32)> {
        result.iter().map(|t| (t.name.as_str(), t.replicas)).collect()
    }

    /// Own result, requiredBy snapshots, expected union.
    type UnionCase = (Vec<TargetCluster>, Vec<BindingSnapshot>, Vec<(&'static str, i32)>);

    #[test]
    fn union_cases() {
        let cases: Vec<UnionCase> = vec![
            (vec![], vec![], vec![]),
            (
                vec![],
                vec![snapshot("web", vec![t("m2", 3), t("m1", 2)])],
                vec![("m1", 0), ("m2", 0)],
            ),
            (
                vec![],
                vec![
                    snapshot("web", vec![t("m1", 2), t("m3", 1)]),
                    snapshot("api", vec![t("m3", 5), t("m2", 1)]),
                ],
                vec![("m1", 0), ("m2", 0), ("m3", 0)],
            ),
            (
                vec![t("m4", 0), t("m1", 0)],
                vec![snapshot("web", vec![t("m1", 2)])],
                vec![("m1", 0), ("m4", 0)],
            ),
            (vec![t("m2", 7)], vec![], vec![("m2", 0)]),
            (
                vec![t("", 1)],
                vec![snapshot("web", vec![t("", 1), t("m1", 1), t("m1", 1)])],
                vec![("m1", 0)],
            ),
            (vec![], vec![snapshot("idle", vec![])], vec![]),
        ];
        for (own, required_by, want) in cases {
            assert_eq!(
                names(&union_clusters(&own, &required_by)),
                want,
                "{own:?} {required_by:?}"
            );
        }
    }
}
