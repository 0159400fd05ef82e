//! Status, pure: a Work's manifest statuses and conditions from what the member reported, a
//! binding's `aggregatedStatus` and `FullyApplied` from its Works, and the JSON merge patch that
//! turns one status into another.

use std::borrow::Cow;
use std::collections::BTreeMap;

use flotilla_api::Work;
use flotilla_api::conditions::find;
use flotilla_api::well_known::{conditions, reasons};
use flotilla_api::work::AggregatedStatusItem;
use serde_json::{Map, Value};

use crate::cache::CachedWork;
use crate::manifest::{Revision, manifest_hash};
use crate::works::applied_revisions;

/// Reason of `FullyApplied=True`.
pub const FULLY_APPLIED_SUCCESS: &str = "FullyAppliedSuccess";
/// Reason of `FullyApplied=False` when some Work is not applied.
pub const FULLY_APPLIED_FAILED: &str = "FullyAppliedFailed";
/// Reason of `FullyApplied=False` when the binding has no target cluster.
pub const NO_TARGET_CLUSTERS: &str = "NoTargetClusters";

/// Whether a Work's member objects hold its current manifests: `Ok` when they do, else why
/// not (a message of execution's own is static, so a Work's cached answer allocates nothing).
///
/// Applied when the `Applied` condition is `True` and either observed the Work's current
/// generation or every manifest's last applied revision ([`applied_revisions`]) has
/// the current manifest's hash (a generation bump that did not change the manifests, such as
/// suspending, does not make an applied Work unapplied).
pub fn work_applied(work: &Work) -> Result<(), Cow<'static, str>> {
    let generation = work.metadata.generation;
    let status = work.status.as_ref();
    let applied = status.and_then(|s| find(&s.conditions, conditions::APPLIED));
    let suspended = work.spec.suspend_dispatching == Some(true);
    match applied {
        Some(condition) if condition.status == "True" => {
            if condition.observed_generation == generation || holds_current_manifests(work) {
                Ok(())
            } else if suspended {
                Err("dispatching is suspended; the member runs an older revision".into())
            } else {
                Err("the latest revision is not applied yet".into())
            }
        }
        Some(condition) => Err(condition.message.clone().into()),
        None if suspended => Err("dispatching is suspended".into()),
        None => Err("not applied yet".into()),
    }
}

fn holds_current_manifests(work: &Work) -> bool {
    let recorded = applied_revisions(work);
    let manifests = &work.spec.workload.manifests;
    !manifests.is_empty()
        && manifests.iter().enumerate().all(|(ordinal, manifest)| {
            recorded
                .get(&ordinal)
                .and_then(|r| Revision::parse(r))
                .is_some_and(|r| r.hash == manifest_hash(manifest))
        })
}

/// The binding's `aggregatedStatus`: one item per target cluster, in target order, from that
/// cluster's Work (`None` when the Work does not exist yet).
pub fn aggregated_items(
    targets: &[String],
    works: &BTreeMap<String, &CachedWork>,
) -> Vec<AggregatedStatusItem> {
    targets
        .iter()
        .map(|cluster| match works.get(cluster) {
            Some(work) => {
                let applied = work.applied();
                AggregatedStatusItem {
                    cluster_name: cluster.clone(),
                    status: work.status(),
                    applied: applied.is_ok(),
                    applied_message: applied.err().map(str::to_owned),
                    health: work.health(),
                    last_health_transition_time: None,
                }
            }
            None => AggregatedStatusItem {
                cluster_name: cluster.clone(),
                status: None,
                applied: false,
                applied_message: Some("the Work does not exist yet".to_owned()),
                health: None,
                last_health_transition_time: None,
            },
        })
        .collect()
}

/// Gives each item its `lastHealthTransitionTime`: the previous item's (same cluster) when the
/// health did not change and a time was recorded, `now` when it changed or none was; none for
/// an item without health. Application failover counts `tolerationSeconds` from it, so it is
/// kept in the API, never in memory.
pub fn stamp_health_transitions(
    items: &mut [AggregatedStatusItem],
    previous: &[AggregatedStatusItem],
    now: k8s_openapi::jiff::Timestamp,
) {
    for item in items {
        item.last_health_transition_time = item.health.as_ref().map(|health| {
            previous
                .iter()
                .find(|p| p.cluster_name == item.cluster_name && p.health.as_ref() == Some(health))
                .and_then(|p| p.last_health_transition_time.clone())
                .unwrap_or(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now))
        });
    }
}

/// The binding's `FullyApplied` condition as `(status, reason, message)`.
pub fn fully_applied(items: &[AggregatedStatusItem]) -> (bool, &'static str, String) {
    if items.is_empty() {
        return (
            false,
            NO_TARGET_CLUSTERS,
            "the binding has no target clusters".to_owned(),
        );
    }
    let pending: Vec<&AggregatedStatusItem> = items.iter().filter(|i| !i.applied).collect();
    if pending.is_empty() {
        return (
            true,
            FULLY_APPLIED_SUCCESS,
            "All works have been successfully applied".to_owned(),
        );
    }
    let all_suspended = pending.iter().all(|i| {
        i.applied_message
            .as_deref()
            .is_some_and(|m| m.starts_with("dispatching is suspended"))
    });
    let details: Vec<String> = pending
        .iter()
        .map(|i| {
            format!(
                "{}: {}",
                i.cluster_name,
                i.applied_message.as_deref().unwrap_or("not applied")
            )
        })
        .collect();
    let reason = if all_suspended {
        reasons::SUSPEND_DISPATCHING
    } else {
        FULLY_APPLIED_FAILED
    };
    (false, reason, format!("not applied in {}", details.join("; ")))
}

/// The per-cluster statuses [`flotilla_interpreter::aggregate_status`] takes: every target
/// cluster, with `null` where no status was collected.
pub fn per_cluster_statuses(items: &[AggregatedStatusItem]) -> Vec<(String, Value)> {
    items
        .iter()
        .map(|i| (i.cluster_name.clone(), i.status.clone().unwrap_or(Value::Null)))
        .collect()
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: changed and added keys with
/// their new values, removed keys as `null`. Equal values give an empty object.
pub fn merge_patch_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(previous) if previous == value => {}
                    Some(previous @ Value::Object(_)) if value.is_object() => {
                        patch.insert(key.clone(), merge_patch_diff(previous, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        (_, new) => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::WorkSpec;
    use flotilla_api::work::{
        ManifestStatus, ResourceHealth, ResourceIdentifier, WorkStatus, WorkloadTemplate,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::works::{APPLIED_REVISIONS_ANNOTATION, format_applied_revisions};

    fn manifest() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx"}, "spec": {"replicas": 1}})
    }

    fn work(generation: i64, applied: Option<(bool, i64, &str)>, suspended: bool) -> Work {
        let mut work = Work::new(
            "nginx-deployment-00000000",
            WorkSpec {
                workload: WorkloadTemplate {
                    manifests: vec![manifest()],
                },
                suspend_dispatching: Some(suspended),
                preserve_resources_on_deletion: None,
            },
        );
        work.metadata.generation = Some(generation);
        let conditions = applied
            .map(|(status, observed, message)| Condition {
                type_: "Applied".into(),
                status: if status { "True" } else { "False" }.into(),
                reason: "x".into(),
                message: message.into(),
                observed_generation: Some(observed),
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
            })
            .into_iter()
            .collect();
        work.status = Some(WorkStatus {
            conditions,
            manifest_statuses: vec![ManifestStatus {
                identifier: ResourceIdentifier {
                    ordinal: 0,
                    version: "v1".into(),
                    kind: "Deployment".into(),
                    resource: "deployments".into(),
                    name: "nginx".into(),
                    ..Default::default()
                },
                status: Some(json!({"readyReplicas": 1})),
                health: Some(ResourceHealth::Healthy),
                applied_revision: None,
            }],
        });
        work
    }

    #[test]
    fn applied_at_current_generation() {
        assert_eq!(work_applied(&work(2, Some((true, 2, "ok")), false)), Ok(()));
        assert_eq!(
            work_applied(&work(3, Some((true, 2, "ok")), false)),
            Err("the latest revision is not applied yet".into())
        );
        assert_eq!(
            work_applied(&work(
                3,
                Some((false, 3, "cluster member1 is unreachable")),
                false,
            )),
            Err("cluster member1 is unreachable".into())
        );
        assert_eq!(work_applied(&work(1, None, false)), Err("not applied yet".into()));
        assert_eq!(
            work_applied(&work(1, None, true)),
            Err("dispatching is suspended".into())
        );
    }

    #[test]
    fn suspending_without_a_manifest_change_keeps_a_work_applied() {
        let mut suspended = work(3, Some((true, 2, "ok")), true);
        let message = work_applied(&suspended).unwrap_err();
        assert!(message.starts_with("dispatching is suspended"));
        let revision = Revision::of(2, &manifest()).to_string();
        let mut legacy = suspended.clone();
        if let Some(status) = suspended.status.as_mut() {
            status.manifest_statuses[0].applied_revision = Some(revision.clone());
        }
        assert_eq!(work_applied(&suspended), Ok(()));
        // A Work last written by an older execution records it in an annotation.
        legacy.metadata.annotations = Some(
            [(
                APPLIED_REVISIONS_ANNOTATION.to_owned(),
                format_applied_revisions(&BTreeMap::from([(0, revision)])),
            )]
            .into(),
        );
        assert_eq!(work_applied(&legacy), Ok(()));
    }

    #[test]
    fn aggregation_and_fully_applied() {
        let ok = CachedWork::from(&work(1, Some((true, 1, "ok")), false));
        let failing = CachedWork::from(&work(
            1,
            Some((false, 1, "cluster member2 is unreachable: refused")),
            false,
        ));
        let suspended = CachedWork::from(&work(2, Some((true, 1, "ok")), true));
        let targets = vec!["member1".to_owned(), "member2".to_owned(), "member3".to_owned()];

        let works = BTreeMap::from([("member1".to_owned(), &ok), ("member2".to_owned(), &ok)]);
        let items = aggregated_items(&targets[..2], &works);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].status, Some(json!({"readyReplicas": 1})));
        assert_eq!(items[0].health, Some(ResourceHealth::Healthy));
        assert_eq!(
            fully_applied(&items),
            (
                true,
                FULLY_APPLIED_SUCCESS,
                "All works have been successfully applied".to_owned()
            )
        );

        let works = BTreeMap::from([("member1".to_owned(), &ok), ("member2".to_owned(), &failing)]);
        let items = aggregated_items(&targets, &works);
        assert_eq!(
            items[2].applied_message.as_deref(),
            Some("the Work does not exist yet")
        );
        let (status, reason, message) = fully_applied(&items);
        assert!(!status);
        assert_eq!(reason, FULLY_APPLIED_FAILED);
        assert_eq!(
            message,
            "not applied in member2: cluster member2 is unreachable: refused; member3: the Work does not exist yet"
        );

        let works = BTreeMap::from([("member1".to_owned(), &ok), ("member2".to_owned(), &suspended)]);
        let items = aggregated_items(&targets[..2], &works);
        let (status, reason, _) = fully_applied(&items);
        assert!(!status);
        assert_eq!(reason, "SuspendDispatching");

        assert_eq!(fully_applied(&[]).1, NO_TARGET_CLUSTERS);
        assert_eq!(
            per_cluster_statuses(&items),
            vec![
                ("member1".to_owned(), json!({"readyReplicas": 1})),
                ("member2".to_owned(), json!({"readyReplicas": 1})),
            ]
        );
    }

    #[test]
    fn merge_patch_diffs() {
        assert_eq!(merge_patch_diff(&json!({"a": 1}), &json!({"a": 1})), json!({}));
        assert_eq!(
            merge_patch_diff(
                &json!({"a": 1, "b": {"c": 1, "d": 2}, "gone": true}),
                &json!({"a": 2, "b": {"c": 1}, "new": [1]})
            ),
            json!({"a": 2, "b": {"d": null}, "gone": null, "new": [1]})
        );
        assert_eq!(merge_patch_diff(&Value::Null, &json!({"a": 1})), json!({"a": 1}));
        assert_eq!(
            merge_patch_diff(&json!({"a": {"x": 1}}), &json!({"a": 5})),
            json!({"a": 5})
        );
    }

    #[test]
    fn health_transition_times_move_only_with_the_health() {
        let at = |s: i64| Time(Timestamp::from_second(s).unwrap());
        let item = |cluster: &str, health: Option<ResourceHealth>, since: Option<i64>| AggregatedStatusItem {
            cluster_name: cluster.into(),
            applied: true,
            health,
            last_health_transition_time: since.map(at),
            ..Default::default()
        };
        let previous = vec![
            item("m1", Some(ResourceHealth::Healthy), Some(10)),
            item("m2", Some(ResourceHealth::Healthy), Some(10)),
            item("m3", Some(ResourceHealth::Unhealthy), None),
        ];
        let mut items = vec![
            item("m1", Some(ResourceHealth::Healthy), None),
            item("m2", Some(ResourceHealth::Unhealthy), None),
            item("m3", Some(ResourceHealth::Unhealthy), None),
            item("m4", Some(ResourceHealth::Unknown), None),
            item("m5", None, Some(3)),
        ];
        let now = Timestamp::from_second(50).unwrap();
        stamp_health_transitions(&mut items, &previous, now);
        let times: Vec<Option<Time>> = items
            .iter()
            .map(|i| i.last_health_transition_time.clone())
            .collect();
        assert_eq!(
            times,
            vec![
                Some(at(10)), // unchanged: kept
                Some(at(50)), // changed: now
                Some(at(50)), // unchanged but never recorded (older execution): now
                Some(at(50)), // new cluster: now
                None,         // no health, no time
            ]
        );
        // Stamping again changes nothing, so an unchanged status is not written again.
        let again = items.clone();
        stamp_health_transitions(&mut items, &again, Timestamp::from_second(99).unwrap());
        assert_eq!(items, again);
    }
}
