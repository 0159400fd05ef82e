//! Replicas: how many a template asks for and what each needs (Karmada's `replica.go`), and
//! rewriting a manifest for one cluster's share (Karmada's `revisereplica.go`, plus the Job
//! completions split of `controllers/binding/common.go`).

use std::collections::BTreeMap;

use flotilla_api::work::{NodeClaim, ReplicaRequirements, TargetCluster};
use k8s_openapi::api::core::v1::{NodeSelector, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use serde_json::{Map, Value};

use crate::error::InterpretError;
use crate::kind::Kind;
use crate::node::{Node, describe};
use crate::quantity::{Quantity, format_binary, format_decimal};

/// The replicas a template asks for and what one replica needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplicaInfo {
    /// Desired replicas (for a Job: the pods that run at once).
    pub replicas: i32,
    /// What one replica needs; `None` when the pod template states no requests and no node
    /// constraints (Karmada's rule).
    pub requirements: Option<ReplicaRequirements>,
}

/// Replicas and per-replica requirements of a template; `Ok(None)` for kinds without replicas.
///
/// | kind | replicas |
/// |---|---|
/// | `apps/v1` Deployment, StatefulSet, ReplicaSet | `spec.replicas`, 1 when absent |
/// | `batch/v1` Job | `min(parallelism, completions)`; parallelism 1 when absent, completions = parallelism when absent |
/// | `v1` Pod | 1 |
///
/// Every other kind (DaemonSet and CronJob included, as in Karmada) has no replicas.
///
/// Karmada reads templates after kube-apiserver defaulting, so it reads an absent count as 0;
/// flotilla may read templates that were never defaulted, so it applies Kubernetes' own defaults
/// (1) instead, which gives the same result on defaulted objects.
///
/// Requirements come from the pod template (Karmada's `GenerateReplicaRequirements`):
/// resource requests summed over `containers` (a container's limit stands in for a missing
/// request), each resource raised to the largest `initContainers` request, plus `overhead`;
/// `nodeSelector`, required node affinity and `tolerations` as the node claim;
/// `priorityClassName`; and the template's namespace. Only cpu, memory, ephemeral-storage, pods
/// and extended/hugepages/attachable-volume resources are counted, as in Karmada.
pub fn replicas(obj: &Value) -> Result<Option<ReplicaInfo>, InterpretError> {
    let Some(kind) = Kind::of(obj) else {
        return Ok(None);
    };
    let object = describe(obj);
    let root = Node::root(obj, &object);
    let replicas = match kind {
        Kind::Deployment | Kind::StatefulSet | Kind::ReplicaSet => {
            let spec = root.field("spec")?;
            let count = match &spec {
                Some(spec) => spec.opt_i32("replicas")?,
                None => None,
            };
            non_negative(&root, "spec.replicas", count.unwrap_or(1))?
        }
        Kind::Job => {
            let spec = root.field("spec")?;
            let (parallelism, completions) = match &spec {
                Some(spec) => (spec.opt_i32("parallelism")?, spec.opt_i32("completions")?),
                None => (None, None),
            };
            let parallelism = non_negative(&root, "spec.parallelism", parallelism.unwrap_or(1))?;
            let completions = non_negative(&root, "spec.completions", completions.unwrap_or(parallelism))?;
            // A fixed-completion Job never runs more pods at once than completions remain.
            parallelism.min(completions)
        }
        Kind::Pod => 1,
        _ => return Ok(None),
    };
    let pod_spec = match kind.pod_spec_path() {
        Some(path) => root.descend(path)?,
        None => None,
    };
    let namespace = root
        .descend(&["metadata", "namespace"])?
        .map(|n| n.as_str())
        .transpose()?
        .filter(|ns| !ns.is_empty());
    let requirements = match pod_spec {
        Some(spec) => requirements(&spec, namespace)?,
        None => None,
    };
    Ok(Some(ReplicaInfo {
        replicas,
        requirements,
    }))
}

fn non_negative(root: &Node<'_>, path: &str, value: i32) -> Result<i32, InterpretError> {
    if value < 0 {
        return Err(InterpretError::InvalidValue {
            object: root.object().to_owned(),
            path: path.to_owned(),
            message: format!("{value} is negative; set 0 or more"),
        });
    }
    Ok(value)
}

/// Requirements of one replica from a `PodSpec`.
fn requirements(
    spec: &Node<'_>,
    namespace: Option<&str>,
) -> Result<Option<ReplicaRequirements>, InterpretError> {
    let node_selector: BTreeMap<String, String> = match spec.field("nodeSelector")? {
        Some(node) => node.parse("node selector (a map of strings)")?,
        None => BTreeMap::new(),
    };
    let tolerations: Vec<Toleration> = match spec.field("tolerations")? {
        Some(node) => {
            node.items()?;
            node.parse("list of tolerations")?
        }
        None => Vec::new(),
    };
    let hard_node_affinity: Option<NodeSelector> = match spec.descend(&[
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
    ])? {
        Some(node) => Some(node.parse("node selector")?),
        None => None,
    };
    let node_claim = if node_selector.is_empty() && tolerations.is_empty() && hard_node_affinity.is_none() {
        None
    } else {
        Some(NodeClaim {
            hard_node_affinity,
            node_selector,
            tolerations,
        })
    };
    let resource_request = pod_requests(spec)?;
    if node_claim.is_none() && resource_request.is_empty() {
        return Ok(None);
    }
    Ok(Some(ReplicaRequirements {
        node_claim,
        resource_request,
        namespace: namespace.map(str::to_owned),
        priority_class_name: spec.opt_name("priorityClassName")?.map(str::to_owned),
    }))
}

/// How a resource is counted and printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// CPU, counted in milli-cores, printed in decimal.
    MilliCpu,
    /// Bytes or pages, counted in whole units, printed in binary (`Mi`, `Gi`).
    Binary,
    /// Counts, printed in decimal.
    Decimal,
}

/// How `name` is counted, or `None` when Karmada ignores it (an unprefixed unknown name).
fn unit_of(name: &str) -> Option<Unit> {
    match name {
        "cpu" => Some(Unit::MilliCpu),
        "memory" | "ephemeral-storage" => Some(Unit::Binary),
        "pods" => Some(Unit::Decimal),
        _ if name.starts_with("hugepages-") => Some(Unit::Binary),
        _ if name.starts_with("attachable-volumes-") || name.contains("kubernetes.io/") => {
            Some(Unit::Decimal)
        }
        // Extended resources: domain-prefixed names outside kubernetes.io.
        _ if name.contains('/') && !name.starts_with("requests.") => Some(Unit::Decimal),
        _ => None,
    }
}

/// A resource list read in counting units (milli-cores for cpu, whole units otherwise).
type Amounts = BTreeMap<String, (Unit, i64)>;

/// Reads a `ResourceList` (`{cpu: 100m, memory: 1Gi}`) at `node`.
fn read_resource_list(node: &Node<'_>) -> Result<Amounts, InterpretError> {
    let mut out = Amounts::new();
    for (name, value) in node.object_map()? {
        let Some(unit) = unit_of(name) else {
            continue;
        };
        let field = Node::at_path(value, format!("{}.{name}", node.path()), node.object());
        let text = match value {
            Value::String(text) => text.clone(),
            // YAML `cpu: 1` arrives as a number; Kubernetes accepts it as a quantity.
            Value::Number(number) => number.to_string(),
            Value::Null => continue,
            _ => return Err(field.wrong_type("a quantity string such as 500m or 1Gi")),
        };
        let quantity = Quantity::parse(&text).map_err(|message| field.invalid(message))?;
        let scale = if unit == Unit::MilliCpu { 3 } else { 0 };
        let amount = quantity
            .ceil_scaled(scale)
            .ok_or_else(|| field.invalid(format!("{text:?} is too large")))?;
        out.insert(name.clone(), (unit, amount));
    }
    Ok(out)
}

/// A container's effective requests: its requests, with limits standing in for missing ones.
fn container_requests(container: &Node<'_>) -> Result<Amounts, InterpretError> {
    let Some(resources) = container.field("resources")? else {
        return Ok(Amounts::new());
    };
    let mut requests = match resources.field("requests")? {
        Some(node) => read_resource_list(&node)?,
        None => Amounts::new(),
    };
    if let Some(limits) = resources.field("limits")? {
        for (name, amount) in read_resource_list(&limits)? {
            requests.entry(name).or_insert(amount);
        }
    }
    Ok(requests)
}

/// One replica's requests: containers summed, raised to each init container's, plus overhead.
fn pod_requests(spec: &Node<'_>) -> Result<BTreeMap<String, K8sQuantity>, InterpretError> {
    let mut total = Amounts::new();
    for container in spec.list("containers")? {
        for (name, (unit, amount)) in container_requests(&container)? {
            let entry = total.entry(name).or_insert((unit, 0));
            entry.1 = entry.1.saturating_add(amount);
        }
    }
    for container in spec.list("initContainers")? {
        for (name, (unit, amount)) in container_requests(&container)? {
            let entry = total.entry(name).or_insert((unit, 0));
            entry.1 = entry.1.max(amount);
        }
    }
    if let Some(overhead) = spec.field("overhead")? {
        for (name, (unit, amount)) in read_resource_list(&overhead)? {
            let entry = total.entry(name).or_insert((unit, 0));
            entry.1 = entry.1.saturating_add(amount);
        }
    }
    Ok(total
        .into_iter()
        .filter(|(_, (_, amount))| *amount > 0)
        .map(|(name, (unit, amount))| {
            let text = match unit {
                Unit::MilliCpu => format_decimal(amount, -3),
                Unit::Binary => format_binary(amount),
                Unit::Decimal => format_decimal(amount, 0),
            };
            (name, K8sQuantity(text))
        })
        .collect())
}

/// Sets a manifest's replicas to one cluster's share (Divided scheduling).
///
/// Deployment, StatefulSet and ReplicaSet get `spec.replicas`, a Job gets `spec.parallelism`
/// (Karmada's `revisereplica.go`); every other kind is left unchanged, as Karmada skips kinds
/// without a revise-replica interpreter. Unlike Karmada, which writes the field only when the
/// template already has it, the field is always written: an absent count means 1, and a cluster
/// given 0 must not fall back to that default.
///
/// A Divided Job's `spec.completions` is split separately: see [`divide_job_completions`] and
/// [`revise_job_completions`].
pub fn revise_replicas(obj: &mut Value, replicas: i32) -> Result<(), InterpretError> {
    let field = match Kind::of(obj) {
        Some(Kind::Deployment | Kind::StatefulSet | Kind::ReplicaSet) => "replicas",
        Some(Kind::Job) => "parallelism",
        _ => return Ok(()),
    };
    set_spec_field(obj, field, replicas, true)
}

/// Sets a Job's `spec.completions` to one cluster's share, only when the template sets it:
/// work-queue Jobs leave completions unset, and so does their manifest (Karmada's
/// `applyJobCompletions`). Other kinds are left unchanged.
pub fn revise_job_completions(obj: &mut Value, completions: i32) -> Result<(), InterpretError> {
    if Kind::of(obj) != Some(Kind::Job) {
        return Ok(());
    }
    set_spec_field(obj, "completions", completions, false)
}

fn set_spec_field(obj: &mut Value, field: &str, value: i32, create: bool) -> Result<(), InterpretError> {
    let object = describe(obj);
    if value < 0 {
        return Err(InterpretError::InvalidValue {
            object,
            path: format!("spec.{field}"),
            message: format!("cannot set {value}: replica counts must not be negative"),
        });
    }
    let wrong_type = |path: &str, got: &Value| InterpretError::WrongType {
        object: object.clone(),
        path: path.to_owned(),
        expected: "an object",
        got: crate::node::type_name(got),
    };
    let Some(map) = obj.as_object_mut() else {
        return Err(wrong_type(".", obj));
    };
    if map.get("spec").is_none_or(Value::is_null) {
        if !create {
            return Ok(());
        }
        map.insert("spec".to_owned(), Value::Object(Map::new()));
    }
    let spec = map.get_mut("spec");
    let Some(spec) = spec.and_then(Value::as_object_mut) else {
        let got = map.get("spec").unwrap_or(&Value::Null);
        return Err(wrong_type("spec", got));
    };
    if create || spec.get(field).is_some_and(|v| !v.is_null()) {
        spec.insert(field.to_owned(), Value::from(value));
    }
    Ok(())
}

/// Splits a Divided Job's `spec.completions` across its clusters in proportion to each
/// cluster's replicas (Karmada's `divideReplicasByJobCompletions`: Webster's method, ties going
/// to the cluster with fewer completions so far, then by name in an order picked by the parity
/// of the FNV-1a hash of the template's `metadata.uid`).
///
/// `Ok(None)` when the template is not a `batch/v1` Job, does not set `spec.completions`, or no
/// cluster has replicas; then completions stay as in the template. Karmada only splits when the
/// binding's replicas are positive and its placement is Divided: callers check that.
pub fn divide_job_completions(
    template: &Value,
    clusters: &[TargetCluster],
) -> Result<Option<BTreeMap<String, i32>>, InterpretError> {
    if Kind::of(template) != Some(Kind::Job) {
        return Ok(None);
    }
    let object = describe(template);
    let root = Node::root(template, &object);
    let Some(spec) = root.field("spec")? else {
        return Ok(None);
    };
    let Some(completions) = spec.opt_i32("completions")? else {
        return Ok(None);
    };
    let completions = non_negative(&root, "spec.completions", completions)?;
    let uid = root
        .descend(&["metadata", "uid"])?
        .map(|n| n.as_str())
        .transpose()?
        .unwrap_or("");
    let mut votes = BTreeMap::new();
    for cluster in clusters {
        votes.insert(cluster.name.clone(), i64::from(cluster.replicas.max(0)));
    }
    if votes.values().sum::<i64>() == 0 {
        return Ok(None);
    }
    Ok(Some(webster(completions, &votes, names_descending(uid))))
}

/// Whether Webster ties are broken towards the larger name (Karmada's `tieBreakerByUID`).
fn names_descending(uid: &str) -> bool {
    if uid.is_empty() {
        return false;
    }
    let mut hash: u32 = 0x811c_9dc5;
    for byte in uid.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash & 1 == 1
}

/// Allocates `seats` by Webster's (Sainte-Laguë) method: each seat goes to the party with the
/// highest `votes / (2 * seats + 1)`; ties go to fewer seats, then by name.
///
/// Seats are handed out in bulk up to a threshold first, so a Job with millions of completions
/// costs as little as one with ten: every priority above the threshold would be taken by the
/// one-at-a-time procedure before any below it, so the bulk step gives the same allocation.
fn webster(seats: i32, votes: &BTreeMap<String, i64>, names_descending: bool) -> BTreeMap<String, i32> {
    let mut allocation: BTreeMap<String, i32> = votes.keys().map(|name| (name.clone(), 0)).collect();
    let parties = i64::try_from(votes.len()).unwrap_or(i64::MAX);
    let total_votes: i64 = votes.values().sum();
    let mut remaining = i64::from(seats);
    // Threshold t = total_votes / (2 * seats - 3 * parties). A party's priorities above t
    // number ((votes * (2s - 3p) - 1) / total_votes + 1) / 2, which sums to at most
    // seats - parties, so the bulk step never overshoots and leaves O(parties) seats.
    let denominator = 2 * i64::from(seats) - 3 * parties;
    if denominator > 0 && total_votes > 0 {
        for (name, &vote) in votes {
            if vote <= 0 {
                continue;
            }
            let x = i128::from(vote) * i128::from(denominator);
            let bulk = ((x - 1) / i128::from(total_votes) + 1) / 2;
            let bulk = i32::try_from(bulk).unwrap_or(0);
            allocation.insert(name.clone(), bulk);
            remaining -= i64::from(bulk);
        }
    }
    while remaining > 0 {
        let mut best: Option<(&String, i64, i32)> = None;
        for (name, &vote) in votes {
            let seats = allocation.get(name).copied().unwrap_or(0);
            let better = match best {
                None => true,
                Some((best_name, best_vote, best_seats)) => {
                    // Compare vote / (2s + 1) exactly by cross-multiplying.
                    let lhs = i128::from(vote) * i128::from(2 * i64::from(best_seats) + 1);
                    let rhs = i128::from(best_vote) * i128::from(2 * i64::from(seats) + 1);
                    if lhs != rhs {
                        lhs > rhs
                    } else if seats != best_seats {
                        seats < best_seats
                    } else if names_descending {
                        name > best_name
                    } else {
                        name < best_name
                    }
                }
            };
            if better {
                best = Some((name, vote, seats));
            }
        }
        let Some((name, _, _)) = best else {
            break;
        };
        let name = name.clone();
        *allocation.entry(name).or_insert(0) += 1;
        remaining -= 1;
    }
    allocation
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// The one-seat-at-a-time procedure, as a reference for the bulk step.
    fn webster_slow(
        seats: i32,
        votes: &BTreeMap<String, i64>,
        names_descending: bool,
    ) -> BTreeMap<String, i32> {
        let mut allocation: BTreeMap<String, i32> = votes.keys().map(|n| (n.clone(), 0)).collect();
        for _ in 0..seats {
            let mut best: Option<(String, f64, i32)> = None;
            for (name, &vote) in votes {
                let s = allocation[name];
                let priority = vote as f64 / f64::from(2 * s + 1);
                let better = match &best {
                    None => true,
                    Some((bn, bp, bs)) => {
                        if priority != *bp {
                            priority > *bp
                        } else if s != *bs {
                            s < *bs
                        } else if names_descending {
                            name > bn
                        } else {
                            name < bn
                        }
                    }
                };
                if better {
                    best = Some((name.clone(), priority, s));
                }
            }
            *allocation.get_mut(&best.unwrap().0).unwrap() += 1;
        }
        allocation
    }

    fn votes(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
    }

    #[test]
    fn webster_bulk_step_matches_one_at_a_time() {
        let cases = [
            votes(&[("a", 1), ("b", 1)]),
            votes(&[("a", 1), ("b", 2), ("c", 3)]),
            votes(&[("a", 7), ("b", 0), ("c", 3), ("d", 3)]),
            votes(&[("m1", 5), ("m2", 5), ("m3", 5)]),
            votes(&[("x", 100), ("y", 1)]),
        ];
        for case in &cases {
            for seats in 0..120 {
                for descending in [false, true] {
                    assert_eq!(
                        webster(seats, case, descending),
                        webster_slow(seats, case, descending),
                        "{case:?} seats={seats} descending={descending}"
                    );
                }
            }
        }
    }

    #[test]
    fn webster_handles_huge_seat_counts() {
        let result = webster(i32::MAX, &votes(&[("a", 1), ("b", 1), ("c", 2)]), false);
        assert_eq!(
            result.values().map(|&s| i64::from(s)).sum::<i64>(),
            i64::from(i32::MAX)
        );
        assert!(result["c"] > result["a"]);
    }

    #[test]
    fn fnv_parity_picks_name_order() {
        assert!(!names_descending(""));
        // FNV-1a("a") = 0xe40c292c (even), FNV-1a("b") = 0xe70c2de5 (odd).
        assert!(!names_descending("a"));
        assert!(names_descending("b"));
    }

    #[test]
    fn set_spec_field_reports_bad_spec() {
        let mut obj =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": "x"});
        let err = revise_replicas(&mut obj, 2).unwrap_err();
        assert_eq!(err.path(), "spec");
        assert!(err.to_string().contains("expected an object, got a string"));
    }
}
