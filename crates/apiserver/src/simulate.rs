//! `--simulate-workloads`: a loop that reports workload status as if every pod were running
//! and ready (there is no kubelet), so status reflection is observable on simulated member
//! clusters. Deployments, StatefulSets, ReplicaSets and DaemonSets become fully available;
//! Jobs complete.
//!
//! A workload annotated `simulate.flotilla.io/unavailable: "true"` in the member is reported
//! as if none of its pods could run (a cordoned node, pods evicted): no replica ready or
//! available, `Available=False`. It is how tests and demos make an application unhealthy in one
//! member (application failover); removing the annotation makes it available again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use flotilla_store::EventKind;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::objects;
use crate::ops::{Api, WriteOptions};
use crate::resources::ResourceDef;

const PREFIXES: [&str; 5] = [
    "/registry/apps/deployments/",
    "/registry/apps/statefulsets/",
    "/registry/apps/replicasets/",
    "/registry/apps/daemonsets/",
    "/registry/batch/jobs/",
];

/// How many workloads' statuses are written at once, like the controller manager's
/// `--concurrent-deployment-syncs` (5 by default) and its siblings. While applies trickle in,
/// a watch batch holds one or two workloads; after a start-up or a burst it holds many, and
/// their status writes then share the store's group commits instead of taking one commit
/// (and fsync) each.
pub const CONCURRENT_SYNCS: usize = 8;

/// Starts the simulation loop.
pub fn spawn(api: Arc<Api>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if run(&api).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

async fn run(api: &Arc<Api>) -> Result<(), ()> {
    let snapshot = api.store.snapshot();
    let existing: Vec<String> = PREFIXES
        .iter()
        .flat_map(|prefix| snapshot.range(prefix, None).map(|kv| kv.key.clone()))
        .collect();
    // The revisions of the simulator's own writes: their events need no sync (the spec they
    // carry is the one the status was computed from).
    let mut own: HashMap<String, u64> = HashMap::new();
    sync_all(api, existing, &mut own).await;
    let mut watcher = api
        .store
        .watch("/registry/", snapshot.revision())
        .map_err(|_| ())?;
    loop {
        let batch = match watcher.next_batch().await {
            Ok(b) => b,
            Err(flotilla_store::WatchError::Closed) => return Ok(()),
            Err(_) => return Err(()),
        };
        let mut keys: HashSet<String> = HashSet::new();
        for event in batch.events {
            if !PREFIXES.iter().any(|p| event.key.starts_with(p)) {
                continue;
            }
            if event.kind == EventKind::Delete {
                own.remove(&event.key);
                continue;
            }
            if own.get(&event.key) == Some(&event.revision) {
                own.remove(&event.key);
                continue;
            }
            keys.insert(event.key.clone());
        }
        sync_all(api, keys.into_iter().collect(), &mut own).await;
    }
}

/// Syncs `keys` (distinct), [`CONCURRENT_SYNCS`] at a time, and records the revisions written.
async fn sync_all(api: &Api, keys: Vec<String>, own: &mut HashMap<String, u64>) {
    let written: Vec<(String, Option<u64>)> = futures::stream::iter(keys)
        .map(|key| async move {
            let revision = sync(api, &key).await;
            (key, revision)
        })
        .buffer_unordered(CONCURRENT_SYNCS)
        .collect()
        .await;
    for (key, revision) in written {
        match revision {
            Some(revision) => own.insert(key, revision),
            None => own.remove(&key),
        };
    }
}

/// Writes the status `key`'s workload would have; the revision written, if it wrote.
async fn sync(api: &Api, key: &str) -> Option<u64> {
    for _ in 0..4 {
        let kv = api.store.get(key)?;
        let def = api.catalog().for_key(key)?;
        let obj = api.to_value(&def, &kv.value, kv.mod_revision);
        if objects::is_deleting(&obj) {
            return None;
        }
        let mut new = obj.clone();
        new["status"] = desired_status(&def, &obj);
        match api
            .commit_update(
                &def,
                &kv,
                obj,
                new,
                &WriteOptions {
                    field_manager: Some("flotilla-workload-simulator".into()),
                    ..WriteOptions::default()
                },
                Some("status"),
            )
            .await
        {
            Ok(written) => {
                let revision = objects::meta_str(&written.object, "resourceVersion")
                    .and_then(|rv| rv.parse().ok())
                    .filter(|&rv| rv != kv.mod_revision);
                return revision;
            }
            Err(e) if e.reason == "Conflict" => continue,
            Err(e) => {
                tracing::debug!(key, error = %e, "workload simulation could not write status");
                return None;
            }
        }
    }
    None
}

fn condition(old: &Value, ty: &str, reason: &str, message: &str, with_update_time: bool) -> Value {
    let now = objects::now_rfc3339();
    let previous = old["status"]["conditions"].as_array().and_then(|cs| {
        cs.iter()
            .find(|c| c["type"] == ty && c["status"] == "True" && c["reason"] == reason)
    });
    let transition = previous
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map_or(now.clone(), str::to_owned);
    let mut c = json!({"type": ty, "status": "True", "reason": reason, "message": message, "lastTransitionTime": transition});
    if with_update_time {
        let update = previous
            .and_then(|c| c["lastUpdateTime"].as_str())
            .map_or(now, str::to_owned);
        c["lastUpdateTime"] = json!(update);
    }
    c
}

/// Annotation on a member workload: `"true"` reports it as if no pod could run.
pub const UNAVAILABLE_ANNOTATION: &str = "simulate.flotilla.io/unavailable";

/// A `status: "False"` condition, keeping the transition time while it stays False.
fn false_condition(old: &Value, ty: &str, reason: &str, message: &str) -> Value {
    let previous = old["status"]["conditions"].as_array().and_then(|cs| {
        cs.iter()
            .find(|c| c["type"] == ty && c["status"] == "False" && c["reason"] == reason)
    });
    let transition = previous
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map_or_else(objects::now_rfc3339, str::to_owned);
    json!({"type": ty, "status": "False", "reason": reason, "message": message,
           "lastTransitionTime": transition, "lastUpdateTime": transition})
}

/// The status a controller reports when no pod of `obj` can run.
fn unavailable_status(def: &ResourceDef, obj: &Value) -> Value {
    let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    match def.kind.as_str() {
        "Deployment" => json!({
            "observedGeneration": generation,
            "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": 0, "availableReplicas": 0, "unavailableReplicas": replicas,
            "conditions": [false_condition(obj, "Available", "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.")],
        }),
        "StatefulSet" => json!({
            "observedGeneration": generation,
            "replicas": replicas, "readyReplicas": 0, "currentReplicas": replicas,
            "updatedReplicas": replicas, "availableReplicas": 0,
        }),
        "ReplicaSet" => json!({
            "observedGeneration": generation,
            "replicas": replicas, "fullyLabeledReplicas": replicas,
            "readyReplicas": 0, "availableReplicas": 0,
        }),
        "DaemonSet" => json!({
            "observedGeneration": generation,
            "currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberAvailable": 0,
            "numberMisscheduled": 0, "numberReady": 0, "updatedNumberScheduled": 1,
            "numberUnavailable": 1,
        }),
        _ => obj["status"].clone(),
    }
}

/// The status a controller would report once every pod is running and ready (or, for a
/// workload annotated [`UNAVAILABLE_ANNOTATION`], when none can run).
pub fn desired_status(def: &ResourceDef, obj: &Value) -> Value {
    if obj["metadata"]["annotations"][UNAVAILABLE_ANNOTATION] == "true" && def.kind != "Job" {
        return unavailable_status(def, obj);
    }
    let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let revision = format!("{name}-{}", short_hash(&obj["spec"]["template"]));
    match def.kind.as_str() {
        "Deployment" => {
            let mut s = json!({
                "observedGeneration": generation,
                "conditions": [
                    condition(obj, "Available", "MinimumReplicasAvailable", "Deployment has minimum availability.", true),
                    condition(obj, "Progressing", "NewReplicaSetAvailable",
                        &format!("ReplicaSet \"{revision}\" has successfully progressed."), true),
                ],
            });
            if replicas > 0 {
                for f in [
                    "replicas",
                    "updatedReplicas",
                    "readyReplicas",
                    "availableReplicas",
                ] {
                    s[f] = json!(replicas);
                }
            }
            s
        }
        "StatefulSet" => json!({
            "observedGeneration": generation,
            "replicas": replicas, "readyReplicas": replicas, "currentReplicas": replicas,
            "updatedReplicas": replicas, "availableReplicas": replicas,
            "currentRevision": revision, "updateRevision": revision, "collisionCount": 0,
        }),
        "ReplicaSet" => json!({
            "observedGeneration": generation,
            "replicas": replicas, "fullyLabeledReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
        }),
        "DaemonSet" => json!({
            "observedGeneration": generation,
            "currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberAvailable": 1,
            "numberMisscheduled": 0, "numberReady": 1, "updatedNumberScheduled": 1,
        }),
        "Job" => {
            let completions = obj["spec"]["completions"].as_i64().unwrap_or(1);
            let start = obj["status"]["startTime"]
                .as_str()
                .map_or_else(objects::now_rfc3339, str::to_owned);
            let done = obj["status"]["completionTime"]
                .as_str()
                .map_or_else(|| start.clone(), str::to_owned);
            if obj["spec"]["suspend"].as_bool() == Some(true) {
                return json!({"conditions": [condition(obj, "Suspended", "JobSuspended", "Job suspended", false)]});
            }
            json!({
                "startTime": start,
                "completionTime": done,
                "succeeded": completions,
                "active": 0, "ready": 0, "terminating": 0,
                "uncountedTerminatedPods": {},
                "conditions": [
                    condition(obj, "SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods", false),
                    condition(obj, "Complete", "CompletionsReached", "Reached expected number of succeeded pods", false),
                ],
            })
        }
        _ => obj["status"].clone(),
    }
}

fn short_hash(v: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = h.finish();
    (0..10)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_becomes_available_and_stays_stable() {
        let catalog = crate::resources::Catalog::new(crate::builtin::definitions());
        let def = catalog
            .get("apps", "v1", "deployments")
            .unwrap_or_else(|| panic!("deployments served"));
        let mut d =
            json!({"metadata": {"name": "web", "generation": 2}, "spec": {"replicas": 3, "template": {}}});
        let s = desired_status(&def, &d);
        assert_eq!(s["readyReplicas"], 3);
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(s["conditions"][0]["type"], "Available");
        d["status"] = s.clone();
        // Recomputing keeps the timestamps: no write loop.
        assert_eq!(desired_status(&def, &d), s);
    }

    #[test]
    fn an_unavailable_workload_reports_no_available_replica_until_the_mark_goes() {
        let catalog = crate::resources::Catalog::new(crate::builtin::definitions());
        let def = catalog
            .get("apps", "v1", "deployments")
            .unwrap_or_else(|| panic!("deployments served"));
        let mut d = json!({
            "metadata": {"name": "web", "generation": 2, "annotations": {UNAVAILABLE_ANNOTATION: "true"}},
            "spec": {"replicas": 3, "template": {}},
        });
        let s = desired_status(&def, &d);
        assert_eq!(s["availableReplicas"], 0);
        assert_eq!(s["updatedReplicas"], 3);
        assert_eq!(s["conditions"][0]["status"], "False");
        // Karmada's health rule reads this as Unhealthy: availableReplicas < updatedReplicas.
        assert_eq!(s["observedGeneration"], 2);
        d["status"] = s.clone();
        assert_eq!(desired_status(&def, &d), s, "stable: no write loop");
        d["metadata"]["annotations"] = json!({});
        assert_eq!(desired_status(&def, &d)["availableReplicas"], 3);
    }
}
