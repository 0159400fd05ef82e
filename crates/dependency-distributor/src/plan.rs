//! The distributor's decisions, as pure functions: which snapshots a dependency's attached
//! binding lists ([`desired_required_by`]), what it carries when referencing bindings disagree
//! ([`resolve`]), and what to write to reach that state ([`plan`]).
//!
//! ## Disagreements between referencing bindings
//!
//! An attached-only binding has one value per field but may be required by several bindings
//! whose policies differ. The rules are deterministic and always err on the side of not
//! destroying anything:
//!
//! - `conflictResolution`: `Abort` unless every referencing binding says `Overwrite` (an unset
//!   value is `Abort`, Karmada's default; an unknown value counts as `Abort`).
//! - `preserveResourcesOnDeletion`: `true` when any referencing binding says `true`.
//! - `suspension`: dispatching to a cluster is suspended only when every referencing binding
//!   that targets that cluster suspends it; one workload still running there needs the
//!   dependency to be kept up to date. When every referencing binding suspends dispatching
//!   everywhere, the attached binding says `dispatching: true`; otherwise it lists the suspended
//!   clusters in `dispatchingOnClusters`.
//!
//! Each disagreement is reported (the `DependencyConflict` condition and a Warning event on the
//! attached binding) with the bindings on each side and the value chosen.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::policy::{ConflictResolution, SuspendClusters};
use flotilla_api::{BindingSnapshot, ObjectReference, ResourceBindingSpec, Suspension};
use flotilla_interpreter::DependencyRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::binding::{BindingView, TEMPLATE_FINGERPRINT_ANNOTATION, short_key};

/// Condition type on an attached binding: the bindings that require it disagree on a field.
pub const DEPENDENCY_CONFLICT: &str = "DependencyConflict";
/// Reason of `DependencyConflict=True`.
pub const REASON_DISAGREE: &str = "ReferencingBindingsDisagree";
/// Reason of `DependencyConflict=False`.
pub const REASON_AGREE: &str = "ReferencingBindingsAgree";

/// The snapshots `dep`'s attached binding should list: one per binding in `candidates` that
/// [requires](BindingView::requires) it, with that binding's current clusters, sorted by
/// namespace and name.
pub fn desired_required_by<'a>(
    dep: &DependencyRef,
    candidates: impl IntoIterator<Item = &'a BindingView>,
) -> Vec<BindingSnapshot> {
    let mut by_key = BTreeMap::new();
    for view in candidates {
        if view.requires(dep) {
            by_key.insert(view.key.clone(), view.key.snapshot(&view.clusters));
        }
    }
    by_key.into_values().collect()
}

/// The fields an attached-only binding takes from the bindings that require it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttachedFields {
    /// `spec.conflictResolution`.
    pub conflict_resolution: Option<ConflictResolution>,
    /// `spec.preserveResourcesOnDeletion`.
    pub preserve_resources_on_deletion: Option<bool>,
    /// `spec.suspension`, canonical spelling.
    pub suspension: Option<Suspension>,
}

/// [`AttachedFields`] and the disagreements met while choosing them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolution {
    /// The values to write.
    pub fields: AttachedFields,
    /// One message per field the referencing bindings disagree on, naming both sides and the
    /// value chosen.
    pub disagreements: Vec<String>,
}

fn names(views: &[&BindingView]) -> String {
    views
        .iter()
        .map(|v| short_key(v.key.namespace.as_deref(), &v.key.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Chooses the attached binding's fields from the bindings that require it (see the module
/// docs for the rules). `referencing` are the bindings whose snapshots the attached binding
/// lists.
pub fn resolve(referencing: &[&BindingView]) -> Resolution {
    let mut disagreements = Vec::new();
    if referencing.is_empty() {
        return Resolution::default();
    }

    let (overwrite, abort): (Vec<&BindingView>, Vec<&BindingView>) = referencing
        .iter()
        .partition(|v| v.conflict_resolution == Some(ConflictResolution::Overwrite));
    let conflict_resolution = if abort.is_empty() {
        ConflictResolution::Overwrite
    } else {
        if !overwrite.is_empty() {
            disagreements.push(format!(
                "conflictResolution: Overwrite by {}, Abort by {}; using Abort",
                names(&overwrite),
                names(&abort)
            ));
        }
        ConflictResolution::Abort
    };

    let (preserve, discard): (Vec<&BindingView>, Vec<&BindingView>) = referencing
        .iter()
        .partition(|v| v.preserve_resources_on_deletion == Some(true));
    let preserve_resources_on_deletion = if preserve.is_empty() {
        None
    } else {
        if !discard.is_empty() {
            disagreements.push(format!(
                "preserveResourcesOnDeletion: true by {}, false by {}; using true",
                names(&preserve),
                names(&discard)
            ));
        }
        Some(true)
    };

    let suspension = resolve_suspension(referencing, &mut disagreements);
    Resolution {
        fields: AttachedFields {
            conflict_resolution: Some(conflict_resolution),
            preserve_resources_on_deletion,
            suspension,
        },
        disagreements,
    }
}

fn resolve_suspension(referencing: &[&BindingView], disagreements: &mut Vec<String>) -> Option<Suspension> {
    let effective: Vec<_> = referencing
        .iter()
        .map(|v| {
            v.suspension
                .as_ref()
                .map(Suspension::effective)
                .unwrap_or_default()
        })
        .collect();
    if effective.iter().all(|e| e.all_clusters) {
        return Some(Suspension {
            dispatching: Some(true),
            ..Default::default()
        });
    }
    // Per cluster: who targets it while suspending it, who targets it while dispatching.
    let mut by_cluster: BTreeMap<&str, (Vec<&BindingView>, Vec<&BindingView>)> = BTreeMap::new();
    for (view, suspension) in referencing.iter().zip(&effective) {
        for cluster in view
            .clusters
            .iter()
            .map(|c| c.name.as_str())
            .filter(|n| !n.is_empty())
        {
            let entry = by_cluster.entry(cluster).or_default();
            if suspension.is_suspended(cluster) {
                entry.0.push(view);
            } else {
                entry.1.push(view);
            }
        }
    }
    let mut suspended = BTreeSet::new();
    for (cluster, (suspending, dispatching)) in by_cluster {
        if dispatching.is_empty() {
            suspended.insert(cluster.to_owned());
        } else if !suspending.is_empty() {
            disagreements.push(format!(
                "suspension of {cluster}: suspended by {}, dispatching for {}; dispatching continues",
                names(&suspending),
                names(&dispatching)
            ));
        }
    }
    if suspended.is_empty() {
        None
    } else {
        Some(Suspension {
            dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: suspended.into_iter().collect(),
            }),
            ..Default::default()
        })
    }
}

/// Sets the `DependencyConflict` condition from `disagreements`: `True` with every
/// disagreement in the message, `False` once they are gone. A binding that never had a
/// disagreement gets no condition at all. Returns whether anything changed.
pub fn set_conflict_condition(
    conditions: &mut Vec<Condition>,
    disagreements: &[String],
    now: Timestamp,
) -> bool {
    if disagreements.is_empty() && flotilla_api::conditions::find(conditions, DEPENDENCY_CONFLICT).is_none() {
        return false;
    }
    let (status, reason, message) = if disagreements.is_empty() {
        (
            false,
            REASON_AGREE,
            "the bindings that require this dependency agree".to_owned(),
        )
    } else {
        (true, REASON_DISAGREE, disagreements.join("; "))
    };
    // No observedGeneration: the scheduler bumps the generation on every reschedule, and the
    // condition does not depend on it.
    flotilla_api::conditions::set(
        conditions,
        DEPENDENCY_CONFLICT,
        status,
        reason,
        message,
        None,
        now,
    )
}

/// Whether the attached binding of `dep`, as `existing` (cached) shows it, is already what
/// `required_by` and `resolution` ask for, assuming the dependency object is as the binding
/// records it (uid, resourceVersion, fingerprint annotation): a reconcile would write nothing.
/// A change of the object is not seen here; its own watch event reconciles it in full.
pub fn settled(
    dep: &DependencyRef,
    existing: Option<&BindingView>,
    required_by: &[BindingSnapshot],
    resolution: &Resolution,
) -> bool {
    let Some(existing) = existing else {
        // Nothing to create while nothing requires it; otherwise the object must be read.
        return required_by.is_empty();
    };
    let Some(fingerprint) = &existing.fingerprint else {
        return false;
    };
    let recorded = ObjectState {
        uid: existing.resource.uid.clone(),
        resource_version: existing.resource.resource_version.clone(),
        fingerprint: fingerprint.clone(),
    };
    if plan(
        dep,
        Some(&recorded),
        Some(existing),
        required_by,
        &resolution.fields,
    ) != Plan::Nothing
    {
        return false;
    }
    // The DependencyConflict condition (attached-only bindings).
    existing.claimed
        || !set_conflict_condition(
            &mut existing.conditions.clone(),
            &resolution.disagreements,
            Timestamp::now(),
        )
}

/// The dependency object as read from the API.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectState {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// Its [fingerprint](crate::fingerprint::fingerprint).
    pub fingerprint: String,
}

/// What to do about one attached binding.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// It is as it should be.
    Nothing,
    /// Create the attached-only binding with this spec and fingerprint annotation.
    Create {
        /// The spec (boxed: it is large next to the other variants).
        spec: Box<ResourceBindingSpec>,
        /// The dependency object's fingerprint.
        fingerprint: String,
    },
    /// Apply this JSON merge patch (spec fields and annotations the distributor owns).
    Patch(Value),
    /// Delete the attached-only binding: nothing requires it any more, or its object is gone.
    Delete {
        /// Why, for logs and events.
        reason: String,
    },
    /// The binding is being deleted; act again once it is gone.
    WaitForDeletion,
    /// A binding of that name exists for another resource; leave it alone.
    NameTaken {
        /// What the binding is for.
        message: String,
    },
}

/// The `group` part of an apiVersion (`""` for the core group).
fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn same_resource(resource: &ObjectReference, dep: &DependencyRef) -> bool {
    group(&resource.api_version) == group(&dep.api_version)
        && resource.kind == dep.kind
        && resource.name == dep.name
        && resource.namespace.as_deref().filter(|ns| !ns.is_empty()) == dep.namespace.as_deref()
}

/// The `spec.resource` of an attached binding for `dep`; `resource_version` is the object's
/// resourceVersion at its last content change.
pub fn resource_reference(
    dep: &DependencyRef,
    object: &ObjectState,
    resource_version: Option<String>,
) -> ObjectReference {
    ObjectReference {
        api_version: dep.api_version.clone(),
        kind: dep.kind.clone(),
        namespace: dep.namespace.clone(),
        name: dep.name.clone(),
        uid: object.uid.clone(),
        resource_version,
    }
}

/// Decides what to write so that `dep`'s attached binding (`existing`) lists `required_by`
/// and, when the distributor owns it, carries `fields`.
///
/// - No binding: create one when something requires the dependency and the object exists (an
///   attached binding for an object that does not exist yet would propagate nothing and point
///   its owner reference nowhere; it is created when the object appears).
/// - A binding a policy claims: write `requiredBy` only, never delete it.
/// - An attached-only binding: delete it when nothing requires it, when its object is gone, or
///   when the object was re-created (new uid: the owner reference is stale; the next pass
///   creates a fresh binding); otherwise write every field the distributor owns that differs.
///   `spec.resource.resourceVersion` moves only when the object's fingerprint changed.
pub fn plan(
    dep: &DependencyRef,
    object: Option<&ObjectState>,
    existing: Option<&BindingView>,
    required_by: &[BindingSnapshot],
    fields: &AttachedFields,
) -> Plan {
    let Some(existing) = existing else {
        return match object {
            Some(object) if !required_by.is_empty() => Plan::Create {
                spec: Box::new(ResourceBindingSpec {
                    resource: resource_reference(dep, object, object.resource_version.clone()),
                    required_by: required_by.to_vec(),
                    conflict_resolution: fields.conflict_resolution.clone(),
                    preserve_resources_on_deletion: fields.preserve_resources_on_deletion,
                    suspension: fields.suspension.clone(),
                    ..Default::default()
                }),
                fingerprint: object.fingerprint.clone(),
            },
            _ => Plan::Nothing,
        };
    };
    if existing.deleting {
        return if required_by.is_empty() || object.is_none() {
            Plan::Nothing
        } else {
            Plan::WaitForDeletion
        };
    }
    if !same_resource(&existing.resource, dep) {
        if required_by.is_empty() {
            return Plan::Nothing;
        }
        return Plan::NameTaken {
            message: format!(
                "{} is the binding of {} {} {}, not of the dependency; the dependency is not propagated",
                existing.key,
                existing.resource.api_version,
                existing.resource.kind,
                short_key(existing.resource.namespace.as_deref(), &existing.resource.name)
            ),
        };
    }
    if existing.claimed {
        if existing.required_by == required_by {
            return Plan::Nothing;
        }
        return Plan::Patch(json!({"spec": {"requiredBy": snapshots_value(required_by)}}));
    }
    if required_by.is_empty() {
        return if existing.required_by.is_empty() {
            // Not one of ours (see BindingView::is_attached_only): leave it alone.
            Plan::Nothing
        } else {
            Plan::Delete {
                reason: "no binding requires the dependency any more".to_owned(),
            }
        };
    }
    let Some(object) = object else {
        return Plan::Delete {
            reason: "the dependency object no longer exists".to_owned(),
        };
    };
    if existing.resource.uid.is_some() && object.uid.is_some() && existing.resource.uid != object.uid {
        return Plan::Delete {
            reason: "the dependency object was re-created".to_owned(),
        };
    }
    let content_changed = existing.fingerprint.as_deref() != Some(object.fingerprint.as_str());
    let resource_version = if content_changed || existing.resource.resource_version.is_none() {
        object.resource_version.clone()
    } else {
        existing.resource.resource_version.clone()
    };
    let current = owned_spec_fields(
        &existing.resource,
        &existing.required_by,
        &AttachedFields {
            conflict_resolution: existing.conflict_resolution.clone(),
            preserve_resources_on_deletion: existing.preserve_resources_on_deletion,
            suspension: existing.suspension.clone(),
        },
    );
    let desired = owned_spec_fields(
        &resource_reference(dep, object, resource_version),
        required_by,
        fields,
    );
    let mut patch = Map::new();
    if let Some(spec) = merge_diff(&current, &desired) {
        patch.insert("spec".to_owned(), spec);
    }
    if content_changed {
        patch.insert(
            "metadata".to_owned(),
            json!({"annotations": {TEMPLATE_FINGERPRINT_ANNOTATION: object.fingerprint}}),
        );
    }
    if patch.is_empty() {
        Plan::Nothing
    } else {
        Plan::Patch(Value::Object(patch))
    }
}

fn snapshots_value(required_by: &[BindingSnapshot]) -> Value {
    if required_by.is_empty() {
        Value::Null
    } else {
        serde_json::to_value(required_by).unwrap_or(Value::Null)
    }
}

/// The spec fields the distributor owns on an attached-only binding, as JSON (absent fields
/// omitted, as the API stores them).
fn owned_spec_fields(
    resource: &ObjectReference,
    required_by: &[BindingSnapshot],
    fields: &AttachedFields,
) -> Value {
    let spec = ResourceBindingSpec {
        resource: resource.clone(),
        required_by: required_by.to_vec(),
        conflict_resolution: fields.conflict_resolution.clone(),
        preserve_resources_on_deletion: fields.preserve_resources_on_deletion,
        suspension: fields.suspension.as_ref().map(Suspension::canonical),
        ..Default::default()
    };
    let mut value = serde_json::to_value(spec).unwrap_or_else(|_| json!({}));
    if let Some(map) = value.as_object_mut() {
        map.retain(|key, _| {
            matches!(
                key.as_str(),
                "resource"
                    | "requiredBy"
                    | "conflictResolution"
                    | "preserveResourcesOnDeletion"
                    | "suspension"
            )
        });
        for key in [
            "resource",
            "requiredBy",
            "conflictResolution",
            "preserveResourcesOnDeletion",
            "suspension",
        ] {
            map.entry(key.to_owned()).or_insert(Value::Null);
        }
    }
    value
}

/// The JSON merge patch (RFC 7386) that turns `current` into `desired`, or `None` when they are
/// equal. Objects are diffed key by key (a key whose desired value is `null` or that is missing
/// from `desired` is removed); everything else, lists included, is replaced whole.
pub fn merge_diff(current: &Value, desired: &Value) -> Option<Value> {
    match (current, desired) {
        (Value::Object(current), Value::Object(desired)) => {
            let mut patch = Map::new();
            for (key, want) in desired {
                let have = current.get(key).unwrap_or(&Value::Null);
                if want.is_null() {
                    if !have.is_null() {
                        patch.insert(key.clone(), Value::Null);
                    }
                    continue;
                }
                if have.is_object() && want.is_object() {
                    if let Some(sub) = merge_diff(have, want) {
                        patch.insert(key.clone(), sub);
                    }
                } else if have != want {
                    patch.insert(key.clone(), strip_nulls(want));
                }
            }
            for (key, have) in current {
                if !desired.contains_key(key) && !have.is_null() {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if current == desired => None,
        _ => Some(strip_nulls(desired)),
    }
}

/// A value written whole into a merge patch must not contain `null`s (they would read as
/// deletions inside a freshly added object).
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::TargetCluster;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::binding::BindingKey;

    fn cm(name: &str) -> DependencyRef {
        DependencyRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    fn clusters(names: &[&str]) -> Vec<TargetCluster> {
        names
            .iter()
            .map(|n| TargetCluster {
                name: (*n).into(),
                replicas: 1,
            })
            .collect()
    }

    fn workload(name: &str, on: &[&str], deps: &[DependencyRef]) -> BindingView {
        let mut deps = deps.to_vec();
        deps.sort();
        BindingView {
            key: BindingKey::namespaced("default", name),
            claimed: true,
            propagate_deps: true,
            clusters: clusters(on),
            dependencies: deps,
            ..Default::default()
        }
    }

    fn object(uid: &str, rv: &str, fp: &str) -> ObjectState {
        ObjectState {
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            fingerprint: fp.into(),
        }
    }

    // ----- requiredBy --------------------------------------------------------------------

    #[test]
    fn required_by_lists_every_binding_that_needs_the_dependency() {
        let a = workload("b-deployment", &["member2"], &[cm("shared")]);
        let b = workload("a-deployment", &["member1"], &[cm("shared"), cm("own")]);
        let c = workload("c-deployment", &["member3"], &[cm("other")]);
        let got = desired_required_by(&cm("shared"), [&a, &b, &c]);
        assert_eq!(
            got,
            vec![
                BindingKey::namespaced("default", "a-deployment").snapshot(&clusters(&["member1"])),
                BindingKey::namespaced("default", "b-deployment").snapshot(&clusters(&["member2"])),
            ]
        );
        assert_eq!(desired_required_by(&cm("own"), [&a, &b, &c]).len(), 1);
        assert!(desired_required_by(&cm("nobody"), [&a, &b, &c]).is_empty());
    }

    #[test]
    fn required_by_follows_clusters_and_drops_bindings_that_stop_needing_it() {
        let mut web = workload("web-deployment", &["member1"], &[cm("cfg")]);
        assert_eq!(
            desired_required_by(&cm("cfg"), [&web])[0].clusters,
            clusters(&["member1"])
        );
        // Rescheduled: the snapshot moves with it.
        web.clusters = clusters(&["member2", "member3"]);
        assert_eq!(
            desired_required_by(&cm("cfg"), [&web])[0].clusters,
            clusters(&["member2", "member3"])
        );
        // Unscheduled, reference removed, propagateDeps off, being deleted: no snapshot.
        for change in [
            |v: &mut BindingView| v.clusters.clear(),
            |v: &mut BindingView| v.dependencies.clear(),
            |v: &mut BindingView| v.propagate_deps = false,
            |v: &mut BindingView| v.deleting = true,
        ] {
            let mut changed = web.clone();
            change(&mut changed);
            assert!(
                desired_required_by(&cm("cfg"), [&changed]).is_empty(),
                "{changed:?}"
            );
        }
    }

    #[test]
    fn required_by_covers_cluster_resource_bindings_and_duplicates() {
        let secret = DependencyRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some("storage".into()),
            name: "csi-creds".into(),
        };
        let pv = BindingView {
            key: BindingKey::cluster("data-persistentvolume"),
            propagate_deps: true,
            clusters: clusters(&["member1"]),
            dependencies: vec![secret.clone()],
            ..Default::default()
        };
        let got = desired_required_by(&secret, [&pv, &pv]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].namespace, None);
        assert_eq!(got[0].name, "data-persistentvolume");
    }

    // ----- disagreements ------------------------------------------------------------------

    #[test]
    fn agreeing_bindings_pass_their_values_through() {
        let mut a = workload("a", &["m1"], &[]);
        a.conflict_resolution = Some(ConflictResolution::Overwrite);
        a.preserve_resources_on_deletion = Some(true);
        let mut b = workload("b", &["m2"], &[]);
        b.conflict_resolution = Some(ConflictResolution::Overwrite);
        b.preserve_resources_on_deletion = Some(true);
        let got = resolve(&[&a, &b]);
        assert_eq!(
            got,
            Resolution {
                fields: AttachedFields {
                    conflict_resolution: Some(ConflictResolution::Overwrite),
                    preserve_resources_on_deletion: Some(true),
                    suspension: None,
                },
                disagreements: vec![],
            }
        );
        let defaults = resolve(&[&workload("c", &["m1"], &[])]);
        assert_eq!(
            defaults.fields.conflict_resolution,
            Some(ConflictResolution::Abort)
        );
        assert_eq!(defaults.fields.preserve_resources_on_deletion, None);
        assert!(defaults.disagreements.is_empty());
        assert_eq!(resolve(&[]), Resolution::default());
    }

    #[test]
    fn abort_wins_over_overwrite() {
        let mut a = workload("a", &["m1"], &[]);
        a.conflict_resolution = Some(ConflictResolution::Overwrite);
        let b = workload("b", &["m1"], &[]); // unset = Abort
        let mut c = workload("c", &["m1"], &[]);
        c.conflict_resolution = Some(ConflictResolution::Other("Merge".into()));
        for others in [vec![&b], vec![&c]] {
            let mut all = vec![&a];
            all.extend(others);
            let got = resolve(&all);
            assert_eq!(got.fields.conflict_resolution, Some(ConflictResolution::Abort));
            assert_eq!(got.disagreements.len(), 1);
            assert!(
                got.disagreements[0]
                    .starts_with("conflictResolution: Overwrite by default/a, Abort by default/"),
                "{:?}",
                got.disagreements
            );
        }
    }

    #[test]
    fn preserving_wins_over_deleting() {
        let mut a = workload("a", &["m1"], &[]);
        a.preserve_resources_on_deletion = Some(false);
        let mut b = workload("b", &["m1"], &[]);
        b.preserve_resources_on_deletion = Some(true);
        let c = workload("c", &["m1"], &[]);
        let got = resolve(&[&a, &b, &c]);
        assert_eq!(got.fields.preserve_resources_on_deletion, Some(true));
        assert_eq!(
            got.disagreements,
            vec![
                "preserveResourcesOnDeletion: true by default/b, false by default/a, default/c; using true"
                    .to_owned()
            ]
        );
        // Explicit false and unset agree.
        assert!(resolve(&[&a, &c]).disagreements.is_empty());
        assert_eq!(resolve(&[&a, &c]).fields.preserve_resources_on_deletion, None);
    }

    fn suspend(view: &mut BindingView, all: bool, on: &[&str]) {
        view.suspension = Some(Suspension {
            dispatching: all.then_some(true),
            dispatching_on_clusters: (!on.is_empty()).then(|| SuspendClusters {
                cluster_names: on.iter().map(|c| (*c).to_owned()).collect(),
            }),
            ..Default::default()
        });
    }

    #[test]
    fn a_single_workload_passes_its_suspension_on() {
        let mut a = workload("a", &["m1", "m2"], &[]);
        suspend(&mut a, true, &[]);
        assert_eq!(
            resolve(&[&a]).fields.suspension,
            Some(Suspension {
                dispatching: Some(true),
                ..Default::default()
            })
        );
        suspend(&mut a, false, &["m2"]);
        assert_eq!(
            resolve(&[&a]).fields.suspension,
            Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["m2".into()]
                }),
                ..Default::default()
            })
        );
        // The seed's alias spelling counts the same.
        a.suspension = Some(Suspension {
            suspend_dispatching: Some(true),
            ..Default::default()
        });
        assert_eq!(
            resolve(&[&a]).fields.suspension,
            Some(Suspension {
                dispatching: Some(true),
                ..Default::default()
            })
        );
        let not_suspended = workload("b", &["m1"], &[]);
        assert_eq!(resolve(&[&not_suspended]).fields.suspension, None);
    }

    #[test]
    fn a_cluster_is_suspended_only_when_every_workload_on_it_suspends_it() {
        // a runs on m1, m2 and suspends everything; b runs on m2, m3 and suspends nothing.
        let mut a = workload("a", &["m1", "m2"], &[]);
        suspend(&mut a, true, &[]);
        let b = workload("b", &["m2", "m3"], &[]);
        let got = resolve(&[&a, &b]);
        assert_eq!(
            got.fields.suspension,
            Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["m1".into()]
                }),
                ..Default::default()
            })
        );
        assert_eq!(
            got.disagreements,
            vec![
                "suspension of m2: suspended by default/a, dispatching for default/b; dispatching continues"
                    .to_owned()
            ]
        );

        // Both suspend m2 (one by list, one globally): m2 and m1 suspended, m3 not.
        let mut b = b;
        suspend(&mut b, false, &["m2"]);
        let got = resolve(&[&a, &b]);
        assert_eq!(
            got.fields.suspension,
            Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["m1".into(), "m2".into()]
                }),
                ..Default::default()
            })
        );
        assert!(got.disagreements.is_empty());

        // Every workload suspends everything: dispatching: true.
        suspend(&mut b, true, &[]);
        assert_eq!(
            resolve(&[&a, &b]).fields.suspension,
            Some(Suspension {
                dispatching: Some(true),
                ..Default::default()
            })
        );
    }

    // ----- plan ---------------------------------------------------------------------------

    fn attached(
        dep: &DependencyRef,
        required_by: Vec<BindingSnapshot>,
        uid: &str,
        rv: &str,
        fp: &str,
    ) -> BindingView {
        BindingView {
            key: BindingKey::attached_to(dep),
            resource: ObjectReference {
                api_version: dep.api_version.clone(),
                kind: dep.kind.clone(),
                namespace: dep.namespace.clone(),
                name: dep.name.clone(),
                uid: Some(uid.into()),
                resource_version: Some(rv.into()),
            },
            required_by,
            conflict_resolution: Some(ConflictResolution::Abort),
            fingerprint: Some(fp.into()),
            ..Default::default()
        }
    }

    fn fields() -> AttachedFields {
        AttachedFields {
            conflict_resolution: Some(ConflictResolution::Abort),
            ..Default::default()
        }
    }

    #[test]
    fn creates_only_when_required_and_the_object_exists() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let obj = object("u1", "5", "fp1");
        match plan(&dep, Some(&obj), None, &required, &fields()) {
            Plan::Create { spec, fingerprint } => {
                assert_eq!(fingerprint, "fp1");
                assert_eq!(spec.required_by, required);
                assert_eq!(spec.resource.uid.as_deref(), Some("u1"));
                assert_eq!(spec.resource.resource_version.as_deref(), Some("5"));
                assert_eq!(spec.resource.namespace.as_deref(), Some("default"));
                assert_eq!(spec.conflict_resolution, Some(ConflictResolution::Abort));
                assert!(!spec.propagate_deps);
                assert!(spec.clusters.is_empty(), "the scheduler writes clusters");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(plan(&dep, None, None, &required, &fields()), Plan::Nothing);
        assert_eq!(plan(&dep, Some(&obj), None, &[], &fields()), Plan::Nothing);
    }

    #[test]
    fn unchanged_binding_needs_no_write() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let existing = attached(&dep, required.clone(), "u1", "5", "fp1");
        // A newer resourceVersion with the same content does not move spec.resource.
        let obj = object("u1", "9", "fp1");
        assert_eq!(
            plan(&dep, Some(&obj), Some(&existing), &required, &fields()),
            Plan::Nothing
        );
    }

    #[test]
    fn content_change_moves_the_resource_version() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let existing = attached(&dep, required.clone(), "u1", "5", "fp1");
        let obj = object("u1", "9", "fp2");
        assert_eq!(
            plan(&dep, Some(&obj), Some(&existing), &required, &fields()),
            Plan::Patch(json!({
                "spec": {"resource": {"resourceVersion": "9"}},
                "metadata": {"annotations": {TEMPLATE_FINGERPRINT_ANNOTATION: "fp2"}},
            }))
        );
    }

    #[test]
    fn required_by_and_fields_are_patched() {
        let dep = cm("cfg");
        let old = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let mut existing = attached(&dep, old, "u1", "5", "fp1");
        existing.suspension = Some(Suspension {
            dispatching: Some(true),
            ..Default::default()
        });
        existing.preserve_resources_on_deletion = Some(true);
        let new = desired_required_by(&dep, [&workload("web", &["m2"], &[cm("cfg")])]);
        let want_fields = AttachedFields {
            conflict_resolution: Some(ConflictResolution::Overwrite),
            preserve_resources_on_deletion: None,
            suspension: Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["m2".into()],
                }),
                ..Default::default()
            }),
        };
        let got = plan(
            &dep,
            Some(&object("u1", "5", "fp1")),
            Some(&existing),
            &new,
            &want_fields,
        );
        assert_eq!(
            got,
            Plan::Patch(json!({"spec": {
                "requiredBy": [{"namespace": "default", "name": "web", "clusters": [{"name": "m2", "replicas": 1}]}],
                "conflictResolution": "Overwrite",
                "preserveResourcesOnDeletion": null,
                "suspension": {"dispatching": null, "dispatchingOnClusters": {"clusterNames": ["m2"]}},
            }}))
        );
    }

    /// The binding the API holds after `decision` was written over `stored` (`None`: created),
    /// as JSON and as the distributor's view.
    fn written(dep: &DependencyRef, stored: Option<&Value>, decision: Plan) -> (Value, BindingView) {
        let value = match (stored, decision) {
            (None, Plan::Create { spec, fingerprint }) => json!({
                "apiVersion": "work.karmada.io/v1alpha2",
                "kind": "ResourceBinding",
                "metadata": {
                    "name": BindingKey::attached_to(dep).name,
                    "namespace": "default",
                    "uid": "binding-uid",
                    "annotations": {TEMPLATE_FINGERPRINT_ANNOTATION: fingerprint},
                },
                "spec": spec,
            }),
            // flotilla-apiserver's own JSON merge patch (RFC 7386).
            (Some(stored), Plan::Patch(patch)) => flotilla_patch::merge_patch(stored, &patch).unwrap(),
            (_, other) => panic!("not a write: {other:?}"),
        };
        let binding: flotilla_api::ResourceBinding = serde_json::from_value(value.clone()).unwrap();
        (value, BindingView::of_resource_binding(&binding))
    }

    /// A plan is a fixpoint of its own writes: over what a create or patch left, the plan is
    /// to do nothing (the watch's copy of the distributor's own write is reconciled once more
    /// and must not start a second write, nor a loop of them).
    #[test]
    fn a_written_binding_needs_no_second_write() {
        let dep = cm("cfg");
        let on = |clusters: &[&str]| desired_required_by(&dep, [&workload("web", clusters, &[cm("cfg")])]);
        let obj = object("u1", "5", "fp1");
        let some_fields = AttachedFields {
            conflict_resolution: Some(ConflictResolution::Overwrite),
            preserve_resources_on_deletion: Some(true),
            suspension: Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["m2".into(), "m1".into()],
                }),
                ..Default::default()
            }),
        };
        let mut patches = 0;
        for fields in [fields(), some_fields.clone(), AttachedFields::default()] {
            // Created.
            let decision = plan(&dep, Some(&obj), None, &on(&["m1"]), &fields);
            let (stored, created) = written(&dep, None, decision);
            assert_eq!(
                plan(&dep, Some(&obj), Some(&created), &on(&["m1"]), &fields),
                Plan::Nothing
            );
            // Patched: rescheduled, other fields, new content, all at once.
            for (required_by, new_fields, object) in [
                (on(&["m2"]), fields.clone(), obj.clone()),
                (on(&["m1"]), some_fields.clone(), obj.clone()),
                (on(&["m1"]), fields.clone(), object("u1", "9", "fp2")),
                (
                    on(&["m1", "m2"]),
                    AttachedFields::default(),
                    object("u1", "9", "fp2"),
                ),
            ] {
                let decision = plan(&dep, Some(&object), Some(&created), &required_by, &new_fields);
                if decision == Plan::Nothing {
                    continue;
                }
                patches += 1;
                let (_, patched) = written(&dep, Some(&stored), decision);
                assert_eq!(
                    plan(&dep, Some(&object), Some(&patched), &required_by, &new_fields),
                    Plan::Nothing,
                    "{required_by:?} {new_fields:?} {object:?}"
                );
            }
        }
        assert_eq!(patches, 11, "every case but one changes something");
        // A claimed binding gets requiredBy only.
        let claimed = json!({
            "apiVersion": "work.karmada.io/v1alpha2",
            "kind": "ResourceBinding",
            "metadata": {
                "name": BindingKey::attached_to(&dep).name,
                "namespace": "default",
                "annotations": {flotilla_api::well_known::PROPAGATION_POLICY_NAME_ANNOTATION: "own"},
            },
            "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg"}},
        });
        let view = BindingView::of_resource_binding(&serde_json::from_value(claimed.clone()).unwrap());
        let decision = plan(&dep, Some(&obj), Some(&view), &on(&["m1"]), &fields());
        let (_, patched) = written(&dep, Some(&claimed), decision);
        assert!(patched.claimed);
        assert_eq!(
            plan(&dep, Some(&obj), Some(&patched), &on(&["m1"]), &fields()),
            Plan::Nothing
        );
    }

    #[test]
    fn attached_only_bindings_are_deleted_when_nothing_requires_them() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let existing = attached(&dep, required.clone(), "u1", "5", "fp1");
        let obj = object("u1", "5", "fp1");
        assert!(matches!(
            plan(&dep, Some(&obj), Some(&existing), &[], &fields()),
            Plan::Delete { .. }
        ));
        // Object gone (the garbage collector would delete it too) or re-created (stale owner).
        assert!(matches!(
            plan(&dep, None, Some(&existing), &required, &fields()),
            Plan::Delete { .. }
        ));
        assert!(matches!(
            plan(
                &dep,
                Some(&object("u2", "7", "fp1")),
                Some(&existing),
                &required,
                &fields()
            ),
            Plan::Delete { .. }
        ));
        // An unclaimed binding with no requiredBy is not ours: never deleted.
        let stray = attached(&dep, vec![], "u1", "5", "fp1");
        assert_eq!(
            plan(&dep, Some(&obj), Some(&stray), &[], &fields()),
            Plan::Nothing
        );
    }

    #[test]
    fn claimed_bindings_get_required_by_only_and_are_never_deleted() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let mut own = attached(&dep, vec![], "u1", "5", "other-fp");
        own.claimed = true;
        own.conflict_resolution = Some(ConflictResolution::Overwrite);
        let obj = object("u1", "8", "fp1");
        assert_eq!(
            plan(&dep, Some(&obj), Some(&own), &required, &fields()),
            Plan::Patch(json!({"spec": {"requiredBy": serde_json::to_value(&required).unwrap()}}))
        );
        own.required_by = required.clone();
        assert_eq!(
            plan(&dep, Some(&obj), Some(&own), &required, &fields()),
            Plan::Nothing
        );
        assert_eq!(
            plan(&dep, Some(&obj), Some(&own), &[], &fields()),
            Plan::Patch(json!({"spec": {"requiredBy": null}}))
        );
        assert_eq!(
            plan(&dep, None, Some(&own), &[], &fields()),
            Plan::Patch(json!({"spec": {"requiredBy": null}}))
        );
    }

    #[test]
    fn deleting_bindings_are_waited_for() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let mut existing = attached(&dep, required.clone(), "u1", "5", "fp1");
        existing.deleting = true;
        let obj = object("u1", "5", "fp1");
        assert_eq!(
            plan(&dep, Some(&obj), Some(&existing), &required, &fields()),
            Plan::WaitForDeletion
        );
        assert_eq!(
            plan(&dep, Some(&obj), Some(&existing), &[], &fields()),
            Plan::Nothing
        );
    }

    #[test]
    fn a_binding_of_another_resource_is_left_alone() {
        let dep = cm("cfg");
        let required = desired_required_by(&dep, [&workload("web", &["m1"], &[cm("cfg")])]);
        let mut other = attached(&dep, vec![], "u1", "5", "fp1");
        other.resource.api_version = "example.io/v1".into();
        other.claimed = true;
        let obj = object("u1", "5", "fp1");
        assert!(matches!(
            plan(&dep, Some(&obj), Some(&other), &required, &fields()),
            Plan::NameTaken { .. }
        ));
        assert_eq!(
            plan(&dep, Some(&obj), Some(&other), &[], &fields()),
            Plan::Nothing
        );
        // Another version of the same group and kind is the same resource.
        let mut versioned = attached(&dep, required.clone(), "u1", "5", "fp1");
        versioned.resource.api_version = "v1".into();
        assert_eq!(
            plan(&dep, Some(&obj), Some(&versioned), &required, &fields()),
            Plan::Nothing
        );
    }

    #[test]
    fn conflict_condition_appears_and_clears() {
        let now = Timestamp::UNIX_EPOCH;
        let mut conditions = vec![];
        assert!(!set_conflict_condition(&mut conditions, &[], now));
        assert!(conditions.is_empty(), "no condition before any disagreement");
        assert!(set_conflict_condition(
            &mut conditions,
            &["a".into(), "b".into()],
            now
        ));
        assert_eq!(conditions[0].type_, DEPENDENCY_CONFLICT);
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason, REASON_DISAGREE);
        assert_eq!(conditions[0].message, "a; b");
        assert!(!set_conflict_condition(
            &mut conditions,
            &["a".into(), "b".into()],
            now
        ));
        assert!(set_conflict_condition(&mut conditions, &[], now));
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].reason, REASON_AGREE);
        assert!(!set_conflict_condition(&mut conditions, &[], now));
    }

    /// The cache-only check: settled exactly when a reconcile over the object as the binding
    /// records it would plan nothing and leave the conflict condition as it is.
    #[test]
    fn an_attached_binding_is_settled_when_the_caches_ask_for_nothing() {
        let dep = cm("cfg");
        let web = workload("web", &["m1"], &[cm("cfg")]);
        let required = desired_required_by(&dep, [&web]);
        let agreed = resolve(&[&web]);
        let existing = attached(&dep, required.clone(), "u1", "5", "fp1");
        assert!(settled(&dep, Some(&existing), &required, &agreed));

        // Nothing cached: settled only while nothing requires it (a create reads the object).
        assert!(settled(&dep, None, &[], &Resolution::default()));
        assert!(!settled(&dep, None, &required, &agreed));

        // The workload moved: requiredBy must be patched.
        let moved = desired_required_by(&dep, [&workload("web", &["m2"], &[cm("cfg")])]);
        assert!(!settled(&dep, Some(&existing), &moved, &agreed));
        // Nothing requires it any more: the attached-only binding is to be deleted.
        assert!(!settled(&dep, Some(&existing), &[], &Resolution::default()));
        // A field the workloads decide.
        let mut overwrite = web.clone();
        overwrite.conflict_resolution = Some(ConflictResolution::Overwrite);
        assert!(!settled(
            &dep,
            Some(&existing),
            &required,
            &resolve(&[&overwrite])
        ));
        // Being deleted while still required: wait for it.
        let mut deleting = existing.clone();
        deleting.deleting = true;
        assert!(!settled(&dep, Some(&deleting), &required, &agreed));
        // No fingerprint recorded: the object must be read to record one.
        let mut unrecorded = existing.clone();
        unrecorded.fingerprint = None;
        assert!(!settled(&dep, Some(&unrecorded), &required, &agreed));

        // The conflict condition: missing while the workloads disagree, then present.
        let mut other = workload("api", &["m1"], &[cm("cfg")]);
        other.conflict_resolution = Some(ConflictResolution::Overwrite);
        let both = desired_required_by(&dep, [&web, &other]);
        let disagreeing = resolve(&[&web, &other]);
        assert!(!disagreeing.disagreements.is_empty());
        let mut shared = attached(&dep, both.clone(), "u1", "5", "fp1");
        assert!(!settled(&dep, Some(&shared), &both, &disagreeing));
        set_conflict_condition(
            &mut shared.conditions,
            &disagreeing.disagreements,
            Timestamp::UNIX_EPOCH,
        );
        assert!(settled(&dep, Some(&shared), &both, &disagreeing));

        // A claimed binding: requiredBy only, no condition.
        let mut claimed = attached(&dep, required.clone(), "u1", "5", "fp1");
        claimed.claimed = true;
        claimed.conflict_resolution = Some(ConflictResolution::Overwrite);
        assert!(settled(&dep, Some(&claimed), &required, &disagreeing));
        assert!(!settled(&dep, Some(&claimed), &moved, &agreed));
    }

    // ----- merge_diff ---------------------------------------------------------------------

    #[test]
    fn merge_diff_cases() {
        let cases = [
            (json!({"a": 1}), json!({"a": 1}), None),
            (json!({"a": 1}), json!({"a": 2}), Some(json!({"a": 2}))),
            (json!({"a": 1}), json!({}), Some(json!({"a": null}))),
            (json!({"a": 1}), json!({"a": null}), Some(json!({"a": null}))),
            (json!({}), json!({"a": null}), None),
            (
                json!({"a": {"x": 1, "y": 2}}),
                json!({"a": {"x": 1}}),
                Some(json!({"a": {"y": null}})),
            ),
            (json!({"a": [1, 2]}), json!({"a": [2]}), Some(json!({"a": [2]}))),
            (
                json!({}),
                json!({"a": {"b": null, "c": 1}}),
                Some(json!({"a": {"c": 1}})),
            ),
            (
                json!({"a": 1}),
                json!({"a": {"b": 1}}),
                Some(json!({"a": {"b": 1}})),
            ),
            (json!(1), json!(2), Some(json!(2))),
            (json!(1), json!(1), None),
        ];
        for (current, desired, want) in cases {
            assert_eq!(merge_diff(&current, &desired), want, "{current} -> {desired}");
        }
    }
}
