//! Reflector-backed watches: one list+watch of a kind kept in a kube-runtime store, with each
//! change reported to the caller (which usually queues a key).
//!
//! Every service's controllers use [`run`], so they share three rules:
//! - managedFields never reach the caches (no flotilla controller reads them, and they can be as
//!   large as the object itself, e.g. a Work's manifests);
//! - a failed watch is retried with kube-runtime's default backoff, and logged once per failure
//!   episode instead of once per retry;
//! - a handler never hears of an object before the store holds it. The reflector publishes a
//!   list's (or relist's) objects only when the list completes, so a worker that looked one of
//!   them up earlier would find nothing and drop the key. The objects of a list are therefore
//!   reported after it completes, followed by [`Change::Synced`]; objects a relist no longer
//!   holds (deleted while the watch was down, also when created again under the same name: the
//!   uid tells) are reported as [`Change::Deleted`] first.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// What a watch reports to its handler.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// The object was created or changed, or listed (then reported once the list completed).
    Applied(&'a K),
    /// The object was deleted, or a relist no longer holds it; it is gone from the store.
    Deleted(&'a K),
    /// A list (the initial one or a relist) completed and each of its objects was reported.
    Synced,
}

impl<'a, K> Change<'a, K> {
    /// The object applied or deleted; `None` for [`Change::Synced`].
    pub fn object(&self) -> Option<&'a K> {
        match self {
            Change::Applied(object) | Change::Deleted(object) => Some(object),
            Change::Synced => None,
        }
    }
}

/// Keeps `writer`'s store in sync with `api` forever, calling `handle` for every change after
/// the store has applied it. Runs until the future is dropped.
pub async fn run<K, F>(api: Api<K>, writer: Writer<K>, handle: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
    F: FnMut(Change<'_, K>) + Send,
{
    run_trimmed(api, writer, |_| {}, handle).await;
}

/// [`run`], with `trim` applied to every object before the store and the handler see it (to
/// keep out of the cache what the caller never reads from it).
pub async fn run_trimmed<K, T, F>(api: Api<K>, writer: Writer<K>, mut trim: T, mut handle: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
    T: FnMut(&mut K) + Send,
    F: FnMut(Change<'_, K>) + Send,
{
    let reader = writer.as_reader();
    let stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |object| {
            kube::ResourceExt::managed_fields_mut(object).clear();
            trim(object);
        });
    let stream = logged(reflector::reflector(writer, stream));
    futures::pin_mut!(stream);
    // While a list runs: what the store held before it.
    let mut listing: Option<Vec<Arc<K>>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Event::Apply(object) => handle(Change::Applied(&object)),
            Event::Delete(object) => handle(Change::Deleted(&object)),
            Event::Init => listing = Some(reader.state()),
            // Reported when the list completes (the store does not hold it yet).
            Event::InitApply(_) => {}
            Event::InitDone => {
                let before = listing.take().unwrap_or_default();
                let now = reader.state();
                let listed: HashSet<Identity<'_>> = now.iter().map(|o| identity(o.as_ref())).collect();
                for gone in before.iter().filter(|o| !listed.contains(&identity(o.as_ref()))) {
                    handle(Change::Deleted(gone));
                }
                for object in &now {
                    handle(Change::Applied(object));
                }
                handle(Change::Synced);
            }
        }
    }
}

/// The events of a watch stream; a failed watch (retried by the stream's backoff) is logged once
/// per failure episode instead of once per retry, and its recovery once.
pub(crate) fn logged<K>(
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>>,
) -> impl Stream<Item = Event<K>> {
    let mut failing: Option<String> = None;
    stream.filter_map(move |event| {
        let event = match event {
            Ok(event) => {
                if failing.take().is_some() {
                    tracing::info!("watch recovered");
                }
                Some(event)
            }
            Err(error) => {
                let message = error.to_string();
                if failing.as_deref() != Some(message.as_str()) {
                    tracing::warn!(error = %message, "watch failed; retrying with backoff");
                    failing = Some(message);
                }
                None
            }
        };
        futures::future::ready(event)
    })
}

/// Namespace, name and uid: an object deleted and created again under its name while the watch
/// was down is another object (reported deleted, then applied).
type Identity<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);

fn identity<K: Resource>(object: &K) -> Identity<'_> {
    let meta = object.meta();
    (
        meta.namespace.as_deref(),
        meta.name.as_deref(),
        meta.uid.as_deref(),
    )
}
