//! Kubernetes Events (`events.k8s.io/v1`) published by the services.
//!
//! kube-runtime's `Recorder` folds every event with the same object, reason, action and type
//! into one Event series for six minutes, whatever its note: a cluster tainted, then a minute
//! later untainted, showed one event "added ..." with a count of 2, and the second change was
//! lost (as was every eviction of a binding after its first, every later override failure).
//! This recorder takes the same input but keys series by the note too, as client-go's event
//! correlator keys by message: the same event repeated is one Event with a growing
//! `series.count`; a different note is an Event of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};

/// How long a published event is remembered: a repeat within it extends its series.
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two events the same event (then one Event with a series).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    type_: &'static str,
    action: String,
    reason: String,
    note: Option<String>,
    regarding: [Option<String>; 5],
    related: Option<[Option<String>; 5]>,
}

fn reference_key(r: &ObjectReference) -> [Option<String>; 5] {
    [
        r.api_version.clone(),
        r.kind.clone(),
        r.namespace.clone(),
        r.name.clone(),
        r.uid.clone(),
    ]
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

fn key_of(event: &Event, regarding: &ObjectReference) -> Key {
    Key {
        type_: type_name(event.type_),
        action: event.action.clone(),
        reason: event.reason.clone(),
        note: event.note.clone(),
        regarding: reference_key(regarding),
        related: event.secondary.as_ref().map(reference_key),
    }
}

/// Publishes events; cheap to clone (clones share what was published).
#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    reporter: Reporter,
    published: Arc<Mutex<HashMap<Key, K8sEvent>>>,
}

impl Recorder {
    /// A recorder writing with `client` as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            published: Arc::default(),
        }
    }

    /// Publishes `event` about `regarding` (a cluster-scoped object's events go to `default`):
    /// a new Event, or the series of the same event published within the last six minutes.
    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = key_of(event, regarding);
        let namespace = regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        // Not held across the write: one slow event write must not hold up every other.
        let previous = {
            let mut published = self.published.lock().unwrap_or_else(|p| p.into_inner());
            published.retain(|_, e| last_seen(e).is_some_and(|t| t + SERIES_TTL > now));
            published.get(&key).cloned()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let written = match previous {
            Some(mut repeated) => {
                repeated.series = Some(EventSeries {
                    count: repeated.series.as_ref().map_or(2, |s| s.count + 1),
                    last_observed_time: MicroTime(now),
                });
                api.patch(
                    &repeated.metadata.name.clone().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(&repeated),
                )
                .await?;
                repeated
            }
            None => {
                let new = self.new_event(event, regarding, &namespace, now);
                api.create(&PostParams::default(), &new).await?;
                new
            }
        };
        self.published
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, written);
        Ok(())
    }

    fn new_event(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        namespace: &str,
        now: Timestamp,
    ) -> K8sEvent {
        let name = regarding.name.as_deref().unwrap_or(&self.reporter.controller);
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            type_: Some(type_name(event.type_).to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..Default::default()
        }
    }
}

fn last_seen(event: &K8sEvent) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: "TaintClusterSucceed".into(),
            note: Some(note.into()),
            action: "Taint".into(),
            secondary: None,
        }
    }

    fn cluster(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("cluster.karmada.io/v1alpha1".into()),
            kind: Some("Cluster".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    #[test]
    fn the_note_is_part_of_what_makes_an_event_the_same() {
        let added = key_of(&event("added {x:NoSchedule}"), &cluster("member1"));
        assert_eq!(added, key_of(&event("added {x:NoSchedule}"), &cluster("member1")));
        assert_ne!(
            added,
            key_of(&event("removed {x:NoSchedule}"), &cluster("member1"))
        );
        assert_ne!(added, key_of(&event("added {x:NoSchedule}"), &cluster("member2")));
        let mut warning = event("added {x:NoSchedule}");
        warning.type_ = EventType::Warning;
        assert_ne!(added, key_of(&warning, &cluster("member1")));
        let mut related = event("added {x:NoSchedule}");
        related.secondary = Some(cluster("member2"));
        assert_ne!(added, key_of(&related, &cluster("member1")));
    }

    #[test]
    fn a_series_is_remembered_from_its_last_observation() {
        let now = Timestamp::now();
        let mut e = K8sEvent {
            event_time: Some(MicroTime(now - SignedDuration::from_mins(10))),
            ..Default::default()
        };
        assert_eq!(last_seen(&e), Some(now - SignedDuration::from_mins(10)));
        e.series = Some(EventSeries {
            count: 3,
            last_observed_time: MicroTime(now),
        });
        assert_eq!(last_seen(&e), Some(now));
        assert_eq!(last_seen(&K8sEvent::default()), None);
    }
}
