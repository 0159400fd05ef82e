//! Compact watch caches: one list+watch of a kind whose objects are kept as a value of the
//! caller's own type, converted from each object as the watch delivers it.
//!
//! kube-runtime's reflector store keeps the API type itself, keyed by an `ObjectRef` that copies
//! the name, namespace, uid and resourceVersion out of the object: for a kind with a hundred
//! thousand objects (execution's Works at 10,000 templates x 5 members + namespaces) the key and
//! the inline `ObjectMeta` alone are about 1 KiB per object before any field is read. A
//! [`Cache`] keeps, per object, a 64-bit hash of the uid and an `Arc` of the converted value;
//! what the value holds is the caller's choice. A value that holds its object's namespace and
//! name says so ([`Keyed`], with [`InValue`]) and is found by them, and its table slot is the
//! hash and the `Arc` alone (16 bytes); for any other value ([`Beside`]) the cache keeps a
//! `"namespace/name"` key beside it (at 100,000 objects that key is ~6 MiB of allocations, and
//! its slot 32 bytes).
//!
//! [`run`] keeps a cache in sync with the same rules as [`crate::watch::run`]: a failed watch is
//! retried with backoff and logged once per episode; a handler never hears of an object before
//! the cache holds it (a list's objects are reported once the list completed, followed by
//! [`Update::Synced`]; objects a relist no longer holds, also when created again under the same
//! name, are reported deleted first). An update carries the value it replaced, so a handler can
//! tell what changed without keeping a copy of its own.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry as Slot;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// What [`run`] reports to its handler.
#[derive(Debug)]
pub enum Update<'a, V> {
    /// The object was created or changed, or listed (then reported once the list completed).
    /// `old` is the value it replaced: `None` for an object the cache did not hold (or held
    /// under another uid).
    Applied {
        /// The value replaced.
        old: Option<&'a V>,
        /// The value now cached.
        new: &'a V,
    },
    /// The object was deleted, or a relist no longer holds it; it is gone from the cache.
    Deleted(&'a V),
    /// A list (the initial one or a relist) completed and each of its objects was reported.
    Synced,
}

impl<'a, V> Update<'a, V> {
    /// The value applied or deleted; `None` for [`Update::Synced`].
    pub fn value(&self) -> Option<&'a V> {
        match self {
            Update::Applied { new, .. } => Some(new),
            Update::Deleted(value) => Some(value),
            Update::Synced => None,
        }
    }
}

/// A cached value that may hold the namespace and name of its object; a [`Cache`] then keeps
/// no key of its own for it.
pub trait Keyed {
    /// Where the cache keeps what finds the value: [`Beside`] it, or [`InValue`] (the value
    /// always holds its object's namespace and name: its table slot is then half the size).
    type Key: KeySlot;

    /// The object's namespace (`""` when cluster-scoped) and name, if the value holds them.
    /// The default, `None`, makes a [`Beside`] cache keep a key beside the value. A value
    /// answering with anything but its object's namespace and name gets a key kept too (the
    /// cache compares), so a wrong answer costs memory, never a wrong lookup. An [`InValue`]
    /// value must always answer with them.
    fn object_key(&self) -> Option<(&str, &str)> {
        None
    }
}

/// What a cache keeps beside a value to find it ([`Keyed::Key`]).
pub trait KeySlot: Send + Sync + 'static {
    /// The slot of an object whose key is `key` (`"namespace/name"`, or `"name"` when
    /// cluster-scoped); `held` tells whether its value's [`Keyed::object_key`] answers with it.
    fn keep(key: Box<str>, held: bool) -> Self;

    /// The key kept, if any (`None`: the value holds it).
    fn get(&self) -> Option<&str>;
}

/// The object's `"namespace/name"` (`"name"` when cluster-scoped), kept beside a value that does
/// not hold them (or does not answer with them).
#[derive(Debug)]
pub struct Beside(Option<Box<str>>);

impl KeySlot for Beside {
    fn keep(key: Box<str>, held: bool) -> Self {
        Self((!held).then_some(key))
    }

    fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// Nothing kept: the value holds its object's namespace and name, always (its
/// [`Keyed::object_key`] is built from the object's metadata).
#[derive(Debug)]
pub struct InValue;

impl KeySlot for InValue {
    fn keep(key: Box<str>, held: bool) -> Self {
        if !held {
            // A bug in the value's conversion: it is stored under what it answers, and found
            // by that.
            tracing::error!(
                object = %key,
                "a cached value does not hold its object's namespace and name; it is found by what it holds instead"
            );
            debug_assert!(held, "the cached value of {key} holds another key");
        }
        Self
    }

    fn get(&self) -> Option<&str> {
        None
    }
}

struct Entry<V: Keyed> {
    /// What finds the value besides the value itself.
    key: V::Key,
    uid: u64,
    value: Arc<V>,
}

impl<V: Keyed> Entry<V> {
    /// The object's namespace (`""` when cluster-scoped) and name.
    fn key(&self) -> (&str, &str) {
        match self.key.get() {
            Some(key) => split_key(key),
            None => self.value.object_key().unwrap_or_default(),
        }
    }
}

/// The objects of a cache by namespace and name. The hasher travels with the table: a completed
/// list replaces the cache's table, hasher and all.
struct Entries<V: Keyed> {
    table: HashTable<Entry<V>>,
    hasher: RandomState,
}

impl<V: Keyed> Entries<V> {
    fn new() -> Self {
        Self {
            table: HashTable::new(),
            hasher: RandomState::new(),
        }
    }

    fn hash(hasher: &RandomState, (namespace, name): (&str, &str)) -> u64 {
        let mut state = hasher.build_hasher();
        state.write(namespace.as_bytes());
        state.write_u8(b'/');
        state.write(name.as_bytes());
        state.finish()
    }

    fn get(&self, key: (&str, &str)) -> Option<&Entry<V>> {
        self.table
            .find(Self::hash(&self.hasher, key), |entry| entry.key() == key)
    }

    /// Stores `entry`; returns the entry it replaced.
    fn insert(&mut self, entry: Entry<V>) -> Option<Entry<V>> {
        let key = entry.key();
        let hasher = &self.hasher;
        match self.table.entry(
            Self::hash(hasher, key),
            |other| other.key() == key,
            |other| Self::hash(hasher, other.key()),
        ) {
            Slot::Occupied(mut slot) => Some(std::mem::replace(slot.get_mut(), entry)),
            Slot::Vacant(slot) => {
                slot.insert(entry);
                None
            }
        }
    }

    fn remove(&mut self, key: (&str, &str)) -> Option<Entry<V>> {
        self.table
            .find_entry(Self::hash(&self.hasher, key), |entry| entry.key() == key)
            .ok()
            .map(|slot| slot.remove().0)
    }
}

struct Shared<V: Keyed> {
    entries: RwLock<Entries<V>>,
    ready: tokio::sync::watch::Sender<bool>,
}

/// The reading half of a compact watch cache (cheap to clone; every clone reads the same cache).
pub struct Cache<V: Keyed> {
    shared: Arc<Shared<V>>,
}

impl<V: Keyed> Clone for Cache<V> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The writing half of a [`Cache`], consumed by [`run`].
pub struct CacheWriter<V: Keyed> {
    shared: Arc<Shared<V>>,
    /// While a list runs: the objects listed so far.
    listing: Option<Entries<V>>,
}

impl<V: Keyed> Cache<V> {
    /// An empty cache (not ready) and its writer.
    pub fn new() -> (Cache<V>, CacheWriter<V>) {
        let shared = Arc::new(Shared {
            entries: RwLock::new(Entries::new()),
            ready: tokio::sync::watch::Sender::new(false),
        });
        (
            Cache {
                shared: Arc::clone(&shared),
            },
            CacheWriter {
                shared,
                listing: None,
            },
        )
    }

    /// The value of the object `name` in `namespace` (`None` for a cluster-scoped kind).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<V>> {
        self.read()
            .get((namespace.unwrap_or_default(), name))
            .map(|entry| Arc::clone(&entry.value))
    }

    /// [`Cache::get`], only if the cached object has `uid` (not an earlier object of the same
    /// name, deleted since, whose deletion the watch has not delivered yet).
    pub fn get_of_uid(&self, namespace: Option<&str>, name: &str, uid: Option<&str>) -> Option<Arc<V>> {
        self.read()
            .get((namespace.unwrap_or_default(), name))
            .filter(|entry| entry.uid == uid_hash(uid))
            .map(|entry| Arc::clone(&entry.value))
    }

    /// Every value the cache holds, in no particular order.
    pub fn state(&self) -> Vec<Arc<V>> {
        self.read()
            .table
            .iter()
            .map(|entry| Arc::clone(&entry.value))
            .collect()
    }

    /// How many objects the cache holds.
    pub fn len(&self) -> usize {
        self.read().table.len()
    }

    /// Whether the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the initial list completed.
    pub fn is_ready(&self) -> bool {
        *self.shared.ready.borrow()
    }

    /// Waits until the initial list completed (any number of tasks may wait).
    pub async fn wait_until_ready(&self) {
        let mut ready = self.shared.ready.subscribe();
        // The sender lives in `shared`, which this cache holds: the wait cannot fail.
        let _ = ready.wait_for(|ready| *ready).await;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries<V>> {
        self.shared.read()
    }
}

impl<V: Keyed> Shared<V> {
    // A panicking writer leaves the map consistent (each write is one insert, removal or swap),
    // so a poisoned lock is used as it is.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries<V>> {
        self.entries.read().unwrap_or_else(|poison| poison.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries<V>> {
        self.entries.write().unwrap_or_else(|poison| poison.into_inner())
    }
}

/// The key a cache keeps for a value that does not hold its object's namespace and name:
/// `namespace/name`, or `name` for a cluster-scoped object.
fn stored_key(namespace: Option<&str>, name: &str) -> Box<str> {
    match namespace {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}").into(),
        _ => name.into(),
    }
}

/// The namespace (`""` when cluster-scoped) and name of a [`stored_key`] (names and namespaces
/// cannot contain `/`).
fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

fn uid_hash(uid: Option<&str>) -> u64 {
    let mut hasher = DefaultHasher::new();
    uid.hash(&mut hasher);
    hasher.finish()
}

/// Keeps `writer`'s cache in sync with `api` forever: each object the watch delivers is
/// converted by `convert` (the whole object lives only while its event is handled), stored,
/// then reported to `handle`. Runs until the future is dropped.
pub async fn run<K, V, C, F>(api: Api<K>, writer: CacheWriter<V>, mut convert: C, handle: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: Keyed,
    C: FnMut(K) -> V + Send,
    F: FnMut(Update<'_, V>) + Send,
{
    run_with_previous(api, writer, move |object, _| convert(object), handle).await;
}

/// [`run`] with `convert` given what the cache holds for the same object (the same namespace,
/// name and uid) when the event arrives, so that it can keep what cannot have changed (what a
/// `metadata.generation` covers, say) instead of computing it again.
pub async fn run_with_previous<K, V, C, F>(
    api: Api<K>,
    mut writer: CacheWriter<V>,
    mut convert: C,
    mut handle: F,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: Keyed,
    C: FnMut(K, Option<&V>) -> V + Send,
    F: FnMut(Update<'_, V>) + Send,
{
    let stream = crate::watch::logged(watcher::watcher(api, watcher::Config::default()).default_backoff());
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        writer.apply(event, &mut convert, &mut handle);
    }
}

impl<V: Keyed> CacheWriter<V> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries<V>> {
        self.shared.read()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries<V>> {
        self.shared.write()
    }

    /// Applies one watch event to the cache, then reports it.
    fn apply<K: Resource>(
        &mut self,
        event: Event<K>,
        convert: &mut impl FnMut(K, Option<&V>) -> V,
        handle: &mut impl FnMut(Update<'_, V>),
    ) {
        let shared = &self.shared;
        let mut entry = |object: K| -> Entry<V> {
            let meta = object.meta();
            let uid = uid_hash(meta.uid.as_deref());
            // Built before `convert` takes the object; dropped when the value holds the key.
            let key = stored_key(
                meta.namespace.as_deref(),
                meta.name.as_deref().unwrap_or_default(),
            );
            // Only this writer writes the cache: the value read here is still there when the
            // new one replaces it below.
            let previous = shared
                .read()
                .get(split_key(&key))
                .filter(|old| old.uid == uid)
                .map(|old| Arc::clone(&old.value));
            let value = Arc::new(convert(object, previous.as_deref()));
            let held = value.object_key() == Some(split_key(&key));
            Entry {
                key: V::Key::keep(key, held),
                uid,
                value,
            }
        };
        match event {
            Event::Apply(object) => {
                let new = entry(object);
                let value = Arc::clone(&new.value);
                let uid = new.uid;
                let replaced = self.write().insert(new);
                match replaced {
                    Some(old) if old.uid == uid => handle(Update::Applied {
                        old: Some(&old.value),
                        new: &value,
                    }),
                    replaced => {
                        if let Some(old) = replaced {
                            handle(Update::Deleted(&old.value));
                        }
                        handle(Update::Applied {
                            old: None,
                            new: &value,
                        });
                    }
                }
            }
            Event::Delete(object) => {
                let meta = object.meta();
                let removed = self.write().remove((
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default(),
                ));
                // The cache's value if it held one; the deleted object's last state, converted,
                // only if it did not.
                match removed {
                    Some(cached) => handle(Update::Deleted(&cached.value)),
                    None => handle(Update::Deleted(&entry(object).value)),
                }
            }
            Event::Init => self.listing = Some(Entries::new()),
            Event::InitApply(object) => {
                let new = entry(object);
                self.listing.get_or_insert_with(Entries::new).insert(new);
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_else(Entries::new);
                // Only this writer writes the cache, so nothing changes it between this read
                // and the swap below.
                let (applied, gone) = {
                    let current = self.read();
                    let applied: Vec<(Option<Arc<V>>, Arc<V>)> = listed
                        .table
                        .iter()
                        .map(|entry| {
                            let old = current.get(entry.key()).filter(|old| old.uid == entry.uid);
                            (old.map(|old| Arc::clone(&old.value)), Arc::clone(&entry.value))
                        })
                        .collect();
                    let gone: Vec<Arc<V>> = current
                        .table
                        .iter()
                        .filter(|old| listed.get(old.key()).is_none_or(|entry| entry.uid != old.uid))
                        .map(|old| Arc::clone(&old.value))
                        .collect();
                    (applied, gone)
                };
                *self.write() = listed;
                self.shared.ready.send_replace(true);
                for value in &gone {
                    handle(Update::Deleted(value));
                }
                for (old, new) in &applied {
                    handle(Update::Applied {
                        old: old.as_deref(),
                        new,
                    });
                }
                handle(Update::Synced);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    /// What a test's cached values answer to [`Keyed::object_key`].
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Holds {
        /// Nothing: the cache keeps a key.
        Nothing,
        /// Their object's namespace and name: the cache keeps none.
        Key,
        /// Another object's: the cache must notice and keep a key.
        Wrong,
    }

    thread_local! {
        /// What the values converted on this test's thread hold.
        static HOLDS: std::cell::Cell<Holds> = const { std::cell::Cell::new(Holds::Nothing) };
    }

    /// Runs `test` once for each way a value may hold its key.
    fn each_way(test: fn()) {
        for holds in [Holds::Nothing, Holds::Key, Holds::Wrong] {
            HOLDS.set(holds);
            test();
        }
    }

    /// A ConfigMap's cached value: its name and its `v` data entry (and what it answers to
    /// [`Keyed::object_key`]).
    #[derive(Debug, PartialEq)]
    struct Value(String, String, Holds);

    impl Keyed for Value {
        type Key = Beside;

        fn object_key(&self) -> Option<(&str, &str)> {
            match self.2 {
                Holds::Nothing => None,
                Holds::Key => Some(("ns", &self.0)),
                Holds::Wrong => Some(("ns", "another")),
            }
        }
    }

    impl Keyed for String {
        type Key = Beside;
    }

    fn map(name: &str, uid: &str, v: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            data: Some([("v".to_owned(), v.to_owned())].into()),
            ..ConfigMap::default()
        }
    }

    fn convert(map: ConfigMap) -> Value {
        Value(
            map.metadata.name.unwrap_or_default(),
            map.data.and_then(|d| d.get("v").cloned()).unwrap_or_default(),
            HOLDS.get(),
        )
    }

    /// An update as text, to compare sequences of them.
    fn text(update: Update<'_, Value>) -> String {
        match update {
            Update::Applied { old, new } => format!(
                "applied {}={} (was {})",
                new.0,
                new.1,
                old.map_or("-".to_owned(), |old| old.1.clone())
            ),
            Update::Deleted(value) => format!("deleted {}={}", value.0, value.1),
            Update::Synced => "synced".to_owned(),
        }
    }

    fn feed(writer: &mut CacheWriter<Value>, events: Vec<Event<ConfigMap>>) -> Vec<String> {
        let mut seen = Vec::new();
        for event in events {
            writer.apply(event, &mut |map, _| convert(map), &mut |update| {
                seen.push(text(update))
            });
        }
        seen.sort();
        seen
    }

    /// A cache whose first list held `object` alone.
    fn listed(object: ConfigMap) -> (Cache<Value>, CacheWriter<Value>) {
        let (cache, mut writer) = Cache::new();
        feed(
            &mut writer,
            vec![Event::Init, Event::InitApply(object), Event::InitDone],
        );
        (cache, writer)
    }

    fn cached(cache: &Cache<Value>, name: &str) -> Option<String> {
        cache.get(Some("ns"), name).map(|value| value.1.clone())
    }

    #[test]
    fn a_list_is_reported_once_it_completed_and_served_from_then_on() {
        each_way(|| {
            let (cache, mut writer) = Cache::new();
            assert!(!cache.is_ready());
            let seen = feed(
                &mut writer,
                vec![Event::Init, Event::InitApply(map("a", "1", "x"))],
            );
            assert_eq!(
                seen,
                Vec::<String>::new(),
                "nothing is reported before the list completed"
            );
            assert_eq!(cached(&cache, "a"), None, "nor served");
            let seen = feed(
                &mut writer,
                vec![Event::InitApply(map("b", "2", "y")), Event::InitDone],
            );
            assert_eq!(seen, ["applied a=x (was -)", "applied b=y (was -)", "synced"]);
            assert!(cache.is_ready());
            assert_eq!(cached(&cache, "a").as_deref(), Some("x"));
            assert_eq!(
                cache.get(Some("other"), "a"),
                None,
                "the namespace is part of the key"
            );
            assert_eq!(cache.len(), 2);
            let mut values: Vec<String> = cache.state().iter().map(|v| v.1.clone()).collect();
            values.sort();
            assert_eq!(values, ["x", "y"]);
        });
    }

    #[test]
    fn a_value_is_found_by_uid_only_for_the_object_cached() {
        each_way(|| {
            let (cache, _writer) = listed(map("a", "1", "x"));
            let found = cache.get_of_uid(Some("ns"), "a", Some("1"));
            assert_eq!(found.map(|v| v.1.clone()).as_deref(), Some("x"));
            assert!(
                cache.get_of_uid(Some("ns"), "a", Some("2")).is_none(),
                "a re-created object of the same name is another object"
            );
            assert!(cache.get_of_uid(Some("ns"), "a", None).is_none());
            assert!(cache.get_of_uid(Some("ns"), "b", Some("1")).is_none());
        });
    }

    #[test]
    fn convert_is_given_the_value_cached_for_the_same_object() {
        each_way(|| {
            let (_cache, mut writer) = listed(map("a", "1", "x"));
            let mut given = Vec::new();
            let mut convert_seeing = |map: ConfigMap, previous: Option<&Value>| {
                given.push(previous.map(|p| p.1.clone()));
                convert(map)
            };
            for event in [
                // The same object changed, in a watch event and in a relist.
                Event::Apply(map("a", "1", "y")),
                Event::Init,
                Event::InitApply(map("a", "1", "z")),
                Event::InitDone,
                // Re-created under the same name: another object.
                Event::Apply(map("a", "2", "w")),
                // Never cached.
                Event::Apply(map("b", "3", "v")),
                Event::Delete(map("c", "4", "u")),
            ] {
                writer.apply(event, &mut convert_seeing, &mut |_| {});
            }
            assert_eq!(
                given,
                [Some("x".to_owned()), Some("y".to_owned()), None, None, None]
            );
        });
    }

    #[test]
    fn a_change_carries_the_value_it_replaced() {
        each_way(|| {
            let (cache, mut writer) = listed(map("a", "1", "x"));
            let seen = feed(&mut writer, vec![Event::Apply(map("a", "1", "z"))]);
            assert_eq!(seen, ["applied a=z (was x)"]);
            assert_eq!(cached(&cache, "a").as_deref(), Some("z"));
            let seen = feed(&mut writer, vec![Event::Apply(map("new", "9", "n"))]);
            assert_eq!(seen, ["applied new=n (was -)"]);
        });
    }

    #[test]
    fn an_object_created_again_under_its_name_is_another_object() {
        each_way(|| {
            let (cache, mut writer) = listed(map("a", "1", "x"));
            let seen = feed(&mut writer, vec![Event::Apply(map("a", "2", "y"))]);
            assert_eq!(seen, ["applied a=y (was -)", "deleted a=x"]);
            assert_eq!(cached(&cache, "a").as_deref(), Some("y"));
        });
    }

    #[test]
    fn a_deletion_reports_the_cached_value_and_forgets_it() {
        each_way(|| {
            let (cache, mut writer) = listed(map("a", "1", "x"));
            // The deleted object's last state may be newer than the cache's.
            let seen = feed(&mut writer, vec![Event::Delete(map("a", "1", "later"))]);
            assert_eq!(seen, ["deleted a=x"]);
            assert_eq!(cached(&cache, "a"), None);
            assert!(cache.is_empty());
            // A deletion of an object never cached is still reported.
            let seen = feed(&mut writer, vec![Event::Delete(map("b", "2", "y"))]);
            assert_eq!(seen, ["deleted b=y"]);
        });
    }

    #[test]
    fn a_relist_reports_what_went_what_came_back_and_what_changed() {
        each_way(|| {
            let (cache, mut writer) = Cache::new();
            feed(
                &mut writer,
                vec![
                    Event::Init,
                    Event::InitApply(map("kept", "1", "x")),
                    Event::InitApply(map("gone", "2", "x")),
                    Event::InitApply(map("recreated", "3", "x")),
                    Event::InitDone,
                ],
            );
            let seen = feed(
                &mut writer,
                vec![
                    Event::Init,
                    Event::InitApply(map("kept", "1", "y")),
                    Event::InitApply(map("recreated", "4", "y")),
                ],
            );
            assert_eq!(seen, Vec::<String>::new());
            assert_eq!(
                cached(&cache, "gone").as_deref(),
                Some("x"),
                "served until the relist completed"
            );
            let seen = feed(&mut writer, vec![Event::InitDone]);
            assert_eq!(
                seen,
                [
                    "applied kept=y (was x)",
                    "applied recreated=y (was -)",
                    "deleted gone=x",
                    "deleted recreated=x",
                    "synced",
                ]
            );
            assert_eq!(cached(&cache, "gone"), None);
            assert_eq!(cache.len(), 2);
        });
    }

    #[test]
    fn only_a_value_holding_its_own_key_is_stored_without_one() {
        each_way(|| {
            let (cache, _writer) = listed(map("a", "1", "x"));
            let entries = cache.read();
            let entry = entries.table.iter().next().unwrap();
            assert_eq!(
                entry.key.get().is_none(),
                HOLDS.get() == Holds::Key,
                "{:?}",
                HOLDS.get()
            );
            assert_eq!(entry.key(), ("ns", "a"));
        });
    }

    /// A cluster-scoped object's cached value holding its name.
    struct Named(String);

    impl Keyed for Named {
        type Key = InValue;

        fn object_key(&self) -> Option<(&str, &str)> {
            Some(("", &self.0))
        }
    }

    /// An [`InValue`] value that does not answer with its object's key is a conversion bug,
    /// caught in debug builds (release builds log it).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "the cached value of ns/a holds another key")]
    fn a_value_that_must_hold_its_key_and_does_not_is_a_bug() {
        let _ = InValue::keep("ns/a".into(), false);
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name() {
        let (cache, mut writer) = Cache::<String>::new();
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("team".into()),
                uid: Some("1".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let mut convert = |n: Namespace, _: Option<&String>| n.metadata.name.unwrap_or_default();
        for event in [Event::Init, Event::InitApply(namespace.clone()), Event::InitDone] {
            writer.apply(event, &mut convert, &mut |_| {});
        }
        assert_eq!(
            cache.get(None, "team").as_deref().map(String::as_str),
            Some("team")
        );
        assert_eq!(
            cache.get(Some(""), "team").as_deref().map(String::as_str),
            Some("team")
        );
        // Also when the value holds the name (and no key is kept).
        let (named, mut writer) = Cache::<Named>::new();
        let mut convert = |n: Namespace, _: Option<&Named>| Named(n.metadata.name.unwrap_or_default());
        for event in [Event::Init, Event::InitApply(namespace.clone()), Event::InitDone] {
            writer.apply(event, &mut convert, &mut |_| {});
        }
        assert!(named.read().table.iter().all(|entry| entry.key.get().is_none()));
        assert!(Beside::keep("team".into(), true).get().is_none());
        assert_eq!(Beside::keep("team".into(), false).get(), Some("team"));
        // A value that holds its key takes half the table slot of one that does not.
        assert_eq!(std::mem::size_of::<Entry<Named>>(), 16);
        assert_eq!(std::mem::size_of::<Entry<String>>(), 32);
        assert_eq!(
            named.get(None, "team").map(|n| n.0.clone()).as_deref(),
            Some("team")
        );
        assert!(named.get(Some("team"), "").is_none());
        writer.apply(Event::Delete(namespace), &mut convert, &mut |_| {});
        assert!(named.is_empty());
    }

    #[tokio::test]
    async fn every_waiter_wakes_when_the_first_list_completed() {
        let (cache, mut writer) = Cache::<Value>::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.wait_until_ready().await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(waiters.iter().all(|w| !w.is_finished()));
        feed(&mut writer, vec![Event::Init, Event::InitDone]);
        for waiter in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
                .await
                .expect("a waiter did not wake")
                .unwrap();
        }
        // Ready stays ready.
        cache.wait_until_ready().await;
    }
}
