//! In-process controllers that kube-controller-manager would run: the garbage collector
//! (ownerReferences with background, foreground and orphan propagation), the namespace
//! lifecycle (Terminating namespaces are emptied, then removed) and CRD cleanup (a deleted CRD's
//! objects are removed before the CRD goes).
//!
//! The controller is level-triggered: it keeps an index of owners and dependents fed by the
//! store's watch, queues the keys an event can affect, and each reconcile re-reads the current
//! state and acts through the same [`Api`] operations clients use.
//!
//! Every write in the store passes through here, so an event costs only a decode of the
//! object's metadata ([`objects::decode_stored_metadata`]), and it queues only the keys whose
//! reconcile it can change: the object itself when it is being deleted or all its owners are
//! gone, the dependents of a deleted object, and owners, namespaces and CRDs that are being
//! deleted (foreground deletion, namespace and CRD cleanup wait for their contents). An update
//! of a live object with live owners queues nothing.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use flotilla_store::{EventKind, WatchError};
use serde_json::{Value, json};

use crate::errors::{ApiError, ApiResult};
use crate::objects::{self, OwnerRef, decode_stored};
use crate::ops::{Api, DeleteOptions, Propagation, Subresource, WriteOptions, Written};
use crate::resources::{ResourceDef, storage_prefix};

/// Finalizer that keeps an owner until its blocking dependents are gone.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer that keeps an owner until its dependents no longer reference it.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// Finalizer that keeps a CRD until its objects are gone.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// The namespace spec finalizer the namespace controller owns.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

const NAMESPACES_PREFIX: &str = "/registry/core/namespaces/";
const CRDS_PREFIX: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

/// What the collector reads of an object's metadata.
#[derive(Clone, Debug, Default, serde::Deserialize)]
struct GcMeta {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default, rename = "ownerReferences")]
    owner_references: Option<Vec<GcOwnerRef>>,
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<Value>,
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
struct GcOwnerRef {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default, rename = "blockOwnerDeletion")]
    block_owner_deletion: Option<bool>,
}

/// One indexed object.
#[derive(Clone, Debug, Default, PartialEq)]
struct Entry {
    uid: String,
    namespace: Option<String>,
    refs: Vec<OwnerRef>,
    deleting: bool,
}

impl Entry {
    fn of(meta: GcMeta) -> Self {
        Self {
            uid: meta.uid.unwrap_or_default(),
            namespace: meta.namespace.filter(|ns| !ns.is_empty()),
            refs: meta
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| {
                    Some(OwnerRef {
                        uid: r.uid?,
                        block_owner_deletion: r.block_owner_deletion.unwrap_or(false),
                    })
                })
                .collect(),
            deleting: meta.deletion_timestamp.is_some_and(|t| !t.is_null()),
        }
    }

    /// The entry of stored bytes (metadata decoded only).
    fn decode(stored: &[u8]) -> Self {
        Self::of(objects::decode_stored_metadata(stored).unwrap_or_default())
    }
}

#[derive(Default)]
struct Index {
    /// uid -> key of live objects.
    key_of: HashMap<String, String>,
    /// key -> what was indexed of it.
    entries: HashMap<String, Entry>,
    /// owner uid -> dependent keys.
    dependents: HashMap<String, BTreeSet<String>>,
    /// How many indexed objects are being deleted (while none is, no object waits for
    /// another's change).
    deleting: usize,
}

impl Index {
    /// Indexes `entry` for `key`; a write that left what the collector reads as it was (a
    /// status write, most updates) changes nothing.
    fn put(&mut self, key: &str, entry: &Entry) {
        if self.entries.get(key) == Some(entry) {
            return;
        }
        self.remove(key);
        for r in &entry.refs {
            self.dependents
                .entry(r.uid.clone())
                .or_default()
                .insert(key.to_owned());
        }
        if !entry.uid.is_empty() {
            self.key_of.insert(entry.uid.clone(), key.to_owned());
        }
        if entry.deleting {
            self.deleting += 1;
        }
        self.entries.insert(key.to_owned(), entry.clone());
    }

    fn remove(&mut self, key: &str) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        for r in &entry.refs {
            if let Some(set) = self.dependents.get_mut(&r.uid) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&r.uid);
                }
            }
        }
        if self.key_of.get(&entry.uid).is_some_and(|k| k == key) {
            self.key_of.remove(&entry.uid);
        }
        if entry.deleting {
            self.deleting -= 1;
        }
        Some(entry)
    }

    fn exists(&self, uid: &str) -> bool {
        self.key_of.contains_key(uid)
    }

    /// Whether the object at `key` is indexed as being deleted.
    fn is_deleting(&self, key: &str) -> bool {
        self.entries.get(key).is_some_and(|e| e.deleting)
    }

    /// Whether a reconcile of the object `entry` can act: it is being deleted (finalizers to
    /// process), or it has owners and none of them exists (background cascading).
    fn needs_reconcile(&self, entry: &Entry) -> bool {
        entry.deleting || (!entry.refs.is_empty() && entry.refs.iter().all(|r| !self.exists(&r.uid)))
    }
}

/// Starts the controller task.
pub fn spawn(api: Arc<Api>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match run(&api).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "garbage collector restarting");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
}

struct Controller {
    api: Arc<Api>,
    index: Index,
    queue: VecDeque<String>,
    queued: HashSet<String>,
    retry: Vec<String>,
}

impl Controller {
    fn enqueue(&mut self, key: &str) {
        if self.queued.insert(key.to_owned()) {
            self.queue.push_back(key.to_owned());
        }
    }

    /// Queues what may wait for the object at `key` (`entry`): its owners, its namespace and
    /// its CRD, each only while being deleted (foreground deletion, namespace and CRD cleanup
    /// wait for their contents); nothing else can depend on one object's change.
    fn waiting_on(&mut self, key: &str, entry: &Entry) {
        if self.index.deleting == 0 {
            return;
        }
        for r in &entry.refs {
            if let Some(owner) = self.index.key_of.get(&r.uid).cloned()
                && self.index.is_deleting(&owner)
            {
                self.enqueue(&owner);
            }
        }
        if let Some(ns) = &entry.namespace {
            let namespace = format!("{NAMESPACES_PREFIX}{ns}");
            if self.index.is_deleting(&namespace) {
                self.enqueue(&namespace);
            }
        }
        // Objects of a custom resource: their CRD may be waiting for them.
        if let Some(def) = self.api.catalog().for_key(key)
            && let crate::resources::Flavor::Custom(info) = &def.flavor
        {
            let crd = format!("{CRDS_PREFIX}{}", info.crd_name);
            if self.index.is_deleting(&crd) {
                self.enqueue(&crd);
            }
        }
    }
}

async fn run(api: &Arc<Api>) -> ApiResult<()> {
    let snapshot = api.store.snapshot();
    let mut c = Controller {
        api: api.clone(),
        index: Index::default(),
        queue: VecDeque::new(),
        queued: HashSet::new(),
        retry: Vec::new(),
    };
    for kv in snapshot.range("/registry/", None) {
        let entry = Entry::decode(&kv.value);
        let check = !entry.refs.is_empty() || entry.deleting;
        c.index.put(&kv.key, &entry);
        if check {
            c.enqueue(&kv.key);
        }
    }
    let mut watcher = api
        .store
        .watch("/registry/", snapshot.revision())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut retry_at = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        while let Some(key) = c.queue.pop_front() {
            c.queued.remove(&key);
            if let Err(e) = reconcile(&mut c, &key).await
                && e.code != 404
            {
                tracing::debug!(key, error = %e, "garbage collection will retry");
                c.retry.push(key);
            }
            // Keep the index fresh between reconciles so decisions see our own writes.
            if let Ok(Some(batch)) = watcher.poll() {
                apply_batch(&mut c, batch.events);
            }
        }
        let wait = tokio::time::timeout_at(retry_at, watcher.next_batch()).await;
        match wait {
            Err(_) => {
                for key in std::mem::take(&mut c.retry) {
                    c.enqueue(&key);
                }
                retry_at = tokio::time::Instant::now() + Duration::from_secs(1);
            }
            Ok(Ok(batch)) => apply_batch(&mut c, batch.events),
            Ok(Err(WatchError::Closed)) => return Ok(()),
            Ok(Err(e @ WatchError::Compacted { .. })) => return Err(ApiError::internal(e.to_string())),
        }
    }
}

fn apply_batch(c: &mut Controller, events: Vec<Arc<flotilla_store::Event>>) {
    for event in events {
        match event.kind {
            EventKind::Put => {
                let Some(kv) = &event.value else { continue };
                let entry = Entry::decode(&kv.value);
                c.index.put(&event.key, &entry);
                if c.index.needs_reconcile(&entry) {
                    c.enqueue(&event.key);
                }
                c.waiting_on(&event.key, &entry);
            }
            EventKind::Delete => {
                let entry = match c.index.remove(&event.key) {
                    Some(entry) => entry,
                    None => match &event.prev {
                        Some(prev) => Entry::decode(&prev.value),
                        None => continue,
                    },
                };
                // Its dependents may have lost their last owner.
                for dep in c.index.dependents.get(&entry.uid).cloned().unwrap_or_default() {
                    c.enqueue(&dep);
                }
                c.waiting_on(&event.key, &entry);
            }
        }
    }
}

async fn reconcile(c: &mut Controller, key: &str) -> ApiResult<()> {
    let Some(kv) = c.api.store.get(key) else {
        return Ok(());
    };
    let catalog = c.api.catalog();
    let Some(def) = catalog.for_key(key) else {
        return Ok(());
    };
    let obj = c.api.to_value(&def, &kv.value, kv.mod_revision);
    let name = objects::meta_str(&obj, "name").unwrap_or_default().to_owned();
    let ns = objects::meta_str(&obj, "namespace").map(str::to_owned);
    let uid = objects::meta_str(&obj, "uid").unwrap_or_default().to_owned();

    // Dependents whose owners are all gone are deleted (background cascading).
    let refs = objects::owner_refs(&obj);
    if !refs.is_empty() && !objects::is_deleting(&obj) && refs.iter().all(|r| !c.index.exists(&r.uid)) {
        let opts = DeleteOptions {
            uid: Some(uid.clone()),
            propagation: Some(Propagation::Background),
            ..DeleteOptions::default()
        };
        c.api.delete(&def, ns.as_deref(), &name, &opts).await?;
        return Ok(());
    }
    if !objects::is_deleting(&obj) {
        return Ok(());
    }
    let finalizers = objects::finalizers(&obj);
    let dependents: Vec<String> = c
        .index
        .dependents
        .get(&uid)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .collect();

    if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
        for dep in &dependents {
            remove_owner_ref(&c.api, dep, &uid).await?;
        }
        remove_finalizer(&c.api, &def, &kv, obj.clone(), ORPHAN_FINALIZER).await?;
        return Ok(());
    }
    if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
        let mut blocking = false;
        for dep in &dependents {
            let Some(dep_kv) = c.api.store.get(dep) else {
                continue;
            };
            let Some(dep_def) = catalog.for_key(dep) else {
                continue;
            };
            let dep_obj = c.api.to_value(&dep_def, &dep_kv.value, dep_kv.mod_revision);
            let blocks = objects::owner_refs(&dep_obj)
                .iter()
                .any(|r| r.uid == uid && r.block_owner_deletion);
            blocking |= blocks;
            if !objects::is_deleting(&dep_obj) {
                let opts = DeleteOptions {
                    propagation: Some(Propagation::Foreground),
                    ..DeleteOptions::default()
                };
                let dep_name = objects::meta_str(&dep_obj, "name").unwrap_or_default().to_owned();
                let dep_ns = objects::meta_str(&dep_obj, "namespace").map(str::to_owned);
                match c.api.delete(&dep_def, dep_ns.as_deref(), &dep_name, &opts).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if !blocking {
            remove_finalizer(&c.api, &def, &kv, obj.clone(), FOREGROUND_FINALIZER).await?;
        }
        return Ok(());
    }
    if key.starts_with(NAMESPACES_PREFIX) {
        return reconcile_namespace(c, &def, &kv, obj, &name).await;
    }
    if key.starts_with(CRDS_PREFIX) && finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER) {
        let group = obj["spec"]["group"].as_str().unwrap_or_default().to_owned();
        let plural = obj["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let prefix = storage_prefix(&group, &plural);
        let snapshot = c.api.store.snapshot();
        let mut remaining = 0;
        for item in snapshot.range(&prefix, None) {
            remaining += 1;
            delete_key(&c.api, &item.key, &item.value, item.mod_revision).await?;
        }
        if remaining == 0 {
            remove_finalizer(&c.api, &def, &kv, obj, CRD_CLEANUP_FINALIZER).await?;
        }
    }
    Ok(())
}

async fn reconcile_namespace(
    c: &mut Controller,
    def: &ResourceDef,
    kv: &Arc<flotilla_store::KeyValue>,
    obj: Value,
    name: &str,
) -> ApiResult<()> {
    let catalog = c.api.catalog();
    let snapshot = c.api.store.snapshot();
    let mut remaining = 0;
    for res in catalog.storage_resources() {
        if !res.namespaced {
            continue;
        }
        let prefix = res.list_prefix(Some(name));
        for item in snapshot.range(&prefix, None) {
            remaining += 1;
            let item_obj = decode_stored(&item.value, item.mod_revision);
            if !objects::is_deleting(&item_obj) {
                delete_key(&c.api, &item.key, &item.value, item.mod_revision).await?;
            }
        }
    }
    if remaining > 0 {
        return Ok(());
    }
    let spec_finalizers: Vec<String> = obj["spec"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    if spec_finalizers.iter().any(|f| f == NAMESPACE_FINALIZER) {
        let mut new = obj.clone();
        let kept: Vec<String> = spec_finalizers
            .into_iter()
            .filter(|f| f != NAMESPACE_FINALIZER)
            .collect();
        new["spec"]["finalizers"] = json!(kept);
        c.api
            .commit_update(def, kv, obj, new, &controller_options(), None)
            .await?;
    }
    Ok(())
}

/// Writes by the in-process controllers are recorded under kube-controller-manager's name.
fn controller_options() -> WriteOptions {
    WriteOptions {
        field_manager: Some("kube-controller-manager".into()),
        ..WriteOptions::default()
    }
}

async fn delete_key(api: &Api, key: &str, value: &[u8], rev: u64) -> ApiResult<()> {
    let Some(def) = api.catalog().for_key(key) else {
        return Ok(());
    };
    let obj = decode_stored(value, rev);
    let name = objects::meta_str(&obj, "name").unwrap_or_default().to_owned();
    let ns = objects::meta_str(&obj, "namespace").map(str::to_owned);
    let opts = DeleteOptions {
        propagation: Some(Propagation::Background),
        ..DeleteOptions::default()
    };
    match api.delete(&def, ns.as_deref(), &name, &opts).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn remove_finalizer(
    api: &Api,
    def: &ResourceDef,
    kv: &Arc<flotilla_store::KeyValue>,
    obj: Value,
    finalizer: &str,
) -> ApiResult<Written> {
    let mut new = obj.clone();
    let kept: Vec<String> = objects::finalizers(&obj)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    objects::set_finalizers(&mut new, kept);
    api.commit_update(def, kv, obj, new, &controller_options(), None)
        .await
}

async fn remove_owner_ref(api: &Api, key: &str, owner_uid: &str) -> ApiResult<()> {
    for _ in 0..8 {
        let Some(kv) = api.store.get(key) else {
            return Ok(());
        };
        let Some(def) = api.catalog().for_key(key) else {
            return Ok(());
        };
        let obj = api.to_value(&def, &kv.value, kv.mod_revision);
        let mut new = obj.clone();
        if let Some(refs) = new["metadata"]["ownerReferences"].as_array_mut() {
            refs.retain(|r| r["uid"].as_str() != Some(owner_uid));
        }
        match api
            .commit_update(&def, &kv, obj, new, &controller_options(), None)
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if e.reason == "Conflict" => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::internal(format!(
        "could not orphan {key}: too many concurrent writes"
    )))
}

/// PUT `/api/v1/namespaces/<name>/finalize`: replaces `spec.finalizers` only.
pub async fn finalize_namespace(
    api: &Api,
    def: &ResourceDef,
    name: &str,
    body: Value,
    opts: &WriteOptions,
) -> ApiResult<Written> {
    let kv = api
        .store
        .get(&def.key(None, name))
        .ok_or_else(|| ApiError::not_found("", "namespaces", name))?;
    let old = api.to_value(def, &kv.value, kv.mod_revision);
    let mut new = old.clone();
    new["spec"]["finalizers"] = body["spec"]["finalizers"].clone();
    if new["spec"]["finalizers"].is_null() {
        new["spec"]["finalizers"] = json!([]);
    }
    let _ = Subresource::Main;
    api.commit_update(def, &kv, old, new, opts, Some("finalize"))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(obj: &Value) -> Entry {
        Entry::decode(&objects::encode_for_storage(obj))
    }

    #[test]
    fn index_tracks_owners_and_dependents() {
        let mut index = Index::default();
        let owner = json!({"metadata": {"uid": "o1"}});
        let dep = json!({"metadata": {"uid": "d1", "ownerReferences": [{"uid": "o1", "blockOwnerDeletion": true}]}});
        index.put("/k/owner", &entry(&owner));
        index.put("/k/dep", &entry(&dep));
        assert!(index.exists("o1"));
        assert_eq!(index.dependents["o1"].iter().collect::<Vec<_>>(), vec!["/k/dep"]);
        assert!(!index.needs_reconcile(&entry(&dep)), "its owner exists");
        index.remove("/k/owner");
        assert!(!index.exists("o1"));
        assert!(index.needs_reconcile(&entry(&dep)), "its only owner is gone");
        // The dependent still points at the (gone) owner until it is removed itself.
        assert!(index.dependents.contains_key("o1"));
        index.remove("/k/dep");
        assert!(index.dependents.is_empty() && index.key_of.is_empty());
    }

    #[test]
    fn entries_read_the_metadata_the_collector_needs() {
        let e = entry(&json!({"metadata": {"uid": "u", "namespace": "ns",
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"uid": "o1", "blockOwnerDeletion": true}, {"uid": "o2"}, {"kind": "x"}]},
            "spec": {"big": [1, 2, 3]}}));
        assert_eq!(
            e,
            Entry {
                uid: "u".into(),
                namespace: Some("ns".into()),
                refs: vec![
                    OwnerRef {
                        uid: "o1".into(),
                        block_owner_deletion: true
                    },
                    OwnerRef {
                        uid: "o2".into(),
                        block_owner_deletion: false
                    },
                ],
                deleting: true,
            }
        );
        let live = entry(&json!({"metadata": {"uid": "u", "namespace": "", "deletionTimestamp": null}}));
        assert!(!live.deleting && live.namespace.is_none() && live.refs.is_empty());
        let mut index = Index::default();
        assert!(index.needs_reconcile(&e), "being deleted");
        assert!(!index.needs_reconcile(&live));
        index.put("/k/e", &e);
        assert!(index.is_deleting("/k/e") && !index.is_deleting("/k/other"));
    }

    #[test]
    fn the_index_counts_what_is_being_deleted_and_skips_unchanged_entries() {
        let mut index = Index::default();
        let owner = entry(&json!({"metadata": {"uid": "o1"}}));
        let deleting =
            entry(&json!({"metadata": {"uid": "o1", "deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        let dep = entry(&json!({"metadata": {"uid": "d1", "ownerReferences": [{"uid": "o1"}]}}));
        index.put("/k/owner", &owner);
        index.put("/k/dep", &dep);
        assert_eq!(index.deleting, 0);
        // The same entry again (a status write): the index is as it was.
        index.put("/k/dep", &dep);
        assert_eq!(index.dependents["o1"].len(), 1);
        assert_eq!(index.key_of["d1"], "/k/dep");
        // The owner starts being deleted, is written again while deleting, then goes.
        index.put("/k/owner", &deleting);
        index.put("/k/owner", &deleting);
        assert_eq!(index.deleting, 1);
        assert!(index.is_deleting("/k/owner"));
        index.remove("/k/owner");
        assert_eq!(index.deleting, 0);
        // Replaced by a live object, a deleting entry is no longer counted.
        index.put("/k/owner", &deleting);
        index.put("/k/owner", &owner);
        assert_eq!(index.deleting, 0);
        assert!(index.exists("o1"));
    }
}
