//! The Work controller, `--work-workers` workers per member cluster: applies a Work's
//! manifests to its member with server-side apply (honouring dispatch suspension,
//! apply-once-only and conflictResolution), records `Applied`, `Dispatching` and the manifest
//! statuses (a workload just written is reported once its member controller has, ADR 0027),
//! and on deletion removes the member objects (unless `preserveResourcesOnDeletion`) before
//! dropping the finalizer `karmada.io/execution-controller`.

use std::sync::Arc;
use std::time::Instant;

use flotilla_api::Work;
use flotilla_api::conditions::{self, find};
use flotilla_api::well_known::{FIELD_MANAGER, TRACE_PARENT_ANNOTATION, conditions as types, reasons};
use flotilla_api::work::{ManifestStatus, ResourceIdentifier, WorkStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::apply_once::{Decision, Mode, SkipReason, decide, effective_mode};
use crate::arrivals::Source;
use crate::cache::worker_signature_of;
use crate::clusters::{Member, MemberClient, ensure_watch, member_client, member_error};
use crate::context::Context;
use crate::dispatch::{binding_of_work, get_binding};
use crate::error::{ExecutionError, is_status};
use crate::manifest::{
    ObjectIdentity, Revision, manifest_apply_once_override, manifest_conflict_resolution, manifest_digest,
};
use crate::member::{
    Ownership, WorkRef, conflict_message, defers_to_namespace_work, is_conflict, matches, ownership,
    recorded_revision, with_marks,
};
use crate::metrics::metrics;
use crate::works::{WORK_FINALIZER, applied_revisions};

/// Message of `Applied=True`.
pub const APPLIED_MESSAGE: &str = "Manifest has been successfully applied";
/// Message of `Dispatching=True`.
pub const DISPATCHING_MESSAGE: &str = "Work is being dispatched to the member cluster.";

/// The default of `--report-wait`: how long the report of a Work whose member objects were
/// just written waits for the member's controllers to report on them (a Deployment's
/// controller writes its status as soon as it sees a new generation). The member watch queues
/// the Work when one does, and that reconcile writes one status saying both that the manifests
/// were applied and what the member made of them, instead of one status write for each. After
/// the wait the Work is reported anyway.
pub const REPORT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Processes `member`'s Work queue until shutdown (several of these share one queue; the queue
/// never hands one Work to two of them), failures retried with per-Work exponential backoff.
pub async fn run_worker(ctx: Arc<Context>, member: Arc<Member>) {
    // Decisions read the Cluster and binding caches: start from a complete picture.
    if !ctx.wait_synced().await {
        return;
    }
    loop {
        let name = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            name = member.queue.next() => name,
        };
        let Some(name) = name else { return };
        if !ctx.owns(&crate::context::cluster_shard(&member.name)) {
            // Another replica owns the cluster; a membership change queues everything again.
            member.report_taken(&name);
            member.arrivals.take(&name);
            member.queue.forget(&name);
            member.queue.done(&name);
            continue;
        }
        let started = Instant::now();
        let result = reconcile_work(&ctx, &member, &name).await;
        metrics().reconciled("work", result.is_ok(), started.elapsed());
        tracing::debug!(cluster = %member.name, work = %name, ok = result.is_ok(), elapsed = ?started.elapsed(), "Work reconciled");
        match result {
            Ok(()) => member.queue.forget(&name),
            Err(error) => {
                if error.is_unreachable() {
                    member.probe_now.notify_one();
                }
                let delay = member.queue.add_rate_limited(name.clone());
                tracing::info!(cluster = %member.name, work = %name, %error, retry_in = ?delay, "Work not applied");
            }
        }
        member.queue.done(&name);
    }
}

/// What happened to one manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Written to the member.
    Applied,
    /// The member already matched.
    Unchanged,
    /// Left alone by apply-once-only.
    Skipped(SkipReason),
    /// An object flotilla does not own is in the way (Abort).
    Conflict(String),
    /// The member cannot be reached.
    Unreachable(String),
    /// Anything else.
    Failed(String),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Applied | Outcome::Unchanged => "applied",
            Outcome::Skipped(_) => "skipped-apply-once",
            Outcome::Conflict(_) => "conflict",
            Outcome::Unreachable(_) => "unreachable",
            Outcome::Failed(_) => "error",
        }
    }

    fn from_error(error: ExecutionError) -> Self {
        match error {
            ExecutionError::Unreachable { .. } => Outcome::Unreachable(error.to_string()),
            other => Outcome::Failed(other.to_string()),
        }
    }
}

struct ManifestResult {
    outcome: Outcome,
    status: ManifestStatus,
    applied_revision: Option<String>,
    /// Written just now, and a controller of the member is yet to report on it
    /// ([`flotilla_interpreter::awaits_controller`]).
    awaits_controller: bool,
}

/// The Work a reconcile of `name` starts from (`None`: it is gone). The watch's delivery that
/// queued it, if held ([`crate::arrivals`]); else the Work as the reconcile whose report
/// waited read it, while the cache shows it unchanged for the worker (its generation,
/// deletion and finalizers); else a read from the API server. Either copy may be older than
/// the API's in what the worker does not act on (status, labels): the status write's
/// resourceVersion precondition then fails, and the retry reads the Work.
async fn read_work(
    ctx: &Arc<Context>,
    member: &Arc<Member>,
    api: &Api<Work>,
    name: &str,
) -> Result<Option<Work>, ExecutionError> {
    let namespace = member.namespace();
    // This reconcile reports, or waits again: an earlier wait is over.
    let remembered = member.report_taken(name);
    if let Some(work) = member.arrivals.take(name) {
        metrics().work_read(Source::Watch);
        return Ok(Some(work));
    }
    let remembered = remembered.filter(|read| {
        ctx.stores
            .works
            .get(Some(&namespace), name)
            .is_some_and(|cached| cached.worker_signature() == worker_signature_of(read))
    });
    if let Some(work) = remembered {
        metrics().work_read(Source::Wait);
        return Ok(Some(work));
    }
    metrics().work_read(Source::Api);
    let work = api
        .get_opt(name)
        .await
        .map_err(ExecutionError::control_plane(format!(
            "read Work {namespace}/{name}"
        )))?;
    if let Some(work) = &work {
        // What the watch has delivered of this very object (not of one deleted before it).
        let cached = ctx
            .stores
            .works
            .get_of_uid(Some(&namespace), name, work.metadata.uid.as_deref());
        member
            .arrivals
            .read_from_api(&Arc::from(name), work, cached.map(|c| c.generation()));
    }
    Ok(work)
}

/// Reconciles Work `name` of `member`.
pub async fn reconcile_work(
    ctx: &Arc<Context>,
    member: &Arc<Member>,
    name: &str,
) -> Result<(), ExecutionError> {
    let namespace = member.namespace();
    let api: Api<Work> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(work) = read_work(ctx, member, &api, name).await? else {
        return Ok(());
    };
    if work.metadata.deletion_timestamp.is_some() {
        return finalize_work(ctx, member, &api, &work).await;
    }
    if !work.finalizers().iter().any(|f| f == WORK_FINALIZER) {
        let mut finalizers = work.finalizers().to_vec();
        finalizers.push(WORK_FINALIZER.to_owned());
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"resourceVersion": work.resource_version(), "finalizers": finalizers}}),
            ),
        )
        .await
        .map_err(ExecutionError::control_plane(format!(
            "add the finalizer to Work {namespace}/{name}"
        )))?;
        // The write re-queues the Work through the watch.
        return Ok(());
    }
    if is_orphan(ctx, &work).await? {
        tracing::info!(work = %format!("{namespace}/{name}"), "deleting a Work whose binding is gone");
        api.delete(name, &DeleteParams::background())
            .await
            .map_err(ExecutionError::control_plane(format!(
                "delete orphaned Work {namespace}/{name}"
            )))?;
        return Ok(());
    }

    let suspended = work.spec.suspend_dispatching == Some(true);
    let mut status = work.status.clone().unwrap_or_default();
    let was_dispatching = find(&status.conditions, types::DISPATCHING).map(|c| c.status == "True");
    let generation = work.metadata.generation;
    let now = Timestamp::now();
    if suspended {
        conditions::set(
            &mut status.conditions,
            types::DISPATCHING,
            false,
            reasons::SUSPEND_DISPATCHING,
            reasons::SUSPEND_DISPATCHING_MESSAGE,
            generation,
            now,
        );
        if was_dispatching != Some(false) {
            ctx.event(
                &work.object_ref(&()),
                EventType::Normal,
                "DispatchSuspended",
                "Dispatch",
                format!("dispatching to cluster {} is suspended", member.name),
            )
            .await;
        }
        for manifest in &work.spec.workload.manifests {
            let object = ObjectIdentity::of(manifest)
                .map(|i| i.to_string())
                .unwrap_or_default();
            let span = tracing::info_span!(
                "execution.apply",
                object = %object,
                cluster = %member.name,
                outcome = "suspended",
            );
            if let Some(traceparent) = work.annotations().get(TRACE_PARENT_ANNOTATION) {
                flotilla_telemetry::propagation::follow_traceparent(&span, traceparent, apply_pending(&work));
            }
            let _span = span.entered();
            tracing::debug!("dispatching suspended; member left alone");
        }
        return write_work_status(ctx, &work, status).await;
    }
    conditions::set(
        &mut status.conditions,
        types::DISPATCHING,
        true,
        reasons::DISPATCHING,
        DISPATCHING_MESSAGE,
        generation,
        now,
    );
    if was_dispatching == Some(false) {
        ctx.event(
            &work.object_ref(&()),
            EventType::Normal,
            "DispatchResumed",
            "Dispatch",
            format!("dispatching to cluster {} resumed", member.name),
        )
        .await;
    }

    let client = match member_client(ctx, member).await {
        Ok(client) => client,
        Err(error) => {
            conditions::set(
                &mut status.conditions,
                types::APPLIED,
                false,
                reasons::APPLY_FAILED,
                error.to_string(),
                generation,
                now,
            );
            write_work_status(ctx, &work, status).await?;
            return Err(error);
        }
    };
    let recorded = applied_revisions(&work);
    let mut results = Vec::new();
    for (ordinal, manifest) in work.spec.workload.manifests.iter().enumerate() {
        results.push(
            apply_manifest(
                ctx,
                member,
                &client,
                &work,
                ordinal,
                manifest,
                recorded.get(&ordinal),
            )
            .await,
        );
    }

    if !ctx.settings.report_wait.is_zero() && report_waits(&results, was_dispatching) {
        member.wait_for_report(name.into(), ctx.settings.report_wait, work);
        return Ok(());
    }
    let (applied, reason, message) = applied_condition(&results);
    conditions::set(
        &mut status.conditions,
        types::APPLIED,
        applied,
        reason,
        message,
        generation,
        now,
    );
    // One status write reports the applies and records what was applied.
    status.manifest_statuses = results
        .iter()
        .map(|r| ManifestStatus {
            applied_revision: r.applied_revision.clone(),
            ..r.status.clone()
        })
        .collect();
    write_work_status(ctx, &work, status).await?;
    match results
        .into_iter()
        .map(|r| r.outcome)
        .find(|o| matches!(o, Outcome::Unreachable(_) | Outcome::Failed(_)))
    {
        Some(Outcome::Unreachable(message)) => Err(ExecutionError::Unreachable {
            cluster: member.name.clone(),
            message,
        }),
        Some(Outcome::Failed(message)) => Err(ExecutionError::NotReady(message)),
        _ => Ok(()),
    }
}

/// Whether the report of a reconcile with these `results` waits for the member's controllers
/// (see [`REPORT_WAIT`]): every manifest is applied (or left as it was) and one just written
/// awaits its controller. A Work whose dispatching has just resumed reports at once: the
/// `DispatchResumed` event goes with the status that ends the suspension.
fn report_waits(results: &[ManifestResult], was_dispatching: Option<bool>) -> bool {
    was_dispatching != Some(false)
        && results.iter().any(|r| r.awaits_controller)
        && results.iter().all(|r| {
            matches!(
                r.outcome,
                Outcome::Applied | Outcome::Unchanged | Outcome::Skipped(_)
            )
        })
}

/// `Applied` from the manifests' outcomes: unreachable wins, then conflicts, then failures.
fn applied_condition(results: &[ManifestResult]) -> (bool, &'static str, String) {
    let messages = |pick: fn(&Outcome) -> Option<&String>| -> Vec<String> {
        results.iter().filter_map(|r| pick(&r.outcome).cloned()).collect()
    };
    let unreachable = messages(|o| match o {
        Outcome::Unreachable(m) => Some(m),
        _ => None,
    });
    if !unreachable.is_empty() {
        return (false, reasons::CLUSTER_UNREACHABLE, unreachable.join("; "));
    }
    let conflicts = messages(|o| match o {
        Outcome::Conflict(m) => Some(m),
        _ => None,
    });
    if !conflicts.is_empty() {
        return (false, reasons::CONFLICT, conflicts.join("; "));
    }
    let failures = messages(|o| match o {
        Outcome::Failed(m) => Some(m),
        _ => None,
    });
    if !failures.is_empty() {
        return (false, reasons::APPLY_FAILED, failures.join("; "));
    }
    (true, reasons::APPLY_SUCCESSFUL, APPLIED_MESSAGE.to_owned())
}

/// Whether the Work's binding is gone (or was re-created with another uid).
async fn is_orphan(ctx: &Context, work: &Work) -> Result<bool, ExecutionError> {
    let Some(key) = binding_of_work(work) else {
        return Ok(false);
    };
    let labels = work.labels();
    let uid = labels
        .get(flotilla_api::well_known::RESOURCE_BINDING_PERMANENT_ID_LABEL)
        .or_else(|| labels.get(flotilla_api::well_known::CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL));
    if let (Some(cached), Some(uid)) = (crate::watches::cached_binding(ctx, &key), uid)
        && cached.has_uid(uid)
    {
        return Ok(false);
    }
    // The cache may lag behind a new binding: ask the API before deleting anything.
    match get_binding(ctx, &key).await? {
        None => Ok(true),
        Some(binding) => Ok(uid.is_some() && binding.metadata.uid.as_ref() != uid),
    }
}

/// Writes a Work's status (answered with metadata only: the Work's manifests are not read
/// back).
async fn write_work_status(ctx: &Context, work: &Work, status: WorkStatus) -> Result<(), ExecutionError> {
    if work.status.as_ref() == Some(&status) || (work.status.is_none() && status == WorkStatus::default()) {
        return Ok(());
    }
    let namespace = work.namespace().unwrap_or_default();
    let patch = json!({
        "metadata": {"resourceVersion": work.resource_version()},
        "status": {"conditions": status.conditions, "manifestStatuses": status.manifest_statuses},
    });
    flotilla_runtime::lean::patch(
        &ctx.client,
        &Work::url_path(&(), Some(&namespace)),
        &work.name_any(),
        Some("status"),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(ExecutionError::control_plane(format!(
        "write the status of Work {namespace}/{}",
        work.name_any()
    )))?;
    Ok(())
}

fn identifier(ordinal: usize, identity: Option<&ObjectIdentity>, resource: &str) -> ResourceIdentifier {
    let Some(identity) = identity else {
        return ResourceIdentifier {
            ordinal: i64::try_from(ordinal).unwrap_or(i64::MAX),
            ..Default::default()
        };
    };
    let (group, version) = identity.group_version();
    ResourceIdentifier {
        ordinal: i64::try_from(ordinal).unwrap_or(i64::MAX),
        group: group.to_owned(),
        version: version.to_owned(),
        kind: identity.kind.clone(),
        resource: resource.to_owned(),
        namespace: identity.namespace.clone(),
        name: identity.name.clone(),
    }
}

/// Applies one manifest inside an `execution.apply` span.
async fn apply_manifest(
    ctx: &Arc<Context>,
    member: &Arc<Member>,
    client: &MemberClient,
    work: &Work,
    ordinal: usize,
    manifest: &Value,
    recorded: Option<&String>,
) -> ManifestResult {
    let identity = ObjectIdentity::of(manifest).ok();
    let object = identity
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| format!("manifest {ordinal}"));
    let span = tracing::info_span!(
        "execution.apply",
        object = %object,
        cluster = %member.name,
        outcome = tracing::field::Empty,
    );
    if let Some(traceparent) = work.annotations().get(TRACE_PARENT_ANNOTATION) {
        flotilla_telemetry::propagation::follow_traceparent(&span, traceparent, apply_pending(work));
    }
    let started = Instant::now();
    let result = apply_manifest_inner(
        ctx,
        member,
        client,
        work,
        ordinal,
        manifest,
        recorded,
        identity.as_ref(),
    )
    .instrument(span.clone())
    .await;
    let label = result.outcome.label();
    span.record("outcome", label);
    metrics().observe_apply(&member.name, label, started.elapsed());
    match &result.outcome {
        Outcome::Unreachable(_) => metrics().apply_error(&member.name, "unreachable"),
        Outcome::Conflict(_) => metrics().apply_error(&member.name, "conflict"),
        Outcome::Failed(_) => metrics().apply_error(&member.name, "error"),
        _ => {}
    }
    tracing::debug!(parent: &span, outcome = label, "manifest processed");
    result
}

/// Whether the Work's current generation has not been processed yet (its `Applied` condition
/// does not observe it): applying it continues the trace of the change that wrote the Work;
/// re-applying an already processed Work (resync, drift, a member coming back) is a trace of
/// its own that links to it.
fn apply_pending(work: &Work) -> bool {
    let observed = work
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, types::APPLIED))
        .and_then(|c| c.observed_generation);
    work.metadata.generation.is_some() && observed != work.metadata.generation
}

#[allow(clippy::too_many_arguments)]
async fn apply_manifest_inner(
    ctx: &Arc<Context>,
    member: &Arc<Member>,
    client: &MemberClient,
    work: &Work,
    ordinal: usize,
    manifest: &Value,
    recorded_on_work: Option<&String>,
    identity: Option<&ObjectIdentity>,
) -> ManifestResult {
    let failed = |outcome: Outcome, resource: &str| ManifestResult {
        outcome,
        status: ManifestStatus {
            identifier: identifier(ordinal, identity, resource),
            status: None,
            health: None,
            applied_revision: None,
        },
        applied_revision: recorded_on_work.cloned(),
        awaits_controller: false,
    };
    let Some(identity) = identity else {
        let error = ObjectIdentity::of(manifest)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return failed(Outcome::Failed(format!("manifest {ordinal}: {error}")), "");
    };
    let kind = match client
        .kinds
        .resolve(&client.api, &identity.api_version, &identity.kind)
        .await
    {
        Ok(kind) => kind,
        Err(error) => {
            let error = member_error(
                &member.name,
                format!("discover {} {}", identity.api_version, identity.kind),
                error,
            );
            return failed(Outcome::from_error(error), "");
        }
    };
    let resource = kind.resource.plural.clone();
    ensure_watch(ctx, member, client, &kind);
    // Member objects are read and written as JSON trees without their managedFields
    // (`flotilla_runtime::object`): ownership, revisions and health read nothing else.
    let url_path = kind.url_path(&identity.namespace);
    let live = match flotilla_runtime::object::get(&client.api, &url_path, &identity.name).await {
        Ok(live) => live,
        Err(error) => {
            return failed(
                Outcome::from_error(member_error(&member.name, format!("read {identity}"), error)),
                &resource,
            );
        }
    };
    let work_namespace = work.namespace().unwrap_or_default();
    let work_name = work.name_any();
    let work_uid = work.uid().unwrap_or_default();
    let work_ref = WorkRef {
        namespace: &work_namespace,
        name: &work_name,
        uid: &work_uid,
    };
    let owner = ownership(live.as_ref(), &work_ref);
    // The watch digested this generation's manifests already, unless the cache holds another
    // generation of the Work (or none).
    let digest = ctx
        .stores
        .works
        .get_of_uid(Some(&work_namespace), &work_name, Some(&work_uid))
        .and_then(|cached| {
            cached.manifest_digest_at(
                work.metadata.generation,
                ordinal,
                work.spec.workload.manifests.len(),
            )
        })
        .unwrap_or_else(|| manifest_digest(manifest));
    let revision = Revision::of_digest(work.metadata.generation.unwrap_or(0), digest);
    let desired_revision = revision.to_string();
    let recorded = match (&owner, &live) {
        (Ownership::Ours, Some(live)) => recorded_revision(live).map(str::to_owned),
        (Ownership::Absent, _) => recorded_on_work.cloned(),
        _ => None,
    };
    let (mode, invalid) = effective_mode(
        ctx.settings.apply_once_only,
        manifest_apply_once_override(manifest),
    );
    if let Some(invalid) = invalid {
        ctx.event(
            &work.object_ref(&()),
            EventType::Warning,
            "InvalidApplyOnceOnly",
            "Apply",
            format!("{identity}: {invalid}; using --apply-once-only={mode}"),
        )
        .await;
    }
    let status_of = |object: Option<&Value>| ManifestStatus {
        identifier: identifier(ordinal, Some(identity), &resource),
        status: object.and_then(flotilla_interpreter::reflect_status),
        health: object.map(|o| flotilla_interpreter::health(o).into()),
        applied_revision: None,
    };
    if defers_to_namespace_work(
        &identity.api_version,
        &identity.kind,
        &identity.name,
        &owner,
        &work_ref,
    ) {
        return ManifestResult {
            outcome: Outcome::Unchanged,
            status: status_of(live.as_ref()),
            applied_revision: recorded_on_work.cloned(),
            awaits_controller: false,
        };
    }
    match decide(
        mode,
        recorded.as_deref(),
        &desired_revision,
        live.is_some(),
        false,
    ) {
        Decision::Skip(reason) => {
            return ManifestResult {
                outcome: Outcome::Skipped(reason),
                status: status_of(live.as_ref()),
                applied_revision: recorded,
                awaits_controller: false,
            };
        }
        Decision::Apply => {}
    }
    let resolution = manifest_conflict_resolution(manifest);
    if is_conflict(&owner, &resolution) {
        let message = conflict_message(&owner, &identity.to_string());
        ctx.event(
            &work.object_ref(&()),
            EventType::Warning,
            reasons::CONFLICT,
            "Apply",
            message.clone(),
        )
        .await;
        return ManifestResult {
            outcome: Outcome::Conflict(message),
            status: status_of(None),
            applied_revision: recorded_on_work.cloned(),
            awaits_controller: false,
        };
    }
    let body = with_marks(manifest, &work_ref, &revision);
    if owner == Ownership::Ours
        && let Some(live) = &live
        && matches(&body, live)
    {
        return ManifestResult {
            outcome: Outcome::Unchanged,
            status: status_of(Some(live)),
            applied_revision: Some(desired_revision),
            awaits_controller: false,
        };
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let in_flight = member.begin_apply((
        kind.resource.api_version.clone(),
        kind.resource.kind.clone(),
        identity.namespace.clone(),
        identity.name.clone(),
    ));
    let answer = flotilla_runtime::object::patch(
        &client.api,
        &url_path,
        &identity.name,
        &params,
        &Patch::Apply(&body),
    )
    .await;
    in_flight.end(
        answer
            .as_ref()
            .ok()
            .and_then(|applied| applied.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str),
        live.as_ref()
            .and_then(|live| live.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str),
    );
    match answer {
        Ok(applied) => ManifestResult {
            outcome: Outcome::Applied,
            status: status_of(Some(&applied)),
            applied_revision: Some(desired_revision),
            awaits_controller: mode != Mode::Force && flotilla_interpreter::awaits_controller(&applied),
        },
        Err(error) => {
            if is_status(&error, 404) {
                // The kind may have been removed and re-added (a CRD); look it up again.
                client.kinds.forget(&identity.api_version, &identity.kind);
            }
            failed(
                Outcome::from_error(member_error(&member.name, format!("apply {identity}"), error)),
                &resource,
            )
        }
    }
}

/// A deleted Work: remove its member objects (unless `preserveResourcesOnDeletion`, or the
/// cluster is no longer registered), then drop the finalizer. Only objects this Work owns are
/// deleted; an object left alone by a conflict stays.
async fn finalize_work(
    ctx: &Arc<Context>,
    member: &Arc<Member>,
    api: &Api<Work>,
    work: &Work,
) -> Result<(), ExecutionError> {
    if !work.finalizers().iter().any(|f| f == WORK_FINALIZER) {
        return Ok(());
    }
    let name = work.name_any();
    let namespace = member.namespace();
    let registered = ctx.stores.clusters.get(&ObjectRef::new(&member.name)).is_some();
    let preserve = work.spec.preserve_resources_on_deletion == Some(true);
    if registered && !preserve {
        let client = member_client(ctx, member).await?;
        let uid = work.uid().unwrap_or_default();
        let work_ref = WorkRef {
            namespace: &namespace,
            name: &name,
            uid: &uid,
        };
        for manifest in &work.spec.workload.manifests {
            let Ok(identity) = ObjectIdentity::of(manifest) else {
                continue;
            };
            let kind = match client
                .kinds
                .resolve(&client.api, &identity.api_version, &identity.kind)
                .await
            {
                Ok(kind) => kind,
                Err(error) if is_status(&error, 404) => continue,
                Err(error) => return Err(member_error(&member.name, format!("discover {identity}"), error)),
            };
            let object_api = kind.api(&client.api, &identity.namespace);
            let live = flotilla_runtime::object::get(
                &client.api,
                &kind.url_path(&identity.namespace),
                &identity.name,
            )
            .await
            .map_err(|e| member_error(&member.name, format!("read {identity}"), e))?;
            if ownership(live.as_ref(), &work_ref) != Ownership::Ours {
                continue;
            }
            match object_api
                .delete(&identity.name, &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(error) if is_status(&error, 404) => {}
                Err(error) => return Err(member_error(&member.name, format!("delete {identity}"), error)),
            }
            tracing::info!(cluster = %member.name, object = %identity, "deleted member object");
        }
    }
    let finalizers: Vec<String> = work
        .finalizers()
        .iter()
        .filter(|f| *f != WORK_FINALIZER)
        .cloned()
        .collect();
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"resourceVersion": work.resource_version(), "finalizers": finalizers}}),
        ),
    )
    .await
    .map_err(ExecutionError::control_plane(format!(
        "remove the finalizer of Work {namespace}/{name}"
    )))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;

    fn work(generation: Option<i64>, applied_at: Option<i64>) -> Work {
        let mut work = Work::new("w", flotilla_api::work::WorkSpec::default());
        work.metadata.generation = generation;
        if let Some(observed) = applied_at {
            work.status = Some(WorkStatus {
                conditions: vec![Condition {
                    type_: types::APPLIED.to_owned(),
                    status: "True".to_owned(),
                    reason: "AppliedSuccessful".to_owned(),
                    message: String::new(),
                    observed_generation: Some(observed),
                    last_transition_time: Time(Timestamp::now()),
                }],
                ..Default::default()
            });
        }
        work
    }

    #[test]
    fn applying_continues_the_trace_only_of_an_unprocessed_work_generation() {
        assert!(apply_pending(&work(Some(1), None)));
        assert!(apply_pending(&work(Some(3), Some(2))));
        assert!(!apply_pending(&work(Some(3), Some(3))));
        assert!(!apply_pending(&work(None, None)));
    }

    fn result(outcome: Outcome, awaits_controller: bool) -> ManifestResult {
        ManifestResult {
            outcome,
            status: ManifestStatus {
                identifier: ResourceIdentifier::default(),
                status: None,
                health: None,
                applied_revision: None,
            },
            applied_revision: None,
            awaits_controller,
        }
    }

    /// A report waits only when a manifest written just now awaits its controller, nothing
    /// failed, and dispatching did not just resume.
    #[test]
    fn a_report_waits_for_controllers_only_when_everything_was_applied() {
        let deployment = || result(Outcome::Applied, true);
        let config_map = || result(Outcome::Applied, false);
        let unchanged = || result(Outcome::Unchanged, false);
        let skipped = || result(Outcome::Skipped(SkipReason::AlreadyApplied), false);
        for dispatching in [None, Some(true)] {
            assert!(report_waits(&[deployment()], dispatching));
            assert!(report_waits(
                &[config_map(), deployment(), unchanged(), skipped()],
                dispatching
            ));
            assert!(
                !report_waits(&[config_map()], dispatching),
                "no controller to wait for"
            );
            assert!(
                !report_waits(&[unchanged(), skipped()], dispatching),
                "nothing written"
            );
            assert!(!report_waits(&[], dispatching));
            for failed in [
                Outcome::Conflict("in the way".into()),
                Outcome::Unreachable("down".into()),
                Outcome::Failed("invalid".into()),
            ] {
                assert!(
                    !report_waits(&[deployment(), result(failed.clone(), false)], dispatching),
                    "{failed:?} is reported at once"
                );
            }
        }
        assert!(!report_waits(&[deployment()], Some(false)), "dispatching resumed");
    }
}
