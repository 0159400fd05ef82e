//! A template as the detector's watch cache holds it ([`CachedTemplate`], ADR 0016): its
//! metadata, copied without `managedFields` and kubectl's last-applied annotation, and its
//! [`TemplateContent`], reduced to what the detector's decisions read of the rest: its
//! fingerprint (did the template change?) and its replicas and per-replica requirements (the
//! binding's `spec.replicas` / `spec.replicaRequirements`).
//!
//! Both are taken from the same delivered object, so the content is always the cached
//! metadata's; a template is read whole from the API only before a binding spec write (see
//! [`crate::controller::needs_confirmation`]).

use flotilla_interpreter::{InterpretError, ReplicaInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde_json::{Map, Value};

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

/// A template in the detector's watch cache.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedTemplate {
    /// Its metadata, without `managedFields` and [`LAST_APPLIED_ANNOTATION`].
    pub metadata: ObjectMeta,
    /// Its content, computed from the whole object the metadata was copied from.
    pub content: TemplateContent,
}

impl CachedTemplate {
    /// The cached form of a template of kind `gvk` as the watch delivered it. The metadata is
    /// copied, not moved out of the object: most of what the watch delivers is not kept, and
    /// the copy's allocations are made together instead of staying scattered among the freed
    /// ones (ADR 0016).
    pub fn of(gvk: &Gvk, mut object: DynamicObject) -> Self {
        // The fingerprint leaves managedFields out; serialising them would be wasted work.
        object.metadata.managed_fields = None;
        let content = TemplateContent::of(&crate::api::template_json(&object, gvk));
        if let Some(annotations) = object.metadata.annotations.as_mut() {
            annotations.remove(LAST_APPLIED_ANNOTATION);
        }
        Self {
            metadata: object.metadata.clone(),
            content,
        }
    }

    /// Its key.
    pub fn key(&self, gvk: &Gvk) -> TemplateKey {
        TemplateKey::of(gvk, &self.metadata)
    }

    /// `apiVersion`, `kind` and `metadata` as JSON: what the planner reads of the object
    /// (its content is [`CachedTemplate::content`]).
    pub fn json(&self, gvk: &Gvk) -> Value {
        let mut object = Map::new();
        object.insert("apiVersion".into(), Value::String(gvk.api_version.clone()));
        object.insert("kind".into(), Value::String(gvk.kind.clone()));
        object.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).unwrap_or(Value::Null),
        );
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
