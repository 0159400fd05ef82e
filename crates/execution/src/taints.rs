//! Failover taints on Cluster objects (Karmada's cluster controller, `taintClusterByCondition`
//! and, before Karmada v1.14, `processTaintBaseEviction`): computed from the `Ready` condition
//! execution writes, and written by the replica that owns the cluster right after its probe.
//!
//! | `Ready` | `NoSchedule` taint | `NoExecute` taint (`--feature-gates=Failover=true`) |
//! |---|---|---|
//! | `True` | none | none |
//! | `False` | `cluster.karmada.io/not-ready` | `cluster.karmada.io/not-ready`, once `False` has lasted `--failover-eviction-timeout` |
//! | `Unknown` (or any other value) | `cluster.karmada.io/unreachable` | `cluster.karmada.io/unreachable`, once it has lasted the timeout |
//! | no condition yet | `cluster.karmada.io/not-ready` | none |
//!
//! "Lasted" counts from the condition's `lastTransitionTime`, so the decision is the same after
//! a restart. A `NoExecute` readiness taint that is already there stays while the cluster is
//! not ready, even when the condition moves between `False` and `Unknown` (Karmada swaps it
//! only once the new state has lasted the timeout too). Each taint added gets `timeAdded`: the
//! schedulers' `tolerationSeconds` count from it.
//!
//! Ownership: execution writes only taints with these two keys (with `Failover=false`, only
//! their `NoSchedule` entries: `NoExecute` ones are then left to people, as in Karmada v1.14+).
//! Every other taint is the user's and is kept as it is, in place; the write is a merge patch of
//! `spec.taints` with the `resourceVersion` that was read as precondition, so a concurrent user
//! edit makes it fail (409) and be recomputed instead of being overwritten. Clusters being
//! deleted are left alone (Karmada no longer taints them).

use std::time::Duration;

use flotilla_api::Cluster;
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

/// The taints a cluster should carry, and when to look again.
#[derive(Clone, Debug, PartialEq)]
pub struct TaintPlan {
    /// The whole `spec.taints` list: the user's taints in place, then the failover taints.
    pub taints: Vec<Taint>,
    /// When the `NoExecute` taint becomes due, from now (the probe must run by then).
    pub due_in: Option<Duration>,
}

fn is_readiness_key(key: &str) -> bool {
    key == NOT_READY_TAINT_KEY || key == UNREACHABLE_TAINT_KEY
}

/// Whether execution manages `taint` under `options`.
fn is_managed(taint: &Taint, options: &TaintOptions) -> bool {
    is_readiness_key(&taint.key)
        && (taint.effect == TAINT_EFFECT_NO_SCHEDULE
            || (options.no_execute && taint.effect == TAINT_EFFECT_NO_EXECUTE))
}

/// The taints of a cluster with `current` taints and `ready` condition at `now`.
pub fn plan_taints(
    current: &[Taint],
    ready: Option<&Condition>,
    now: Timestamp,
    options: &TaintOptions,
) -> TaintPlan {
    let mut wanted: Vec<(&'static str, &'static str)> = Vec::new();
    let mut due_in = None;
    let state_key = match ready.map(|c| c.status.as_str()) {
        Some("True") => None,
        Some("False") | None => Some(NOT_READY_TAINT_KEY),
        Some(_) => Some(UNREACHABLE_TAINT_KEY),
    };
    if let Some(key) = state_key {
        wanted.push((key, TAINT_EFFECT_NO_SCHEDULE));
        if options.no_execute
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
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| {
            !is_managed(t, options)
                || wanted
                    .iter()
                    .any(|(key, effect)| t.key == *key && t.effect == *effect)
        })
        .cloned()
        .collect();
    for (key, effect) in wanted {
        if !taints.iter().any(|t| t.key == key && t.effect == effect) {
            taints.push(Taint {
                key: key.to_owned(),
                value: None,
                effect: effect.to_owned(),
                time_added: Some(Time(now)),
            });
        }
    }
    TaintPlan { taints, due_in }
}

/// `{key:effect}, ...` for events and logs.
fn describe(taints: &[Taint]) -> String {
    let failover: Vec<String> = taints
        .iter()
        .filter(|t| is_readiness_key(&t.key))
        .map(|t| format!("{{{}:{}}}", t.key, t.effect))
        .collect();
    if failover.is_empty() {
        "none".to_owned()
    } else {
        failover.join(", ")
    }
}

/// Brings `cluster`'s failover taints in line with its `Ready` condition; returns when they
/// must be looked at again. A write that meets a concurrent change (409) is retried on the
/// cluster as read again.
pub async fn sync_taints(ctx: &Context, cluster: &Cluster) -> Option<Duration> {
    let options = ctx.settings.taints;
    let api: Api<Cluster> = Api::all(ctx.client.clone());
    let name = cluster.name_any();
    let mut cluster = cluster.clone();
    for _ in 0..3 {
        if cluster.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let ready = cluster
            .status
            .as_ref()
            .and_then(|s| flotilla_api::conditions::find(&s.conditions, READY));
        let plan = plan_taints(&cluster.spec.taints, ready, Timestamp::now(), &options);
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
                let note = format!(
                    "Taint cluster succeed: failover taints now {} (Ready is {})",
                    describe(&written.spec.taints),
                    ready.map_or("not reported yet", |c| c.status.as_str())
                );
                tracing::info!(cluster = %name, taints = %describe(&written.spec.taints), "wrote failover taints");
                ctx.event(
                    &written.object_ref(&()),
                    EventType::Normal,
                    events::TAINT_CLUSTER_SUCCEED,
                    "Taint",
                    note,
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
                tracing::warn!(cluster = %name, %error, "cannot write the failover taints; retrying at the next probe");
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
        assert_eq!(describe(&[taint("other", "NoSchedule", 0)]), "none");
        assert_eq!(
            describe(&[
                taint(NOT_READY_TAINT_KEY, "NoSchedule", 0),
                taint(NOT_READY_TAINT_KEY, "NoExecute", 0)
            ]),
            "{cluster.karmada.io/not-ready:NoSchedule}, {cluster.karmada.io/not-ready:NoExecute}"
        );
    }
}
