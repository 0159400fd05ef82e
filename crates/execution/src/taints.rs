//! Taints on Cluster objects, written by the replica that owns the cluster right after its
//! probe (and whenever the cluster's conditions or the ClusterTaintPolicies change), in one
//! write computed from three sources:
//!
//! 1. The readiness taints (Karmada's cluster controller, `taintClusterByCondition` and, before
//!    Karmada v1.14, `processTaintBaseEviction`), from the `Ready` condition execution writes:
//!
//! | `Ready` | `NoSchedule` taint | `NoExecute` taint (automatic, see below) |
//! |---|---|---|
//! | `True` | none | none |
//! | `False` | `cluster.karmada.io/not-ready` | `cluster.karmada.io/not-ready`, once `False` has lasted `--failover-eviction-timeout` |
//! | `Unknown` (or any other value) | `cluster.karmada.io/unreachable` | `cluster.karmada.io/unreachable`, once it has lasted the timeout |
//! | no condition yet | `cluster.karmada.io/not-ready` | none |
//!
//!    "Lasted" counts from the condition's `lastTransitionTime`, so the decision is the same
//!    after a restart. A `NoExecute` readiness taint that is already there stays while the
//!    cluster is not ready, even when the condition moves between `False` and `Unknown`
//!    (Karmada swaps it only once the new state has lasted the timeout too). Each taint added
//!    gets `timeAdded`: the schedulers' `tolerationSeconds` count from it.
//!
//! 2. The ClusterTaintPolicies ([`crate::taint_policies`]), applied after the readiness taints,
//!    so a policy that lists one of those wins.
//!
//! 3. Everything else is the user's and is kept as it is, in place.
//!
//! Who adds `NoExecute` readiness taints ([`NoExecuteMode`]): with `--feature-gates=Failover`
//! (the default) and no valid ClusterTaintPolicy with a `NoExecute` taint, execution does
//! (Karmada v1.13's behaviour, which the product owner asked for). Once such a policy exists,
//! `NoExecute` taints are the policies' business, as in Karmada v1.14+: execution adds none, and
//! only removes its readiness ones from a cluster that is `Ready` again (so none is left behind
//! by the switch). With `Failover=false`, readiness `NoExecute` taints are left to people and
//! the policies are not applied (Karmada runs its policy controller only with the gate).
//!
//! A taint present before and after the write keeps its value, `timeAdded` and place, even if
//! one source removed it and a later one added it again. The write is a merge patch of
//! `spec.taints` with the `resourceVersion` that was read as precondition, so a concurrent user
//! edit makes it fail (409) and be recomputed instead of being overwritten. Clusters being
//! deleted are left alone (Karmada no longer taints them).

use std::time::Duration;

use std::sync::Arc;

use flotilla_api::Cluster;
use flotilla_api::cluster_affinity::{ClusterFacts, cluster_zones};
use flotilla_api::taint_policy::ClusterTaintPolicy;
use flotilla_api::well_known::{
    NOT_READY_TAINT_KEY, TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE, UNREACHABLE_TAINT_KEY,
    conditions::READY, events,
};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::metrics::metrics;
use crate::taint_policies::{self, Changes};

/// Karmada's `--failover-eviction-timeout` default (v1.13 and earlier).
pub const DEFAULT_FAILOVER_EVICTION_TIMEOUT: Duration = Duration::from_secs(300);

/// How execution taints clusters (flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaintOptions {
    /// Add `NoExecute` taints to clusters not ready for `eviction_timeout`
    /// (`--feature-gates=Failover`).
    pub no_execute: bool,
    /// How long `Ready` must be `False`/`Unknown` before the `NoExecute` taint
    /// (`--failover-eviction-timeout`).
    pub eviction_timeout: Duration,
}

impl Default for TaintOptions {
    fn default() -> Self {
        Self {
            no_execute: true,
            eviction_timeout: DEFAULT_FAILOVER_EVICTION_TIMEOUT,
        }
    }
}

/// Who adds and removes the `NoExecute` readiness taints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoExecuteMode {
    /// Added after `--failover-eviction-timeout`, removed when ready (`Failover=true`, no
    /// ClusterTaintPolicy with a `NoExecute` taint).
    Automatic,
    /// Never added; removed when ready (a ClusterTaintPolicy has a `NoExecute` taint).
    Policies,
    /// Neither added nor removed: left to people (`Failover=false`).
    Off,
}

impl NoExecuteMode {
    /// The mode under `options` with the valid `policies`.
    pub fn of(options: &TaintOptions, policies: &[&ClusterTaintPolicy]) -> Self {
        if !options.no_execute {
            NoExecuteMode::Off
        } else if taint_policies::policies_take_no_execute(policies) {
            NoExecuteMode::Policies
        } else {
            NoExecuteMode::Automatic
        }
    }
}

/// The taints a cluster should carry, and when to look again.
#[derive(Clone, Debug, PartialEq)]
pub struct TaintPlan {
    /// The whole `spec.taints` list: the user's taints in place, then the failover taints.
    pub taints: Vec<Taint>,
    /// When the `NoExecute` taint becomes due, from now (the probe must run by then).
    pub due_in: Option<Duration>,
    /// Who last changed each taint that was added or removed (`key`, `effect`).
    pub changes: Changes,
}

fn is_readiness_key(key: &str) -> bool {
    key == NOT_READY_TAINT_KEY || key == UNREACHABLE_TAINT_KEY
}

/// Whether the readiness rule manages `taint` in `mode` (`ready`: `Ready` is `True`).
fn is_managed(taint: &Taint, mode: NoExecuteMode, ready: bool) -> bool {
    is_readiness_key(&taint.key)
        && (taint.effect == TAINT_EFFECT_NO_SCHEDULE
            || (taint.effect == TAINT_EFFECT_NO_EXECUTE
                && match mode {
                    NoExecuteMode::Automatic => true,
                    NoExecuteMode::Policies => ready,
                    NoExecuteMode::Off => false,
                }))
}

/// The readiness taints of a cluster with `current` taints and `ready` condition at `now`.
pub fn plan_readiness_taints(
    current: &[Taint],
    ready: Option<&Condition>,
    now: Timestamp,
    options: &TaintOptions,
    mode: NoExecuteMode,
) -> TaintPlan {
    let mut wanted: Vec<(&'static str, &'static str)> = Vec::new();
    let mut due_in = None;
    let is_ready = ready.is_some_and(|c| c.status == "True");
    let state_key = match ready.map(|c| c.status.as_str()) {
        Some("True") => None,
        Some("False") | None => Some(NOT_READY_TAINT_KEY),
        Some(_) => Some(UNREACHABLE_TAINT_KEY),
    };
    if let Some(key) = state_key {
        wanted.push((key, TAINT_EFFECT_NO_SCHEDULE));
        if mode == NoExecuteMode::Automatic
            && let Some(condition) = ready
        {
            let since = condition.last_transition_time.0;
            let deadline = SignedDuration::try_from(options.eviction_timeout)
                .ok()
                .and_then(|d| since.checked_add(d).ok())
                .unwrap_or(Timestamp::MAX);
            let existing = current
                .iter()
                .find(|t| is_readiness_key(&t.key) && t.effect == TAINT_EFFECT_NO_EXECUTE);
            if deadline <= now {
                wanted.push((key, TAINT_EFFECT_NO_EXECUTE));
            } else {
                if let Some(existing) = existing {
                    // Not ready all along: the taint stays until the new state is due too.
                    wanted.push((
                        if existing.key == NOT_READY_TAINT_KEY {
                            NOT_READY_TAINT_KEY
                        } else {
                            UNREACHABLE_TAINT_KEY
                        },
                        TAINT_EFFECT_NO_EXECUTE,
                    ));
                }
                due_in = Some(Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO));
                if existing.is_some_and(|t| t.key == key) {
                    due_in = None;
                }
            }
        }
    }
    let mut changes = Changes::new();
    let mut taints: Vec<Taint> = Vec::with_capacity(current.len() + wanted.len());
    for taint in current {
        if !is_managed(taint, mode, is_ready)
            || wanted
                .iter()
                .any(|(key, effect)| taint.key == *key && taint.effect == *effect)
        {
            taints.push(taint.clone());
        } else {
            changes.insert((taint.key.clone(), taint.effect.clone()), READINESS.to_owned());
        }
    }
    for (key, effect) in wanted {
        if !taints.iter().any(|t| t.key == key && t.effect == effect) {
            taints.push(Taint {
                key: key.to_owned(),
                value: None,
                effect: effect.to_owned(),
                time_added: Some(Time(now)),
            });
            changes.insert((key.to_owned(), effect.to_owned()), READINESS.to_owned());
        }
    }
    TaintPlan {
        taints,
        due_in,
        changes,
    }
}

/// What a change by the readiness rule is attributed to.
const READINESS: &str = "the Ready condition";

/// The taints `cluster` should carry at `now`: its readiness taints, then the valid
/// `policies` (from [`taint_policies::in_order`]) applied.
pub fn plan_taints(
    cluster: &Cluster,
    policies: &[&ClusterTaintPolicy],
    now: Timestamp,
    options: &TaintOptions,
) -> TaintPlan {
    let current = &cluster.spec.taints;
    let conditions: &[Condition] = cluster.status.as_ref().map_or(&[], |s| s.conditions.as_slice());
    let ready = flotilla_api::conditions::find(conditions, READY);
    let mode = NoExecuteMode::of(options, policies);
    let mut plan = plan_readiness_taints(current, ready, now, options, mode);
    if mode != NoExecuteMode::Off {
        let zones = cluster_zones(cluster);
        let no_labels = std::collections::BTreeMap::new();
        let facts = ClusterFacts {
            name: cluster.metadata.name.as_deref().unwrap_or_default(),
            labels: cluster.metadata.labels.as_ref().unwrap_or(&no_labels),
            provider: cluster.spec.provider.as_deref().filter(|v| !v.is_empty()),
            region: cluster.spec.region.as_deref().filter(|v| !v.is_empty()),
            zones: &zones,
        };
        let taints = std::mem::take(&mut plan.taints);
        plan.taints =
            taint_policies::apply_policies(taints, &facts, conditions, policies, now, &mut plan.changes);
    }
    plan.taints = keep_existing(current, plan.taints);
    plan.changes.retain(|(key, effect), _| {
        let before = current.iter().any(|t| t.key == *key && t.effect == *effect);
        let after = plan.taints.iter().any(|t| t.key == *key && t.effect == *effect);
        before != after
    });
    plan
}

/// `planned`, with every taint that `current` already has (by key and effect) as it is there
/// and in its place; the new ones after them.
fn keep_existing(current: &[Taint], planned: Vec<Taint>) -> Vec<Taint> {
    let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut out: Vec<Taint> = Vec::with_capacity(planned.len());
    for taint in current {
        if planned.iter().any(|p| same(p, taint)) && !out.iter().any(|o| same(o, taint)) {
            out.push(taint.clone());
        }
    }
    for taint in planned {
        if !out.iter().any(|o| same(o, &taint)) {
            out.push(taint);
        }
    }
    out
}

/// `{key:effect}, ...` for events and logs; `none` for an empty list.
fn describe<'a>(taints: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let described: Vec<String> = taints
        .into_iter()
        .map(|(key, effect)| format!("{{{key}:{effect}}}"))
        .collect();
    if described.is_empty() {
        "none".to_owned()
    } else {
        described.join(", ")
    }
}

/// What a write changed, for its event: `added {k:e} (by ...), removed {k:e} (by ...)`.
fn describe_changes(before: &[Taint], changes: &Changes) -> String {
    let mut parts = Vec::new();
    for ((key, effect), source) in changes {
        let verb = if before.iter().any(|t| t.key == *key && t.effect == *effect) {
            "removed"
        } else {
            "added"
        };
        parts.push(format!("{verb} {{{key}:{effect}}} ({source})"));
    }
    parts.join(", ")
}

/// The ClusterTaintPolicies, from the watch cache once it has synced; before that (or while
/// the kind is not served: its CRD is not installed) from a list, where "not found" means none.
/// `None` when they cannot be read: no taint is written then, since without them it is not
/// known who adds `NoExecute` taints.
async fn current_policies(ctx: &Context) -> Option<Vec<Arc<ClusterTaintPolicy>>> {
    if ctx.taint_policies_synced() {
        return Some(ctx.stores.taint_policies.state());
    }
    let api: Api<ClusterTaintPolicy> = Api::all(ctx.client.clone());
    match api.list(&Default::default()).await {
        Ok(list) => Some(list.items.into_iter().map(Arc::new).collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Some(Vec::new()),
        Err(error) => {
            tracing::debug!(%error, "cannot list ClusterTaintPolicies; cluster taints wait");
            None
        }
    }
}

/// Brings `cluster`'s taints in line with its conditions and the ClusterTaintPolicies; returns
/// when they must be looked at again. A write that meets a concurrent change (409) is retried
/// on the cluster as read again.
pub async fn sync_taints(ctx: &Context, cluster: &Cluster) -> Option<Duration> {
    let options = ctx.settings.taints;
    let api: Api<Cluster> = Api::all(ctx.client.clone());
    let name = cluster.name_any();
    let mut cluster = cluster.clone();
    for _ in 0..3 {
        if cluster.metadata.deletion_timestamp.is_some() {
            return None;
        }
        // Read on every attempt: a retry must not apply policies older than the cluster it
        // read again.
        let all_policies = current_policies(ctx).await?;
        let policies = taint_policies::in_order(&all_policies);
        let plan = plan_taints(&cluster, &policies, Timestamp::now(), &options);
        for effect in [TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE] {
            let tainted = plan
                .taints
                .iter()
                .any(|t| is_readiness_key(&t.key) && t.effect == effect);
            metrics().set_failover_taint(&name, effect, tainted);
        }
        if plan.taints == cluster.spec.taints {
            return plan.due_in;
        }
        let patch = json!({
            "metadata": {"resourceVersion": cluster.resource_version()},
            "spec": {"taints": plan.taints},
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                let ready = cluster
                    .status
                    .as_ref()
                    .and_then(|s| flotilla_api::conditions::find(&s.conditions, READY))
                    .map_or("not reported yet", |c| c.status.as_str());
                let changed = describe_changes(&cluster.spec.taints, &plan.changes);
                let now = describe(
                    written
                        .spec
                        .taints
                        .iter()
                        .map(|t| (t.key.as_str(), t.effect.as_str())),
                );
                tracing::info!(cluster = %name, %changed, taints = %now, ready, "wrote cluster taints");
                ctx.event(
                    &written.object_ref(&()),
                    EventType::Normal,
                    events::TAINT_CLUSTER_SUCCEED,
                    "Taint",
                    format!("Taint cluster succeed: {changed}; taints now {now} (Ready is {ready})"),
                )
                .await;
                return plan.due_in;
            }
            Err(kube::Error::Api(status)) if status.code == 409 => match api.get_opt(&name).await {
                Ok(Some(fresh)) => cluster = fresh,
                Ok(None) => return None,
                Err(error) => {
                    tracing::debug!(cluster = %name, %error, "cannot read the Cluster again");
                    return plan.due_in;
                }
            },
            Err(error) => {
                tracing::warn!(cluster = %name, %error, "cannot write the cluster taints; retrying at the next probe");
                if let kube::Error::Api(status) = &error {
                    ctx.event(
                        &cluster.object_ref(&()),
                        EventType::Warning,
                        events::TAINT_CLUSTER_FAILED,
                        "Taint",
                        format!("Taint cluster failed: {}", status.message),
                    )
                    .await;
                }
                return plan.due_in;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use flotilla_api::cluster::{ClusterSpec, ClusterStatus};
    use flotilla_api::taint_policy::{ClusterTaintPolicySpec, MatchCondition, PolicyTaint, TaintEffect};

    fn ts(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn ready(status: &str, since: i64) -> Condition {
        Condition {
            type_: READY.into(),
            status: status.into(),
            reason: "r".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(ts(since)),
        }
    }

    fn taint(key: &str, effect: &str, added: i64) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: Some(Time(ts(added))),
        }
    }

    fn options(timeout: u64) -> TaintOptions {
        TaintOptions {
            no_execute: true,
            eviction_timeout: Duration::from_secs(timeout),
        }
    }

    /// The plan for a cluster with `current` taints and `ready` condition, without policies.
    fn plan_taints(
        current: &[Taint],
        ready: Option<&Condition>,
        now: Timestamp,
        options: &TaintOptions,
    ) -> TaintPlan {
        let cluster = cluster_with(current.to_vec(), ready.into_iter().cloned().collect());
        super::plan_taints(&cluster, &[], now, options)
    }

    fn keys(plan: &TaintPlan) -> Vec<String> {
        plan.taints
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    }

    #[test]
    fn a_ready_cluster_has_no_failover_taints() {
        let user = taint("dedicated", "NoSchedule", 1);
        let current = vec![
            taint(NOT_READY_TAINT_KEY, "NoSchedule", 1),
            user.clone(),
            taint(NOT_READY_TAINT_KEY, "NoExecute", 2),
            taint(UNREACHABLE_TAINT_KEY, "NoSchedule", 2),
        ];
        let plan = plan_taints(&current, Some(&ready("True", 0)), ts(100), &options(60));
        assert_eq!(plan.taints, vec![user], "only the user's taint is left");
        assert_eq!(plan.due_in, None);
    }

    #[test]
    fn not_ready_gets_no_schedule_at_once_and_no_execute_after_the_timeout() {
        let condition = ready("False", 1_000);
        let plan = plan_taints(&[], Some(&condition), ts(1_010), &options(60));
        assert_eq!(keys(&plan), vec!["cluster.karmada.io/not-ready:NoSchedule"]);
        assert_eq!(plan.taints[0].time_added, Some(Time(ts(1_010))));
        assert_eq!(plan.due_in, Some(Duration::from_secs(50)));

        // Written back, then the timeout passes.
        let plan = plan_taints(&plan.taints, Some(&condition), ts(1_060), &options(60));
        assert_eq!(
            keys(&plan),
            vec![
                "cluster.karmada.io/not-ready:NoSchedule",
                "cluster.karmada.io/not-ready:NoExecute"
            ]
        );
        assert_eq!(plan.taints[0].time_added, Some(Time(ts(1_010))), "kept as it was");
        assert_eq!(plan.taints[1].time_added, Some(Time(ts(1_060))), "added now");
        assert_eq!(plan.due_in, None);
        // Stable afterwards.
        let again = plan_taints(&plan.taints, Some(&condition), ts(5_000), &options(60));
        assert_eq!(again.taints, plan.taints);
    }

    #[test]
    fn unknown_is_unreachable() {
        for status in ["Unknown", "Bogus"] {
            let plan = plan_taints(&[], Some(&ready(status, 0)), ts(1_000), &options(60));
            assert_eq!(
                keys(&plan),
                vec![
                    "cluster.karmada.io/unreachable:NoSchedule",
                    "cluster.karmada.io/unreachable:NoExecute"
                ],
                "{status}"
            );
        }
    }

    #[test]
    fn a_cluster_never_probed_is_not_ready_for_scheduling_only() {
        let plan = plan_taints(&[], None, ts(1_000), &options(0));
        assert_eq!(keys(&plan), vec!["cluster.karmada.io/not-ready:NoSchedule"]);
        assert_eq!(plan.due_in, None);
    }

    #[test]
    fn moving_between_false_and_unknown_swaps_the_no_schedule_taint_at_once_and_the_no_execute_one_when_due()
    {
        let current = vec![
            taint(NOT_READY_TAINT_KEY, "NoSchedule", 0),
            taint(NOT_READY_TAINT_KEY, "NoExecute", 60),
        ];
        let condition = ready("Unknown", 100);
        let plan = plan_taints(&current, Some(&condition), ts(110), &options(60));
        assert_eq!(
            keys(&plan),
            vec![
                "cluster.karmada.io/not-ready:NoExecute",
                "cluster.karmada.io/unreachable:NoSchedule"
            ]
        );
        assert_eq!(
            plan.taints[0].time_added,
            Some(Time(ts(60))),
            "the NoExecute taint stays"
        );
        assert_eq!(plan.due_in, Some(Duration::from_secs(50)));
        let plan = plan_taints(&plan.taints, Some(&condition), ts(160), &options(60));
        assert_eq!(
            keys(&plan),
            vec![
                "cluster.karmada.io/unreachable:NoSchedule",
                "cluster.karmada.io/unreachable:NoExecute"
            ]
        );
    }

    #[test]
    fn with_failover_off_no_execute_taints_are_left_to_people() {
        let off = TaintOptions {
            no_execute: false,
            eviction_timeout: Duration::ZERO,
        };
        let manual = taint(NOT_READY_TAINT_KEY, "NoExecute", 5);
        let plan = plan_taints(
            std::slice::from_ref(&manual),
            Some(&ready("False", 0)),
            ts(1_000),
            &off,
        );
        assert_eq!(
            keys(&plan),
            vec![
                "cluster.karmada.io/not-ready:NoExecute",
                "cluster.karmada.io/not-ready:NoSchedule"
            ],
            "the NoSchedule taint is added, the NoExecute one neither added nor removed"
        );
        let plan = plan_taints(
            std::slice::from_ref(&manual),
            Some(&ready("True", 0)),
            ts(1_000),
            &off,
        );
        assert_eq!(plan.taints, vec![manual]);
        assert_eq!(plan.due_in, None);
    }

    #[test]
    fn user_taints_keep_their_place_and_values() {
        let mut user = taint("maintenance", "NoExecute", 7);
        user.value = Some("true".into());
        let soft = taint("zone", "PreferNoSchedule", 8);
        let current = vec![
            user.clone(),
            taint(NOT_READY_TAINT_KEY, "NoSchedule", 1),
            soft.clone(),
        ];
        let plan = plan_taints(&current, Some(&ready("False", 990)), ts(1_000), &options(600));
        assert_eq!(plan.taints[0], user);
        assert_eq!(plan.taints[2], soft);
        assert_eq!(plan.taints.len(), 3);
        let plan = plan_taints(&current, Some(&ready("True", 990)), ts(1_000), &options(600));
        assert_eq!(plan.taints, vec![user, soft]);
    }

    #[test]
    fn described_for_events() {
        assert_eq!(describe([]), "none");
        assert_eq!(
            describe([(NOT_READY_TAINT_KEY, "NoSchedule"), ("x", "NoExecute")]),
            "{cluster.karmada.io/not-ready:NoSchedule}, {x:NoExecute}"
        );
        let before = [taint("gone", "NoExecute", 0)];
        let changes = Changes::from([
            (
                ("gone".to_owned(), "NoExecute".to_owned()),
                "ClusterTaintPolicy p".to_owned(),
            ),
            (
                (NOT_READY_TAINT_KEY.to_owned(), "NoSchedule".to_owned()),
                READINESS.to_owned(),
            ),
        ]);
        assert_eq!(
            describe_changes(&before, &changes),
            "added {cluster.karmada.io/not-ready:NoSchedule} (the Ready condition), removed {gone:NoExecute} (ClusterTaintPolicy p)"
        );
    }

    // -----------------------------------------------------------------------------------------
    // With ClusterTaintPolicies.
    // -----------------------------------------------------------------------------------------

    fn requirement(type_: &str, operator: &str, values: &[&str]) -> MatchCondition {
        MatchCondition {
            condition_type: type_.into(),
            operator: operator.into(),
            status_values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    /// A policy adding `taints` (`key:effect`) when `Ready` is not `True`, removing them when it
    /// is (the shape of Karmada's examples).
    fn policy(name: &str, taints: &[&str]) -> ClusterTaintPolicy {
        let mut policy = ClusterTaintPolicy::new(
            name,
            ClusterTaintPolicySpec {
                target_clusters: None,
                add_on_conditions: vec![requirement(READY, "NotIn", &["True"])],
                remove_on_conditions: vec![requirement(READY, "In", &["True"])],
                taints: taints
                    .iter()
                    .map(|t| {
                        let (key, effect) = t.split_once(':').unwrap();
                        PolicyTaint {
                            key: key.into(),
                            effect: TaintEffect::from(effect),
                            value: String::new(),
                        }
                    })
                    .collect(),
            },
        );
        policy.metadata.creation_timestamp = Some(Time(ts(0)));
        policy
    }

    fn cluster_with(taints: Vec<Taint>, conditions: Vec<Condition>) -> Cluster {
        let mut cluster = Cluster::new("member1", ClusterSpec::default());
        cluster.spec.taints = taints;
        cluster.status = Some(ClusterStatus {
            conditions,
            ..ClusterStatus::default()
        });
        cluster
    }

    fn plan_with(
        cluster: &Cluster,
        policies: &[ClusterTaintPolicy],
        now: i64,
        options: &TaintOptions,
    ) -> TaintPlan {
        let owned: Vec<Arc<ClusterTaintPolicy>> = policies.iter().cloned().map(Arc::new).collect();
        super::plan_taints(cluster, &taint_policies::in_order(&owned), ts(now), options)
    }

    #[test]
    fn a_policy_with_a_no_execute_taint_replaces_the_automatic_no_execute_taints() {
        let karmada = policy(
            "detect-cluster-notready",
            &["not-ready:NoSchedule", "not-ready:NoExecute"],
        );
        let not_ready = cluster_with(vec![], vec![ready("False", 0)]);
        // Long past the eviction timeout: only the policy's NoExecute taint, and the readiness
        // NoSchedule one.
        let plan = plan_with(&not_ready, std::slice::from_ref(&karmada), 1_000, &options(60));
        assert_eq!(
            keys(&plan),
            [
                "cluster.karmada.io/not-ready:NoSchedule",
                "not-ready:NoSchedule",
                "not-ready:NoExecute"
            ]
        );
        assert_eq!(plan.due_in, None, "nothing falls due later");
        assert_eq!(
            plan.changes
                .get(&("not-ready".to_owned(), "NoExecute".to_owned()))
                .map(String::as_str),
            Some("ClusterTaintPolicy detect-cluster-notready")
        );

        // A readiness NoExecute taint from before the policy: kept while not ready, removed once
        // ready (with the policy's).
        let leftover = taint(NOT_READY_TAINT_KEY, "NoExecute", 5);
        let before = cluster_with(vec![leftover.clone()], vec![ready("False", 0)]);
        let plan = plan_with(&before, std::slice::from_ref(&karmada), 1_000, &options(60));
        assert_eq!(plan.taints[0], leftover);
        let back = cluster_with(plan.taints.clone(), vec![ready("True", 900)]);
        let plan = plan_with(&back, std::slice::from_ref(&karmada), 1_001, &options(60));
        assert!(plan.taints.is_empty(), "{:?}", keys(&plan));

        // A policy with NoSchedule taints only leaves the automatic NoExecute taints on.
        let schedule_only = policy("kube-components", &["kube-components-unhealthy:NoSchedule"]);
        let plan = plan_with(&not_ready, &[schedule_only], 1_000, &options(60));
        assert_eq!(
            keys(&plan),
            [
                "cluster.karmada.io/not-ready:NoSchedule",
                "cluster.karmada.io/not-ready:NoExecute",
                "kube-components-unhealthy:NoSchedule"
            ]
        );

        // An invalid policy does not count.
        let mut invalid = karmada.clone();
        invalid.spec.taints[0].key = "bad key".into();
        let plan = plan_with(&not_ready, &[invalid], 1_000, &options(60));
        assert_eq!(
            keys(&plan),
            [
                "cluster.karmada.io/not-ready:NoSchedule",
                "cluster.karmada.io/not-ready:NoExecute"
            ]
        );
    }

    #[test]
    fn karmada_s_blog_example_needs_both_conditions() {
        // Karmada v1.14's announcement: Ready and NetworkAvailable both not True.
        let mut karmada = policy(
            "detect-cluster-notready",
            &["not-ready:NoSchedule", "not-ready:NoExecute"],
        );
        karmada
            .spec
            .add_on_conditions
            .push(requirement("NetworkAvailable", "NotIn", &["True"]));
        karmada
            .spec
            .remove_on_conditions
            .push(requirement("NetworkAvailable", "In", &["True"]));
        let network = |status: &str| Condition {
            type_: "NetworkAvailable".into(),
            ..ready(status, 0)
        };
        let policy_keys = |plan: &TaintPlan| -> Vec<String> {
            keys(plan)
                .into_iter()
                .filter(|k| k.starts_with("not-ready"))
                .collect()
        };
        let only_ready = cluster_with(vec![], vec![ready("False", 0)]);
        let plan = plan_with(&only_ready, std::slice::from_ref(&karmada), 10, &options(60));
        assert!(
            policy_keys(&plan).is_empty(),
            "no NetworkAvailable condition: no match"
        );
        let both = cluster_with(vec![], vec![ready("False", 0), network("False")]);
        let plan = plan_with(&both, std::slice::from_ref(&karmada), 10, &options(60));
        assert_eq!(
            policy_keys(&plan),
            ["not-ready:NoSchedule", "not-ready:NoExecute"]
        );
        // Ready again but the network still down: neither list matches, the taints stay.
        let half = cluster_with(plan.taints.clone(), vec![ready("True", 20), network("False")]);
        let plan = plan_with(&half, std::slice::from_ref(&karmada), 30, &options(60));
        assert_eq!(
            policy_keys(&plan),
            ["not-ready:NoSchedule", "not-ready:NoExecute"]
        );
        let healthy = cluster_with(plan.taints.clone(), vec![ready("True", 20), network("True")]);
        let plan = plan_with(&healthy, std::slice::from_ref(&karmada), 40, &options(60));
        assert!(plan.taints.is_empty());
    }

    #[test]
    fn a_policy_listing_a_readiness_taint_wins_and_keeps_its_time() {
        // Adds cluster.karmada.io/not-ready:NoSchedule on a condition of its own, whatever Ready
        // says: the readiness rule would remove it (Ready is True), the policy adds it back,
        // and the taint written first stays as it was.
        let mut maintenance = policy("maintenance", &["cluster.karmada.io/not-ready:NoSchedule"]);
        maintenance.spec.add_on_conditions = vec![requirement("Maintenance", "In", &["True"])];
        maintenance.spec.remove_on_conditions = vec![requirement("Maintenance", "In", &["False"])];
        let mut conditions = vec![
            ready("True", 0),
            Condition {
                type_: "Maintenance".into(),
                ..ready("True", 0)
            },
        ];
        let first = cluster_with(vec![taint("user", "NoSchedule", 1)], conditions.clone());
        let plan = plan_with(&first, std::slice::from_ref(&maintenance), 10, &options(60));
        assert_eq!(
            keys(&plan),
            ["user:NoSchedule", "cluster.karmada.io/not-ready:NoSchedule"]
        );
        let written = cluster_with(plan.taints.clone(), conditions.clone());
        let again = plan_with(&written, std::slice::from_ref(&maintenance), 500, &options(60));
        assert_eq!(again.taints, plan.taints, "stable: timeAdded is not renewed");
        assert!(again.changes.is_empty());
        // Maintenance over: removed by the policy (and Ready is True anyway).
        conditions[1].status = "False".into();
        let over = cluster_with(plan.taints, conditions);
        let plan = plan_with(&over, std::slice::from_ref(&maintenance), 600, &options(60));
        assert_eq!(keys(&plan), ["user:NoSchedule"]);

        // A policy that removes a readiness taint while the readiness rule adds it: removed,
        // and no write after the first (no flapping).
        let mut remover = policy("quiet", &["cluster.karmada.io/not-ready:NoSchedule"]);
        remover.spec.add_on_conditions = vec![];
        remover.spec.remove_on_conditions = vec![requirement(READY, "In", &["False"])];
        let down = cluster_with(vec![], vec![ready("False", 0)]);
        let plan = plan_with(&down, std::slice::from_ref(&remover), 10, &options(600));
        assert!(plan.taints.is_empty());
        assert!(plan.changes.is_empty(), "nothing changed");
    }

    #[test]
    fn with_failover_off_policies_are_not_applied() {
        let off = TaintOptions {
            no_execute: false,
            eviction_timeout: Duration::ZERO,
        };
        let karmada = policy("p", &["not-ready:NoSchedule"]);
        let down = cluster_with(vec![], vec![ready("False", 0)]);
        let plan = plan_with(&down, &[karmada], 10, &off);
        assert_eq!(keys(&plan), ["cluster.karmada.io/not-ready:NoSchedule"]);
    }

    #[test]
    fn existing_taints_keep_their_place_and_new_ones_follow() {
        let current = vec![
            taint("a", "NoSchedule", 1),
            taint("b", "NoExecute", 2),
            taint("a", "NoSchedule", 3),
        ];
        let planned = vec![
            taint("c", "NoSchedule", 9),
            taint("b", "NoExecute", 9),
            taint("a", "NoSchedule", 9),
        ];
        assert_eq!(
            keep_existing(&current, planned),
            vec![
                taint("a", "NoSchedule", 1),
                taint("b", "NoExecute", 2),
                taint("c", "NoSchedule", 9)
            ],
            "current's entries (once each), then the new one"
        );
    }
}
