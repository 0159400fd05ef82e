//! The two binding kinds the service schedules, behind one trait; the key that names a
//! binding in logs, spans, metrics and gRPC references; [`CachedBinding`], a binding as
//! scheduling reads it; and [`StoredBinding`], a binding as the watch cache holds it.

use std::fmt;

use flotilla_api::watched::WatchedKind;
use flotilla_api::well_known::conditions::SCHEDULED;
use flotilla_api::well_known::{ACTIVATION_PREFERENCE_ANNOTATION, TRACE_PARENT_ANNOTATION};
use flotilla_api::{ClusterResourceBinding, ResourceBinding, ResourceBindingSpec, ResourceBindingStatus};
use flotilla_proto::v1::{BindingKind, BindingRef};
use flotilla_runtime::packed::{Codec, Packed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A ResourceBinding or ClusterResourceBinding: the service treats both alike.
pub trait BindingObject:
    WatchedKind + Clone + fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Which kind this is.
    const KIND: BindingKind;

    /// The binding's spec (taken into a [`CachedBinding`]).
    fn binding_spec_mut(&mut self) -> &mut ResourceBindingSpec;

    /// The binding's status (taken into a [`CachedBinding`]).
    fn binding_status_mut(&mut self) -> &mut Option<ResourceBindingStatus>;

    /// The API for bindings of this kind in `namespace` (ignored for cluster-scoped bindings).
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;
}

impl BindingObject for ResourceBinding {
    const KIND: BindingKind = BindingKind::ResourceBinding;

    fn binding_spec_mut(&mut self) -> &mut ResourceBindingSpec {
        &mut self.spec
    }

    fn binding_status_mut(&mut self) -> &mut Option<ResourceBindingStatus> {
        &mut self.status
    }

    fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
        Api::namespaced(client, namespace.unwrap_or("default"))
    }
}

impl BindingObject for ClusterResourceBinding {
    const KIND: BindingKind = BindingKind::ClusterResourceBinding;

    fn binding_spec_mut(&mut self) -> &mut ResourceBindingSpec {
        &mut self.spec
    }

    fn binding_status_mut(&mut self) -> &mut Option<ResourceBindingStatus> {
        &mut self.status
    }

    fn api(client: Client, _namespace: Option<&str>) -> Api<Self> {
        Api::all(client)
    }
}

/// A binding as the scheduler reads it: its identity, the two annotations and the deletion
/// flag of its metadata, its spec, and its status without the member objects' statuses.
///
/// One scheduling attempt works on one, decoded from the watch cache's [`StoredBinding`] or made
/// from a read of the API (ADR 0016: kube-runtime's store kept the whole `ObjectMeta`, every
/// annotation and an `ObjectRef` key copying name, namespace, uid and resourceVersion).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedBinding {
    /// ResourceBinding or ClusterResourceBinding.
    pub kind: BindingKind,
    /// `metadata.namespace`; `None` for a ClusterResourceBinding.
    pub namespace: Option<Box<str>>,
    /// `metadata.name`.
    pub name: Box<str>,
    /// `metadata.uid`.
    pub uid: Option<Box<str>>,
    /// `metadata.resourceVersion`: every write is conditional on it.
    pub resource_version: Option<Box<str>>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Whether the annotation `flotilla.io/activation-preference` is `Lazy`.
    pub lazy: bool,
    /// The annotation `flotilla.io/traceparent`: the trace of the binding's last change.
    pub traceparent: Option<Box<str>>,
    /// The spec.
    pub spec: ResourceBindingSpec,
    /// The status. Of execution's per-cluster items (never written here: the status patch
    /// names the scheduler's fields only) failover reads whether each cluster applied and its
    /// health, and only for a binding that has graceful eviction tasks or application failover
    /// ([`reads_placement_health`]); the items of any other binding are dropped, and each item's
    /// member-object status and apply message always are.
    pub status: Option<ResourceBindingStatus>,
}

impl CachedBinding {
    /// What scheduling reads of `binding`. The spec and status are moved out: a
    /// `CachedBinding` lives for one scheduling attempt (what the watch cache keeps is a
    /// [`StoredBinding`]).
    pub fn of<K: BindingObject>(mut binding: K) -> Self {
        let spec = std::mem::take(binding.binding_spec_mut());
        let status = unread_status_dropped(&spec, binding.binding_status_mut().take());
        let facts = Facts::of(binding.meta());
        Self {
            kind: K::KIND,
            namespace: facts.namespace.map(Into::into),
            name: facts.name.into(),
            uid: facts.uid.map(Into::into),
            resource_version: facts.resource_version.map(Into::into),
            generation: facts.generation,
            deleting: facts.deleting,
            lazy: facts.lazy,
            traceparent: facts.traceparent.map(Into::into),
            spec,
            status,
        }
    }

    /// The key of this binding.
    pub fn key(&self) -> BindingKey {
        BindingKey::of(self.kind, self.namespace.as_deref(), &self.name)
    }

    /// A gRPC reference to this binding at its current generation.
    pub fn reference(&self) -> BindingRef {
        BindingRef {
            kind: self.kind as i32,
            namespace: self.namespace.as_deref().unwrap_or_default().to_owned(),
            name: self.name.to_string(),
            generation: self.generation.unwrap_or_default(),
            uid: self.uid.as_deref().unwrap_or_default().to_owned(),
        }
    }

    /// A reference to this binding as an object (for events).
    pub fn object_reference(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        flotilla_api::work::binding_object_reference(
            self.namespace.as_deref(),
            &self.name,
            self.uid.as_deref(),
        )
    }

    /// `status.schedulerObservedGeneration`.
    pub fn observed_generation(&self) -> Option<i64> {
        self.status.as_ref().and_then(|s| s.scheduler_observed_generation)
    }

    /// Records a write answered with `written`: the binding is the one written, at the new
    /// resourceVersion and generation.
    pub fn wrote(&mut self, written: flotilla_runtime::lean::Written) {
        self.resource_version = written.resource_version.map(Into::into);
        self.generation = written.generation;
    }
}

/// A binding as the watch cache holds it (ADR 0018, ADR 0019): what the watch and the metrics
/// read of every binding (its key, whether it was ever scheduled, its eviction tasks, whether
/// it is unschedulable) as fields, the rest of the [`CachedBinding`] as a packed JSON record
/// ([`flotilla_runtime::packed`]), read back by [`StoredBinding::binding`] when the binding is
/// scheduled.
///
/// A [`CachedBinding`] takes about 2.7 KiB (the inline spec and status are mostly empty
/// options; every string and vector is an allocation of its own); its JSON about 1.5 KiB, and
/// packed against the bindings before it about 0.2 KiB. A binding's event is read far more
/// often than the binding is scheduled.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredBinding {
    kind: BindingKind,
    namespace: Option<Box<str>>,
    name: Box<str>,
    observed_generation: Option<i64>,
    eviction_tasks: u32,
    unschedulable: bool,
    /// `metadata.resourceVersion` as an integer; 0 when it is absent or not one.
    version: u64,
    body: Packed,
}

/// The codec of [`StoredBinding`] bodies: its dictionaries are learned from the bindings it packs.
static BODIES: Codec = Codec::new();

/// `version` as the resourceVersion text it was parsed from; `None` for 0 (absent or not a
/// number).
fn version_text(version: u64) -> Option<Box<str>> {
    (version != 0).then(|| version.to_string().into())
}

/// Whether [`version_text`] of `version`, parsed from `text`, gives `text` back: digits only,
/// without a sign or leading zeros.
fn reads_back_from(version: u64, text: &str) -> bool {
    version != 0 && !text.starts_with('0') && text.bytes().all(|b| b.is_ascii_digit())
}

/// What scheduling reads of a binding's metadata, borrowed from it.
struct Facts<'a> {
    namespace: Option<&'a str>,
    name: &'a str,
    uid: Option<&'a str>,
    resource_version: Option<&'a str>,
    generation: Option<i64>,
    deleting: bool,
    lazy: bool,
    traceparent: Option<&'a str>,
}

impl<'a> Facts<'a> {
    fn of(metadata: &'a ObjectMeta) -> Self {
        let annotation = |key: &str| {
            metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        Self {
            namespace: metadata.namespace.as_deref(),
            name: metadata.name.as_deref().unwrap_or_default(),
            uid: metadata.uid.as_deref(),
            resource_version: metadata.resource_version.as_deref(),
            generation: metadata.generation,
            deleting: metadata.deletion_timestamp.is_some(),
            lazy: annotation(ACTIVATION_PREFERENCE_ANNOTATION) == Some("Lazy"),
            traceparent: annotation(TRACE_PARENT_ANNOTATION),
        }
    }
}

/// Whether scheduling reads a binding's `status.aggregatedStatus`: only failover does, to end
/// graceful eviction tasks once the placement is healthy and to evict a cluster whose
/// application stays unhealthy (`spec.failover.application`). A binding with neither never
/// needs its clusters' reports.
pub fn reads_placement_health(spec: &ResourceBindingSpec) -> bool {
    !spec.graceful_eviction_tasks.is_empty()
        || spec.failover.as_ref().is_some_and(|f| f.application.is_some())
}

/// `status` without what scheduling does not read: of execution's per-cluster items in
/// `status.aggregatedStatus`, failover reads whether each cluster applied and its health, and
/// only when [`reads_placement_health`]; each item's member-object status and apply message
/// always go, the items themselves for every other binding. The conditions stay whole: the
/// status patch replaces the list.
fn unread_status_dropped(
    spec: &ResourceBindingSpec,
    mut status: Option<ResourceBindingStatus>,
) -> Option<ResourceBindingStatus> {
    if let Some(status) = &mut status {
        if reads_placement_health(spec) {
            for item in &mut status.aggregated_status {
                item.status = None;
                item.applied_message = None;
            }
        } else {
            status.aggregated_status = Vec::new();
        }
    }
    status
}

/// The parts of a [`CachedBinding`] a [`StoredBinding`] keeps as JSON, as written.
#[derive(Serialize)]
struct StoredRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleting: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    lazy: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<&'a str>,
    spec: &'a ResourceBindingSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: &'a Option<ResourceBindingStatus>,
}

/// [`StoredRef`] read back.
#[derive(serde::Deserialize)]
struct Stored {
    #[serde(default)]
    uid: Option<Box<str>>,
    #[serde(default)]
    resource_version: Option<Box<str>>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    deleting: bool,
    #[serde(default)]
    lazy: bool,
    #[serde(default)]
    traceparent: Option<Box<str>>,
    spec: ResourceBindingSpec,
    #[serde(default)]
    status: Option<ResourceBindingStatus>,
}

impl flotilla_runtime::cache::Keyed for StoredBinding {
    type Key = flotilla_runtime::cache::InValue;

    fn object_key(&self) -> Option<(&str, &str)> {
        Some((self.namespace.as_deref().unwrap_or_default(), &self.name))
    }
}

impl StoredBinding {
    /// The stored form of `binding` as the watch delivers it (written from it, without the
    /// copy a [`CachedBinding`] would make).
    pub fn of<K: BindingObject>(mut binding: K) -> Self {
        let spec = std::mem::take(binding.binding_spec_mut());
        let status = unread_status_dropped(&spec, binding.binding_status_mut().take());
        Self::store(K::KIND, Facts::of(binding.meta()), &spec, &status)
    }

    fn store(
        kind: BindingKind,
        facts: Facts<'_>,
        spec: &ResourceBindingSpec,
        status: &Option<ResourceBindingStatus>,
    ) -> Self {
        let version = facts.resource_version.and_then(|v| v.parse().ok()).unwrap_or(0);
        let stored = StoredRef {
            uid: facts.uid,
            // Kept as `version` when that reads back as the same text (it always does from
            // flotilla-apiserver and kube-apiserver), so that two versions of a binding that
            // differ only in it pack to the same bytes (see [`StoredBinding::schedules_as`]).
            resource_version: facts.resource_version.filter(|v| !reads_back_from(version, v)),
            generation: facts.generation,
            deleting: facts.deleting,
            lazy: facts.lazy,
            traceparent: facts.traceparent,
            spec,
            status,
        };
        let body = BODIES.pack(&stored);
        Self {
            kind,
            namespace: facts.namespace.map(Into::into),
            name: facts.name.into(),
            observed_generation: status.as_ref().and_then(|s| s.scheduler_observed_generation),
            eviction_tasks: u32::try_from(spec.graceful_eviction_tasks.len()).unwrap_or(u32::MAX),
            unschedulable: status
                .as_ref()
                .and_then(|s| flotilla_api::conditions::find(&s.conditions, SCHEDULED))
                .is_some_and(|c| c.status == "False"),
            version,
            body,
        }
    }

    /// `metadata.resourceVersion` as an integer (`None` when it is absent or not one).
    pub fn resource_version(&self) -> Option<u64> {
        (self.version != 0).then_some(self.version)
    }

    /// Whether scheduling reads the same of this binding as of `other`: the same binding with
    /// the same record, so an attempt on one decides what an attempt on the other would.
    /// Versions that differ only in what the record leaves out (the resourceVersion, other
    /// writers' annotations, execution's per-cluster reports of a binding without failover)
    /// schedule alike.
    ///
    /// Conservative: the codec learns a new dictionary now and then, and the same record packed
    /// against another one has other bytes; such versions are taken as different.
    pub fn schedules_as(&self, other: &StoredBinding) -> bool {
        self.kind == other.kind
            && self.namespace == other.namespace
            && self.name == other.name
            && self.body == other.body
    }

    /// The binding as scheduling reads it.
    pub fn binding(&self) -> CachedBinding {
        let Stored {
            uid,
            resource_version,
            generation,
            deleting,
            lazy,
            traceparent,
            spec,
            status,
        } = BODIES.unpack(&self.body);
        CachedBinding {
            kind: self.kind,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid,
            resource_version: resource_version.or_else(|| version_text(self.version)),
            generation,
            deleting,
            lazy,
            traceparent,
            spec,
            status,
        }
    }

    /// The key of this binding.
    pub fn key(&self) -> BindingKey {
        BindingKey::of(self.kind, self.namespace.as_deref(), &self.name)
    }

    /// `status.schedulerObservedGeneration`.
    pub fn observed_generation(&self) -> Option<i64> {
        self.observed_generation
    }

    /// How many graceful eviction tasks the spec has.
    pub fn eviction_tasks(&self) -> usize {
        self.eviction_tasks as usize
    }

    /// Whether the `Scheduled` condition is `False`.
    pub fn unschedulable(&self) -> bool {
        self.unschedulable
    }
}

impl From<&CachedBinding> for StoredBinding {
    fn from(binding: &CachedBinding) -> Self {
        let facts = Facts {
            namespace: binding.namespace.as_deref(),
            name: &binding.name,
            uid: binding.uid.as_deref(),
            resource_version: binding.resource_version.as_deref(),
            generation: binding.generation,
            deleting: binding.deleting,
            lazy: binding.lazy,
            traceparent: binding.traceparent.as_deref(),
        };
        Self::store(binding.kind, facts, &binding.spec, &binding.status)
    }
}

/// Names one binding: its kind, namespace (ResourceBindings only) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BindingKey {
    /// ResourceBinding or ClusterResourceBinding.
    pub kind: BindingKind,
    /// The namespace of a ResourceBinding; `None` for a ClusterResourceBinding.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

/// Why a gRPC binding reference cannot name a binding.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidReference {
    /// `binding.kind` is unset or unknown.
    #[error(
        "binding.kind is {0}: set BINDING_KIND_RESOURCE_BINDING or BINDING_KIND_CLUSTER_RESOURCE_BINDING"
    )]
    Kind(i32),
    /// `binding.name` is empty.
    #[error("binding.name is empty: name the binding to schedule")]
    Name,
    /// A ResourceBinding reference without a namespace.
    #[error("binding.namespace is empty: a ResourceBinding is namespaced, set its namespace")]
    Namespace,
}

impl BindingKey {
    fn of(kind: BindingKind, namespace: Option<&str>, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// The key a gRPC reference names.
    pub fn from_reference(reference: &BindingRef) -> Result<Self, InvalidReference> {
        let kind = match BindingKind::try_from(reference.kind) {
            Ok(kind @ (BindingKind::ResourceBinding | BindingKind::ClusterResourceBinding)) => kind,
            _ => return Err(InvalidReference::Kind(reference.kind)),
        };
        if reference.name.is_empty() {
            return Err(InvalidReference::Name);
        }
        let namespace = match kind {
            BindingKind::ResourceBinding if reference.namespace.is_empty() => {
                return Err(InvalidReference::Namespace);
            }
            BindingKind::ResourceBinding => Some(reference.namespace.clone()),
            _ => None,
        };
        Ok(Self {
            kind,
            namespace,
            name: reference.name.clone(),
        })
    }

    /// The kind's name as in `kind:` (`ResourceBinding`, `ClusterResourceBinding`).
    pub fn kind_name(&self) -> &'static str {
        kind_name(self.kind)
    }
}

/// The kind's name as in `kind:`.
pub fn kind_name(kind: BindingKind) -> &'static str {
    match kind {
        BindingKind::ClusterResourceBinding => "ClusterResourceBinding",
        _ => "ResourceBinding",
    }
}

impl fmt::Display for BindingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind_name(), self.name),
            None => write!(f, "{} {}", self.kind_name(), self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;

    #[test]
    fn references_name_keys() {
        let rb = BindingRef::resource_binding("default", "web-deployment", 3, "u1");
        let key = BindingKey::from_reference(&rb).unwrap();
        assert_eq!(key.to_string(), "ResourceBinding default/web-deployment");
        let crb = BindingRef::cluster_resource_binding("ns-namespace", 1, "u2");
        let key = BindingKey::from_reference(&crb).unwrap();
        assert_eq!(key.namespace, None);
        assert_eq!(key.to_string(), "ClusterResourceBinding ns-namespace");
    }

    fn stored_binding() -> ResourceBinding {
        use flotilla_api::TargetCluster;
        use flotilla_api::work::{AggregatedStatusItem, ResourceHealth};
        let mut binding = ResourceBinding::new(
            "web-deployment",
            ResourceBindingSpec {
                replicas: 3,
                clusters: vec![TargetCluster {
                    name: "member1".into(),
                    replicas: 3,
                }],
                ..Default::default()
            },
        );
        let metadata = &mut binding.metadata;
        metadata.namespace = Some("default".into());
        metadata.uid = Some("binding-uid".into());
        metadata.resource_version = Some("42".into());
        metadata.generation = Some(2);
        metadata.labels = Some([("propagationpolicy.karmada.io/name".into(), "web".into())].into());
        metadata.annotations = Some(
            [
                (ACTIVATION_PREFERENCE_ANNOTATION.into(), "Lazy".into()),
                (TRACE_PARENT_ANNOTATION.into(), "00-0af7-b7ad-01".into()),
                ("policy.karmada.io/applied-placement".into(), "{}".into()),
            ]
            .into(),
        );
        metadata.managed_fields = Some(vec![Default::default()]);
        binding.status = Some(ResourceBindingStatus {
            scheduler_observed_generation: Some(1),
            aggregated_status: vec![AggregatedStatusItem {
                cluster_name: "member1".into(),
                status: Some(serde_json::json!({"readyReplicas": 3})),
                applied: true,
                applied_message: Some("applied".into()),
                health: Some(ResourceHealth::Healthy),
                ..Default::default()
            }],
            ..Default::default()
        });
        binding
    }

    /// [`stored_binding`] with application failover: its clusters' reports are read.
    fn failing_over_binding() -> ResourceBinding {
        let mut binding = stored_binding();
        binding.spec.failover = Some(flotilla_api::policy::FailoverBehavior {
            application: Some(Default::default()),
            ..Default::default()
        });
        binding
    }

    #[test]
    fn a_cached_binding_keeps_what_scheduling_reads_and_drops_the_rest() {
        let binding = failing_over_binding();
        let cached = CachedBinding::of(binding.clone());
        assert_eq!(cached.key().to_string(), "ResourceBinding default/web-deployment");
        assert_eq!(cached.resource_version.as_deref(), Some("42"));
        assert_eq!(cached.generation, Some(2));
        assert_eq!(cached.observed_generation(), Some(1));
        assert!(!cached.deleting);
        assert!(cached.lazy);
        assert_eq!(cached.traceparent.as_deref(), Some("00-0af7-b7ad-01"));
        assert_eq!(cached.spec, binding.spec, "the spec is read whole");
        // Of each cluster's report: whether it applied and its health, for failover.
        let item = &cached.status.as_ref().unwrap().aggregated_status[0];
        assert!(item.applied);
        assert_eq!(
            item.health,
            binding.status.as_ref().unwrap().aggregated_status[0].health
        );
        assert_eq!(
            (item.status.as_ref(), item.applied_message.as_ref()),
            (None, None)
        );

        // Without failover and eviction tasks, nothing reads the clusters' reports.
        let cached = CachedBinding::of(stored_binding());
        let status = cached.status.unwrap();
        assert!(status.aggregated_status.is_empty());
        assert_eq!(status.scheduler_observed_generation, Some(1));
        let mut evicting = stored_binding();
        evicting.spec.graceful_eviction_tasks = vec![Default::default()];
        assert!(reads_placement_health(&evicting.spec));
        let cached = CachedBinding::of(evicting);
        assert_eq!(cached.status.unwrap().aggregated_status.len(), 1);

        let mut eager = binding.clone();
        eager.metadata.annotations = None;
        eager.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        let eager = CachedBinding::of(eager);
        assert!(!eager.lazy && eager.traceparent.is_none() && eager.deleting);
    }

    #[test]
    fn a_stored_binding_reads_back_as_the_cached_binding() {
        use flotilla_api::work::GracefulEvictionTask;
        let mut binding = stored_binding();
        binding.spec.graceful_eviction_tasks = vec![GracefulEvictionTask {
            from_cluster: "member2".into(),
            ..Default::default()
        }];
        binding.status.as_mut().unwrap().conditions = vec![Condition {
            type_: SCHEDULED.into(),
            status: "False".into(),
            reason: "NoClusterFit".into(),
            message: "0/3 clusters are available".into(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            observed_generation: Some(2),
        }];
        let cached = CachedBinding::of(binding.clone());
        let stored = StoredBinding::of(binding.clone());
        // Compared by what they hold, not by their packed bytes: the shared codec may learn a
        // dictionary between the two packings while other tests pack records (a CI run saw
        // 469 bytes against 18).
        assert_eq!(StoredBinding::from(&cached).binding(), stored.binding());
        assert_eq!(stored.binding(), cached, "every field reads back");
        assert_eq!(stored.key(), cached.key());
        assert_eq!(stored.observed_generation(), Some(1));
        assert_eq!(stored.eviction_tasks(), 1);
        assert!(stored.unschedulable());

        // What is unset stays unset, a cluster-scoped binding included.
        let crb = flotilla_api::ClusterResourceBinding::new("ns-namespace", Default::default());
        let cached = CachedBinding::of(crb.clone());
        let stored = StoredBinding::of(crb);
        assert_eq!(stored.binding(), cached);
        assert_eq!(stored.key().to_string(), "ClusterResourceBinding ns-namespace");
        assert_eq!(
            (
                stored.observed_generation(),
                stored.eviction_tasks(),
                stored.unschedulable()
            ),
            (None, 0, false)
        );
    }

    #[test]
    fn a_resource_version_reads_back_whether_or_not_it_is_a_plain_number() {
        for version in ["42", "0", "007", "+5", "abc", "18446744073709551616"] {
            let mut binding = stored_binding();
            binding.metadata.resource_version = Some(version.into());
            let stored = StoredBinding::of(binding.clone());
            assert_eq!(
                stored.binding().resource_version.as_deref(),
                Some(version),
                "{version}"
            );
            assert_eq!(stored.binding(), CachedBinding::of(binding));
        }
        let mut binding = stored_binding();
        binding.metadata.resource_version = None;
        assert_eq!(StoredBinding::of(binding).binding().resource_version, None);
    }

    /// Whether `b` schedules as `a`, both packed against the same dictionary (other tests pack
    /// bindings at the same time, and the codec may learn a new one in between).
    fn schedule_alike(a: &ResourceBinding, b: &ResourceBinding) -> bool {
        loop {
            let learned = BODIES.dictionaries();
            let (a, b) = (StoredBinding::of(a.clone()), StoredBinding::of(b.clone()));
            if BODIES.dictionaries() == learned {
                return b.schedules_as(&a);
            }
        }
    }

    #[test]
    fn versions_that_change_nothing_scheduling_reads_schedule_alike() {
        use flotilla_api::work::ResourceHealth;
        let before = stored_binding();
        // Another writer's annotation, a new resourceVersion, new reports of the clusters of a
        // binding without failover.
        let mut other_writer = stored_binding();
        other_writer.metadata.resource_version = Some("43".into());
        other_writer
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("resourcebinding.karmada.io/dependencies".into(), "[]".into());
        let reports = &mut other_writer.status.as_mut().unwrap().aggregated_status;
        reports[0].health = Some(ResourceHealth::Unhealthy);
        reports[0].status = Some(serde_json::json!({"readyReplicas": 0}));
        assert!(schedule_alike(&before, &other_writer));
        let after = StoredBinding::of(other_writer);
        assert_eq!(after.resource_version(), Some(43));
        assert_eq!(after.binding().resource_version.as_deref(), Some("43"));

        // What scheduling reads: the spec, the generation, any condition, the annotations it
        // reads, and the reports of a binding with failover.
        let changes: [fn(&mut ResourceBinding); 5] = [
            |b| b.spec.replicas = 4,
            |b| b.metadata.generation = Some(3),
            |b| {
                b.status.as_mut().unwrap().conditions = vec![Condition {
                    type_: "FullyApplied".into(),
                    status: "True".into(),
                    reason: "FullyAppliedSuccess".into(),
                    message: String::new(),
                    last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                    observed_generation: Some(2),
                }]
            },
            |b| b.metadata.annotations = None,
            |b| b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        ];
        for change in changes {
            let mut changed = stored_binding();
            change(&mut changed);
            assert!(!schedule_alike(&before, &changed));
        }
        let failing_over = failing_over_binding();
        let mut unhealthy = failing_over_binding();
        unhealthy.status.as_mut().unwrap().aggregated_status[0].health = Some(ResourceHealth::Unhealthy);
        assert!(!schedule_alike(&failing_over, &unhealthy));
        let mut member_status_only = failing_over_binding();
        member_status_only.status.as_mut().unwrap().aggregated_status[0].status = None;
        assert!(schedule_alike(&failing_over, &member_status_only));

        // Another binding with the same record is another binding.
        let mut renamed = stored_binding();
        renamed.metadata.name = Some("web2-deployment".into());
        assert!(!schedule_alike(&before, &renamed));
    }

    #[test]
    fn a_cached_binding_names_itself_for_peers_and_events() {
        let mut cached = CachedBinding::of(stored_binding());
        assert_eq!(
            cached.reference(),
            BindingRef::resource_binding("default", "web-deployment", 2, "binding-uid")
        );
        let event = cached.object_reference();
        assert_eq!(event.api_version.as_deref(), Some("work.karmada.io/v1alpha2"));
        assert_eq!(event.kind.as_deref(), Some("ResourceBinding"));
        assert_eq!(event.namespace.as_deref(), Some("default"));
        assert_eq!(event.name.as_deref(), Some("web-deployment"));
        assert_eq!(event.uid.as_deref(), Some("binding-uid"));
        // A write moves the version and generation the next write and the peers see.
        cached.wrote(flotilla_runtime::lean::Written {
            resource_version: Some("43".into()),
            generation: Some(3),
        });
        assert_eq!(cached.resource_version.as_deref(), Some("43"));
        assert_eq!(cached.reference().generation, 3);

        let crb = flotilla_api::ClusterResourceBinding::new("ns-namespace", Default::default());
        let cached = CachedBinding::of(crb);
        assert_eq!(cached.key().to_string(), "ClusterResourceBinding ns-namespace");
        assert_eq!(
            cached.object_reference().kind.as_deref(),
            Some("ClusterResourceBinding")
        );
        assert_eq!(cached.object_reference().namespace, None);
    }

    #[test]
    fn invalid_references_say_which_field() {
        let mut reference = BindingRef::resource_binding("default", "web", 1, "u");
        reference.kind = 0;
        assert_eq!(
            BindingKey::from_reference(&reference),
            Err(InvalidReference::Kind(0))
        );
        reference.kind = 9;
        assert_eq!(
            BindingKey::from_reference(&reference),
            Err(InvalidReference::Kind(9))
        );
        let reference = BindingRef::resource_binding("default", "", 1, "u");
        assert_eq!(
            BindingKey::from_reference(&reference),
            Err(InvalidReference::Name)
        );
        let reference = BindingRef::resource_binding("", "web", 1, "u");
        let error = BindingKey::from_reference(&reference).unwrap_err();
        assert!(error.to_string().contains("binding.namespace"), "{error}");
        // A cluster-scoped reference ignores a stray namespace.
        let mut reference = BindingRef::cluster_resource_binding("x", 1, "u");
        reference.namespace = "ignored".into();
        assert_eq!(BindingKey::from_reference(&reference).unwrap().namespace, None);
    }
}
