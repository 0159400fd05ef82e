//! Health of a member object (Karmada's `healthy.go` and the work status controller's
//! `interpretHealth`).

use flotilla_api::work::ResourceHealth;
use serde_json::Value;

use crate::error::InterpretError;
use crate::kind::Kind;
use crate::node::{Node, describe};

/// Health of a member object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Health {
    /// The object does what its spec asks.
    Healthy,
    /// The object does not (yet) do what its spec asks.
    Unhealthy,
    /// The object could not be interpreted (a field has the wrong type).
    Unknown,
}

impl From<Health> for ResourceHealth {
    fn from(health: Health) -> Self {
        match health {
            Health::Healthy => ResourceHealth::Healthy,
            Health::Unhealthy => ResourceHealth::Unhealthy,
            Health::Unknown => ResourceHealth::Unknown,
        }
    }
}

/// Health of a member object, as Karmada judges it:
///
/// | kind | healthy when |
/// |---|---|
/// | `apps/v1` Deployment, StatefulSet | `status.observedGeneration == metadata.generation`, `updatedReplicas >= spec.replicas` (if set), `availableReplicas >= updatedReplicas` |
/// | `apps/v1` ReplicaSet | observed generation is current, `availableReplicas >= spec.replicas` (if set) |
/// | `apps/v1` DaemonSet | observed generation is current, `updatedNumberScheduled >= desiredNumberScheduled`, `numberAvailable >= updatedNumberScheduled` |
/// | `v1` Pod | phase `Succeeded`, or phase `Running` with condition `Ready=True` |
/// | `v1` Service | not `type: LoadBalancer`, or a load-balancer ingress with an IP or hostname |
/// | `networking.k8s.io/v1` Ingress | a load-balancer ingress with an IP or hostname |
/// | `v1` PersistentVolumeClaim | phase `Bound` |
/// | `policy/v1` PodDisruptionBudget | `currentHealthy >= desiredHealthy` |
/// | `batch/v1` Job (beyond Karmada) | no condition `Failed=True` |
///
/// Any other kind is `Healthy`: Karmada treats kinds without a health interpreter as healthy
/// (`work_status_controller.go`, `interpretHealth`). Karmada has no Job interpreter, so a failed
/// Job counts as healthy there; flotilla reports it `Unhealthy`, since a failed Job is not doing
/// what its spec asks. A known kind whose fields have the wrong type is `Unknown`, as Karmada
/// reports an interpreter error; [`try_health`] gives the reason.
pub fn health(obj: &Value) -> Health {
    try_health(obj).unwrap_or(Health::Unknown)
}

/// Like [`health`], but says why a malformed object's health is unknown.
pub fn try_health(obj: &Value) -> Result<Health, InterpretError> {
    let Some(kind) = Kind::of(obj) else {
        return Ok(Health::Healthy);
    };
    let object = describe(obj);
    let root = Node::root(obj, &object);
    let healthy = match kind {
        Kind::Deployment | Kind::StatefulSet => {
            let status = Status::of(&root)?;
            let desired = spec_replicas(&root)?;
            let updated = status.int("updatedReplicas")?;
            generation_observed(&root, &status)?
                && desired.is_none_or(|desired| updated >= desired)
                && status.int("availableReplicas")? >= updated
        }
        Kind::ReplicaSet => {
            let status = Status::of(&root)?;
            let desired = spec_replicas(&root)?;
            let available = status.int("availableReplicas")?;
            generation_observed(&root, &status)? && desired.is_none_or(|desired| available >= desired)
        }
        Kind::DaemonSet => {
            let status = Status::of(&root)?;
            let updated = status.int("updatedNumberScheduled")?;
            generation_observed(&root, &status)?
                && updated >= status.int("desiredNumberScheduled")?
                && status.int("numberAvailable")? >= updated
        }
        Kind::Pod => {
            let status = Status::of(&root)?;
            match status.text("phase")? {
                "Succeeded" => true,
                "Running" => has_true_condition(&status, "Ready")?,
                _ => false,
            }
        }
        Kind::Service => {
            let service_type = root.descend(&["spec", "type"])?.map(|n| n.as_str()).transpose()?;
            service_type != Some("LoadBalancer") || has_load_balancer_ingress(&root)?
        }
        Kind::Ingress => has_load_balancer_ingress(&root)?,
        Kind::PersistentVolumeClaim => Status::of(&root)?.text("phase")? == "Bound",
        Kind::PodDisruptionBudget => {
            let status = Status::of(&root)?;
            status.int("currentHealthy")? >= status.int("desiredHealthy")?
        }
        Kind::Job => !has_true_condition(&Status::of(&root)?, "Failed")?,
        Kind::CronJob | Kind::PersistentVolume | Kind::HorizontalPodAutoscaler => true,
    };
    Ok(if healthy {
        Health::Healthy
    } else {
        Health::Unhealthy
    })
}

/// Whether a controller of the member is yet to report on `obj`: a workload whose controller
/// records the generation it acted on (`apps/v1` Deployment, StatefulSet, ReplicaSet,
/// DaemonSet) and whose `status.observedGeneration` is not its `metadata.generation`, as an
/// object just created or whose spec just changed. Its status is about to change without any
/// write of flotilla's. Any other kind, and an object that cannot be interpreted, is not
/// waited for.
pub fn awaits_controller(obj: &Value) -> bool {
    if !matches!(
        Kind::of(obj),
        Some(Kind::Deployment | Kind::StatefulSet | Kind::ReplicaSet | Kind::DaemonSet)
    ) {
        return false;
    }
    let object = describe(obj);
    let root = Node::root(obj, &object);
    Status::of(&root)
        .and_then(|status| generation_observed(&root, &status))
        .is_ok_and(|observed| !observed)
}

/// An object's `status`, possibly absent (then every field reads as zero or empty).
struct Status<'a>(Option<Node<'a>>);

impl<'a> Status<'a> {
    fn of(root: &Node<'a>) -> Result<Self, InterpretError> {
        let status = root.field("status")?;
        if let Some(node) = &status {
            node.object_map()?;
        }
        Ok(Self(status))
    }

    fn field(&self, key: &str) -> Result<Option<Node<'a>>, InterpretError> {
        match &self.0 {
            Some(node) => node.field(key),
            None => Ok(None),
        }
    }

    fn int(&self, key: &str) -> Result<i64, InterpretError> {
        Ok(self.field(key)?.map(|n| n.as_int()).transpose()?.unwrap_or(0))
    }

    fn text(&self, key: &str) -> Result<&'a str, InterpretError> {
        Ok(self.field(key)?.map(|n| n.as_str()).transpose()?.unwrap_or(""))
    }
}

fn spec_replicas(root: &Node<'_>) -> Result<Option<i64>, InterpretError> {
    root.descend(&["spec", "replicas"])?
        .map(|n| n.as_int())
        .transpose()
}

fn generation_observed(root: &Node<'_>, status: &Status<'_>) -> Result<bool, InterpretError> {
    let generation = root
        .descend(&["metadata", "generation"])?
        .map(|n| n.as_int())
        .transpose()?
        .unwrap_or(0);
    Ok(status.int("observedGeneration")? == generation)
}

fn has_true_condition(status: &Status<'_>, condition_type: &str) -> Result<bool, InterpretError> {
    let Some(conditions) = status.field("conditions")? else {
        return Ok(false);
    };
    for condition in conditions.items()? {
        if condition.opt_str("type")? == Some(condition_type) {
            return Ok(condition.opt_str("status")? == Some("True"));
        }
    }
    Ok(false)
}

fn has_load_balancer_ingress(root: &Node<'_>) -> Result<bool, InterpretError> {
    let Some(load_balancer) = root.descend(&["status", "loadBalancer"])? else {
        return Ok(false);
    };
    for ingress in load_balancer.list("ingress")? {
        if ingress.opt_name("ip")?.is_some() || ingress.opt_name("hostname")?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
