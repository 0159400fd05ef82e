//! The scheduling entry point: filter, select and divide for one binding, trying the
//! `clusterAffinities` groups in Karmada's order (`pkg/scheduler/scheduler.go`,
//! `scheduleResourceBindingWithClusterAffinities`).

use std::collections::BTreeSet;

use flotilla_api::policy::ClusterAffinity;
use flotilla_api::{Placement, TargetCluster};

use crate::cluster::{ApiKind, ClusterView};
use crate::division::{DivideContext, divide};
use crate::error::ScheduleError;
use crate::filter::{FilterContext, filter};
use crate::placement::{Candidate, LOCALITY_SCORE, SelectContext, rank, select};
use crate::strategy::{Strategy, is_duplicated, spread_ignored, spread_plan, strategy};
use crate::webster::TieBreak;

/// Everything one scheduling decision depends on. Plain data: the caller reads it from the
/// binding (`spec.placement`, `spec.replicas`, `spec.clusters`, `spec.resource`,
/// `status.schedulerObservingAffinityName`) and the Cluster objects.
#[derive(Clone, Copy, Debug)]
pub struct ScheduleInput<'a> {
    /// The binding's placement.
    pub placement: &'a Placement,
    /// The binding's replicas; 0 for kinds without replicas. Negative is an error.
    pub replicas: i32,
    /// The previous result (`spec.clusters`); empty on the first schedule.
    pub previous: &'a [TargetCluster],
    /// Clusters the binding is being evicted from (`spec.gracefulEvictionTasks`): never chosen.
    pub evicting: &'a [String],
    /// The `clusterAffinities` group the previous result used
    /// (`status.schedulerObservingAffinityName`).
    pub observed_affinity: Option<&'a str>,
    /// The registered member clusters.
    pub clusters: &'a [ClusterView],
    /// The resource's kind, to skip clusters that do not serve it; `None` skips that check.
    pub resource: Option<&'a ApiKind>,
    /// The resource's UID (`spec.resource.uid`): picks the tie-break between equally weighted
    /// clusters, as Karmada does, so single-replica workloads spread over clusters.
    pub resource_uid: Option<&'a str>,
    /// A reschedule was requested (`spec.rescheduleTriggeredAt` later than
    /// `status.lastScheduledTime`): start again from the first `clusterAffinities` group and
    /// divide dynamic replicas anew instead of adjusting the previous result.
    pub reschedule: bool,
}

impl<'a> ScheduleInput<'a> {
    /// A first schedule of `replicas` over `clusters`: no previous result, no observed affinity,
    /// no resource kind or UID, no reschedule request.
    pub fn new(placement: &'a Placement, replicas: i32, clusters: &'a [ClusterView]) -> Self {
        Self {
            placement,
            replicas,
            previous: &[],
            evicting: &[],
            observed_affinity: None,
            clusters,
            resource: None,
            resource_uid: None,
            reschedule: false,
        }
    }
}

/// A scheduling decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleResult {
    /// Target clusters and their replicas, sorted by name (`spec.clusters`).
    pub clusters: Vec<TargetCluster>,
    /// The `clusterAffinities` group used (`status.schedulerObservingAffinityName`); `None`
    /// when the placement has no `clusterAffinities`.
    pub affinity_name: Option<String>,
}

/// Decides the target clusters and replicas of one binding.
///
/// Deterministic: equal inputs give equal results, and the order of `clusters` does not
/// matter. A name that appears twice in `clusters` or `previous` counts once, with its first
/// occurrence; negative previous replicas count as 0.
///
/// With `clusterAffinities`, groups are tried from the observed one (the first when there is
/// none, it is unknown, or a reschedule was requested) onwards; the first that schedules wins.
/// Earlier groups are not retried even when they would fit again (Karmada). When every group
/// fails, the error is the first group's, and the observed affinity should stay as it was.
///
/// `clusterAffinity` takes precedence over `clusterAffinities` should a placement set both
/// (validation rejects that).
pub fn schedule(input: &ScheduleInput<'_>) -> Result<ScheduleResult, ScheduleError> {
    if input.replicas < 0 {
        return Err(ScheduleError::unschedulable(format!(
            "spec.replicas is {}: a binding's replica count must not be negative",
            input.replicas
        )));
    }
    let binding = Binding::new(input)?;
    let placement = input.placement;
    if placement.cluster_affinity.is_some() || placement.cluster_affinities.is_empty() {
        let clusters = binding.schedule_with(placement.cluster_affinity.as_ref())?;
        return Ok(ScheduleResult {
            clusters,
            affinity_name: None,
        });
    }

    let terms = &placement.cluster_affinities;
    let start = if input.reschedule {
        0
    } else {
        input
            .observed_affinity
            .and_then(|name| terms.iter().position(|t| t.affinity_name == name))
            .unwrap_or(0)
    };
    let mut first_error = None;
    for term in &terms[start..] {
        match binding.schedule_with(Some(&term.affinity)) {
            Ok(clusters) => {
                return Ok(ScheduleResult {
                    clusters,
                    affinity_name: Some(term.affinity_name.clone()),
                });
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| ScheduleError::unschedulable("placement.clusterAffinities has no usable group")))
}

/// The input, normalised once for every affinity group tried.
struct Binding<'a> {
    input: &'a ScheduleInput<'a>,
    clusters: Vec<&'a ClusterView>,
    previous: Vec<TargetCluster>,
    spread: crate::strategy::SpreadPlan,
    strategy: Strategy<'a>,
}

impl<'a> Binding<'a> {
    fn new(input: &'a ScheduleInput<'a>) -> Result<Self, ScheduleError> {
        let mut seen = BTreeSet::new();
        let mut clusters: Vec<&ClusterView> = input
            .clusters
            .iter()
            .filter(|c| seen.insert(c.name.as_str()))
            .collect();
        // Input order must not matter: Karmada's cache lists clusters in no particular order.
        clusters.sort_by(|a, b| a.name.cmp(&b.name));
        let mut seen = BTreeSet::new();
        let previous = input
            .previous
            .iter()
            .filter(|t| seen.insert(t.name.as_str()))
            .map(|t| TargetCluster {
                name: t.name.clone(),
                replicas: t.replicas.max(0),
            })
            .collect();
        // Karmada only consults the strategy for workloads; kinds without replicas never fail on it.
        let strategy = if input.replicas > 0 {
            strategy(input.placement)?
        } else {
            Strategy::Duplicated
        };
        Ok(Self {
            input,
            clusters,
            previous,
            spread: spread_plan(input.placement)?,
            strategy,
        })
    }

    fn previous_replicas(&self, name: &str) -> Option<i32> {
        self.previous.iter().find(|t| t.name == name).map(|t| t.replicas)
    }

    fn schedule_with(&self, affinity: Option<&ClusterAffinity>) -> Result<Vec<TargetCluster>, ScheduleError> {
        let input = self.input;
        let previous_names: BTreeSet<&str> = self.previous.iter().map(|t| t.name.as_str()).collect();
        let fit = filter(
            &self.clusters,
            &FilterContext {
                affinity,
                tolerations: &input.placement.cluster_tolerations,
                spread: &self.spread,
                previous: &previous_names,
                evicting: input.evicting,
                resource: input.resource,
            },
        )?;

        // Without capacity information a cluster can take every replica; for kinds without
        // replicas Karmada uses the int32 maximum.
        let allocatable = if input.replicas == 0 {
            i64::from(i32::MAX)
        } else {
            i64::from(input.replicas)
        };
        let mut candidates: Vec<Candidate<'_>> = fit
            .into_iter()
            .map(|cluster| {
                let held = self.previous_replicas(&cluster.name);
                Candidate {
                    cluster,
                    score: if held.is_some() { LOCALITY_SCORE } else { 0 },
                    allocatable,
                    available: allocatable + i64::from(held.unwrap_or(0)),
                }
            })
            .collect();
        rank(&mut candidates);

        let selected = select(
            candidates,
            &SelectContext {
                spread: &self.spread,
                spread_ignored: spread_ignored(input.placement),
                duplicated: is_duplicated(input.placement),
                replicas: input.replicas,
            },
        )?;
        let mut result = divide(
            &selected,
            &DivideContext {
                strategy: self.strategy,
                replicas: input.replicas,
                previous: &self.previous,
                fresh: input.reschedule,
                tie: TieBreak::from_uid(input.resource_uid),
            },
        )?;
        result.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(result)
    }
}
