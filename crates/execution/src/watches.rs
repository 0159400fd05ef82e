//! Control-plane watches: keep the caches and turn every change into queued work (the watches
//! are the guarantee; gRPC calls are only the fast path).
//!
//! | watched | queues |
//! |---|---|
//! | ResourceBinding, ClusterResourceBinding | the binding, unless only its status changed (besides the scheduler's observed generation): see [`CachedBinding::signature`] |
//! | Work | its binding (status aggregation [`WORK_REPORTS_COALESCE`](crate::dispatch::WORK_REPORTS_COALESCE) later, so one write covers every cluster's report, deferred behind dispatches ([`queue_report`](crate::dispatch::queue_report)); re-creation at once on deletion); the Work in its cluster's queue when its generation, deletion or finalizers changed (deferred behind the Works being finished, ADR 0036); its namespace for namespace Works |
//! | Cluster | starts the cluster's worker and probe; every namespace when the set of clusters changed; the cluster's taints when its conditions, labels or fields changed; when its labels or fields (provider, region, zones) change, the bindings targeting it and every namespace (override rules select clusters by them) |
//! | ClusterTaintPolicy | every cluster's taints; the policy's `Valid` condition |
//! | Namespace | the namespace |
//! | OverridePolicy, ClusterOverridePolicy | the bindings the detector does not manage (attached dependencies) in its scope, and for a ClusterOverridePolicy every namespace (those render with the policies as they are; the detector's bindings record what is in effect and come back through their own watch) |

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use flotilla_api::lean::Lean;
use flotilla_api::overrides::{ClusterOverridePolicy, OverridePolicy};
use flotilla_api::watched::Watched;
use flotilla_api::well_known::cluster_of_execution_namespace;
use flotilla_api::{Cluster, ClusterResourceBinding, ClusterTaintPolicy, ResourceBinding, Work};
use flotilla_overrides::ClusterFacts;
use flotilla_runtime::cache::{Cache, CacheWriter, Update};
use flotilla_runtime::watch::Change;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::cache::{CachedBinding, CachedWork, worker_signature_of};
use crate::clusters::Members;
use crate::context::{BindingKey, Context, Stores};
use crate::works::BindingKind;

/// The writing halves of the caches, consumed by [`spawn`].
pub struct Writers {
    bindings: CacheWriter<CachedBinding>,
    cluster_bindings: CacheWriter<CachedBinding>,
    works: CacheWriter<CachedWork>,
    clusters: Writer<Cluster>,
    namespaces: Writer<Namespace>,
    override_policies: Writer<OverridePolicy>,
    cluster_override_policies: Writer<ClusterOverridePolicy>,
    taint_policies: Writer<ClusterTaintPolicy>,
}

/// Empty caches and their writers.
pub fn stores() -> (Stores, Writers) {
    let (bindings, bindings_writer) = Cache::new();
    let (cluster_bindings, cluster_bindings_writer) = Cache::new();
    let (works, works_writer) = Cache::new();
    let (clusters, clusters_writer) = reflector::store();
    let (namespaces, namespaces_writer) = reflector::store();
    let (override_policies, override_policies_writer) = reflector::store();
    let (cluster_override_policies, cluster_override_policies_writer) = reflector::store();
    let (taint_policies, taint_policies_writer) = reflector::store();
    (
        Stores {
            bindings,
            cluster_bindings,
            works,
            clusters,
            namespaces,
            override_policies,
            cluster_override_policies,
            taint_policies,
        },
        Writers {
            bindings: bindings_writer,
            cluster_bindings: cluster_bindings_writer,
            works: works_writer,
            clusters: clusters_writer,
            namespaces: namespaces_writer,
            override_policies: override_policies_writer,
            cluster_override_policies: cluster_override_policies_writer,
            taint_policies: taint_policies_writer,
        },
    )
}

/// Waits until every cache has its initial list. Call it from one task only: kube's
/// `Store::wait_until_ready` wakes only the last task that polled it (see
/// [`Context::wait_synced`](crate::context::Context::wait_synced)).
pub async fn wait_synced(stores: &Stores) -> bool {
    async fn ready<K>(store: &Store<K>) -> bool
    where
        K: Resource + Clone + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        store.wait_until_ready().await.is_ok()
    }
    stores.bindings.wait_until_ready().await;
    stores.cluster_bindings.wait_until_ready().await;
    stores.works.wait_until_ready().await;
    ready(&stores.clusters).await
        && ready(&stores.namespaces).await
        && ready(&stores.override_policies).await
        && ready(&stores.cluster_override_policies).await
}

/// Starts every control-plane watch.
pub fn spawn(ctx: &Arc<Context>, writers: Writers) {
    let client = ctx.client.clone();
    spawn_cache(
        ctx,
        Api::<Watched<ResourceBinding>>::all(client.clone()),
        writers.bindings,
        |binding, _| CachedBinding::from(binding.into_binding()),
        queue_binding(ctx),
    );
    spawn_cache(
        ctx,
        Api::<Watched<ClusterResourceBinding>>::all(client.clone()),
        writers.cluster_bindings,
        |binding, _| CachedBinding::from(binding.into_binding()),
        queue_binding(ctx),
    );
    {
        let handler_ctx = ctx.clone();
        // The Work the watch just delivered, whole: `convert` keeps it here and the update it
        // makes takes it, for the worker the update queues ([`crate::arrivals`]). A relist
        // reports its updates after converting every object, so those find another Work here
        // (or none) and hold nothing.
        let delivered: Arc<Mutex<Option<Work>>> = Arc::default();
        let kept = Arc::clone(&delivered);
        let convert = move |Lean(work): Lean<Work>, previous: Option<&CachedWork>| {
            let cached = CachedWork::of(&work, previous);
            *kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(work);
            cached
        };
        let on_update = move |update: Update<'_, CachedWork>| {
            let ctx = &handler_ctx;
            let (work, deleted, old) = match update {
                Update::Applied { old, new } => (new, false, old),
                Update::Deleted(work) => (work, true, None),
                Update::Synced => return,
            };
            let whole = if deleted {
                None
            } else {
                delivered
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .filter(|whole| delivered_as(whole, work))
            };
            let Some(cluster) = cluster_of_execution_namespace(work.namespace()) else {
                return;
            };
            if let Some(key) = work.binding.clone() {
                if deleted {
                    ctx.binding_queue.add(key);
                } else {
                    crate::dispatch::queue_report(ctx, key);
                }
            }
            if let Some(namespace) = work.propagated_namespace()
                && deleted
            {
                ctx.namespace_queue.add(namespace.to_string());
            }
            let name = work.queue_name();
            if deleted {
                if let Some(member) = ctx.members.get(cluster) {
                    member.arrivals.deleted(&name);
                }
                return;
            }
            // A status-only change (the worker's own report) does not need the worker again.
            if old.map(CachedWork::worker_signature) != Some(work.worker_signature()) {
                let member = Members::ensure(ctx, cluster);
                member.arrivals.offer(&name, whole, true);
                // Deferred: under a backlog, the cluster's workers finish the Works they have
                // applied (their reports, each holding its Work until then, see
                // `Member::wait_for_report`) before they take new ones, so those Works are let
                // go first and what waits behind them holds at most the held deliveries'
                // budget (`--held-works-mib`).
                member
                    .queue
                    .add_with(name, flotilla_runtime::queue::Priority::Deferred);
            } else if let Some(member) = ctx.members.get(cluster) {
                member.arrivals.offer(&name, whole, false);
            }
        };
        spawn_cache(
            ctx,
            Api::<Lean<Work>>::all(client.clone()),
            writers.works,
            convert,
            on_update,
        );
    }
    {
        let ctx = ctx.clone();
        let mut known: BTreeSet<String> = BTreeSet::new();
        // What each cluster's taints and override selection were last computed from.
        let mut seen: HashMap<String, (Conditions, ClusterFacts)> = HashMap::new();
        run(
            Api::<Cluster>::all(client.clone()),
            writers.clusters,
            ctx.clone(),
            |_| {},
            move |event| {
                let deleted = matches!(event, Change::Deleted(_));
                let Some(cluster) = event.object() else { return };
                let name = cluster.name_any();
                let mut selection_moved = false;
                let changed = if deleted {
                    seen.remove(&name);
                    known.remove(&name)
                } else {
                    let member = Members::ensure(&ctx, &name);
                    let now = (conditions_of(cluster), ClusterFacts::of(cluster));
                    let before = seen.insert(name.clone(), now.clone());
                    if before.as_ref() != Some(&now) {
                        member.taints_now.notify_one();
                    }
                    // Override rules select clusters by labels and fields: a change re-renders
                    // the Works in that cluster.
                    selection_moved = before.is_some_and(|before| before.1 != now.1);
                    known.insert(name.clone())
                };
                if selection_moved {
                    queue_bindings_targeting(&ctx, &name);
                }
                if changed || selection_moved {
                    for namespace in ctx.stores.namespaces.state() {
                        ctx.namespace_queue.add(namespace.name_any());
                    }
                }
            },
        );
    }
    {
        let ctx = ctx.clone();
        run(
            Api::<OverridePolicy>::all(client.clone()),
            writers.override_policies,
            ctx.clone(),
            |_| {},
            move |event| {
                if let Some(policy) = event.object() {
                    queue_unmanaged_bindings(&ctx, policy.namespace().as_deref());
                }
            },
        );
    }
    {
        let ctx = ctx.clone();
        run(
            Api::<ClusterOverridePolicy>::all(client.clone()),
            writers.cluster_override_policies,
            ctx.clone(),
            |_| {},
            move |event| {
                if event.object().is_some() {
                    queue_unmanaged_bindings(&ctx, None);
                    for namespace in ctx.stores.namespaces.state() {
                        ctx.namespace_queue.add(namespace.name_any());
                    }
                }
            },
        );
    }
    {
        let ctx = ctx.clone();
        // The spec generation of each policy seen: execution's own status writes change
        // nothing the taints depend on.
        let mut generations: HashMap<String, Option<i64>> = HashMap::new();
        run(
            Api::<ClusterTaintPolicy>::all(client.clone()),
            writers.taint_policies,
            ctx.clone(),
            |_| {},
            move |event| {
                let spec_changed = match event {
                    Change::Synced => {
                        ctx.set_taint_policies_synced();
                        true
                    }
                    Change::Applied(policy) => {
                        let name = policy.name_any();
                        ctx.taint_policy_queue.add(name.clone());
                        generations.insert(name, policy.metadata.generation)
                            != Some(policy.metadata.generation)
                    }
                    Change::Deleted(policy) => generations.remove(&policy.name_any()).is_some(),
                };
                let policies = ctx.stores.taint_policies.state();
                let valid = policies.iter().filter(|p| p.validate().is_ok()).count();
                crate::metrics::metrics().set_taint_policies(valid, policies.len() - valid);
                // Policies apply across clusters (and one with a NoExecute taint changes who
                // adds NoExecute taints): every cluster looks again.
                if spec_changed {
                    for member in ctx.members.all() {
                        member.taints_now.notify_one();
                    }
                }
            },
        );
    }
    {
        let ctx = ctx.clone();
        run(
            Api::<Namespace>::all(client),
            writers.namespaces,
            ctx.clone(),
            |_| {},
            move |event| {
                if let Some(namespace) = event.object() {
                    ctx.namespace_queue.add(namespace.name_any());
                }
            },
        );
    }
}

/// A handler queueing the binding of every update.
fn queue_binding(ctx: &Arc<Context>) -> impl FnMut(Update<'_, CachedBinding>) + Send + 'static {
    let ctx = ctx.clone();
    move |update| {
        if let Some(binding) = update.value()
            && binding_needs_reconcile(&update)
        {
            ctx.binding_queue.add(binding.key.clone());
        }
    }
}

/// Whether a binding's watch update needs its reconcile: a new, listed or deleted binding
/// does; a change does when it moves the binding's [`CachedBinding::signature`] (a status write
/// alone, execution's own above all, does not).
fn binding_needs_reconcile(update: &Update<'_, CachedBinding>) -> bool {
    match update {
        Update::Applied { old: Some(old), new } => old.signature() != new.signature(),
        Update::Applied { old: None, .. } | Update::Deleted(_) => true,
        Update::Synced => false,
    }
}

/// Every cached binding, namespaced and cluster-scoped.
pub(crate) fn cached_bindings(ctx: &Context) -> impl Iterator<Item = Arc<CachedBinding>> {
    let stores = &ctx.stores;
    stores
        .bindings
        .state()
        .into_iter()
        .chain(stores.cluster_bindings.state())
}

/// The cached binding `key` names.
pub(crate) fn cached_binding(ctx: &Context, key: &BindingKey) -> Option<Arc<CachedBinding>> {
    match key.kind {
        BindingKind::ResourceBinding => ctx.stores.bindings.get(Some(&key.namespace), &key.name),
        BindingKind::ClusterResourceBinding => ctx.stores.cluster_bindings.get(None, &key.name),
    }
}

/// Queues every binding with a Work in `cluster` (its spec targets it).
fn queue_bindings_targeting(ctx: &Context, cluster: &str) {
    for binding in cached_bindings(ctx).filter(|b| b.targets(cluster)) {
        ctx.binding_queue.add(binding.key.clone());
    }
}

/// Queues the bindings rendered with the override policies as they are (those the detector
/// does not manage), for templates in `namespace` (`None`: every namespace).
fn queue_unmanaged_bindings(ctx: &Context, namespace: Option<&str>) {
    let bindings = match namespace {
        // A cluster-scoped template is in no namespace.
        Some(namespace) => ctx
            .stores
            .bindings
            .state()
            .into_iter()
            .filter(|b| b.of_namespace(namespace))
            .collect(),
        None => cached_bindings(ctx).collect::<Vec<_>>(),
    };
    for binding in bindings.into_iter().filter(|b| !b.detector_managed) {
        ctx.binding_queue.add(binding.key.clone());
    }
}

/// A cluster's conditions as (type, status): what its readiness taints are computed from,
/// besides its taints, labels, fields and the policies.
type Conditions = Vec<(String, String)>;

fn conditions_of(cluster: &Cluster) -> Conditions {
    cluster
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect()
}

/// Whether `whole` is the Work `cached` was converted from: the same name, namespace and
/// worker signature.
fn delivered_as(whole: &Work, cached: &CachedWork) -> bool {
    whole.metadata.name.as_deref() == Some(cached.name())
        && whole.metadata.namespace.as_deref() == Some(cached.namespace())
        && worker_signature_of(whole) == cached.worker_signature()
}

/// Runs the watch of `api` into the compact cache of `writer` on a task of its own (`convert`
/// given what the cache held for the object, as [`flotilla_runtime::cache::run_with_previous`]),
/// calling `on_update` for every update, until shutdown.
fn spawn_cache<K, V, C, F>(ctx: &Arc<Context>, api: Api<K>, writer: CacheWriter<V>, convert: C, on_update: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: flotilla_runtime::cache::Keyed + Send + Sync + 'static,
    C: FnMut(K, Option<&V>) -> V + Send + 'static,
    F: FnMut(Update<'_, V>) + Send + 'static,
{
    let shutdown = ctx.shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = flotilla_runtime::cache::run_with_previous(api, writer, convert, on_update) => {}
        }
    });
}

/// Runs the watch of `api` into `writer` on a task of its own, calling `on_change` for every
/// change, until shutdown.
fn run<K, T, F>(api: Api<K>, writer: Writer<K>, ctx: Arc<Context>, trim: T, on_change: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
    T: FnMut(&mut K) + Send + 'static,
    F: FnMut(Change<'_, K>) + Send + 'static,
{
    tokio::spawn(async move {
        tokio::select! {
            () = ctx.shutdown.cancelled() => {}
            () = flotilla_runtime::watch::run_trimmed(api, writer, trim, on_change) => {}
        }
    });
}
