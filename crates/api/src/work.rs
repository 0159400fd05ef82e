//! `work.karmada.io`: ResourceBinding and ClusterResourceBinding (`v1alpha2`), the scheduling
//! unit for one resource template, and Work (`v1alpha1`), the manifests for one member cluster.

use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::{ConflictResolution, FailoverBehavior, Placement, PurgeMode, Suspension};

/// API group of bindings and works.
pub const GROUP: &str = "work.karmada.io";
/// API version of ResourceBinding and ClusterResourceBinding.
pub const BINDING_VERSION: &str = "v1alpha2";

/// The core `ObjectReference` of a binding, for events: a ResourceBinding when `namespace` is
/// set, a ClusterResourceBinding when it is not.
pub fn binding_object_reference(
    namespace: Option<&str>,
    name: &str,
    uid: Option<&str>,
) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(format!("{GROUP}/{BINDING_VERSION}")),
        kind: Some(
            match namespace {
                Some(_) => "ResourceBinding",
                None => "ClusterResourceBinding",
            }
            .to_owned(),
        ),
        namespace: namespace.map(str::to_owned),
        name: Some(name.to_owned()),
        uid: uid.map(str::to_owned),
        ..Default::default()
    }
}
/// API version of Work.
pub const WORK_VERSION: &str = "v1alpha1";

/// The expectation for one resource template: what it is, where it should go and how.
///
/// Field owners: the detector writes `resource`, `replicas`, `replicaRequirements`,
/// `placement`, `propagateDeps`, `conflictResolution`, `suspension`,
/// `preserveResourcesOnDeletion`, `schedulerName` and `failover`; the scheduler writes
/// `clusters` and `gracefulEvictionTasks`; the dependency distributor writes `requiredBy`
/// (attached bindings only). A person may set `suppressDeletion: false` on an eviction task to
/// confirm a `Never` purge.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "work.karmada.io",
    version = "v1alpha2",
    kind = "ResourceBinding",
    plural = "resourcebindings",
    singular = "resourcebinding",
    shortname = "rb",
    category = "karmada-io",
    namespaced,
    status = "ResourceBindingStatus",
    derive = "PartialEq",
    doc = "ResourceBinding binds a namespaced resource template to its propagation policy and records where it is scheduled.",
    printcolumn(
        name = "SCHEDULED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Scheduled\")].status"
    ),
    printcolumn(
        name = "FULLYAPPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"FullyApplied\")].status"
    ),
    printcolumn(
        name = "ACTIVATED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"PolicyActivated\")].status"
    ),
    printcolumn(
        name = "ACTIVATION-REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"PolicyActivated\")].reason",
        priority = 1
    ),
    printcolumn(
        name = "SUSPENDED",
        type_ = "string",
        json_path = ".spec.suspension.dispatching"
    ),
    printcolumn(
        name = "SUSPENDED-CLUSTERS",
        type_ = "string",
        json_path = ".spec.suspension.dispatchingOnClusters.clusterNames",
        priority = 1
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingSpec {
    /// The resource template this binding is for.
    pub resource: ObjectReference,

    /// Propagate the template's dependencies along with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub propagate_deps: bool,

    /// What one replica needs (from the template's pod spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ReplicaRequirements>,

    /// The template's replica count; 0 for kinds without replicas.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,

    /// The scheduling result: target clusters and their replicas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<TargetCluster>,

    /// The placement snapshot taken from the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,

    /// Clusters the resource is being evicted from (failover): each keeps its copy until the
    /// task's purge mode lets execution remove it, and is not chosen again while its task
    /// exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graceful_eviction_tasks: Vec<GracefulEvictionTask>,

    /// Independent bindings that need this (attached) binding's resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<BindingSnapshot>,

    /// The scheduler responsible for this binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,

    /// Failover behaviour from the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,

    /// Conflict resolution from the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_resolution: Option<ConflictResolution>,

    /// When a reschedule was last requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_triggered_at: Option<Time>,

    /// Suspension from the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,

    /// Keep member objects when the template is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}

impl ResourceBindingSpec {
    /// The conflict resolution, `Abort` when unset.
    pub fn conflict_resolution(&self) -> ConflictResolution {
        self.conflict_resolution
            .clone()
            .unwrap_or(ConflictResolution::Abort)
    }

    /// Whether member objects are kept when the template is deleted.
    pub fn preserve_resources_on_deletion(&self) -> bool {
        self.preserve_resources_on_deletion.unwrap_or(false)
    }

    /// Names of the target clusters, in scheduling order.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.clusters.iter().map(|c| c.name.as_str())
    }

    /// The eviction task for `cluster`, if the resource is being evicted from it.
    pub fn eviction_task(&self, cluster: &str) -> Option<&GracefulEvictionTask> {
        self.graceful_eviction_tasks
            .iter()
            .find(|t| t.from_cluster == cluster)
    }
}

/// One cluster a binding's resource is being evicted from (Karmada's `GracefulEvictionTask`):
/// the cluster left `spec.clusters`, and its copy stays until the purge mode lets it go.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GracefulEvictionTask {
    /// The cluster the resource is evicted from.
    pub from_cluster: String,
    /// What happens to the copy there: `Directly` (removed at once), `Gracefully` (removed once
    /// the new placement is healthy or the grace period ran out) or `Never` (kept until
    /// `suppressDeletion` is set to false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
    /// Replicas the cluster ran; unset for kinds without replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Why: `TaintUntolerated` (cluster failover) or `ApplicationFailure`.
    pub reason: String,
    /// Details for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Which controller evicted it.
    pub producer: String,
    /// The longest the copy is kept while the new placement is not healthy, in seconds;
    /// unset means the scheduler's `--graceful-eviction-timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
    /// `true`: keep the copy until someone sets this to `false` (purge mode `Never`); `false`:
    /// remove it now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_deletion: Option<bool>,
    /// State collected from the old copy for the new one (Karmada's stateful failover;
    /// carried, not acted on by flotilla).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub preserved_label_state: std::collections::BTreeMap<String, String>,
    /// When the task was created (the grace period counts from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    /// The clusters the resource ran in before this eviction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters_before_failover: Vec<String>,
}

impl GracefulEvictionTask {
    /// The purge mode in its current spelling, `Gracefully` when unset (Karmada's default).
    pub fn purge_mode(&self) -> PurgeMode {
        self.purge_mode
            .as_ref()
            .map_or(PurgeMode::Gracefully, PurgeMode::canonical)
    }
}

/// The spec of a ClusterResourceBinding: the same fields as a ResourceBinding's.
///
/// A newtype only because the CRD derive needs one struct per kind; it dereferences to
/// [`ResourceBindingSpec`].
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "work.karmada.io",
    version = "v1alpha2",
    kind = "ClusterResourceBinding",
    plural = "clusterresourcebindings",
    singular = "clusterresourcebinding",
    shortname = "crb",
    category = "karmada-io",
    status = "ResourceBindingStatus",
    derive = "PartialEq",
    doc = "ClusterResourceBinding binds a cluster-scoped resource template to its propagation policy and records where it is scheduled.",
    printcolumn(
        name = "SCHEDULED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Scheduled\")].status"
    ),
    printcolumn(
        name = "FULLYAPPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"FullyApplied\")].status"
    ),
    printcolumn(
        name = "ACTIVATED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"PolicyActivated\")].status"
    ),
    printcolumn(
        name = "ACTIVATION-REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"PolicyActivated\")].reason",
        priority = 1
    ),
    printcolumn(
        name = "SUSPENDED",
        type_ = "string",
        json_path = ".spec.suspension.dispatching"
    ),
    printcolumn(
        name = "SUSPENDED-CLUSTERS",
        type_ = "string",
        json_path = ".spec.suspension.dispatchingOnClusters.clusterNames",
        priority = 1
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(transparent)]
pub struct ClusterResourceBindingSpec(pub ResourceBindingSpec);

impl Deref for ClusterResourceBindingSpec {
    type Target = ResourceBindingSpec;
    fn deref(&self) -> &ResourceBindingSpec {
        &self.0
    }
}

impl DerefMut for ClusterResourceBindingSpec {
    fn deref_mut(&mut self) -> &mut ResourceBindingSpec {
        &mut self.0
    }
}

impl From<ResourceBindingSpec> for ClusterResourceBindingSpec {
    fn from(spec: ResourceBindingSpec) -> Self {
        Self(spec)
    }
}

/// A reference to a resource template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API version of the template.
    pub api_version: String,
    /// Kind of the template.
    pub kind: String,
    /// Namespace of the template; empty for cluster-scoped templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the template.
    pub name: String,
    /// UID of the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The template's resourceVersion when the binding was last refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// What one replica of a workload needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRequirements {
    /// Node constraints of the pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_claim: Option<NodeClaim>,
    /// Resource requests of one replica.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub resource_request: std::collections::BTreeMap<String, Quantity>,
    /// Namespace of the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Priority class of the pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// Node constraints of a pod template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaim {
    /// Required node affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_node_affinity: Option<k8s_openapi::api::core::v1::NodeSelector>,
    /// Node selector.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// Tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
}

/// A target cluster and the replicas it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetCluster {
    /// Cluster name.
    pub name: String,
    /// Replicas in this cluster (0 for kinds without replicas).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
}

/// A snapshot of an independent binding that needs an attached binding's resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindingSnapshot {
    /// Namespace of the binding; empty for a ClusterResourceBinding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the binding.
    pub name: String,
    /// The binding's scheduling result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<TargetCluster>,
}

/// The observed state of a binding.
///
/// Field owners: the scheduler writes `schedulerObservedGeneration`,
/// `schedulerObservingAffinityName`, `lastScheduledTime` and the `Scheduled` condition;
/// execution writes `aggregatedStatus` and the `FullyApplied` condition; the detector writes the
/// `PolicyActivated` condition. Each condition type has exactly one writer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingStatus {
    /// The binding generation the scheduler last scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_observed_generation: Option<i64>,
    /// The cluster affinity group the scheduler used.
    #[serde(
        default,
        rename = "schedulerObservingAffinityName",
        skip_serializing_if = "Option::is_none"
    )]
    pub scheduler_observed_affinity_name: Option<String>,
    /// When the binding was last scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_time: Option<Time>,
    /// `Scheduled`, `FullyApplied`, `PolicyActivated`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The member objects' status per cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

string_enum! {
    /// Health of a member object.
    pub enum ResourceHealth {
        /// The object is healthy.
        Healthy = "Healthy",
        /// The object is unhealthy.
        Unhealthy = "Unhealthy",
        /// Health cannot be told.
        Unknown = "Unknown",
    }
}

/// The status of the member object in one cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedStatusItem {
    /// The member cluster.
    pub cluster_name: String,
    /// The member object's `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::free_form_object")]
    pub status: Option<serde_json::Value>,
    /// Whether the manifest was applied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub applied: bool,
    /// Why it was not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_message: Option<String>,
    /// Health of the member object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ResourceHealth>,
    /// flotilla: when `health` last changed, as execution observed it. Application failover
    /// counts `decisionConditions.tolerationSeconds` from it, so the count survives restarts
    /// (Karmada keeps it in memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_health_transition_time: Option<Time>,
}

/// The manifests to apply to one member cluster. Works live in namespace
/// `karmada-es-<cluster>`; execution is their only writer.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "work.karmada.io",
    version = "v1alpha1",
    kind = "Work",
    plural = "works",
    singular = "work",
    shortname = "wk",
    category = "karmada-io",
    namespaced,
    status = "WorkStatus",
    derive = "PartialEq",
    doc = "Work holds the manifests to apply to the member cluster its namespace names (karmada-es-<cluster>).",
    printcolumn(
        name = "WORKLOAD-KIND",
        type_ = "string",
        json_path = ".spec.workload.manifests[*].kind"
    ),
    printcolumn(
        name = "APPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Applied\")].status"
    ),
    printcolumn(
        name = "DISPATCHING",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Dispatching\")].status"
    ),
    printcolumn(name = "SUSPENDED", type_ = "boolean", json_path = ".spec.suspendDispatching"),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct WorkSpec {
    /// The manifests.
    #[serde(default)]
    pub workload: WorkloadTemplate,
    /// Suspend dispatching this Work to its cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_dispatching: Option<bool>,
    /// Keep the member objects when this Work is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
}

/// The manifests of a Work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadTemplate {
    /// Kubernetes objects, as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::embedded_resources")]
    pub manifests: Vec<serde_json::Value>,
}

/// The observed state of a Work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    /// `Applied`, `Dispatching`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Status of each manifest's member object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_statuses: Vec<ManifestStatus>,
}

/// Status of one manifest's member object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestStatus {
    /// Which manifest.
    pub identifier: ResourceIdentifier,
    /// The member object's `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::free_form_object")]
    pub status: Option<serde_json::Value>,
    /// Health of the member object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ResourceHealth>,
    /// flotilla: the revision (`<Work generation>/<manifest hash>`) execution last applied to
    /// the member for this manifest, recorded in the same status write that reports the apply,
    /// so apply-once-only can tell "applied once" from "never applied" after a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<String>,
}

/// Identifies one manifest of a Work.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceIdentifier {
    /// Index into `spec.workload.manifests`.
    pub ordinal: i64,
    /// API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource (plural).
    pub resource: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    #[test]
    fn a_binding_object_reference_names_the_kind_by_its_scope() {
        let rb = binding_object_reference(Some("default"), "web-deployment", Some("u1"));
        assert_eq!(
            rb.api_version.as_deref(),
            Some(ResourceBinding::api_version(&()).as_ref())
        );
        assert_eq!(rb.kind.as_deref(), Some("ResourceBinding"));
        assert_eq!(rb.namespace.as_deref(), Some("default"));
        assert_eq!(rb.name.as_deref(), Some("web-deployment"));
        assert_eq!(rb.uid.as_deref(), Some("u1"));
        let crb = binding_object_reference(None, "ns-namespace", None);
        assert_eq!(
            crb.api_version.as_deref(),
            Some(ClusterResourceBinding::api_version(&()).as_ref())
        );
        assert_eq!(crb.kind.as_deref(), Some("ClusterResourceBinding"));
        assert_eq!((crb.namespace, crb.uid), (None, None));
    }

    #[test]
    fn a_string_enum_reads_from_text_escaped_text_and_values_and_refuses_the_rest() {
        let health = |json: &str| serde_json::from_str::<ResourceHealth>(json);
        assert_eq!(health(r#""Healthy""#).unwrap(), ResourceHealth::Healthy);
        assert_eq!(health(r#""Un\u0068ealthy""#).unwrap(), ResourceHealth::Unhealthy);
        assert_eq!(
            health(r#""Degraded""#).unwrap(),
            ResourceHealth::Other("Degraded".into())
        );
        assert_eq!(
            serde_json::from_value::<ResourceHealth>(serde_json::json!("Unknown")).unwrap(),
            ResourceHealth::Unknown
        );
        let error = health("3").unwrap_err().to_string();
        assert!(error.contains("expected a string"), "{error}");
    }
}
