//! A placement's replica strategy and spread constraints with Karmada's defaults applied, so the
//! rest of the algorithm never looks at an unset field.
//!
//! Defaults, as Karmada sets them before a placement reaches its scheduler:
//! - `replicaScheduling` absent: `Duplicated` (`Placement.ReplicaSchedulingType()` in
//!   `pkg/apis/policy/v1alpha1/propagation_helper.go`);
//! - `replicaSchedulingType` empty: `Divided` (CRD default, `+kubebuilder:default=Divided`);
//! - `Divided` without `replicaDivisionPreference`: `Weighted` (mutating webhook,
//!   `helper.SetReplicaDivisionPreferenceWeighted`);
//! - `Weighted` without `weightPreference`, or with an empty `staticWeightList`: every cluster
//!   weight 1 (`getDefaultWeightPreference` and `getStaticWeightInfoList` in
//!   `pkg/scheduler/core`);
//! - a spread constraint with neither `spreadByField` nor `spreadByLabel`: `spreadByField:
//!   cluster`; `minGroups` 0: 1 (webhook, `helper.SetDefaultSpreadConstraints`).
//!
//! flotilla's own decision: `maxGroups` 0 or unset means "no upper bound". Karmada takes it
//! literally and selects zero clusters, so every such binding fails with "no clusters available
//! to schedule"; no policy can depend on that.

use flotilla_api::Placement;
use flotilla_api::policy::{
    DynamicWeightFactor, ReplicaDivisionPreference, ReplicaSchedulingStrategy, ReplicaSchedulingType,
    SpreadFieldValue, StaticClusterWeight,
};

use crate::error::ScheduleError;

/// How replicas are assigned to the selected clusters (Karmada's `assignFuncMap` keys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Strategy<'a> {
    /// Every selected cluster runs all replicas.
    Duplicated,
    /// `Divided` + `Aggregated`: as few clusters as possible.
    Aggregated,
    /// `Divided` + `Weighted` with static weights; an empty list means equal weights.
    StaticWeight(&'a [StaticClusterWeight]),
    /// `Divided` + `Weighted` with `dynamicWeight` (by available replicas).
    DynamicWeight,
}

fn effective_type(strategy: &ReplicaSchedulingStrategy) -> ReplicaSchedulingType {
    strategy.scheduling_type()
}

fn effective_preference(strategy: &ReplicaSchedulingStrategy) -> ReplicaDivisionPreference {
    strategy
        .replica_division_preference
        .clone()
        .unwrap_or(ReplicaDivisionPreference::Weighted)
}

/// Whether every selected cluster receives the full replica count.
pub(crate) fn is_duplicated(placement: &Placement) -> bool {
    placement
        .replica_scheduling
        .as_ref()
        .is_none_or(|s| effective_type(s) == ReplicaSchedulingType::Duplicated)
}

/// The replica strategy, or an error naming the field when a value is not one Karmada knows
/// (validation rejects such values; this keeps a bad object from being scheduled at random).
pub(crate) fn strategy(placement: &Placement) -> Result<Strategy<'_>, ScheduleError> {
    let Some(strategy) = &placement.replica_scheduling else {
        return Ok(Strategy::Duplicated);
    };
    match effective_type(strategy) {
        ReplicaSchedulingType::Duplicated => Ok(Strategy::Duplicated),
        ReplicaSchedulingType::Divided => match effective_preference(strategy) {
            ReplicaDivisionPreference::Aggregated => Ok(Strategy::Aggregated),
            ReplicaDivisionPreference::Weighted => {
                let weights = strategy.weight_preference.as_ref();
                // Karmada checks dynamicWeight first: with both set, dynamic wins.
                if weights.is_some_and(|w| w.dynamic_weight.is_some()) {
                    match weights.and_then(|w| w.dynamic_weight.as_ref()) {
                        Some(DynamicWeightFactor::Other(value)) => {
                            Err(ScheduleError::unschedulable(format!(
                                "placement.replicaScheduling.weightPreference.dynamicWeight {value:?} is not \
                             supported: use AvailableReplicas"
                            )))
                        }
                        _ => Ok(Strategy::DynamicWeight),
                    }
                } else {
                    Ok(Strategy::StaticWeight(
                        weights
                            .map(|w| w.static_weight_list.as_slice())
                            .unwrap_or_default(),
                    ))
                }
            }
            ReplicaDivisionPreference::Other(value) => Err(ScheduleError::unschedulable(format!(
                "placement.replicaScheduling.replicaDivisionPreference {value:?} is not supported: use \
                 Aggregated or Weighted"
            ))),
        },
        ReplicaSchedulingType::Other(value) => Err(ScheduleError::unschedulable(format!(
            "placement.replicaScheduling.replicaSchedulingType {value:?} is not supported: use Duplicated \
             or Divided"
        ))),
    }
}

/// Whether spread constraints are ignored: Karmada ignores them for static-weighted division
/// (`shouldIgnoreSpreadConstraint` in `spreadconstraint/select_clusters.go`), i.e. `Divided` +
/// `Weighted` with no `weightPreference`, or with a non-empty `staticWeightList` and no
/// `dynamicWeight`.
pub(crate) fn spread_ignored(placement: &Placement) -> bool {
    let Some(strategy) = &placement.replica_scheduling else {
        return false;
    };
    if effective_type(strategy) != ReplicaSchedulingType::Divided
        || effective_preference(strategy) != ReplicaDivisionPreference::Weighted
    {
        return false;
    }
    match &strategy.weight_preference {
        None => true,
        Some(w) => !w.static_weight_list.is_empty() && w.dynamic_weight.is_none(),
    }
}

/// What a spread constraint groups clusters by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SpreadBy {
    /// One group per cluster.
    Cluster,
    /// `spec.region`.
    Region,
    /// Each of `spec.zones`.
    Zone,
    /// `spec.provider`.
    Provider,
    /// The value of this label.
    Label(String),
}

impl SpreadBy {
    /// The word used in messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            SpreadBy::Cluster => "cluster".into(),
            SpreadBy::Region => "region".into(),
            SpreadBy::Zone => "zone".into(),
            SpreadBy::Provider => "provider".into(),
            SpreadBy::Label(key) => format!("label {key:?}"),
        }
    }
}

/// One spread constraint with defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Spread {
    /// The grouping.
    pub by: SpreadBy,
    /// At least this many groups (at least 1).
    pub min: usize,
    /// At most this many groups (`usize::MAX` when unbounded).
    pub max: usize,
}

/// The spread constraints that drive selection: the cluster constraint and the topology
/// constraint (region, zone, provider or label) selection groups by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SpreadPlan {
    /// Every constraint, in order, defaults applied (the filter reads all of them).
    pub all: Vec<Spread>,
    /// The `cluster` constraint, if any.
    pub cluster: Option<Spread>,
    /// The topology constraint selection groups by, if any.
    pub topology: Option<Spread>,
}

fn to_count(value: Option<i64>) -> Option<usize> {
    value
        .filter(|v| *v > 0)
        .map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// The placement's spread constraints with defaults applied.
///
/// Karmada keys constraints by field, so a repeated field keeps its last entry; all label
/// constraints share one key. Karmada's selection only knows `region` (and `cluster`); flotilla
/// also groups by `zone`, `provider` and a label, choosing one topology in the order region,
/// zone, provider, label (the others still filter clusters that lack the field).
pub(crate) fn spread_plan(placement: &Placement) -> Result<SpreadPlan, ScheduleError> {
    let mut plan = SpreadPlan::default();
    let (mut region, mut zone, mut provider, mut label) = (None, None, None, None);
    for (i, constraint) in placement.spread_constraints.iter().enumerate() {
        let by_label = constraint.spread_by_label.as_deref().filter(|l| !l.is_empty());
        let by = match (&constraint.spread_by_field, by_label) {
            (Some(SpreadFieldValue::Cluster), _) | (None, None) => SpreadBy::Cluster,
            (Some(SpreadFieldValue::Region), _) => SpreadBy::Region,
            (Some(SpreadFieldValue::Zone), _) => SpreadBy::Zone,
            (Some(SpreadFieldValue::Provider), _) => SpreadBy::Provider,
            (Some(SpreadFieldValue::Other(value)), _) => {
                return Err(ScheduleError::unschedulable(format!(
                    "placement.spreadConstraints[{i}].spreadByField {value:?} is not supported: use \
                     cluster, region, zone or provider"
                )));
            }
            (None, Some(key)) => SpreadBy::Label(key.to_owned()),
        };
        let min = to_count(constraint.min_groups).unwrap_or(1);
        let max = to_count(constraint.max_groups).unwrap_or(usize::MAX);
        let spread = Spread {
            by: by.clone(),
            min,
            max,
        };
        plan.all.push(spread.clone());
        let slot = match by {
            SpreadBy::Cluster => &mut plan.cluster,
            SpreadBy::Region => &mut region,
            SpreadBy::Zone => &mut zone,
            SpreadBy::Provider => &mut provider,
            SpreadBy::Label(_) => &mut label,
        };
        *slot = Some(spread);
    }
    plan.topology = region.or(zone).or(provider).or(label);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use flotilla_api::policy::{ClusterPreferences, SpreadConstraint};

    fn rs(
        kind: Option<ReplicaSchedulingType>,
        pref: Option<ReplicaDivisionPreference>,
        weights: Option<ClusterPreferences>,
    ) -> Placement {
        Placement {
            replica_scheduling: Some(ReplicaSchedulingStrategy {
                replica_scheduling_type: kind,
                replica_division_preference: pref,
                weight_preference: weights,
            }),
            ..Placement::default()
        }
    }

    fn static_list() -> ClusterPreferences {
        ClusterPreferences {
            static_weight_list: vec![StaticClusterWeight::default()],
            dynamic_weight: None,
        }
    }

    #[test]
    fn replica_strategy_defaults() {
        use ReplicaDivisionPreference as P;
        use ReplicaSchedulingType as T;
        let dynamic = ClusterPreferences {
            dynamic_weight: Some(DynamicWeightFactor::AvailableReplicas),
            ..ClusterPreferences::default()
        };
        let both = ClusterPreferences {
            dynamic_weight: Some(DynamicWeightFactor::AvailableReplicas),
            ..static_list()
        };
        let cases: Vec<(Placement, Strategy<'static>, bool)> = vec![
            (Placement::default(), Strategy::Duplicated, false),
            (rs(Some(T::Duplicated), None, None), Strategy::Duplicated, false),
            (rs(None, None, None), Strategy::StaticWeight(&[]), true),
            (
                rs(Some(T::Divided), None, None),
                Strategy::StaticWeight(&[]),
                true,
            ),
            (
                rs(Some(T::Divided), Some(P::Aggregated), None),
                Strategy::Aggregated,
                false,
            ),
            (
                rs(Some(T::Divided), Some(P::Weighted), Some(dynamic)),
                Strategy::DynamicWeight,
                false,
            ),
            (
                rs(Some(T::Divided), Some(P::Weighted), Some(both)),
                Strategy::DynamicWeight,
                false,
            ),
            (
                rs(
                    Some(T::Divided),
                    Some(P::Weighted),
                    Some(ClusterPreferences::default()),
                ),
                Strategy::StaticWeight(&[]),
                false,
            ),
        ];
        for (placement, want, ignored) in cases {
            let got = strategy(&placement).unwrap();
            match (got, want) {
                (Strategy::StaticWeight(a), Strategy::StaticWeight(b)) => assert_eq!(a.len(), b.len()),
                (got, want) => assert_eq!(got, want, "{placement:?}"),
            }
            assert_eq!(spread_ignored(&placement), ignored, "{placement:?}");
        }
        let with_list = rs(Some(T::Divided), Some(P::Weighted), Some(static_list()));
        assert!(matches!(strategy(&with_list).unwrap(), Strategy::StaticWeight(l) if l.len() == 1));
        assert!(spread_ignored(&with_list));
    }

    #[test]
    fn duplicated_detection() {
        assert!(is_duplicated(&Placement::default()));
        assert!(is_duplicated(&rs(
            Some(ReplicaSchedulingType::Duplicated),
            None,
            None
        )));
        assert!(!is_duplicated(&rs(None, None, None)));
        assert!(!is_duplicated(&rs(
            Some(ReplicaSchedulingType::Other("x".into())),
            None,
            None
        )));
    }

    #[test]
    fn unknown_strategy_values_are_errors_naming_the_field() {
        let bad_type = rs(Some(ReplicaSchedulingType::Other("Split".into())), None, None);
        let err = strategy(&bad_type).unwrap_err();
        assert!(err.message.contains("replicaSchedulingType \"Split\""), "{err}");
        let bad_pref = rs(None, Some(ReplicaDivisionPreference::Other("Even".into())), None);
        assert!(
            strategy(&bad_pref)
                .unwrap_err()
                .message
                .contains("replicaDivisionPreference")
        );
        let bad_dynamic = rs(
            None,
            None,
            Some(ClusterPreferences {
                dynamic_weight: Some(DynamicWeightFactor::Other("Cpu".into())),
                ..ClusterPreferences::default()
            }),
        );
        assert!(
            strategy(&bad_dynamic)
                .unwrap_err()
                .message
                .contains("dynamicWeight")
        );
    }

    fn sc(
        field: Option<SpreadFieldValue>,
        label: Option<&str>,
        min: Option<i64>,
        max: Option<i64>,
    ) -> SpreadConstraint {
        SpreadConstraint {
            spread_by_field: field,
            spread_by_label: label.map(str::to_owned),
            min_groups: min,
            max_groups: max,
        }
    }

    #[test]
    fn spread_defaults_and_topology_choice() {
        let placement = Placement {
            spread_constraints: vec![
                sc(None, None, None, None),
                sc(Some(SpreadFieldValue::Zone), None, Some(2), Some(3)),
                sc(Some(SpreadFieldValue::Provider), None, Some(-1), Some(0)),
                sc(None, Some("team"), Some(1), Some(1)),
            ],
            ..Placement::default()
        };
        let plan = spread_plan(&placement).unwrap();
        assert_eq!(plan.all.len(), 4);
        assert_eq!(
            plan.cluster,
            Some(Spread {
                by: SpreadBy::Cluster,
                min: 1,
                max: usize::MAX
            })
        );
        assert_eq!(
            plan.topology,
            Some(Spread {
                by: SpreadBy::Zone,
                min: 2,
                max: 3
            })
        );
        assert_eq!(plan.all[2].min, 1, "negative minGroups counts as the default 1");

        let region_wins = Placement {
            spread_constraints: vec![
                sc(None, Some("team"), None, None),
                sc(Some(SpreadFieldValue::Region), None, Some(1), Some(2)),
            ],
            ..Placement::default()
        };
        assert_eq!(
            spread_plan(&region_wins).unwrap().topology.unwrap().by,
            SpreadBy::Region
        );

        let repeated = Placement {
            spread_constraints: vec![
                sc(Some(SpreadFieldValue::Cluster), None, Some(1), Some(1)),
                sc(Some(SpreadFieldValue::Cluster), None, Some(2), Some(5)),
            ],
            ..Placement::default()
        };
        assert_eq!(
            spread_plan(&repeated).unwrap().cluster.unwrap().max,
            5,
            "last one wins"
        );

        let field_over_label = Placement {
            spread_constraints: vec![sc(Some(SpreadFieldValue::Region), Some("team"), None, None)],
            ..Placement::default()
        };
        assert_eq!(
            spread_plan(&field_over_label).unwrap().topology.unwrap().by,
            SpreadBy::Region
        );

        let bad = Placement {
            spread_constraints: vec![sc(Some(SpreadFieldValue::Other("rack".into())), None, None, None)],
            ..Placement::default()
        };
        assert!(
            spread_plan(&bad)
                .unwrap_err()
                .message
                .contains("spreadConstraints[0].spreadByField")
        );
    }
}
