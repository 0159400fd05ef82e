//! The scheduler's view of a member cluster: only the facts scheduling decisions read, as plain
//! data, so the algorithm never touches API objects and tests build clusters in one line.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::Cluster;
use flotilla_api::cluster_affinity::{ClusterFacts, cluster_zones};
use flotilla_api::well_known::conditions;
use k8s_openapi::api::core::v1::Taint;

/// Taint key execution puts on a cluster whose `Ready` condition is `False` (Karmada's). A
/// cluster that is not ready and does not carry a readiness taint yet counts as carrying it
/// (effect `NoSchedule`), so placements can tolerate it exactly as they would in Karmada.
pub use flotilla_api::well_known::NOT_READY_TAINT_KEY;
/// Taint key execution puts on a cluster whose readiness is unknown (Karmada's).
pub use flotilla_api::well_known::UNREACHABLE_TAINT_KEY;

/// A resource kind a member cluster serves (`status.apiEnablements`), e.g. `apps/v1` +
/// `Deployment`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiKind {
    /// Group/version as in `apiVersion`: `apps/v1`, or `v1` for the core group.
    pub api_version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl ApiKind {
    /// The kind `kind` in `api_version`.
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }
}

/// What the scheduler knows about one member cluster.
///
/// `zones` folds Karmada's deprecated `spec.zone` into `spec.zones`: Karmada's field selector and
/// zone spreading read `spec.zones`, and older Cluster objects only set `spec.zone`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterView {
    /// Cluster name (`metadata.name`).
    pub name: String,
    /// Labels of the Cluster object, matched by `clusterAffinity.labelSelector`.
    pub labels: BTreeMap<String, String>,
    /// `spec.provider`; `None` when unset or empty.
    pub provider: Option<String>,
    /// `spec.region`; `None` when unset or empty.
    pub region: Option<String>,
    /// `spec.zones` plus `spec.zone`, without empty or repeated entries.
    pub zones: Vec<String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// Whether the `Ready` condition is `True`.
    pub ready: bool,
    /// Whether the Cluster object is being deleted (`metadata.deletionTimestamp` set).
    pub deleting: bool,
    /// Resource kinds the cluster serves. Empty means "not reported": such a cluster is not
    /// filtered by API enablement (see [`crate::schedule`]).
    pub api_enablements: BTreeSet<ApiKind>,
}

impl ClusterView {
    /// What cluster affinities read of this cluster.
    pub fn facts(&self) -> ClusterFacts<'_> {
        ClusterFacts {
            name: &self.name,
            labels: &self.labels,
            provider: self.provider.as_deref(),
            region: self.region.as_deref(),
            zones: &self.zones,
        }
    }

    /// A ready cluster called `name` with no labels, fields or taints.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ready: true,
            ..Self::default()
        }
    }

    /// The cluster's taints as scheduling sees them: `spec.taints`, plus Karmada's
    /// `cluster.karmada.io/not-ready:NoSchedule` when the cluster is not ready and carries
    /// neither Karmada readiness taint yet (Karmada's cluster controller would have added it).
    pub fn effective_taints(&self) -> Vec<Taint> {
        let mut taints = self.taints.clone();
        let has_readiness_taint = taints
            .iter()
            .any(|t| t.key == NOT_READY_TAINT_KEY || t.key == UNREACHABLE_TAINT_KEY);
        if !self.ready && !has_readiness_taint {
            taints.push(Taint {
                key: NOT_READY_TAINT_KEY.to_owned(),
                effect: "NoSchedule".to_owned(),
                ..Taint::default()
            });
        }
        taints
    }
}

impl From<&Cluster> for ClusterView {
    fn from(cluster: &Cluster) -> Self {
        let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
        let zones = cluster_zones(cluster);
        let status = cluster.status.as_ref();
        let ready = status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == conditions::READY && c.status == "True")
        });
        let api_enablements = status
            .map(|s| {
                s.api_enablements
                    .iter()
                    .flat_map(|group| {
                        group
                            .resources
                            .iter()
                            .map(|r| ApiKind::new(group.group_version.clone(), r.kind.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            name: cluster.metadata.name.clone().unwrap_or_default(),
            labels: cluster.metadata.labels.clone().unwrap_or_default(),
            provider: non_empty(&cluster.spec.provider),
            region: non_empty(&cluster.spec.region),
            zones,
            taints: cluster.spec.taints.clone(),
            ready,
            deleting: cluster.metadata.deletion_timestamp.is_some(),
            api_enablements,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use flotilla_api::cluster::{ApiEnablement, ApiResourceName, ClusterSpec, ClusterStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn condition(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: "Test".to_owned(),
            message: String::new(),
            last_transition_time: Time(Default::default()),
            observed_generation: None,
        }
    }

    #[test]
    fn converts_every_field_of_a_cluster() {
        let mut cluster = Cluster::new(
            "member1",
            ClusterSpec {
                provider: Some("aws".into()),
                region: Some("eu".into()),
                zone: Some("eu-1".into()),
                zones: vec!["eu-2".into(), "eu-1".into(), String::new()],
                taints: vec![Taint {
                    key: "k".into(),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                }],
                ..ClusterSpec::default()
            },
        );
        cluster.metadata.labels = Some([("env".to_owned(), "prod".to_owned())].into());
        cluster.metadata.deletion_timestamp = Some(Time(Default::default()));
        cluster.status = Some(ClusterStatus {
            conditions: vec![condition("Ready", "True")],
            api_enablements: vec![ApiEnablement {
                group_version: "apps/v1".into(),
                resources: vec![ApiResourceName {
                    name: "deployments".into(),
                    kind: "Deployment".into(),
                }],
            }],
            ..ClusterStatus::default()
        });

        let view = ClusterView::from(&cluster);
        assert_eq!(view.name, "member1");
        assert_eq!(view.labels.get("env").map(String::as_str), Some("prod"));
        assert_eq!(view.provider.as_deref(), Some("aws"));
        assert_eq!(view.region.as_deref(), Some("eu"));
        assert_eq!(view.zones, vec!["eu-2".to_owned(), "eu-1".to_owned()]);
        assert_eq!(view.taints.len(), 1);
        assert!(view.ready);
        assert!(view.deleting);
        assert!(
            view.api_enablements
                .contains(&ApiKind::new("apps/v1", "Deployment"))
        );
    }

    #[test]
    fn readiness_comes_from_the_ready_condition_only() {
        let mut cluster = Cluster::new("m", ClusterSpec::default());
        assert!(!ClusterView::from(&cluster).ready, "no status: not ready");
        cluster.status = Some(ClusterStatus {
            conditions: vec![condition("Ready", "False")],
            ..ClusterStatus::default()
        });
        assert!(!ClusterView::from(&cluster).ready);
        cluster.status = Some(ClusterStatus {
            conditions: vec![condition("Other", "True"), condition("Ready", "Unknown")],
            ..ClusterStatus::default()
        });
        assert!(!ClusterView::from(&cluster).ready);
    }

    #[test]
    fn empty_fields_become_none() {
        let cluster = Cluster::new(
            "m",
            ClusterSpec {
                provider: Some(String::new()),
                region: Some(String::new()),
                zone: Some(String::new()),
                ..ClusterSpec::default()
            },
        );
        let view = ClusterView::from(&cluster);
        assert_eq!(view.provider, None);
        assert_eq!(view.region, None);
        assert!(view.zones.is_empty());
    }

    #[test]
    fn a_cluster_that_is_not_ready_carries_the_not_ready_taint_once() {
        let mut view = ClusterView::new("m");
        assert!(view.effective_taints().is_empty());
        view.ready = false;
        let taints = view.effective_taints();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, NOT_READY_TAINT_KEY);
        assert_eq!(taints[0].effect, "NoSchedule");

        view.taints = vec![Taint {
            key: UNREACHABLE_TAINT_KEY.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }];
        assert_eq!(
            view.effective_taints().len(),
            1,
            "Karmada's own taint is not doubled"
        );
    }
}
