//! The watches that feed the work queue, the index and the caches:
//!
//! - ResourceBindings and ClusterResourceBindings ([`watch_bindings`]): fill the caches and the
//!   index, and queue what a change affects (see [`crate::index::Index::applied`]);
//! - the objects of every dependency kind ([`watch_dependency_kinds`]): ConfigMaps, Secrets,
//!   PersistentVolumeClaims and ServiceAccounts from the start, plus every kind a binding
//!   references (rule kinds, CRDs) as soon as it is referenced; a change of a referenced
//!   object queues its attached binding, so a dependency created after its workload gets one;
//! - the rules ConfigMap ([`watch_rules_config_map`]) and the rules file
//!   ([`poll_rules_file`]).
//!
//! Workers only start once the binding caches, the rules ConfigMap and the rules file have
//! been read once ([`SyncGate`]): a decision made on a partial view (a binding not yet listed, a
//! rule not yet loaded) could delete an attached binding that is still needed.

use std::collections::HashSet;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use flotilla_interpreter::DependencyRef;
use flotilla_runtime::Shutdown;
use flotilla_runtime::cache::{CacheWriter, Update};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::EventType;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::binding::{BindingView, StoredView};
use crate::controller::{Context, Processed};
use crate::index::Key;
use crate::metrics::metrics;
use crate::rules::{CONFIG_MAP_NAME, CONFIG_MAP_NAMESPACE, Source, config_map_text};

/// Readiness check: every cache has been filled once.
pub const CHECK_SYNCED: &str = "caches-synced";
/// Readiness line about the dependency rules (always passing; the message says whether a
/// source is rejected).
pub const CHECK_RULES: &str = "dependency-rules";

/// The parts that must be read once before workers may act.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncPart {
    /// The ResourceBinding cache.
    ResourceBindings,
    /// The ClusterResourceBinding cache.
    ClusterResourceBindings,
    /// The rules ConfigMap.
    RulesConfigMap,
    /// The rules file.
    RulesFile,
}

/// Tracks which parts have been read once.
#[derive(Clone, Debug)]
pub struct SyncGate {
    pending: watch::Sender<HashSet<SyncPart>>,
}

impl SyncGate {
    /// A gate waiting for `parts`.
    pub fn new(parts: impl IntoIterator<Item = SyncPart>) -> Self {
        let (pending, _) = watch::channel(parts.into_iter().collect());
        Self { pending }
    }

    /// Marks `part` read.
    pub fn done(&self, part: SyncPart) {
        self.pending.send_modify(|pending| {
            pending.remove(&part);
        });
    }

    /// Whether every part has been read.
    pub fn is_open(&self) -> bool {
        self.pending.borrow().is_empty()
    }

    /// Waits until every part has been read.
    pub async fn opened(&self) {
        let mut receiver = self.pending.subscribe();
        let _ = receiver.wait_for(HashSet::is_empty).await;
    }
}

/// Watches one binding kind into its cache until `shutdown`. The cache keeps each binding as
/// its [`BindingView`] (`view_of`), the fields the distributor acts on, converted once per event
/// and packed ([`StoredView`]); the event's handler reads the view back to update the index.
pub async fn watch_bindings<K>(
    ctx: Arc<Context>,
    api: Api<K>,
    writer: CacheWriter<StoredView>,
    view_of: fn(K) -> BindingView,
    part: SyncPart,
    gate: SyncGate,
    shutdown: Shutdown,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let on_update = move |update: Update<'_, StoredView>| {
        match update {
            Update::Applied { new, .. } => {
                let view = &new.view();
                for dep in &view.dependencies {
                    ctx.watch_kind_of(dep);
                }
                if !view.required_by.is_empty() {
                    ctx.watch_kind_of(&view.resource_as_dependency());
                }
                let keys = ctx.index().applied(view);
                ctx.enqueue(keys);
            }
            // Also a binding deleted while the watch was down (a relist no longer holds it).
            Update::Deleted(stored) => {
                let keys = ctx.index().deleted(&stored.view().key);
                ctx.enqueue(keys);
            }
            Update::Synced => {
                gate.done(part);
                debug!(kind = K::kind(&()).as_ref(), "binding cache synced");
            }
        }
        metrics().set_attached_bindings(ctx.index().attached_count());
    };
    tokio::select! {
        _ = shutdown.cancelled() => {}
        () = flotilla_runtime::cache::run(api, writer, move |binding| StoredView::of(&view_of(binding)), on_update) => {}
    }
}

/// Starts a watch for every kind requested on `requests` (each once), until `shutdown`.
pub async fn watch_dependency_kinds(
    ctx: Arc<Context>,
    mut requests: UnboundedReceiver<(String, String)>,
    shutdown: Shutdown,
) {
    let mut started = HashSet::new();
    loop {
        let request = tokio::select! {
            _ = shutdown.cancelled() => return,
            request = requests.recv() => request,
        };
        let Some(kind) = request else { return };
        if started.insert(kind.clone()) {
            debug!(api_version = %kind.0, kind = %kind.1, "watching dependency objects");
            tokio::spawn(watch_dependency_kind(
                ctx.clone(),
                kind.0,
                kind.1,
                shutdown.clone(),
            ));
        }
    }
}

async fn watch_dependency_kind(ctx: Arc<Context>, api_version: String, kind: String, shutdown: Shutdown) {
    let mut delay = Duration::from_secs(1);
    let resolved = loop {
        match ctx.kinds.resolve(&api_version, &kind).await {
            Ok(Some(resolved)) => break resolved,
            Ok(None) => debug!(%api_version, %kind, "kind not served yet; watching it once it is"),
            Err(error) => warn!(%api_version, %kind, %error, "cannot discover a dependency kind; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(60));
    };
    // Metadata only: a change is turned into a queued key, and Secrets' data never enters this
    // process through the watch. `Api<PartialObjectMeta<_>>` lists and watches with the
    // metadata-only Accept header (`as=PartialObjectMetadata`), so the server sends metadata.
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(ctx.client.clone(), &resolved.resource);
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else { return };
        let object = match event {
            Ok(Event::InitApply(object) | Event::Apply(object) | Event::Delete(object)) => object,
            Ok(Event::Init | Event::InitDone) => continue,
            Err(error) => {
                warn!(%api_version, %kind, %error, "dependency watch failed; retrying");
                continue;
            }
        };
        let dep = DependencyRef {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: object.metadata.namespace.clone().filter(|ns| !ns.is_empty()),
            name: object.metadata.name.clone().unwrap_or_default(),
        };
        if ctx.index().is_relevant(&dep) {
            ctx.enqueue([Key::Object(dep)]);
        }
    }
}

/// Applies a new state of one rules source: metrics, readiness, logs, events, and recomputing
/// every binding's dependencies when the rules in force changed.
pub async fn update_rules(
    ctx: &Context,
    source: &Source,
    content: Result<Option<String>, String>,
    config_map: Option<&ConfigMap>,
) {
    let (update, errors, kinds) = {
        let mut rules = ctx.rules.write().unwrap_or_else(|p| p.into_inner());
        let update = rules.update(source, content);
        (update, rules.errors(), rules.rules().kinds().count())
    };
    metrics().set_rules_valid(source.label(), update.error.is_none());
    let message = if errors.is_empty() {
        format!("{kinds} workload kind(s) with declarative rules")
    } else {
        format!("serving the last good rules; rejected: {}", errors.join("; "))
    };
    ctx.readiness.set(CHECK_RULES, true, message);
    if let Some(error) = &update.error {
        error!("{error}");
        if let Some(config_map) = config_map {
            let regarding = config_map.object_ref(&());
            ctx.publish(
                regarding,
                EventType::Warning,
                "InvalidDependencyRules",
                error.clone(),
            )
            .await;
        }
    }
    if update.changed {
        let bindings = ctx.index().distributing_bindings();
        info!(%source, bindings = bindings.len(), "dependency rules changed; recomputing dependencies");
        ctx.enqueue(bindings.into_iter().map(Key::Binding));
    }
}

/// Watches the rules ConfigMap until `shutdown`.
pub async fn watch_rules_config_map(ctx: Arc<Context>, gate: SyncGate, shutdown: Shutdown) {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), CONFIG_MAP_NAMESPACE);
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut seen = false;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else { return };
        match event {
            Ok(Event::Init) => seen = false,
            Ok(Event::InitApply(config_map) | Event::Apply(config_map)) => {
                if config_map.metadata.name.as_deref() == Some(CONFIG_MAP_NAME) {
                    seen = true;
                    let content = config_map_text(config_map.data.as_ref()).map(Some);
                    update_rules(&ctx, &Source::ConfigMap, content, Some(&config_map)).await;
                }
            }
            Ok(Event::Delete(config_map)) => {
                if config_map.metadata.name.as_deref() == Some(CONFIG_MAP_NAME) {
                    seen = false;
                    update_rules(&ctx, &Source::ConfigMap, Ok(None), None).await;
                }
            }
            Ok(Event::InitDone) => {
                if !seen {
                    update_rules(&ctx, &Source::ConfigMap, Ok(None), None).await;
                }
                gate.done(SyncPart::RulesConfigMap);
            }
            Err(error) => warn!(%error, "rules ConfigMap watch failed; retrying"),
        }
    }
}

/// Reads the rules file now and then every `interval` until `shutdown`. A file that cannot
/// be read is an error that keeps the last good rules, like invalid content.
pub async fn poll_rules_file(
    ctx: Arc<Context>,
    path: PathBuf,
    interval: Duration,
    gate: SyncGate,
    shutdown: Shutdown,
) {
    let source = Source::File(path.display().to_string());
    loop {
        let content = match tokio::fs::read_to_string(&path).await {
            Ok(text) => Ok(Some(text)),
            Err(error) => Err(format!("{source}: cannot read it: {error}")),
        };
        update_rules(&ctx, &source, content, None).await;
        gate.done(SyncPart::RulesFile);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// Every `period`, until `shutdown`, queues every distributing binding that is not settled
/// ([`crate::index::Index::settled`]: its dependencies read with success at its current
/// template inputs and rules) and every dependency, which is left alone when the caches show
/// its attached binding as they ask ([`crate::plan::settled`]): a safety net under the
/// watches that reads nothing for what is settled. What could change a settled binding's
/// dependencies reaches the binding watch (the detector moves `spec.resource.resourceVersion`
/// with every content change of the template) or moves the rules generation; a dependency
/// object's change reaches its watch, which lists again after any gap (ADR 0026).
pub async fn resync(ctx: Arc<Context>, period: Duration, shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let rules_generation = ctx.rules_generation();
        let ((bindings, settled), deps) = {
            let index = ctx.index();
            (
                index.unsettled_bindings(rules_generation),
                index.all_dependencies(),
            )
        };
        debug!(
            bindings = bindings.len(),
            settled,
            dependencies = deps.len(),
            "resync"
        );
        metrics().resynced(bindings.len(), settled);
        ctx.enqueue(bindings.into_iter().map(Key::Binding));
        ctx.enqueue(deps.into_iter().map(Key::Dependency));
    }
}

/// Processes queued keys until the queue shuts down.
pub async fn worker(ctx: Arc<Context>) {
    while let Some(key) = ctx.queue.next().await {
        let started = std::time::Instant::now();
        let kind = match *key {
            Key::Binding(_) => "binding",
            Key::Dependency(_) | Key::Object(_) => "dependency",
        };
        match ctx.process(&key).await {
            Ok(Processed::Reconciled) => {
                metrics().reconciled(kind, true, started.elapsed());
                ctx.queue.forget(&key);
            }
            Ok(Processed::Settled) => {
                metrics().left_settled(kind);
                ctx.queue.forget(&key);
            }
            Err(error) => {
                metrics().reconciled(kind, false, started.elapsed());
                let delay = ctx.queue.add_rate_limited(key.clone());
                warn!(%error, retry_in = ?delay, "reconcile failed");
            }
        }
        ctx.queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_opens_when_every_part_is_read() {
        let gate = SyncGate::new([SyncPart::ResourceBindings, SyncPart::RulesConfigMap]);
        assert!(!gate.is_open());
        gate.done(SyncPart::ResourceBindings);
        gate.done(SyncPart::ResourceBindings);
        assert!(!gate.is_open());
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.opened().await })
        };
        gate.done(SyncPart::RulesConfigMap);
        waiter.await.unwrap();
        assert!(gate.is_open());
        // Parts not waited for change nothing.
        gate.done(SyncPart::RulesFile);
        assert!(gate.is_open());
    }
}
