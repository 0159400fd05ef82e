//! What the distributor reads from a (Cluster)ResourceBinding, as plain data: [`BindingKey`]
//! names a binding, [`BindingView`] holds the fields that decide where dependencies go. Also the
//! names and annotations that tie a dependency to its attached binding.

use std::fmt;

use flotilla_api::policy::ConflictResolution;
use flotilla_api::well_known::{
    CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    DEPENDENCIES_ANNOTATION, PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    TRACE_PARENT_ANNOTATION,
};
use flotilla_api::{
    BindingSnapshot, ClusterResourceBinding, ObjectReference, ResourceBinding, ResourceBindingSpec,
    Suspension, TargetCluster,
};
use flotilla_interpreter::DependencyRef;
use flotilla_runtime::packed::{Codec, Packed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

/// Annotation on an attached binding: the fingerprint of the dependency object when
/// `spec.resource.resourceVersion` was last moved (the same annotation the detector keeps on
/// the bindings it owns).
pub const TEMPLATE_FINGERPRINT_ANNOTATION: &str = "flotilla.io/template-fingerprint";

/// Names a binding: a ResourceBinding when `namespace` is set, a ClusterResourceBinding
/// otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BindingKey {
    /// Namespace of a ResourceBinding; `None` for a ClusterResourceBinding.
    pub namespace: Option<String>,
    /// Name of the binding.
    pub name: String,
}

impl BindingKey {
    /// A ResourceBinding key.
    pub fn namespaced(namespace: &str, name: &str) -> Self {
        Self {
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    /// A ClusterResourceBinding key.
    pub fn cluster(name: &str) -> Self {
        Self {
            namespace: None,
            name: name.to_owned(),
        }
    }

    /// The kind of binding the key names.
    pub fn kind(&self) -> &'static str {
        if self.namespace.is_some() {
            "ResourceBinding"
        } else {
            "ClusterResourceBinding"
        }
    }

    /// The key of the attached binding of `dep`: `<name>-<kind lower>` in the dependency's
    /// namespace, a ClusterResourceBinding for a cluster-scoped dependency.
    pub fn attached_to(dep: &DependencyRef) -> Self {
        Self {
            namespace: dep.namespace.clone(),
            name: binding_name(&dep.kind, &dep.name),
        }
    }

    /// The snapshot of this binding with `clusters`.
    pub fn snapshot(&self, clusters: &[TargetCluster]) -> BindingSnapshot {
        BindingSnapshot {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            clusters: clusters.to_vec(),
        }
    }
}

impl fmt::Display for BindingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "ResourceBinding {namespace}/{}", self.name),
            None => write!(f, "ClusterResourceBinding {}", self.name),
        }
    }
}

/// Karmada's binding name for a template: `<name>-<kind>` in lower case, with `:` (allowed in
/// RBAC names, not in binding names) replaced by `.`.
pub fn binding_name(kind: &str, name: &str) -> String {
    format!("{}-{}", name.replace(':', "."), kind).to_lowercase()
}

/// `namespace/name`, or `name` for cluster-scoped objects: how messages name a binding.
pub fn short_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// How a dependency names itself in messages: `v1 ConfigMap default/app-config`.
pub fn describe_dependency(dep: &DependencyRef) -> String {
    format!(
        "{} {} {}",
        dep.api_version,
        dep.kind,
        short_key(dep.namespace.as_deref(), &dep.name)
    )
}

/// The dependency list recorded on an independent binding, as the annotation's value (a JSON
/// list of `{apiVersion, kind, namespace, name}`, Karmada's format).
pub fn dependencies_annotation(deps: &[DependencyRef]) -> String {
    serde_json::to_string(deps).unwrap_or_else(|_| "[]".to_owned())
}

/// Parses the dependencies annotation; sorted, without duplicates.
pub fn parse_dependencies_annotation(value: &str) -> Result<Vec<DependencyRef>, serde_json::Error> {
    let mut deps: Vec<DependencyRef> = serde_json::from_str(value)?;
    deps.sort();
    deps.dedup();
    Ok(deps)
}

/// Whether a policy claims the binding (the detector's claim annotations or labels).
pub fn is_claimed(meta: &ObjectMeta) -> bool {
    let annotated = meta.annotations.as_ref().is_some_and(|a| {
        a.contains_key(PROPAGATION_POLICY_NAME_ANNOTATION)
            || a.contains_key(CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION)
    });
    let labelled = meta.labels.as_ref().is_some_and(|l| {
        l.contains_key(PROPAGATION_POLICY_PERMANENT_ID_LABEL)
            || l.contains_key(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL)
    });
    annotated || labelled
}

/// The fields of one binding that the distributor acts on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BindingView {
    /// Which binding.
    pub key: BindingKey,
    /// `metadata.uid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// `metadata.generation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// `metadata.deletionTimestamp` is set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// A policy claims the binding (claim annotations or labels).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub claimed: bool,
    /// `spec.propagateDeps`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub propagate_deps: bool,
    /// `spec.resource`.
    pub resource: ObjectReference,
    /// `spec.clusters`: where the binding is scheduled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<TargetCluster>,
    /// `spec.requiredBy` (attached bindings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<BindingSnapshot>,
    /// `spec.suspension`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,
    /// `spec.conflictResolution`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict_resolution: Option<ConflictResolution>,
    /// `spec.preserveResourcesOnDeletion`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
    /// The dependencies recorded in the `resourcebinding.karmada.io/dependencies` annotation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<DependencyRef>,
    /// The raw annotation value, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependencies_annotation: Option<String>,
    /// `flotilla.io/template-fingerprint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// `flotilla.io/traceparent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// `status.conditions` of a binding no policy claims (an attached binding: its
    /// `DependencyConflict` condition is written here, with the list it replaces); empty for a
    /// claimed binding, whose conditions the distributor never reads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl BindingView {
    /// The view of a binding from its parts.
    pub fn new(
        key: BindingKey,
        meta: &ObjectMeta,
        spec: &ResourceBindingSpec,
        conditions: &[Condition],
    ) -> Self {
        let annotation = |name: &str| meta.annotations.as_ref().and_then(|a| a.get(name)).cloned();
        let dependencies_annotation = annotation(DEPENDENCIES_ANNOTATION);
        let dependencies = dependencies_annotation
            .as_deref()
            .and_then(|value| parse_dependencies_annotation(value).ok())
            .unwrap_or_default();
        let claimed = is_claimed(meta);
        Self {
            key,
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            deleting: meta.deletion_timestamp.is_some(),
            claimed,
            propagate_deps: spec.propagate_deps,
            resource: spec.resource.clone(),
            clusters: spec.clusters.clone(),
            required_by: spec.required_by.clone(),
            suspension: spec.suspension.clone(),
            conflict_resolution: spec.conflict_resolution.clone(),
            preserve_resources_on_deletion: spec.preserve_resources_on_deletion,
            dependencies,
            dependencies_annotation,
            fingerprint: annotation(TEMPLATE_FINGERPRINT_ANNOTATION),
            traceparent: annotation(TRACE_PARENT_ANNOTATION),
            conditions: if claimed { Vec::new() } else { conditions.to_vec() },
        }
    }

    /// The view of a ResourceBinding.
    pub fn of_resource_binding(binding: &ResourceBinding) -> Self {
        let key = BindingKey {
            namespace: Some(binding.metadata.namespace.clone().unwrap_or_default()),
            name: binding.metadata.name.clone().unwrap_or_default(),
        };
        let conditions = binding
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        Self::new(key, &binding.metadata, &binding.spec, conditions)
    }

    /// The view of a ClusterResourceBinding.
    pub fn of_cluster_resource_binding(binding: &ClusterResourceBinding) -> Self {
        let key = BindingKey::cluster(binding.metadata.name.as_deref().unwrap_or_default());
        let conditions = binding
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        Self::new(key, &binding.metadata, &binding.spec, conditions)
    }

    /// Whether the binding's dependencies are to be distributed at all: `propagateDeps` is set
    /// and the binding is not being deleted.
    pub fn distributes(&self) -> bool {
        self.propagate_deps && !self.deleting
    }

    /// Whether this binding puts a snapshot in `dep`'s attached binding: it distributes, is
    /// scheduled somewhere, and its recorded dependencies include `dep`.
    pub fn requires(&self, dep: &DependencyRef) -> bool {
        self.distributes() && !self.clusters.is_empty() && self.dependencies.binary_search(dep).is_ok()
    }

    /// The dependency an attached binding is for (its `spec.resource`).
    pub fn resource_as_dependency(&self) -> DependencyRef {
        DependencyRef {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            namespace: self.resource.namespace.clone().filter(|ns| !ns.is_empty()),
            name: self.resource.name.clone(),
        }
    }

    /// Whether the distributor owns this binding outright: no policy claims it and it lists at
    /// least one referencing binding. (An unclaimed binding with an empty `requiredBy` is none
    /// of the distributor's business: it never leaves its own bindings in that state.)
    pub fn is_attached_only(&self) -> bool {
        !self.claimed && !self.required_by.is_empty()
    }
}

/// A binding as the distributor's watch cache holds it (ADR 0019): its [`BindingView`] as one
/// packed record ([`flotilla_runtime::packed`]), read back when its event is handled or a
/// dependency it references is reconciled. Typed, a view took about 1.5 KiB (the inline struct
/// about 0.5 KiB, every string, vector and condition an allocation of its own); packed against
/// the views before it, about a tenth of that.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredView(Packed);

/// The codec of [`StoredView`]s: its dictionaries are learned from the views it packs.
static VIEWS: Codec = Codec::new();

/// The view is packed whole, name included: the cache keeps a key beside it.
impl flotilla_runtime::cache::Keyed for StoredView {
    type Key = flotilla_runtime::cache::Beside;
}

impl StoredView {
    /// `view`, packed.
    pub fn of(view: &BindingView) -> Self {
        Self(VIEWS.pack(view))
    }

    /// The view, read back.
    pub fn view(&self) -> BindingView {
        VIEWS.unpack(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use flotilla_api::ResourceBindingStatus;

    use super::*;

    fn dep(kind: &str, namespace: Option<&str>, name: &str) -> DependencyRef {
        DependencyRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    #[test]
    fn attached_binding_names_follow_karmada() {
        assert_eq!(
            BindingKey::attached_to(&dep("ConfigMap", Some("default"), "app-config")),
            BindingKey::namespaced("default", "app-config-configmap")
        );
        assert_eq!(
            BindingKey::attached_to(&dep("PersistentVolumeClaim", Some("ns"), "data")),
            BindingKey::namespaced("ns", "data-persistentvolumeclaim")
        );
        assert_eq!(
            BindingKey::attached_to(&dep("StorageClass", None, "fast")),
            BindingKey::cluster("fast-storageclass")
        );
        assert_eq!(
            binding_name("ClusterRole", "system:reader"),
            "system.reader-clusterrole"
        );
    }

    #[test]
    fn keys_display_their_kind() {
        assert_eq!(
            BindingKey::namespaced("default", "web-deployment").to_string(),
            "ResourceBinding default/web-deployment"
        );
        assert_eq!(
            BindingKey::cluster("pv-persistentvolume").to_string(),
            "ClusterResourceBinding pv-persistentvolume"
        );
        assert_eq!(BindingKey::cluster("x").kind(), "ClusterResourceBinding");
        assert_eq!(BindingKey::namespaced("a", "x").kind(), "ResourceBinding");
    }

    #[test]
    fn dependencies_annotation_round_trips_in_karmada_format() {
        let deps = vec![dep("ConfigMap", Some("default"), "a"), dep("Secret", None, "b")];
        let value = dependencies_annotation(&deps);
        assert_eq!(
            value,
            r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"a"},{"apiVersion":"v1","kind":"Secret","name":"b"}]"#
        );
        assert_eq!(parse_dependencies_annotation(&value).unwrap(), deps);
        // Karmada writes the same shape; order and duplicates do not matter.
        let unordered = r#"[{"apiVersion":"v1","kind":"Secret","name":"b"},{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"a"},{"apiVersion":"v1","kind":"Secret","name":"b"}]"#;
        assert_eq!(parse_dependencies_annotation(unordered).unwrap(), deps);
        assert!(parse_dependencies_annotation("not json").is_err());
        assert_eq!(parse_dependencies_annotation("[]").unwrap(), vec![]);
    }

    fn meta(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        ObjectMeta {
            annotations: map(annotations),
            labels: map(labels),
            ..Default::default()
        }
    }

    #[test]
    fn claims_by_annotation_or_label() {
        assert!(!is_claimed(&ObjectMeta::default()));
        assert!(!is_claimed(&meta(&[("app", "x")], &[("app", "x")])));
        assert!(is_claimed(&meta(
            &[(PROPAGATION_POLICY_NAME_ANNOTATION, "pp")],
            &[]
        )));
        assert!(is_claimed(&meta(
            &[(CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION, "cpp")],
            &[]
        )));
        assert!(is_claimed(&meta(
            &[],
            &[(PROPAGATION_POLICY_PERMANENT_ID_LABEL, "u")]
        )));
        assert!(is_claimed(&meta(
            &[],
            &[(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, "u")]
        )));
    }

    #[test]
    fn view_reads_the_fields_that_matter() {
        let mut m = meta(
            &[
                (
                    DEPENDENCIES_ANNOTATION,
                    r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"d","name":"c"}]"#,
                ),
                (TEMPLATE_FINGERPRINT_ANNOTATION, "abc"),
                (TRACE_PARENT_ANNOTATION, "00-aa-bb-01"),
            ],
            &[],
        );
        m.uid = Some("u1".into());
        let spec = ResourceBindingSpec {
            propagate_deps: true,
            clusters: vec![TargetCluster {
                name: "member1".into(),
                replicas: 2,
            }],
            ..Default::default()
        };
        let view = BindingView::new(BindingKey::namespaced("d", "web-deployment"), &m, &spec, &[]);
        assert!(view.distributes());
        assert!(view.requires(&dep("ConfigMap", Some("d"), "c")));
        assert!(!view.requires(&dep("ConfigMap", Some("d"), "other")));
        assert_eq!(view.fingerprint.as_deref(), Some("abc"));
        assert_eq!(view.traceparent.as_deref(), Some("00-aa-bb-01"));
        assert!(!view.claimed);

        let unscheduled = BindingView {
            clusters: vec![],
            ..view.clone()
        };
        assert!(!unscheduled.requires(&dep("ConfigMap", Some("d"), "c")));
        let deleting = BindingView {
            deleting: true,
            ..view.clone()
        };
        assert!(!deleting.distributes());
        assert!(!deleting.requires(&dep("ConfigMap", Some("d"), "c")));
        let off = BindingView {
            propagate_deps: false,
            ..view
        };
        assert!(!off.requires(&dep("ConfigMap", Some("d"), "c")));
    }

    #[test]
    fn malformed_annotation_reads_as_no_dependencies() {
        let m = meta(&[(DEPENDENCIES_ANNOTATION, "{")], &[]);
        let view = BindingView::new(
            BindingKey::namespaced("d", "x"),
            &m,
            &ResourceBindingSpec::default(),
            &[],
        );
        assert!(view.dependencies.is_empty());
        assert_eq!(view.dependencies_annotation.as_deref(), Some("{"));
    }

    #[test]
    fn attached_only_needs_no_claim_and_a_referencing_binding() {
        let snapshot = BindingKey::namespaced("d", "web-deployment").snapshot(&[]);
        let view = BindingView {
            required_by: vec![snapshot],
            ..Default::default()
        };
        assert!(view.is_attached_only());
        assert!(
            !BindingView {
                claimed: true,
                ..view.clone()
            }
            .is_attached_only()
        );
        assert!(!BindingView::default().is_attached_only());
    }

    #[test]
    fn the_view_of_a_binding_holds_what_the_distributor_acts_on() {
        use flotilla_api::work::GracefulEvictionTask;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
        use k8s_openapi::jiff::Timestamp;

        let condition = Condition {
            type_: "Scheduled".into(),
            status: "True".into(),
            reason: "Success".into(),
            message: "ok".into(),
            observed_generation: Some(2),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        let mut binding = ResourceBinding::new(
            "web-deployment",
            ResourceBindingSpec {
                resource: ObjectReference {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: Some("default".into()),
                    name: "web".into(),
                    uid: Some("t-uid".into()),
                    resource_version: Some("3".into()),
                },
                propagate_deps: true,
                replicas: 3,
                clusters: vec![TargetCluster {
                    name: "member1".into(),
                    replicas: 3,
                }],
                placement: Some(Default::default()),
                graceful_eviction_tasks: vec![GracefulEvictionTask::default()],
                required_by: vec![BindingSnapshot::default()],
                conflict_resolution: Some(ConflictResolution::Overwrite),
                suspension: Some(Suspension::default()),
                preserve_resources_on_deletion: Some(true),
                ..Default::default()
            },
        );
        binding.metadata.namespace = Some("default".into());
        binding.metadata.uid = Some("b-uid".into());
        binding.metadata.resource_version = Some("11".into());
        binding.metadata.generation = Some(2);
        binding.metadata.owner_references = Some(vec![OwnerReference::default()]);
        binding.metadata.annotations = Some(BTreeMap::from([
            (PROPAGATION_POLICY_NAME_ANNOTATION.into(), "p".into()),
            (
                DEPENDENCIES_ANNOTATION.into(),
                r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"c"}]"#.into(),
            ),
            (TEMPLATE_FINGERPRINT_ANNOTATION.into(), "abc".into()),
            (TRACE_PARENT_ANNOTATION.into(), "00-1-2-01".into()),
            ("flotilla.io/overrides".into(), "{}".into()),
        ]));
        binding.metadata.labels = Some(BTreeMap::from([
            (PROPAGATION_POLICY_PERMANENT_ID_LABEL.into(), "id".into()),
            ("other".into(), "x".into()),
        ]));
        binding.status = Some(ResourceBindingStatus {
            conditions: vec![condition],
            aggregated_status: vec![Default::default()],
            scheduler_observed_generation: Some(2),
            ..Default::default()
        });
        // The view is what the binding cache keeps: everything the distributor reads.
        let dependencies = r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"c"}]"#;
        let view = BindingView::of_resource_binding(&binding);
        assert_eq!(
            view,
            BindingView {
                key: BindingKey::namespaced("default", "web-deployment"),
                uid: Some("b-uid".into()),
                resource_version: Some("11".into()),
                generation: Some(2),
                deleting: false,
                claimed: true,
                propagate_deps: true,
                resource: binding.spec.resource.clone(),
                clusters: binding.spec.clusters.clone(),
                required_by: vec![BindingSnapshot::default()],
                suspension: Some(Suspension::default()),
                conflict_resolution: Some(ConflictResolution::Overwrite),
                preserve_resources_on_deletion: Some(true),
                dependencies: parse_dependencies_annotation(dependencies).unwrap(),
                dependencies_annotation: Some(dependencies.into()),
                fingerprint: Some("abc".into()),
                traceparent: Some("00-1-2-01".into()),
                // Claimed: its conditions are not the distributor's to write.
                conditions: Vec::new(),
            }
        );
        // An attached binding's are.
        let mut attached = binding.clone();
        attached.metadata.annotations = None;
        attached.metadata.labels = None;
        let attached = BindingView::of_resource_binding(&attached);
        assert!(!attached.claimed);
        assert_eq!(attached.conditions, binding.status.as_ref().unwrap().conditions);
        assert_eq!(StoredView::of(&attached).view(), attached);
        assert_eq!(view.dependencies.len(), 1);
        // The cache keeps it packed: it reads back whole, every field set or none.
        assert_eq!(StoredView::of(&view).view(), view);
        assert_eq!(
            StoredView::of(&BindingView::default()).view(),
            BindingView::default()
        );
        let deleting = BindingView {
            key: BindingKey::cluster("pv-persistentvolume"),
            deleting: true,
            ..BindingView::default()
        };
        assert_eq!(StoredView::of(&deleting).view(), deleting);

        // Claimed by a label alone.
        let mut labelled = ResourceBinding::new("x", ResourceBindingSpec::default());
        labelled.metadata.labels = Some(BTreeMap::from([(
            CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL.into(),
            "id".into(),
        )]));
        assert!(BindingView::of_resource_binding(&labelled).claimed);
        assert!(!BindingView::of_resource_binding(&ResourceBinding::new("y", Default::default())).claimed);
    }
}
