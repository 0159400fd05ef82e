//! The binding the detector writes for a template: its desired spec, the merge patch that
//! changes only the detector's own spec fields, and the comparison lazy activation needs.
//!
//! The detector owns `spec.resource`, `replicas`, `replicaRequirements`, `placement`,
//! `propagateDeps`, `conflictResolution`, `suspension`, `preserveResourcesOnDeletion`,
//! `schedulerName` and `failover` ([`OWNED_SPEC_FIELDS`]); `spec.clusters` belongs to the
//! scheduler and `spec.requiredBy` to the dependency distributor, so patches never name them.

use std::sync::Arc;

use flotilla_api::policy::{Placement, PropagationSpec, Suspension};
use flotilla_api::well_known::{DEFAULT_SCHEDULER_NAME, POLICY_GENERATION_ANNOTATION};
use flotilla_api::work::{ClusterResourceBinding, ObjectReference, ResourceBinding, ResourceBindingSpec};
use flotilla_runtime::intern::Interner;
use flotilla_runtime::packed::{Codec, Packed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::{Map, Value, json};

use crate::keys::{Gvk, TemplateKey};

/// The spec fields the detector writes, by JSON name.
pub const OWNED_SPEC_FIELDS: &[&str] = &[
    "resource",
    "replicas",
    "replicaRequirements",
    "placement",
    "propagateDeps",
    "conflictResolution",
    "suspension",
    "preserveResourcesOnDeletion",
    "schedulerName",
    "failover",
];

/// A ResourceBinding or ClusterResourceBinding, as the detector reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct BindingView {
    /// Namespace; `None` for a ClusterResourceBinding.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// `{"metadata": ...}`: labels, annotations and owner references as JSON.
    pub object: Value,
    /// The spec.
    pub spec: ResourceBindingSpec,
    /// `status.conditions`.
    pub conditions: Vec<Condition>,
}

impl BindingView {
    /// A view of a ResourceBinding.
    pub fn from_resource_binding(binding: &ResourceBinding) -> Self {
        Self::new(
            &binding.metadata,
            binding.spec.clone(),
            binding
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default(),
        )
    }

    /// A view of a ClusterResourceBinding.
    pub fn from_cluster_resource_binding(binding: &ClusterResourceBinding) -> Self {
        Self::new(
            &binding.metadata,
            binding.spec.0.clone(),
            binding
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default(),
        )
    }

    fn new(
        metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        spec: ResourceBindingSpec,
        conditions: Vec<Condition>,
    ) -> Self {
        Self {
            namespace: metadata.namespace.clone().filter(|ns| !ns.is_empty()),
            name: metadata.name.clone().unwrap_or_default(),
            uid: metadata.uid.clone(),
            generation: metadata.generation,
            resource_version: metadata.resource_version.clone(),
            object: json!({ "metadata": serde_json::to_value(metadata).unwrap_or(Value::Null) }),
            spec,
            conditions,
        }
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    /// Whether the binding has an owner reference to the object with `uid`.
    pub fn is_owned_by(&self, uid: &str) -> bool {
        self.object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
            })
    }

    /// The owner references with `extra` appended; `extra` is the controller reference only if
    /// the binding has no controller yet (an object has at most one).
    pub fn owner_references_with(&self, extra: &Value) -> Value {
        let mut refs = self
            .object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let has_controller = refs
            .iter()
            .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true));
        let mut extra = extra.clone();
        if has_controller && let Some(map) = extra.as_object_mut() {
            map.insert("controller".into(), Value::Bool(false));
        }
        refs.push(extra);
        Value::Array(refs)
    }
}

/// A binding as the detector's watch cache holds it (ADR 0016, ADR 0018, ADR 0019): the
/// template it is for, whether a lazy policy change is pending on it and its
/// [`watch_signature`], which the watch compares with the replaced value's to decide whether
/// the template needs its planner again; everything else the planner reads (identity, labels,
/// annotations, owner references, the spec, the conditions) is kept as one packed JSON record
/// ([`flotilla_runtime::packed`]), written from the delivered binding, and
/// [`CachedBinding::view`] reads it back when the template is planned.
///
/// Typed, those parts took about 3.5 KiB per binding (the inline `ResourceBindingSpec` and
/// `ObjectMeta` are mostly empty options; every string, map node and vector is an allocation of
/// its own); as JSON about 1.6 KiB, packed against the bindings before it about 0.2 KiB. A
/// binding is planned a few times in its life and its event is read many more, so the reading
/// is paid where it is rare.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedBinding {
    /// The template: `spec.resource` without the uid and resourceVersion (the planner reads
    /// those of the template itself), as the template's key (whose apiVersion, kind and
    /// namespace are shared copies: [`crate::keys::shared`]).
    template: TemplateKey,
    lazy_pending: bool,
    /// The annotation [`POLICY_GENERATION_ANNOTATION`]: the policies' status counts read it of
    /// every binding a policy claims. Shared: every binding a policy claims has the same.
    policy_generation: Option<Arc<str>>,
    body: Packed,
    /// [`watch_signature`] of the binding.
    pub signature: u64,
}

/// The codec of [`CachedBinding`] bodies: its dictionaries are learned from the bindings it packs.
static BODIES: Codec = Codec::new();

/// The policy generations cached bindings follow (every binding a policy claims has the same).
static GENERATIONS: Interner<str> = Interner::new();

/// The parts of a binding a [`CachedBinding`] keeps as JSON, as written.
#[derive(serde::Serialize)]
struct StoredRef<'a> {
    metadata: StoredMetaRef<'a>,
    spec: &'a ResourceBindingSpec,
    #[serde(skip_serializing_if = "<[Condition]>::is_empty")]
    conditions: &'a [Condition],
}

/// Of a binding's metadata, what the planner reads.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StoredMetaRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: &'a Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: &'a Option<std::collections::BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: &'a Option<std::collections::BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner_references: &'a Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
}

/// [`StoredRef`] read back.
#[derive(serde::Deserialize)]
struct Stored {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: ResourceBindingSpec,
    #[serde(default)]
    conditions: Vec<Condition>,
}

/// Of [`StoredRef`], only the annotations (the rest of the text is skipped, not built).
#[derive(serde::Deserialize)]
struct StoredAnnotations {
    metadata: StoredAnnotationsMeta,
}

#[derive(serde::Deserialize)]
struct StoredAnnotationsMeta {
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// The binding's name is in the packed body only: the cache keeps a key beside it.
impl flotilla_runtime::cache::Keyed for CachedBinding {
    type Key = flotilla_runtime::cache::Beside;
}

impl CachedBinding {
    /// The cached form of a ResourceBinding.
    pub fn of_resource_binding(binding: &ResourceBinding) -> Self {
        Self::new(
            &binding.metadata,
            &binding.spec,
            binding.status.as_ref().map(|s| s.conditions.as_slice()),
        )
    }

    /// The cached form of a ClusterResourceBinding.
    pub fn of_cluster_resource_binding(binding: &ClusterResourceBinding) -> Self {
        Self::new(
            &binding.metadata,
            &binding.spec,
            binding.status.as_ref().map(|s| s.conditions.as_slice()),
        )
    }

    fn new(
        metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        spec: &ResourceBindingSpec,
        conditions: Option<&[Condition]>,
    ) -> Self {
        let conditions = conditions.unwrap_or_default();
        let stored = StoredRef {
            metadata: StoredMetaRef {
                name: &metadata.name,
                namespace: &metadata.namespace,
                uid: &metadata.uid,
                resource_version: &metadata.resource_version,
                generation: &metadata.generation,
                labels: &metadata.labels,
                annotations: &metadata.annotations,
                owner_references: &metadata.owner_references,
            },
            spec,
            conditions,
        };
        let body = BODIES.pack(&stored);
        Self {
            template: TemplateKey::new(
                Gvk::new(&spec.resource.api_version, &spec.resource.kind),
                spec.resource.namespace.as_deref(),
                spec.resource.name.as_str(),
            ),
            lazy_pending: is_lazy_pending(conditions),
            policy_generation: metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POLICY_GENERATION_ANNOTATION))
                .map(|v| GENERATIONS.intern(v.as_str())),
            body,
            signature: watch_signature(metadata, spec, conditions),
        }
    }

    /// The planner's view of the binding.
    pub fn view(&self) -> BindingView {
        let Stored {
            metadata,
            spec,
            conditions,
        } = BODIES.unpack(&self.body);
        BindingView::new(&metadata, spec, conditions)
    }

    /// The template the binding is for.
    pub fn template(&self) -> &TemplateKey {
        &self.template
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<String> {
        let stored: StoredAnnotations = BODIES.unpack(&self.body);
        stored.metadata.annotations.get(key).cloned()
    }

    /// The annotation [`POLICY_GENERATION_ANNOTATION`]: the claiming policy's generation the
    /// binding follows.
    pub fn policy_generation(&self) -> Option<&str> {
        self.policy_generation.as_deref()
    }

    /// Whether the binding's `PolicyActivated` condition says a lazy policy change is pending.
    pub fn lazy_pending(&self) -> bool {
        self.lazy_pending
    }
}

/// Whether `conditions` say a lazy policy change waits for the template to change.
fn is_lazy_pending(conditions: &[Condition]) -> bool {
    flotilla_api::conditions::find(conditions, flotilla_api::well_known::conditions::POLICY_ACTIVATED)
        .is_some_and(|c| {
            c.status == "False" && c.reason == flotilla_api::well_known::reasons::LAZY_ACTIVATION_PENDING
        })
}

/// What of a binding the detector's decisions read, hashed: uid, whether it is being deleted,
/// labels, annotations, owner references, the detector-owned spec fields and the
/// `PolicyActivated` condition. A binding change that leaves it equal (the scheduler's
/// `spec.clusters`, the dependency distributor's `spec.requiredBy`, execution's status) cannot
/// change what the detector would write, so it does not requeue the template; most binding
/// writes are of that kind.
pub fn watch_signature(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &ResourceBindingSpec,
    conditions: &[Condition],
) -> u64 {
    let activated =
        flotilla_api::conditions::find(conditions, flotilla_api::well_known::conditions::POLICY_ACTIVATED)
            .map(|c| (&c.status, &c.reason, &c.message, c.observed_generation));
    // The detector-owned fields (OWNED_SPEC_FIELDS), by reference.
    let owned = (
        &spec.resource,
        spec.replicas,
        &spec.replica_requirements,
        &spec.placement,
        spec.propagate_deps,
        &spec.conflict_resolution,
        &spec.suspension,
        spec.preserve_resources_on_deletion,
        &spec.scheduler_name,
        &spec.failover,
    );
    signature_of(&(
        &metadata.uid,
        metadata.deletion_timestamp.is_some(),
        &metadata.labels,
        &metadata.annotations,
        &metadata.owner_references,
        owned,
        activated,
    ))
}

/// A hash of `value`'s JSON, computed as it is written (no string or JSON tree is built): the
/// watch signatures are taken on every watch event.
pub fn signature_of(value: &impl serde::Serialize) -> u64 {
    use std::hash::Hasher;
    struct HashWriter(std::collections::hash_map::DefaultHasher);
    impl std::io::Write for HashWriter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut writer = HashWriter(std::collections::hash_map::DefaultHasher::new());
    // Writing to a hasher cannot fail; a value that cannot be serialized hashes what was written.
    let _ = serde_json::to_writer(&mut writer, value);
    writer.0.finish()
}

/// The binding spec the detector wants for `template` under `policy`. `resource_version` is
/// the template resourceVersion to record (see `docs/architecture.md`: it moves only with the
/// fingerprint). Fails when the interpreter rejects the template (the error names the field).
pub fn desired_spec(
    template: &Value,
    key: &TemplateKey,
    policy: &PropagationSpec,
    resource_version: Option<String>,
) -> Result<ResourceBindingSpec, flotilla_interpreter::InterpretError> {
    desired_spec_with(
        template,
        flotilla_interpreter::replicas(template),
        key,
        policy,
        resource_version,
    )
}

/// [`desired_spec`] with the template's replicas already read (`template` may then be its
/// metadata only: the uid is all that is read of it).
pub fn desired_spec_with(
    template: &Value,
    replicas: Result<Option<flotilla_interpreter::ReplicaInfo>, flotilla_interpreter::InterpretError>,
    key: &TemplateKey,
    policy: &PropagationSpec,
    resource_version: Option<String>,
) -> Result<ResourceBindingSpec, flotilla_interpreter::InterpretError> {
    let (replicas, replica_requirements) = match replicas? {
        Some(info) => (info.replicas, info.requirements),
        None => (0, None),
    };
    Ok(ResourceBindingSpec {
        resource: ObjectReference {
            api_version: key.gvk.api_version.to_string(),
            kind: key.gvk.kind.to_string(),
            namespace: key.namespace.as_deref().map(str::to_owned),
            name: key.name.to_string(),
            uid: template
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            resource_version,
        },
        propagate_deps: policy.propagate_deps,
        replica_requirements,
        replicas,
        placement: Some(policy.placement.clone()),
        scheduler_name: Some(policy.scheduler_name().to_owned()),
        failover: policy.failover.clone(),
        conflict_resolution: Some(policy.conflict_resolution()),
        suspension: policy.suspension.as_ref().map(Suspension::canonical),
        preserve_resources_on_deletion: policy.preserve_resources_on_deletion,
        ..Default::default()
    })
}

/// The detector-owned fields of a spec as a JSON object.
pub fn owned_fields(spec: &ResourceBindingSpec) -> Map<String, Value> {
    let Ok(Value::Object(all)) = serde_json::to_value(spec) else {
        return Map::new();
    };
    all.into_iter()
        .filter(|(k, v)| OWNED_SPEC_FIELDS.contains(&k.as_str()) && !v.is_null())
        .collect()
}

/// The `spec` merge patch that turns the detector-owned fields of `current` into those of
/// `desired`, or `None` when they are equal.
pub fn spec_patch(current: &ResourceBindingSpec, desired: &ResourceBindingSpec) -> Option<Value> {
    merge_patch(
        &Value::Object(owned_fields(current)),
        &Value::Object(owned_fields(desired)),
    )
}

/// An RFC 7386 JSON merge patch from `current` to `desired` (`None` when equal): removed keys
/// become `null`, nested objects are patched key by key, everything else is replaced whole.
/// `desired` must not contain `null`s (they would read as deletions).
pub fn merge_patch(current: &Value, desired: &Value) -> Option<Value> {
    match (current, desired) {
        (Value::Object(current), Value::Object(desired)) => {
            let mut patch = Map::new();
            for key in current.keys() {
                if !desired.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            for (key, wanted) in desired {
                match current.get(key) {
                    Some(have) if have == wanted => {}
                    Some(have @ Value::Object(_)) if wanted.is_object() => {
                        if let Some(inner) = merge_patch(have, wanted) {
                            patch.insert(key.clone(), inner);
                        }
                    }
                    _ => {
                        patch.insert(key.clone(), wanted.clone());
                    }
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if current == desired => None,
        _ => Some(desired.clone()),
    }
}

/// Whether the propagation fields (the ones a policy contributes: placement, propagateDeps,
/// conflictResolution, suspension, failover, preserveResourcesOnDeletion, schedulerName) of two
/// specs mean the same, with defaults applied (absent conflictResolution is `Abort`, absent
/// schedulerName is `default-scheduler`, an empty placement or suspension is none).
pub fn propagation_equal(a: &ResourceBindingSpec, b: &ResourceBindingSpec) -> bool {
    fn placement(spec: &ResourceBindingSpec) -> Placement {
        spec.placement.clone().unwrap_or_default()
    }
    fn suspension(spec: &ResourceBindingSpec) -> Suspension {
        spec.suspension
            .as_ref()
            .map(Suspension::canonical)
            .unwrap_or_default()
    }
    fn scheduler(spec: &ResourceBindingSpec) -> &str {
        spec.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER_NAME)
    }
    placement(a) == placement(b)
        && a.propagate_deps == b.propagate_deps
        && a.conflict_resolution() == b.conflict_resolution()
        && suspension(a) == suspension(b)
        && a.failover == b.failover
        && a.preserve_resources_on_deletion() == b.preserve_resources_on_deletion()
        && scheduler(a) == scheduler(b)
}

/// `desired` with the propagation fields (those [`propagation_equal`] compares) of `current`:
/// a new version of the template under the propagation the binding already has (lazy
/// activation's [`crate::lazy::LazyAction::RefreshContent`]).
pub fn with_propagation_of(
    desired: &ResourceBindingSpec,
    current: &ResourceBindingSpec,
) -> ResourceBindingSpec {
    ResourceBindingSpec {
        placement: current.placement.clone(),
        propagate_deps: current.propagate_deps,
        conflict_resolution: current.conflict_resolution.clone(),
        suspension: current.suspension.clone(),
        failover: current.failover.clone(),
        preserve_resources_on_deletion: current.preserve_resources_on_deletion,
        scheduler_name: current.scheduler_name.clone(),
        ..desired.clone()
    }
}

/// The controller owner reference a binding carries to its template.
pub fn owner_reference(key: &TemplateKey, uid: &str) -> Value {
    json!({
        "apiVersion": &*key.gvk.api_version,
        "kind": &*key.gvk.kind,
        "name": &*key.name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// A complete new binding object for `key`: a ResourceBinding in the template's namespace, or a
/// ClusterResourceBinding for a cluster-scoped template.
pub fn new_binding(
    key: &TemplateKey,
    template_uid: &str,
    metadata: Map<String, Value>,
    spec: &ResourceBindingSpec,
) -> Value {
    let mut meta = Map::new();
    meta.insert("name".into(), Value::String(key.binding_name()));
    if let Some(ns) = &key.namespace {
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    }
    for (field, value) in metadata {
        // Creation has nothing to remove: drop the nulls a patch would carry.
        if let Value::Object(map) = value {
            let kept: Map<String, Value> = map.into_iter().filter(|(_, v)| !v.is_null()).collect();
            if !kept.is_empty() {
                meta.insert(field, Value::Object(kept));
            }
        }
    }
    meta.insert(
        "ownerReferences".into(),
        Value::Array(vec![owner_reference(key, template_uid)]),
    );
    // Execution's finalizer from the start: one write less per binding (it would add it).
    meta.insert(
        "finalizers".into(),
        json!([flotilla_api::well_known::BINDING_CONTROLLER_FINALIZER]),
    );
    json!({
        "apiVersion": format!("{}/{}", flotilla_api::work::GROUP, flotilla_api::work::BINDING_VERSION),
        "kind": if key.namespace.is_some() { "ResourceBinding" } else { "ClusterResourceBinding" },
        "metadata": Value::Object(meta),
        "spec": Value::Object(owned_fields(spec)),
    })
}

#[cfg(test)]
mod tests {
    use flotilla_api::policy::{
        ApplicationFailoverBehavior, ClusterAffinity, ConflictResolution, FailoverBehavior, ResourceSelector,
        SuspendClusters,
    };
    use flotilla_api::work::TargetCluster;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::keys::Gvk;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "t-uid", "resourceVersion": "7"},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
            ]}}},
        })
    }

    fn deployment_key() -> TemplateKey {
        TemplateKey {
            gvk: Gvk::new("apps/v1", "Deployment"),
            namespace: Some("default".into()),
            name: "web".into(),
        }
    }

    fn policy() -> PropagationSpec {
        PropagationSpec {
            resource_selectors: vec![ResourceSelector {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                ..Default::default()
            }],
            placement: Placement {
                cluster_affinity: Some(ClusterAffinity {
                    cluster_names: vec!["member1".into()],
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn watch_signature_covers_every_detector_owned_spec_field() {
        // A spec with every owned field set; each field copied alone onto an empty spec must
        // move the signature, and the other writers' fields must not.
        let full: Value = json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "replicas": 3,
            "replicaRequirements": {"resourceRequest": {"cpu": "1"}},
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
            "propagateDeps": true,
            "conflictResolution": "Overwrite",
            "suspension": {"dispatching": true},
            "preserveResourcesOnDeletion": true,
            "schedulerName": "other",
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": 30}}},
            "clusters": [{"name": "member1", "replicas": 3}],
            "requiredBy": [{"namespace": "ns", "name": "b", "clusters": [{"name": "member1", "replicas": 0}]}],
        });
        let metadata = Default::default();
        let minimal = json!({"resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "a"}});
        let with = |field: &str| -> ResourceBindingSpec {
            let mut spec = minimal.clone();
            spec[field] = full[field].clone();
            serde_json::from_value(spec).unwrap()
        };
        let base = watch_signature(&metadata, &serde_json::from_value(minimal.clone()).unwrap(), &[]);
        for field in OWNED_SPEC_FIELDS {
            assert_ne!(watch_signature(&metadata, &with(field), &[]), base, "{field}");
        }
        for other in ["clusters", "requiredBy"] {
            assert_eq!(watch_signature(&metadata, &with(other), &[]), base, "{other}");
        }
    }

    #[test]
    fn watch_signature_moves_only_with_what_the_detector_reads() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
        let metadata = ObjectMeta {
            name: Some("web-deployment".into()),
            uid: Some("b-uid".into()),
            resource_version: Some("10".into()),
            generation: Some(2),
            annotations: Some([("flotilla.io/policy-generation".to_owned(), "uid/1".to_owned())].into()),
            ..Default::default()
        };
        let spec = desired_spec(&deployment(), &deployment_key(), &policy(), Some("7".into())).unwrap();
        let activated = Condition {
            type_: flotilla_api::well_known::conditions::POLICY_ACTIVATED.into(),
            status: "True".into(),
            reason: "Activated".into(),
            message: "m".into(),
            observed_generation: Some(2),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        };
        let base = watch_signature(&metadata, &spec, std::slice::from_ref(&activated));

        // Other writers' changes: the same signature.
        let mut other = metadata.clone();
        other.resource_version = Some("11".into());
        other.generation = Some(3);
        other.finalizers = Some(vec!["karmada.io/binding-controller".into()]);
        let mut scheduled = spec.clone();
        scheduled.clusters = vec![TargetCluster {
            name: "member1".into(),
            replicas: 3,
        }];
        let mut applied = activated.clone();
        applied.type_ = "FullyApplied".into();
        assert_eq!(
            watch_signature(&other, &scheduled, &[activated.clone(), applied]),
            base
        );

        // What the detector reads: a different signature each.
        let mut annotated = metadata.clone();
        annotated
            .annotations
            .as_mut()
            .unwrap()
            .insert("flotilla.io/policy-generation".into(), "uid/2".into());
        let mut deleting = metadata.clone();
        deleting.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let mut recreated = metadata.clone();
        recreated.uid = Some("b-uid-2".into());
        let mut owned = metadata.clone();
        owned.owner_references = Some(vec![Default::default()]);
        for changed in [annotated, deleting, recreated, owned] {
            assert_ne!(
                watch_signature(&changed, &spec, std::slice::from_ref(&activated)),
                base
            );
        }
        let mut replicas = spec.clone();
        replicas.replicas = 5;
        assert_ne!(
            watch_signature(&metadata, &replicas, std::slice::from_ref(&activated)),
            base
        );
        let mut pending = activated.clone();
        pending.status = "False".into();
        assert_ne!(watch_signature(&metadata, &spec, &[pending]), base);
        assert_ne!(watch_signature(&metadata, &spec, &[]), base);
    }

    #[test]
    fn defaults() {
        let spec = desired_spec(&deployment(), &deployment_key(), &policy(), Some("7".into())).unwrap();
        assert_eq!(
            spec.resource,
            ObjectReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("default".into()),
                name: "web".into(),
                uid: Some("t-uid".into()),
                resource_version: Some("7".into()),
            }
        );
        assert_eq!(spec.replicas, 3);
        let requirements = spec.replica_requirements.clone().unwrap();
        assert_eq!(requirements.resource_request["cpu"].0, "100m");
        assert_eq!(spec.placement, Some(policy().placement));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.conflict_resolution, Some(ConflictResolution::Abort));
        assert!(!spec.propagate_deps);
        assert_eq!(spec.suspension, None);
        assert_eq!(spec.failover, None);
        assert_eq!(spec.preserve_resources_on_deletion, None);
        assert!(spec.clusters.is_empty());
        assert!(spec.required_by.is_empty());
    }

    #[test]
    fn every_policy_field_is_carried() {
        let mut p = policy();
        p.propagate_deps = true;
        p.scheduler_name = Some("my-scheduler".into());
        p.conflict_resolution = Some(ConflictResolution::Overwrite);
        p.preserve_resources_on_deletion = Some(true);
        p.failover = Some(FailoverBehavior {
            application: Some(ApplicationFailoverBehavior {
                grace_period_seconds: Some(30),
                ..Default::default()
            }),
            cluster: None,
        });
        p.suspension = Some(Suspension {
            dispatching: Some(false),
            dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: vec!["member2".into()],
            }),
            ..Default::default()
        });
        // Fields that are not propagation fields never reach the binding.
        p.priority = Some(9);
        p.activation_preference = Some(flotilla_api::ActivationPreference::Lazy);
        let spec = desired_spec(&deployment(), &deployment_key(), &p, None).unwrap();
        assert!(spec.propagate_deps);
        assert_eq!(spec.scheduler_name.as_deref(), Some("my-scheduler"));
        assert_eq!(spec.conflict_resolution, Some(ConflictResolution::Overwrite));
        assert_eq!(spec.preserve_resources_on_deletion, Some(true));
        assert_eq!(spec.failover, p.failover);
        assert_eq!(spec.suspension, p.suspension);
        assert_eq!(spec.resource.resource_version, None);
        let owned = owned_fields(&spec);
        let keys: Vec<&str> = owned.keys().map(String::as_str).collect();
        for key in &keys {
            assert!(OWNED_SPEC_FIELDS.contains(key), "{key}");
        }
        assert!(!keys.contains(&"priority"));
    }

    #[test]
    fn suspension_is_written_in_canonical_spelling() {
        let mut p = policy();
        p.suspension = Some(Suspension {
            suspend_dispatching: Some(true),
            ..Default::default()
        });
        let spec = desired_spec(&deployment(), &deployment_key(), &p, None).unwrap();
        assert_eq!(
            spec.suspension,
            Some(Suspension {
                dispatching: Some(true),
                ..Default::default()
            })
        );
        p.suspension = Some(Suspension {
            suspend_dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: vec!["member1".into()],
            }),
            ..Default::default()
        });
        let spec = desired_spec(&deployment(), &deployment_key(), &p, None).unwrap();
        let json = serde_json::to_value(&spec.suspension).unwrap();
        assert_eq!(
            json,
            json!({"dispatchingOnClusters": {"clusterNames": ["member1"]}})
        );
    }

    #[test]
    fn kinds_without_replicas_and_cluster_scope() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default", "uid": "c"}, "data": {"a": "b"}});
        let key = TemplateKey {
            gvk: Gvk::new("v1", "ConfigMap"),
            namespace: Some("default".into()),
            name: "cfg".into(),
        };
        let spec = desired_spec(&cm, &key, &policy(), None).unwrap();
        assert_eq!(spec.replicas, 0);
        assert_eq!(spec.replica_requirements, None);
        assert!(!owned_fields(&spec).contains_key("replicas"));

        let ns_key = TemplateKey {
            gvk: Gvk::new("rbac.authorization.k8s.io/v1", "ClusterRole"),
            namespace: None,
            name: "system:viewer".into(),
        };
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:viewer", "uid": "r"}});
        let spec = desired_spec(&role, &ns_key, &policy(), None).unwrap();
        assert_eq!(spec.resource.namespace, None);
        let object = new_binding(&ns_key, "r", Map::new(), &spec);
        assert_eq!(object["kind"], "ClusterResourceBinding");
        assert_eq!(object["metadata"]["name"], "system.viewer-clusterrole");
        assert!(object["metadata"].get("namespace").is_none());
    }

    #[test]
    fn malformed_templates_are_rejected_with_the_field() {
        let mut bad = deployment();
        bad["spec"]["replicas"] = json!("three");
        let err = desired_spec(&bad, &deployment_key(), &policy(), None).unwrap_err();
        assert_eq!(err.path(), "spec.replicas");
    }

    #[test]
    fn new_binding_object() {
        let spec = desired_spec(&deployment(), &deployment_key(), &policy(), Some("7".into())).unwrap();
        let mut metadata = Map::new();
        metadata.insert(
            "annotations".into(),
            json!({"flotilla.io/policy-generation": "p/1", "gone": null}),
        );
        let object = new_binding(&deployment_key(), "t-uid", metadata, &spec);
        assert_eq!(object["apiVersion"], "work.karmada.io/v1alpha2");
        assert_eq!(object["kind"], "ResourceBinding");
        assert_eq!(object["metadata"]["name"], "web-deployment");
        assert_eq!(object["metadata"]["namespace"], "default");
        assert_eq!(
            object["metadata"]["annotations"],
            json!({"flotilla.io/policy-generation": "p/1"})
        );
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "t-uid", "controller": true, "blockOwnerDeletion": true}])
        );
        let parsed: ResourceBinding = serde_json::from_value(object).unwrap();
        assert_eq!(parsed.spec, spec);
    }

    #[test]
    fn merge_patches() {
        assert_eq!(merge_patch(&json!({"a": 1}), &json!({"a": 1})), None);
        assert_eq!(
            merge_patch(&json!({"a": 1}), &json!({"a": 2})),
            Some(json!({"a": 2}))
        );
        assert_eq!(
            merge_patch(&json!({"a": 1, "b": 2}), &json!({"a": 1})),
            Some(json!({"b": null}))
        );
        assert_eq!(
            merge_patch(&json!({"p": {"x": 1, "y": 2}}), &json!({"p": {"x": 1, "z": 3}})),
            Some(json!({"p": {"y": null, "z": 3}}))
        );
        assert_eq!(
            merge_patch(&json!({"l": [1, 2]}), &json!({"l": [1]})),
            Some(json!({"l": [1]}))
        );
        assert_eq!(
            merge_patch(&json!({"o": 1}), &json!({"o": {"a": 1}})),
            Some(json!({"o": {"a": 1}}))
        );
        assert_eq!(
            merge_patch(&json!({"o": {"a": 1}}), &json!({"o": 1})),
            Some(json!({"o": 1}))
        );
        assert_eq!(merge_patch(&json!(1), &json!(2)), Some(json!(2)));
    }

    #[test]
    fn spec_patch_touches_only_owned_fields() {
        let desired = desired_spec(&deployment(), &deployment_key(), &policy(), Some("7".into())).unwrap();
        let mut current = desired.clone();
        current.clusters = vec![TargetCluster {
            name: "member1".into(),
            replicas: 3,
        }];
        current.required_by = vec![flotilla_api::BindingSnapshot {
            namespace: Some("default".into()),
            name: "other".into(),
            clusters: vec![],
        }];
        assert_eq!(
            spec_patch(&current, &desired),
            None,
            "scheduler/distributor fields are ignored"
        );

        // Placement switches from clusterAffinity to clusterAffinities: the old key is removed.
        let mut p = policy();
        p.placement = Placement {
            cluster_affinities: vec![flotilla_api::policy::ClusterAffinityTerm {
                affinity_name: "a".into(),
                affinity: ClusterAffinity {
                    cluster_names: vec!["member2".into()],
                    ..Default::default()
                },
                overflow_affinities: vec![],
            }],
            ..Default::default()
        };
        p.suspension = None;
        let mut with_suspension = desired.clone();
        with_suspension.suspension = Some(Suspension {
            dispatching: Some(true),
            ..Default::default()
        });
        let new = desired_spec(&deployment(), &deployment_key(), &p, Some("7".into())).unwrap();
        let patch = spec_patch(&with_suspension, &new).unwrap();
        assert_eq!(
            patch,
            json!({
                "placement": {"clusterAffinity": null, "clusterAffinities": [{"affinityName": "a", "clusterNames": ["member2"]}]},
                "suspension": null,
            })
        );
        // Replicas going to zero for a kind change is removed rather than written as 0.
        let mut zero = desired.clone();
        zero.replicas = 0;
        assert_eq!(spec_patch(&desired, &zero), Some(json!({"replicas": null})));
    }

    #[test]
    fn content_under_the_current_propagation() {
        let template = deployment();
        let key = deployment_key();
        let mut old_policy = policy();
        old_policy.placement.cluster_affinity = None;
        old_policy.propagate_deps = false;
        let current = desired_spec(&template, &key, &old_policy, Some("1".into())).unwrap();
        let mut scaled = template.clone();
        scaled["spec"]["replicas"] = json!(7);
        let desired = desired_spec(&scaled, &key, &policy(), Some("9".into())).unwrap();
        let merged = with_propagation_of(&desired, &current);
        // Propagation from the binding, content from the template.
        assert!(propagation_equal(&merged, &current));
        assert!(!propagation_equal(&merged, &desired));
        assert_eq!(merged.replicas, 7);
        assert_eq!(merged.resource.resource_version.as_deref(), Some("9"));
        assert_eq!(merged.replica_requirements, desired.replica_requirements);
        // Every owned field is either content or propagation: the merged spec differs from the
        // desired one only in propagation fields.
        let patch = spec_patch(&desired, &merged).unwrap();
        for field in patch.as_object().unwrap().keys() {
            assert!(
                !["resource", "replicas", "replicaRequirements"].contains(&field.as_str()),
                "{field}"
            );
        }
    }

    #[test]
    fn propagation_equality_applies_defaults() {
        let spec = desired_spec(&deployment(), &deployment_key(), &policy(), None).unwrap();
        let mut bare = spec.clone();
        bare.conflict_resolution = None;
        bare.scheduler_name = None;
        bare.preserve_resources_on_deletion = Some(false);
        bare.suspension = Some(Suspension::default());
        assert!(propagation_equal(&spec, &bare));
        // Template-derived fields are not propagation fields.
        let mut other_template = spec.clone();
        other_template.replicas = 9;
        other_template.resource.resource_version = Some("99".into());
        assert!(propagation_equal(&spec, &other_template));
        // Alias spelling of suspension means the same.
        let mut alias = spec.clone();
        alias.suspension = Some(Suspension {
            suspend_dispatching: Some(true),
            ..Default::default()
        });
        let mut canonical = spec.clone();
        canonical.suspension = Some(Suspension {
            dispatching: Some(true),
            ..Default::default()
        });
        assert!(propagation_equal(&alias, &canonical));
        let mut cases: Vec<ResourceBindingSpec> = Vec::new();
        let mut s = spec.clone();
        s.placement = None;
        cases.push(s);
        let mut s = spec.clone();
        s.propagate_deps = true;
        cases.push(s);
        let mut s = spec.clone();
        s.conflict_resolution = Some(ConflictResolution::Overwrite);
        cases.push(s);
        cases.push(canonical);
        let mut s = spec.clone();
        s.failover = Some(FailoverBehavior::default());
        cases.push(s);
        let mut s = spec.clone();
        s.preserve_resources_on_deletion = Some(true);
        cases.push(s);
        let mut s = spec.clone();
        s.scheduler_name = Some("other".into());
        cases.push(s);
        for case in cases {
            assert!(!propagation_equal(&spec, &case), "{case:?}");
        }
    }

    #[test]
    fn binding_view_metadata() {
        let mut rb: ResourceBinding = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "web-deployment", "namespace": "default", "uid": "b", "generation": 2,
                "annotations": {"flotilla.io/template-fingerprint": "abc"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "other", "controller": true}]},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }))
        .unwrap();
        let view = BindingView::from_resource_binding(&rb);
        assert_eq!(view.namespace.as_deref(), Some("default"));
        assert_eq!(view.annotation("flotilla.io/template-fingerprint"), Some("abc"));
        assert!(view.is_owned_by("other"));
        assert!(!view.is_owned_by("t-uid"));
        let refs = view.owner_references_with(&owner_reference(&deployment_key(), "t-uid"));
        assert_eq!(refs.as_array().unwrap().len(), 2);
        assert_eq!(refs[1]["controller"], false, "only one controller reference");
        rb.metadata.owner_references = None;
        let view = BindingView::from_resource_binding(&rb);
        let refs = view.owner_references_with(&owner_reference(&deployment_key(), "t-uid"));
        assert_eq!(refs[0]["controller"], true);
    }

    #[test]
    fn the_cached_view_is_the_view_of_the_whole_binding() {
        let rb: ResourceBinding = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": "web-deployment", "namespace": "default", "uid": "b", "generation": 2,
                "resourceVersion": "10", "finalizers": ["karmada.io/binding-controller"],
                "creationTimestamp": "2026-11-25T10:00:00Z",
                "labels": {"propagationpolicy.karmada.io/name": "web"},
                "annotations": {"flotilla.io/template-fingerprint": "abc", "flotilla.io/overrides": "[]"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "t-uid", "controller": true}],
                "managedFields": [{"manager": "flotilla-detector", "operation": "Apply"}]},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "replicas": 3,
                "clusters": [{"name": "member1", "replicas": 3}]},
            "status": {"schedulerObservedGeneration": 2,
                "conditions": [{"type": "PolicyActivated", "status": "True", "reason": "Activated", "message": "",
                    "lastTransitionTime": "2026-11-25T10:00:00Z"}],
                "aggregatedStatus": [{"clusterName": "member1", "applied": true, "status": {"readyReplicas": 3}}]},
        }))
        .unwrap();
        let whole = BindingView::from_resource_binding(&rb);
        let cached = CachedBinding::of_resource_binding(&rb);
        let view = cached.view();
        // Everything the planner reads is the same; of the metadata in `object`, what the
        // planner does not read (timestamps, finalizers, managedFields) is not kept.
        assert_eq!(
            BindingView {
                object: Value::Null,
                ..view.clone()
            },
            BindingView {
                object: Value::Null,
                ..whole.clone()
            }
        );
        for field in ["labels", "annotations", "ownerReferences"] {
            let pointer = format!("/metadata/{field}");
            assert_eq!(
                view.object.pointer(&pointer),
                whole.object.pointer(&pointer),
                "{field}"
            );
        }
        for gone in ["managedFields", "finalizers", "creationTimestamp"] {
            assert_eq!(view.object["metadata"].get(gone), None, "{gone}");
        }
        assert_eq!(
            cached.annotation("flotilla.io/template-fingerprint").as_deref(),
            Some("abc")
        );
        assert_eq!(cached.annotation("flotilla.io/absent"), None);
        assert_eq!(cached.policy_generation(), None);
        assert_eq!(
            cached.template(),
            &TemplateKey {
                gvk: Gvk::new(&rb.spec.resource.api_version, &rb.spec.resource.kind),
                namespace: rb.spec.resource.namespace.as_deref().map(Into::into),
                name: rb.spec.resource.name.as_str().into(),
            }
        );
        // The apiVersion and kind are the copies every template's key shares, and a copy of
        // the key shares the name too.
        let key = cached.template().clone();
        assert!(Arc::ptr_eq(&key.gvk.api_version, &crate::keys::shared("apps/v1")));
        assert!(Arc::ptr_eq(&key.gvk.kind, &crate::keys::shared("Deployment")));
        assert!(Arc::ptr_eq(&key.name, &cached.template().name));
        assert!(!cached.lazy_pending());
        assert_eq!(
            cached.signature,
            watch_signature(&rb.metadata, &rb.spec, &whole.conditions)
        );

        let crb = ClusterResourceBinding::new("ns-namespace", rb.spec.clone().into());
        let cached = CachedBinding::of_cluster_resource_binding(&crb);
        assert_eq!(cached.view(), BindingView::from_cluster_resource_binding(&crb));
    }

    #[test]
    fn a_cached_binding_knows_whether_a_lazy_change_is_pending() {
        let binding = |status: &str, reason: &str| -> ResourceBinding {
            serde_json::from_value(json!({
                "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": "web-deployment", "namespace": "default"},
                "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
                "status": {"conditions": [{"type": "PolicyActivated", "status": status, "reason": reason,
                    "message": "", "lastTransitionTime": "2026-11-25T10:00:00Z"}]},
            }))
            .unwrap()
        };
        let pending = flotilla_api::well_known::reasons::LAZY_ACTIVATION_PENDING;
        assert!(CachedBinding::of_resource_binding(&binding("False", pending)).lazy_pending());
        assert!(!CachedBinding::of_resource_binding(&binding("True", pending)).lazy_pending());
        assert!(!CachedBinding::of_resource_binding(&binding("False", "InvalidPolicy")).lazy_pending());
        let mut none = binding("False", pending);
        none.status = None;
        none.metadata.annotations =
            Some([(POLICY_GENERATION_ANNOTATION.to_owned(), "p-uid/3".to_owned())].into());
        let cached = CachedBinding::of_resource_binding(&none);
        assert!(!cached.lazy_pending());
        assert!(cached.view().conditions.is_empty());
        assert_eq!(cached.policy_generation(), Some("p-uid/3"));
        assert_eq!(
            cached.annotation(POLICY_GENERATION_ANNOTATION).as_deref(),
            Some("p-uid/3")
        );
    }
}
