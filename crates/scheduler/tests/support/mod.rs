//! Builders shared by the integration tests: clusters and placements in one line each.

#![allow(dead_code)]

use flotilla_api::Placement;
use flotilla_api::policy::{
    ClusterAffinity, ClusterAffinityTerm, ClusterPreferences, DynamicWeightFactor, FieldSelector,
    ReplicaDivisionPreference, ReplicaSchedulingStrategy, ReplicaSchedulingType, SpreadConstraint,
    SpreadFieldValue, StaticClusterWeight,
};
use flotilla_scheduler::{ApiKind, ClusterView};
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// A ready cluster without labels or fields.
pub fn c(name: &str) -> ClusterView {
    ClusterView::new(name)
}

/// Ready clusters by name.
pub fn clusters(names: &[&str]) -> Vec<ClusterView> {
    names.iter().map(|n| c(n)).collect()
}

/// Chainable changes to a test cluster.
pub trait ClusterExt: Sized {
    /// Sets `spec.region`.
    fn region(self, region: &str) -> Self;
    /// Sets `spec.zones`.
    fn zones(self, zones: &[&str]) -> Self;
    /// Sets `spec.provider`.
    fn provider(self, provider: &str) -> Self;
    /// Adds a label.
    fn label(self, key: &str, value: &str) -> Self;
    /// Adds a taint.
    fn taint(self, key: &str, value: Option<&str>, effect: &str) -> Self;
    /// Marks the cluster not ready.
    fn not_ready(self) -> Self;
    /// Marks the cluster as being deleted.
    fn deleting(self) -> Self;
    /// Sets the served kinds.
    fn apis(self, kinds: &[(&str, &str)]) -> Self;
}

impl ClusterExt for ClusterView {
    fn region(mut self, region: &str) -> Self {
        self.region = Some(region.into());
        self
    }
    fn zones(mut self, zones: &[&str]) -> Self {
        self.zones = zones.iter().map(|z| z.to_string()).collect();
        self
    }
    fn provider(mut self, provider: &str) -> Self {
        self.provider = Some(provider.into());
        self
    }
    fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    fn taint(mut self, key: &str, value: Option<&str>, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.into(),
            value: value.map(str::to_owned),
            effect: effect.into(),
            time_added: None,
        });
        self
    }
    fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }
    fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }
    fn apis(mut self, kinds: &[(&str, &str)]) -> Self {
        self.api_enablements = kinds.iter().map(|(v, k)| ApiKind::new(*v, *k)).collect();
        self
    }
}

/// An affinity listing clusters by name.
pub fn names(names: &[&str]) -> ClusterAffinity {
    ClusterAffinity {
        cluster_names: names.iter().map(|n| n.to_string()).collect(),
        ..ClusterAffinity::default()
    }
}

/// An affinity excluding clusters by name.
pub fn exclude(names: &[&str]) -> ClusterAffinity {
    ClusterAffinity {
        exclude_clusters: names.iter().map(|n| n.to_string()).collect(),
        ..ClusterAffinity::default()
    }
}

/// An affinity with `matchLabels`.
pub fn labels(pairs: &[(&str, &str)]) -> ClusterAffinity {
    ClusterAffinity {
        label_selector: Some(LabelSelector {
            match_labels: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            match_expressions: None,
        }),
        ..ClusterAffinity::default()
    }
}

/// An affinity with one label `matchExpressions` requirement.
pub fn label_expr(key: &str, operator: &str, values: &[&str]) -> ClusterAffinity {
    ClusterAffinity {
        label_selector: Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
        }),
        ..ClusterAffinity::default()
    }
}

/// An affinity with one field selector requirement.
pub fn field(key: &str, operator: &str, values: &[&str]) -> ClusterAffinity {
    ClusterAffinity {
        field_selector: Some(FieldSelector {
            match_expressions: vec![NodeSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }],
        }),
        ..ClusterAffinity::default()
    }
}

/// A toleration.
pub fn toleration(
    key: Option<&str>,
    operator: Option<&str>,
    value: Option<&str>,
    effect: Option<&str>,
) -> Toleration {
    Toleration {
        key: key.map(str::to_owned),
        operator: operator.map(str::to_owned),
        value: value.map(str::to_owned),
        effect: effect.map(str::to_owned),
        toleration_seconds: None,
    }
}

/// A chainable placement.
#[derive(Clone, Debug, Default)]
pub struct P(pub Placement);

/// An empty placement.
pub fn p() -> P {
    P::default()
}

impl P {
    /// Sets `clusterAffinity`.
    pub fn affinity(mut self, affinity: ClusterAffinity) -> Self {
        self.0.cluster_affinity = Some(affinity);
        self
    }
    /// Appends a `clusterAffinities` term.
    pub fn term(mut self, name: &str, affinity: ClusterAffinity) -> Self {
        self.0.cluster_affinities.push(ClusterAffinityTerm {
            affinity_name: name.into(),
            affinity,
            overflow_affinities: Vec::new(),
        });
        self
    }
    /// Appends a toleration.
    pub fn tolerate(mut self, toleration: Toleration) -> Self {
        self.0.cluster_tolerations.push(toleration);
        self
    }
    /// Appends a `spreadByField` constraint (`min`/`max` 0 = unset).
    pub fn spread(mut self, field: &str, min: i64, max: i64) -> Self {
        self.0.spread_constraints.push(SpreadConstraint {
            spread_by_field: Some(SpreadFieldValue::from(field)),
            spread_by_label: None,
            min_groups: (min != 0).then_some(min),
            max_groups: (max != 0).then_some(max),
        });
        self
    }
    /// Appends a `spreadByLabel` constraint.
    pub fn spread_label(mut self, key: &str, min: i64, max: i64) -> Self {
        self.0.spread_constraints.push(SpreadConstraint {
            spread_by_field: None,
            spread_by_label: Some(key.into()),
            min_groups: (min != 0).then_some(min),
            max_groups: (max != 0).then_some(max),
        });
        self
    }
    fn strategy(mut self, strategy: ReplicaSchedulingStrategy) -> Self {
        self.0.replica_scheduling = Some(strategy);
        self
    }
    /// `replicaSchedulingType: Duplicated`.
    pub fn duplicated(self) -> Self {
        self.strategy(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some(ReplicaSchedulingType::Duplicated),
            ..ReplicaSchedulingStrategy::default()
        })
    }
    /// `replicaSchedulingType: Divided` and nothing else (defaults to equal static weights).
    pub fn divided(self) -> Self {
        self.strategy(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
            ..ReplicaSchedulingStrategy::default()
        })
    }
    /// `Divided` + `Aggregated`.
    pub fn aggregated(self) -> Self {
        self.strategy(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
            replica_division_preference: Some(ReplicaDivisionPreference::Aggregated),
            weight_preference: None,
        })
    }
    /// `Divided` + `Weighted` + `dynamicWeight: AvailableReplicas`.
    pub fn dynamic(self) -> Self {
        self.strategy(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
            replica_division_preference: Some(ReplicaDivisionPreference::Weighted),
            weight_preference: Some(ClusterPreferences {
                static_weight_list: Vec::new(),
                dynamic_weight: Some(DynamicWeightFactor::AvailableReplicas),
            }),
        })
    }
    /// `Divided` + `Weighted` with a static weight list.
    pub fn weights(self, list: Vec<(ClusterAffinity, i64)>) -> Self {
        self.strategy(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
            replica_division_preference: Some(ReplicaDivisionPreference::Weighted),
            weight_preference: Some(ClusterPreferences {
                static_weight_list: list
                    .into_iter()
                    .map(|(target_cluster, weight)| StaticClusterWeight {
                        target_cluster,
                        weight,
                    })
                    .collect(),
                dynamic_weight: None,
            }),
        })
    }
    /// Sets a raw replica strategy.
    pub fn raw_strategy(self, strategy: ReplicaSchedulingStrategy) -> Self {
        self.strategy(strategy)
    }
}
