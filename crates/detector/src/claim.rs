//! Claim metadata: the labels and annotations that say which policy a template (and its
//! binding) belongs to, and merge patches that change only the keys the detector owns.
//!
//! The keys are Karmada's (`docs/architecture.md`, "Resource templates"): a PropagationPolicy
//! claim is the annotations `propagationpolicy.karmada.io/name` and `.../namespace` plus the
//! label `propagationpolicy.karmada.io/permanent-id`; a ClusterPropagationPolicy claim is the
//! annotation `clusterpropagationpolicy.karmada.io/name` plus the label
//! `clusterpropagationpolicy.karmada.io/permanent-id`. A claim is read only when complete, as
//! Karmada's `propagateResource` does.

use std::collections::BTreeMap;

use flotilla_api::well_known::{
    CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
    PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use crate::keys::{PolicyKey, PolicyKind};
use crate::matching::PolicyView;

/// Which policy claims an object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Claim {
    /// Claimed by a PropagationPolicy.
    PropagationPolicy {
        /// The policy's namespace.
        namespace: String,
        /// The policy's name.
        name: String,
        /// The policy's permanent id (uid).
        id: String,
    },
    /// Claimed by a ClusterPropagationPolicy.
    ClusterPropagationPolicy {
        /// The policy's name.
        name: String,
        /// The policy's permanent id (uid).
        id: String,
    },
}

impl Claim {
    /// The claim `policy` puts on the objects it claims.
    pub fn of(policy: &PolicyView) -> Self {
        match policy.key.kind {
            PolicyKind::PropagationPolicy => Claim::PropagationPolicy {
                namespace: policy.key.namespace.clone().unwrap_or_default(),
                name: policy.key.name.clone(),
                id: policy.uid.clone(),
            },
            PolicyKind::ClusterPropagationPolicy => Claim::ClusterPropagationPolicy {
                name: policy.key.name.clone(),
                id: policy.uid.clone(),
            },
        }
    }

    /// Reads the claim from an object's labels and annotations; a PropagationPolicy claim
    /// wins when (wrongly) both are present, as in Karmada.
    pub fn read(labels: &Map<String, Value>, annotations: &Map<String, Value>) -> Option<Self> {
        Self::read_with(
            |key| labels.get(key).and_then(Value::as_str),
            |key| annotations.get(key).and_then(Value::as_str),
        )
    }

    /// Reads the claim from typed metadata (a cached object's), without converting it to JSON.
    pub fn read_metadata(metadata: &ObjectMeta) -> Option<Self> {
        let labels = metadata.labels.as_ref();
        let annotations = metadata.annotations.as_ref();
        Self::read_with(
            |key| labels.and_then(|m| m.get(key)).map(String::as_str),
            |key| annotations.and_then(|m| m.get(key)).map(String::as_str),
        )
    }

    /// Whether this is the claim of the policy `key` with permanent id `uid`, compared in
    /// place (the policy counts ask this of every cached template).
    pub fn is_of(&self, key: &PolicyKey, uid: &str) -> bool {
        match self {
            Claim::PropagationPolicy { namespace, name, id } => {
                key.kind == PolicyKind::PropagationPolicy
                    && key.namespace.as_deref() == Some(namespace.as_str())
                    && key.name == *name
                    && id == uid
            }
            Claim::ClusterPropagationPolicy { name, id } => {
                key.kind == PolicyKind::ClusterPropagationPolicy && key.name == *name && id == uid
            }
        }
    }

    /// The claim from two lookups, one for labels and one for annotations.
    fn read_with<'a>(
        label: impl Fn(&str) -> Option<&'a str>,
        annotation: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<Self> {
        Some(match read_parts(label, annotation)? {
            ClaimParts::PropagationPolicy { namespace, name, id } => Claim::PropagationPolicy {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                id: id.to_owned(),
            },
            ClaimParts::ClusterPropagationPolicy { name, id } => Claim::ClusterPropagationPolicy {
                name: name.to_owned(),
                id: id.to_owned(),
            },
        })
    }

    /// Reads the claim of an object given as JSON.
    pub fn read_object(object: &Value) -> Option<Self> {
        let empty = Map::new();
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let annotations = object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        Self::read(labels, annotations)
    }

    /// The claiming policy's key.
    pub fn policy_key(&self) -> PolicyKey {
        match self {
            Claim::PropagationPolicy { namespace, name, .. } => PolicyKey::propagation(namespace, name),
            Claim::ClusterPropagationPolicy { name, .. } => PolicyKey::cluster(name),
        }
    }

    /// The claiming policy's permanent id.
    pub fn id(&self) -> &str {
        match self {
            Claim::PropagationPolicy { id, .. } | Claim::ClusterPropagationPolicy { id, .. } => id,
        }
    }
}

/// A claim as borrowed from an object's labels and annotations.
enum ClaimParts<'a> {
    PropagationPolicy {
        namespace: &'a str,
        name: &'a str,
        id: &'a str,
    },
    ClusterPropagationPolicy {
        name: &'a str,
        id: &'a str,
    },
}

/// Reads a claim from two lookups, one for labels and one for annotations; a PropagationPolicy
/// claim wins when (wrongly) both are present, as in Karmada.
fn read_parts<'a>(
    label: impl Fn(&str) -> Option<&'a str>,
    annotation: impl Fn(&str) -> Option<&'a str>,
) -> Option<ClaimParts<'a>> {
    let present = |value: Option<&'a str>| value.filter(|v| !v.is_empty());
    if let (Some(namespace), Some(name), Some(id)) = (
        present(annotation(PROPAGATION_POLICY_NAMESPACE_ANNOTATION)),
        present(annotation(PROPAGATION_POLICY_NAME_ANNOTATION)),
        present(label(PROPAGATION_POLICY_PERMANENT_ID_LABEL)),
    ) {
        return Some(ClaimParts::PropagationPolicy { namespace, name, id });
    }
    if let (Some(name), Some(id)) = (
        present(annotation(CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION)),
        present(label(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL)),
    ) {
        return Some(ClaimParts::ClusterPropagationPolicy { name, id });
    }
    None
}

/// Desired values of the metadata keys the detector owns on one object: `Some` sets a key,
/// `None` removes it. Keys not listed are left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedMetadata {
    /// Owned labels.
    pub labels: BTreeMap<&'static str, Option<String>>,
    /// Owned annotations.
    pub annotations: BTreeMap<&'static str, Option<String>>,
}

impl OwnedMetadata {
    /// The claim keys for `claim` (`None`: no claim): both kinds' keys are listed, so a claim
    /// moving between kinds removes the other kind's keys.
    pub fn claim(claim: Option<&Claim>) -> Self {
        let mut owned = Self::default();
        let (pp, cpp) = match claim {
            Some(Claim::PropagationPolicy { namespace, name, id }) => {
                (Some((namespace.clone(), name.clone(), id.clone())), None)
            }
            Some(Claim::ClusterPropagationPolicy { name, id }) => (None, Some((name.clone(), id.clone()))),
            None => (None, None),
        };
        owned.annotations.insert(
            PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
            pp.as_ref().map(|(ns, _, _)| ns.clone()),
        );
        owned.annotations.insert(
            PROPAGATION_POLICY_NAME_ANNOTATION,
            pp.as_ref().map(|(_, name, _)| name.clone()),
        );
        owned.labels.insert(
            PROPAGATION_POLICY_PERMANENT_ID_LABEL,
            pp.as_ref().map(|(_, _, id)| id.clone()),
        );
        owned.annotations.insert(
            CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION,
            cpp.as_ref().map(|(name, _)| name.clone()),
        );
        owned.labels.insert(
            CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
            cpp.as_ref().map(|(_, id)| id.clone()),
        );
        owned
    }

    /// Sets (or removes) one owned annotation.
    pub fn annotation(mut self, key: &'static str, value: Option<String>) -> Self {
        self.annotations.insert(key, value);
        self
    }

    /// The `metadata` merge patch that brings `object`'s owned keys to these values, or `None`
    /// when they already have them.
    pub fn patch_for(&self, object: &Value) -> Option<Map<String, Value>> {
        let mut metadata = Map::new();
        for (field, wanted) in [("labels", &self.labels), ("annotations", &self.annotations)] {
            let current = object
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_object);
            let mut changes = Map::new();
            for (key, value) in wanted {
                let now = current.and_then(|m| m.get(*key)).and_then(Value::as_str);
                if now != value.as_deref() {
                    changes.insert(
                        (*key).to_owned(),
                        value.as_ref().map_or(Value::Null, |v| Value::String(v.clone())),
                    );
                }
            }
            if !changes.is_empty() {
                metadata.insert(field.to_owned(), Value::Object(changes));
            }
        }
        (!metadata.is_empty()).then_some(metadata)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pp_claim() -> Claim {
        Claim::PropagationPolicy {
            namespace: "default".into(),
            name: "pp".into(),
            id: "uid-1".into(),
        }
    }

    fn cpp_claim() -> Claim {
        Claim::ClusterPropagationPolicy {
            name: "cpp".into(),
            id: "uid-2".into(),
        }
    }

    fn object(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "web", "labels": labels, "annotations": annotations}})
    }

    /// Reads the claim from JSON and from the typed metadata, which must agree.
    fn read(object: &Value) -> Option<Claim> {
        let metadata: ObjectMeta = serde_json::from_value(object["metadata"].clone()).unwrap();
        let claim = Claim::read_object(object);
        assert_eq!(Claim::read_metadata(&metadata), claim, "{object}");
        // The in-place comparison agrees: true for exactly the claim read, false for any other
        // policy key or id.
        let keys = [
            PolicyKey::propagation("default", "pp"),
            PolicyKey::propagation("other", "pp"),
            PolicyKey::propagation("default", "cpp"),
            PolicyKey::cluster("cpp"),
            PolicyKey::cluster("pp"),
        ];
        for key in &keys {
            for uid in ["uid-1", "uid-2", ""] {
                let expected = claim
                    .as_ref()
                    .is_some_and(|c| c.policy_key() == *key && c.id() == uid);
                assert_eq!(
                    claim.as_ref().is_some_and(|c| c.is_of(key, uid)),
                    expected,
                    "{object} {key:?} {uid}"
                );
            }
        }
        claim
    }

    #[test]
    fn reads_complete_claims_only() {
        let pp = object(
            json!({"propagationpolicy.karmada.io/permanent-id": "uid-1"}),
            json!({"propagationpolicy.karmada.io/name": "pp", "propagationpolicy.karmada.io/namespace": "default"}),
        );
        assert_eq!(read(&pp), Some(pp_claim()));
        let cpp = object(
            json!({"clusterpropagationpolicy.karmada.io/permanent-id": "uid-2"}),
            json!({"clusterpropagationpolicy.karmada.io/name": "cpp"}),
        );
        assert_eq!(read(&cpp), Some(cpp_claim()));
        // Missing id label, missing namespace, empty values: no claim.
        for incomplete in [
            object(
                json!({}),
                json!({"propagationpolicy.karmada.io/name": "pp", "propagationpolicy.karmada.io/namespace": "default"}),
            ),
            object(
                json!({"propagationpolicy.karmada.io/permanent-id": "uid-1"}),
                json!({"propagationpolicy.karmada.io/name": "pp"}),
            ),
            object(
                json!({"clusterpropagationpolicy.karmada.io/permanent-id": ""}),
                json!({"clusterpropagationpolicy.karmada.io/name": "cpp"}),
            ),
            json!({"metadata": {"name": "web"}}),
        ] {
            assert_eq!(read(&incomplete), None, "{incomplete}");
        }
        // Both present: the PropagationPolicy claim is read.
        let both = object(
            json!({"propagationpolicy.karmada.io/permanent-id": "uid-1", "clusterpropagationpolicy.karmada.io/permanent-id": "uid-2"}),
            json!({"propagationpolicy.karmada.io/name": "pp", "propagationpolicy.karmada.io/namespace": "default", "clusterpropagationpolicy.karmada.io/name": "cpp"}),
        );
        assert_eq!(read(&both), Some(pp_claim()));
        assert_eq!(pp_claim().policy_key(), PolicyKey::propagation("default", "pp"));
        assert_eq!(cpp_claim().policy_key(), PolicyKey::cluster("cpp"));
        assert_eq!(cpp_claim().id(), "uid-2");
    }

    #[test]
    fn claim_patch_sets_and_moves() {
        let bare = json!({"metadata": {"name": "web", "labels": {"app": "web"}}});
        let patch = OwnedMetadata::claim(Some(&pp_claim())).patch_for(&bare).unwrap();
        assert_eq!(
            Value::Object(patch),
            json!({
                "labels": {"propagationpolicy.karmada.io/permanent-id": "uid-1"},
                "annotations": {"propagationpolicy.karmada.io/name": "pp", "propagationpolicy.karmada.io/namespace": "default"},
            })
        );
        let claimed = object(
            json!({"app": "web", "propagationpolicy.karmada.io/permanent-id": "uid-1"}),
            json!({"propagationpolicy.karmada.io/name": "pp", "propagationpolicy.karmada.io/namespace": "default"}),
        );
        assert_eq!(OwnedMetadata::claim(Some(&pp_claim())).patch_for(&claimed), None);
        // PP -> CPP removes the PP keys and sets the CPP keys.
        let patch = OwnedMetadata::claim(Some(&cpp_claim()))
            .patch_for(&claimed)
            .unwrap();
        assert_eq!(
            Value::Object(patch),
            json!({
                "labels": {"propagationpolicy.karmada.io/permanent-id": null, "clusterpropagationpolicy.karmada.io/permanent-id": "uid-2"},
                "annotations": {"propagationpolicy.karmada.io/name": null, "propagationpolicy.karmada.io/namespace": null, "clusterpropagationpolicy.karmada.io/name": "cpp"},
            })
        );
        // Unclaim.
        let patch = OwnedMetadata::claim(None).patch_for(&claimed).unwrap();
        assert_eq!(
            Value::Object(patch),
            json!({
                "labels": {"propagationpolicy.karmada.io/permanent-id": null},
                "annotations": {"propagationpolicy.karmada.io/name": null, "propagationpolicy.karmada.io/namespace": null},
            })
        );
        assert_eq!(OwnedMetadata::claim(None).patch_for(&bare), None);
    }

    #[test]
    fn extra_annotations() {
        let bare = json!({"metadata": {"name": "web", "annotations": {"flotilla.io/lazy-baseline": "abc"}}});
        let owned = OwnedMetadata::default().annotation("flotilla.io/lazy-baseline", None);
        assert_eq!(
            owned.patch_for(&bare).map(Value::Object),
            Some(json!({"annotations": {"flotilla.io/lazy-baseline": null}}))
        );
        let owned = OwnedMetadata::default().annotation("flotilla.io/lazy-baseline", Some("abc".into()));
        assert_eq!(owned.patch_for(&bare), None);
    }
}
