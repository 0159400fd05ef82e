//! What the service writes for one binding, decided without I/O: the target clusters
//! (`spec.clusters`), the status fields the scheduler owns, and the JSON merge patches that
//! write them. The service around it only reads objects, calls these functions and sends the
//! patches.
//!
//! Rules (see `docs/architecture.md`, "Scheduling and dispatch"):
//!
//! - An independent binding (empty `spec.requiredBy`) gets [`crate::schedule`]'s result. A
//!   binding without a placement cannot be scheduled (`Unschedulable`).
//! - An attached binding (non-empty `spec.requiredBy`) goes wherever the bindings that require
//!   it go, plus its own result when a policy also claims it ([`crate::union_clusters`]). When
//!   its own scheduling fails, the `requiredBy` clusters still apply.
//! - On failure, `NoClusterFit` empties the result (Karmada writes an empty result, so Works are
//!   removed) and any other reason keeps the previous one. `Scheduled=False` carries the reason
//!   and message either way.
//! - `status.schedulerObservedGeneration` is the generation whose spec the written
//!   `spec.clusters` answers: it is recorded on success and when the result was emptied, not
//!   when the previous result is kept (execution then keeps acting on the old generation, as
//!   Karmada's scheduler postpones it until scheduling succeeds).
//! - A reschedule is requested when `spec.rescheduleTriggeredAt` is later than
//!   `status.lastScheduledTime`; a successful schedule then records `lastScheduledTime`, which
//!   consumes the request.
//! - Nothing is written when nothing changed: [`status_after`] returns `None` then.
//! - Failover ([`crate::failover`]) runs first: clusters evicted now leave the previous result
//!   and get an eviction task, finished tasks are dropped, and scheduling never chooses a
//!   cluster that has a task. `spec.clusters` and `spec.gracefulEvictionTasks` are written
//!   together ([`spec_patch`]).

use flotilla_api::conditions;
use flotilla_api::well_known::{conditions::SCHEDULED, reasons};
use flotilla_api::work::GracefulEvictionTask;
use flotilla_api::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::failover::{Eviction, FailoverContext, FailoverPlan, FinishedTask, plan_failover};
use crate::{ApiKind, ClusterView, ScheduleError, ScheduleInput, ScheduleResult, schedule, union_clusters};

/// The `Scheduled=True` message (Karmada's wording).
pub const SCHEDULED_MESSAGE: &str = "Binding has been scheduled successfully.";

/// The scheduling decision for one binding.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The result, or why there is none. For attached bindings the clusters are the union.
    pub outcome: Result<ScheduleResult, ScheduleError>,
    /// What `spec.clusters` should hold.
    pub clusters: Vec<TargetCluster>,
    /// Whether the written `spec.clusters` answers the binding's current generation (success,
    /// or an emptied result), so `schedulerObservedGeneration` is recorded.
    pub settles: bool,
    /// The pending reschedule request (`spec.rescheduleTriggeredAt`), when one is served.
    pub reschedule: Option<Timestamp>,
    /// What `spec.gracefulEvictionTasks` should hold.
    pub tasks: Vec<GracefulEvictionTask>,
    /// Clusters evicted by this decision.
    pub evicted: Vec<Eviction>,
    /// Eviction tasks this decision ends.
    pub finished: Vec<FinishedTask>,
    /// When a failover deadline (a toleration, a grace period) comes, from now: the binding
    /// must be looked at again by then.
    pub next_check: Option<std::time::Duration>,
}

impl Decision {
    /// Whether `spec.clusters` must be written.
    pub fn changes_clusters(&self, spec: &ResourceBindingSpec) -> bool {
        self.clusters != spec.clusters
    }

    /// Whether the spec must be written: `spec.clusters` or `spec.gracefulEvictionTasks`.
    pub fn changes_spec(&self, spec: &ResourceBindingSpec) -> bool {
        self.changes_clusters(spec) || self.tasks != spec.graceful_eviction_tasks
    }
}

/// `spec.rescheduleTriggeredAt` when it is later than `status.lastScheduledTime` (a binding
/// that was never scheduled counts as requested): a reschedule is pending.
pub fn reschedule_requested(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
) -> Option<Timestamp> {
    let triggered = spec.reschedule_triggered_at.as_ref()?.0;
    match status.and_then(|s| s.last_scheduled_time.as_ref()) {
        Some(last) if triggered <= last.0 => None,
        _ => Some(triggered),
    }
}

/// Decides `spec.clusters` for a binding with `spec` and `status` over `clusters`, without
/// failover decisions (eviction tasks are kept as they are, and their clusters avoided).
pub fn decide(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[ClusterView],
) -> Decision {
    decide_with(spec, status, clusters, None)
}

/// Decides `spec.clusters` and `spec.gracefulEvictionTasks` for a binding with `spec` and
/// `status` over `clusters`; `failover` (when given) evicts clusters and ends tasks first.
pub fn decide_with(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[ClusterView],
    failover: Option<&FailoverContext<'_>>,
) -> Decision {
    let failover = match failover {
        Some(ctx) => plan_failover(spec, status, clusters, ctx),
        None => FailoverPlan {
            clusters: spec.clusters.clone(),
            tasks: spec.graceful_eviction_tasks.clone(),
            ..FailoverPlan::default()
        },
    };
    let evicting: Vec<String> = failover.tasks.iter().map(|t| t.from_cluster.clone()).collect();
    let reschedule = reschedule_requested(spec, status);
    let resource = (!spec.resource.api_version.is_empty() && !spec.resource.kind.is_empty())
        .then(|| ApiKind::new(spec.resource.api_version.clone(), spec.resource.kind.clone()));
    let own = spec.placement.as_ref().map(|placement| {
        schedule(&ScheduleInput {
            placement,
            replicas: spec.replicas,
            previous: &failover.clusters,
            evicting: &evicting,
            observed_affinity: status.and_then(|s| s.scheduler_observed_affinity_name.as_deref()),
            clusters,
            resource: resource.as_ref(),
            resource_uid: spec.resource.uid.as_deref(),
            reschedule: reschedule.is_some(),
        })
    });
    let attached = !spec.required_by.is_empty();
    // The previous result, less the clusters evicted now.
    let previous = &failover.clusters;
    let (outcome, clusters) = match (attached, own) {
        (false, None) => {
            let error = ScheduleError::unschedulable(
                "spec.placement is not set and no binding requires this one (spec.requiredBy is \
                 empty): the detector writes the placement of the policy that claims the resource",
            );
            (Err(error), previous.clone())
        }
        (false, Some(Ok(result))) => {
            let clusters = result.clusters.clone();
            (Ok(result), clusters)
        }
        (false, Some(Err(error))) => {
            let clusters = if error.clears_result() {
                Vec::new()
            } else {
                previous.clone()
            };
            (Err(error), clusters)
        }
        (true, None) => {
            let clusters = union_clusters(&[], &spec.required_by);
            let result = ScheduleResult {
                clusters: clusters.clone(),
                affinity_name: None,
            };
            (Ok(result), clusters)
        }
        (true, Some(Ok(result))) => {
            let clusters = union_clusters(&result.clusters, &spec.required_by);
            let result = ScheduleResult {
                clusters: clusters.clone(),
                affinity_name: result.affinity_name,
            };
            (Ok(result), clusters)
        }
        (true, Some(Err(error))) => {
            let own: &[TargetCluster] = if error.clears_result() { &[] } else { previous };
            (Err(error), union_clusters(own, &spec.required_by))
        }
    };
    let settles = match &outcome {
        Ok(_) => true,
        Err(error) => error.clears_result(),
    };
    Decision {
        outcome,
        clusters,
        settles,
        reschedule,
        tasks: failover.tasks,
        evicted: failover.evicted,
        finished: failover.finished,
        next_check: failover.next_check,
    }
}

/// The status to write after `decision` was applied to a binding now at `generation`, or `None`
/// when the status already says everything. Fields other writers own are kept as they are.
pub fn status_after(
    status: Option<&ResourceBindingStatus>,
    generation: i64,
    decision: &Decision,
    now: Timestamp,
) -> Option<ResourceBindingStatus> {
    let mut next = status.cloned().unwrap_or_default();
    let mut changed = false;
    if decision.settles && next.scheduler_observed_generation != Some(generation) {
        next.scheduler_observed_generation = Some(generation);
        changed = true;
    }
    match &decision.outcome {
        Ok(result) => {
            if next.scheduler_observed_affinity_name != result.affinity_name {
                next.scheduler_observed_affinity_name = result.affinity_name.clone();
                changed = true;
            }
            changed |= conditions::set(
                &mut next.conditions,
                SCHEDULED,
                true,
                reasons::SUCCESS,
                SCHEDULED_MESSAGE,
                Some(generation),
                now,
            );
            if changed || decision.reschedule.is_some() || next.last_scheduled_time.is_none() {
                // Never earlier than the request, so a request stamped by a clock ahead of ours
                // is still consumed.
                let at = decision.reschedule.map_or(now, |requested| requested.max(now));
                next.last_scheduled_time = Some(Time(at));
                changed = true;
            }
        }
        Err(error) => {
            changed |= conditions::set(
                &mut next.conditions,
                SCHEDULED,
                false,
                error.reason.as_str(),
                error.message.clone(),
                Some(generation),
                now,
            );
        }
    }
    changed.then_some(next)
}

/// The JSON merge patch writing `spec.clusters`, conditional on `resource_version` (the API
/// answers 409 Conflict when the binding changed since it was read). An empty result removes
/// the field.
pub fn clusters_patch(resource_version: &str, clusters: &[TargetCluster]) -> Value {
    let clusters = if clusters.is_empty() {
        Value::Null
    } else {
        json!(clusters)
    };
    json!({
        "metadata": {"resourceVersion": resource_version},
        "spec": {"clusters": clusters},
    })
}

/// The JSON merge patch writing the scheduler's spec fields, `spec.clusters` and
/// `spec.gracefulEvictionTasks`, conditional on `resource_version`; empty lists remove the
/// fields.
pub fn spec_patch(
    resource_version: &str,
    clusters: &[TargetCluster],
    tasks: &[GracefulEvictionTask],
) -> Value {
    let mut patch = clusters_patch(resource_version, clusters);
    patch["spec"]["gracefulEvictionTasks"] = if tasks.is_empty() {
        Value::Null
    } else {
        json!(tasks)
    };
    patch
}

/// The JSON merge patch writing the scheduler's status fields of `status` (and the whole
/// condition list, which a merge patch replaces), conditional on `resource_version`.
pub fn status_patch(resource_version: &str, status: &ResourceBindingStatus) -> Value {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "status": {
            "schedulerObservedGeneration": status.scheduler_observed_generation,
            "schedulerObservingAffinityName": status.scheduler_observed_affinity_name,
            "lastScheduledTime": status.last_scheduled_time,
            "conditions": status.conditions,
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use flotilla_api::policy::{
        ClusterAffinity, ClusterAffinityTerm, ReplicaSchedulingStrategy, ReplicaSchedulingType,
    };
    use flotilla_api::{BindingSnapshot, ObjectReference, Placement};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;
    use crate::ScheduleErrorReason;

    fn t(name: &str, replicas: i32) -> TargetCluster {
        TargetCluster {
            name: name.into(),
            replicas,
        }
    }

    fn ts(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn clusters(names: &[&str]) -> Vec<ClusterView> {
        names.iter().map(|n| ClusterView::new(*n)).collect()
    }

    fn affinity(names: &[&str]) -> ClusterAffinity {
        ClusterAffinity {
            cluster_names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    fn duplicated(names: &[&str]) -> Placement {
        Placement {
            cluster_affinity: Some(affinity(names)),
            ..Default::default()
        }
    }

    fn spec(placement: Option<Placement>, replicas: i32) -> ResourceBindingSpec {
        ResourceBindingSpec {
            resource: ObjectReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("default".into()),
                name: "web".into(),
                uid: Some("uid-1".into()),
                resource_version: None,
            },
            replicas,
            placement,
            ..Default::default()
        }
    }

    fn required_by(name: &str, clusters: Vec<TargetCluster>) -> BindingSnapshot {
        BindingSnapshot {
            namespace: Some("default".into()),
            name: name.into(),
            clusters,
        }
    }

    fn scheduled(status: &ResourceBindingStatus) -> &Condition {
        conditions::find(&status.conditions, SCHEDULED).unwrap()
    }

    #[test]
    fn independent_binding_gets_the_algorithms_result() {
        let spec = spec(Some(duplicated(&["m1", "m3"])), 2);
        let decision = decide(&spec, None, &clusters(&["m1", "m2", "m3"]));
        assert_eq!(decision.clusters, vec![t("m1", 2), t("m3", 2)]);
        assert!(decision.settles);
        assert_eq!(decision.reschedule, None);
        assert!(decision.changes_clusters(&spec));
        let result = decision.outcome.unwrap();
        assert_eq!(result.clusters, vec![t("m1", 2), t("m3", 2)]);
        assert_eq!(result.affinity_name, None);
    }

    #[test]
    fn an_unchanged_result_writes_nothing() {
        let mut spec = spec(Some(duplicated(&["m1", "m3"])), 2);
        spec.clusters = vec![t("m1", 2), t("m3", 2)];
        let decision = decide(&spec, None, &clusters(&["m1", "m2", "m3"]));
        assert!(!decision.changes_clusters(&spec));
        let status = status_after(None, 2, &decision, ts(100)).unwrap();
        assert_eq!(status.scheduler_observed_generation, Some(2));
        assert!(status_after(Some(&status), 2, &decision, ts(200)).is_none());
    }

    #[test]
    fn divided_uses_the_documented_split() {
        use flotilla_api::policy::{ClusterPreferences, ReplicaDivisionPreference, StaticClusterWeight};
        let weight = |name: &str, weight: i64| StaticClusterWeight {
            target_cluster: affinity(&[name]),
            weight,
        };
        let placement = Placement {
            replica_scheduling: Some(ReplicaSchedulingStrategy {
                replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
                replica_division_preference: Some(ReplicaDivisionPreference::Weighted),
                weight_preference: Some(ClusterPreferences {
                    static_weight_list: vec![weight("m1", 1), weight("m2", 2)],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        let decision = decide(&spec(Some(placement), 5), None, &clusters(&["m1", "m2"]));
        assert_eq!(decision.clusters, vec![t("m1", 2), t("m2", 3)]);
    }

    #[test]
    fn no_cluster_fit_empties_the_result_and_settles() {
        let mut spec = spec(Some(duplicated(&["gone"])), 1);
        spec.clusters = vec![t("m1", 1)];
        let decision = decide(&spec, None, &clusters(&["m1", "m2"]));
        assert!(decision.clusters.is_empty());
        assert!(decision.settles);
        let error = decision.outcome.clone().unwrap_err();
        assert_eq!(error.reason, ScheduleErrorReason::NoClusterFit);
        assert!(
            error.message.starts_with("0/2 clusters are available"),
            "{}",
            error.message
        );

        let status = status_after(None, 4, &decision, ts(100)).unwrap();
        assert_eq!(status.scheduler_observed_generation, Some(4));
        let condition = scheduled(&status);
        assert_eq!(condition.status, "False");
        assert_eq!(condition.reason, "NoClusterFit");
        assert_eq!(condition.message, error.message);
        assert_eq!(condition.observed_generation, Some(4));
        assert_eq!(
            status.last_scheduled_time, None,
            "failures do not count as scheduled"
        );
        assert!(status_after(Some(&status), 4, &decision, ts(200)).is_none());
    }

    #[test]
    fn unschedulable_keeps_the_previous_result_and_generation() {
        let placement = Placement {
            replica_scheduling: Some(ReplicaSchedulingStrategy {
                replica_scheduling_type: Some(ReplicaSchedulingType::Other("Bogus".into())),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut spec = spec(Some(placement), 3);
        spec.clusters = vec![t("m1", 3)];
        let decision = decide(&spec, None, &clusters(&["m1", "m2"]));
        assert_eq!(decision.clusters, vec![t("m1", 3)]);
        assert!(!decision.changes_clusters(&spec));
        assert!(!decision.settles);
        let previous = ResourceBindingStatus {
            scheduler_observed_generation: Some(1),
            ..Default::default()
        };
        let status = status_after(Some(&previous), 2, &decision, ts(100)).unwrap();
        assert_eq!(status.scheduler_observed_generation, Some(1));
        assert_eq!(scheduled(&status).reason, "Unschedulable");
        assert_eq!(scheduled(&status).status, "False");
    }

    #[test]
    fn missing_placement_is_unschedulable() {
        let mut spec = spec(None, 0);
        spec.clusters = vec![t("m1", 0)];
        let decision = decide(&spec, None, &clusters(&["m1"]));
        let error = decision.outcome.clone().unwrap_err();
        assert_eq!(error.reason, ScheduleErrorReason::Unschedulable);
        assert!(error.message.contains("spec.placement"), "{}", error.message);
        assert_eq!(decision.clusters, vec![t("m1", 0)]);
        assert!(!decision.settles);
    }

    #[test]
    fn attached_binding_follows_required_by() {
        let mut spec = spec(None, 0);
        spec.required_by = vec![
            required_by("web", vec![t("m2", 3), t("m1", 2)]),
            required_by("api", vec![t("m3", 1)]),
        ];
        let decision = decide(&spec, None, &clusters(&["m1", "m2", "m3"]));
        assert_eq!(decision.clusters, vec![t("m1", 0), t("m2", 0), t("m3", 0)]);
        assert!(decision.settles);
        assert!(decision.outcome.is_ok());
    }

    #[test]
    fn attached_binding_with_its_own_placement_gets_the_union() {
        let mut spec = spec(Some(duplicated(&["m4"])), 0);
        spec.required_by = vec![required_by("web", vec![t("m1", 2)])];
        let decision = decide(&spec, None, &clusters(&["m1", "m4"]));
        assert_eq!(decision.clusters, vec![t("m1", 0), t("m4", 0)]);

        // Its own placement fits nothing: the requiredBy clusters still apply.
        let mut spec = spec.clone();
        spec.placement = Some(duplicated(&["gone"]));
        spec.clusters = vec![t("m1", 0), t("m4", 0)];
        let decision = decide(&spec, None, &clusters(&["m1", "m4"]));
        assert_eq!(decision.clusters, vec![t("m1", 0)]);
        assert_eq!(
            decision.outcome.unwrap_err().reason,
            ScheduleErrorReason::NoClusterFit
        );
    }

    #[test]
    fn affinity_groups_fall_back_and_record_the_group() {
        let placement = Placement {
            cluster_affinities: vec![
                ClusterAffinityTerm {
                    affinity_name: "primary".into(),
                    affinity: affinity(&["gone"]),
                    ..Default::default()
                },
                ClusterAffinityTerm {
                    affinity_name: "backup".into(),
                    affinity: affinity(&["m2"]),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let spec = spec(Some(placement), 1);
        let decision = decide(&spec, None, &clusters(&["m1", "m2"]));
        assert_eq!(decision.clusters, vec![t("m2", 1)]);
        let status = status_after(None, 2, &decision, ts(100)).unwrap();
        assert_eq!(status.scheduler_observed_affinity_name.as_deref(), Some("backup"));
    }

    #[test]
    fn observed_affinity_is_where_the_groups_start() {
        let placement = Placement {
            cluster_affinities: vec![
                ClusterAffinityTerm {
                    affinity_name: "primary".into(),
                    affinity: affinity(&["m1"]),
                    ..Default::default()
                },
                ClusterAffinityTerm {
                    affinity_name: "backup".into(),
                    affinity: affinity(&["m2"]),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let mut spec = spec(Some(placement), 1);
        spec.clusters = vec![t("m2", 1)];
        let status = ResourceBindingStatus {
            scheduler_observed_affinity_name: Some("backup".into()),
            last_scheduled_time: Some(Time(ts(100))),
            ..Default::default()
        };
        let decision = decide(&spec, Some(&status), &clusters(&["m1", "m2"]));
        assert_eq!(decision.clusters, vec![t("m2", 1)], "stays on the backup group");

        // A reschedule request starts from the first group again.
        spec.reschedule_triggered_at = Some(Time(ts(150)));
        let decision = decide(&spec, Some(&status), &clusters(&["m1", "m2"]));
        assert_eq!(decision.reschedule, Some(ts(150)));
        assert_eq!(decision.clusters, vec![t("m1", 1)]);
        let next = status_after(Some(&status), 3, &decision, ts(200)).unwrap();
        assert_eq!(next.scheduler_observed_affinity_name.as_deref(), Some("primary"));
        assert_eq!(next.last_scheduled_time, Some(Time(ts(200))));
    }

    #[test]
    fn reschedule_requests_compare_times() {
        let mut spec = spec(Some(duplicated(&["m1"])), 1);
        assert_eq!(reschedule_requested(&spec, None), None);
        spec.reschedule_triggered_at = Some(Time(ts(100)));
        assert_eq!(reschedule_requested(&spec, None), Some(ts(100)));
        let mut status = ResourceBindingStatus::default();
        assert_eq!(reschedule_requested(&spec, Some(&status)), Some(ts(100)));
        status.last_scheduled_time = Some(Time(ts(99)));
        assert_eq!(reschedule_requested(&spec, Some(&status)), Some(ts(100)));
        status.last_scheduled_time = Some(Time(ts(100)));
        assert_eq!(reschedule_requested(&spec, Some(&status)), None);
        status.last_scheduled_time = Some(Time(ts(101)));
        assert_eq!(reschedule_requested(&spec, Some(&status)), None);
    }

    #[test]
    fn a_reschedule_request_is_consumed_even_when_nothing_moves() {
        let mut spec = spec(Some(duplicated(&["m1"])), 1);
        spec.clusters = vec![t("m1", 1)];
        let mut status = status_after(None, 2, &decide(&spec, None, &clusters(&["m1"])), ts(100)).unwrap();
        assert_eq!(status.last_scheduled_time, Some(Time(ts(100))));

        spec.reschedule_triggered_at = Some(Time(ts(150)));
        let decision = decide(&spec, Some(&status), &clusters(&["m1"]));
        assert!(!decision.changes_clusters(&spec));
        status = status_after(Some(&status), 2, &decision, ts(200)).unwrap();
        assert_eq!(status.last_scheduled_time, Some(Time(ts(200))));
        assert_eq!(reschedule_requested(&spec, Some(&status)), None);

        // A request from a clock ahead of ours is consumed too.
        spec.reschedule_triggered_at = Some(Time(ts(500)));
        let decision = decide(&spec, Some(&status), &clusters(&["m1"]));
        status = status_after(Some(&status), 2, &decision, ts(300)).unwrap();
        assert_eq!(status.last_scheduled_time, Some(Time(ts(500))));
        assert_eq!(reschedule_requested(&spec, Some(&status)), None);
    }

    #[test]
    fn other_writers_fields_are_kept() {
        let spec = spec(Some(duplicated(&["m1"])), 1);
        let previous = ResourceBindingStatus {
            conditions: vec![Condition {
                type_: "FullyApplied".into(),
                status: "True".into(),
                reason: "FullyAppliedSuccess".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(ts(1)),
            }],
            ..Default::default()
        };
        let decision = decide(&spec, Some(&previous), &clusters(&["m1"]));
        let status = status_after(Some(&previous), 2, &decision, ts(100)).unwrap();
        assert_eq!(status.conditions.len(), 2);
        assert_eq!(status.conditions[0], previous.conditions[0]);
        assert_eq!(scheduled(&status).status, "True");
        assert_eq!(scheduled(&status).reason, "Success");
        assert_eq!(scheduled(&status).message, SCHEDULED_MESSAGE);
    }

    #[test]
    fn recovery_from_failure_flips_the_condition() {
        let spec_fail = spec(Some(duplicated(&["m2"])), 1);
        let failed = decide(&spec_fail, None, &clusters(&["m1"]));
        let status = status_after(None, 2, &failed, ts(100)).unwrap();
        assert_eq!(scheduled(&status).status, "False");
        let ok = decide(&spec_fail, Some(&status), &clusters(&["m1", "m2"]));
        let status = status_after(Some(&status), 2, &ok, ts(200)).unwrap();
        assert_eq!(scheduled(&status).status, "True");
        assert_eq!(scheduled(&status).last_transition_time, Time(ts(200)));
    }

    #[test]
    fn patches_carry_the_precondition() {
        let patch = clusters_patch("41", &[t("m1", 2)]);
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "41"}, "spec": {"clusters": [{"name": "m1", "replicas": 2}]}})
        );
        let patch = clusters_patch("41", &[]);
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "41"}, "spec": {"clusters": null}})
        );
        let status = ResourceBindingStatus {
            scheduler_observed_generation: Some(3),
            last_scheduled_time: Some(Time(ts(0))),
            ..Default::default()
        };
        let patch = status_patch("42", &status);
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["status"]["schedulerObservedGeneration"], 3);
        assert_eq!(patch["status"]["schedulerObservingAffinityName"], Value::Null);
        assert_eq!(patch["status"]["lastScheduledTime"], "1970-01-01T00:00:00Z");
        assert_eq!(patch["status"]["conditions"], json!([]));
        assert!(
            patch["status"].get("aggregatedStatus").is_none(),
            "execution's field is not touched"
        );
    }

    // ---- failover -------------------------------------------------------------------------

    fn no_execute(cluster: &str) -> ClusterView {
        ClusterView {
            taints: vec![k8s_openapi::api::core::v1::Taint {
                key: flotilla_api::well_known::NOT_READY_TAINT_KEY.into(),
                value: None,
                effect: "NoExecute".into(),
                time_added: Some(Time(ts(0))),
            }],
            ready: false,
            ..ClusterView::new(cluster)
        }
    }

    fn failover(options: &crate::failover::FailoverOptions) -> FailoverContext<'_> {
        FailoverContext {
            options,
            generation: Some(2),
            lazy: false,
            application_producer: "p",
            now: ts(100),
        }
    }

    fn one_of(names: &[&str]) -> Placement {
        Placement {
            spread_constraints: vec![flotilla_api::policy::SpreadConstraint {
                spread_by_field: Some(flotilla_api::policy::SpreadFieldValue::Cluster),
                max_groups: Some(1),
                min_groups: Some(1),
                ..Default::default()
            }],
            ..duplicated(names)
        }
    }

    #[test]
    fn an_evicted_cluster_is_replaced_in_the_same_decision() {
        let options = crate::failover::FailoverOptions::default();
        let mut spec = spec(Some(one_of(&["m1", "m2"])), 2);
        spec.clusters = vec![t("m1", 2)];
        let inventory = vec![no_execute("m1"), ClusterView::new("m2")];
        let decision = decide_with(&spec, None, &inventory, Some(&failover(&options)));
        assert_eq!(decision.clusters, vec![t("m2", 2)]);
        assert_eq!(decision.tasks.len(), 1);
        assert_eq!(decision.tasks[0].from_cluster, "m1");
        assert_eq!(decision.evicted.len(), 1);
        assert!(decision.settles);
        assert!(decision.changes_spec(&spec));
        let patch = spec_patch("7", &decision.clusters, &decision.tasks);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["spec"]["clusters"], json!([{"name": "m2", "replicas": 2}]));
        assert_eq!(patch["spec"]["gracefulEvictionTasks"][0]["fromCluster"], "m1");
        assert_eq!(
            patch["spec"]["gracefulEvictionTasks"][0]["purgeMode"],
            "Gracefully"
        );
        assert_eq!(
            patch["spec"]["gracefulEvictionTasks"][0]["producer"],
            "TaintManager"
        );

        // Written back: the next decision changes nothing, even once m1 is healthy again, as
        // long as its task lasts.
        spec.clusters = decision.clusters.clone();
        spec.graceful_eviction_tasks = decision.tasks.clone();
        for m1 in [no_execute("m1"), ClusterView::new("m1")] {
            let inventory = vec![m1, ClusterView::new("m2")];
            let again = decide_with(&spec, None, &inventory, Some(&failover(&options)));
            assert!(!again.changes_spec(&spec), "{again:?}");
        }
        // Without failover (decide), tasks are kept and their clusters still avoided.
        let plain = decide(&spec, None, &[ClusterView::new("m1"), ClusterView::new("m2")]);
        assert!(!plain.changes_spec(&spec));
        let empty = spec_patch("7", &[], &[]);
        assert_eq!(
            empty["spec"],
            json!({"clusters": null, "gracefulEvictionTasks": null})
        );
    }

    #[test]
    fn divided_replicas_move_to_the_remaining_clusters() {
        let options = crate::failover::FailoverOptions::default();
        let placement = Placement {
            replica_scheduling: Some(ReplicaSchedulingStrategy {
                replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
                ..Default::default()
            }),
            ..duplicated(&["m1", "m2"])
        };
        let mut spec = spec(Some(placement), 3);
        spec.clusters = vec![t("m1", 2), t("m2", 1)];
        let inventory = vec![no_execute("m1"), ClusterView::new("m2")];
        let decision = decide_with(&spec, None, &inventory, Some(&failover(&options)));
        assert_eq!(decision.clusters, vec![t("m2", 3)]);
        assert_eq!(decision.tasks[0].replicas, Some(2));
    }

    #[test]
    fn an_evicted_cluster_is_never_chosen_while_its_task_lasts() {
        let options = crate::failover::FailoverOptions::default();
        let mut spec = spec(Some(duplicated(&["m1"])), 1);
        spec.clusters = vec![t("m1", 1)];
        let inventory = vec![no_execute("m1")];
        let decision = decide_with(&spec, None, &inventory, Some(&failover(&options)));
        // Nothing else fits: the result is emptied, the task kept (the old copy stays).
        assert!(decision.clusters.is_empty());
        assert_eq!(decision.tasks.len(), 1);
        let error = decision.outcome.unwrap_err();
        assert_eq!(error.reason, ScheduleErrorReason::NoClusterFit);
        assert_eq!(
            error.message,
            "0/1 clusters are available: 1 cluster(s) is in the process of eviction."
        );
    }

    #[test]
    fn lazy_bindings_stay_but_gone_clusters_still_leave() {
        let options = crate::failover::FailoverOptions::default();
        let mut spec = spec(Some(duplicated(&["m1", "m2"])), 1);
        spec.clusters = vec![t("m1", 1), t("m2", 1)];
        let lazy = FailoverContext {
            lazy: true,
            ..failover(&options)
        };
        let inventory = vec![no_execute("m1"), ClusterView::new("m2")];
        let decision = decide_with(&spec, None, &inventory, Some(&lazy));
        assert_eq!(
            decision.clusters, spec.clusters,
            "a failed cluster keeps its placement"
        );
        assert!(decision.tasks.is_empty());
        // m1 deleted (or being deleted): it is gone from the result, Lazy or not.
        let deleting = ClusterView {
            deleting: true,
            ..no_execute("m1")
        };
        for inventory in [
            vec![ClusterView::new("m2")],
            vec![deleting, ClusterView::new("m2")],
        ] {
            let decision = decide_with(&spec, None, &inventory, Some(&lazy));
            assert_eq!(decision.clusters, vec![t("m2", 1)]);
            assert!(
                decision.tasks.is_empty(),
                "leaving a gone cluster is not an eviction"
            );
        }
    }
}
