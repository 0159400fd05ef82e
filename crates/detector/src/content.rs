//! A template as the detector's watch cache holds it ([`CachedTemplate`], ADR 0016, ADR 0019):
//! its name, namespace and policy claim as fields, the rest of its metadata (without
//! `managedFields` and kubectl's last-applied annotation) as a packed record, and its
//! [`TemplateContent`], reduced to what the detector's decisions read of the rest: its
//! fingerprint (did the template change?) and its replicas and per-replica requirements (the
//! binding's `spec.replicas` / `spec.replicaRequirements`).
//!
//! All of it is taken from the same delivered object, so the content is always the cached
//! metadata's; a template is read whole from the API only before a binding spec write (see
//! [`crate::controller::needs_confirmation`]).

use std::sync::Arc;

use flotilla_interpreter::{InterpretError, ReplicaInfo};
use flotilla_runtime::intern::Interner;
use flotilla_runtime::packed::{Codec, Packed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde_json::{Map, Value};

use crate::claim::Claim;
use crate::keys::{Gvk, TemplateKey};

/// kubectl's client-side apply record: as large as the template, never read by the detector
/// (the content's fingerprint is taken before the cache drops it).
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the detector reads of a template's content.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateContent {
    /// The template fingerprint ([`crate::fingerprint`]).
    pub fingerprint: String,
    /// The interpreter's replicas and requirements, or why the template cannot be read.
    pub replicas: Result<Option<ReplicaInfo>, InterpretError>,
}

impl TemplateContent {
    /// The content of a whole template (JSON with `apiVersion` and `kind`).
    pub fn of(template: &Value) -> Self {
        Self {
            fingerprint: crate::fingerprint::fingerprint(template),
            replicas: flotilla_interpreter::replicas(template),
        }
    }
}

/// The codec of the templates' metadata records.
static METADATA: Codec = Codec::new();
/// Claims, shared by the templates one policy claims.
static CLAIMS: Interner<Claim> = Interner::new();

/// A template in the detector's watch cache.
///
/// Typed, a template's metadata took about 1 KiB even for a few labels and annotations (each
/// map's first B-tree node has room for eleven pairs); packed against the templates before it,
/// a tenth of that. What is read of every template on every event or policy change (its key and
/// claim) stays a field; the rest is read when the template is planned.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedTemplate {
    /// `metadata.namespace`, a shared copy ([`crate::keys::shared`]); `None` for a
    /// cluster-scoped template.
    namespace: Option<Arc<str>>,
    /// `metadata.name`, the copy the template's keys share.
    name: Arc<str>,
    /// The policy claim its labels and annotations carry ([`Claim::read_metadata`]).
    claim: Option<Arc<Claim>>,
    /// Its metadata, without `managedFields` and [`LAST_APPLIED_ANNOTATION`], packed.
    metadata: Packed,
    /// Its content, computed from the whole object the metadata was taken from.
    pub content: TemplateContent,
}

impl flotilla_runtime::cache::Keyed for CachedTemplate {
    type Key = flotilla_runtime::cache::InValue;

    fn object_key(&self) -> Option<(&str, &str)> {
        Some((self.namespace.as_deref().unwrap_or_default(), &self.name))
    }
}

impl CachedTemplate {
    /// The cached form of a template of kind `gvk` as the watch delivered it.
    pub fn of(gvk: &Gvk, mut object: DynamicObject) -> Self {
        // The fingerprint leaves managedFields out; serialising them would be wasted work.
        object.metadata.managed_fields = None;
        let content = TemplateContent::of(&crate::api::template_json(&object, gvk));
        let metadata = &mut object.metadata;
        if let Some(annotations) = metadata.annotations.as_mut() {
            annotations.remove(LAST_APPLIED_ANNOTATION);
        }
        Self {
            namespace: metadata
                .namespace
                .as_deref()
                .filter(|ns| !ns.is_empty())
                .map(crate::keys::shared),
            name: metadata.name.as_deref().unwrap_or_default().into(),
            claim: Claim::read_metadata(metadata).map(|claim| CLAIMS.intern_value(claim)),
            metadata: METADATA.pack(metadata),
            content,
        }
    }

    /// Its key.
    pub fn key(&self, gvk: &Gvk) -> TemplateKey {
        TemplateKey {
            gvk: gvk.clone(),
            namespace: self.namespace.clone(),
            name: Arc::clone(&self.name),
        }
    }

    /// `metadata.namespace`; `None` for a cluster-scoped template.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The policy claim the template carries.
    pub fn claim(&self) -> Option<&Claim> {
        self.claim.as_deref()
    }

    /// Its metadata, read back (without `managedFields` and [`LAST_APPLIED_ANNOTATION`]).
    pub fn metadata(&self) -> ObjectMeta {
        METADATA.unpack(&self.metadata)
    }

    /// `apiVersion`, `kind` and `metadata` as JSON: what the planner reads of the object
    /// (its content is [`CachedTemplate::content`]).
    pub fn json(&self, gvk: &Gvk) -> Value {
        let mut object = Map::new();
        object.insert("apiVersion".into(), Value::String(gvk.api_version.to_string()));
        object.insert("kind".into(), Value::String(gvk.kind.to_string()));
        object.insert("metadata".into(), METADATA.unpack::<Value>(&self.metadata));
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(replicas: i64, rv: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": rv,
                "labels": {"app": "web"},
                "annotations": {"note": "kept", LAST_APPLIED_ANNOTATION: "{\"big\":true}"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"readyReplicas": 1},
        })
    }

    fn cached(template: &Value) -> CachedTemplate {
        CachedTemplate::of(
            &Gvk::new("apps/v1", "Deployment"),
            serde_json::from_value(template.clone()).unwrap(),
        )
    }

    #[test]
    fn content_is_the_fingerprint_and_the_replicas_of_the_whole_object() {
        let content = TemplateContent::of(&deployment(3, "7"));
        assert_eq!(
            content.fingerprint,
            crate::fingerprint::fingerprint(&deployment(3, "7"))
        );
        assert_eq!(content.replicas.as_ref().unwrap().as_ref().unwrap().replicas, 3);
        // A bad template: the interpreter's error is kept, named.
        let mut bad = deployment(3, "8");
        bad["spec"]["replicas"] = json!("three");
        assert!(TemplateContent::of(&bad).replicas.is_err());
    }

    #[test]
    fn the_cache_keeps_metadata_and_the_content_of_the_same_object() {
        let template = deployment(3, "7");
        let entry = cached(&template);
        // The content is the whole object's, last-applied annotation included (it is user
        // content as far as the fingerprint goes), whatever the cache keeps of the metadata.
        assert_eq!(entry.content, TemplateContent::of(&template));
        let json = entry.json(&Gvk::new("apps/v1", "Deployment"));
        assert_eq!(json["apiVersion"], "apps/v1");
        assert_eq!(json["kind"], "Deployment");
        assert_eq!(json["metadata"]["uid"], "u-1");
        assert_eq!(json["metadata"]["resourceVersion"], "7");
        assert_eq!(json["metadata"]["labels"]["app"], "web");
        assert_eq!(json["metadata"]["annotations"]["note"], "kept");
        // What the detector never reads is not kept.
        assert!(
            json["metadata"]["annotations"]
                .get(LAST_APPLIED_ANNOTATION)
                .is_none()
        );
        assert!(json["metadata"].get("managedFields").is_none());
        assert!(json.get("spec").is_none() && json.get("status").is_none());
        // The typed metadata reads back the same.
        let metadata = entry.metadata();
        assert_eq!(metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(
            metadata.labels,
            Some([("app".to_owned(), "web".to_owned())].into())
        );
        assert_eq!(
            metadata.annotations,
            Some([("note".to_owned(), "kept".to_owned())].into())
        );
        assert_eq!(metadata.managed_fields, None);
        assert_eq!(entry.namespace(), Some("default"));
        assert_eq!(entry.claim(), None);
        // The metadata alone does not have the content's fingerprint: that is why it is kept.
        assert_ne!(crate::fingerprint::fingerprint(&json), entry.content.fingerprint);
        assert_eq!(
            entry.key(&Gvk::new("apps/v1", "Deployment")),
            TemplateKey {
                gvk: Gvk::new("apps/v1", "Deployment"),
                namespace: Some("default".into()),
                name: "web".into(),
            }
        );
    }

    #[test]
    fn the_claim_is_a_field_shared_by_the_templates_of_one_policy() {
        let claimed = |name: &str| {
            let mut template = deployment(3, "7");
            template["metadata"]["name"] = json!(name);
            template["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] = json!("uid-1");
            template["metadata"]["annotations"]["propagationpolicy.karmada.io/name"] = json!("pp");
            template["metadata"]["annotations"]["propagationpolicy.karmada.io/namespace"] = json!("default");
            cached(&template)
        };
        let (web, api) = (claimed("web"), claimed("api"));
        let claim = Claim::PropagationPolicy {
            namespace: "default".into(),
            name: "pp".into(),
            id: "uid-1".into(),
        };
        assert_eq!(web.claim(), Some(&claim));
        assert!(std::ptr::eq(web.claim().unwrap(), api.claim().unwrap()));
        assert_eq!(Claim::read_metadata(&web.metadata()), Some(claim));
        // A cluster-scoped template has no namespace.
        let mut cluster_scoped = deployment(1, "1");
        cluster_scoped["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        let entry = cached(&cluster_scoped);
        assert_eq!(entry.namespace(), None);
        assert_eq!(entry.key(&Gvk::new("apps/v1", "Deployment")).namespace, None);
    }

    #[test]
    fn a_change_of_content_or_of_the_last_applied_record_changes_the_fingerprint() {
        let before = cached(&deployment(3, "7"));
        assert_eq!(
            before.content,
            cached(&deployment(3, "8")).content,
            "a new resourceVersion alone is no change"
        );
        assert_ne!(before.content, cached(&deployment(4, "8")).content);
        let mut reapplied = deployment(3, "8");
        reapplied["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = json!("{\"big\":false}");
        assert_ne!(before.content.fingerprint, cached(&reapplied).content.fingerprint);
        let mut status = deployment(3, "9");
        status["status"]["readyReplicas"] = json!(3);
        assert_eq!(before.content, cached(&status).content, "status is not content");
    }
}
