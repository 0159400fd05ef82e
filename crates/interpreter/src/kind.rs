//! Which built-in Kubernetes kind a template is.
//!
//! Karmada keys its default interpreter by exact group/version/kind (`apps/v1 Deployment`), so
//! does this crate: an `extensions/v1beta1 Deployment` is not a known kind.

use serde_json::Value;

/// The built-in kinds the interpreter knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `apps/v1 Deployment`.
    Deployment,
    /// `apps/v1 ReplicaSet`.
    ReplicaSet,
    /// `apps/v1 StatefulSet`.
    StatefulSet,
    /// `apps/v1 DaemonSet`.
    DaemonSet,
    /// `batch/v1 Job`.
    Job,
    /// `batch/v1 CronJob`.
    CronJob,
    /// `v1 Pod`.
    Pod,
    /// `v1 Service`.
    Service,
    /// `networking.k8s.io/v1 Ingress`.
    Ingress,
    /// `v1 PersistentVolumeClaim`.
    PersistentVolumeClaim,
    /// `v1 PersistentVolume`.
    PersistentVolume,
    /// `policy/v1 PodDisruptionBudget`.
    PodDisruptionBudget,
    /// `autoscaling/v2 HorizontalPodAutoscaler`.
    HorizontalPodAutoscaler,
}

impl Kind {
    /// The kind of `obj`, if it is a built-in one.
    pub(crate) fn of(obj: &Value) -> Option<Self> {
        let api_version = obj.get("apiVersion")?.as_str()?;
        let kind = obj.get("kind")?.as_str()?;
        Self::from_parts(api_version, kind)
    }

    /// The kind named by `api_version` and `kind`, if it is a built-in one.
    pub(crate) fn from_parts(api_version: &str, kind: &str) -> Option<Self> {
        Some(match (api_version, kind) {
            ("apps/v1", "Deployment") => Self::Deployment,
            ("apps/v1", "ReplicaSet") => Self::ReplicaSet,
            ("apps/v1", "StatefulSet") => Self::StatefulSet,
            ("apps/v1", "DaemonSet") => Self::DaemonSet,
            ("batch/v1", "Job") => Self::Job,
            ("batch/v1", "CronJob") => Self::CronJob,
            ("v1", "Pod") => Self::Pod,
            ("v1", "Service") => Self::Service,
            ("networking.k8s.io/v1", "Ingress") => Self::Ingress,
            ("v1", "PersistentVolumeClaim") => Self::PersistentVolumeClaim,
            ("v1", "PersistentVolume") => Self::PersistentVolume,
            ("policy/v1", "PodDisruptionBudget") => Self::PodDisruptionBudget,
            ("autoscaling/v2", "HorizontalPodAutoscaler") => Self::HorizontalPodAutoscaler,
            _ => return None,
        })
    }

    /// Where the pod template's `PodSpec` sits in an object of this kind, if it has one.
    pub(crate) fn pod_spec_path(self) -> Option<&'static [&'static str]> {
        match self {
            Self::Deployment | Self::ReplicaSet | Self::StatefulSet | Self::DaemonSet | Self::Job => {
                Some(&["spec", "template", "spec"])
            }
            Self::CronJob => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
            Self::Pod => Some(&["spec"]),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn matches_exact_group_version_kind() {
        assert_eq!(
            Kind::of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})),
            Some(Kind::Deployment)
        );
        assert_eq!(
            Kind::of(&json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment"})),
            None
        );
        assert_eq!(Kind::of(&json!({"apiVersion": "v1", "kind": "ConfigMap"})), None);
        assert_eq!(Kind::of(&json!({"kind": "Pod"})), None);
        assert_eq!(Kind::of(&json!({"apiVersion": 1, "kind": "Pod"})), None);
    }
}
