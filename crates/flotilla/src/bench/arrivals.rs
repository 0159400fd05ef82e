//! Watching member clusters: when each object first arrived, which objects are present now,
//! and how many writes the members saw (creates, spec changes, deletes). Arrival times come
//! from watch events, not polling, so a measurement is not quantised by a poll interval.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::Notify;

/// The kinds the bench watches on members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// apps/v1 Deployment.
    Deployment,
    /// v1 ConfigMap.
    ConfigMap,
}

/// One member object: (member index, kind, namespace, name).
pub type Key = (usize, Kind, String, String);

/// Write counters of the members (for "nothing was written" checks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    /// Objects that appeared.
    pub creates: u64,
    /// Spec changes (`metadata.generation` moved) of objects already present.
    pub spec_changes: u64,
    /// Objects that disappeared.
    pub deletes: u64,
}

impl Writes {
    /// All writes.
    pub fn total(&self) -> u64 {
        self.creates + self.spec_changes + self.deletes
    }
}

#[derive(Default)]
struct State {
    first_seen: HashMap<Key, Instant>,
    /// Present objects and their generation.
    present: HashMap<Key, i64>,
    /// Present objects per (member, kind, namespace), kept with `present`.
    counts: HashMap<(usize, Kind, String), usize>,
    /// Writes per (member, namespace).
    writes: BTreeMap<(usize, String), Writes>,
    /// Watches that completed their initial list.
    synced: BTreeSet<(usize, Kind, String)>,
    /// Keys seen since the current (re)list started, per watch.
    relisting: BTreeMap<(usize, Kind, String), BTreeSet<String>>,
}

/// Watches Deployments and ConfigMaps of some namespaces on every member.
#[derive(Clone)]
pub struct Arrivals {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Default for Arrivals {
    fn default() -> Self {
        Self::new()
    }
}

impl Arrivals {
    /// An empty tracker.
    pub fn new() -> Arrivals {
        Arrivals {
            state: Arc::default(),
            changed: Arc::new(Notify::new()),
            tasks: Arc::default(),
        }
    }

    /// Starts watching `kinds` in `namespace` on every member (index = position in `members`),
    /// tracking only objects whose name starts with `prefix` (members hold other objects, such
    /// as `kube-root-ca.crt`).
    pub fn watch(&self, members: &[Client], namespace: &str, kinds: &[Kind], prefix: &str) {
        for (member, client) in members.iter().enumerate() {
            for kind in kinds {
                let task = match kind {
                    Kind::Deployment => {
                        let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
                        tokio::spawn(run_watch(
                            self.clone(),
                            api,
                            (member, *kind, namespace.to_owned()),
                            prefix.to_owned(),
                        ))
                    }
                    Kind::ConfigMap => {
                        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
                        tokio::spawn(run_watch(
                            self.clone(),
                            api,
                            (member, *kind, namespace.to_owned()),
                            prefix.to_owned(),
                        ))
                    }
                };
                self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(task);
            }
        }
    }

    /// Waits until `check` holds for the current state, or `timeout` passes; returns whether it
    /// held.
    pub async fn wait(&self, timeout: Duration, check: impl Fn(&View<'_>) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.with(|view| check(view)) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.with(|view| check(view));
            }
        }
    }

    /// Runs `f` on a consistent view of the state.
    pub fn with<T>(&self, f: impl FnOnce(&View<'_>) -> T) -> T {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&View { state: &state })
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut state);
        }
        self.changed.notify_waiters();
    }

    /// Stops every watch.
    pub fn stop(&self) {
        for task in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
    }
}

/// A read-only view of what the watches saw.
pub struct View<'a> {
    state: &'a State,
}

impl View<'_> {
    /// Whether every watch of `namespace` completed its initial list (`watches` of them).
    pub fn synced(&self, namespace: &str, watches: usize) -> bool {
        self.state
            .synced
            .iter()
            .filter(|(_, _, ns)| ns == namespace)
            .count()
            >= watches
    }

    /// Whether the object is present in `member`.
    pub fn present(&self, member: usize, kind: Kind, namespace: &str, name: &str) -> bool {
        self.state
            .present
            .contains_key(&(member, kind, namespace.to_owned(), name.to_owned()))
    }

    /// When the object was first seen in `member`.
    pub fn first_seen(&self, member: usize, kind: Kind, namespace: &str, name: &str) -> Option<Instant> {
        self.state
            .first_seen
            .get(&(member, kind, namespace.to_owned(), name.to_owned()))
            .copied()
    }

    /// How many objects of `kind` in `namespace` are present in `member`.
    pub fn count(&self, member: usize, kind: Kind, namespace: &str) -> usize {
        self.state
            .counts
            .get(&(member, kind, namespace.to_owned()))
            .copied()
            .unwrap_or_default()
    }

    /// The names of objects of `kind` in `namespace` present in `member`.
    pub fn names(&self, member: usize, kind: Kind, namespace: &str) -> BTreeSet<String> {
        self.state
            .present
            .keys()
            .filter(|(m, k, ns, _)| *m == member && *k == kind && ns == namespace)
            .map(|(_, _, _, name)| name.clone())
            .collect()
    }

    /// The writes `member` saw in `namespace` so far.
    pub fn writes(&self, member: usize, namespace: &str) -> Writes {
        self.state
            .writes
            .get(&(member, namespace.to_owned()))
            .copied()
            .unwrap_or_default()
    }

    /// The latest first-arrival among `keys`, if all of them arrived.
    pub fn last_arrival<'k>(&self, keys: impl IntoIterator<Item = &'k Key>) -> Option<Instant> {
        let mut last: Option<Instant> = None;
        for key in keys {
            let seen = *self.state.first_seen.get(key)?;
            last = Some(last.map_or(seen, |l| l.max(seen)));
        }
        last
    }
}

/// How soon an observer's failed watch of a member is retried.
const OBSERVER_RETRY: Duration = Duration::from_millis(250);

/// The observers' watch backoff: [`OBSERVER_RETRY`] after every failure.
struct ObserverRetry;

impl Iterator for ObserverRetry {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(OBSERVER_RETRY)
    }
}

impl kube::runtime::utils::Backoff for ObserverRetry {
    fn reset(&mut self) {}
}

async fn run_watch<K>(arrivals: Arrivals, api: Api<K>, watch_key: (usize, Kind, String), prefix: String)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let (member, kind, namespace) = watch_key.clone();
    // Without a backoff a failing watch (a member that is down) retries at once, forever: a
    // busy loop that burnt a core during member outages and, never yielding, kept the runtime
    // from shutting down after an interrupted run. Not kube's default backoff either: it
    // doubles up to 30 s, so after a member outage this observer saw the member again up to
    // 30 s after it was back, and the soak's convergence time measured the observer. A refused
    // connection every quarter of a second costs nothing.
    let mut stream = watcher(api, watcher::Config::default())
        .backoff(ObserverRetry)
        .boxed();
    while let Some(event) = stream.next().await {
        let now = Instant::now();
        let Ok(event) = event else {
            // The watcher retries by itself, with the backoff above; a member that is down
            // shows as errors here until it is back.
            continue;
        };
        match event {
            watcher::Event::Init => arrivals.update(|s| {
                s.relisting.insert(watch_key.clone(), BTreeSet::new());
            }),
            watcher::Event::InitApply(object) => {
                let (name, generation) = identity(&object);
                if !name.starts_with(&prefix) {
                    continue;
                }
                arrivals.update(|s| {
                    s.relisting
                        .entry(watch_key.clone())
                        .or_default()
                        .insert(name.clone());
                    applied(s, (member, kind, namespace.clone(), name), generation, now);
                });
            }
            watcher::Event::InitDone => arrivals.update(|s| {
                let listed = s.relisting.remove(&watch_key).unwrap_or_default();
                let gone: Vec<Key> = s
                    .present
                    .keys()
                    .filter(|(m, k, ns, name)| {
                        *m == member && *k == kind && *ns == namespace && !listed.contains(name)
                    })
                    .cloned()
                    .collect();
                for key in gone {
                    deleted(s, &key);
                }
                s.synced.insert(watch_key.clone());
            }),
            watcher::Event::Apply(object) => {
                let (name, generation) = identity(&object);
                if !name.starts_with(&prefix) {
                    continue;
                }
                arrivals.update(|s| applied(s, (member, kind, namespace.clone(), name), generation, now));
            }
            watcher::Event::Delete(object) => {
                let (name, _) = identity(&object);
                arrivals.update(|s| deleted(s, &(member, kind, namespace.clone(), name)));
            }
        }
    }
}

fn identity<K: Resource>(object: &K) -> (String, i64) {
    let meta = object.meta();
    (
        meta.name.clone().unwrap_or_default(),
        meta.generation.unwrap_or_default(),
    )
}

fn applied(state: &mut State, key: Key, generation: i64, now: Instant) {
    let writes_key = (key.0, key.2.clone());
    match state.present.insert(key.clone(), generation) {
        None => {
            *state.counts.entry((key.0, key.1, key.2.clone())).or_default() += 1;
            state.first_seen.entry(key).or_insert(now);
            state.writes.entry(writes_key).or_default().creates += 1;
        }
        Some(previous) if previous != generation => {
            state.writes.entry(writes_key).or_default().spec_changes += 1;
        }
        Some(_) => {}
    }
}

fn deleted(state: &mut State, key: &Key) {
    if state.present.remove(key).is_some() {
        if let Some(count) = state.counts.get_mut(&(key.0, key.1, key.2.clone())) {
            *count = count.saturating_sub(1);
        }
        state.writes.entry((key.0, key.2.clone())).or_default().deletes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(member: usize, name: &str) -> Key {
        (member, Kind::Deployment, "ns".to_owned(), name.to_owned())
    }

    #[test]
    fn counts_creates_spec_changes_and_deletes() {
        let mut state = State::default();
        let t0 = Instant::now();
        applied(&mut state, key(0, "a"), 1, t0);
        // A status-only update keeps the generation: not a write of ours.
        applied(&mut state, key(0, "a"), 1, t0 + Duration::from_millis(5));
        applied(&mut state, key(0, "a"), 2, t0 + Duration::from_millis(9));
        deleted(&mut state, &key(0, "a"));
        deleted(&mut state, &key(0, "a"));
        applied(&mut state, key(1, "a"), 1, t0);
        let view = View { state: &state };
        assert_eq!(
            view.writes(0, "ns"),
            Writes {
                creates: 1,
                spec_changes: 1,
                deletes: 1
            }
        );
        assert_eq!(view.writes(1, "ns").total(), 1);
        assert!(!view.present(0, Kind::Deployment, "ns", "a"));
        assert!(view.present(1, Kind::Deployment, "ns", "a"));
        assert_eq!(view.count(0, Kind::Deployment, "ns"), 0);
        assert_eq!(view.count(1, Kind::Deployment, "ns"), 1);
        // The first arrival is kept even after a delete and re-create.
        assert_eq!(view.first_seen(0, Kind::Deployment, "ns", "a"), Some(t0));
    }

    #[test]
    fn last_arrival_needs_every_key() {
        let mut state = State::default();
        let t0 = Instant::now();
        applied(&mut state, key(0, "a"), 1, t0);
        applied(&mut state, key(1, "a"), 1, t0 + Duration::from_millis(7));
        let view = View { state: &state };
        let both = [key(0, "a"), key(1, "a")];
        assert_eq!(view.last_arrival(&both), Some(t0 + Duration::from_millis(7)));
        let missing = [key(0, "a"), key(2, "a")];
        assert_eq!(view.last_arrival(&missing), None);
    }
}
