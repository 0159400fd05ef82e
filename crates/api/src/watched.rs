//! Bindings as the services' watches decode them: [`Watched`] is a ResourceBinding or
//! ClusterResourceBinding without the member objects' statuses in its per-cluster reports
//! (`status.aggregatedStatus[].status`), which the decoder skips instead of building them.
//!
//! Execution copies each member object's `status` into the report of its cluster in the
//! binding (as Karmada does), and every service that watches bindings receives the binding
//! again at each change: a Deployment's status is a few dozen JSON values per cluster, each
//! decoded into a [`serde_json::Value`] of its own, on every event of every binding, in four
//! processes. No watch reads them: execution aggregates them from Works, the scheduler's
//! failover reads each cluster's `applied` and `health`, the detector and the distributor read
//! the conditions. A service reads a binding whole when it needs more (a `GET`). Nor does any read its
//! `metadata.managedFields`, skipped as well ([`crate::lean::metadata`]).
//!
//! `Api<Watched<ResourceBinding>>` lists and watches the same URL as `Api<ResourceBinding>`
//! (the same group, version, plural and scope); [`Watched::into_binding`] gives the binding the
//! service's code reads, each report's `status` `None`.

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::Resource;
use serde::Deserialize;

use crate::work::{
    AggregatedStatusItem, ClusterResourceBinding, ClusterResourceBindingSpec, ResourceBinding,
    ResourceBindingSpec, ResourceBindingStatus, ResourceHealth,
};

/// A binding of kind `K` (ResourceBinding or ClusterResourceBinding) as a watch decodes it; see
/// the module docs.
#[derive(Clone, Debug, Deserialize)]
#[serde(bound = "")]
pub struct Watched<K> {
    #[serde(default, deserialize_with = "crate::lean::metadata")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: ResourceBindingSpec,
    #[serde(default)]
    status: Option<WatchedStatus>,
    #[serde(skip)]
    kind: PhantomData<fn() -> K>,
}

/// [`ResourceBindingStatus`], each report without the member object's status.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedStatus {
    #[serde(default)]
    scheduler_observed_generation: Option<i64>,
    #[serde(default, rename = "schedulerObservingAffinityName")]
    scheduler_observed_affinity_name: Option<String>,
    #[serde(default)]
    last_scheduled_time: Option<Time>,
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    aggregated_status: Vec<WatchedReport>,
}

/// [`AggregatedStatusItem`] without `status` (skipped by the decoder, as any unknown field).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedReport {
    cluster_name: String,
    #[serde(default)]
    applied: bool,
    #[serde(default)]
    applied_message: Option<String>,
    #[serde(default)]
    health: Option<ResourceHealth>,
    #[serde(default)]
    last_health_transition_time: Option<Time>,
}

impl From<WatchedStatus> for ResourceBindingStatus {
    fn from(status: WatchedStatus) -> Self {
        // Every field named: a field added to the status must be added to the watched one.
        Self {
            scheduler_observed_generation: status.scheduler_observed_generation,
            scheduler_observed_affinity_name: status.scheduler_observed_affinity_name,
            last_scheduled_time: status.last_scheduled_time,
            conditions: status.conditions,
            aggregated_status: status
                .aggregated_status
                .into_iter()
                .map(|report| AggregatedStatusItem {
                    cluster_name: report.cluster_name,
                    status: None,
                    applied: report.applied,
                    applied_message: report.applied_message,
                    health: report.health,
                    last_health_transition_time: report.last_health_transition_time,
                })
                .collect(),
        }
    }
}

/// The binding kinds a [`Watched`] decodes.
pub trait WatchedKind: Resource<DynamicType = ()> {
    /// The binding from its parts.
    fn from_parts(
        metadata: ObjectMeta,
        spec: ResourceBindingSpec,
        status: Option<ResourceBindingStatus>,
    ) -> Self;
}

impl WatchedKind for ResourceBinding {
    fn from_parts(
        metadata: ObjectMeta,
        spec: ResourceBindingSpec,
        status: Option<ResourceBindingStatus>,
    ) -> Self {
        Self {
            metadata,
            spec,
            status,
        }
    }
}

impl WatchedKind for ClusterResourceBinding {
    fn from_parts(
        metadata: ObjectMeta,
        spec: ResourceBindingSpec,
        status: Option<ResourceBindingStatus>,
    ) -> Self {
        Self {
            metadata,
            spec: ClusterResourceBindingSpec(spec),
            status,
        }
    }
}

impl<K: WatchedKind> Watched<K> {
    /// The binding, each report's `status` `None`.
    pub fn into_binding(self) -> K {
        K::from_parts(self.metadata, self.spec, self.status.map(Into::into))
    }
}

impl<K: WatchedKind> Resource for Watched<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        K::kind(&())
    }

    fn group(_: &()) -> Cow<'_, str> {
        K::group(&())
    }

    fn version(_: &()) -> Cow<'_, str> {
        K::version(&())
    }

    fn plural(_: &()) -> Cow<'_, str> {
        K::plural(&())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::TargetCluster;

    fn binding() -> ResourceBinding {
        let mut binding = ResourceBinding::new(
            "web-deployment",
            ResourceBindingSpec {
                replicas: 2,
                clusters: vec![TargetCluster {
                    name: "member1".into(),
                    replicas: 2,
                }],
                ..Default::default()
            },
        );
        binding.metadata.namespace = Some("default".into());
        binding.metadata.resource_version = Some("7".into());
        binding.status = Some(ResourceBindingStatus {
            scheduler_observed_generation: Some(3),
            scheduler_observed_affinity_name: Some("primary".into()),
            last_scheduled_time: Some(Time(Timestamp::UNIX_EPOCH)),
            conditions: vec![Condition {
                type_: "Scheduled".into(),
                status: "True".into(),
                reason: "Success".into(),
                message: "Binding has been scheduled successfully.".into(),
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
                observed_generation: Some(3),
            }],
            aggregated_status: vec![
                AggregatedStatusItem {
                    cluster_name: "member1".into(),
                    status: Some(json!({"replicas": 2, "conditions": [{"type": "Available"}]})),
                    applied: true,
                    applied_message: None,
                    health: Some(ResourceHealth::Healthy),
                    last_health_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                },
                AggregatedStatusItem {
                    cluster_name: "member2".into(),
                    status: None,
                    applied: false,
                    applied_message: Some("the member is unreachable".into()),
                    health: None,
                    last_health_transition_time: None,
                },
            ],
        });
        binding
    }

    #[test]
    fn a_watched_binding_is_the_binding_without_its_member_statuses() {
        let mut binding = binding();
        binding.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("flotilla-detector".into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(json!({"f:spec": {"f:replicas": {}}}))),
            ..Default::default()
        }]);
        let json = serde_json::to_vec(&binding).unwrap();
        let watched: Watched<ResourceBinding> = serde_json::from_slice(&json).unwrap();
        let mut expected = binding.clone();
        expected.status.as_mut().unwrap().aggregated_status[0].status = None;
        expected.metadata.managed_fields = None;
        assert_eq!(watched.into_binding(), expected);
        binding.metadata.managed_fields = None;

        let mut crb = ClusterResourceBinding::new("ns-namespace", Default::default());
        crb.spec.0 = binding.spec.clone();
        crb.status = binding.status.clone();
        let json = serde_json::to_vec(&crb).unwrap();
        let watched: Watched<ClusterResourceBinding> = serde_json::from_slice(&json).unwrap();
        let mut expected = crb.clone();
        expected.status.as_mut().unwrap().aggregated_status[0].status = None;
        assert_eq!(watched.into_binding(), expected);

        // Whatever is unset stays unset.
        let bare: Watched<ResourceBinding> =
            serde_json::from_value(json!({"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding", "metadata": {"name": "x"}}))
                .unwrap();
        let bare = bare.into_binding();
        assert_eq!((bare.status, bare.spec), (None, ResourceBindingSpec::default()));
    }

    #[test]
    fn a_watched_binding_is_listed_and_watched_where_the_binding_is() {
        assert_eq!(
            Watched::<ResourceBinding>::url_path(&(), Some("default")),
            ResourceBinding::url_path(&(), Some("default"))
        );
        assert_eq!(
            Watched::<ClusterResourceBinding>::url_path(&(), None),
            ClusterResourceBinding::url_path(&(), None)
        );
        assert_eq!(
            Watched::<ResourceBinding>::api_version(&()),
            ResourceBinding::api_version(&())
        );
        assert_eq!(
            Watched::<ClusterResourceBinding>::kind(&()),
            ClusterResourceBinding::kind(&())
        );
    }
}
