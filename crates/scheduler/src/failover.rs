//! Failover decisions for one binding, without I/O: which target clusters the binding is
//! evicted from, and which of its eviction tasks (`spec.gracefulEvictionTasks`) are finished.
//! The scheduler is the only writer of `spec.clusters` and `spec.gracefulEvictionTasks`, so
//! an eviction and the reschedule that replaces it are one write.
//!
//! Karmada splits this between three controllers; the rules are theirs:
//!
//! - **Cluster failover** (`pkg/controllers/cluster/taint_manager.go`): a target cluster with a
//!   `NoExecute` taint that `placement.clusterTolerations` does not tolerate is evicted at once;
//!   one that is tolerated with `tolerationSeconds` is evicted when the earliest
//!   `taint.timeAdded + tolerationSeconds` has passed; a toleration without `tolerationSeconds`
//!   tolerates forever. Purge mode: `failover.cluster.purgeMode` (default `Gracefully`), or the
//!   scheduler's `--no-execute-taint-eviction-purge-mode` when the policy has no
//!   `failover.cluster`. Switched off by `--feature-gates=Failover=false`.
//! - **Application failover** (`pkg/controllers/applicationfailover`): a target cluster whose
//!   copy has been `Unhealthy` (binding `status.aggregatedStatus`) for longer than
//!   `failover.application.decisionConditions.tolerationSeconds` (default 300) is evicted,
//!   reason `ApplicationFailure`, with the policy's `purgeMode` (default `Gracefully`) and
//!   `gracePeriodSeconds` (default 600). Karmada keeps "unhealthy since" in memory, so a
//!   restart starts the count again; flotilla reads it from
//!   `aggregatedStatus[].lastHealthTransitionTime`, which execution records.
//! - **Graceful eviction** (`pkg/controllers/gracefuleviction/evictiontask.go`): a task with
//!   `suppressDeletion: true` stays until someone sets it to `false` (then it ends at once);
//!   any other task ends when its grace period (`gracePeriodSeconds`, else
//!   `--graceful-eviction-timeout`) has passed since `creationTimestamp`, or earlier when the
//!   binding's new placement is healthy.
//!
//! Where flotilla differs:
//!
//! - "The new placement is healthy" needs the binding scheduled at its generation, execution's
//!   `FullyApplied=True` at that generation, and every target `applied` and `Healthy`; and at
//!   least one target. Karmada checks health alone, so a result emptied by `NoClusterFit` counts
//!   as healthy there and drops the old copy at once; here the old copy then waits for the
//!   grace period.
//! - Purge mode `Never` is accepted for cluster failover too (Karmada's current CRD allows it
//!   for application failover only): the task gets `suppressDeletion: true`, as application
//!   failover does.
//! - Bindings of a Lazy policy (`flotilla.io/activation-preference: Lazy`) are never evicted:
//!   they keep their placement until the template changes. A cluster that is gone (its Cluster
//!   object deleted or being deleted) still leaves the placement, through scheduling itself
//!   (`docs/failover.md`).
//! - Attached bindings (non-empty `spec.requiredBy`) are not evicted themselves: they follow
//!   the bindings that require them.
//! - Tasks carry `creationTimestamp` from the start (Karmada's graceful eviction controller
//!   stamps it in a second write); a task someone else wrote without it is stamped now.

use std::collections::BTreeSet;
use std::time::Duration;

use flotilla_api::conditions;
use flotilla_api::policy::PurgeMode;
use flotilla_api::well_known::{
    EVICTION_PRODUCER_TAINT_MANAGER, EVICTION_REASON_APPLICATION_FAILURE, EVICTION_REASON_TAINT_UNTOLERATED,
    TAINT_EFFECT_NO_EXECUTE, conditions::FULLY_APPLIED,
};
use flotilla_api::work::{GracefulEvictionTask, ResourceHealth};
use flotilla_api::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::ClusterView;
use crate::filter::{taint_to_string, tolerates};

/// Karmada's `--graceful-eviction-timeout` default.
pub const DEFAULT_GRACEFUL_EVICTION_TIMEOUT: Duration = Duration::from_secs(600);

/// The scheduler's failover settings (flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverOptions {
    /// Evict bindings from clusters with untolerated `NoExecute` taints
    /// (`--feature-gates=Failover`).
    pub taint_eviction: bool,
    /// Purge mode of cluster failover for policies without `failover.cluster`
    /// (`--no-execute-taint-eviction-purge-mode`): `Gracefully` or `Directly`.
    pub default_purge_mode: PurgeMode,
    /// Grace period of tasks without `gracePeriodSeconds` (`--graceful-eviction-timeout`).
    pub graceful_eviction_timeout: Duration,
}

impl Default for FailoverOptions {
    fn default() -> Self {
        Self {
            taint_eviction: true,
            default_purge_mode: PurgeMode::Gracefully,
            graceful_eviction_timeout: DEFAULT_GRACEFUL_EVICTION_TIMEOUT,
        }
    }
}

/// What failover needs to know about a binding besides its spec and status.
#[derive(Clone, Copy, Debug)]
pub struct FailoverContext<'a> {
    /// The settings.
    pub options: &'a FailoverOptions,
    /// The binding's `metadata.generation`.
    pub generation: Option<i64>,
    /// Whether the binding's policy is Lazy (never evicted).
    pub lazy: bool,
    /// `producer` of application failover tasks (Karmada names it by binding kind).
    pub application_producer: &'a str,
    /// The time decisions are made at.
    pub now: Timestamp,
}

/// Why a cluster was evicted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// The cluster.
    pub cluster: String,
    /// `TaintUntolerated` or `ApplicationFailure`.
    pub reason: &'static str,
    /// For people: the taint or the unhealthy time.
    pub message: String,
    /// The purge mode of its task.
    pub purge_mode: PurgeMode,
}

/// Why an eviction task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEnd {
    /// The new placement is healthy.
    Healthy,
    /// The grace period ran out.
    TimedOut,
    /// Someone set `suppressDeletion: false`.
    Confirmed,
}

impl TaskEnd {
    /// A metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskEnd::Healthy => "healthy",
            TaskEnd::TimedOut => "timeout",
            TaskEnd::Confirmed => "confirmed",
        }
    }
}

/// A task that ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedTask {
    /// The task's cluster.
    pub cluster: String,
    /// Its purge mode.
    pub purge_mode: PurgeMode,
    /// Why it ended.
    pub end: TaskEnd,
}

/// The failover part of a binding's decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailoverPlan {
    /// `spec.clusters` without the clusters evicted now (the previous result scheduling starts
    /// from).
    pub clusters: Vec<TargetCluster>,
    /// `spec.gracefulEvictionTasks` after this decision.
    pub tasks: Vec<GracefulEvictionTask>,
    /// Clusters evicted now.
    pub evicted: Vec<Eviction>,
    /// Tasks that ended now.
    pub finished: Vec<FinishedTask>,
    /// When something will be due (a toleration or grace period running out), from now.
    pub next_check: Option<Duration>,
}

/// What the `NoExecute` taints of one cluster mean for a placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaintVerdict {
    /// No `NoExecute` taint, or every one tolerated without a time limit.
    Stay,
    /// Evict now; the message says why.
    Evict(String),
    /// Tolerated until this time.
    StayUntil(Timestamp),
}

/// Karmada's taint manager decision for one cluster: `taints` are the cluster's, `tolerations`
/// the placement's.
///
/// Each `NoExecute` taint must be tolerated (the first toleration that matches it counts, as in
/// Karmada's `GetMatchingTolerations`); the tolerations used with `tolerationSeconds` then set
/// the deadline `taint.timeAdded + tolerationSeconds` for every taint they tolerate, and the
/// earliest deadline wins. A taint without `timeAdded` sets no deadline (Karmada skips it too:
/// flotilla's own taints always carry it; set it when tainting by hand).
pub fn taint_verdict(taints: &[Taint], tolerations: &[Toleration], now: Timestamp) -> TaintVerdict {
    let no_execute: Vec<&Taint> = taints
        .iter()
        .filter(|t| t.effect == TAINT_EFFECT_NO_EXECUTE)
        .collect();
    if no_execute.is_empty() {
        return TaintVerdict::Stay;
    }
    let mut used: Vec<&Toleration> = Vec::new();
    for taint in &no_execute {
        match tolerations.iter().find(|tol| tolerates(tol, taint)) {
            Some(toleration) => used.push(toleration),
            None => {
                return TaintVerdict::Evict(format!(
                    "taint {{{}}} is not tolerated by spec.placement.clusterTolerations",
                    taint_to_string(taint)
                ));
            }
        }
    }
    let mut earliest: Option<(Timestamp, &Taint, i64)> = None;
    for toleration in used {
        let Some(seconds) = toleration.toleration_seconds else {
            continue;
        };
        for taint in no_execute.iter().filter(|t| tolerates(toleration, t)) {
            let Some(added) = &taint.time_added else {
                continue;
            };
            let deadline = added
                .0
                .checked_add(SignedDuration::from_secs(seconds))
                .unwrap_or(added.0);
            if earliest.is_none_or(|(at, _, _)| deadline < at) {
                earliest = Some((deadline, taint, seconds));
            }
        }
    }
    match earliest {
        None => TaintVerdict::Stay,
        Some((deadline, taint, seconds)) if deadline <= now => TaintVerdict::Evict(format!(
            "taint {{{}}} was tolerated for {seconds}s (tolerationSeconds), until {deadline}",
            taint_to_string(taint)
        )),
        Some((deadline, _, _)) => TaintVerdict::StayUntil(deadline),
    }
}

/// Whether the binding's placement (`spec.clusters`) is healthy enough for graceful eviction
/// tasks to end: scheduled at `generation`, `FullyApplied=True` at that generation, at least
/// one target, and every target applied and `Healthy` in `status.aggregatedStatus`.
pub fn placement_healthy(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    generation: Option<i64>,
) -> bool {
    let Some(status) = status else { return false };
    if spec.clusters.is_empty() || generation.is_none() || status.scheduler_observed_generation != generation
    {
        return false;
    }
    let applied = conditions::find(&status.conditions, FULLY_APPLIED)
        .is_some_and(|c| c.status == "True" && c.observed_generation == generation);
    applied
        && spec.clusters.iter().all(|target| {
            status
                .aggregated_status
                .iter()
                .find(|item| item.cluster_name == target.name)
                .is_some_and(|item| item.applied && item.health == Some(ResourceHealth::Healthy))
        })
}

/// The grace period of `task`.
fn grace_period(task: &GracefulEvictionTask, options: &FailoverOptions) -> Duration {
    task.grace_period_seconds
        .map_or(options.graceful_eviction_timeout, |s| {
            Duration::from_secs(u64::try_from(s).unwrap_or(0))
        })
}

fn after(from: Timestamp, duration: Duration) -> Timestamp {
    SignedDuration::try_from(duration)
        .ok()
        .and_then(|d| from.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

fn until(now: Timestamp, deadline: Timestamp) -> Duration {
    Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO)
}

/// Keeps the earliest of the due times.
fn sooner(next: &mut Option<Duration>, candidate: Duration) {
    if next.is_none_or(|current| candidate < current) {
        *next = Some(candidate);
    }
}

/// The failover plan for a binding with `spec` and `status` over `clusters` (the inventory).
pub fn plan_failover(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[ClusterView],
    ctx: &FailoverContext<'_>,
) -> FailoverPlan {
    let now = ctx.now;
    let mut plan = FailoverPlan {
        clusters: spec.clusters.clone(),
        ..FailoverPlan::default()
    };

    // Graceful eviction: end the tasks whose time has come.
    let healthy = placement_healthy(spec, status, ctx.generation);
    for task in &spec.graceful_eviction_tasks {
        let mut task = task.clone();
        let end = match task.suppress_deletion {
            Some(true) => None,
            Some(false) => Some(TaskEnd::Confirmed),
            None => match &task.creation_timestamp {
                None => {
                    task.creation_timestamp = Some(Time(now));
                    sooner(&mut plan.next_check, grace_period(&task, ctx.options));
                    None
                }
                Some(created) => {
                    let deadline = after(created.0, grace_period(&task, ctx.options));
                    if deadline <= now {
                        Some(TaskEnd::TimedOut)
                    } else if healthy {
                        Some(TaskEnd::Healthy)
                    } else {
                        sooner(&mut plan.next_check, until(now, deadline));
                        None
                    }
                }
            },
        };
        match end {
            Some(end) => plan.finished.push(FinishedTask {
                cluster: task.from_cluster.clone(),
                purge_mode: task.purge_mode(),
                end,
            }),
            None => plan.tasks.push(task),
        }
    }

    let evictable = spec.placement.is_some() && spec.required_by.is_empty() && !ctx.lazy;
    if !evictable {
        return plan;
    }

    // Cluster failover: untolerated NoExecute taints.
    if ctx.options.taint_eviction {
        let tolerations = spec
            .placement
            .as_ref()
            .map(|p| p.cluster_tolerations.as_slice())
            .unwrap_or_default();
        let purge_mode = spec
            .failover
            .as_ref()
            .and_then(|f| f.cluster.as_ref())
            .map_or_else(
                || ctx.options.default_purge_mode.canonical(),
                |c| {
                    c.purge_mode
                        .as_ref()
                        .map_or(PurgeMode::Gracefully, PurgeMode::canonical)
                },
            );
        for target in &spec.clusters {
            let Some(cluster) = clusters.iter().find(|c| c.name == target.name) else {
                continue;
            };
            match taint_verdict(&cluster.taints, tolerations, now) {
                TaintVerdict::Stay => {}
                TaintVerdict::StayUntil(deadline) => sooner(&mut plan.next_check, until(now, deadline)),
                TaintVerdict::Evict(why) => plan.evicted.push(Eviction {
                    cluster: target.name.clone(),
                    reason: EVICTION_REASON_TAINT_UNTOLERATED,
                    message: format!("cluster {}: {why}", target.name),
                    purge_mode: purge_mode.clone(),
                }),
            }
        }
    }

    // Application failover: unhealthy for longer than tolerationSeconds.
    if let Some(application) = spec.failover.as_ref().and_then(|f| f.application.as_ref()) {
        let tolerated = application.toleration_seconds();
        for item in status.map(|s| s.aggregated_status.as_slice()).unwrap_or_default() {
            let targeted = spec.clusters.iter().any(|t| t.name == item.cluster_name);
            let evicting = plan.evicted.iter().any(|e| e.cluster == item.cluster_name);
            if !targeted || evicting || item.health != Some(ResourceHealth::Unhealthy) {
                continue;
            }
            // Execution records the time with the health; until it has, there is nothing to count from.
            let Some(since) = &item.last_health_transition_time else {
                continue;
            };
            let deadline = since
                .0
                .checked_add(SignedDuration::from_secs(tolerated))
                .unwrap_or(since.0);
            if deadline <= now {
                plan.evicted.push(Eviction {
                    cluster: item.cluster_name.clone(),
                    reason: EVICTION_REASON_APPLICATION_FAILURE,
                    message: format!(
                        "the application has been Unhealthy in cluster {} since {}, longer than \
                         failover.application.decisionConditions.tolerationSeconds ({tolerated}s)",
                        item.cluster_name, since.0
                    ),
                    purge_mode: application.purge_mode(),
                });
            } else {
                sooner(&mut plan.next_check, until(now, deadline));
            }
        }
    }

    // Evict: the cluster leaves the result and gets a task (Karmada's GracefulEvictCluster).
    let application = spec.failover.as_ref().and_then(|f| f.application.as_ref());
    let tasked: BTreeSet<String> = plan.tasks.iter().map(|t| t.from_cluster.clone()).collect();
    for eviction in &plan.evicted {
        let Some(index) = plan.clusters.iter().position(|t| t.name == eviction.cluster) else {
            continue;
        };
        let target = plan.clusters.remove(index);
        if tasked.contains(&eviction.cluster) {
            continue;
        }
        let from_application = eviction.reason == EVICTION_REASON_APPLICATION_FAILURE;
        let grace_period_seconds = if from_application {
            application.and_then(|a| a.grace_period_seconds())
        } else {
            None
        };
        plan.tasks.push(GracefulEvictionTask {
            from_cluster: eviction.cluster.clone(),
            purge_mode: Some(eviction.purge_mode.clone()),
            replicas: (target.replicas > 0).then_some(target.replicas),
            reason: eviction.reason.to_owned(),
            message: eviction.message.clone(),
            producer: if from_application {
                ctx.application_producer.to_owned()
            } else {
                EVICTION_PRODUCER_TAINT_MANAGER.to_owned()
            },
            grace_period_seconds,
            suppress_deletion: (eviction.purge_mode == PurgeMode::Never).then_some(true),
            preserved_label_state: Default::default(),
            creation_timestamp: Some(Time(now)),
            clusters_before_failover: Vec::new(),
        });
        if eviction.purge_mode != PurgeMode::Never {
            let task = plan.tasks.last().map(|t| grace_period(t, ctx.options));
            if let Some(period) = task {
                sooner(&mut plan.next_check, period);
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use flotilla_api::policy::{
        ApplicationFailoverBehavior, ClusterAffinity, ClusterFailoverBehavior, DecisionConditions,
        FailoverBehavior,
    };
    use flotilla_api::well_known::{EVICTION_PRODUCER_RB_APPLICATION_FAILOVER, NOT_READY_TAINT_KEY};
    use flotilla_api::work::AggregatedStatusItem;
    use flotilla_api::{BindingSnapshot, Placement};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    fn ts(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn taint(key: &str, effect: &str, added: Option<i64>) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: added.map(|s| Time(ts(s))),
        }
    }

    fn tol(key: Option<&str>, effect: Option<&str>, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: key.map(str::to_owned),
            operator: Some("Exists".into()),
            value: None,
            effect: effect.map(str::to_owned),
            toleration_seconds: seconds,
        }
    }

    fn t(name: &str, replicas: i32) -> TargetCluster {
        TargetCluster {
            name: name.into(),
            replicas,
        }
    }

    fn tainted(name: &str, taints: Vec<Taint>) -> ClusterView {
        ClusterView {
            taints,
            ..ClusterView::new(name)
        }
    }

    fn spec(clusters: Vec<TargetCluster>) -> ResourceBindingSpec {
        ResourceBindingSpec {
            replicas: 2,
            placement: Some(Placement {
                cluster_affinity: Some(ClusterAffinity {
                    cluster_names: vec!["m1".into(), "m2".into(), "m3".into()],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            clusters,
            ..Default::default()
        }
    }

    fn ctx(options: &FailoverOptions, now: i64) -> FailoverContext<'_> {
        FailoverContext {
            options,
            generation: Some(3),
            lazy: false,
            application_producer: EVICTION_PRODUCER_RB_APPLICATION_FAILOVER,
            now: ts(now),
        }
    }

    fn not_ready(added: i64) -> Taint {
        taint(NOT_READY_TAINT_KEY, "NoExecute", Some(added))
    }

    // ---- taint_verdict ------------------------------------------------------------------

    #[test]
    fn no_execute_taints_decide_eviction() {
        let now = ts(1_000);
        // Nothing, or only NoSchedule / PreferNoSchedule: stay.
        assert_eq!(taint_verdict(&[], &[], now), TaintVerdict::Stay);
        let soft = [
            taint("a", "NoSchedule", Some(0)),
            taint("b", "PreferNoSchedule", Some(0)),
        ];
        assert_eq!(taint_verdict(&soft, &[], now), TaintVerdict::Stay);
        // Untolerated NoExecute: evict, naming the taint.
        match taint_verdict(&[not_ready(900)], &[], now) {
            TaintVerdict::Evict(why) => assert_eq!(
                why,
                "taint {cluster.karmada.io/not-ready:NoExecute} is not tolerated by spec.placement.clusterTolerations"
            ),
            other => panic!("{other:?}"),
        }
        // A NoSchedule toleration does not tolerate NoExecute.
        let no_schedule_only = [tol(Some(NOT_READY_TAINT_KEY), Some("NoSchedule"), None)];
        assert!(matches!(
            taint_verdict(&[not_ready(900)], &no_schedule_only, now),
            TaintVerdict::Evict(_)
        ));
        // Tolerated without tolerationSeconds: forever.
        let forever = [tol(Some(NOT_READY_TAINT_KEY), Some("NoExecute"), None)];
        assert_eq!(taint_verdict(&[not_ready(0)], &forever, now), TaintVerdict::Stay);
        // Every NoExecute taint must be tolerated.
        let two = [not_ready(900), taint("maintenance", "NoExecute", Some(900))];
        assert!(
            matches!(taint_verdict(&two, &forever, now), TaintVerdict::Evict(w) if w.contains("maintenance"))
        );
        let everything = [tol(None, None, None)];
        assert_eq!(taint_verdict(&two, &everything, now), TaintVerdict::Stay);
    }

    #[test]
    fn toleration_seconds_count_from_the_taints_time() {
        let timed = [tol(Some(NOT_READY_TAINT_KEY), Some("NoExecute"), Some(60))];
        // Added at 900, tolerated 60 s: until 960.
        assert_eq!(
            taint_verdict(&[not_ready(900)], &timed, ts(959)),
            TaintVerdict::StayUntil(ts(960))
        );
        match taint_verdict(&[not_ready(900)], &timed, ts(960)) {
            TaintVerdict::Evict(why) => assert!(
                why.contains("was tolerated for 60s (tolerationSeconds), until"),
                "{why}"
            ),
            other => panic!("at the deadline: {other:?}"),
        }
        assert!(matches!(
            taint_verdict(&[not_ready(900)], &timed, ts(2_000)),
            TaintVerdict::Evict(_)
        ));
        // Zero or negative seconds: evict at once.
        let zero = [tol(Some(NOT_READY_TAINT_KEY), None, Some(0))];
        assert!(matches!(
            taint_verdict(&[not_ready(900)], &zero, ts(900)),
            TaintVerdict::Evict(_)
        ));
        let negative = [tol(Some(NOT_READY_TAINT_KEY), None, Some(-5))];
        assert!(matches!(
            taint_verdict(&[not_ready(900)], &negative, ts(900)),
            TaintVerdict::Evict(_)
        ));
        // A taint without timeAdded sets no deadline (Karmada).
        let undated = [taint(NOT_READY_TAINT_KEY, "NoExecute", None)];
        assert_eq!(taint_verdict(&undated, &timed, ts(10_000)), TaintVerdict::Stay);
    }

    #[test]
    fn the_earliest_deadline_wins_and_first_matching_tolerations_count() {
        let taints = [not_ready(900), taint("maintenance", "NoExecute", Some(950))];
        let tolerations = [
            tol(Some(NOT_READY_TAINT_KEY), None, Some(300)),
            tol(Some("maintenance"), None, Some(20)),
        ];
        // not-ready until 1200, maintenance until 970.
        assert_eq!(
            taint_verdict(&taints, &tolerations, ts(960)),
            TaintVerdict::StayUntil(ts(970))
        );
        // A catch-all toleration listed first is the one used for both taints (Karmada takes
        // the first match), and it has no limit: the later timed toleration is never used.
        let catch_all_first = [tol(None, None, None), tol(Some("maintenance"), None, Some(20))];
        assert_eq!(
            taint_verdict(&taints, &catch_all_first, ts(5_000)),
            TaintVerdict::Stay
        );
        // A timed catch-all bounds every taint it tolerates.
        let timed_all = [tol(None, Some("NoExecute"), Some(100))];
        assert_eq!(
            taint_verdict(&taints, &timed_all, ts(960)),
            TaintVerdict::StayUntil(ts(1_000))
        );
    }

    // ---- placement_healthy ----------------------------------------------------------------

    fn item(cluster: &str, applied: bool, health: Option<ResourceHealth>) -> AggregatedStatusItem {
        AggregatedStatusItem {
            cluster_name: cluster.into(),
            applied,
            health,
            ..Default::default()
        }
    }

    fn fully_applied(status: bool, generation: i64) -> Condition {
        Condition {
            type_: FULLY_APPLIED.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: "r".into(),
            message: String::new(),
            observed_generation: Some(generation),
            last_transition_time: Time(ts(0)),
        }
    }

    fn healthy_status(clusters: &[&str], generation: i64) -> ResourceBindingStatus {
        ResourceBindingStatus {
            scheduler_observed_generation: Some(generation),
            conditions: vec![fully_applied(true, generation)],
            aggregated_status: clusters
                .iter()
                .map(|c| item(c, true, Some(ResourceHealth::Healthy)))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_placement_is_healthy_only_when_everything_says_so() {
        let spec = spec(vec![t("m2", 1), t("m3", 1)]);
        let good = healthy_status(&["m2", "m3"], 3);
        assert!(placement_healthy(&spec, Some(&good), Some(3)));
        assert!(!placement_healthy(&spec, None, Some(3)), "no status");
        assert!(
            !placement_healthy(&spec, Some(&good), Some(4)),
            "not scheduled at this generation"
        );
        assert!(!placement_healthy(&spec, Some(&good), None));
        let mut stale = good.clone();
        stale.conditions = vec![fully_applied(true, 2)];
        assert!(
            !placement_healthy(&spec, Some(&stale), Some(3)),
            "FullyApplied of an older generation"
        );
        let mut failed = good.clone();
        failed.conditions = vec![fully_applied(false, 3)];
        assert!(!placement_healthy(&spec, Some(&failed), Some(3)));
        let mut missing = good.clone();
        missing.aggregated_status.pop();
        assert!(
            !placement_healthy(&spec, Some(&missing), Some(3)),
            "a target without status"
        );
        for (applied, health) in [
            (true, Some(ResourceHealth::Unhealthy)),
            (true, Some(ResourceHealth::Unknown)),
            (true, None),
            (false, Some(ResourceHealth::Healthy)),
        ] {
            let mut bad = good.clone();
            bad.aggregated_status[1] = item("m3", applied, health.clone());
            assert!(
                !placement_healthy(&spec, Some(&bad), Some(3)),
                "{applied} {health:?}"
            );
        }
        // No target at all (NoClusterFit) is not a healthy placement.
        let empty = self::spec(vec![]);
        assert!(!placement_healthy(&empty, Some(&healthy_status(&[], 3)), Some(3)));
    }

    // ---- cluster failover -----------------------------------------------------------------

    #[test]
    fn an_untolerated_no_execute_taint_evicts_with_a_task() {
        let options = FailoverOptions::default();
        let spec = spec(vec![t("m1", 2), t("m2", 0)]);
        let clusters = [tainted("m1", vec![not_ready(900)]), ClusterView::new("m2")];
        let plan = plan_failover(&spec, None, &clusters, &ctx(&options, 1_000));
        assert_eq!(plan.clusters, vec![t("m2", 0)]);
        assert_eq!(plan.evicted.len(), 1);
        assert_eq!(plan.evicted[0].cluster, "m1");
        assert_eq!(plan.evicted[0].reason, "TaintUntolerated");
        assert_eq!(
            plan.tasks,
            vec![GracefulEvictionTask {
                from_cluster: "m1".into(),
                purge_mode: Some(PurgeMode::Gracefully),
                replicas: Some(2),
                reason: "TaintUntolerated".into(),
                message: "cluster m1: taint {cluster.karmada.io/not-ready:NoExecute} is not tolerated by \
                          spec.placement.clusterTolerations"
                    .into(),
                producer: "TaintManager".into(),
                grace_period_seconds: None,
                suppress_deletion: None,
                preserved_label_state: Default::default(),
                creation_timestamp: Some(Time(ts(1_000))),
                clusters_before_failover: vec![],
            }]
        );
        // The task's grace period is the next thing due.
        assert_eq!(plan.next_check, Some(DEFAULT_GRACEFUL_EVICTION_TIMEOUT));

        // A cluster with no replicas records none.
        let spec2 = self::spec(vec![t("m1", 0)]);
        let plan = plan_failover(&spec2, None, &clusters, &ctx(&options, 1_000));
        assert_eq!(plan.tasks[0].replicas, None);
    }

    #[test]
    fn purge_modes_of_cluster_failover() {
        let clusters = [tainted("m1", vec![not_ready(900)])];
        let with_cluster_failover = |mode: Option<&str>| {
            let mut spec = spec(vec![t("m1", 1)]);
            spec.failover = Some(FailoverBehavior {
                cluster: Some(ClusterFailoverBehavior {
                    purge_mode: mode.map(PurgeMode::from),
                    state_preservation: None,
                }),
                application: None,
            });
            spec
        };
        let options = FailoverOptions::default();
        for (written, expected, suppress) in [
            (None, PurgeMode::Gracefully, None),
            (Some("Gracefully"), PurgeMode::Gracefully, None),
            (Some("Graciously"), PurgeMode::Gracefully, None),
            (Some("Directly"), PurgeMode::Directly, None),
            (Some("Immediately"), PurgeMode::Directly, None),
            (Some("Never"), PurgeMode::Never, Some(true)),
        ] {
            let plan = plan_failover(
                &with_cluster_failover(written),
                None,
                &clusters,
                &ctx(&options, 1_000),
            );
            assert_eq!(plan.tasks[0].purge_mode, Some(expected.clone()), "{written:?}");
            assert_eq!(plan.tasks[0].suppress_deletion, suppress, "{written:?}");
        }
        // Without failover.cluster the flag decides.
        let directly = FailoverOptions {
            default_purge_mode: PurgeMode::Directly,
            ..FailoverOptions::default()
        };
        let plan = plan_failover(&spec(vec![t("m1", 1)]), None, &clusters, &ctx(&directly, 1_000));
        assert_eq!(plan.tasks[0].purge_mode, Some(PurgeMode::Directly));
        // A Never task has no deadline.
        let plan = plan_failover(
            &with_cluster_failover(Some("Never")),
            None,
            &clusters,
            &ctx(&options, 1_000),
        );
        assert_eq!(plan.next_check, None);
    }

    #[test]
    fn what_is_not_evicted() {
        let options = FailoverOptions::default();
        let clusters = [tainted("m1", vec![not_ready(900)])];
        let spec = spec(vec![t("m1", 1)]);

        let off = FailoverOptions {
            taint_eviction: false,
            ..FailoverOptions::default()
        };
        let plan = plan_failover(&spec, None, &clusters, &ctx(&off, 1_000));
        assert!(
            plan.evicted.is_empty() && plan.tasks.is_empty(),
            "Failover gate off"
        );
        assert_eq!(plan.clusters, spec.clusters);

        let lazy = FailoverContext {
            lazy: true,
            ..ctx(&options, 1_000)
        };
        assert!(
            plan_failover(&spec, None, &clusters, &lazy).evicted.is_empty(),
            "Lazy"
        );

        let mut attached = spec.clone();
        attached.required_by = vec![BindingSnapshot {
            namespace: Some("default".into()),
            name: "web".into(),
            clusters: vec![t("m1", 1)],
        }];
        assert!(
            plan_failover(&attached, None, &clusters, &ctx(&options, 1_000))
                .evicted
                .is_empty()
        );

        let mut unplaced = spec.clone();
        unplaced.placement = None;
        assert!(
            plan_failover(&unplaced, None, &clusters, &ctx(&options, 1_000))
                .evicted
                .is_empty()
        );

        // A cluster gone from the inventory is scheduling's business, not failover's.
        assert!(
            plan_failover(&spec, None, &[], &ctx(&options, 1_000))
                .evicted
                .is_empty()
        );

        // A tolerated taint with time left: not yet, but looked at again at the deadline.
        let mut tolerant = spec.clone();
        tolerant.placement.as_mut().unwrap().cluster_tolerations =
            vec![tol(Some(NOT_READY_TAINT_KEY), Some("NoExecute"), Some(300))];
        let plan = plan_failover(&tolerant, None, &clusters, &ctx(&options, 1_000));
        assert!(plan.evicted.is_empty());
        assert_eq!(plan.next_check, Some(Duration::from_secs(200)));
        let plan = plan_failover(&tolerant, None, &clusters, &ctx(&options, 1_200));
        assert_eq!(plan.evicted.len(), 1, "evicted at the deadline");
    }

    // ---- application failover -------------------------------------------------------------

    fn with_application(
        purge: Option<&str>,
        grace: Option<i32>,
        toleration: Option<i32>,
    ) -> ResourceBindingSpec {
        let mut spec = spec(vec![t("m1", 1), t("m2", 1)]);
        spec.propagate_deps = true;
        spec.failover = Some(FailoverBehavior {
            application: Some(ApplicationFailoverBehavior {
                decision_conditions: DecisionConditions {
                    toleration_seconds: toleration,
                },
                purge_mode: purge.map(PurgeMode::from),
                grace_period_seconds: grace,
                state_preservation: None,
            }),
            cluster: None,
        });
        spec
    }

    fn unhealthy_since(cluster: &str, since: i64) -> AggregatedStatusItem {
        AggregatedStatusItem {
            last_health_transition_time: Some(Time(ts(since))),
            ..item(cluster, true, Some(ResourceHealth::Unhealthy))
        }
    }

    fn status_with(items: Vec<AggregatedStatusItem>) -> ResourceBindingStatus {
        ResourceBindingStatus {
            scheduler_observed_generation: Some(3),
            aggregated_status: items,
            ..Default::default()
        }
    }

    #[test]
    fn an_application_unhealthy_past_its_toleration_is_evicted() {
        let options = FailoverOptions::default();
        let spec = with_application(None, None, Some(120));
        let clusters = [ClusterView::new("m1"), ClusterView::new("m2")];
        let status = status_with(vec![
            unhealthy_since("m1", 1_000),
            item("m2", true, Some(ResourceHealth::Healthy)),
        ]);
        // Within the toleration: due at 1120.
        let plan = plan_failover(&spec, Some(&status), &clusters, &ctx(&options, 1_100));
        assert!(plan.evicted.is_empty());
        assert_eq!(plan.next_check, Some(Duration::from_secs(20)));
        // Past it: evicted, Gracefully with the default 600 s grace period.
        let plan = plan_failover(&spec, Some(&status), &clusters, &ctx(&options, 1_120));
        assert_eq!(plan.clusters, vec![t("m2", 1)]);
        let task = &plan.tasks[0];
        assert_eq!(task.from_cluster, "m1");
        assert_eq!(task.reason, "ApplicationFailure");
        assert_eq!(task.producer, "resource-binding-application-failover-controller");
        assert_eq!(task.purge_mode, Some(PurgeMode::Gracefully));
        assert_eq!(task.grace_period_seconds, Some(600));
        assert_eq!(task.suppress_deletion, None);
        assert!(
            task.message.contains("tolerationSeconds (120s)"),
            "{}",
            task.message
        );
        assert_eq!(plan.next_check, Some(Duration::from_secs(600)));

        // The default toleration is 300 s.
        let default = with_application(None, None, None);
        assert!(
            plan_failover(&default, Some(&status), &clusters, &ctx(&options, 1_299))
                .evicted
                .is_empty()
        );
        assert_eq!(
            plan_failover(&default, Some(&status), &clusters, &ctx(&options, 1_300))
                .evicted
                .len(),
            1
        );
    }

    #[test]
    fn application_failover_purge_modes() {
        let options = FailoverOptions::default();
        let clusters = [ClusterView::new("m1"), ClusterView::new("m2")];
        let status = status_with(vec![unhealthy_since("m1", 0)]);
        for (purge, grace, mode, grace_written, suppress) in [
            (
                Some("Graciously"),
                Some(30),
                PurgeMode::Gracefully,
                Some(30),
                None,
            ),
            (Some("Immediately"), None, PurgeMode::Directly, None, None),
            (Some("Directly"), None, PurgeMode::Directly, None, None),
            (Some("Never"), None, PurgeMode::Never, None, Some(true)),
        ] {
            let spec = with_application(purge, grace, Some(0));
            let plan = plan_failover(&spec, Some(&status), &clusters, &ctx(&options, 10));
            let task = &plan.tasks[0];
            assert_eq!(task.purge_mode, Some(mode), "{purge:?}");
            assert_eq!(task.grace_period_seconds, grace_written, "{purge:?}");
            assert_eq!(task.suppress_deletion, suppress, "{purge:?}");
        }
        // ClusterResourceBindings name their own producer.
        let crb = FailoverContext {
            application_producer: flotilla_api::well_known::EVICTION_PRODUCER_CRB_APPLICATION_FAILOVER,
            ..ctx(&options, 10)
        };
        let plan = plan_failover(
            &with_application(None, None, Some(0)),
            Some(&status),
            &clusters,
            &crb,
        );
        assert_eq!(
            plan.tasks[0].producer,
            "cluster-resource-binding-application-failover-controller"
        );
    }

    #[test]
    fn what_application_failover_leaves_alone() {
        let options = FailoverOptions::default();
        let clusters = [ClusterView::new("m1"), ClusterView::new("m2")];
        let spec = with_application(None, None, Some(0));
        let cases = [
            ("healthy", item("m1", true, Some(ResourceHealth::Healthy))),
            ("unknown health", item("m1", true, Some(ResourceHealth::Unknown))),
            ("no health", item("m1", true, None)),
            (
                "unhealthy without a recorded time",
                item("m1", true, Some(ResourceHealth::Unhealthy)),
            ),
            ("not a target", unhealthy_since("m9", 0)),
        ];
        for (what, item) in cases {
            let status = status_with(vec![item]);
            let plan = plan_failover(&spec, Some(&status), &clusters, &ctx(&options, 1_000));
            assert!(plan.evicted.is_empty(), "{what}");
        }
        // No failover.application: nothing.
        let mut plain = spec.clone();
        plain.failover = None;
        let status = status_with(vec![unhealthy_since("m1", 0)]);
        assert!(
            plan_failover(&plain, Some(&status), &clusters, &ctx(&options, 1_000))
                .evicted
                .is_empty()
        );
        // Lazy: nothing.
        let lazy = FailoverContext {
            lazy: true,
            ..ctx(&options, 1_000)
        };
        assert!(
            plan_failover(&spec, Some(&status), &clusters, &lazy)
                .evicted
                .is_empty()
        );
    }

    #[test]
    fn a_tainted_and_unhealthy_cluster_is_evicted_once() {
        let options = FailoverOptions::default();
        let spec = with_application(None, None, Some(0));
        let clusters = [tainted("m1", vec![not_ready(0)]), ClusterView::new("m2")];
        let status = status_with(vec![unhealthy_since("m1", 0)]);
        let plan = plan_failover(&spec, Some(&status), &clusters, &ctx(&options, 1_000));
        assert_eq!(plan.evicted.len(), 1);
        assert_eq!(plan.evicted[0].reason, "TaintUntolerated");
        assert_eq!(plan.tasks.len(), 1);
    }

    // ---- eviction task lifecycle ----------------------------------------------------------

    fn task(cluster: &str, created: Option<i64>) -> GracefulEvictionTask {
        GracefulEvictionTask {
            from_cluster: cluster.into(),
            purge_mode: Some(PurgeMode::Gracefully),
            reason: "TaintUntolerated".into(),
            producer: "TaintManager".into(),
            creation_timestamp: created.map(|s| Time(ts(s))),
            ..Default::default()
        }
    }

    #[test]
    fn tasks_end_when_healthy_timed_out_or_confirmed() {
        let options = FailoverOptions {
            graceful_eviction_timeout: Duration::from_secs(100),
            ..FailoverOptions::default()
        };
        let mut spec = spec(vec![t("m2", 2)]);
        spec.graceful_eviction_tasks = vec![task("m1", Some(1_000))];
        let unhealthy = status_with(vec![item("m2", true, Some(ResourceHealth::Unhealthy))]);
        let healthy = healthy_status(&["m2"], 3);

        // Waiting for health: kept, due at the timeout.
        let plan = plan_failover(&spec, Some(&unhealthy), &[], &ctx(&options, 1_040));
        assert_eq!(plan.tasks, spec.graceful_eviction_tasks);
        assert!(plan.finished.is_empty());
        assert_eq!(plan.next_check, Some(Duration::from_secs(60)));
        // Healthy: ends.
        let plan = plan_failover(&spec, Some(&healthy), &[], &ctx(&options, 1_040));
        assert!(plan.tasks.is_empty());
        assert_eq!(plan.finished[0].end, TaskEnd::Healthy);
        assert_eq!(plan.finished[0].cluster, "m1");
        // Timed out: ends, healthy or not.
        let plan = plan_failover(&spec, Some(&unhealthy), &[], &ctx(&options, 1_100));
        assert_eq!(plan.finished[0].end, TaskEnd::TimedOut);
        // The task's own grace period wins over the flag.
        let mut own = spec.clone();
        own.graceful_eviction_tasks[0].grace_period_seconds = Some(10);
        let plan = plan_failover(&own, Some(&unhealthy), &[], &ctx(&options, 1_010));
        assert_eq!(plan.finished[0].end, TaskEnd::TimedOut);
        let plan = plan_failover(&own, Some(&unhealthy), &[], &ctx(&options, 1_005));
        assert_eq!(plan.next_check, Some(Duration::from_secs(5)));
    }

    #[test]
    fn suppressed_tasks_wait_for_a_person() {
        let options = FailoverOptions::default();
        let mut spec = spec(vec![t("m2", 2)]);
        let mut never = task("m1", Some(0));
        never.purge_mode = Some(PurgeMode::Never);
        never.suppress_deletion = Some(true);
        spec.graceful_eviction_tasks = vec![never.clone()];
        let healthy = healthy_status(&["m2"], 3);
        // Neither health nor time ends it.
        let plan = plan_failover(&spec, Some(&healthy), &[], &ctx(&options, 1_000_000));
        assert_eq!(plan.tasks, vec![never.clone()]);
        assert_eq!(plan.next_check, None);
        // suppressDeletion: false ends it at once.
        never.suppress_deletion = Some(false);
        spec.graceful_eviction_tasks = vec![never];
        let plan = plan_failover(&spec, None, &[], &ctx(&options, 1));
        assert!(plan.tasks.is_empty());
        assert_eq!(plan.finished[0].end, TaskEnd::Confirmed);
        assert_eq!(plan.finished[0].purge_mode, PurgeMode::Never);
    }

    #[test]
    fn a_task_without_a_creation_time_is_stamped() {
        let options = FailoverOptions::default();
        let mut spec = spec(vec![t("m2", 2)]);
        spec.graceful_eviction_tasks = vec![task("m1", None)];
        let plan = plan_failover(&spec, Some(&healthy_status(&["m2"], 3)), &[], &ctx(&options, 500));
        assert_eq!(plan.tasks[0].creation_timestamp, Some(Time(ts(500))));
        assert!(plan.finished.is_empty(), "a task is first stamped, then assessed");
        assert_eq!(plan.next_check, Some(DEFAULT_GRACEFUL_EVICTION_TIMEOUT));
    }

    #[test]
    fn plans_are_idempotent() {
        // Evict, write the result, plan again: nothing new.
        let options = FailoverOptions::default();
        let clusters = [tainted("m1", vec![not_ready(900)]), ClusterView::new("m2")];
        let mut spec = spec(vec![t("m1", 1), t("m2", 1)]);
        let first = plan_failover(&spec, None, &clusters, &ctx(&options, 1_000));
        spec.clusters = first.clusters.clone();
        spec.graceful_eviction_tasks = first.tasks.clone();
        let second = plan_failover(&spec, None, &clusters, &ctx(&options, 1_001));
        assert!(second.evicted.is_empty());
        assert!(second.finished.is_empty());
        assert_eq!(second.tasks, first.tasks);
        assert_eq!(second.clusters, first.clusters);
        // An existing task for a cluster that is somehow targeted again is not duplicated.
        spec.clusters.push(t("m1", 1));
        let third = plan_failover(&spec, None, &clusters, &ctx(&options, 1_002));
        assert_eq!(third.tasks.len(), 1);
        assert_eq!(third.clusters, vec![t("m2", 1)]);
    }
}
