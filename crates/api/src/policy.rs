//! `policy.karmada.io/v1alpha1`: PropagationPolicy (namespaced) and ClusterPropagationPolicy
//! (cluster-scoped). Both share [`PropagationSpec`]; field names follow Karmada's Go types.

use std::collections::BTreeSet;
use std::ops::{Deref, DerefMut};

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the policy kinds.
pub const GROUP: &str = "policy.karmada.io";
/// API version of the policy kinds.
pub const VERSION: &str = "v1alpha1";

/// The desired behaviour of a PropagationPolicy: which resource templates it selects and how
/// they are propagated to member clusters.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "PropagationPolicy",
    plural = "propagationpolicies",
    singular = "propagationpolicy",
    shortname = "pp",
    category = "karmada-io",
    namespaced,
    status = "PolicyStatus",
    derive = "PartialEq",
    doc = "PropagationPolicy propagates the resource templates it selects in its own namespace to member clusters.",
    printcolumn(
        name = "CONFLICT-RESOLUTION",
        type_ = "string",
        json_path = ".spec.conflictResolution"
    ),
    printcolumn(name = "PRIORITY", type_ = "string", json_path = ".spec.priority"),
    printcolumn(
        name = "ACTIVATION",
        type_ = "string",
        json_path = ".spec.activationPreference"
    ),
    printcolumn(
        name = "VALID",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(
        name = "PENDING",
        type_ = "integer",
        json_path = ".status.pendingActivationTemplates"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct PropagationSpec {
    /// The resource templates this policy selects. At least one.
    #[serde(default)]
    pub resource_selectors: Vec<ResourceSelector>,

    /// Karmada's deprecated association flag; kept so existing YAML round-trips. Unused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub association: bool,

    /// Propagate the resources a workload references (ConfigMaps, Secrets, PVCs,
    /// ServiceAccounts) to the clusters the workload is scheduled to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub propagate_deps: bool,

    /// Where the selected templates go.
    #[serde(default, skip_serializing_if = "Placement::is_empty")]
    pub placement: Placement,

    /// Explicit priority; a higher value wins when several policies match a template. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,

    /// Whether this policy may take over templates already claimed by a lower-priority policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionBehavior>,

    /// OverridePolicies this policy depends on (Karmada compatibility; informational).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependent_overrides: Vec<String>,

    /// The scheduler that schedules bindings of this policy. Default `default-scheduler`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,

    /// Failover behaviour: how templates leave a failed cluster or an unhealthy application
    /// (`docs/failover.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,

    /// What to do when a member cluster already has an object of the same name that flotilla
    /// did not create. Default `Abort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_resolution: Option<ConflictResolution>,

    /// `Lazy` defers propagation changes from policy edits until each template next changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_preference: Option<ActivationPreference>,

    /// Suspends dispatching to all or some member clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,

    /// Keep member objects when the template is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,

    /// Scheduling priority (Karmada compatibility; informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_priority: Option<SchedulePriority>,
}

impl PropagationSpec {
    /// The explicit priority, 0 when unset.
    pub fn priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }

    /// The preemption behaviour, `Never` when unset.
    pub fn preemption(&self) -> PreemptionBehavior {
        self.preemption.clone().unwrap_or(PreemptionBehavior::Never)
    }

    /// The conflict resolution, `Abort` when unset.
    pub fn conflict_resolution(&self) -> ConflictResolution {
        self.conflict_resolution
            .clone()
            .unwrap_or(ConflictResolution::Abort)
    }

    /// Whether the policy asks for lazy activation.
    pub fn is_lazy(&self) -> bool {
        self.activation_preference == Some(ActivationPreference::Lazy)
    }

    /// The scheduler name, `default-scheduler` when unset.
    pub fn scheduler_name(&self) -> &str {
        self.scheduler_name
            .as_deref()
            .unwrap_or(crate::well_known::DEFAULT_SCHEDULER_NAME)
    }
}

/// The spec of a ClusterPropagationPolicy: the same fields as a PropagationPolicy's.
///
/// A newtype only because the CRD derive needs one struct per kind; it dereferences to
/// [`PropagationSpec`] so code handles both kinds alike.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "ClusterPropagationPolicy",
    plural = "clusterpropagationpolicies",
    singular = "clusterpropagationpolicy",
    shortname = "cpp",
    category = "karmada-io",
    status = "PolicyStatus",
    derive = "PartialEq",
    doc = "ClusterPropagationPolicy propagates cluster-scoped templates, and namespaced templates in any namespace, to member clusters.",
    printcolumn(
        name = "CONFLICT-RESOLUTION",
        type_ = "string",
        json_path = ".spec.conflictResolution"
    ),
    printcolumn(name = "PRIORITY", type_ = "string", json_path = ".spec.priority"),
    printcolumn(
        name = "ACTIVATION",
        type_ = "string",
        json_path = ".spec.activationPreference"
    ),
    printcolumn(
        name = "VALID",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(
        name = "PENDING",
        type_ = "integer",
        json_path = ".status.pendingActivationTemplates"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(transparent)]
pub struct ClusterPropagationSpec(pub PropagationSpec);

impl Deref for ClusterPropagationSpec {
    type Target = PropagationSpec;
    fn deref(&self) -> &PropagationSpec {
        &self.0
    }
}

impl DerefMut for ClusterPropagationSpec {
    fn deref_mut(&mut self) -> &mut PropagationSpec {
        &mut self.0
    }
}

impl From<PropagationSpec> for ClusterPropagationSpec {
    fn from(spec: PropagationSpec) -> Self {
        Self(spec)
    }
}

/// Status flotilla maintains on both policy kinds (Karmada's policies have none).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// The policy generation the detector last processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Valid` (semantic validation) and further conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// How many resource templates this policy currently claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_templates: Option<i64>,

    /// How many claimed templates still propagate per an older generation of this policy
    /// (lazy activation pending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_activation_templates: Option<i64>,

    /// The write that produced the current `metadata.generation` of the spec, as the detector
    /// recorded it: lazy activation compares a template's last content write with it (a Lazy
    /// policy's generation applies to templates written after it). See
    /// `docs/lazy-activation.md`, "The rule".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_revision: Option<GenerationRevision>,

    /// The write at which the current `spec.resourceSelectors` took effect: which of several
    /// policies claims a template follows the order in which they started matching it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectors_revision: Option<SelectorsRevision>,
}

/// `status.generationRevision` of a policy: the resourceVersion of the write that produced one
/// generation of its spec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerationRevision {
    /// The spec generation.
    pub generation: i64,
    /// The resourceVersion of the write that produced it.
    pub resource_version: String,
}

/// `status.selectorsRevision` of a policy: the resourceVersion of the write from which its
/// current resource selectors apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectorsRevision {
    /// Fingerprint of the `spec.resourceSelectors` this record belongs to.
    pub fingerprint: String,
    /// The resourceVersion of the write from which they apply.
    pub resource_version: String,
}

/// Selects resource templates by apiVersion and kind, and optionally namespace, name and labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSelector {
    /// API version of the target resources, e.g. `apps/v1`.
    pub api_version: String,
    /// Kind of the target resources, e.g. `Deployment`.
    pub kind: String,
    /// Namespace of the target resources; empty means the policy's own namespace
    /// (PropagationPolicy) or every namespace (ClusterPropagationPolicy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the target resource; empty means any name. Takes precedence over `labelSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label query over the target resources; ignored when `name` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

impl ResourceSelector {
    /// The namespace if set and non-empty.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|ns| !ns.is_empty())
    }

    /// The name if set and non-empty.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref().filter(|n| !n.is_empty())
    }
}

/// Where templates go.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// The clusters to choose from. Cannot co-exist with `clusterAffinities`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_affinity: Option<ClusterAffinity>,
    /// Ordered fallback groups of clusters: the first group that can hold the workload wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_affinities: Vec<ClusterAffinityTerm>,
    /// Taints of member clusters that the templates tolerate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_tolerations: Vec<Toleration>,
    /// How to spread over groups of clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread_constraints: Vec<SpreadConstraint>,
    /// How replicas are scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_scheduling: Option<ReplicaSchedulingStrategy>,
    /// Workload affinity groups (Karmada compatibility; informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_affinity: Option<WorkloadAffinity>,
}

impl Placement {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Placement::default()
    }
}

/// A group of clusters selected by labels, fields or names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinity {
    /// Label query over Cluster objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Query over Cluster fields (`provider`, `region`, `zone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<FieldSelector>,
    /// Clusters by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
    /// Clusters never to select.
    #[serde(default, rename = "exclude", skip_serializing_if = "Vec::is_empty")]
    pub exclude_clusters: Vec<String>,
}

/// A query over Cluster fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldSelector {
    /// Requirements, ANDed. Keys: `provider`, `region`, `zone`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>,
}

/// A named cluster affinity; one entry of `placement.clusterAffinities`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinityTerm {
    /// Name of the group; unique within the placement.
    pub affinity_name: String,
    /// The group's clusters.
    #[serde(flatten)]
    pub affinity: ClusterAffinity,
    /// Overflow groups (Karmada compatibility; informational).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overflow_affinities: Vec<OverflowClusterAffinity>,
}

/// An overflow group of a [`ClusterAffinityTerm`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverflowClusterAffinity {
    /// Name of the overflow group.
    pub affinity_name: String,
    /// The overflow group's clusters.
    #[serde(flatten)]
    pub affinity: ClusterAffinity,
}

/// Workload affinity groups (Karmada compatibility).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadAffinity {
    /// Co-locate workloads sharing the label value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<WorkloadAffinityTerm>,
    /// Separate workloads sharing the label value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<WorkloadAffinityTerm>,
}

/// A workload affinity term.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadAffinityTerm {
    /// The label key that defines the group.
    pub group_by_label_key: String,
}

string_enum! {
    /// The cluster property a spread constraint groups by.
    pub enum SpreadFieldValue {
        /// One group per cluster.
        Cluster = "cluster",
        /// Group by `spec.region`.
        Region = "region",
        /// Group by `spec.zone`.
        Zone = "zone",
        /// Group by `spec.provider`.
        Provider = "provider",
    }
}

/// Spread the workload over groups of clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraint {
    /// Group by a cluster field. Cannot co-exist with `spreadByLabel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_by_field: Option<SpreadFieldValue>,
    /// Group by a cluster label. Cannot co-exist with `spreadByField`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_by_label: Option<String>,
    /// At most this many groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_groups: Option<i64>,
    /// At least this many groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_groups: Option<i64>,
}

string_enum! {
    /// How replicas are scheduled over the selected clusters.
    pub enum ReplicaSchedulingType {
        /// Every selected cluster runs the full replica count.
        Duplicated = "Duplicated",
        /// The replica count is divided between the selected clusters.
        Divided = "Divided",
    }
}

string_enum! {
    /// How `Divided` replicas are divided.
    pub enum ReplicaDivisionPreference {
        /// Pack replicas into as few clusters as possible.
        Aggregated = "Aggregated",
        /// Divide replicas by weight.
        Weighted = "Weighted",
    }
}

/// How replicas are scheduled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSchedulingStrategy {
    /// `Duplicated` or `Divided`. Default `Divided` (as Karmada).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_scheduling_type: Option<ReplicaSchedulingType>,
    /// For `Divided`: `Aggregated` or `Weighted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_division_preference: Option<ReplicaDivisionPreference>,
    /// For `Weighted`: the weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_preference: Option<ClusterPreferences>,
}

impl ReplicaSchedulingStrategy {
    /// The scheduling type, `Divided` when unset (Karmada's default).
    pub fn scheduling_type(&self) -> ReplicaSchedulingType {
        self.replica_scheduling_type
            .clone()
            .unwrap_or(ReplicaSchedulingType::Divided)
    }
}

string_enum! {
    /// Dynamic weight factor.
    pub enum DynamicWeightFactor {
        /// Weight by the replicas each cluster can still hold.
        AvailableReplicas = "AvailableReplicas",
    }
}

/// Weights for `Weighted` division.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreferences {
    /// Static weights per group of clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub static_weight_list: Vec<StaticClusterWeight>,
    /// Dynamic weights. Cannot co-exist with `staticWeightList`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_weight: Option<DynamicWeightFactor>,
}

/// A static weight for a group of clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaticClusterWeight {
    /// The clusters this weight applies to.
    pub target_cluster: ClusterAffinity,
    /// The weight; at least 1.
    pub weight: i64,
}

string_enum! {
    /// Whether a policy may preempt templates claimed by a lower-priority policy.
    pub enum PreemptionBehavior {
        /// Take over templates claimed by lower-priority policies.
        Always = "Always",
        /// Never take over a claimed template (default).
        Never = "Never",
    }
}

string_enum! {
    /// What to do when a member cluster already has an object flotilla did not create.
    pub enum ConflictResolution {
        /// Take the existing object over and overwrite it.
        Overwrite = "Overwrite",
        /// Leave the existing object alone and report a conflict (default).
        Abort = "Abort",
    }
}

string_enum! {
    /// How templates respond to changes of their policy.
    pub enum ActivationPreference {
        /// Policy changes take effect when each template next changes.
        Lazy = "Lazy",
    }
}

/// Suspends dispatching of the selected templates to member clusters.
///
/// Canonical spelling is Karmada's released API: `dispatching` and `dispatchingOnClusters`.
/// The design seed's spellings `suspendDispatching` and `suspendDispatchingOnClusters` are
/// accepted as aliases and kept as written; use [`Suspension::effective`] to read the values.
/// Validation rejects a suspension that sets both spellings of a field to different values, and
/// one that suspends all clusters while also naming clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    /// Suspend dispatching to every cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatching: Option<bool>,
    /// Suspend dispatching to the named clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatching_on_clusters: Option<SuspendClusters>,
    /// Alias of `dispatching` (design-seed spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_dispatching: Option<bool>,
    /// Alias of `dispatchingOnClusters` (design-seed spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_dispatching_on_clusters: Option<SuspendClusters>,
    /// Suspend scheduling (bindings only; Karmada compatibility).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<bool>,
}

/// The suspension a [`Suspension`] asks for, with aliases resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EffectiveSuspension {
    /// Dispatching is suspended to every cluster.
    pub all_clusters: bool,
    /// Dispatching is suspended to these clusters.
    pub clusters: BTreeSet<String>,
}

impl EffectiveSuspension {
    /// Whether dispatching to `cluster` is suspended.
    pub fn is_suspended(&self, cluster: &str) -> bool {
        self.all_clusters || self.clusters.contains(cluster)
    }
}

impl Suspension {
    /// The canonical `dispatching` value, falling back to the alias.
    pub fn dispatching(&self) -> Option<bool> {
        self.dispatching.or(self.suspend_dispatching)
    }

    /// The canonical `dispatchingOnClusters` value, falling back to the alias.
    pub fn dispatching_on_clusters(&self) -> Option<&SuspendClusters> {
        self.dispatching_on_clusters
            .as_ref()
            .or(self.suspend_dispatching_on_clusters.as_ref())
    }

    /// The suspension with aliases resolved (canonical spelling wins; validation rejects
    /// conflicting spellings before this matters).
    pub fn effective(&self) -> EffectiveSuspension {
        EffectiveSuspension {
            all_clusters: self.dispatching().unwrap_or(false),
            clusters: self
                .dispatching_on_clusters()
                .map(|c| c.cluster_names.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// The same suspension written in canonical spelling only.
    pub fn canonical(&self) -> Suspension {
        Suspension {
            dispatching: self.dispatching(),
            dispatching_on_clusters: self.dispatching_on_clusters().cloned(),
            suspend_dispatching: None,
            suspend_dispatching_on_clusters: None,
            scheduling: self.scheduling,
        }
    }
}

/// A list of clusters dispatching is suspended to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendClusters {
    /// The clusters, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
}

string_enum! {
    /// How an application is purged from the cluster it is evicted from (Karmada's
    /// `PurgeMode`). Karmada v1.12 renamed `Immediately` to `Directly` and `Graciously` to
    /// `Gracefully`; both spellings are accepted and mean the same ([`PurgeMode::canonical`]).
    pub enum PurgeMode {
        /// Never purge: the old copy stays until a person confirms (`suppressDeletion: false`
        /// on the eviction task).
        Never = "Never",
        /// Purge at once, before the new copy is created.
        Directly = "Directly",
        /// Purge once the new placement is healthy, or after a grace period.
        Gracefully = "Gracefully",
        /// Older spelling of `Directly`.
        Immediately = "Immediately",
        /// Older spelling of `Gracefully`.
        Graciously = "Graciously",
    }
}

impl PurgeMode {
    /// The current Karmada spelling: `Immediately` reads as `Directly`, `Graciously` as
    /// `Gracefully`; other values are returned as they are.
    pub fn canonical(&self) -> PurgeMode {
        match self {
            PurgeMode::Immediately => PurgeMode::Directly,
            PurgeMode::Graciously => PurgeMode::Gracefully,
            other => other.clone(),
        }
    }

    /// Whether the old copy is removed at once (`Directly` / `Immediately`).
    pub fn is_directly(&self) -> bool {
        self.canonical() == PurgeMode::Directly
    }

    /// Whether the old copy waits for the new placement's health or a timeout (`Gracefully` /
    /// `Graciously`).
    pub fn is_gracefully(&self) -> bool {
        self.canonical() == PurgeMode::Gracefully
    }
}

/// Failover behaviour: what happens to the selected templates when a member cluster fails
/// (`cluster`) or the application in a member is unhealthy (`application`). Carried into each
/// binding's `spec.failover`; see `docs/failover.md`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverBehavior {
    /// Application failover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationFailoverBehavior>,
    /// Cluster failover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFailoverBehavior>,
}

/// Application failover: a workload unhealthy in a cluster for longer than
/// `decisionConditions.tolerationSeconds` is evicted from it and scheduled elsewhere.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationFailoverBehavior {
    /// When to fail over.
    #[serde(default)]
    pub decision_conditions: DecisionConditions,
    /// What happens to the unhealthy copy. Default `Gracefully`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
    /// `Gracefully` only: the longest the old copy is kept while the new placement is not
    /// healthy, in seconds. Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
    /// State to carry to the new cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_preservation: Option<StatePreservation>,
}

impl ApplicationFailoverBehavior {
    /// Karmada's default `decisionConditions.tolerationSeconds`.
    pub const DEFAULT_TOLERATION_SECONDS: i32 = 300;
    /// Karmada's default `gracePeriodSeconds` for `Gracefully`.
    pub const DEFAULT_GRACE_PERIOD_SECONDS: i32 = 600;

    /// The purge mode in its current spelling, `Gracefully` when unset.
    pub fn purge_mode(&self) -> PurgeMode {
        self.purge_mode
            .as_ref()
            .map_or(PurgeMode::Gracefully, PurgeMode::canonical)
    }

    /// `decisionConditions.tolerationSeconds`, 300 when unset, never negative.
    pub fn toleration_seconds(&self) -> i64 {
        i64::from(
            self.decision_conditions
                .toleration_seconds
                .unwrap_or(Self::DEFAULT_TOLERATION_SECONDS)
                .max(0),
        )
    }

    /// The grace period an eviction task gets: `gracePeriodSeconds` (600 when unset) for
    /// `Gracefully`, none otherwise.
    pub fn grace_period_seconds(&self) -> Option<i32> {
        self.purge_mode().is_gracefully().then(|| {
            self.grace_period_seconds
                .unwrap_or(Self::DEFAULT_GRACE_PERIOD_SECONDS)
        })
    }
}

/// Cluster failover: how the templates leave a cluster tainted `NoExecute` (a failed member).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFailoverBehavior {
    /// What happens to the copy in the failed cluster. Default `Gracefully`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
    /// State to carry to the new cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_preservation: Option<StatePreservation>,
}

/// When to fail over.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionConditions {
    /// How long an unhealthy application is tolerated, in seconds. Default 300; 0 fails over
    /// at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i32>,
}

/// State carried to the new cluster on failover.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatePreservation {
    /// The rules.
    #[serde(default)]
    pub rules: Vec<StatePreservationRule>,
}

/// One state preservation rule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatePreservationRule {
    /// Label name the state is stored under.
    pub alias_label_name: String,
    /// JSONPath into the member object's status.
    #[serde(rename = "jsonPath")]
    pub json_path: String,
}

string_enum! {
    /// Where a scheduling priority class comes from.
    pub enum PriorityClassSource {
        /// A FederatedPriorityClass.
        FederatedPriorityClass = "FederatedPriorityClass",
        /// A Kubernetes PriorityClass.
        KubePriorityClass = "KubePriorityClass",
        /// The pod template's priority class.
        PodPriorityClass = "PodPriorityClass",
    }
}

/// Scheduling priority (Karmada compatibility).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulePriority {
    /// Where the priority class comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_source: Option<PriorityClassSource>,
    /// The priority class name.
    #[serde(default)]
    pub priority_class_name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_modes_in_both_spellings() {
        for (written, canonical, directly, gracefully) in [
            ("Directly", "Directly", true, false),
            ("Immediately", "Directly", true, false),
            ("Gracefully", "Gracefully", false, true),
            ("Graciously", "Gracefully", false, true),
            ("Never", "Never", false, false),
            ("Later", "Later", false, false),
        ] {
            let mode = PurgeMode::from(written);
            assert_eq!(mode.canonical().as_str(), canonical, "{written}");
            assert_eq!(mode.is_directly(), directly, "{written}");
            assert_eq!(mode.is_gracefully(), gracefully, "{written}");
        }
    }

    #[test]
    fn application_failover_defaults_are_karmadas() {
        let unset = ApplicationFailoverBehavior::default();
        assert_eq!(unset.purge_mode(), PurgeMode::Gracefully);
        assert_eq!(unset.toleration_seconds(), 300);
        assert_eq!(unset.grace_period_seconds(), Some(600));

        let set = ApplicationFailoverBehavior {
            decision_conditions: DecisionConditions {
                toleration_seconds: Some(-5),
            },
            purge_mode: Some(PurgeMode::Graciously),
            grace_period_seconds: Some(30),
            state_preservation: None,
        };
        assert_eq!(
            set.toleration_seconds(),
            0,
            "negative counts as 0 (validation rejects it)"
        );
        assert_eq!(set.grace_period_seconds(), Some(30));

        let never = ApplicationFailoverBehavior {
            purge_mode: Some(PurgeMode::Never),
            grace_period_seconds: Some(30),
            ..Default::default()
        };
        assert_eq!(never.grace_period_seconds(), None);
    }
}
