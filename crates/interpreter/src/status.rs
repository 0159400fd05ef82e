//! Status: what part of a member object's status is reflected into Work and binding status
//! (Karmada's `reflectstatus.go`), and how the per-cluster statuses combine into the template's
//! status (Karmada's `aggregatestatus.go` and `helper/job.go`).

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::well_known::RESOURCE_TEMPLATE_GENERATION_ANNOTATION;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value, json};

use crate::kind::Kind;

/// The part of a member object's `status` that is reflected into Work and binding status.
///
/// - Deployment: `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
///   `unavailableReplicas`, `observedGeneration`, plus `generation` (the member's
///   `metadata.generation`) and `resourceTemplateGeneration` (its
///   `resourcetemplate.karmada.io/generation` annotation), which aggregation needs to tell
///   whether the member has caught up with the template; `None` when nothing is set.
/// - ReplicaSet: likewise with `replicas`, `readyReplicas`, `availableReplicas`,
///   `observedGeneration`.
/// - StatefulSet: likewise with `availableReplicas`, `currentReplicas`, `readyReplicas`,
///   `replicas`, `updatedReplicas`, and `observedGeneration`, which Karmada leaves out (so its
///   StatefulSet `observedGeneration` never advances; flotilla keeps it so it can).
/// - DaemonSet: likewise with the `*NumberScheduled`, `number*` counts and
///   `observedGeneration`.
/// - Service: `{loadBalancer}` for `type: LoadBalancer`, otherwise `None`.
/// - Job: `active`, `succeeded`, `failed`, `conditions`, `startTime`, `completionTime`.
/// - PodDisruptionBudget: `disruptionsAllowed`, `expectedPods`, `desiredHealthy`,
///   `currentHealthy`, `disruptedPods`.
/// - HorizontalPodAutoscaler (`autoscaling/v2`): `currentReplicas`, `desiredReplicas`.
/// - Any other kind (Pod, Ingress, PersistentVolumeClaim, CRDs, ...): the whole `status`.
///
/// `None` when the object has no `status` object. Counts of the wrong type are left out rather
/// than failing the whole reflection; zero counts are left out, as Go's `omitempty` does. An
/// unparsable generation annotation reads as 0, i.e. "not caught up".
pub fn reflect_status(obj: &Value) -> Option<Value> {
    let status = obj.get("status")?.as_object()?;
    let picked = match Kind::of(obj) {
        Some(Kind::Deployment) => {
            let fields = [
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
                "unavailableReplicas",
                "observedGeneration",
            ];
            return non_empty(with_generations(obj, status, &fields));
        }
        Some(Kind::ReplicaSet) => {
            let fields = [
                "replicas",
                "readyReplicas",
                "availableReplicas",
                "observedGeneration",
            ];
            return non_empty(with_generations(obj, status, &fields));
        }
        Some(Kind::StatefulSet) => with_generations(
            obj,
            status,
            &[
                "availableReplicas",
                "currentReplicas",
                "readyReplicas",
                "replicas",
                "updatedReplicas",
                "observedGeneration",
            ],
        ),
        Some(Kind::DaemonSet) => with_generations(
            obj,
            status,
            &[
                "currentNumberScheduled",
                "desiredNumberScheduled",
                "numberAvailable",
                "numberMisscheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberUnavailable",
                "observedGeneration",
            ],
        ),
        Some(Kind::Service) => {
            let service_type = obj
                .get("spec")
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str);
            if service_type != Some("LoadBalancer") {
                return None;
            }
            let load_balancer = status.get("loadBalancer").filter(|v| v.is_object()).cloned();
            let mut out = Map::new();
            out.insert(
                "loadBalancer".to_owned(),
                load_balancer.unwrap_or_else(|| json!({})),
            );
            out
        }
        Some(Kind::Job) => pick(
            status,
            &[
                "active",
                "succeeded",
                "failed",
                "conditions",
                "startTime",
                "completionTime",
            ],
        ),
        Some(Kind::PodDisruptionBudget) => pick(
            status,
            &[
                "disruptionsAllowed",
                "expectedPods",
                "desiredHealthy",
                "currentHealthy",
                "disruptedPods",
            ],
        ),
        Some(Kind::HorizontalPodAutoscaler) => pick(status, &["currentReplicas", "desiredReplicas"]),
        _ => status.clone(),
    };
    Some(Value::Object(picked))
}

fn non_empty(map: Map<String, Value>) -> Option<Value> {
    if map.is_empty() {
        None
    } else {
        Some(Value::Object(map))
    }
}

/// The fields of `status` named in `fields`, as they are.
fn pick(status: &Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    fields
        .iter()
        .filter_map(|field| {
            let value = status.get(*field).filter(|v| !v.is_null())?;
            Some(((*field).to_owned(), value.clone()))
        })
        .collect()
}

/// The integer `fields` of `status` plus the member's generation and template generation.
fn with_generations(obj: &Value, status: &Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    let generation = obj
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let template_generation = obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(RESOURCE_TEMPLATE_GENERATION_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|text| text.trim().parse::<i64>().ok())
        .unwrap_or(0);
    set_count(&mut out, "generation", generation);
    set_count(&mut out, "resourceTemplateGeneration", template_generation);
    for field in fields {
        set_count(&mut out, field, int(status, field));
    }
    out
}

/// An integer field, 0 when absent or not an integer.
fn int(map: &Map<String, Value>, key: &str) -> i64 {
    map.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// Writes a count, or removes it when zero (Go's `omitempty`).
fn set_count(map: &mut Map<String, Value>, key: &str, value: i64) {
    if value == 0 {
        map.remove(key);
    } else {
        map.insert(key.to_owned(), Value::from(value));
    }
}

/// The per-cluster reflected statuses as objects; `None` for a status not collected yet (null)
/// or not an object.
fn members(per_cluster: &[(String, Value)]) -> impl Iterator<Item = (&str, Option<&Map<String, Value>>)> {
    per_cluster
        .iter()
        .map(|(cluster, status)| (cluster.as_str(), status.as_object()))
}

/// The template's new `status`, combined from the statuses its member objects reflected
/// (`per_cluster`: cluster name and [`reflect_status`] output; `Value::Null` for a cluster whose
/// status was not collected yet).
///
/// `Some(status)` is the status to write (equal to the template's current status when nothing
/// changed); `None` means the kind has no aggregation, or the template has no status and nothing
/// to add: leave the template's status alone. Per kind (Karmada's `aggregatestatus.go`):
///
/// - Deployment, ReplicaSet, StatefulSet, DaemonSet: the counts are summed over clusters and
///   replace the template's; other status fields are kept. `observedGeneration` becomes the
///   template's `metadata.generation` only when every cluster reported a status whose
///   `observedGeneration >= generation` and `resourceTemplateGeneration >=` the template's
///   generation (every member has caught up with the current template); otherwise it keeps its
///   value. (Karmada compares a StatefulSet's template generation against the member's own
///   generation, which looks like a slip; flotilla uses the template's, as for the others.)
/// - Job: left alone once the template's status has `Complete` or `Failed`. Otherwise `active`,
///   `succeeded` and `failed` are summed; a `Failed` condition names the clusters whose Job
///   failed; `Complete` (and `SuccessCriteriaMet` if every cluster met it) is set when every
///   cluster's Job completed; `startTime` is the earliest once every cluster started, and
///   `completionTime` the latest once every cluster completed. Condition times are the latest
///   of the members' own conditions of that type (Karmada stamps "now", which would make the
///   result depend on when it is computed).
/// - CronJob: `active` concatenated, `lastScheduleTime` and `lastSuccessfulTime` the latest.
/// - Pod: `phase` is the first of Failed, Pending, Running, Succeeded that any cluster reports
///   (an uncollected status counts as Pending); container and init container statuses are
///   listed with only `ready` and `state`. With no clusters the status is left alone.
/// - Service (`type: LoadBalancer` only) and Ingress: load-balancer ingresses merged,
///   deduplicated and sorted by IP, then hostname.
/// - PersistentVolume: `phase` is the first of Failed, Pending, Available, Bound, Released
///   (uncollected counts as Pending). PersistentVolumeClaim: `Lost` if any cluster lost it,
///   else any phase other than `Bound`, else `Bound`.
/// - PodDisruptionBudget: counts summed, `disruptedPods` keyed `<cluster>/<pod>`.
///   HorizontalPodAutoscaler: `currentReplicas` and `desiredReplicas` summed.
///
/// A member status that is not an object counts as not collected.
pub fn aggregate_status(template: &Value, per_cluster: &[(String, Value)]) -> Option<Value> {
    let kind = Kind::of(template)?;
    let current = template.get("status").cloned();
    let old = current
        .as_ref()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let generation = template
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let new = match kind {
        Kind::Deployment => sum_counts(
            old,
            generation,
            per_cluster,
            &[
                "replicas",
                "readyReplicas",
                "updatedReplicas",
                "availableReplicas",
                "unavailableReplicas",
            ],
        ),
        Kind::ReplicaSet => sum_counts(
            old,
            generation,
            per_cluster,
            &["replicas", "readyReplicas", "availableReplicas"],
        ),
        Kind::StatefulSet => sum_counts(
            old,
            generation,
            per_cluster,
            &[
                "availableReplicas",
                "currentReplicas",
                "readyReplicas",
                "replicas",
                "updatedReplicas",
            ],
        ),
        Kind::DaemonSet => sum_counts(
            old,
            generation,
            per_cluster,
            &[
                "currentNumberScheduled",
                "desiredNumberScheduled",
                "numberAvailable",
                "numberMisscheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberUnavailable",
            ],
        ),
        Kind::Job => {
            if job_finished(&old) {
                return current;
            }
            aggregate_job(&old, per_cluster)
        }
        Kind::CronJob => aggregate_cron_job(old, per_cluster),
        Kind::Pod => {
            if per_cluster.is_empty() {
                return current;
            }
            aggregate_pod(per_cluster)
        }
        Kind::Service => {
            let service_type = template
                .get("spec")
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str);
            if service_type != Some("LoadBalancer") {
                return current;
            }
            aggregate_load_balancer(per_cluster)
        }
        Kind::Ingress => aggregate_load_balancer(per_cluster),
        Kind::PersistentVolume => {
            let order = ["Failed", "Pending", "Available", "Bound", "Released"];
            aggregate_phase(per_cluster, &order)
        }
        Kind::PersistentVolumeClaim => aggregate_claim_phase(per_cluster),
        Kind::PodDisruptionBudget => aggregate_disruption_budget(per_cluster),
        Kind::HorizontalPodAutoscaler => {
            let mut status = Map::new();
            for field in ["currentReplicas", "desiredReplicas"] {
                let total: i64 = members(per_cluster)
                    .filter_map(|(_, s)| s)
                    .map(|s| int(s, field))
                    .sum();
                status.insert(field.to_owned(), Value::from(total));
            }
            status
        }
    };
    Some(Value::Object(new))
}

/// Sums `fields` over members into the template's status and applies the observedGeneration
/// rule (see [`aggregate_status`]).
fn sum_counts(
    mut status: Map<String, Value>,
    generation: i64,
    per_cluster: &[(String, Value)],
    fields: &[&str],
) -> Map<String, Value> {
    let mut totals = vec![0_i64; fields.len()];
    let mut caught_up = 0;
    for (_, member) in members(per_cluster) {
        let Some(member) = member else {
            continue;
        };
        if int(member, "observedGeneration") >= int(member, "generation")
            && int(member, "resourceTemplateGeneration") >= generation
        {
            caught_up += 1;
        }
        for (total, field) in totals.iter_mut().zip(fields) {
            *total = total.saturating_add(int(member, field));
        }
    }
    if caught_up == per_cluster.len() {
        set_count(&mut status, "observedGeneration", generation);
    }
    for (total, field) in totals.into_iter().zip(fields) {
        set_count(&mut status, field, total);
    }
    status
}

/// Whether a value is a list of conditions holding `condition_type` with status `True`.
fn true_condition<'a>(
    status: &'a Map<String, Value>,
    condition_type: &str,
) -> Option<&'a Map<String, Value>> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .filter_map(Value::as_object)
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some(condition_type)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

fn job_finished(status: &Map<String, Value>) -> bool {
    true_condition(status, "Complete").is_some() || true_condition(status, "Failed").is_some()
}

/// Whether timestamp `a` is later than `b`: compared as times when both parse, else as text.
fn later(a: &Value, b: &Value) -> bool {
    let parse = |v: &Value| serde_json::from_value::<Time>(v.clone()).ok();
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => a.0 > b.0,
        _ => a.as_str().unwrap_or("") > b.as_str().unwrap_or(""),
    }
}

/// Keeps the latest of the timestamps offered.
#[derive(Default)]
struct Latest(Option<Value>);

impl Latest {
    fn offer(&mut self, time: Option<&Value>) {
        let Some(time) = time.filter(|t| !t.is_null()) else {
            return;
        };
        if self.0.as_ref().is_none_or(|current| later(time, current)) {
            self.0 = Some(time.clone());
        }
    }
}

fn aggregated_condition(condition_type: &str, reason: &str, message: String, time: &Latest) -> Value {
    let mut condition = Map::new();
    condition.insert("type".to_owned(), Value::from(condition_type));
    condition.insert("status".to_owned(), Value::from("True"));
    if let Some(time) = &time.0 {
        condition.insert("lastProbeTime".to_owned(), time.clone());
        condition.insert("lastTransitionTime".to_owned(), time.clone());
    }
    condition.insert("reason".to_owned(), Value::from(reason));
    condition.insert("message".to_owned(), Value::from(message));
    Value::Object(condition)
}

fn aggregate_job(old: &Map<String, Value>, per_cluster: &[(String, Value)]) -> Map<String, Value> {
    let (mut active, mut succeeded, mut failed) = (0_i64, 0_i64, 0_i64);
    let mut failed_clusters = Vec::new();
    let (mut completed, mut criteria_met, mut started, mut finished) = (0, 0, 0, 0);
    let (mut failed_at, mut completed_at, mut criteria_met_at) =
        (Latest::default(), Latest::default(), Latest::default());
    let mut earliest_start: Option<Value> = None;
    let mut latest_completion = Latest::default();
    for (cluster, member) in members(per_cluster) {
        let Some(member) = member else {
            continue;
        };
        active = active.saturating_add(int(member, "active"));
        succeeded = succeeded.saturating_add(int(member, "succeeded"));
        failed = failed.saturating_add(int(member, "failed"));
        if let Some(condition) = true_condition(member, "Complete") {
            completed += 1;
            completed_at.offer(condition.get("lastTransitionTime"));
        } else if let Some(condition) = true_condition(member, "Failed") {
            failed_clusters.push(cluster);
            failed_at.offer(condition.get("lastTransitionTime"));
        }
        if let Some(condition) = true_condition(member, "SuccessCriteriaMet") {
            criteria_met += 1;
            criteria_met_at.offer(condition.get("lastTransitionTime"));
        }
        if let Some(start) = member.get("startTime").filter(|v| !v.is_null()) {
            started += 1;
            if earliest_start
                .as_ref()
                .is_none_or(|current| later(current, start))
            {
                earliest_start = Some(start.clone());
            }
        }
        if let Some(completion) = member.get("completionTime").filter(|v| !v.is_null()) {
            finished += 1;
            latest_completion.offer(Some(completion));
        }
    }
    let all = per_cluster.len();
    let mut status = Map::new();
    set_count(&mut status, "active", active);
    set_count(&mut status, "succeeded", succeeded);
    set_count(&mut status, "failed", failed);
    let mut conditions = Vec::new();
    if !failed_clusters.is_empty() {
        conditions.push(aggregated_condition(
            "Failed",
            "JobFailed",
            format!(
                "Job executed failed in member clusters {}",
                failed_clusters.join(",")
            ),
            &failed_at,
        ));
    }
    if completed == all && completed > 0 {
        conditions.push(aggregated_condition(
            "Complete",
            "Completed",
            "Job completed".to_owned(),
            &completed_at,
        ));
        if criteria_met == all {
            conditions.push(aggregated_condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "All member clusters have met success criteria".to_owned(),
                &criteria_met_at,
            ));
        }
    }
    if !conditions.is_empty() {
        status.insert("conditions".to_owned(), Value::Array(conditions));
    }
    let start = match old.get("startTime").filter(|v| !v.is_null()) {
        Some(start) => Some(start.clone()),
        None if started == all && started > 0 => earliest_start,
        None => None,
    };
    if let Some(start) = start {
        status.insert("startTime".to_owned(), start);
    }
    if finished == all
        && let Some(completion) = latest_completion.0
    {
        status.insert("completionTime".to_owned(), completion);
    }
    status
}

fn aggregate_cron_job(mut status: Map<String, Value>, per_cluster: &[(String, Value)]) -> Map<String, Value> {
    let mut active = Vec::new();
    let (mut scheduled, mut successful) = (Latest::default(), Latest::default());
    for (_, member) in members(per_cluster) {
        let Some(member) = member else {
            continue;
        };
        if let Some(list) = member.get("active").and_then(Value::as_array) {
            active.extend(list.iter().cloned());
        }
        scheduled.offer(member.get("lastScheduleTime"));
        successful.offer(member.get("lastSuccessfulTime"));
    }
    for (key, value) in [
        ("active", (!active.is_empty()).then_some(Value::Array(active))),
        ("lastScheduleTime", scheduled.0),
        ("lastSuccessfulTime", successful.0),
    ] {
        match value {
            Some(value) => status.insert(key.to_owned(), value),
            None => status.remove(key),
        };
    }
    status
}

/// The first phase of `order` that any member reports (uncollected members count as Pending).
fn aggregate_phase(per_cluster: &[(String, Value)], order: &[&str]) -> Map<String, Value> {
    let phases: BTreeSet<&str> = members(per_cluster)
        .map(|(_, member)| match member {
            Some(member) => member.get("phase").and_then(Value::as_str).unwrap_or(""),
            None => "Pending",
        })
        .collect();
    let mut status = Map::new();
    if let Some(phase) = order.iter().find(|phase| phases.contains(*phase)) {
        status.insert("phase".to_owned(), Value::from(*phase));
    }
    status
}

fn aggregate_pod(per_cluster: &[(String, Value)]) -> Map<String, Value> {
    let mut status = aggregate_phase(per_cluster, &["Failed", "Pending", "Running", "Succeeded"]);
    let summarize = |list: Option<&Value>| -> Vec<Value> {
        list.and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|item| {
                        let ready = item.get("ready").and_then(Value::as_bool).unwrap_or(false);
                        let state = item.get("state").filter(|s| s.is_object()).cloned();
                        json!({"ready": ready, "state": state.unwrap_or_else(|| json!({}))})
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut containers, mut init_containers) = (Vec::new(), Vec::new());
    for (_, member) in members(per_cluster) {
        let Some(member) = member else {
            continue;
        };
        containers.extend(summarize(member.get("containerStatuses")));
        init_containers.extend(summarize(member.get("initContainerStatuses")));
    }
    if !containers.is_empty() {
        status.insert("containerStatuses".to_owned(), Value::Array(containers));
    }
    if !init_containers.is_empty() {
        status.insert("initContainerStatuses".to_owned(), Value::Array(init_containers));
    }
    status
}

fn aggregate_claim_phase(per_cluster: &[(String, Value)]) -> Map<String, Value> {
    let mut phase = "Bound";
    for (_, member) in members(per_cluster) {
        let Some(member) = member else {
            continue;
        };
        let member_phase = member.get("phase").and_then(Value::as_str).unwrap_or("");
        if member_phase == "Lost" {
            phase = "Lost";
            break;
        }
        if member_phase != "Bound" {
            phase = member_phase;
        }
    }
    let mut status = Map::new();
    if !phase.is_empty() {
        status.insert("phase".to_owned(), Value::from(phase));
    }
    status
}

fn aggregate_disruption_budget(per_cluster: &[(String, Value)]) -> Map<String, Value> {
    let fields = [
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
        "disruptionsAllowed",
    ];
    let mut totals = [0_i64; 4];
    let mut disrupted = Map::new();
    for (cluster, member) in members(per_cluster) {
        let Some(member) = member else {
            continue;
        };
        for (total, field) in totals.iter_mut().zip(fields) {
            *total = total.saturating_add(int(member, field));
        }
        if let Some(pods) = member.get("disruptedPods").and_then(Value::as_object) {
            for (pod, time) in pods {
                disrupted.insert(format!("{cluster}/{pod}"), time.clone());
            }
        }
    }
    let mut status = Map::new();
    for (total, field) in totals.into_iter().zip(fields) {
        status.insert(field.to_owned(), Value::from(total));
    }
    if !disrupted.is_empty() {
        status.insert("disruptedPods".to_owned(), Value::Object(disrupted));
    }
    status
}

/// Merges `status.loadBalancer.ingress` of every member: one entry per (IP, hostname, IP mode),
/// with the union of their port statuses, sorted.
fn aggregate_load_balancer(per_cluster: &[(String, Value)]) -> Map<String, Value> {
    /// An ingress without its ports, and its ports keyed for sorting.
    type Entry = (Map<String, Value>, BTreeMap<String, Value>);
    let mut merged: BTreeMap<(String, String, String), Entry> = BTreeMap::new();
    for (_, member) in members(per_cluster) {
        let Some(ingresses) = member
            .and_then(|m| m.get("loadBalancer"))
            .and_then(|lb| lb.get("ingress"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for ingress in ingresses.iter().filter_map(Value::as_object) {
            let text = |key: &str| ingress.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
            let key = (text("ip"), text("hostname"), text("ipMode"));
            let entry = merged.entry(key).or_insert_with(|| {
                let mut base = ingress.clone();
                base.remove("ports");
                (base, BTreeMap::new())
            });
            for port in ingress
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let sort_key = format!(
                    "{:010}/{}/{}",
                    port.get("port").and_then(Value::as_i64).unwrap_or(0),
                    port.get("protocol").and_then(Value::as_str).unwrap_or(""),
                    port.get("error").and_then(Value::as_str).unwrap_or("")
                );
                entry.1.insert(sort_key, port.clone());
            }
        }
    }
    let ingress: Vec<Value> = merged
        .into_values()
        .map(|(mut base, ports)| {
            if !ports.is_empty() {
                base.insert("ports".to_owned(), Value::Array(ports.into_values().collect()));
            }
            Value::Object(base)
        })
        .collect();
    let mut load_balancer = Map::new();
    if !ingress.is_empty() {
        load_balancer.insert("ingress".to_owned(), Value::Array(ingress));
    }
    let mut status = Map::new();
    status.insert("loadBalancer".to_owned(), Value::Object(load_balancer));
    status
}
