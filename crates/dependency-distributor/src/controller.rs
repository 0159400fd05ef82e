//! The reconcilers: thin I/O around [`crate::plan`].
//!
//! - [`Context::reconcile_binding`]: an independent binding. Reads its template, computes its
//!   dependencies with [`flotilla_interpreter::dependencies`], records them in the binding's
//!   `resourcebinding.karmada.io/dependencies` annotation (so that a reference removed from the
//!   template is known after a restart), then reconciles the attached binding of every old and
//!   new dependency.
//! - [`Context::reconcile_dependency`]: one dependency's attached binding. Its `requiredBy` is
//!   computed from scratch from every binding that records the dependency (the watches' index
//!   and caches), never merged into what was there, so a snapshot of a binding that is gone or
//!   no longer needs the dependency cannot survive a reconcile.
//!
//! Every write is a JSON merge patch of the distributor's own fields with a `resourceVersion`
//! precondition (a conflict retries the reconcile), and nothing is written when nothing changed.

use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, RwLock};

use flotilla_api::well_known::{DEPENDENCIES_ANNOTATION, FIELD_MANAGER, TRACE_PARENT_ANNOTATION};
use flotilla_api::{BindingSnapshot, ClusterResourceBinding, ResourceBinding, ResourceBindingSpec};
use flotilla_interpreter::{DependencyRef, dependencies};
use flotilla_proto::v1::BindingRef;
use flotilla_proto::v1::ScheduleRequest;
use flotilla_proto::v1::scheduler_client::SchedulerClient;
use flotilla_rpc::{Readiness, RetryPolicy, TracedChannel};
use flotilla_runtime::cache::Cache;
use flotilla_runtime::events::Recorder;
use flotilla_runtime::queue::WorkQueue;
use k8s_openapi::api::core::v1::ObjectReference as CoreObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tracing::{Instrument, debug, info, warn};

use crate::binding::{
    BindingKey, BindingView, StoredView, TEMPLATE_FINGERPRINT_ANNOTATION, dependencies_annotation,
    describe_dependency,
};
use crate::fingerprint::fingerprint;
use crate::index::{Index, Key, template_digest};
use crate::kinds::{Kinds, Resolved};
use crate::metrics::metrics;
use crate::plan::{
    ObjectState, Plan, Resolution, desired_required_by, plan, resolve, set_conflict_condition,
};
use crate::rules::RulesSet;

/// How many lock stripes serialise reconciles of the same dependency within the process.
const LOCK_STRIPES: usize = 64;

/// A reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("cannot {action} {object}: {source}")]
    Api {
        /// What was attempted, e.g. `patch`.
        action: &'static str,
        /// The object, e.g. `ResourceBinding default/app-config-configmap`.
        object: String,
        /// Why.
        source: kube::Error,
    },
    /// The object changed between reading and writing it (HTTP 409).
    #[error("{object} changed while it was being updated; retrying")]
    Conflict {
        /// The object.
        object: String,
    },
}

fn api_error(action: &'static str, object: impl ToString) -> impl FnOnce(kube::Error) -> ReconcileError {
    move |source| match &source {
        kube::Error::Api(status) if status.is_conflict() => ReconcileError::Conflict {
            object: object.to_string(),
        },
        _ => ReconcileError::Api {
            action,
            object: object.to_string(),
            source,
        },
    }
}

/// A reference to an attached binding after a reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedRef {
    /// Which binding.
    pub key: BindingKey,
    /// Its `metadata.generation`.
    pub generation: i64,
    /// Its `metadata.uid`.
    pub uid: String,
}

impl AttachedRef {
    fn of(view: &BindingView) -> Self {
        Self {
            key: view.key.clone(),
            generation: view.generation.unwrap_or_default(),
            uid: view.uid.clone().unwrap_or_default(),
        }
    }

    /// The gRPC form.
    pub fn binding_ref(&self) -> BindingRef {
        match &self.key.namespace {
            Some(namespace) => {
                BindingRef::resource_binding(namespace, &self.key.name, self.generation, &self.uid)
            }
            None => BindingRef::cluster_resource_binding(&self.key.name, self.generation, &self.uid),
        }
    }
}

/// What [`Context::reconcile_binding`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BindingOutcome {
    /// The binding exists.
    pub found: bool,
    /// Something was written.
    pub changed: bool,
    /// The attached bindings that list this binding in `requiredBy` afterwards.
    pub attached: Vec<AttachedRef>,
}

/// What [`Context::reconcile_dependency`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DependencyOutcome {
    /// Something was written.
    pub changed: bool,
    /// The attached binding, if it exists afterwards.
    pub attached: Option<AttachedRef>,
}

/// The dependencies read from a template.
enum TemplateDependencies {
    /// The template's dependencies under the rules of `rules_generation`.
    Read {
        deps: Vec<DependencyRef>,
        rules_generation: u64,
    },
    /// The template or its kind is gone: no dependencies.
    Gone,
    /// The template cannot be interpreted; keep what was recorded.
    Unreadable,
}

/// What [`Context::process`] did with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processed {
    /// Reconciled.
    Reconciled,
    /// Left alone: a binding [settled](Index::settled) as the watch last delivered it, or an
    /// attached binding the caches show as it should be ([`crate::plan::settled`]).
    Settled,
}

/// Everything the reconcilers share.
pub struct Context {
    /// The control-plane client.
    pub client: Client,
    /// Cache of ResourceBindings as the views the distributor acts on, packed (filled by the
    /// binding watch).
    pub resource_bindings: Cache<StoredView>,
    /// Cache of ClusterResourceBindings, likewise.
    pub cluster_resource_bindings: Cache<StoredView>,
    /// Who references what.
    pub index: Mutex<Index>,
    /// The dependency rules in force.
    pub rules: RwLock<RulesSet>,
    /// Kind resolution for the dynamic API.
    pub kinds: Kinds,
    /// Publishes events.
    pub recorder: Recorder,
    /// The scheduler, told about every attached binding the distributor changes.
    pub scheduler: SchedulerClient<TracedChannel>,
    /// Work waiting for the workers. A key is queued as one allocation that the queue's
    /// waiting list and its set share (a [`Key`] is 96 bytes and up to four strings).
    pub queue: WorkQueue<Arc<Key>>,
    /// Readiness checks.
    pub readiness: Readiness,
    /// Asks the watch manager to watch objects of a kind.
    pub watch_requests: UnboundedSender<(String, String)>,
    locks: Vec<tokio::sync::Mutex<()>>,
}

impl Context {
    /// A context over the given caches and clients.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        resource_bindings: Cache<StoredView>,
        cluster_resource_bindings: Cache<StoredView>,
        rules: RulesSet,
        recorder: Recorder,
        scheduler: SchedulerClient<TracedChannel>,
        queue: WorkQueue<Arc<Key>>,
        readiness: Readiness,
        watch_requests: UnboundedSender<(String, String)>,
    ) -> Self {
        Self {
            kinds: Kinds::new(client.clone()),
            client,
            resource_bindings,
            cluster_resource_bindings,
            index: Mutex::new(Index::new()),
            rules: RwLock::new(rules),
            recorder,
            scheduler,
            queue,
            readiness,
            watch_requests,
            locks: (0..LOCK_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }

    /// The index, locked.
    pub fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `keys`.
    pub fn enqueue(&self, keys: impl IntoIterator<Item = Key>) {
        for key in keys {
            self.queue.add(Arc::new(key));
        }
    }

    /// Asks for the objects of `dep`'s kind to be watched (idempotent).
    pub fn watch_kind_of(&self, dep: &DependencyRef) {
        let _ = self
            .watch_requests
            .send((dep.api_version.clone(), dep.kind.clone()));
    }

    /// Which rules are in force ([`RulesSet::generation`]).
    pub fn rules_generation(&self) -> u64 {
        self.rules.read().unwrap_or_else(|p| p.into_inner()).generation()
    }

    /// Processes one queued key. A binding that is [settled](Index::settled) as the watch last
    /// delivered it is left alone: the reconcile would read the template at the inputs its
    /// dependencies were read at and find them again (the echo of this process's own
    /// annotation write, a resync, a pickup after `SyncDependencies` did the work). So is a
    /// [`Key::Dependency`] whose attached binding the caches show as they ask
    /// ([`crate::plan::settled`]); a [`Key::Object`] is always reconciled.
    pub async fn process(&self, key: &Key) -> Result<Processed, ReconcileError> {
        match key {
            Key::Binding(binding) => {
                let rules_generation = self.rules_generation();
                if self.index().settled(binding, rules_generation) {
                    return Ok(Processed::Settled);
                }
                let span = tracing::info_span!("reconcile_binding", binding = %binding);
                if let Some(traceparent) = self.cached_binding(binding).and_then(|v| v.traceparent) {
                    flotilla_telemetry::propagation::link_to_traceparent(&span, &traceparent);
                }
                self.reconcile_binding(binding)
                    .instrument(span)
                    .await
                    .map(|_| Processed::Reconciled)
            }
            Key::Dependency(dep) if self.attached_settled(dep) => Ok(Processed::Settled),
            Key::Dependency(dep) | Key::Object(dep) => {
                let span =
                    tracing::info_span!("reconcile_dependency", dependency = %describe_dependency(dep));
                for binding in self.index().referencing(dep) {
                    if let Some(traceparent) = self.cached_binding(&binding).and_then(|v| v.traceparent) {
                        flotilla_telemetry::propagation::link_to_traceparent(&span, &traceparent);
                    }
                }
                self.reconcile_dependency(dep, None)
                    .instrument(span)
                    .await
                    .map(|_| Processed::Reconciled)
            }
        }
    }

    // ----- independent bindings ---------------------------------------------------------

    /// Reconciles an independent binding: records its template's dependencies and makes the
    /// attached binding of every old and new dependency match. The template is not read when
    /// its dependencies were already read at the binding's template inputs and the rules in
    /// force ([`Index::dependencies_read`]): its annotation records them.
    pub async fn reconcile_binding(&self, key: &BindingKey) -> Result<BindingOutcome, ReconcileError> {
        let Some(mut view) = self.get_binding(key).await? else {
            debug!(binding = %key, "binding is gone; its dependencies are reconciled from the watch");
            return Ok(BindingOutcome::default());
        };
        let previous = view.dependencies.clone();
        // The rules generation the template was read under, to record once every write succeeded.
        let mut read_under = None;
        let rules_generation = self.rules_generation();
        let deps = if !view.distributes() {
            Vec::new()
        } else if self
            .index()
            .dependencies_read(key, template_digest(&view), rules_generation)
        {
            metrics().template_read(false);
            previous.clone()
        } else {
            metrics().template_read(true);
            match self.template_dependencies(&view).await? {
                TemplateDependencies::Read {
                    deps,
                    rules_generation,
                } => {
                    read_under = Some(rules_generation);
                    deps
                }
                TemplateDependencies::Gone => Vec::new(),
                TemplateDependencies::Unreadable => previous.clone(),
            }
        };
        let mut outcome = BindingOutcome {
            found: true,
            ..Default::default()
        };
        let annotation = (!deps.is_empty()).then(|| dependencies_annotation(&deps));
        if view.dependencies_annotation != annotation {
            let patch = json!({"metadata": {"annotations": {DEPENDENCIES_ANNOTATION: annotation}}});
            self.patch_binding(key, &patch).await?;
            info!(binding = %key, dependencies = deps.len(), "recorded the template's dependencies");
            outcome.changed = true;
            view.dependencies_annotation = annotation;
            view.dependencies = deps.clone();
        }
        for dep in &deps {
            self.watch_kind_of(dep);
        }
        let all: BTreeSet<&DependencyRef> = previous.iter().chain(deps.iter()).collect();
        let mut first_error = None;
        for dep in all {
            match self.reconcile_dependency(dep, Some(&view)).await {
                Ok(result) => {
                    outcome.changed |= result.changed;
                    if let Some(attached) = result.attached
                        && view.requires(dep)
                    {
                        outcome.attached.push(attached);
                    }
                }
                Err(error) => {
                    warn!(binding = %key, dependency = %describe_dependency(dep), %error, "reconciling a dependency failed");
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => {
                if let Some(rules_generation) = read_under {
                    self.index()
                        .record_dependencies_read(key, template_digest(&view), rules_generation);
                }
                Ok(outcome)
            }
        }
    }

    async fn template_dependencies(
        &self,
        view: &BindingView,
    ) -> Result<TemplateDependencies, ReconcileError> {
        let resource = &view.resource;
        let template_name = format!(
            "template {} {} of {}",
            resource.api_version,
            crate::binding::short_key(resource.namespace.as_deref(), &resource.name),
            view.key
        );
        let Some(kind) = self
            .kinds
            .resolve(&resource.api_version, &resource.kind)
            .await
            .map_err(api_error("discover the kind of", &template_name))?
        else {
            debug!(binding = %view.key, kind = %resource.kind, "the template's kind is not served; no dependencies");
            return Ok(TemplateDependencies::Gone);
        };
        // A JSON tree without managedFields (`flotilla_runtime::object`): the dependency rules
        // read the spec.
        let url_path = url_path(&kind, resource.namespace.as_deref());
        let Some(value) = flotilla_runtime::object::get(&self.client, &url_path, &resource.name)
            .await
            .map_err(api_error("read", &template_name))?
        else {
            debug!(binding = %view.key, "the template is gone; no dependencies");
            return Ok(TemplateDependencies::Gone);
        };
        let (rules, rules_generation) = {
            let set = self.rules.read().unwrap_or_else(|p| p.into_inner());
            (set.rules().clone(), set.generation())
        };
        let deps = match dependencies(&value, &rules) {
            Ok(deps) => deps,
            Err(error) => {
                warn!(binding = %view.key, %error, "cannot find the template's dependencies; keeping the recorded ones");
                self.publish(
                    binding_reference(view),
                    EventType::Warning,
                    "DependencyInterpretError",
                    format!("cannot find the dependencies of the template: {error}"),
                )
                .await;
                return Ok(TemplateDependencies::Unreadable);
            }
        };
        let mut valid = Vec::with_capacity(deps.len());
        for dep in deps {
            match self.kinds.resolve(&dep.api_version, &dep.kind).await {
                Ok(Some(kind)) if kind.namespaced && dep.namespace.is_none() => {
                    let message = format!(
                        "dependency {} has no namespace, but {} is namespaced; give the rule's reference a namespacePath",
                        describe_dependency(&dep),
                        dep.kind
                    );
                    warn!(binding = %view.key, "{message}");
                    self.publish(
                        binding_reference(view),
                        EventType::Warning,
                        "InvalidDependency",
                        message,
                    )
                    .await;
                }
                Ok(Some(kind)) if !kind.namespaced && dep.namespace.is_some() => {
                    let message = format!(
                        "dependency {} has a namespace, but {} is cluster-scoped; mark the rule's reference clusterScoped: true",
                        describe_dependency(&dep),
                        dep.kind
                    );
                    warn!(binding = %view.key, "{message}");
                    self.publish(
                        binding_reference(view),
                        EventType::Warning,
                        "InvalidDependency",
                        message,
                    )
                    .await;
                }
                // Served and well-scoped, or not served yet (a CRD installed later is picked up
                // by the kind's watch once it is discovered).
                _ => valid.push(dep),
            }
        }
        Ok(TemplateDependencies::Read {
            deps: valid,
            rules_generation,
        })
    }

    // ----- attached bindings ------------------------------------------------------------

    fn lock_for(&self, dep: &DependencyRef) -> &tokio::sync::Mutex<()> {
        let mut hasher = DefaultHasher::new();
        dep.hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % LOCK_STRIPES as u64).unwrap_or(0);
        &self.locks[stripe]
    }

    /// The bindings that record `dep`, from the caches, with `overlay` (a binding just read and
    /// updated by the caller) in place of its cached version.
    fn referencing_views(&self, dep: &DependencyRef, overlay: Option<&BindingView>) -> Vec<BindingView> {
        let keys = self.index().referencing(dep);
        let mut views: Vec<BindingView> = keys
            .iter()
            .filter(|key| overlay.is_none_or(|o| &o.key != *key))
            .filter_map(|key| self.cached_binding(key))
            .collect();
        if let Some(overlay) = overlay {
            views.push(overlay.clone());
        }
        views
    }

    /// What the bindings that record `dep` (from the caches, `overlay` in place of its cached
    /// version) ask of its attached binding: its `requiredBy`, and the fields resolved from the
    /// bindings that require it.
    fn asked(
        &self,
        dep: &DependencyRef,
        overlay: Option<&BindingView>,
    ) -> (Vec<BindingSnapshot>, Resolution) {
        let candidates = self.referencing_views(dep, overlay);
        let required_by = desired_required_by(dep, candidates.iter());
        let requiring: Vec<&BindingView> = candidates.iter().filter(|v| v.requires(dep)).collect();
        (required_by, resolve(&requiring))
    }

    /// Whether `dep`'s attached binding, as cached, is already what the cached bindings that
    /// record `dep` ask for ([`crate::plan::settled`]).
    fn attached_settled(&self, dep: &DependencyRef) -> bool {
        let (required_by, resolution) = self.asked(dep, None);
        let existing = self.cached_binding(&BindingKey::attached_to(dep));
        crate::plan::settled(dep, existing.as_ref(), &required_by, &resolution)
    }

    /// Reconciles `dep`'s attached binding (see [`crate::plan::plan`]).
    pub async fn reconcile_dependency(
        &self,
        dep: &DependencyRef,
        overlay: Option<&BindingView>,
    ) -> Result<DependencyOutcome, ReconcileError> {
        let _guard = self.lock_for(dep).lock().await;
        let (required_by, resolution) = self.asked(dep, overlay);
        let key = BindingKey::attached_to(dep);
        let existing = self.get_binding(&key).await?;
        let object = self.get_object(dep).await?;
        let decision = plan(
            dep,
            object.as_ref(),
            existing.as_ref(),
            &required_by,
            &resolution.fields,
        );
        let mut outcome = DependencyOutcome::default();
        let after = match decision {
            Plan::Nothing => existing,
            Plan::WaitForDeletion => {
                debug!(binding = %key, "attached binding is being deleted; waiting");
                self.queue.add_after(
                    Arc::new(Key::Object(dep.clone())),
                    std::time::Duration::from_secs(2),
                );
                return Ok(outcome);
            }
            Plan::NameTaken { message } => {
                warn!(binding = %key, dependency = %describe_dependency(dep), "{message}");
                if let Some(existing) = &existing {
                    self.publish(
                        binding_reference(existing),
                        EventType::Warning,
                        "DependencyNameTaken",
                        message,
                    )
                    .await;
                }
                return Ok(outcome);
            }
            Plan::Delete { reason } => {
                let Some(existing) = existing else {
                    return Ok(outcome);
                };
                self.delete_binding(&existing).await?;
                metrics().wrote("delete");
                info!(binding = %key, dependency = %describe_dependency(dep), "deleted the attached binding: {reason}");
                outcome.changed = true;
                return Ok(outcome);
            }
            Plan::Create { spec, fingerprint } => {
                let Some(object) = &object else {
                    return Ok(outcome);
                };
                let created = self
                    .create_binding(&key, dep, object, *spec, &fingerprint)
                    .await?;
                metrics().wrote("create");
                info!(binding = %key, dependency = %describe_dependency(dep), required_by = required_by.len(), "created the attached binding");
                outcome.changed = true;
                self.request_schedule(&created);
                Some(created)
            }
            Plan::Patch(mut patch) => {
                let Some(existing) = existing else {
                    return Ok(outcome);
                };
                add_precondition(&mut patch, existing.resource_version.as_deref());
                let patched = self.patch_binding(&key, &patch).await?;
                metrics().wrote("patch");
                info!(binding = %key, dependency = %describe_dependency(dep), required_by = required_by.len(), "updated the attached binding");
                outcome.changed = true;
                self.request_schedule(&patched);
                Some(patched)
            }
        };
        if let Some(view) = &after {
            if !view.claimed {
                outcome.changed |= self
                    .update_conflict_condition(view, &resolution.disagreements)
                    .await?;
            }
            outcome.attached = Some(AttachedRef::of(view));
        }
        Ok(outcome)
    }

    async fn update_conflict_condition(
        &self,
        view: &BindingView,
        disagreements: &[String],
    ) -> Result<bool, ReconcileError> {
        let mut conditions = view.conditions.clone();
        if !set_conflict_condition(&mut conditions, disagreements, Timestamp::now()) {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": view.resource_version},
            "status": {"conditions": conditions},
        });
        let params = patch_params();
        let object = view.key.to_string();
        match &view.key.namespace {
            Some(namespace) => Api::<ResourceBinding>::namespaced(self.client.clone(), namespace)
                .patch_status(&view.key.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
            None => Api::<ClusterResourceBinding>::all(self.client.clone())
                .patch_status(&view.key.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
        }
        .map_err(api_error("update the status of", &object))?;
        metrics().wrote("status");
        if disagreements.is_empty() {
            info!(binding = %view.key, "the bindings that require the dependency agree again");
        } else {
            let message = disagreements.join("; ");
            warn!(binding = %view.key, "referencing bindings disagree: {message}");
            self.publish(
                binding_reference(view),
                EventType::Warning,
                crate::plan::DEPENDENCY_CONFLICT,
                message,
            )
            .await;
        }
        Ok(true)
    }

    /// Tells the scheduler about a changed attached binding, without waiting: a scheduler
    /// that is down never holds up the distributor (its own watch catches up).
    fn request_schedule(&self, view: &BindingView) {
        let binding = Some(AttachedRef::of(view).binding_ref());
        let request = ScheduleRequest { binding };
        let client = self.scheduler.clone();
        let key = view.key.clone();
        tokio::spawn(
            async move {
                let result = flotilla_rpc::call("flotilla.v1.Scheduler/Schedule", &RetryPolicy::default(), || {
                    let mut client = client.clone();
                    let request = request.clone();
                    async move { client.schedule(request).await }
                })
                .await;
                match result {
                    Ok(_) => debug!(binding = %key, "scheduler notified"),
                    Err(status) => {
                        debug!(binding = %key, code = ?status.code(), message = status.message(), "scheduler not reached; its watch will pick the change up")
                    }
                }
            }
            .in_current_span(),
        );
    }

    // ----- API helpers --------------------------------------------------------------------

    /// The cached view of a binding.
    pub fn cached_binding(&self, key: &BindingKey) -> Option<BindingView> {
        let view = match &key.namespace {
            Some(namespace) => self.resource_bindings.get(Some(namespace), &key.name),
            None => self.cluster_resource_bindings.get(None, &key.name),
        };
        view.map(|stored| stored.view())
    }

    /// Reads a binding from the API (not the cache: decisions to write are made on current
    /// state).
    pub async fn get_binding(&self, key: &BindingKey) -> Result<Option<BindingView>, ReconcileError> {
        match &key.namespace {
            Some(namespace) => Api::<ResourceBinding>::namespaced(self.client.clone(), namespace)
                .get_opt(&key.name)
                .await
                .map(|b| b.map(|b| BindingView::of_resource_binding(&b))),
            None => Api::<ClusterResourceBinding>::all(self.client.clone())
                .get_opt(&key.name)
                .await
                .map(|b| b.map(|b| BindingView::of_cluster_resource_binding(&b))),
        }
        .map_err(api_error("read", key))
    }

    async fn patch_binding(&self, key: &BindingKey, patch: &Value) -> Result<BindingView, ReconcileError> {
        let mut patch = patch.clone();
        add_traceparent(&mut patch);
        let params = patch_params();
        match &key.namespace {
            Some(namespace) => Api::<ResourceBinding>::namespaced(self.client.clone(), namespace)
                .patch(&key.name, &params, &Patch::Merge(&patch))
                .await
                .map(|b| BindingView::of_resource_binding(&b)),
            None => Api::<ClusterResourceBinding>::all(self.client.clone())
                .patch(&key.name, &params, &Patch::Merge(&patch))
                .await
                .map(|b| BindingView::of_cluster_resource_binding(&b)),
        }
        .map_err(api_error("patch", key))
    }

    async fn create_binding(
        &self,
        key: &BindingKey,
        dep: &DependencyRef,
        object: &ObjectState,
        spec: ResourceBindingSpec,
        fingerprint: &str,
    ) -> Result<BindingView, ReconcileError> {
        let mut annotations = std::collections::BTreeMap::from([(
            TEMPLATE_FINGERPRINT_ANNOTATION.to_owned(),
            fingerprint.to_owned(),
        )]);
        if let Some(traceparent) = flotilla_telemetry::propagation::current_traceparent() {
            annotations.insert(TRACE_PARENT_ANNOTATION.to_owned(), traceparent);
        }
        let metadata = ObjectMeta {
            name: Some(key.name.clone()),
            namespace: key.namespace.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: dep.api_version.clone(),
                kind: dep.kind.clone(),
                name: dep.name.clone(),
                uid: object.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            // Execution's finalizer from the start: one write less per binding.
            finalizers: Some(vec![
                flotilla_api::well_known::BINDING_CONTROLLER_FINALIZER.to_owned(),
            ]),
            ..Default::default()
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        let result = match &key.namespace {
            Some(namespace) => {
                let binding = ResourceBinding {
                    metadata,
                    spec,
                    status: None,
                };
                Api::<ResourceBinding>::namespaced(self.client.clone(), namespace)
                    .create(&params, &binding)
                    .await
                    .map(|b| BindingView::of_resource_binding(&b))
            }
            None => {
                let binding = ClusterResourceBinding {
                    metadata,
                    spec: spec.into(),
                    status: None,
                };
                Api::<ClusterResourceBinding>::all(self.client.clone())
                    .create(&params, &binding)
                    .await
                    .map(|b| BindingView::of_cluster_resource_binding(&b))
            }
        };
        result.map_err(|source| match &source {
            // Someone created it meanwhile: reconcile again against what is there.
            kube::Error::Api(status) if status.is_already_exists() || status.is_conflict() => {
                ReconcileError::Conflict {
                    object: key.to_string(),
                }
            }
            _ => ReconcileError::Api {
                action: "create",
                object: key.to_string(),
                source,
            },
        })
    }

    async fn delete_binding(&self, existing: &BindingView) -> Result<(), ReconcileError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: existing.uid.clone(),
                resource_version: existing.resource_version.clone(),
            }),
            ..Default::default()
        };
        let key = &existing.key;
        let result = match &key.namespace {
            Some(namespace) => Api::<ResourceBinding>::namespaced(self.client.clone(), namespace)
                .delete(&key.name, &params)
                .await
                .map(|_| ()),
            None => Api::<ClusterResourceBinding>::all(self.client.clone())
                .delete(&key.name, &params)
                .await
                .map(|_| ()),
        };
        match result {
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            other => other.map_err(api_error("delete", key)),
        }
    }

    /// Reads the dependency object; `None` when it (or its kind) does not exist.
    async fn get_object(&self, dep: &DependencyRef) -> Result<Option<ObjectState>, ReconcileError> {
        let object_name = describe_dependency(dep);
        let Some(kind) = self
            .kinds
            .resolve(&dep.api_version, &dep.kind)
            .await
            .map_err(api_error("discover the kind of", &object_name))?
        else {
            return Ok(None);
        };
        if kind.namespaced != dep.namespace.is_some() {
            return Ok(None);
        }
        // A JSON tree without managedFields, which the fingerprint does not cover.
        let url_path = url_path(&kind, dep.namespace.as_deref());
        let Some(value) = flotilla_runtime::object::get(&self.client, &url_path, &dep.name)
            .await
            .map_err(api_error("read", &object_name))?
        else {
            return Ok(None);
        };
        let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
        Ok(Some(ObjectState {
            uid: text("/metadata/uid"),
            resource_version: text("/metadata/resourceVersion"),
            fingerprint: fingerprint(&value),
        }))
    }

    /// Publishes an event; failures are logged, never fatal.
    pub async fn publish(
        &self,
        regarding: CoreObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate(note, 1000)),
            action: "DistributeDependencies".to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &regarding).await {
            debug!(%error, reason, "cannot publish an event");
        }
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

/// The collection path of objects of `kind` in `namespace` (ignored for cluster-scoped kinds).
pub fn url_path(kind: &Resolved, namespace: Option<&str>) -> String {
    <DynamicObject as kube::Resource>::url_path(&kind.resource, namespace.filter(|_| kind.namespaced))
}

/// The core ObjectReference of a binding, for events.
pub fn binding_reference(view: &BindingView) -> CoreObjectReference {
    flotilla_api::work::binding_object_reference(
        view.key.namespace.as_deref(),
        &view.key.name,
        view.uid.as_deref(),
    )
}

/// Makes a merge patch conditional on `resource_version` (the API answers 409 when the object
/// changed since it was read).
fn add_precondition(patch: &mut Value, resource_version: Option<&str>) {
    let Some(resource_version) = resource_version else {
        return;
    };
    if let Some(map) = patch.as_object_mut() {
        let metadata = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".to_owned(), json!(resource_version));
        }
    }
}

/// Records the current trace on the object, so the next service's watch pickup links to it.
fn add_traceparent(patch: &mut Value) {
    let Some(traceparent) = flotilla_telemetry::propagation::current_traceparent() else {
        return;
    };
    if let Some(map) = patch.as_object_mut() {
        let metadata = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(TRACE_PARENT_ANNOTATION.to_owned(), json!(traceparent));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_read_in_its_namespace_or_cluster_wide() {
        let kind = |api_version: &str, kind: &str, plural: &str, namespaced: bool| Resolved {
            resource: kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::try_from(&kube::api::TypeMeta {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                })
                .unwrap(),
                plural,
            ),
            namespaced,
        };
        let config_maps = kind("v1", "ConfigMap", "configmaps", true);
        assert_eq!(
            url_path(&config_maps, Some("web")),
            "/api/v1/namespaces/web/configmaps"
        );
        assert_eq!(url_path(&config_maps, None), "/api/v1/configmaps");
        // A cluster-scoped kind ignores the namespace a dependency reference may carry.
        let roles = kind(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            false,
        );
        assert_eq!(
            url_path(&roles, Some("web")),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        );
    }

    #[test]
    fn preconditions_join_existing_metadata() {
        let mut patch = json!({"spec": {"requiredBy": null}});
        add_precondition(&mut patch, Some("42"));
        assert_eq!(
            patch,
            json!({"spec": {"requiredBy": null}, "metadata": {"resourceVersion": "42"}})
        );
        let mut patch = json!({"metadata": {"annotations": {"a": "b"}}});
        add_precondition(&mut patch, Some("7"));
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {"a": "b"}, "resourceVersion": "7"}})
        );
        let mut patch = json!({"spec": {}});
        add_precondition(&mut patch, None);
        assert_eq!(patch, json!({"spec": {}}));
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("abc".into(), 10), "abc");
        assert_eq!(truncate("abcdef".into(), 3), "abc");
        assert_eq!(truncate("aé".into(), 2), "a");
    }

    #[test]
    fn attached_refs_name_the_binding_kind() {
        let namespaced = AttachedRef {
            key: BindingKey::namespaced("default", "cfg-configmap"),
            generation: 3,
            uid: "u".into(),
        };
        let r = namespaced.binding_ref();
        assert_eq!(r.kind, flotilla_proto::v1::BindingKind::ResourceBinding as i32);
        assert_eq!(r.key(), "default/cfg-configmap");
        assert_eq!(r.generation, 3);
        let cluster = AttachedRef {
            key: BindingKey::cluster("fast-storageclass"),
            generation: 1,
            uid: "v".into(),
        };
        assert_eq!(
            cluster.binding_ref().kind,
            flotilla_proto::v1::BindingKind::ClusterResourceBinding as i32
        );
    }
}
