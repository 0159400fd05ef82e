//! Division: how many replicas each selected cluster runs (Karmada's `AssignReplicas`,
//! `pkg/scheduler/core/assignment.go` and `division_algorithm.go`).
//!
//! - Kinds without replicas (`replicas == 0`): every selected cluster, with 0 replicas. Karmada
//!   does the same for non-workloads; a workload scaled to zero is indistinguishable here and is
//!   kept on its clusters too (Karmada's `--enable-empty-workload-propagation` behaviour), so
//!   scaling to zero never deletes it from members.
//! - `Duplicated`: every selected cluster runs all replicas.
//! - Static weights: each selected cluster's weight is the highest weight among the
//!   `staticWeightList` entries whose `targetCluster` matches it; clusters no entry matches get
//!   nothing; when no cluster has a weight, all weigh 1. Replicas are then divided by the
//!   Webster method ([`crate::webster`]), so the result depends only on the weights and the
//!   replica count: proportions hold when replicas change.
//! - Dynamic weights and `Aggregated`: Karmada's steady assignment. The previous result is kept
//!   when the replica count is unchanged; on scale-up only the new replicas are divided (by each
//!   cluster's available replicas; `Aggregated` first fills the clusters that already run
//!   replicas, then as few others as possible); on scale-down the previous result is the weight.
//!   A reschedule request (`fresh`) divides everything anew. Without capacity information every
//!   cluster can take all replicas, so dynamic weights are equal and `Aggregated` puts new
//!   replicas on the cluster that already runs the most (else the first by name).
//!
//! Clusters that end with 0 replicas are dropped (Karmada's `removeZeroReplicasCluster`).

use std::collections::BTreeMap;

use flotilla_api::TargetCluster;

use crate::affinity::cluster_matches;
use crate::error::ScheduleError;
use crate::placement::Candidate;
use crate::strategy::Strategy;
use crate::webster::{TieBreak, allocate};

/// What division needs besides the selected clusters.
pub(crate) struct DivideContext<'a> {
    /// The replica strategy, defaults applied.
    pub strategy: Strategy<'a>,
    /// The binding's replicas (not negative).
    pub replicas: i32,
    /// The previous result: unique names, replicas not negative.
    pub previous: &'a [TargetCluster],
    /// A reschedule was requested: ignore the previous division.
    pub fresh: bool,
    /// Webster tie-break.
    pub tie: TieBreak,
}

/// Replicas per selected cluster; clusters with none are left out unless the kind has no
/// replicas at all.
pub(crate) fn divide(
    selected: &[Candidate<'_>],
    ctx: &DivideContext<'_>,
) -> Result<Vec<TargetCluster>, ScheduleError> {
    if selected.is_empty() {
        return Err(ScheduleError::unschedulable("no clusters available to schedule"));
    }
    if ctx.replicas <= 0 {
        return Ok(selected.iter().map(|c| target(c.name(), 0)).collect());
    }
    let assigned = match ctx.strategy {
        Strategy::Duplicated => selected.iter().map(|c| target(c.name(), ctx.replicas)).collect(),
        Strategy::StaticWeight(list) => {
            let mut weights: Vec<(&str, i64)> = selected
                .iter()
                .map(|c| {
                    let weight = list
                        .iter()
                        .filter(|w| cluster_matches(c.cluster, &w.target_cluster))
                        .map(|w| w.weight)
                        .fold(0, i64::max);
                    (c.name(), weight)
                })
                .filter(|(_, w)| *w > 0)
                .collect();
            if weights.is_empty() {
                weights = selected.iter().map(|c| (c.name(), 1)).collect();
            }
            webster(ctx.replicas, &weights, ctx.tie)
        }
        Strategy::Aggregated | Strategy::DynamicWeight => divide_dynamic(selected, ctx)?,
    };
    Ok(assigned.into_iter().filter(|t| t.replicas > 0).collect())
}

fn target(name: &str, replicas: i32) -> TargetCluster {
    TargetCluster {
        name: name.to_owned(),
        replicas,
    }
}

fn webster(replicas: i32, weights: &[(&str, i64)], tie: TieBreak) -> Vec<TargetCluster> {
    let seats = allocate(replicas, weights, tie);
    weights
        .iter()
        .zip(seats)
        .map(|((name, _), seats)| target(name, seats))
        .collect()
}

/// Karmada's `assignByDynamicStrategy` in steady mode, or fresh mode on a reschedule.
fn divide_dynamic(
    selected: &[Candidate<'_>],
    ctx: &DivideContext<'_>,
) -> Result<Vec<TargetCluster>, ScheduleError> {
    let replicas = i64::from(ctx.replicas);
    // The previous result restricted to clusters still selected; replicas on clusters that
    // dropped out count as new replicas to place.
    let mut scheduled: Vec<(&str, i64)> = ctx
        .previous
        .iter()
        .filter(|p| selected.iter().any(|c| c.name() == p.name))
        .map(|p| (p.name.as_str(), i64::from(p.replicas)))
        .collect();
    let assigned: i64 = scheduled.iter().map(|(_, r)| r).sum();

    let (target_replicas, mut available): (i64, Vec<(&str, i64)>) = if ctx.fresh {
        let held: BTreeMap<&str, i64> = scheduled.iter().copied().collect();
        let available = selected
            .iter()
            .map(|c| (c.name(), c.allocatable + held.get(c.name()).copied().unwrap_or(0)))
            .collect();
        scheduled.clear();
        (replicas, available)
    } else if assigned > replicas {
        // Scale down in proportion to the previous division.
        let mut available = scheduled.clone();
        available.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        scheduled.clear();
        (replicas, available)
    } else if assigned < replicas {
        let available = selected.iter().map(|c| (c.name(), c.allocatable)).collect();
        (replicas - assigned, available)
    } else {
        return Ok(scheduled
            .into_iter()
            .map(|(name, r)| target(name, i32::try_from(r).unwrap_or(i32::MAX)))
            .collect());
    };
    // Most room first; the sort is stable, so ties keep the selection ranking.
    available.sort_by_key(|(_, room)| std::cmp::Reverse(*room));

    let total_available: i64 = available.iter().map(|(_, r)| r).sum();
    if total_available < target_replicas {
        return Err(ScheduleError::unschedulable(format!(
            "Clusters available replicas {total_available} are not enough to schedule {target_replicas} \
             replicas."
        )));
    }
    if ctx.strategy == Strategy::Aggregated {
        // Clusters that already run replicas take new ones first; then as few clusters as can
        // hold the rest.
        let runs = |name: &str| scheduled.iter().any(|(n, r)| *n == name && *r > 0);
        let (mut ordered, others): (Vec<_>, Vec<_>) = available.into_iter().partition(|(n, _)| runs(n));
        ordered.extend(others);
        let mut sum = 0i64;
        let keep = ordered
            .iter()
            .position(|(_, r)| {
                sum += r;
                sum >= target_replicas
            })
            .map_or(ordered.len(), |i| i + 1);
        ordered.truncate(keep);
        available = ordered;
    }
    let seats = i32::try_from(target_replicas).unwrap_or(i32::MAX);
    let added = webster(seats, &available, ctx.tie);

    let mut merged: BTreeMap<&str, i64> = scheduled.into_iter().collect();
    for t in &added {
        *merged.entry(t.name.as_str()).or_default() += i64::from(t.replicas);
    }
    Ok(merged
        .into_iter()
        .map(|(name, r)| target(name, i32::try_from(r).unwrap_or(i32::MAX)))
        .collect())
}
