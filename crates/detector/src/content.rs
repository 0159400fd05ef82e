//! A template's content, reduced to what the detector's decisions read: its fingerprint (did
//! the template change?) and its replicas and per-replica requirements (the binding's
//! `spec.replicas` / `spec.replicaRequirements`). Everything else the detector reads of a
//! template is metadata.
//!
//! The template caches keep metadata only: each object the watch delivers is reduced to its
//! [`TemplateContent`] (kept beside the cache, by template, with the resourceVersion it was
//! computed from) and its metadata. A reconcile uses the content whose resourceVersion is the
//! cached metadata's; when they differ (an event arrived between the two reads) it reads the
//! template from the API, as it does before every binding spec write anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use flotilla_interpreter::{InterpretError, ReplicaInfo};
use serde_json::{Map, Value};

use crate::keys::TemplateKey;

/// What the detector reads of a template's content.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateContent {
    /// `metadata.resourceVersion` of the object it was computed from.
    pub resource_version: Option<String>,
    /// The template fingerprint ([`crate::fingerprint`]).
    pub fingerprint: String,
    /// The interpreter's replicas and requirements, or why the template cannot be read.
    pub replicas: Result<Option<ReplicaInfo>, InterpretError>,
}

impl TemplateContent {
    /// The content of a whole template (JSON with `apiVersion` and `kind`).
    pub fn of(template: &Value) -> Self {
        Self {
            resource_version: template
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
            fingerprint: crate::fingerprint::fingerprint(template),
            replicas: flotilla_interpreter::replicas(template),
        }
    }
}

/// `apiVersion`, `kind` and `metadata` of a template: what the cache keeps.
pub fn metadata_only(template: &Value) -> Value {
    let mut kept = Map::new();
    for field in ["apiVersion", "kind", "metadata"] {
        if let Some(value) = template.get(field) {
            kept.insert(field.to_owned(), value.clone());
        }
    }
    Value::Object(kept)
}

/// The contents of the cached templates, by template.
#[derive(Debug, Default)]
pub struct Contents {
    by_key: Mutex<HashMap<TemplateKey, Arc<TemplateContent>>>,
}

impl Contents {
    /// Records the content of the template `key` as the watch delivered it.
    pub fn insert(&self, key: TemplateKey, content: TemplateContent) {
        self.lock().insert(key, Arc::new(content));
    }

    /// Forgets a deleted template.
    pub fn remove(&self, key: &TemplateKey) {
        self.lock().remove(key);
    }

    /// Forgets every template of a kind no longer watched.
    pub fn retain(&self, keep: impl Fn(&TemplateKey) -> bool) {
        self.lock().retain(|key, _| keep(key));
    }

    /// The content of `key` computed from `resource_version`, if that is what is recorded.
    pub fn get(&self, key: &TemplateKey, resource_version: Option<&str>) -> Option<Arc<TemplateContent>> {
        self.lock()
            .get(key)
            .filter(|c| resource_version.is_some() && c.resource_version.as_deref() == resource_version)
            .cloned()
    }

    /// How many templates have a recorded content.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no template has a recorded content.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TemplateKey, Arc<TemplateContent>>> {
        self.by_key.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::keys::Gvk;

    fn deployment(replicas: i64, rv: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": rv,
                         "labels": {"app": "web"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"readyReplicas": 1},
        })
    }

    fn key() -> TemplateKey {
        TemplateKey {
            gvk: Gvk::new("apps/v1", "Deployment"),
            namespace: Some("default".into()),
            name: "web".into(),
        }
    }

    #[test]
    fn content_is_the_fingerprint_and_the_replicas_of_the_whole_object() {
        let content = TemplateContent::of(&deployment(3, "7"));
        assert_eq!(content.resource_version.as_deref(), Some("7"));
        assert_eq!(
            content.fingerprint,
            crate::fingerprint::fingerprint(&deployment(3, "7"))
        );
        assert_eq!(content.replicas.as_ref().unwrap().as_ref().unwrap().replicas, 3);
        // The metadata alone has neither: that is why the content is kept beside it.
        let metadata = metadata_only(&deployment(3, "7"));
        assert_eq!(metadata["metadata"]["labels"]["app"], "web");
        assert!(metadata.get("spec").is_none() && metadata.get("status").is_none());
        assert_ne!(crate::fingerprint::fingerprint(&metadata), content.fingerprint);
        // A bad template: the interpreter's error is kept, named.
        let mut bad = deployment(3, "8");
        bad["spec"]["replicas"] = json!("three");
        assert!(TemplateContent::of(&bad).replicas.is_err());
    }

    #[test]
    fn content_is_used_only_for_the_resource_version_it_was_computed_from() {
        let contents = Contents::default();
        assert!(contents.get(&key(), Some("7")).is_none());
        contents.insert(key(), TemplateContent::of(&deployment(3, "7")));
        assert!(contents.get(&key(), Some("7")).is_some());
        assert!(contents.get(&key(), Some("8")).is_none(), "the cache moved on");
        assert!(contents.get(&key(), None).is_none());
        contents.insert(key(), TemplateContent::of(&deployment(4, "8")));
        assert!(contents.get(&key(), Some("7")).is_none());
        assert_eq!(contents.len(), 1);
        contents.retain(|k| k.gvk.kind != "Deployment");
        assert!(contents.is_empty());
        contents.insert(key(), TemplateContent::of(&deployment(3, "9")));
        contents.remove(&key());
        assert!(contents.is_empty());
    }
}
