//! What execution keeps of a Work in its watch cache: [`CachedWork`], the facts it reads of a
//! Work and nothing else.
//!
//! Execution caches every Work of the installation (five per template with five members), and a
//! whole Work in the cache (manifests replaced by their hashes, but labels and annotations as
//! maps, every condition and every member object's status as a JSON tree) was 4.3 KiB: the
//! largest memory of the services (511 MiB at 100,000 Works). Nothing reads most of it from the
//! cache. The per-cluster workers apply a Work they read from the API; the binding controller
//! compares a desired Work with the cached one ([`CachedWork::holds`]) and aggregates the cached
//! Works' reports into the binding's status. So a cached Work is:
//! - its name and namespace, and of the rest of its metadata the facts read: generation,
//!   whether it is being deleted, whether it has execution's finalizer (and a hash of all
//!   finalizers, for [`CachedWork::worker_signature`]);
//! - its labels and annotations as hashes of their pairs (what the binding controller wrote
//!   is compared, never read back), and the few values read as values;
//! - its manifests as 64-bit digests ([`manifest_digest`]), computed when the Work's generation
//!   changes and kept from the previous record otherwise ([`CachedWork::of`]);
//! - the report of its first manifest (the workload): whether it is applied and why not,
//!   computed once when the watch delivers the Work ([`work_applied`]), its health, and its
//!   status as a packed record, read back only when a binding's status is aggregated.
//!
//! The cache is a [`flotilla_runtime::cache::Cache`] (no `ObjectMeta`, no kube-runtime store
//! key): the watch converts each Work as it arrives, so a whole Work lives only while one watch
//! event is handled.
//!
//! What Works repeat is shared, not copied (ADR 0019): the execution namespace (one per cluster)
//! and the binding key (one per binding, five Works each with five members, the same copy the
//! cached binding and the binding queue hold: [`BindingKey::shared`]) are interned
//! ([`flotilla_runtime::intern`]); the workload's status is a packed record
//! ([`flotilla_runtime::packed`]). Everything of variable length (the manifest digests, the
//! label and annotation hashes, the name, the packed status, the reason it is not applied, a
//! propagated namespace) is one allocation beside the record, whose fixed part is lengths and
//! flags: two allocations per Work, about 190 bytes with glibc's headers (112 the record, the
//! rest the tail), where a record with a field per part took up to five allocations and about
//! 320. A cluster's work queue holds a copy of a Work's name while the Work waits there.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use flotilla_api::policy::EffectiveSuspension;
use flotilla_api::well_known::conditions;
use flotilla_api::work::{ResourceBindingStatus, ResourceHealth};
use flotilla_api::{ClusterResourceBinding, ResourceBinding, ResourceBindingSpec, Work};
use flotilla_overrides::{APPLIED_CLUSTER_OVERRIDES_ANNOTATION, APPLIED_OVERRIDES_ANNOTATION};
use flotilla_runtime::intern::Interner;
use flotilla_runtime::packed::{Codec, Packed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::context::BindingKey;
use crate::dispatch::{binding_of_work, scheduled};
use crate::manifest::manifest_digest;
use crate::namespaces::PROPAGATED_NAMESPACE_LABEL;
use crate::overrides::detector_managed;
use crate::status::work_applied;
use crate::works::{BINDING_FINALIZER, BindingKind, DesiredWork, WORK_FINALIZER};

/// Execution namespaces, shared by the Works in them. An `Arc<String>`, not an `Arc<str>`: a
/// thin pointer keeps [`CachedWork`] at 88 bytes, so with `Arc`'s counts and glibc's header its
/// allocation is 112 bytes, not 128 (1.6 MiB at 100,000 Works).
static WORK_NAMESPACES: Interner<String> = Interner::new();
/// Template namespaces, shared by the bindings of their templates.
static NAMESPACES: Interner<str> = Interner::new();
/// Cluster names, shared by the bindings targeting them.
static CLUSTERS: Interner<str> = Interner::new();
/// The codec of the workloads' statuses.
static STATUSES: Codec = Codec::new();

/// A Work as execution's watch cache keeps it (see the module docs): two allocations, this
/// record and its `tail`.
#[derive(Clone, Debug)]
pub struct CachedWork {
    /// `metadata.namespace` (an execution namespace), shared ([`WORK_NAMESPACES`]).
    namespace: Arc<String>,
    /// The binding the Work belongs to ([`binding_of_work`]).
    pub binding: Option<Arc<BindingKey>>,
    /// `metadata.generation`; [`NO_GENERATION`] when unset ([`CachedWork::generation`]).
    generation: i64,
    /// A hash of `metadata.finalizers` (a change of any finalizer needs the cluster's worker).
    finalizers: u64,
    /// [`records_hash`] of the override records.
    override_records: u64,
    /// What varies in length, in one allocation, in this order:
    /// - `manifests` [`manifest_digest`]s, one per manifest in order, then `labels` [`pair_hash`]es
    ///   of the labels, sorted, then `annotations` of the annotations, sorted: 8 bytes each,
    ///   native byte order ([`CachedWork::hash`]);
    /// - `name` bytes: `metadata.name`;
    /// - `status` bytes: the first manifest's status in its member, a packed record;
    /// - `not_applied` bytes: why the member objects do not hold the current manifests, if
    ///   they do not ([`work_applied`]);
    /// - the rest: the namespace a propagated-namespace Work carries
    ///   ([`PROPAGATED_NAMESPACE_LABEL`]), if `propagates` is set.
    tail: Box<[u8]>,
    /// How many manifest digests `tail` starts with.
    manifests: u32,
    /// How many label hashes follow them.
    labels: u32,
    /// How many annotation hashes follow those.
    annotations: u32,
    /// The bytes of the name.
    name: u32,
    /// The bytes of the packed status (0: none reported).
    status: u32,
    /// The bytes of the not-applied message (meaningful when `applied` is false).
    not_applied: u32,
    /// Whether the member objects hold the current manifests ([`work_applied`]).
    applied: bool,
    /// Whether the Work carries [`PROPAGATED_NAMESPACE_LABEL`] (its value ends `tail`).
    propagates: bool,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Whether `metadata.finalizers` holds [`WORK_FINALIZER`].
    finalized: bool,
    /// `spec.suspendDispatching`.
    pub suspend_dispatching: Option<bool>,
    /// `spec.preserveResourcesOnDeletion`.
    pub preserve_resources_on_deletion: Option<bool>,
    /// The health of the first manifest (the workload) in its member ([`CachedWork::health`]).
    health: Option<Health>,
}

/// A workload's health as a cached Work keeps it: one byte. The Work CRD's schema allows only
/// these three; a value this version does not know (written past the schema) is kept as
/// `Unknown`, which is what the binding's aggregated status then reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Health {
    Healthy,
    Unhealthy,
    Unknown,
}

impl From<&ResourceHealth> for Health {
    fn from(health: &ResourceHealth) -> Self {
        match health {
            ResourceHealth::Healthy => Self::Healthy,
            ResourceHealth::Unhealthy => Self::Unhealthy,
            ResourceHealth::Unknown | ResourceHealth::Other(_) => Self::Unknown,
        }
    }
}

impl From<&Work> for CachedWork {
    fn from(work: &Work) -> Self {
        Self::of(work, None)
    }
}

impl CachedWork {
    /// `work` as the cache keeps it. `previous` is what the cache held for the same Work (same
    /// uid) before this event: when it was of the same `metadata.generation` its manifest
    /// digests are kept, since the API server changes the generation with every change of the
    /// spec, the manifests' with it; a status write (most events) then hashes nothing.
    pub fn of(work: &Work, previous: Option<&CachedWork>) -> Self {
        let not_applied = work_applied(work).err();
        let binding = binding_of_work(work).map(BindingKey::shared);
        let Work {
            metadata,
            spec,
            status,
        } = work;
        let annotations = metadata.annotations.as_ref();
        let override_records = records_hash(
            annotations.and_then(|a| a.get(APPLIED_OVERRIDES_ANNOTATION)),
            annotations.and_then(|a| a.get(APPLIED_CLUSTER_OVERRIDES_ANNOTATION)),
        );
        let workload = status
            .iter()
            .flat_map(|s| &s.manifest_statuses)
            .find(|m| m.identifier.ordinal == 0);
        let health = workload
            .as_ref()
            .and_then(|m| m.health.as_ref())
            .map(Health::from);
        let packed_status = workload
            .and_then(|m| m.status.as_ref())
            .map(|status| STATUSES.pack(status));
        let packed_status = packed_status.as_ref().map_or(&[][..], Packed::as_bytes);
        let propagated_namespace = metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PROPAGATED_NAMESPACE_LABEL));
        let message = not_applied.as_deref().unwrap_or_default();
        let finalizers = metadata.finalizers.as_deref().unwrap_or_default();
        let manifests = &spec.workload.manifests;
        let label_count = metadata.labels.as_ref().map_or(0, BTreeMap::len);
        let annotation_count = metadata.annotations.as_ref().map_or(0, BTreeMap::len);

        let name = metadata.name.as_deref().unwrap_or_default();
        let mut tail = Vec::with_capacity(
            8 * (manifests.len() + label_count + annotation_count)
                + name.len()
                + packed_status.len()
                + message.len()
                + propagated_namespace.map_or(0, String::len),
        );
        // One vector for all the hashes (each part sorted in place for
        // [`CachedWork::holds_hash`]), written into the tail as bytes.
        let mut hashes = Vec::with_capacity(manifests.len() + label_count + annotation_count);
        match previous.filter(|previous| previous.is_at(metadata.generation, manifests.len())) {
            Some(previous) => hashes.extend(previous.manifest_hashes()),
            None => hashes.extend(manifests.iter().map(manifest_digest)),
        }
        for map in [&metadata.labels, &metadata.annotations] {
            let start = hashes.len();
            hashes.extend(map.iter().flatten().map(|(k, v)| pair_hash(k, v)));
            hashes[start..].sort_unstable();
        }
        tail.extend(hashes.iter().flat_map(|hash| hash.to_ne_bytes()));
        tail.extend_from_slice(name.as_bytes());
        tail.extend_from_slice(packed_status);
        tail.extend_from_slice(message.as_bytes());
        tail.extend_from_slice(propagated_namespace.map_or(&[][..], |n| n.as_bytes()));
        Self {
            namespace: WORK_NAMESPACES.intern_value(metadata.namespace.clone().unwrap_or_default()),
            binding,
            generation: metadata.generation.unwrap_or(NO_GENERATION),
            finalizers: finalizers_hash(finalizers),
            override_records,
            tail: tail.into_boxed_slice(),
            manifests: length(manifests.len()),
            labels: length(label_count),
            annotations: length(annotation_count),
            name: length(name.len()),
            status: length(packed_status.len()),
            not_applied: length(message.len()),
            applied: not_applied.is_none(),
            propagates: propagated_namespace.is_some(),
            deleting: metadata.deletion_timestamp.is_some(),
            finalized: finalizers.iter().any(|f| f == WORK_FINALIZER),
            suspend_dispatching: spec.suspend_dispatching,
            preserve_resources_on_deletion: spec.preserve_resources_on_deletion,
            health,
        }
    }
}

fn finalizers_hash(finalizers: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    finalizers.hash(&mut hasher);
    hasher.finish()
}

/// [`CachedWork::worker_signature`] of `work` as read: the cached Work of the same name has
/// this signature when it holds the same generation, deletion and finalizers.
pub fn worker_signature_of(work: &Work) -> (Option<i64>, bool, u64) {
    (
        work.metadata.generation,
        work.metadata.deletion_timestamp.is_some(),
        finalizers_hash(work.metadata.finalizers.as_deref().unwrap_or_default()),
    )
}

/// [`CachedWork::generation`] of a Work without `metadata.generation` (the API server sets it
/// from 1 up; a stored value is never negative).
const NO_GENERATION: i64 = i64::MIN;

/// A length of what a cached Work holds, as stored. A Work is at most a few MiB (the API
/// server's request limit), so every length fits.
fn length(n: usize) -> u32 {
    u32::try_from(n).expect("a Work's parts are shorter than 4 GiB")
}

impl flotilla_runtime::cache::Keyed for CachedWork {
    type Key = flotilla_runtime::cache::InValue;

    fn object_key(&self) -> Option<(&str, &str)> {
        Some((&self.namespace, self.name()))
    }
}

impl CachedWork {
    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.text(self.name_range())
    }

    /// `metadata.name` as a cluster's work queue key: a copy the queue holds while the Work
    /// waits (the record keeps its name in its tail).
    pub fn queue_name(&self) -> Arc<str> {
        Arc::from(self.name())
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        (self.generation != NO_GENERATION).then_some(self.generation)
    }

    /// The [`manifest_digest`] of manifest `ordinal` of this Work as it is at `generation`
    /// with `count` manifests: known when this record is of that generation (a generation's
    /// manifests never change), `None` otherwise.
    pub fn manifest_digest_at(&self, generation: Option<i64>, ordinal: usize, count: usize) -> Option<u64> {
        (self.is_at(generation, count) && ordinal < count).then(|| self.hash(ordinal))
    }

    /// Whether this record is of the Work at `generation` (set) with `count` manifests, so that
    /// its manifest digests are that generation's.
    fn is_at(&self, generation: Option<i64>, count: usize) -> bool {
        generation.is_some() && self.generation() == generation && self.manifests as usize == count
    }

    /// What of the Work, when it changes, needs its cluster's worker: generation, whether it is
    /// being deleted, finalizers. Status-only changes (the worker's own writes) do not move it.
    pub fn worker_signature(&self) -> (Option<i64>, bool, u64) {
        (self.generation(), self.deleting, self.finalizers)
    }

    /// Whether the member objects hold the current manifests: `Ok`, or why not
    /// ([`work_applied`]).
    pub fn applied(&self) -> Result<(), &str> {
        if self.applied {
            Ok(())
        } else {
            Err(self.text(self.message_range()))
        }
    }

    /// The namespace a propagated-namespace Work carries ([`PROPAGATED_NAMESPACE_LABEL`]).
    pub fn propagated_namespace(&self) -> Option<&str> {
        self.propagates
            .then(|| self.text(self.message_range().end..self.tail.len()))
    }

    /// Whether the Work's cluster worker has nothing to do, as far as the cache tells: the Work
    /// carries execution's finalizer, is not being deleted, its member objects hold its current
    /// manifests, and it belongs to `binding` (the cached binding of [`Self::binding`], `None`
    /// when that binding is not cached), not to a deleted one or an older one of the same name.
    /// The resync leaves such a Work alone (its drift reaches the worker through the member
    /// watches); a Work of no binding (a propagated namespace) needs no binding.
    pub fn settled(&self, binding: Option<&CachedBinding>) -> bool {
        let ours = match (&self.binding, binding) {
            (None, _) => true,
            (Some(key), Some(binding)) => binding
                .uid
                .as_deref()
                .is_some_and(|uid| self.has_label(key.kind.permanent_id_label(), uid)),
            (Some(_), None) => false,
        };
        ours && self.finalized && !self.deleting && self.applied
    }

    /// The `index`th hash of the tail (manifest digests, then label, then annotation hashes).
    fn hash(&self, index: usize) -> u64 {
        let bytes = &self.tail[8 * index..8 * index + 8];
        u64::from_ne_bytes(bytes.try_into().expect("a hash is 8 bytes"))
    }

    /// The hashes in the tail: manifests, labels, annotations.
    fn hash_count(&self) -> usize {
        self.manifests as usize + self.labels as usize + self.annotations as usize
    }

    /// The digests of the manifests, in order.
    fn manifest_hashes(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        (0..self.manifests as usize).map(|i| self.hash(i))
    }

    /// Whether the sorted hashes at `indices` of the tail hold `wanted` (a binary search).
    fn holds_hash(&self, indices: std::ops::Range<usize>, wanted: u64) -> bool {
        let (mut low, mut high) = (indices.start, indices.end);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.hash(middle).cmp(&wanted) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    /// Whether the Work has the label `key` with `value`.
    pub fn has_label(&self, key: &str, value: &str) -> bool {
        let start = self.manifests as usize;
        self.holds_hash(start..start + self.labels as usize, pair_hash(key, value))
    }

    /// Whether the Work has the annotation `key` with `value`.
    pub fn has_annotation(&self, key: &str, value: &str) -> bool {
        let start = self.manifests as usize + self.labels as usize;
        self.holds_hash(start..self.hash_count(), pair_hash(key, value))
    }

    /// Where the name lies in the tail.
    fn name_range(&self) -> std::ops::Range<usize> {
        let start = 8 * self.hash_count();
        start..start + self.name as usize
    }

    /// Where the packed status lies in the tail.
    fn status_range(&self) -> std::ops::Range<usize> {
        let start = self.name_range().end;
        start..start + self.status as usize
    }

    /// Where the not-applied message lies in the tail.
    fn message_range(&self) -> std::ops::Range<usize> {
        let start = self.status_range().end;
        start..start + self.not_applied as usize
    }

    /// The text at `range` of the tail (written from a `str` in [`CachedWork::from`]).
    fn text(&self, range: std::ops::Range<usize>) -> &str {
        std::str::from_utf8(&self.tail[range]).expect("the tail holds the text it was given")
    }

    /// The first manifest's health in its member, if reported.
    pub fn health(&self) -> Option<ResourceHealth> {
        self.health.map(|health| match health {
            Health::Healthy => ResourceHealth::Healthy,
            Health::Unhealthy => ResourceHealth::Unhealthy,
            Health::Unknown => ResourceHealth::Unknown,
        })
    }

    /// The first manifest's status in its member, if reported.
    pub fn status(&self) -> Option<Value> {
        let range = self.status_range();
        (!range.is_empty()).then(|| STATUSES.unpack_bytes(&self.tail[range]))
    }

    /// Whether the Work already is `desired`: nothing the binding controller writes differs.
    /// Labels and annotations it does not write are not compared (other writers may add
    /// them), except the override records, which must also go when no rule applies any more.
    pub fn holds(&self, desired: &DesiredWork) -> bool {
        // Field by field (a new WorkSpec field does not compile here until it is compared).
        let flotilla_api::work::WorkSpec {
            workload,
            suspend_dispatching,
            preserve_resources_on_deletion,
        } = &desired.spec;
        let records = records_hash(
            desired.annotations.get(APPLIED_OVERRIDES_ANNOTATION),
            desired.annotations.get(APPLIED_CLUSTER_OVERRIDES_ANNOTATION),
        );
        self.suspend_dispatching == *suspend_dispatching
            && self.preserve_resources_on_deletion == *preserve_resources_on_deletion
            && self.override_records == records
            && self.has_manifests(&workload.manifests)
            && desired.labels.iter().all(|(k, v)| self.has_label(k, v))
            && desired.annotations.iter().all(|(k, v)| self.has_annotation(k, v))
            && self.finalized
    }

    /// Whether the Work has exactly `manifests`, in order.
    pub fn has_manifests(&self, manifests: &[Value]) -> bool {
        let hashes = self.manifest_hashes();
        hashes.len() == manifests.len()
            && hashes
                .zip(manifests)
                .all(|(hash, manifest)| hash == manifest_digest(manifest))
    }
}

/// A binding as execution's watch cache keeps it. The cache only finds the bindings to queue:
/// those targeting a cluster (`spec.clusters`), those of a template namespace
/// (`spec.resource.namespace`), those the detector manages ([`detector_managed`]), those whose
/// change the binding controller must see ([`Self::signature`]) and those the resync cannot
/// leave alone ([`Self::settled`]); and it tells whether a Work's binding still exists (uid). A
/// binding is reconciled from a fresh read (`dispatch::get_binding`), never from the cache, so
/// everything else (status, placement, metadata) is left out: about 100 bytes, the uid and a list
/// of shared cluster names instead of the 1.4 KiB a `ResourceBinding` takes inline. Its key, its
/// cluster names and its template's namespace are shared copies ([`BindingKey::shared`],
/// [`flotilla_runtime::intern`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedBinding {
    /// Kind, namespace and name ([`BindingKey::shared`]).
    pub key: Arc<BindingKey>,
    /// `metadata.uid` (whether a Work is an orphan).
    uid: Option<Box<str>>,
    /// `spec.clusters[].name`, shared with the other bindings targeting them.
    clusters: Box<[Arc<str>]>,
    /// `spec.resource.namespace`, shared with the other bindings of the namespace.
    resource_namespace: Option<Arc<str>>,
    /// A hash of everything of the binding its reconcile reads, except the status execution
    /// writes ([`Self::signature`]).
    signature: u64,
    /// Whether the binding's current generation is dispatched ([`dispatched`]).
    dispatched: bool,
    /// Whether the detector manages the binding ([`detector_managed`]).
    pub detector_managed: bool,
}

impl flotilla_runtime::cache::Keyed for CachedBinding {
    type Key = flotilla_runtime::cache::InValue;

    fn object_key(&self) -> Option<(&str, &str)> {
        Some((&self.key.namespace, &self.key.name))
    }
}

impl CachedBinding {
    fn of(
        kind: BindingKind,
        metadata: ObjectMeta,
        spec: &ResourceBindingSpec,
        status: Option<&ResourceBindingStatus>,
    ) -> Self {
        Self {
            signature: binding_signature(&metadata, status),
            dispatched: dispatched(&metadata, spec, status),
            uid: metadata.uid.as_deref().map(Box::from),
            clusters: spec.cluster_names().map(|c| CLUSTERS.intern(c)).collect(),
            resource_namespace: spec.resource.namespace.as_deref().map(|n| NAMESPACES.intern(n)),
            detector_managed: metadata.annotations.as_ref().is_some_and(detector_managed),
            key: BindingKey::new(
                kind,
                metadata.namespace.as_deref().unwrap_or_default(),
                metadata.name.as_deref().unwrap_or_default(),
            )
            .shared(),
        }
    }

    /// What of the binding, when it changes, its reconcile must see: its generation (every
    /// change of its spec), deletion, finalizers, labels and annotations (the override policies
    /// the detector recorded, the trace of the change), and the generation the scheduler last
    /// scheduled. The status execution writes itself (`aggregatedStatus`, conditions) and the
    /// other services' conditions are left out: a binding's watch event that changes only them
    /// would have its reconcile read the binding and its template to find nothing to do (as
    /// Karmada's binding status controller, which ignores binding status changes too).
    pub fn signature(&self) -> u64 {
        self.signature
    }

    /// Whether the binding's reconcile has nothing to do, as far as the caches tell: its current
    /// generation is dispatched (`dispatched`) and `works` (the cached Works of its name, by
    /// cluster) are exactly one settled Work ([`CachedWork::settled`]) for each cluster of its
    /// spec. The resync leaves such a binding alone: what could unsettle it reaches the binding
    /// controller through the watches (a change of the binding, a report or deletion of one of
    /// its Works, a cluster's or override policy's change).
    pub fn settled(&self, works: &BTreeMap<String, Arc<CachedWork>>) -> bool {
        self.dispatched
            && works.len() == self.clusters.len()
            && self
                .clusters
                .iter()
                .all(|cluster| works.get(&**cluster).is_some_and(|work| work.settled(Some(self))))
    }

    /// Whether the binding's uid is `uid`.
    pub fn has_uid(&self, uid: &str) -> bool {
        self.uid.as_deref() == Some(uid)
    }

    /// Whether `spec.clusters` holds `cluster`.
    pub fn targets(&self, cluster: &str) -> bool {
        self.clusters.iter().any(|c| **c == *cluster)
    }

    /// Whether the binding's template is in `namespace`.
    pub fn of_namespace(&self, namespace: &str) -> bool {
        self.resource_namespace.as_deref() == Some(namespace)
    }
}

impl From<ResourceBinding> for CachedBinding {
    fn from(binding: ResourceBinding) -> Self {
        Self::of(
            BindingKind::ResourceBinding,
            binding.metadata,
            &binding.spec,
            binding.status.as_ref(),
        )
    }
}

impl From<ClusterResourceBinding> for CachedBinding {
    fn from(binding: ClusterResourceBinding) -> Self {
        Self::of(
            BindingKind::ClusterResourceBinding,
            binding.metadata,
            &binding.spec,
            binding.status.as_ref(),
        )
    }
}

/// [`CachedBinding::signature`] of a binding's metadata and status.
fn binding_signature(metadata: &ObjectMeta, status: Option<&ResourceBindingStatus>) -> u64 {
    let mut hasher = DefaultHasher::new();
    (
        metadata.generation,
        metadata.deletion_timestamp.is_some(),
        &metadata.finalizers,
        &metadata.labels,
        &metadata.annotations,
        status.and_then(|s| s.scheduler_observed_generation),
    )
        .hash(&mut hasher);
    hasher.finish()
}

/// Whether a binding's current generation is dispatched and nothing in it keeps the binding
/// controller busy: it carries the binding controller's finalizer, is not being deleted, the
/// scheduler scheduled its generation and execution wrote `FullyApplied` `True` for it, and it
/// suspends dispatching to no cluster and has no graceful eviction task (those keep or remove
/// Works over time).
fn dispatched(
    metadata: &ObjectMeta,
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
) -> bool {
    let generation = metadata.generation;
    let Some(status) = status else { return false };
    scheduled(generation, Some(status))
        && metadata.deletion_timestamp.is_none()
        && metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == BINDING_FINALIZER)
        && flotilla_api::conditions::find(&status.conditions, conditions::FULLY_APPLIED)
            .is_some_and(|c| c.status == "True" && c.observed_generation == generation)
        && spec
            .suspension
            .as_ref()
            .is_none_or(|s| s.effective() == EffectiveSuspension::default())
        && spec.graceful_eviction_tasks.is_empty()
}

/// A hash of one label or annotation (`key`, `value`). 64 bits: two different pairs of one
/// Work colliding is as likely as a random 64-bit match.
fn pair_hash(key: &str, value: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (key, value).hash(&mut hasher);
    hasher.finish()
}

/// A hash of the override records (absent and present differ).
fn records_hash(namespaced: Option<&String>, cluster: Option<&String>) -> u64 {
    let mut hasher = DefaultHasher::new();
    (namespaced, cluster).hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use flotilla_api::policy::Suspension;
    use flotilla_api::work::{ManifestStatus, ResourceIdentifier, WorkSpec, WorkStatus, WorkloadTemplate};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::json;

    use super::*;

    fn manifests() -> Vec<Value> {
        vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {"replicas": 1}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
        ]
    }

    fn desired() -> DesiredWork {
        DesiredWork {
            cluster: "member1".into(),
            namespace: "karmada-es-member1".into(),
            name: "a-deployment-1234".into(),
            labels: BTreeMap::from([("resourcebinding.karmada.io/permanent-id".into(), "uid-1".into())]),
            annotations: BTreeMap::from([
                ("resourcebinding.karmada.io/name".into(), "a".into()),
                ("resourcebinding.karmada.io/namespace".into(), "default".into()),
            ]),
            spec: WorkSpec {
                workload: WorkloadTemplate {
                    manifests: manifests(),
                },
                suspend_dispatching: Some(false),
                preserve_resources_on_deletion: None,
            },
        }
    }

    /// The Work the API holds after `desired` was written, as another writer may have
    /// changed it, with a report of the workload.
    fn stored(desired: &DesiredWork) -> Work {
        let mut work = Work::new(&desired.name, desired.spec.clone());
        work.metadata.namespace = Some(desired.namespace.clone());
        work.metadata.uid = Some("work-uid".into());
        work.metadata.resource_version = Some("42".into());
        work.metadata.generation = Some(1);
        work.metadata.labels = Some(desired.labels.clone());
        let mut annotations = desired.annotations.clone();
        annotations.insert(
            "kubectl.kubernetes.io/last-applied-configuration".into(),
            "{}".into(),
        );
        work.metadata.annotations = Some(annotations);
        work.metadata.finalizers = Some(vec![WORK_FINALIZER.into()]);
        work.metadata.managed_fields = Some(vec![Default::default()]);
        work.status = Some(WorkStatus {
            conditions: vec![Condition {
                type_: "Applied".into(),
                status: "True".into(),
                reason: "AppliedSuccessful".into(),
                message: "Manifest has been successfully applied".into(),
                observed_generation: Some(1),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            }],
            manifest_statuses: vec![ManifestStatus {
                identifier: ResourceIdentifier {
                    ordinal: 0,
                    ..Default::default()
                },
                status: Some(json!({"readyReplicas": 2, "conditions": [{"type": "Available"}]})),
                health: Some(ResourceHealth::Healthy),
                applied_revision: None,
            }],
        });
        work
    }

    /// The signature of a Work as read is the signature its cached record has; a change of
    /// generation, deletion or finalizers moves it, a status change does not.
    #[test]
    fn a_work_as_read_has_the_signature_of_its_cached_record() {
        let read = stored(&desired());
        let signature = worker_signature_of(&read);
        assert_eq!(CachedWork::from(&read).worker_signature(), signature);
        let mut reported = read.clone();
        reported.status = None;
        assert_eq!(worker_signature_of(&reported), signature, "status only");
        let mut newer = read.clone();
        newer.metadata.generation = Some(2);
        let mut deleting = read.clone();
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let mut unfinalized = read.clone();
        unfinalized.metadata.finalizers = None;
        let mut ungenerated = read;
        ungenerated.metadata.generation = None;
        for changed in [newer, deleting, unfinalized, ungenerated] {
            assert_ne!(worker_signature_of(&changed), signature);
            assert_eq!(
                CachedWork::from(&changed).worker_signature(),
                worker_signature_of(&changed)
            );
        }
    }

    #[test]
    fn keeps_what_execution_reads_and_drops_the_rest() {
        let work = stored(&desired());
        let cached = CachedWork::from(&work);
        assert_eq!(cached.name(), "a-deployment-1234");
        assert_eq!(cached.namespace(), "karmada-es-member1");
        assert_eq!(cached.generation(), Some(1));
        assert!(!cached.deleting);
        assert!(cached.finalized);
        assert_eq!(
            cached.binding.as_deref(),
            Some(&BindingKey {
                kind: BindingKind::ResourceBinding,
                namespace: "default".into(),
                name: "a".into()
            })
        );
        assert_eq!(cached.propagated_namespace(), None);
        assert_eq!(
            cached.manifest_hashes().collect::<Vec<_>>(),
            manifests().iter().map(manifest_digest).collect::<Vec<_>>()
        );
        assert_eq!(cached.applied(), Ok(()));
        assert_eq!(work_applied(&work), Ok(()));
        assert_eq!(cached.health(), Some(ResourceHealth::Healthy));
        assert_eq!(
            cached.status(),
            Some(json!({"readyReplicas": 2, "conditions": [{"type": "Available"}]}))
        );
        assert!(cached.has_label("resourcebinding.karmada.io/permanent-id", "uid-1"));
        assert!(!cached.has_label("resourcebinding.karmada.io/permanent-id", "uid-2"));
        assert!(cached.has_annotation("resourcebinding.karmada.io/name", "a"));
        assert!(!cached.has_annotation("resourcebinding.karmada.io/name", "b"));
        // Labels and annotations share one allocation, not one lookup.
        assert!(!cached.has_annotation("resourcebinding.karmada.io/permanent-id", "uid-1"));
        assert!(!cached.has_label("resourcebinding.karmada.io/name", "a"));
    }

    #[test]
    fn manifest_digests_are_kept_from_the_same_generation_only() {
        let work = stored(&desired());
        let previous = CachedWork::from(&work);
        // A status write: same generation, and the digests are the previous record's. (A
        // previous record of other manifests shows they were kept, not computed again.)
        let mut other = work.clone();
        other.spec.workload.manifests[0]["spec"]["replicas"] = json!(7);
        let other_digests = CachedWork::from(&other);
        let kept = CachedWork::of(&work, Some(&other_digests));
        assert!(kept.has_manifests(&other.spec.workload.manifests));
        assert!(CachedWork::of(&work, Some(&previous)).has_manifests(&work.spec.workload.manifests));
        // A new generation, another number of manifests or no generation: hashed afresh.
        let mut bumped = other.clone();
        bumped.metadata.generation = Some(2);
        assert!(CachedWork::of(&bumped, Some(&previous)).has_manifests(&bumped.spec.workload.manifests));
        let mut fewer = other.clone();
        fewer.spec.workload.manifests.pop();
        assert!(CachedWork::of(&fewer, Some(&previous)).has_manifests(&fewer.spec.workload.manifests));
        let mut unversioned = other.clone();
        unversioned.metadata.generation = None;
        let mut previous_unversioned = work.clone();
        previous_unversioned.metadata.generation = None;
        let previous_unversioned = CachedWork::from(&previous_unversioned);
        assert!(
            CachedWork::of(&unversioned, Some(&previous_unversioned))
                .has_manifests(&unversioned.spec.workload.manifests)
        );
        // What an apply reads of the record: a digest of the same generation only.
        let digests: Vec<u64> = work.spec.workload.manifests.iter().map(manifest_digest).collect();
        assert_eq!(previous.manifest_digest_at(Some(1), 0, 2), Some(digests[0]));
        assert_eq!(previous.manifest_digest_at(Some(1), 1, 2), Some(digests[1]));
        for (generation, ordinal, count) in [(Some(2), 0, 2), (None, 0, 2), (Some(1), 0, 1), (Some(1), 2, 2)]
        {
            assert_eq!(previous.manifest_digest_at(generation, ordinal, count), None);
        }
        assert_eq!(previous_unversioned.manifest_digest_at(None, 0, 2), None);
    }

    #[test]
    fn a_cached_work_fits_a_112_byte_allocation() {
        // `Arc`'s two counts (16 bytes) and glibc's 8-byte header, rounded up to 16 bytes: a
        // record of 88 bytes takes a 112-byte chunk, one of 96 would take 128.
        assert!(std::mem::size_of::<CachedWork>() <= 88);
    }

    #[test]
    fn works_share_their_namespace_and_binding_key() {
        let first = CachedWork::from(&stored(&desired()));
        let mut other = desired();
        other.namespace = "karmada-es-member2".into();
        let second = CachedWork::from(&stored(&other));
        let again = CachedWork::from(&stored(&desired()));
        // The five Works of a binding hold one key; the Works of a cluster one namespace.
        assert!(Arc::ptr_eq(
            first.binding.as_ref().unwrap(),
            second.binding.as_ref().unwrap()
        ));
        assert!(Arc::ptr_eq(&first.namespace, &again.namespace));
        assert_eq!(second.namespace(), "karmada-es-member2");
        // The binding's own cached record holds that key too.
        let binding = binding("uid-1");
        assert!(Arc::ptr_eq(first.binding.as_ref().unwrap(), &binding.key));
        // A Work without labels or annotations has none of either.
        let mut bare = stored(&desired());
        bare.metadata.labels = None;
        bare.metadata.annotations = None;
        let bare = CachedWork::from(&bare);
        assert!(!bare.has_label("resourcebinding.karmada.io/permanent-id", "uid-1"));
        assert!(!bare.has_annotation("resourcebinding.karmada.io/name", "a"));
        assert_eq!(bare.binding, None);
    }

    #[test]
    fn the_worker_signature_moves_with_generation_deletion_and_finalizers_only() {
        let work = stored(&desired());
        let base = CachedWork::from(&work).worker_signature();
        let mut reported = work.clone();
        reported.status = None;
        assert_eq!(
            CachedWork::from(&reported).worker_signature(),
            base,
            "a status change"
        );
        let mut bumped = work.clone();
        bumped.metadata.generation = Some(2);
        assert_ne!(CachedWork::from(&bumped).worker_signature(), base);
        let mut deleting = work.clone();
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let deleting = CachedWork::from(&deleting);
        assert!(deleting.deleting);
        assert_ne!(deleting.worker_signature(), base);
        let mut other_finalizer = work;
        other_finalizer
            .metadata
            .finalizers
            .as_mut()
            .unwrap()
            .push("example.com/other".into());
        assert_ne!(CachedWork::from(&other_finalizer).worker_signature(), base);
    }

    #[test]
    fn holds_the_desired_work_until_something_it_writes_differs() {
        let want = desired();
        let cached = |work: Work| CachedWork::from(&work);
        assert!(
            cached(stored(&want)).holds(&want),
            "another writer's annotation is not compared"
        );

        let mut other = want.clone();
        other.spec.workload.manifests[1] =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(!cached(stored(&want)).holds(&other), "a manifest changed");
        let mut other = want.clone();
        other.spec.workload.manifests.reverse();
        assert!(!cached(stored(&want)).holds(&other), "manifest order matters");
        let mut other = want.clone();
        other.spec.workload.manifests.pop();
        assert!(!cached(stored(&want)).holds(&other), "a manifest is gone");
        let mut other = want.clone();
        other.spec.suspend_dispatching = Some(true);
        assert!(!cached(stored(&want)).holds(&other), "suspension changed");
        let mut other = want.clone();
        other.spec.preserve_resources_on_deletion = Some(true);
        assert!(!cached(stored(&want)).holds(&other), "preservation changed");
        let mut other = want.clone();
        other
            .labels
            .insert("resourcebinding.karmada.io/permanent-id".into(), "uid-2".into());
        assert!(!cached(stored(&want)).holds(&other), "a label value changed");
        let mut other = want.clone();
        other
            .annotations
            .insert("resourcebinding.karmada.io/name".into(), "b".into());
        assert!(
            !cached(stored(&want)).holds(&other),
            "an annotation value changed"
        );
        let mut other = want.clone();
        other.annotations.insert("flotilla.io/new".into(), "x".into());
        assert!(!cached(stored(&want)).holds(&other), "an annotation was added");

        // Override records: added, changed, and removed when no rule applies any more.
        let mut with_records = want.clone();
        with_records.annotations.insert(
            APPLIED_OVERRIDES_ANNOTATION.into(),
            "[{\"policyName\":\"p\"}]".into(),
        );
        assert!(!cached(stored(&want)).holds(&with_records));
        assert!(cached(stored(&with_records)).holds(&with_records));
        assert!(!cached(stored(&with_records)).holds(&want), "the record must go");
        let mut cluster_records = want.clone();
        cluster_records.annotations.insert(
            APPLIED_CLUSTER_OVERRIDES_ANNOTATION.into(),
            "[{\"policyName\":\"p\"}]".into(),
        );
        assert!(!cached(stored(&with_records)).holds(&cluster_records));

        let mut no_finalizer = stored(&want);
        no_finalizer.metadata.finalizers = None;
        assert!(!cached(no_finalizer).holds(&want), "the finalizer is missing");
    }

    #[test]
    fn every_part_of_the_tail_reads_back_beside_the_others() {
        // Hashes, status, a message of the API's and a propagated namespace, all in one Work.
        let mut work = stored(&desired());
        work.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(PROPAGATED_NAMESPACE_LABEL.into(), "team-ä".into());
        let status = work.status.as_mut().unwrap();
        status.conditions[0].status = "False".into();
        status.conditions[0].message = "member1: deployments.apps \"a\" is forbidden".into();
        let cached = CachedWork::from(&work);
        assert_eq!(
            cached.applied(),
            Err("member1: deployments.apps \"a\" is forbidden")
        );
        assert_eq!(cached.propagated_namespace(), Some("team-ä"));
        assert_eq!(
            cached.status(),
            Some(json!({"readyReplicas": 2, "conditions": [{"type": "Available"}]}))
        );
        assert!(cached.has_label(PROPAGATED_NAMESPACE_LABEL, "team-ä"));
        assert!(cached.has_label("resourcebinding.karmada.io/permanent-id", "uid-1"));
        assert!(cached.has_annotation("resourcebinding.karmada.io/name", "a"));
        assert!(cached.has_manifests(&manifests()));
        assert!(!cached.settled(None), "not applied");

        // Every label and annotation is found, and only in its own part.
        let want = desired();
        for (key, value) in &want.labels {
            assert!(cached.has_label(key, value), "label {key}");
            assert!(!cached.has_annotation(key, value), "label {key} as an annotation");
        }
        for (key, value) in &want.annotations {
            assert!(cached.has_annotation(key, value), "annotation {key}");
        }
        assert_eq!(cached.name(), "a-deployment-1234");
        assert_eq!(
            flotilla_runtime::cache::Keyed::object_key(&cached),
            Some(("karmada-es-member1", "a-deployment-1234"))
        );
        // The watch cache holds one record per Work (ADR 0019): with the Arc's two counts it
        // fits a 128-byte glibc chunk (the record with every part of its own took 192 and up
        // to four more allocations).
        assert!(
            std::mem::size_of::<CachedWork>() <= 104,
            "{}",
            std::mem::size_of::<CachedWork>()
        );

        // No generation reads back as none, and differs from every generation.
        let mut ungenerated = stored(&desired());
        ungenerated.metadata.generation = None;
        let ungenerated = CachedWork::from(&ungenerated);
        assert_eq!(ungenerated.generation(), None);
        assert_ne!(ungenerated.worker_signature(), cached.worker_signature());
        assert_eq!(ungenerated.name(), "a-deployment-1234");
    }

    #[test]
    fn a_health_past_the_schema_is_kept_as_unknown() {
        let mut work = stored(&desired());
        let status = work.status.as_mut().unwrap();
        status.manifest_statuses[0].health = Some(ResourceHealth::Other("Degraded".into()));
        assert_eq!(CachedWork::from(&work).health(), Some(ResourceHealth::Unknown));
        for health in [ResourceHealth::Unhealthy, ResourceHealth::Unknown] {
            let status = work.status.as_mut().unwrap();
            status.manifest_statuses[0].health = Some(health.clone());
            assert_eq!(CachedWork::from(&work).health(), Some(health));
        }
    }

    #[test]
    fn a_work_without_manifests_or_report() {
        let mut want = desired();
        want.spec.workload.manifests.clear();
        let mut work = stored(&want);
        work.status = None;
        work.metadata.labels = Some(BTreeMap::from([(
            PROPAGATED_NAMESPACE_LABEL.into(),
            "ns1".into(),
        )]));
        let cached = CachedWork::from(&work);
        assert_eq!(cached.manifest_hashes().len(), 0);
        assert!(cached.has_manifests(&[]));
        assert!(!cached.has_manifests(&manifests()[..1]));
        assert_eq!(cached.status(), None);
        assert_eq!(cached.health(), None);
        assert_eq!(cached.applied(), Err("not applied yet"));
        assert_eq!(cached.propagated_namespace(), Some("ns1"));
    }

    #[test]
    fn a_cached_binding_keeps_what_queues_it() {
        use flotilla_api::well_known::{POLICY_GENERATION_ANNOTATION, PROPAGATION_POLICY_NAME_ANNOTATION};
        use flotilla_api::work::{ObjectReference, ResourceBindingStatus, TargetCluster};

        let resource = ObjectReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("default".into()),
            name: "nginx".into(),
            uid: Some("template-uid".into()),
            resource_version: Some("7".into()),
        };
        let clusters = vec![
            TargetCluster {
                name: "member1".into(),
                replicas: 2,
            },
            TargetCluster {
                name: "member2".into(),
                replicas: 1,
            },
        ];
        let mut binding = ResourceBinding::new(
            "nginx-deployment",
            ResourceBindingSpec {
                resource,
                clusters,
                placement: Some(Default::default()),
                propagate_deps: true,
                replicas: 3,
                ..Default::default()
            },
        );
        binding.metadata.namespace = Some("default".into());
        binding.metadata.uid = Some("binding-uid".into());
        binding.metadata.annotations = Some(BTreeMap::from([
            (PROPAGATION_POLICY_NAME_ANNOTATION.into(), "p".into()),
            (POLICY_GENERATION_ANNOTATION.into(), "uid/1".into()),
            ("resourcebinding.karmada.io/dependencies".into(), "[]".into()),
        ]));
        binding.status = Some(ResourceBindingStatus::default());
        let cached = CachedBinding::from(binding.clone());
        assert_eq!(
            *cached.key,
            BindingKey {
                kind: BindingKind::ResourceBinding,
                namespace: "default".into(),
                name: "nginx-deployment".into(),
            }
        );
        // The key, the cluster names and the template namespace are the shared copies: the
        // binding's next version, its Works and the binding queue hold the same ones.
        let again = CachedBinding::from(binding.clone());
        assert!(Arc::ptr_eq(&cached.key, &again.key));
        assert!(Arc::ptr_eq(&cached.clusters[0], &again.clusters[0]));
        assert!(Arc::ptr_eq(
            cached.resource_namespace.as_ref().unwrap(),
            again.resource_namespace.as_ref().unwrap()
        ));
        assert!(cached.targets("member1") && cached.targets("member2"));
        assert!(!cached.targets("member3") && !cached.targets("member"));
        assert!(cached.of_namespace("default") && !cached.of_namespace("other"));
        assert!(cached.detector_managed);
        assert!(cached.has_uid("binding-uid") && !cached.has_uid("other"));

        // A binding of a dependency alone (no policy annotation) is not managed; a cluster-scoped
        // template has no namespace.
        let mut spec = binding.spec.clone();
        spec.resource.namespace = None;
        spec.clusters.clear();
        let mut dependency = ClusterResourceBinding::new("ns", spec.into());
        dependency.metadata.annotations = Some(BTreeMap::from([(
            "resourcebinding.karmada.io/dependencies".into(),
            "[]".into(),
        )]));
        let cached = CachedBinding::from(dependency);
        assert_eq!(cached.key.kind, BindingKind::ClusterResourceBinding);
        assert_eq!(&*cached.key.namespace, "");
        assert!(!cached.detector_managed);
        assert!(!cached.targets("member1"));
        assert!(!cached.of_namespace("default"));
    }

    /// A ResourceBinding `default/a` with uid `uid`, as cached.
    fn binding(uid: &str) -> CachedBinding {
        let mut binding = ResourceBinding::new("a", ResourceBindingSpec::default());
        binding.metadata.namespace = Some("default".into());
        binding.metadata.uid = Some(uid.into());
        CachedBinding::from(binding)
    }

    #[test]
    fn a_work_is_settled_only_when_nothing_is_left_for_its_worker() {
        let work = stored(&desired());
        let ours = binding("uid-1");
        assert!(CachedWork::from(&work).settled(Some(&ours)));

        // Its binding is not cached (deleted, or not seen yet): the worker may delete it.
        assert!(!CachedWork::from(&work).settled(None));
        // A binding of the same name with another uid (re-created): not the Work's binding.
        assert!(!CachedWork::from(&work).settled(Some(&binding("uid-2"))));
        let mut no_uid = ResourceBinding::new("a", ResourceBindingSpec::default());
        no_uid.metadata.namespace = Some("default".into());
        assert!(!CachedWork::from(&work).settled(Some(&CachedBinding::from(no_uid))));
        // A new generation not applied yet.
        let mut bumped = work.clone();
        bumped.metadata.generation = Some(2);
        bumped.spec.workload.manifests[0]["spec"]["replicas"] = json!(2);
        assert!(!CachedWork::from(&bumped).settled(Some(&ours)));
        // An apply that failed.
        let mut failed = work.clone();
        let applied = &mut failed.status.as_mut().unwrap().conditions[0];
        applied.status = "False".into();
        applied.reason = "AppliedFailed".into();
        assert!(!CachedWork::from(&failed).settled(Some(&ours)));
        // Never reported.
        let mut unreported = work.clone();
        unreported.status = None;
        assert!(!CachedWork::from(&unreported).settled(Some(&ours)));
        // Without execution's finalizer (the worker adds it).
        let mut unfinalized = work.clone();
        unfinalized.metadata.finalizers = None;
        assert!(!CachedWork::from(&unfinalized).settled(Some(&ours)));
        // Being deleted (the worker removes the member objects).
        let mut deleting = work.clone();
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(!CachedWork::from(&deleting).settled(Some(&ours)));

        // A ClusterResourceBinding's Work carries its uid under the cluster-scoped label.
        let mut cluster_scoped = desired();
        cluster_scoped.labels = BTreeMap::from([(
            "clusterresourcebinding.karmada.io/permanent-id".into(),
            "uid-c".into(),
        )]);
        cluster_scoped.annotations =
            BTreeMap::from([("clusterresourcebinding.karmada.io/name".into(), "c".into())]);
        let mut cluster_binding = ClusterResourceBinding::new("c", ResourceBindingSpec::default().into());
        cluster_binding.metadata.uid = Some("uid-c".into());
        let cluster_binding = CachedBinding::from(cluster_binding);
        assert!(CachedWork::from(&stored(&cluster_scoped)).settled(Some(&cluster_binding)));
        // The same uid under the namespaced label is not the cluster-scoped binding's.
        cluster_scoped.labels =
            BTreeMap::from([("resourcebinding.karmada.io/permanent-id".into(), "uid-c".into())]);
        assert!(!CachedWork::from(&stored(&cluster_scoped)).settled(Some(&cluster_binding)));

        // A Work of no binding (a propagated namespace's) needs none.
        let mut namespace_work = work;
        namespace_work.metadata.labels = None;
        namespace_work.metadata.annotations = None;
        assert!(CachedWork::from(&namespace_work).settled(None));
    }

    /// `default/a` (uid `uid-1`), scheduled to member1 and member2 at generation 2 and
    /// dispatched there: `FullyApplied` `True` for generation 2, execution's finalizer.
    fn dispatched_binding() -> ResourceBinding {
        use flotilla_api::work::TargetCluster;
        let spec = ResourceBindingSpec {
            clusters: ["member1", "member2"]
                .map(|name| TargetCluster {
                    name: name.into(),
                    replicas: 1,
                })
                .into(),
            ..Default::default()
        };
        let mut binding = ResourceBinding::new("a", spec);
        binding.metadata.namespace = Some("default".into());
        binding.metadata.uid = Some("uid-1".into());
        binding.metadata.generation = Some(2);
        binding.metadata.resource_version = Some("10".into());
        binding.metadata.finalizers = Some(vec![BINDING_FINALIZER.into()]);
        binding.status = Some(ResourceBindingStatus {
            scheduler_observed_generation: Some(2),
            conditions: vec![Condition {
                type_: conditions::FULLY_APPLIED.into(),
                status: "True".into(),
                reason: "FullyAppliedSuccess".into(),
                message: "All works have been successfully applied".into(),
                observed_generation: Some(2),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            }],
            ..Default::default()
        });
        binding
    }

    /// `binding` with `change` made to it.
    fn with(binding: &ResourceBinding, change: impl FnOnce(&mut ResourceBinding)) -> ResourceBinding {
        let mut next = binding.clone();
        change(&mut next);
        next
    }

    /// The Work of [`dispatched_binding`] in `cluster`, applied, as cached.
    fn applied_work(cluster: &str) -> Arc<CachedWork> {
        let mut desired = desired();
        desired.cluster = cluster.into();
        desired.namespace = flotilla_api::well_known::execution_namespace(cluster);
        Arc::new(CachedWork::from(&stored(&desired)))
    }

    /// The binding's Works in `clusters`, by cluster.
    fn works_in(clusters: &[&str]) -> BTreeMap<String, Arc<CachedWork>> {
        clusters
            .iter()
            .map(|c| ((*c).to_owned(), applied_work(c)))
            .collect()
    }

    #[test]
    fn the_binding_signature_moves_with_what_its_reconcile_reads_only() {
        let binding = dispatched_binding();
        let signature = |binding: &ResourceBinding| CachedBinding::from(binding.clone()).signature();
        let base = signature(&binding);

        // Status written by execution itself (or any other status writer), a new resourceVersion,
        // managed fields: nothing for the binding controller.
        let mut status_only = binding.clone();
        status_only.metadata.resource_version = Some("11".into());
        status_only.metadata.managed_fields = Some(vec![Default::default()]);
        let status = status_only.status.as_mut().unwrap();
        status.conditions[0].status = "False".into();
        status.conditions.push(Condition {
            type_: "Scheduled".into(),
            status: "True".into(),
            reason: "Success".into(),
            message: String::new(),
            observed_generation: Some(2),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        });
        status.aggregated_status = vec![Default::default()];
        assert_eq!(signature(&status_only), base);

        // Each of these must reach the binding controller.
        let changed = [
            ("generation", with(&binding, |b| b.metadata.generation = Some(3))),
            (
                "deletion",
                with(&binding, |b| {
                    b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
                }),
            ),
            ("finalizers", with(&binding, |b| b.metadata.finalizers = None)),
            (
                "labels",
                with(&binding, |b| {
                    b.metadata.labels = Some(BTreeMap::from([("team".into(), "a".into())]))
                }),
            ),
            (
                "annotations",
                with(&binding, |b| {
                    b.metadata.annotations = Some(BTreeMap::from([(
                        flotilla_api::well_known::TRACE_PARENT_ANNOTATION.into(),
                        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
                    )]))
                }),
            ),
            (
                "schedulerObservedGeneration",
                with(&binding, |b| {
                    b.status.as_mut().unwrap().scheduler_observed_generation = Some(3)
                }),
            ),
            (
                "no status (no observed generation)",
                with(&binding, |b| b.status = None),
            ),
        ];
        for (what, next) in changed {
            assert_ne!(signature(&next), base, "{what} moves the signature");
        }
    }

    #[test]
    fn a_binding_is_settled_only_when_dispatched_with_one_settled_work_per_cluster() {
        let settled = |binding: &ResourceBinding, works: &BTreeMap<String, Arc<CachedWork>>| {
            CachedBinding::from(binding.clone()).settled(works)
        };
        let binding = dispatched_binding();
        let works = works_in(&["member1", "member2"]);
        assert!(settled(&binding, &works));
        // `dispatching: false` suspends nothing.
        let mut unsuspended = binding.clone();
        unsuspended.spec.suspension = Some(Suspension {
            dispatching: Some(false),
            ..Default::default()
        });
        assert!(settled(&unsuspended, &works));

        // The Works: one missing, one too many (left to delete), one not applied yet, one of a
        // former binding of the same name.
        assert!(!settled(&binding, &works_in(&["member1"])));
        assert!(!settled(&binding, &works_in(&["member1", "member2", "member3"])));
        assert!(!settled(&binding, &works_in(&["member1", "member3"])));
        let mut unapplied = works.clone();
        let mut work = stored(&desired());
        work.status = None;
        unapplied.insert("member1".into(), Arc::new(CachedWork::from(&work)));
        assert!(!settled(&binding, &unapplied));
        let mut former = binding.clone();
        former.metadata.uid = Some("uid-2".into());
        assert!(!settled(&former, &works));

        // The binding: each of these leaves the binding controller something to do.
        let cases = [
            (
                "a generation not scheduled yet",
                with(&binding, |b| b.metadata.generation = Some(3)),
            ),
            (
                "a scheduled generation not dispatched yet",
                with(&binding, |b| {
                    b.metadata.generation = Some(3);
                    b.status.as_mut().unwrap().scheduler_observed_generation = Some(3);
                }),
            ),
            (
                "FullyApplied False",
                with(&binding, |b| {
                    b.status.as_mut().unwrap().conditions[0].status = "False".into()
                }),
            ),
            (
                "no FullyApplied",
                with(&binding, |b| b.status.as_mut().unwrap().conditions.clear()),
            ),
            ("no status", with(&binding, |b| b.status = None)),
            ("no finalizer", with(&binding, |b| b.metadata.finalizers = None)),
            (
                "being deleted",
                with(&binding, |b| {
                    b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
                }),
            ),
            (
                "no generation",
                with(&binding, |b| {
                    b.metadata.generation = None;
                    b.status.as_mut().unwrap().scheduler_observed_generation = None;
                    b.status.as_mut().unwrap().conditions[0].observed_generation = None;
                }),
            ),
            (
                "dispatching suspended to member1",
                with(&binding, |b| {
                    b.spec.suspension = Some(Suspension {
                        dispatching_on_clusters: Some(flotilla_api::policy::SuspendClusters {
                            cluster_names: vec!["member1".into()],
                        }),
                        ..Default::default()
                    })
                }),
            ),
            (
                "a graceful eviction task",
                with(&binding, |b| {
                    let task = json!({
                        "fromCluster": "member3", "purgeMode": "Gracefully",
                        "reason": "TaintUntolerated", "producer": "flotilla-scheduler",
                    });
                    b.spec.graceful_eviction_tasks = vec![serde_json::from_value(task).unwrap()];
                }),
            ),
        ];
        for (what, next) in cases {
            assert!(!settled(&next, &works), "{what}: not settled");
        }
    }
}
