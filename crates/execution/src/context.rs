//! The state every controller of the service shares: the control-plane client, the watch
//! caches, the queues, the member clusters and the settings.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_api::overrides::{ClusterOverridePolicy, OverridePolicy};
use flotilla_api::{Cluster, ClusterTaintPolicy};
use flotilla_runtime::events::Recorder;
use flotilla_runtime::intern::Interner;
use flotilla_runtime::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::Client;
use kube::runtime::events::{Event, EventType, Reporter};
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;

use crate::apply_once::Mode;
use crate::clusters::Members;
use crate::kinds::KindCache;
use crate::works::BindingKind;

/// Tunables of the service.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The global `--apply-once-only` mode.
    pub apply_once_only: Mode,
    /// How often every binding, Work and namespace is reconciled again even without events.
    pub resync_period: Duration,
    /// How often member clusters are probed for health.
    pub probe_period: Duration,
    /// Deadline of one request to a member cluster.
    pub member_timeout: Duration,
    /// How long a Work's report waits for the member's controllers (`--report-wait`, see
    /// [`crate::apply::REPORT_WAIT`]); zero reports at once.
    pub report_wait: Duration,
    /// Works of one member cluster applied concurrently.
    pub work_workers: usize,
    /// How much later than their Works' reports a binding's report pass counts as queued
    /// behind dispatches (`--status-deferral`, [`crate::dispatch::queue_report`]).
    pub status_deferral: Duration,
    /// Bytes of Works held for the workers the watch queued them to (`--held-works-mib`,
    /// [`crate::arrivals`]).
    pub held_works_bytes: usize,
    /// Failover taints on Clusters.
    pub taints: crate::taints::TaintOptions,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            apply_once_only: Mode::Off,
            resync_period: Duration::from_secs(300),
            probe_period: Duration::from_secs(10),
            member_timeout: Duration::from_secs(10),
            report_wait: crate::apply::REPORT_WAIT,
            work_workers: 8,
            status_deferral: crate::dispatch::STATUS_DEFERRAL,
            held_works_bytes: crate::arrivals::DEFAULT_BUDGET_MIB << 20,
            taints: crate::taints::TaintOptions::default(),
        }
    }
}

/// Identifies a binding.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingKey {
    /// ResourceBinding or ClusterResourceBinding.
    pub kind: BindingKind,
    /// Namespace, shared by the keys of a namespace's bindings; empty for a
    /// ClusterResourceBinding.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Box<str>,
}

/// Binding keys, one shared copy of each (ADR 0019).
static BINDING_KEYS: Interner<BindingKey> = Interner::new();
/// The namespaces of binding keys.
static BINDING_NAMESPACES: Interner<str> = Interner::new();

impl BindingKey {
    /// The key of the `kind` binding `namespace/name` (a ClusterResourceBinding's namespace is
    /// ignored: empty).
    pub fn new(kind: BindingKind, namespace: &str, name: &str) -> Self {
        let namespace = match kind {
            BindingKind::ResourceBinding => namespace,
            BindingKind::ClusterResourceBinding => "",
        };
        Self {
            kind,
            namespace: BINDING_NAMESPACES.intern(namespace),
            name: name.into(),
        }
    }

    /// The one shared copy of this key: the binding's cached record, its cached Works' records
    /// and the binding queue hold it, not copies of their own (a queued key costs a pointer,
    /// not two strings).
    pub fn shared(self) -> Arc<BindingKey> {
        BINDING_KEYS.intern_value(self)
    }
}

impl std::fmt::Display for BindingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            BindingKind::ResourceBinding => write!(f, "ResourceBinding {}/{}", self.namespace, self.name),
            BindingKind::ClusterResourceBinding => write!(f, "ClusterResourceBinding {}", self.name),
        }
    }
}

/// The shard key of member cluster `name`: its owner applies its Works, writes their status
/// and the Cluster's status.
pub fn cluster_shard(name: &str) -> String {
    format!("cluster/{name}")
}

/// The shard key of a binding: its owner writes its Works, finalizer and status.
pub fn binding_shard(key: &BindingKey) -> String {
    match key.kind {
        BindingKind::ResourceBinding => format!("binding/{}/{}", key.namespace, key.name),
        BindingKind::ClusterResourceBinding => format!("clusterbinding/{}", key.name),
    }
}

/// The shard key of a control-plane namespace: its owner writes the namespace's Works.
pub fn namespace_shard(name: &str) -> String {
    format!("namespace/{name}")
}

/// The watch caches of the control plane.
#[derive(Clone)]
pub struct Stores {
    /// ResourceBindings.
    pub bindings: flotilla_runtime::cache::Cache<crate::cache::CachedBinding>,
    /// ClusterResourceBindings.
    pub cluster_bindings: flotilla_runtime::cache::Cache<crate::cache::CachedBinding>,
    /// Works.
    pub works: flotilla_runtime::cache::Cache<crate::cache::CachedWork>,
    /// Clusters.
    pub clusters: Store<Cluster>,
    /// Namespaces.
    pub namespaces: Store<Namespace>,
    /// OverridePolicies (rendering bindings the detector does not manage, and namespaces).
    pub override_policies: Store<OverridePolicy>,
    /// ClusterOverridePolicies (likewise).
    pub cluster_override_policies: Store<ClusterOverridePolicy>,
    /// ClusterTaintPolicies (not part of [`Context::wait_synced`]: their CRD may be missing;
    /// see [`Context::taint_policies_synced`]).
    pub taint_policies: Store<ClusterTaintPolicy>,
}

/// Everything the controllers share.
pub struct Context {
    /// The control-plane client.
    pub client: Client,
    /// Tunables.
    pub settings: Settings,
    /// Watch caches.
    pub stores: Stores,
    /// Bindings to reconcile.
    pub binding_queue: WorkQueue<Arc<BindingKey>>,
    /// Control-plane namespaces to propagate.
    pub namespace_queue: WorkQueue<String>,
    /// ClusterTaintPolicies whose `Valid` condition to check.
    pub taint_policy_queue: WorkQueue<String>,
    /// Member clusters: their clients, Work queues and watches.
    pub members: Members,
    /// What the members' held Works take ([`crate::arrivals`]).
    pub held_works: Arc<crate::arrivals::Budget>,
    /// Serialises reconciles of one binding between the queue and gRPC calls.
    pub binding_locks: KeyedLocks<BindingKey>,
    /// Kinds served by the control plane.
    pub kinds: KindCache,
    /// Event recorder.
    pub recorder: Recorder,
    /// Fired on shutdown.
    pub shutdown: CancellationToken,
    /// `true` once every watch cache has its initial list.
    synced: tokio::sync::watch::Sender<bool>,
    /// `true` once the ClusterTaintPolicy cache has its initial list.
    taint_policies_synced: std::sync::atomic::AtomicBool,
    /// Which clusters, bindings and namespaces this replica owns (unset: all of them).
    membership: std::sync::OnceLock<flotilla_runtime::membership::Membership>,
}

impl Context {
    /// A context over `client` and `stores`.
    pub fn new(client: Client, settings: Settings, stores: Stores, shutdown: CancellationToken) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "flotilla-execution".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        let held_works = crate::arrivals::Budget::new(settings.held_works_bytes);
        let binding_queue = WorkQueue::default();
        binding_queue.set_deferral(settings.status_deferral);
        Self {
            client,
            settings,
            held_works,
            stores,
            binding_queue,
            namespace_queue: WorkQueue::default(),
            taint_policy_queue: WorkQueue::default(),
            members: Members::default(),
            binding_locks: KeyedLocks::default(),
            kinds: KindCache::default(),
            recorder,
            shutdown,
            synced: tokio::sync::watch::Sender::new(false),
            taint_policies_synced: std::sync::atomic::AtomicBool::new(false),
            membership: std::sync::OnceLock::new(),
        }
    }

    /// Shards this replica's work by `membership` (once; later calls are ignored).
    pub fn set_membership(&self, membership: flotilla_runtime::membership::Membership) {
        let _ = self.membership.set(membership);
    }

    /// The membership, if this replica shards its work.
    pub fn membership(&self) -> Option<&flotilla_runtime::membership::Membership> {
        self.membership.get()
    }

    /// Whether this replica owns the shard `key` ([`cluster_shard`], [`binding_shard`],
    /// [`namespace_shard`]) and may act on it now.
    pub fn owns(&self, key: &str) -> bool {
        self.membership.get().is_none_or(|m| m.owns(key))
    }

    /// Marks the caches synced, waking every [`Context::wait_synced`].
    pub fn set_synced(&self) {
        self.synced.send_replace(true);
    }

    /// Waits until the caches are synced; `false` on shutdown. (kube's `Store::wait_until_ready`
    /// wakes only its last waiter, so one task waits on the stores and wakes everyone here.)
    pub async fn wait_synced(&self) -> bool {
        let mut synced = self.synced.subscribe();
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            result = synced.wait_for(|s| *s) => result.is_ok(),
        }
    }

    /// Marks the ClusterTaintPolicy cache synced.
    pub fn set_taint_policies_synced(&self) {
        self.taint_policies_synced
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the ClusterTaintPolicy cache has its initial list.
    pub fn taint_policies_synced(&self) -> bool {
        self.taint_policies_synced
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Publishes an event about the object `regarding`; failures are logged, never fatal
    /// (events are best-effort).
    pub async fn event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, regarding).await {
            tracing::debug!(%error, reason, "cannot record event");
        }
    }
}

/// One async mutex per key, created on demand and dropped when unused.
pub struct KeyedLocks<K> {
    locks: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        Self {
            locks: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Clone + Eq + Hash> KeyedLocks<K> {
    /// Locks `key`; the guard unlocks it.
    pub async fn lock(&self, key: &K) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            // Drop entries nobody holds, so the map does not grow with every key ever seen.
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry(key.clone()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_keys_share_their_namespace() {
        let web = BindingKey::new(BindingKind::ResourceBinding, "team-a", "web-deployment");
        let db = BindingKey::new(BindingKind::ResourceBinding, "team-a", "db-deployment");
        assert!(Arc::ptr_eq(&web.namespace, &db.namespace));
        assert_eq!((&*web.namespace, &*web.name), ("team-a", "web-deployment"));
        assert_eq!(web.to_string(), "ResourceBinding team-a/web-deployment");
        // A ClusterResourceBinding has no namespace, whatever a caller passes.
        let admin = BindingKey::new(BindingKind::ClusterResourceBinding, "team-a", "admin-clusterrole");
        assert_eq!(&*admin.namespace, "");
        assert_eq!(
            admin,
            BindingKey::new(BindingKind::ClusterResourceBinding, "", "admin-clusterrole")
        );
        // The shared copy of a key is one allocation, whoever asks.
        assert!(Arc::ptr_eq(&web.clone().shared(), &web.shared()));
    }
}
