//! ClusterTaintPolicies (Karmada v1.14's `cluster-taint-policy-controller`, done by execution's
//! cluster owner in the same write as the readiness taints, see [`crate::taints`]): which taints
//! the policies add to and remove from one cluster, and each policy's `Valid` condition.
//!
//! Karmada's rules, kept exactly:
//! - policies apply one after the other, oldest first (`creationTimestamp`; flotilla breaks
//!   ties by name), each to the taints the previous ones left;
//! - a policy applies to a cluster its `targetClusters` select (every cluster when unset);
//! - `addOnConditions` match when every requirement holds for the cluster's condition of that
//!   type (`In` / `NotIn` `statusValues`); a cluster without the condition does not match; an
//!   empty list never matches. Then each policy taint missing by key and effect is added, with
//!   the policy's value and `timeAdded` now;
//! - then `removeOnConditions`, the same way: each cluster taint with a policy taint's key and
//!   effect is removed, whatever its value or who added it;
//! - otherwise nothing changes: a cluster keeps its taints when neither list matches, when it
//!   stops being targeted, when the policy's taints are edited and when the policy is deleted.
//!
//! So the decision depends only on the policies, the cluster's conditions and labels, and its
//! current taints: it is the same after any restart, whatever order events came in.
//!
//! A policy that fails validation (possible only through an API server without flotilla's
//! admission) is ignored and reported on its `Valid` condition and with an event.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_api::cluster_affinity::{ClusterFacts, cluster_matches};
use flotilla_api::taint_policy::{ClusterTaintPolicy, MatchCondition, MatchConditionOperator};
use flotilla_api::well_known::{conditions::VALID, reasons};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;

/// The policies that apply, in the order they apply: valid ones, oldest first, then by name.
pub fn in_order(policies: &[Arc<ClusterTaintPolicy>]) -> Vec<&ClusterTaintPolicy> {
    let mut valid: Vec<&ClusterTaintPolicy> = policies
        .iter()
        .map(Arc::as_ref)
        .filter(|p| p.validate().is_ok())
        .collect();
    valid.sort_by(|a, b| {
        let created = |p: &ClusterTaintPolicy| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    valid
}

/// Whether every requirement holds for `conditions` (Karmada's `conditionMatches`). An empty
/// list never matches; a requirement on a condition type the cluster lacks does not hold.
pub fn conditions_match(conditions: &[Condition], requirements: &[MatchCondition]) -> bool {
    !requirements.is_empty()
        && requirements.iter().all(|requirement| {
            conditions
                .iter()
                .filter(|c| c.type_ == requirement.condition_type)
                .any(|c| {
                    let listed = requirement.status_values.contains(&c.status);
                    match requirement.operator {
                        MatchConditionOperator::In => listed,
                        MatchConditionOperator::NotIn => !listed,
                        MatchConditionOperator::Other(_) => false,
                    }
                })
        })
}

/// Whether `policy` looks after `cluster`.
pub fn targets(policy: &ClusterTaintPolicy, cluster: &ClusterFacts<'_>) -> bool {
    policy
        .spec
        .target_clusters
        .as_ref()
        .is_none_or(|affinity| cluster_matches(cluster, affinity))
}

/// Who last changed a taint in a plan (for events and logs).
pub type Changes = BTreeMap<(String, String), String>;

/// Applies `policies` (from [`in_order`]) to `taints`, the taints of the cluster described by
/// `cluster` and `conditions`: added taints get `timeAdded` `now`. Every taint a policy adds
/// or removes is recorded in `changes` under `policy <name>`.
pub fn apply_policies(
    mut taints: Vec<Taint>,
    cluster: &ClusterFacts<'_>,
    conditions: &[Condition],
    policies: &[&ClusterTaintPolicy],
    now: Timestamp,
    changes: &mut Changes,
) -> Vec<Taint> {
    for policy in policies {
        if !targets(policy, cluster) {
            continue;
        }
        let source = format!("ClusterTaintPolicy {}", policy.name_any());
        if conditions_match(conditions, &policy.spec.add_on_conditions) {
            for wanted in &policy.spec.taints {
                let effect = wanted.effect.as_str();
                if !taints.iter().any(|t| t.key == wanted.key && t.effect == effect) {
                    taints.push(Taint {
                        key: wanted.key.clone(),
                        value: (!wanted.value.is_empty()).then(|| wanted.value.clone()),
                        effect: effect.to_owned(),
                        time_added: Some(Time(now)),
                    });
                    changes.insert((wanted.key.clone(), effect.to_owned()), source.clone());
                }
            }
        }
        if conditions_match(conditions, &policy.spec.remove_on_conditions) {
            for unwanted in &policy.spec.taints {
                let effect = unwanted.effect.as_str();
                let before = taints.len();
                taints.retain(|t| !(t.key == unwanted.key && t.effect == effect));
                if taints.len() != before {
                    changes.insert((unwanted.key.clone(), effect.to_owned()), source.clone());
                }
            }
        }
    }
    taints
}

/// Whether some valid policy has a `NoExecute` taint: then `NoExecute` taints are the
/// policies' (and people's) business and execution adds no automatic ones.
pub fn policies_take_no_execute(policies: &[&ClusterTaintPolicy]) -> bool {
    policies.iter().any(|p| p.spec.has_no_execute_taint())
}

// ---------------------------------------------------------------------------------------------
// The `Valid` condition.
// ---------------------------------------------------------------------------------------------

/// The `Valid` condition `policy` should carry: `(valid, reason, message)`. `applied` says
/// whether execution applies policies at all (`--feature-gates=Failover`).
pub fn validity(policy: &ClusterTaintPolicy, applied: bool) -> (bool, &'static str, String) {
    match policy.validate() {
        Ok(()) if applied => (
            true,
            reasons::VALID_POLICY,
            "the policy is valid and applied".to_owned(),
        ),
        Ok(()) => (
            true,
            reasons::VALID_POLICY,
            "the policy is valid, but not applied: execution runs with --feature-gates=Failover=false"
                .to_owned(),
        ),
        Err(violations) => (
            false,
            reasons::INVALID_POLICY,
            format!("the policy is ignored: {violations}"),
        ),
    }
}

/// The shard key of a ClusterTaintPolicy: its owner writes the policy's status.
pub fn policy_shard(name: &str) -> String {
    format!("clustertaintpolicy/{name}")
}

/// Writes the status of ClusterTaintPolicy `name` (`Valid` condition, observed generation,
/// taints summary) when it changed, and a warning event when the policy is invalid.
pub async fn sync_status(ctx: &Context, name: &str) {
    if !ctx.owns(&policy_shard(name)) {
        return;
    }
    let Some(policy) = ctx.stores.taint_policies.get(&ObjectRef::new(name)) else {
        return;
    };
    let generation = policy.metadata.generation;
    let (valid, reason, message) = validity(&policy, ctx.settings.taints.no_execute);
    let mut status = policy.status.clone().unwrap_or_default();
    let changed = flotilla_api::conditions::set(
        &mut status.conditions,
        VALID,
        valid,
        reason,
        message.clone(),
        generation,
        Timestamp::now(),
    ) || status.observed_generation != generation;
    let summary = Some(policy.spec.taints_summary());
    if !changed && status.taints == summary {
        return;
    }
    status.observed_generation = generation;
    status.taints = summary;
    let api: Api<ClusterTaintPolicy> = Api::all(ctx.client.clone());
    let patch = json!({
        "metadata": {"resourceVersion": policy.resource_version()},
        "status": status,
    });
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(written) => {
            if !valid {
                tracing::warn!(policy = %name, %message, "ClusterTaintPolicy is invalid and ignored");
                ctx.event(
                    &written.object_ref(&()),
                    EventType::Warning,
                    reasons::INVALID_POLICY,
                    "Validate",
                    message,
                )
                .await;
            }
        }
        // A newer version is on its way through the watch, which queues the policy again.
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
        Err(error) => {
            tracing::warn!(policy = %name, %error, "cannot write the ClusterTaintPolicy's status");
            ctx.taint_policy_queue
                .add_after(name.to_owned(), std::time::Duration::from_secs(5));
        }
    }
}

/// Works through the ClusterTaintPolicy queue until shutdown.
pub async fn run_status_worker(ctx: Arc<Context>) {
    if !ctx.wait_synced().await {
        return;
    }
    loop {
        let name = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            name = ctx.taint_policy_queue.next() => name,
        };
        let Some(name) = name else { return };
        sync_status(&ctx, &name).await;
        ctx.taint_policy_queue.done(&name);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use flotilla_api::policy::ClusterAffinity;
    use flotilla_api::taint_policy::{ClusterTaintPolicySpec, PolicyTaint, TaintEffect};

    fn ts(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn condition(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "r".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(ts(0)),
        }
    }

    fn requirement(type_: &str, operator: &str, values: &[&str]) -> MatchCondition {
        MatchCondition {
            condition_type: type_.into(),
            operator: operator.into(),
            status_values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn policy_taint(key: &str, effect: &str, value: &str) -> PolicyTaint {
        PolicyTaint {
            key: key.into(),
            effect: TaintEffect::from(effect),
            value: value.into(),
        }
    }

    /// Karmada's documented shape: taints added when `Ready` is not `True`, removed when it is.
    fn ready_policy(name: &str, created: i64, taints: Vec<PolicyTaint>) -> ClusterTaintPolicy {
        let mut policy = ClusterTaintPolicy::new(
            name,
            ClusterTaintPolicySpec {
                target_clusters: None,
                add_on_conditions: vec![requirement("Ready", "NotIn", &["True"])],
                remove_on_conditions: vec![requirement("Ready", "In", &["True"])],
                taints,
            },
        );
        policy.metadata.creation_timestamp = Some(Time(ts(created)));
        policy
    }

    fn taint(key: &str, effect: &str, value: Option<&str>, added: i64) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: Some(Time(ts(added))),
        }
    }

    fn keys(taints: &[Taint]) -> Vec<String> {
        taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect()
    }

    struct Cluster {
        name: String,
        labels: BTreeMap<String, String>,
    }

    impl Cluster {
        fn new(name: &str, labels: &[(&str, &str)]) -> Self {
            Self {
                name: name.into(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }
        }

        fn facts(&self) -> ClusterFacts<'_> {
            ClusterFacts {
                name: &self.name,
                labels: &self.labels,
                provider: None,
                region: None,
                zones: &[],
            }
        }
    }

    fn apply(
        taints: Vec<Taint>,
        cluster: &Cluster,
        conditions: &[Condition],
        policies: &[ClusterTaintPolicy],
        now: i64,
    ) -> (Vec<Taint>, Changes) {
        let owned: Vec<Arc<ClusterTaintPolicy>> = policies.iter().cloned().map(Arc::new).collect();
        let ordered = in_order(&owned);
        let mut changes = Changes::new();
        let taints = apply_policies(
            taints,
            &cluster.facts(),
            conditions,
            &ordered,
            ts(now),
            &mut changes,
        );
        (taints, changes)
    }

    #[test]
    fn conditions_match_like_karmada() {
        let conditions = [condition("Ready", "False"), condition("NetworkAvailable", "True")];
        let cases: &[(&[MatchCondition], bool)] = &[
            (&[], false),
            (&[requirement("Ready", "In", &["False", "Unknown"])], true),
            (&[requirement("Ready", "In", &["True"])], false),
            (&[requirement("Ready", "NotIn", &["True"])], true),
            (&[requirement("Ready", "NotIn", &["False"])], false),
            (&[requirement("Ready", "In", &[])], false),
            (&[requirement("Ready", "NotIn", &[])], true),
            // A condition the cluster does not have matches neither In nor NotIn.
            (&[requirement("KubeComponentsHealthy", "NotIn", &["True"])], false),
            (&[requirement("KubeComponentsHealthy", "In", &["True"])], false),
            // ANDed.
            (
                &[
                    requirement("Ready", "NotIn", &["True"]),
                    requirement("NetworkAvailable", "NotIn", &["True"]),
                ],
                false,
            ),
            (
                &[
                    requirement("Ready", "NotIn", &["True"]),
                    requirement("NetworkAvailable", "In", &["True"]),
                ],
                true,
            ),
            (&[requirement("Ready", "Equals", &["False"])], false),
        ];
        for (requirements, want) in cases {
            assert_eq!(
                conditions_match(&conditions, requirements),
                *want,
                "{requirements:?}"
            );
        }
        assert!(!conditions_match(
            &[],
            &[requirement("Ready", "NotIn", &["True"])]
        ));
    }

    #[test]
    fn added_when_the_add_conditions_match_and_removed_when_the_remove_conditions_match() {
        let cluster = Cluster::new("member1", &[]);
        let policy = ready_policy(
            "detect-not-ready",
            1,
            vec![
                policy_taint("not-ready", "NoSchedule", ""),
                policy_taint("not-ready", "NoExecute", "yes"),
            ],
        );
        let user = taint("dedicated", "NoSchedule", Some("gpu"), 5);
        let not_ready = [condition("Ready", "False")];
        let (taints, changes) = apply(
            vec![user.clone()],
            &cluster,
            &not_ready,
            std::slice::from_ref(&policy),
            100,
        );
        assert_eq!(
            taints,
            vec![
                user.clone(),
                taint("not-ready", "NoSchedule", None, 100),
                taint("not-ready", "NoExecute", Some("yes"), 100),
            ]
        );
        assert_eq!(
            changes.values().collect::<Vec<_>>(),
            ["ClusterTaintPolicy detect-not-ready"; 2]
        );

        // Level-triggered: the same state later changes nothing (timeAdded stays).
        let (again, changes) = apply(
            taints.clone(),
            &cluster,
            &not_ready,
            std::slice::from_ref(&policy),
            500,
        );
        assert_eq!(again, taints);
        assert!(changes.is_empty());

        // Ready again: both go, the user's taint stays.
        let (taints, _) = apply(
            taints,
            &cluster,
            &[condition("Ready", "True")],
            std::slice::from_ref(&policy),
            600,
        );
        assert_eq!(taints, vec![user]);
    }

    #[test]
    fn neither_list_matching_keeps_the_taints_as_they_are() {
        let cluster = Cluster::new("member1", &[]);
        let policy = ready_policy("p", 1, vec![policy_taint("not-ready", "NoSchedule", "")]);
        let present = vec![taint("not-ready", "NoSchedule", None, 7)];
        // No Ready condition at all: neither NotIn [True] nor In [True] holds.
        for conditions in [vec![], vec![condition("Other", "True")]] {
            let (taints, _) = apply(
                present.clone(),
                &cluster,
                &conditions,
                std::slice::from_ref(&policy),
                9,
            );
            assert_eq!(taints, present, "{conditions:?}");
            let (taints, _) = apply(vec![], &cluster, &conditions, std::slice::from_ref(&policy), 9);
            assert!(taints.is_empty(), "{conditions:?}");
        }
    }

    #[test]
    fn a_taint_with_the_same_key_and_effect_counts_as_present_and_is_removed_whoever_added_it() {
        let cluster = Cluster::new("member1", &[]);
        let policy = ready_policy("p", 1, vec![policy_taint("maintenance", "NoSchedule", "policy")]);
        let by_hand = taint("maintenance", "NoSchedule", Some("person"), 3);
        let other_effect = taint("maintenance", "NoExecute", None, 3);
        let current = vec![by_hand.clone(), other_effect.clone()];
        let (taints, changes) = apply(
            current.clone(),
            &cluster,
            &[condition("Ready", "False")],
            std::slice::from_ref(&policy),
            10,
        );
        assert_eq!(
            taints, current,
            "present by key and effect: not added again, value kept"
        );
        assert!(changes.is_empty());
        let (taints, _) = apply(
            current,
            &cluster,
            &[condition("Ready", "True")],
            std::slice::from_ref(&policy),
            10,
        );
        assert_eq!(
            taints,
            vec![other_effect],
            "removed by key and effect (Karmada's rule)"
        );
    }

    #[test]
    fn removal_wins_when_both_lists_match() {
        let cluster = Cluster::new("member1", &[]);
        let mut policy = ready_policy("p", 1, vec![policy_taint("x", "NoSchedule", "")]);
        policy.spec.remove_on_conditions = vec![requirement("Ready", "In", &["False"])];
        let (taints, _) = apply(
            vec![],
            &cluster,
            &[condition("Ready", "False")],
            std::slice::from_ref(&policy),
            10,
        );
        assert!(taints.is_empty());
    }

    #[test]
    fn target_clusters_select_the_clusters_a_policy_looks_after() {
        let prod = Cluster::new("member1", &[("env", "prod")]);
        let dev = Cluster::new("member2", &[("env", "dev")]);
        let mut policy = ready_policy("p", 1, vec![policy_taint("x", "NoSchedule", "")]);
        policy.spec.target_clusters = Some(ClusterAffinity {
            label_selector: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some([("env".to_owned(), "prod".to_owned())].into()),
                ..Default::default()
            }),
            ..ClusterAffinity::default()
        });
        let not_ready = [condition("Ready", "False")];
        let (taints, _) = apply(vec![], &prod, &not_ready, std::slice::from_ref(&policy), 1);
        assert_eq!(keys(&taints), ["x:NoSchedule"]);
        let (taints, _) = apply(vec![], &dev, &not_ready, std::slice::from_ref(&policy), 1);
        assert!(taints.is_empty());
        // A cluster that is no longer targeted keeps what it has, even when Ready again.
        let kept = vec![taint("x", "NoSchedule", None, 1)];
        let (taints, _) = apply(
            kept.clone(),
            &dev,
            &[condition("Ready", "True")],
            std::slice::from_ref(&policy),
            2,
        );
        assert_eq!(taints, kept);

        policy.spec.target_clusters = Some(ClusterAffinity {
            cluster_names: vec!["member1".into(), "member2".into()],
            exclude_clusters: vec!["member2".into()],
            ..ClusterAffinity::default()
        });
        assert!(targets(&policy, &prod.facts()));
        assert!(!targets(&policy, &dev.facts()));
    }

    #[test]
    fn policies_apply_oldest_first_and_invalid_ones_are_ignored() {
        let cluster = Cluster::new("member1", &[]);
        // The older one removes what the newer one adds, in the same state: the newer wins.
        let mut remover = ready_policy("b-remover", 1, vec![policy_taint("x", "NoSchedule", "")]);
        remover.spec.add_on_conditions = vec![];
        remover.spec.remove_on_conditions = vec![requirement("Ready", "In", &["False"])];
        let adder = ready_policy("a-adder", 2, vec![policy_taint("x", "NoSchedule", "")]);
        let not_ready = [condition("Ready", "False")];
        let (taints, changes) = apply(
            vec![taint("x", "NoSchedule", None, 0)],
            &cluster,
            &not_ready,
            &[adder.clone(), remover.clone()],
            5,
        );
        assert_eq!(taints, vec![taint("x", "NoSchedule", None, 5)]);
        assert_eq!(
            changes
                .get(&("x".to_owned(), "NoSchedule".to_owned()))
                .map(String::as_str),
            Some("ClusterTaintPolicy a-adder")
        );
        // Created at the same time: by name.
        let same_time = ready_policy("a-adder", 1, adder.spec.taints.clone());
        let (taints, _) = apply(vec![], &cluster, &not_ready, &[remover.clone(), same_time], 5);
        assert!(taints.is_empty(), "a-adder, then b-remover");

        let mut invalid = ready_policy("bad", 0, vec![policy_taint("bad key!", "NoSchedule", "")]);
        invalid.spec.taints.push(policy_taint("y", "NoSchedule", ""));
        let (taints, _) = apply(vec![], &cluster, &not_ready, &[invalid], 5);
        assert!(taints.is_empty(), "an invalid policy is ignored as a whole");
    }

    #[test]
    fn only_policies_with_no_execute_taints_take_no_execute_over() {
        let schedule = ready_policy("s", 1, vec![policy_taint("x", "NoSchedule", "")]);
        let execute = ready_policy("e", 1, vec![policy_taint("x", "NoExecute", "")]);
        assert!(!policies_take_no_execute(&[&schedule]));
        assert!(policies_take_no_execute(&[&schedule, &execute]));
        assert!(!policies_take_no_execute(&[]));
    }

    #[test]
    fn validity_names_the_field() {
        let good = ready_policy("p", 1, vec![policy_taint("x", "NoExecute", "")]);
        assert_eq!(
            validity(&good, true),
            (true, "ValidPolicy", "the policy is valid and applied".to_owned())
        );
        assert!(validity(&good, false).2.contains("Failover=false"));
        let bad = ready_policy("p", 1, vec![policy_taint("x", "Sometimes", "")]);
        let (valid, reason, message) = validity(&bad, true);
        assert!(!valid);
        assert_eq!(reason, "InvalidPolicy");
        assert_eq!(
            message,
            "the policy is ignored: spec.taints[0].effect: unsupported value \"Sometimes\": use one of NoSchedule, PreferNoSchedule, NoExecute"
        );
    }
}
