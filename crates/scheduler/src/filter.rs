//! Filtering: which registered clusters can take the binding at all, and, when none can, the
//! Karmada-style diagnosis (`0/3 clusters are available: ...`).
//!
//! The checks are Karmada's filter plugins (`pkg/scheduler/framework/plugins`), run in a fixed
//! order so that a cluster failing several checks is always reported under the same reason
//! (Karmada builds its plugin list from a Go map, so its order is arbitrary):
//!
//! 1. a cluster being deleted is never chosen (`findClustersThatFit` in `generic_scheduler.go`);
//!    nor is one the binding is being evicted from (`ClusterEviction`: it has a
//!    `spec.gracefulEvictionTasks` entry);
//! 2. `ClusterAffinity`: the cluster must match the affinity in force;
//! 3. `TaintToleration`: every `NoSchedule`/`NoExecute` taint must be tolerated by
//!    `placement.clusterTolerations`, a cluster that is not ready counting as tainted
//!    `cluster.karmada.io/not-ready:NoSchedule`; a cluster that already holds the binding
//!    (it is in the previous result) skips this check, as in Karmada, where evicting workloads
//!    from tainted clusters is the taint manager's job, not the scheduler's;
//! 4. `APIEnablement`: the cluster must serve the resource's kind; a previous target skips the
//!    check (Karmada), and so does a cluster that reports no API list (flotilla's decision:
//!    Karmada rejects it, but a member whose status has not been collected yet should not
//!    reject every binding);
//! 5. `SpreadConstraint`: spreading by provider, region or zone needs the cluster to have that
//!    field.
//!
//! Karmada does not list deleting clusters in its diagnosis; flotilla does ("N cluster(s) were
//! being deleted"), so the counts in the message always add up.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::policy::ClusterAffinity;
use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::affinity::cluster_matches;
use crate::cluster::{ApiKind, ClusterView};
use crate::error::ScheduleError;
use crate::strategy::{SpreadBy, SpreadPlan};

/// Reason for a cluster being deleted.
const REASON_DELETING: &str = "cluster(s) were being deleted";
/// Reason for a cluster the binding is being evicted from (Karmada's wording).
const REASON_EVICTING: &str = "cluster(s) is in the process of eviction";
/// Reason for a cluster outside the affinity (Karmada's wording).
const REASON_AFFINITY: &str = "cluster(s) did not match the placement cluster affinity constraint";
/// Reason for a cluster without the resource's API (Karmada's wording).
const REASON_API: &str = "cluster(s) did not have the API resource";

/// What filtering needs besides the clusters.
pub(crate) struct FilterContext<'a> {
    /// The affinity in force: `clusterAffinity`, or the `clusterAffinities` term being tried.
    pub affinity: Option<&'a ClusterAffinity>,
    /// `placement.clusterTolerations`.
    pub tolerations: &'a [Toleration],
    /// Spread constraints with defaults applied.
    pub spread: &'a SpreadPlan,
    /// Names of the clusters in the previous result.
    pub previous: &'a BTreeSet<&'a str>,
    /// Clusters the binding is being evicted from.
    pub evicting: &'a [String],
    /// The resource's kind, when API enablement is checked.
    pub resource: Option<&'a ApiKind>,
}

/// The clusters that pass every filter, in input order, or a `NoClusterFit` error listing why
/// each cluster was rejected.
pub(crate) fn filter<'c>(
    clusters: &[&'c ClusterView],
    ctx: &FilterContext<'_>,
) -> Result<Vec<&'c ClusterView>, ScheduleError> {
    let mut fit = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for cluster in clusters {
        match rejection(cluster, ctx) {
            None => fit.push(*cluster),
            Some(reason) => *reasons.entry(reason).or_default() += 1,
        }
    }
    if fit.is_empty() {
        return Err(ScheduleError::no_cluster_fit(fit_error_message(
            clusters.len(),
            &reasons,
        )));
    }
    Ok(fit)
}

/// Karmada's `FitError` message: `0/N clusters are available: <count> <reason>, ...`, the
/// entries sorted as strings.
fn fit_error_message(total: usize, reasons: &BTreeMap<String, usize>) -> String {
    if total == 0 || reasons.is_empty() {
        return format!("0/{total} clusters are available: no cluster exists.");
    }
    let mut entries: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    entries.sort();
    format!("0/{total} clusters are available: {}.", entries.join(", "))
}

/// Why `cluster` cannot take the binding, or `None` when it can.
fn rejection(cluster: &ClusterView, ctx: &FilterContext<'_>) -> Option<String> {
    if cluster.deleting {
        return Some(REASON_DELETING.to_owned());
    }
    if ctx.evicting.contains(&cluster.name) {
        return Some(REASON_EVICTING.to_owned());
    }
    if let Some(affinity) = ctx.affinity
        && !cluster_matches(cluster, affinity)
    {
        return Some(REASON_AFFINITY.to_owned());
    }
    let is_previous = ctx.previous.contains(cluster.name.as_str());
    if !is_previous && let Some(taint) = untolerated_taint(&cluster.effective_taints(), ctx.tolerations) {
        return Some(format!(
            "cluster(s) had untolerated taint {{{}}}",
            taint_to_string(&taint)
        ));
    }
    if !is_previous
        && let Some(kind) = ctx.resource
        && !cluster.api_enablements.is_empty()
        && !cluster.api_enablements.contains(kind)
    {
        return Some(REASON_API.to_owned());
    }
    for spread in &ctx.spread.all {
        let missing = match spread.by {
            SpreadBy::Provider => cluster
                .provider
                .as_deref()
                .is_none_or(str::is_empty)
                .then_some("provider"),
            SpreadBy::Region => cluster
                .region
                .as_deref()
                .is_none_or(str::is_empty)
                .then_some("region"),
            SpreadBy::Zone => cluster.zones.is_empty().then_some("zones"),
            SpreadBy::Cluster | SpreadBy::Label(_) => None,
        };
        if let Some(field) = missing {
            return Some(format!("cluster(s) did not have {field} property"));
        }
    }
    None
}

/// The first taint with effect `NoSchedule` or `NoExecute` that no toleration tolerates
/// (`FindMatchingUntoleratedTaint` with Karmada's effect filter).
pub(crate) fn untolerated_taint(taints: &[Taint], tolerations: &[Toleration]) -> Option<Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .cloned()
}

/// Kubernetes' `Toleration.ToleratesTaint`: an empty effect matches every effect, an empty key
/// matches every key, `Exists` matches every value, `Equal` (the default) compares values.
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// Kubernetes' `Taint.ToString`: `key=value:effect`, `key:effect`, `key=value:` or `key`.
pub(crate) fn taint_to_string(taint: &Taint) -> String {
    let value = taint.value.as_deref().unwrap_or_default();
    match (value.is_empty(), taint.effect.is_empty()) {
        (true, true) => taint.key.clone(),
        (false, true) => format!("{}={}:", taint.key, value),
        (true, false) => format!("{}:{}", taint.key, taint.effect),
        (false, false) => format!("{}={}:{}", taint.key, value, taint.effect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(str::to_owned),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>) -> Toleration {
        Toleration {
            key: key.map(str::to_owned),
            operator: op.map(str::to_owned),
            value: value.map(str::to_owned),
            effect: effect.map(str::to_owned),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matching() {
        let t = taint("gpu", Some("a100"), "NoSchedule");
        let cases = [
            (
                tol(Some("gpu"), Some("Equal"), Some("a100"), Some("NoSchedule")),
                true,
            ),
            (tol(Some("gpu"), None, Some("a100"), None), true),
            (tol(Some("gpu"), Some("Equal"), Some("h100"), None), false),
            (tol(Some("gpu"), Some("Equal"), None, None), false),
            (tol(Some("gpu"), Some("Exists"), None, None), true),
            (tol(Some("gpu"), Some("Exists"), None, Some("NoExecute")), false),
            (tol(Some("cpu"), Some("Exists"), None, None), false),
            (tol(None, Some("Exists"), None, None), true),
            (tol(None, Some("Exists"), None, Some("NoSchedule")), true),
            (tol(None, Some("Equal"), Some("a100"), None), true),
            (tol(Some("gpu"), Some("Lt"), Some("1"), None), false),
        ];
        for (toleration, want) in cases {
            assert_eq!(tolerates(&toleration, &t), want, "{toleration:?}");
        }
        let no_value = taint("maint", None, "NoExecute");
        assert!(tolerates(&tol(Some("maint"), None, None, None), &no_value));
        assert!(tolerates(&tol(Some("maint"), None, Some(""), None), &no_value));
    }

    #[test]
    fn only_no_schedule_and_no_execute_taints_count() {
        let taints = vec![
            taint("soft", None, "PreferNoSchedule"),
            taint("a", None, "NoSchedule"),
            taint("b", None, "NoExecute"),
        ];
        assert_eq!(untolerated_taint(&taints, &[]).map(|t| t.key), Some("a".into()));
        let tolerate_a = [tol(Some("a"), Some("Exists"), None, None)];
        assert_eq!(
            untolerated_taint(&taints, &tolerate_a).map(|t| t.key),
            Some("b".into())
        );
        let all = [tol(None, Some("Exists"), None, None)];
        assert_eq!(untolerated_taint(&taints, &all), None);
        assert_eq!(untolerated_taint(&taints[..1], &[]), None);
    }

    #[test]
    fn taint_strings() {
        assert_eq!(
            taint_to_string(&taint("k", Some("v"), "NoSchedule")),
            "k=v:NoSchedule"
        );
        assert_eq!(taint_to_string(&taint("k", None, "NoSchedule")), "k:NoSchedule");
        assert_eq!(taint_to_string(&taint("k", Some("v"), "")), "k=v:");
        assert_eq!(taint_to_string(&taint("k", None, "")), "k");
    }

    #[test]
    fn fit_error_messages() {
        assert_eq!(
            fit_error_message(0, &BTreeMap::new()),
            "0/0 clusters are available: no cluster exists."
        );
        let reasons: BTreeMap<String, usize> = [
            (REASON_AFFINITY.to_owned(), 1),
            ("cluster(s) had untolerated taint {x:NoSchedule}".to_owned(), 2),
        ]
        .into();
        assert_eq!(
            fit_error_message(3, &reasons),
            "0/3 clusters are available: 1 cluster(s) did not match the placement cluster affinity \
             constraint, 2 cluster(s) had untolerated taint {x:NoSchedule}."
        );
    }
}
