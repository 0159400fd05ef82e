//! Kubernetes Events the detector reports (`core/v1`, so `kubectl describe` and
//! `kubectl get events` show them on any API server).
//!
//! One event per distinct (object, reason, message): the event's name is derived from them, so
//! a restarted detector reporting the same problem again finds the event already there instead
//! of adding a duplicate, and the process remembers what it reported to avoid rewriting it on
//! every reconcile.

use std::collections::HashSet;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

/// The component name events are reported under.
pub const COMPONENT: &str = "flotilla-detector";

/// Publishes Warning events, once per distinct problem.
pub struct EventRecorder {
    client: kube::Client,
    reported: Mutex<HashSet<String>>,
}

/// The name of the event about `regarding` with `reason` and `message`.
pub fn event_name(regarding: &ObjectReference, reason: &str, message: &str) -> String {
    let identity = serde_json::json!({
        "uid": regarding.uid, "kind": regarding.kind, "name": regarding.name,
        "namespace": regarding.namespace, "reason": reason, "message": message,
    });
    let name = regarding.name.as_deref().unwrap_or("object").to_lowercase();
    // Keep the name within 253 characters: at most 200 of the object's, then the hash.
    let prefix: String = name.chars().take(200).collect();
    format!("{prefix}.{}", crate::fingerprint::fingerprint(&identity))
}

impl EventRecorder {
    /// A recorder writing with `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            reported: Mutex::new(HashSet::new()),
        }
    }

    /// Reports a Warning about `regarding` (cluster-scoped objects' events go to `default`).
    /// Failures are logged, never returned: an event is a courtesy, not state.
    pub async fn warn(&self, regarding: ObjectReference, reason: &str, message: &str) {
        let name = event_name(&regarding, reason, message);
        {
            let mut reported = self.reported.lock().unwrap_or_else(|p| p.into_inner());
            if !reported.insert(name.clone()) {
                return;
            }
        }
        let namespace = regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let now = Time(Timestamp::now());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: regarding,
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some("Warning".to_owned()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(EventSource {
                component: Some(COMPONENT.to_owned()),
                host: None,
            }),
            reporting_component: Some(COMPONENT.to_owned()),
            reporting_instance: Some(COMPONENT.to_owned()),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, event = %name, "cannot record event");
                // Try again next time the problem is seen.
                self.reported
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("policy.karmada.io/v1alpha1".into()),
            kind: Some("PropagationPolicy".into()),
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some("u".into()),
            ..Default::default()
        }
    }

    #[test]
    fn names_are_stable_and_distinct() {
        let a = event_name(&reference("pp"), "InvalidPolicy", "spec.x: bad");
        assert_eq!(a, event_name(&reference("pp"), "InvalidPolicy", "spec.x: bad"));
        assert!(a.starts_with("pp."));
        assert_ne!(a, event_name(&reference("pp"), "InvalidPolicy", "spec.y: bad"));
        assert_ne!(a, event_name(&reference("other"), "InvalidPolicy", "spec.x: bad"));
        let long = event_name(&reference(&"x".repeat(300)), "R", "m");
        assert!(long.len() <= 253, "{}", long.len());
    }
}
