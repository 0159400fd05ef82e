//! The binding controller: makes a binding's Works match its scheduled spec (the finalizer
//! `karmada.io/binding-controller` makes deletion remove the Works first), and writes the
//! binding's `aggregatedStatus` and `FullyApplied` condition and the template's `status` from
//! the Works' status. The gRPC `Dispatch` call and the watches both end up here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use flotilla_api::well_known::{
    FIELD_MANAGER, TRACE_PARENT_ANNOTATION, cluster_of_execution_namespace, conditions,
};
use flotilla_api::work::ResourceBindingStatus;
use flotilla_api::{ClusterResourceBinding, ResourceBinding, ResourceBindingSpec, Work};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::cache::CachedWork;
use crate::context::{BindingKey, Context};
use crate::error::ExecutionError;
use crate::metrics::metrics;
use crate::overrides::{
    OverrideInputs, applied_condition, current_policies, detector_managed, recorded_policies,
};
use crate::status::{
    aggregated_items, fully_applied, merge_patch_diff, per_cluster_statuses, stamp_health_transitions,
};
use crate::works::{BINDING_FINALIZER, BindingKind, BindingView, DesiredWork, WORK_FINALIZER, plan_works};
use flotilla_overrides::{ClusterFacts, RuleFailure};

/// What a reconcile of one binding found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DispatchOutcome {
    /// Whether the binding exists (and is not being deleted).
    pub found: bool,
    /// Whether the binding is scheduled at its current generation.
    pub scheduled: bool,
    /// The binding's Works, as `namespace/name`.
    pub works: Vec<String>,
    /// Clusters dispatching to which is suspended.
    pub suspended_clusters: Vec<String>,
    /// Another replica owns the binding (sharding): nothing was read or written.
    pub not_owner: bool,
}

/// A ResourceBinding or ClusterResourceBinding, read uniformly.
#[derive(Clone, Debug, Deserialize)]
pub struct BindingObject {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(default)]
    pub spec: ResourceBindingSpec,
    /// Status.
    #[serde(default)]
    pub status: Option<ResourceBindingStatus>,
}

fn binding_api(ctx: &Context, key: &BindingKey) -> Api<DynamicObject> {
    match key.kind {
        BindingKind::ResourceBinding => Api::namespaced_with(
            ctx.client.clone(),
            &key.namespace,
            &ApiResource::erase::<ResourceBinding>(&()),
        ),
        BindingKind::ClusterResourceBinding => Api::all_with(
            ctx.client.clone(),
            &ApiResource::erase::<ClusterResourceBinding>(&()),
        ),
    }
}

/// The collection path of binding `key`'s kind (in its namespace).
fn binding_url_path(key: &BindingKey) -> String {
    match key.kind {
        BindingKind::ResourceBinding => ResourceBinding::url_path(&(), Some(&key.namespace)),
        BindingKind::ClusterResourceBinding => ClusterResourceBinding::url_path(&(), None),
    }
}

/// Reads the binding `key` from the API (not the cache: a Dispatch call follows a write),
/// decoding the response straight into a [`BindingObject`] (one decode, not a dynamic object
/// converted twice).
pub async fn get_binding(ctx: &Context, key: &BindingKey) -> Result<Option<BindingObject>, ExecutionError> {
    let request = kube::core::Request::new(binding_url_path(key))
        .get(&key.name, &kube::api::GetParams::default())
        .map_err(|e| ExecutionError::NotReady(format!("{key} cannot be read: {e}")))?;
    match ctx.client.request::<BindingObject>(request).await {
        Ok(binding) => Ok(Some(binding)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(ExecutionError::control_plane(format!("read {key}"))(error)),
    }
}

/// The binding a Work belongs to, from its labels and annotations.
pub fn binding_of_work(work: &Work) -> Option<BindingKey> {
    use flotilla_api::well_known::{
        CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAME_ANNOTATION,
        RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    };
    let annotations = work.annotations();
    if let (Some(namespace), Some(name)) = (
        annotations.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION),
        annotations.get(RESOURCE_BINDING_NAME_ANNOTATION),
    ) {
        return Some(BindingKey::new(BindingKind::ResourceBinding, namespace, name));
    }
    annotations
        .get(CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION)
        .map(|name| BindingKey::new(BindingKind::ClusterResourceBinding, "", name))
}

/// How long a binding waits after a report of one of its Works before its status is
/// aggregated, so the reports of all its clusters (which arrive within milliseconds of each
/// other) make one binding status write instead of one each. Dispatch itself never waits for
/// it: a binding or template change is reconciled at once.
pub const WORK_REPORTS_COALESCE: std::time::Duration = std::time::Duration::from_millis(200);

/// The default of `--status-deferral` ([`queue_report`]).
pub const STATUS_DEFERRAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Queues binding `key`'s report pass, the reconcile that aggregates its Works' reports into
/// its status and its template's: after [`WORK_REPORTS_COALESCE`], and as
/// [`Priority::Deferred`](flotilla_runtime::queue::Priority::Deferred), so that under a backlog
/// bindings waiting for dispatch (their watch events, `Dispatch` calls answered
/// `OUTCOME_QUEUED`) go first and a new template's objects do not wait for thousands of status
/// writes; the report pass waits at most about `--status-deferral` longer than a dispatch
/// would. A binding change queued meanwhile makes the pass a dispatch. Every reconcile reads
/// the binding, its template and its Works as they are, so the order changes only when
/// statuses are written, not what is written.
pub fn queue_report(ctx: &Context, key: Arc<BindingKey>) {
    ctx.binding_queue.add_after_with(
        key,
        WORK_REPORTS_COALESCE,
        flotilla_runtime::queue::Priority::Deferred,
    );
}

/// Reconciles binding `key` (serialised with any other reconcile of it), inside an
/// `execution.dispatch` span.
///
/// A call carries its trace; a dispatch picked up from the watch-driven queue continues the
/// trace stored on the binding (`flotilla.io/traceparent`) while the binding's scheduled
/// generation is not dispatched yet, and only links to it otherwise. That choice is made on the
/// binding read under the lock, never on the watch cache: the cache may predate the scheduler's
/// decision that this very reconcile carries out, and the span's parent cannot change once the
/// span has been entered.
pub async fn reconcile_binding(
    ctx: &Arc<Context>,
    key: &BindingKey,
) -> Result<DispatchOutcome, ExecutionError> {
    let span = tracing::info_span!(
        "execution.dispatch",
        object = %key,
        outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if !ctx.owns(&crate::context::binding_shard(key)) {
        span.record("outcome", "not-owner");
        return Ok(DispatchOutcome {
            not_owner: true,
            ..Default::default()
        });
    }
    let called = !tracing::Span::current().is_none();
    let started = Instant::now();
    let result = async {
        let _guard = ctx.binding_locks.lock(key).await;
        let Some(binding) = get_binding(ctx, key).await? else {
            return Ok(DispatchOutcome::default());
        };
        follow_stored_trace(&span, &binding, called);
        reconcile_locked(ctx, key, binding).instrument(span.clone()).await
    }
    .await;
    let outcome = match &result {
        Ok(o) if !o.found => "not-found",
        Ok(o) if !o.scheduled => "not-scheduled",
        Ok(o) if !o.suspended_clusters.is_empty() => "suspended",
        Ok(_) => "dispatched",
        Err(e) if e.is_unreachable() => "unreachable",
        Err(_) => "error",
    };
    span.record("outcome", outcome);
    tracing::debug!(binding = %key, outcome, elapsed = ?started.elapsed(), "binding reconciled");
    if result.is_err() {
        span.record("otel.status_code", "ERROR");
    }
    metrics().reconciled("binding", result.is_ok(), started.elapsed());
    result
}

/// Ties the not-yet-entered `span` to the change recorded on `binding`: a called dispatch is
/// already in the caller's trace and links to the stored one; a watch-picked dispatch becomes
/// its child while the change is undispatched (see [`dispatch_pending`]).
fn follow_stored_trace(span: &tracing::Span, binding: &BindingObject, called: bool) {
    let Some(traceparent) = binding
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TRACE_PARENT_ANNOTATION))
    else {
        return;
    };
    let pending = !called && dispatch_pending(binding.metadata.generation, binding.status.as_ref());
    flotilla_telemetry::propagation::follow_traceparent(span, traceparent, pending);
}

/// Whether a binding's scheduled generation is not dispatched yet (no `FullyApplied` written
/// for it): a watch-triggered dispatch of it continues the trace of the change.
pub fn dispatch_pending(generation: Option<i64>, status: Option<&ResourceBindingStatus>) -> bool {
    let Some(status) = status else { return false };
    let dispatched = flotilla_api::conditions::find(&status.conditions, conditions::FULLY_APPLIED)
        .is_some_and(|c| c.observed_generation == generation);
    scheduled(generation, Some(status)) && !dispatched
}

/// Whether the scheduler has scheduled a binding's current `generation`
/// (`status.schedulerObservedGeneration` is it): only then is the binding dispatched.
pub fn scheduled(generation: Option<i64>, status: Option<&ResourceBindingStatus>) -> bool {
    generation.is_some() && status.and_then(|s| s.scheduler_observed_generation) == generation
}

async fn reconcile_locked(
    ctx: &Arc<Context>,
    key: &BindingKey,
    binding: BindingObject,
) -> Result<DispatchOutcome, ExecutionError> {
    let uid = binding.metadata.uid.clone().unwrap_or_default();
    if binding.metadata.deletion_timestamp.is_some() {
        finalize(ctx, key, &binding, &view_of(key, &uid, &binding)).await?;
        return Ok(DispatchOutcome::default());
    }
    let binding = ensure_finalizer(ctx, key, binding).await?;
    let view = view_of(key, &uid, &binding);

    let existing = existing_works(ctx, &view);
    let generation = binding.metadata.generation;
    let scheduled = scheduled(generation, binding.status.as_ref());
    let suspension = view.suspension();
    let mut outcome = DispatchOutcome {
        found: true,
        scheduled,
        ..Default::default()
    };
    let mut template = None;
    // Whether this reconcile wrote a Work: its status would then aggregate Works about to
    // change, and is left to the reconcile their events bring (see `WORK_REPORTS_COALESCE`).
    let mut wrote_works = false;
    // Whether override policies are in effect, and the rules that failed, when Works were
    // planned.
    let mut override_outcome = None;
    if scheduled {
        template = get_template(ctx, &binding.spec).await?;
        if let Some(template) = &template {
            let clusters: BTreeSet<String> = existing.keys().cloned().collect();
            let overrides = override_inputs(ctx, &binding);
            let plan = match plan_works(&view, template, &clusters, &overrides) {
                Ok(plan) => plan,
                Err(error) => {
                    let message = format!("cannot prepare the Work manifests of {key}: {error}");
                    ctx.event(
                        &binding_ref(key, &binding),
                        EventType::Warning,
                        "InvalidTemplate",
                        "Dispatch",
                        message.clone(),
                    )
                    .await;
                    return Err(ExecutionError::NotReady(message));
                }
            };
            for (cluster, failure) in &plan.override_failures {
                tracing::warn!(binding = %key, cluster, "override rule skipped: {failure}");
            }
            override_outcome = Some((plan.overrides_in_effect, plan.override_failures.clone()));
            let traceparent = flotilla_telemetry::propagation::current_traceparent().or_else(|| {
                binding
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(TRACE_PARENT_ANNOTATION).cloned())
            });
            if let Some(cluster) = &plan.waiting_for {
                // The Work's deletion event brings the binding back.
                tracing::info!(
                    binding = %key,
                    cluster = %cluster,
                    "the binding was evicted from a cluster with purgeMode Directly: its other \
                     Works wait until the Work there is gone"
                );
            }
            let upserts: &[DesiredWork] = if plan.waiting_for.is_some() {
                &[]
            } else {
                &plan.upsert
            };
            // Its cluster's worker takes a written Work from the Work watch (a new generation),
            // not from here: queued twice, a Work picked up between the two adds was read and
            // reconciled twice.
            let mut writes = Vec::new();
            for desired in upserts {
                if needs_write(existing.get(&desired.cluster).map(Arc::as_ref), desired) {
                    writes.push(desired);
                }
            }
            wrote_works |= apply_works(ctx, &writes, traceparent.as_deref()).await?;
            outcome.works.extend(
                upserts
                    .iter()
                    .map(|desired| format!("{}/{}", desired.namespace, desired.name)),
            );
            for cluster in &plan.keep_suspended {
                if let Some(work) = existing.get(cluster) {
                    if work.suspend_dispatching != Some(true) && !work.deleting {
                        let api: Api<Work> = Api::namespaced(ctx.client.clone(), work.namespace());
                        api.patch(
                            work.name(),
                            &PatchParams::default(),
                            &Patch::Merge(json!({"spec": {"suspendDispatching": true}})),
                        )
                        .await
                        .map_err(ExecutionError::control_plane(format!(
                            "suspend Work {}",
                            work.name()
                        )))?;
                        wrote_works = true;
                    }
                    outcome
                        .works
                        .push(format!("{}/{}", work.namespace(), work.name()));
                }
            }
            for cluster in &plan.keep_evicting {
                if let Some(work) = existing.get(cluster) {
                    outcome
                        .works
                        .push(format!("{}/{}", work.namespace(), work.name()));
                }
            }
            for cluster in &plan.delete {
                if let Some(work) = existing.get(cluster) {
                    if binding.spec.eviction_task(cluster).is_some() && !work.deleting {
                        metrics().purged(cluster);
                        tracing::info!(binding = %key, cluster = %cluster, "purging the copy of an evicted cluster");
                    }
                    delete_work(ctx, work.namespace(), work.name(), work.deleting).await?;
                    wrote_works = true;
                }
            }
        }
    }
    outcome.suspended_clusters = binding
        .spec
        .cluster_names()
        .chain(existing.keys().map(String::as_str))
        .filter(|c| suspension.is_suspended(c))
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if wrote_works {
        // The Works' events requeue the binding; this makes sure of it even if a write turned
        // out to change nothing (no event).
        queue_report(ctx, key.clone().shared());
    } else {
        write_status(
            ctx,
            key,
            &binding,
            &existing,
            template.as_ref(),
            scheduled,
            override_outcome.as_ref(),
        )
        .await?;
    }
    Ok(outcome)
}

/// The override policies that render `binding`'s Works (see [`crate::overrides`]) and the
/// clusters' facts their rules select by.
fn override_inputs(ctx: &Context, binding: &BindingObject) -> OverrideInputs {
    let annotations = binding.metadata.annotations.clone().unwrap_or_default();
    let policies = if detector_managed(&annotations) {
        recorded_policies(&annotations)
    } else {
        current_policies(
            &ctx.stores.override_policies.state(),
            &ctx.stores.cluster_override_policies.state(),
            binding
                .spec
                .resource
                .namespace
                .as_deref()
                .filter(|ns| !ns.is_empty()),
        )
    };
    let clusters = if policies.is_empty() {
        BTreeMap::new()
    } else {
        ctx.stores
            .clusters
            .state()
            .iter()
            .map(|c| (c.name_any(), ClusterFacts::of(c)))
            .collect()
    };
    OverrideInputs { policies, clusters }
}

fn view_of<'a>(key: &'a BindingKey, uid: &'a str, binding: &'a BindingObject) -> BindingView<'a> {
    BindingView {
        kind: key.kind,
        namespace: &key.namespace,
        name: &key.name,
        uid,
        spec: &binding.spec,
    }
}

fn binding_ref(key: &BindingKey, binding: &BindingObject) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        resource_version: binding.metadata.resource_version.clone(),
        ..flotilla_api::work::binding_object_reference(
            Some(&*key.namespace).filter(|n| !n.is_empty()),
            &key.name,
            binding.metadata.uid.as_deref(),
        )
    }
}

/// The binding's Works in the cache, by cluster.
fn existing_works(ctx: &Context, view: &BindingView<'_>) -> BTreeMap<String, Arc<CachedWork>> {
    let label = view.permanent_id_label();
    cached_works_named(ctx, &view.work_name())
        .into_iter()
        .filter(|(_, work)| work.has_label(label, view.uid))
        .collect()
}

/// The cached Works called `name` in every execution namespace, by cluster. Work names are
/// derived from their binding or namespace, so this looks each execution namespace up by name
/// instead of scanning every Work (a scan made each reconcile O(Works) and a propagation run
/// of N templates O(N²)).
pub(crate) fn cached_works_named(ctx: &Context, name: &str) -> BTreeMap<String, Arc<CachedWork>> {
    cached_works_named_in(ctx, &execution_namespaces(ctx), name)
}

/// Every cluster a Work may be in, with its execution namespace: the registered clusters, and
/// those whose execution namespace remains (Works may remain in the namespace of a cluster that
/// is no longer registered).
pub(crate) fn execution_namespaces(ctx: &Context) -> Vec<(String, String)> {
    let mut clusters: BTreeSet<String> = ctx.stores.clusters.state().iter().map(|c| c.name_any()).collect();
    clusters.extend(
        ctx.stores
            .namespaces
            .state()
            .iter()
            .filter_map(|n| cluster_of_execution_namespace(&n.name_any()).map(str::to_owned)),
    );
    clusters
        .into_iter()
        .map(|cluster| {
            let namespace = flotilla_api::well_known::execution_namespace(&cluster);
            (cluster, namespace)
        })
        .collect()
}

/// [`cached_works_named`] in `namespaces` ([`execution_namespaces`], computed once for many
/// names).
pub(crate) fn cached_works_named_in(
    ctx: &Context,
    namespaces: &[(String, String)],
    name: &str,
) -> BTreeMap<String, Arc<CachedWork>> {
    namespaces
        .iter()
        .filter_map(|(cluster, namespace)| {
            let work = ctx.stores.works.get(Some(namespace), name)?;
            Some((cluster.clone(), work))
        })
        .collect()
}

/// Whether the Work must be written to become `desired`.
pub(crate) fn needs_write(current: Option<&CachedWork>, desired: &DesiredWork) -> bool {
    match current {
        None => true,
        // It is going away; the next reconcile after its deletion creates it again.
        Some(current) if current.deleting => false,
        Some(current) => !current.holds(desired),
    }
}

/// A Work as [`apply_work`] applies it, serialized from the planned Work by reference (a
/// `json!` body would copy the manifests into a `Value` tree first, once per Work written).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkApply<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: WorkApplyMetadata<'a>,
    spec: &'a flotilla_api::WorkSpec,
}

/// The metadata of a [`WorkApply`].
#[derive(serde::Serialize)]
struct WorkApplyMetadata<'a> {
    name: &'a str,
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
    annotations: &'a BTreeMap<String, String>,
    finalizers: [&'a str; 1],
}

/// Works of one binding written at once: a binding's Works go to different clusters and
/// nothing orders them, so its dispatch takes about one control-plane round trip, not one per
/// cluster.
const CONCURRENT_WORK_WRITES: usize = 8;

/// Applies `works` ([`apply_work`]), up to [`CONCURRENT_WORK_WRITES`] in flight (the next
/// starts as soon as one ends); says whether it wrote any. Every write is waited for, and the
/// first failure is returned: the binding's retry writes the Works that still differ from the
/// cache ([`needs_write`]; a write the cache has not seen yet is made again, which server-side
/// apply makes harmless).
async fn apply_works(
    ctx: &Context,
    works: &[&DesiredWork],
    traceparent: Option<&str>,
) -> Result<bool, ExecutionError> {
    use futures::StreamExt;
    // The futures collected first: a lazily mapped stream of borrowing futures is not `Send`
    // for every lifetime, which the binding workers' `tokio::spawn` needs.
    let writes: Vec<_> = works
        .iter()
        .map(|desired| apply_work(ctx, desired, traceparent))
        .collect();
    let mut writes = futures::stream::iter(writes).buffer_unordered(CONCURRENT_WORK_WRITES);
    let mut first_error = None;
    while let Some(result) = writes.next().await {
        if let Err(error) = result {
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(!works.is_empty()),
    }
}

pub(crate) async fn apply_work(
    ctx: &Context,
    desired: &DesiredWork,
    traceparent: Option<&str>,
) -> Result<(), ExecutionError> {
    let mut annotations = desired.annotations.clone();
    if let Some(traceparent) = traceparent {
        annotations.insert(TRACE_PARENT_ANNOTATION.to_owned(), traceparent.to_owned());
    }
    let body = WorkApply {
        api_version: &Work::api_version(&()),
        kind: &Work::kind(&()),
        metadata: WorkApplyMetadata {
            name: &desired.name,
            namespace: &desired.namespace,
            labels: &desired.labels,
            annotations: &annotations,
            finalizers: [WORK_FINALIZER],
        },
        spec: &desired.spec,
    };
    ensure_execution_namespace(ctx, &desired.namespace).await?;
    // Answered with metadata only: the Work's manifests are not read back.
    flotilla_runtime::lean::patch(
        &ctx.client,
        &Work::url_path(&(), Some(&desired.namespace)),
        &desired.name,
        None,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(ExecutionError::control_plane(format!(
        "write Work {}/{}",
        desired.namespace, desired.name
    )))?;
    Ok(())
}

/// Creates the execution namespace `karmada-es-<cluster>` unless it exists (execution owns the
/// Works in it, so it creates it on first use, as Karmada's cluster controller does on join).
async fn ensure_execution_namespace(ctx: &Context, namespace: &str) -> Result<(), ExecutionError> {
    use k8s_openapi::api::core::v1::Namespace;
    if ctx
        .stores
        .namespaces
        .get(&kube::runtime::reflector::ObjectRef::new(namespace))
        .is_some_and(|n| n.metadata.deletion_timestamp.is_none())
    {
        return Ok(());
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let object: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))
        .map_err(|e| ExecutionError::NotReady(format!("namespace {namespace}: {e}")))?;
    match api.create(&kube::api::PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(ExecutionError::control_plane(format!(
            "create namespace {namespace}"
        ))(error)),
    }
}

/// Deletes the Work `name` in `namespace` unless it is going away (`deleting`, as the cache or
/// the API saw it).
pub(crate) async fn delete_work(
    ctx: &Context,
    namespace: &str,
    name: &str,
    deleting: bool,
) -> Result<(), ExecutionError> {
    if deleting {
        return Ok(());
    }
    let api: Api<Work> = Api::namespaced(ctx.client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(ExecutionError::control_plane(format!(
            "delete Work {namespace}/{name}"
        ))(error)),
    }
}

/// Deleting a binding: delete every Work of it (listed from the API, not the cache, so none is
/// left behind), then drop the finalizer. Suspension does not block deletion (seed corner
/// case): each Work's own finalizer removes its member objects.
async fn finalize(
    ctx: &Context,
    key: &BindingKey,
    binding: &BindingObject,
    view: &BindingView<'_>,
) -> Result<(), ExecutionError> {
    let has_finalizer = binding
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == BINDING_FINALIZER));
    if !has_finalizer {
        return Ok(());
    }
    let api: Api<Work> = Api::all(ctx.client.clone());
    let selector = format!("{}={}", view.permanent_id_label(), view.uid);
    let works = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(ExecutionError::control_plane(format!("list the Works of {key}")))?;
    for work in &works.items {
        let namespace = work.metadata.namespace.as_deref().unwrap_or_default();
        let deleting = work.metadata.deletion_timestamp.is_some();
        delete_work(ctx, namespace, &work.name_any(), deleting).await?;
    }
    let remaining: Vec<String> = binding
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != BINDING_FINALIZER)
        .cloned()
        .collect();
    patch_metadata(
        ctx,
        key,
        json!({"metadata": {"resourceVersion": binding.metadata.resource_version, "finalizers": remaining}}),
        "remove the finalizer of",
    )
    .await?;
    Ok(())
}

async fn ensure_finalizer(
    ctx: &Context,
    key: &BindingKey,
    binding: BindingObject,
) -> Result<BindingObject, ExecutionError> {
    let finalizers = binding.metadata.finalizers.clone().unwrap_or_default();
    if finalizers.iter().any(|f| f == BINDING_FINALIZER) {
        return Ok(binding);
    }
    let mut updated = finalizers;
    updated.push(BINDING_FINALIZER.to_owned());
    let patched = patch_metadata(
        ctx,
        key,
        json!({"metadata": {"resourceVersion": binding.metadata.resource_version, "finalizers": updated}}),
        "add the finalizer to",
    )
    .await?;
    serde_json::to_value(patched)
        .and_then(serde_json::from_value)
        .map_err(|e| ExecutionError::NotReady(format!("{key} cannot be read: {e}")))
}

async fn patch_metadata(
    ctx: &Context,
    key: &BindingKey,
    patch: Value,
    action: &str,
) -> Result<DynamicObject, ExecutionError> {
    binding_api(ctx, key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(ExecutionError::control_plane(format!("{action} {key}")))
}

/// The binding's template, or `None` when it no longer exists (the binding is about to be
/// garbage-collected).
async fn get_template(ctx: &Context, spec: &ResourceBindingSpec) -> Result<Option<Value>, ExecutionError> {
    let resource = &spec.resource;
    let what = format!(
        "{} {}/{}",
        resource.kind,
        resource.namespace.as_deref().unwrap_or(""),
        resource.name
    );
    let kind = ctx
        .kinds
        .resolve(&ctx.client, &resource.api_version, &resource.kind)
        .await
        .map_err(ExecutionError::control_plane(format!(
            "discover the resource of {what}"
        )))?;
    // Read as a JSON tree without managedFields: a Work's manifest drops them.
    let url_path = kind.url_path(resource.namespace.as_deref().unwrap_or(""));
    let template = flotilla_runtime::object::get(&ctx.client, &url_path, &resource.name)
        .await
        .map_err(ExecutionError::control_plane(format!("read template {what}")))?;
    Ok(template.filter(|t| {
        resource.uid.is_none()
            || t.pointer("/metadata/uid").and_then(Value::as_str) == resource.uid.as_deref()
    }))
}

/// Writes the binding's `aggregatedStatus` and `FullyApplied`, and the template's status,
/// when they changed.
///
/// `FullyApplied` is written only for a `scheduled` generation: its `observedGeneration` says
/// which generation execution has dispatched, so a generation the scheduler has not decided yet
/// keeps the condition of the last one dispatched (a watch-picked dispatch of the new generation
/// then still continues the trace of the change, see [`dispatch_pending`]).
async fn write_status(
    ctx: &Context,
    key: &BindingKey,
    binding: &BindingObject,
    existing: &BTreeMap<String, Arc<CachedWork>>,
    template: Option<&Value>,
    scheduled: bool,
    overrides: Option<&(bool, Vec<(String, RuleFailure)>)>,
) -> Result<(), ExecutionError> {
    let targets: Vec<String> = binding.spec.cluster_names().map(str::to_owned).collect();
    let works: BTreeMap<String, &CachedWork> =
        existing.iter().map(|(c, w)| (c.clone(), w.as_ref())).collect();
    let mut items = aggregated_items(&targets, &works);
    let mut status = binding.status.clone().unwrap_or_default();
    stamp_health_transitions(&mut items, &status.aggregated_status, Timestamp::now());
    let mut changed = false;
    if scheduled {
        let (applied, reason, message) = fully_applied(&items);
        changed = flotilla_api::conditions::set(
            &mut status.conditions,
            conditions::FULLY_APPLIED,
            applied,
            reason,
            message,
            binding.metadata.generation,
            Timestamp::now(),
        );
    }
    if status.aggregated_status != items {
        status.aggregated_status = items.clone();
        changed = true;
    }
    let mut override_event = None;
    if let Some((in_effect, failures)) = overrides {
        let was_failing = flotilla_api::conditions::find(&status.conditions, conditions::OVERRIDES_APPLIED)
            .is_some_and(|c| c.status == "False");
        let moved = match applied_condition(*in_effect, failures) {
            Some((applied, reason, message)) => {
                let moved = flotilla_api::conditions::set(
                    &mut status.conditions,
                    conditions::OVERRIDES_APPLIED,
                    applied,
                    reason,
                    message.clone(),
                    binding.metadata.generation,
                    Timestamp::now(),
                );
                if moved && !applied {
                    override_event = Some((EventType::Warning, reason, message));
                } else if moved && was_failing {
                    override_event = Some((
                        EventType::Normal,
                        reason,
                        "every override rule in effect applies again in every cluster".to_owned(),
                    ));
                }
                moved
            }
            None => flotilla_api::conditions::remove(&mut status.conditions, conditions::OVERRIDES_APPLIED),
        };
        changed |= moved;
    }
    if changed {
        let patch = json!({
            "metadata": {"resourceVersion": binding.metadata.resource_version},
            "status": {"conditions": status.conditions, "aggregatedStatus": status.aggregated_status},
        });
        flotilla_runtime::lean::patch(
            &ctx.client,
            &binding_url_path(key),
            &key.name,
            Some("status"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(ExecutionError::control_plane(format!(
            "write the status of {key}"
        )))?;
        if let Some((type_, reason, message)) = override_event {
            ctx.event(
                &binding_ref(key, binding),
                type_,
                reason,
                "ApplyOverrides",
                message,
            )
            .await;
        }
    }
    if let Some(template) = template {
        write_template_status(ctx, &binding.spec, template, &items).await?;
    }
    Ok(())
}

async fn write_template_status(
    ctx: &Context,
    spec: &ResourceBindingSpec,
    template: &Value,
    items: &[flotilla_api::work::AggregatedStatusItem],
) -> Result<(), ExecutionError> {
    if items.is_empty() {
        return Ok(());
    }
    let Some(aggregated) = flotilla_interpreter::aggregate_status(template, &per_cluster_statuses(items))
    else {
        return Ok(());
    };
    let current = template.get("status").cloned().unwrap_or(Value::Null);
    if current == aggregated {
        return Ok(());
    }
    let diff = merge_patch_diff(&current, &aggregated);
    let resource = &spec.resource;
    let kind = ctx
        .kinds
        .resolve(&ctx.client, &resource.api_version, &resource.kind)
        .await
        .map_err(ExecutionError::control_plane(format!(
            "discover {}",
            resource.kind
        )))?;
    let patch = json!({
        "metadata": {"resourceVersion": template.get("metadata").and_then(|m| m.get("resourceVersion"))},
        "status": diff,
    });
    let action = format!("write the status of {} {}", resource.kind, resource.name);
    flotilla_runtime::lean::patch(
        &ctx.client,
        &kind.url_path(resource.namespace.as_deref().unwrap_or("")),
        &resource.name,
        kind.has_status.then_some("status"),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(ExecutionError::control_plane(action))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    #[test]
    fn a_work_is_applied_with_its_planned_parts_and_the_finalizer() {
        let spec = flotilla_api::WorkSpec {
            workload: flotilla_api::work::WorkloadTemplate {
                manifests: vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})],
            },
            suspend_dispatching: Some(false),
            preserve_resources_on_deletion: Some(true),
        };
        let labels = BTreeMap::from([("a".to_owned(), "1".to_owned())]);
        let annotations = BTreeMap::from([("b".to_owned(), "2".to_owned())]);
        let body = WorkApply {
            api_version: &Work::api_version(&()),
            kind: &Work::kind(&()),
            metadata: WorkApplyMetadata {
                name: "c-configmap",
                namespace: "karmada-es-member1",
                labels: &labels,
                annotations: &annotations,
                finalizers: [WORK_FINALIZER],
            },
            spec: &spec,
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "apiVersion": "work.karmada.io/v1alpha1",
                "kind": "Work",
                "metadata": {
                    "name": "c-configmap",
                    "namespace": "karmada-es-member1",
                    "labels": {"a": "1"},
                    "annotations": {"b": "2"},
                    "finalizers": ["karmada.io/execution-controller"],
                },
                "spec": {
                    "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]},
                    "suspendDispatching": false,
                    "preserveResourcesOnDeletion": true,
                },
            })
        );
    }

    fn status(observed: Option<i64>, fully_applied_at: Option<i64>) -> ResourceBindingStatus {
        let mut status = ResourceBindingStatus {
            scheduler_observed_generation: observed,
            ..Default::default()
        };
        if let Some(generation) = fully_applied_at {
            status.conditions.push(Condition {
                type_: conditions::FULLY_APPLIED.to_owned(),
                status: "False".to_owned(),
                reason: "FullyAppliedFailed".to_owned(),
                message: String::new(),
                observed_generation: Some(generation),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
            });
        }
        status
    }

    #[test]
    fn a_watch_continues_the_trace_only_of_an_undispatched_scheduled_change() {
        // Scheduled, never dispatched.
        assert!(dispatch_pending(Some(2), Some(&status(Some(2), None))));
        // Scheduled, dispatched at an older generation.
        assert!(dispatch_pending(Some(2), Some(&status(Some(2), Some(1)))));
        // Already dispatched at this generation: a resync.
        assert!(!dispatch_pending(Some(2), Some(&status(Some(2), Some(2)))));
        // Not scheduled yet: the scheduler's write will bring it back.
        assert!(!dispatch_pending(Some(2), Some(&status(Some(1), None))));
        assert!(!dispatch_pending(Some(1), None));
    }
}
