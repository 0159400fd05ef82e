//! Scheduling one binding against the API: read it, decide ([`crate::decision`]), write
//! `spec.clusters` and then the status, each write conditional on the resourceVersion that was
//! read. A 409 Conflict means someone wrote first (another scheduler replica, the detector, a
//! status writer): the binding is read again and the decision made anew, so concurrent replicas
//! end up agreeing instead of overwriting each other.
//!
//! Both triggers run this: the watch (`controller.rs`) and the gRPC `Schedule` call
//! (`grpc.rs`). After a write that records a new result or generation, the peers are told
//! ([`crate::peers`]).

use std::sync::Arc;
use std::time::Instant;

use flotilla_api::TargetCluster;
use flotilla_api::well_known::{
    DEFAULT_SCHEDULER_NAME, EVICTION_PRODUCER_CRB_APPLICATION_FAILOVER,
    EVICTION_PRODUCER_RB_APPLICATION_FAILOVER, events,
};
use flotilla_proto::v1::{BindingKind, BindingRef};
use flotilla_runtime::events::Recorder;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Reporter};
use tracing::Instrument;

use crate::attempts::{Attempts, Turn};
use crate::binding::{BindingKey, BindingObject, CachedBinding};
use crate::decision::{Decision, decide_with, spec_patch, status_after, status_patch};
use crate::failover::{FailoverContext, FailoverOptions};
use crate::inventory::Inventory;
use crate::metrics::metrics;
use crate::peers::Peers;

/// How often one scheduling attempt re-reads the binding after a 409 before giving up (the
/// caller then retries later).
const MAX_CONFLICTS: u32 = 8;

/// What the service needs to schedule a binding.
pub struct Context {
    /// Control-plane client.
    pub client: Client,
    /// The registered clusters.
    pub inventory: Arc<Inventory>,
    /// Execution and dependency-distributor clients.
    pub peers: Peers,
    /// Failover settings (flags).
    pub failover: FailoverOptions,
    /// Events on bindings (evictions).
    pub recorder: Recorder,
    /// Turns and newest versions per binding (see [`crate::attempts`]).
    pub attempts: Attempts,
}

impl Context {
    /// The scheduler's event recorder.
    pub fn recorder(client: Client) -> Recorder {
        Recorder::new(
            client,
            Reporter {
                controller: "flotilla-scheduler".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        )
    }
}

/// What scheduling a binding came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The binding was written (result, status or both).
    Scheduled,
    /// The binding already said everything; nothing was written.
    Unchanged,
    /// The binding does not exist.
    NotFound,
    /// The binding is not this scheduler's to schedule (being deleted, or `spec.schedulerName`
    /// names another scheduler).
    Skipped,
    /// The watch's copy is older than a version this process already read or wrote: the newer
    /// version's event queues the binding again (see [`crate::attempts`]).
    Stale,
}

impl Outcome {
    /// A metric label and span attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Unchanged => "unchanged",
            Self::NotFound => "not-found",
            Self::Skipped => "skipped",
            Self::Stale => "stale",
        }
    }
}

/// The result of scheduling one binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What happened.
    pub outcome: Outcome,
    /// `spec.clusters` after the attempt.
    pub clusters: Vec<TargetCluster>,
    /// `status.schedulerObservedGeneration` after the attempt.
    pub observed_generation: Option<i64>,
    /// The binding's generation after the attempt.
    pub generation: i64,
    /// Why the binding is unschedulable; `None` when it was scheduled.
    pub unschedulable: Option<String>,
    /// When a failover deadline of the binding comes (a toleration or a grace period running
    /// out), from now: it must be scheduled again then.
    pub next_check: Option<std::time::Duration>,
}

impl Report {
    fn without_binding(outcome: Outcome) -> Self {
        Self {
            outcome,
            clusters: Vec::new(),
            observed_generation: None,
            generation: 0,
            unschedulable: None,
            next_check: None,
        }
    }
}

/// Errors scheduling a binding (a binding that cannot be scheduled is not an error: it gets
/// `Scheduled=False`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API refused a read or write.
    #[error("cannot {action} {key}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// The binding.
        key: String,
        /// Why it failed.
        source: kube::Error,
    },
    /// Every write attempt lost to another writer.
    #[error(
        "{key} kept changing while it was being scheduled ({MAX_CONFLICTS} conflicts in a row); will retry"
    )]
    Conflicts {
        /// The binding.
        key: String,
    },
    /// The cluster inventory has not been listed yet, so no decision can be made.
    #[error("the Cluster list has not been read yet; retry shortly")]
    NotSynced,
}

/// What started a scheduling attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A watch event (or a cluster inventory change, or a requeue).
    Watch,
    /// A gRPC `Schedule` call.
    Grpc,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Self::Watch => "watch",
            Self::Grpc => "grpc",
        }
    }
}

/// Whether `scheduler_name` is this scheduler's (unset, empty, or the default scheduler).
pub fn is_ours(scheduler_name: Option<&str>) -> bool {
    scheduler_name.is_none_or(|name| name.is_empty() || name == DEFAULT_SCHEDULER_NAME)
}

/// Schedules the binding `key` of kind `K`. `cached` is the caller's copy, used for the first
/// attempt (the watch's); without one the binding is read from the API.
///
/// Runs in a `scheduler.schedule` span: a child of the current span for gRPC calls; for watch
/// triggers a child of the binding's `flotilla.io/traceparent` when the binding's change is
/// still unscheduled, else a new trace linked to it.
pub async fn schedule_binding<K: BindingObject>(
    ctx: &Context,
    key: &BindingKey,
    cached: Option<CachedBinding>,
    trigger: Trigger,
) -> Result<Report, ReconcileError> {
    let span = match trigger {
        Trigger::Grpc => tracing::info_span!(
            "scheduler.schedule",
            binding = %key,
            trigger = trigger.as_str(),
            outcome = tracing::field::Empty,
            clusters = tracing::field::Empty,
        ),
        Trigger::Watch => {
            let span = tracing::info_span!(
                parent: None,
                "scheduler.schedule",
                binding = %key,
                trigger = trigger.as_str(),
                outcome = tracing::field::Empty,
                clusters = tracing::field::Empty,
            );
            if let Some(binding) = &cached
                && let Some(traceparent) = &binding.traceparent
            {
                let pending = schedule_pending(binding.generation, binding.observed_generation());
                flotilla_telemetry::propagation::follow_traceparent(&span, traceparent, pending);
            }
            span
        }
    };
    let started = Instant::now();
    let result = attempt::<K>(ctx, key, cached, trigger)
        .instrument(span.clone())
        .await;
    let outcome = match &result {
        Ok(report) => {
            span.record("outcome", report.outcome.as_str());
            span.record("clusters", format_clusters(&report.clusters).as_str());
            if let Some(message) = &report.unschedulable {
                span.record("outcome", "unschedulable");
                span.in_scope(|| tracing::info!(%message, "binding is unschedulable"));
                "unschedulable"
            } else {
                report.outcome.as_str()
            }
        }
        Err(error) => {
            span.record("outcome", "error");
            metrics().error(match error {
                ReconcileError::Api { .. } => "api",
                ReconcileError::Conflicts { .. } => "conflicts",
                ReconcileError::NotSynced => "not-synced",
            });
            "error"
        }
    };
    metrics().observe_schedule(key.kind_name(), trigger.as_str(), outcome, started.elapsed());
    result
}

/// Whether the binding's latest spec change still waits for this scheduler: then a watch-triggered
/// schedule continues the trace of that change (the watch beat the detector's `Schedule` call)
/// instead of starting one of its own.
pub fn schedule_pending(generation: Option<i64>, observed: Option<i64>) -> bool {
    generation.is_some() && generation != observed
}

/// `member1:2,member2:3`.
pub fn format_clusters(clusters: &[TargetCluster]) -> String {
    clusters
        .iter()
        .map(|t| format!("{}:{}", t.name, t.replicas))
        .collect::<Vec<_>>()
        .join(",")
}

fn api_error(action: &'static str, key: &BindingKey) -> impl FnOnce(kube::Error) -> ReconcileError {
    let key = key.to_string();
    move |source| ReconcileError::Api { action, key, source }
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

async fn attempt<K: BindingObject>(
    ctx: &Context,
    key: &BindingKey,
    cached: Option<CachedBinding>,
    trigger: Trigger,
) -> Result<Report, ReconcileError> {
    if !ctx.inventory.is_synced() {
        return Err(ReconcileError::NotSynced);
    }
    // One attempt per binding at a time; a watch copy older than what this process has seen
    // would only lose a conflict.
    let mut seen = ctx.attempts.lock(key).await;
    if let Some(binding) = &cached
        && seen.is_older(binding.resource_version.as_deref())
    {
        return Ok(report(binding, Outcome::Stale, None));
    }
    let result = attempt_in_turn::<K>(ctx, key, cached, trigger, &mut seen).await;
    drop(seen);
    result
}

async fn attempt_in_turn<K: BindingObject>(
    ctx: &Context,
    key: &BindingKey,
    cached: Option<CachedBinding>,
    trigger: Trigger,
    seen: &mut Turn<'_>,
) -> Result<Report, ReconcileError> {
    let api = K::api(ctx.client.clone(), key.namespace.as_deref());
    let mut next: Option<CachedBinding> = cached;
    for _ in 0..MAX_CONFLICTS {
        let binding = match next.take() {
            Some(binding) => binding,
            None => match api.get_opt(&key.name).await.map_err(api_error("read", key))? {
                Some(binding) => {
                    seen.observe(binding.meta().resource_version.as_deref());
                    CachedBinding::of(binding)
                }
                None => return Ok(Report::without_binding(Outcome::NotFound)),
            },
        };
        if binding.deleting || !is_ours(binding.spec.scheduler_name.as_deref()) {
            return Ok(report(&binding, Outcome::Skipped, None));
        }
        let observed_before = binding.observed_generation();
        let clusters = ctx.inventory.snapshot();
        let failover = FailoverContext {
            options: &ctx.failover,
            generation: binding.generation,
            lazy: binding.lazy,
            application_producer: match K::KIND {
                BindingKind::ClusterResourceBinding => EVICTION_PRODUCER_CRB_APPLICATION_FAILOVER,
                _ => EVICTION_PRODUCER_RB_APPLICATION_FAILOVER,
            },
            now: Timestamp::now(),
        };
        let decision = decide_with(&binding.spec, binding.status.as_ref(), &clusters, Some(&failover));

        let mut binding = binding;
        let mut wrote = false;
        let url_path = K::url_path(&(), key.namespace.as_deref());
        if decision.changes_spec(&binding.spec) {
            let patch = spec_patch(
                binding.resource_version.as_deref().unwrap_or_default(),
                &decision.clusters,
                &decision.tasks,
            );
            // Answered with metadata only: the write was conditional on the version read, so
            // the binding now is the one read with these clusters and the new metadata.
            match flotilla_runtime::lean::patch(
                &ctx.client,
                &url_path,
                &key.name,
                None,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            {
                Ok(metadata) => {
                    tracing::info!(
                        from = %format_clusters(&binding.spec.clusters),
                        to = %format_clusters(&decision.clusters),
                        eviction_tasks = decision.tasks.len(),
                        "wrote spec.clusters"
                    );
                    seen.observe(metadata.resource_version.as_deref());
                    binding.wrote(metadata);
                    binding.spec.clusters = decision.clusters.clone();
                    binding.spec.graceful_eviction_tasks = decision.tasks.clone();
                    report_failover(ctx, &binding, &decision).await;
                    wrote = true;
                }
                Err(error) if status_code(&error) == Some(409) => {
                    metrics().conflict();
                    tracing::debug!("spec.clusters write conflicted; reading the binding again");
                    continue;
                }
                Err(error) if status_code(&error) == Some(404) => {
                    return Ok(Report::without_binding(Outcome::NotFound));
                }
                Err(error) => return Err(api_error("write spec.clusters of", key)(error)),
            }
        }

        let generation = binding.generation.unwrap_or_default();
        let status = status_after(binding.status.as_ref(), generation, &decision, Timestamp::now());
        if let Some(status) = &status {
            let patch = status_patch(binding.resource_version.as_deref().unwrap_or_default(), status);
            // Answered with metadata only, as above: the status is the one written.
            match flotilla_runtime::lean::patch(
                &ctx.client,
                &url_path,
                &key.name,
                Some("status"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            {
                Ok(metadata) => {
                    seen.observe(metadata.resource_version.as_deref());
                    binding.wrote(metadata);
                    binding.status = Some(status.clone());
                    wrote = true;
                }
                Err(error) if status_code(&error) == Some(409) => {
                    metrics().conflict();
                    tracing::debug!("status write conflicted; reading the binding again");
                    continue;
                }
                Err(error) if status_code(&error) == Some(404) => {
                    return Ok(Report::without_binding(Outcome::NotFound));
                }
                Err(error) => return Err(api_error("write the status of", key)(error)),
            }
        }

        let observed_after = binding.observed_generation();
        if wrote && decision.settles && observed_after != observed_before {
            notify_peers(ctx, &binding, trigger);
        }
        let unschedulable = decision.outcome.as_ref().err().map(|e| e.message.clone());
        let outcome = if wrote {
            Outcome::Scheduled
        } else {
            Outcome::Unchanged
        };
        let mut report = report(&binding, outcome, unschedulable);
        report.next_check = decision.next_check;
        return Ok(report);
    }
    Err(ReconcileError::Conflicts { key: key.to_string() })
}

/// Logs, counts and records as events the evictions and finished eviction tasks of a decision
/// that was just written (events are best-effort). As in Karmada, each event is recorded on the
/// binding and on its resource template.
async fn report_failover(ctx: &Context, binding: &CachedBinding, decision: &Decision) {
    let spec = &binding.spec;
    let template = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(spec.resource.api_version.clone()),
        kind: Some(spec.resource.kind.clone()),
        namespace: spec.resource.namespace.clone(),
        name: Some(spec.resource.name.clone()),
        uid: spec.resource.uid.clone(),
        ..Default::default()
    };
    let references = [binding.object_reference(), template];
    for eviction in &decision.evicted {
        tracing::info!(
            cluster = %eviction.cluster,
            reason = eviction.reason,
            purge_mode = %eviction.purge_mode,
            message = %eviction.message,
            "evicted the binding from a cluster"
        );
        metrics().evicted(eviction.reason, eviction.purge_mode.as_str());
        let note = format!(
            "Evicting from cluster {} ({}, purgeMode {}): {}",
            eviction.cluster, eviction.reason, eviction.purge_mode, eviction.message
        );
        for reference in &references {
            publish(
                ctx,
                reference,
                events::EVICT_WORKLOAD_FROM_CLUSTER_STARTED,
                "Evict",
                note.clone(),
            )
            .await;
        }
    }
    for finished in &decision.finished {
        tracing::info!(
            cluster = %finished.cluster,
            end = finished.end.as_str(),
            purge_mode = %finished.purge_mode,
            "graceful eviction task finished"
        );
        metrics().eviction_task_finished(finished.end.as_str());
        let why = match finished.end {
            crate::failover::TaskEnd::Healthy => "the new placement is healthy",
            crate::failover::TaskEnd::TimedOut => "its grace period ran out",
            crate::failover::TaskEnd::Confirmed => "suppressDeletion was set to false",
        };
        let note = format!(
            "Evict from cluster {} succeed ({why}): the copy there is removed unless dispatching to \
             it is suspended.",
            finished.cluster
        );
        for reference in &references {
            publish(
                ctx,
                reference,
                events::EVICT_WORKLOAD_FROM_CLUSTER_SUCCEED,
                "Evict",
                note.clone(),
            )
            .await;
        }
    }
}

async fn publish(
    ctx: &Context,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_: EventType::Normal,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, reference).await {
        tracing::warn!(%error, reason, "cannot record event");
    }
}

fn notify_peers(ctx: &Context, binding: &CachedBinding, trigger: Trigger) {
    let reference: BindingRef = binding.reference();
    tracing::debug!(
        trigger = trigger.as_str(),
        "notifying execution of the new result"
    );
    ctx.peers.notify(reference, binding.spec.propagate_deps);
}

fn report(binding: &CachedBinding, outcome: Outcome, unschedulable: Option<String>) -> Report {
    Report {
        outcome,
        clusters: binding.spec.clusters.clone(),
        observed_generation: binding.observed_generation(),
        generation: binding.generation.unwrap_or_default(),
        unschedulable,
        next_check: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_names() {
        assert!(is_ours(None));
        assert!(is_ours(Some("")));
        assert!(is_ours(Some("default-scheduler")));
        assert!(!is_ours(Some("my-scheduler")));
    }

    #[test]
    fn cluster_lists_read_well() {
        let clusters = vec![
            TargetCluster {
                name: "member1".into(),
                replicas: 2,
            },
            TargetCluster {
                name: "member2".into(),
                replicas: 3,
            },
        ];
        assert_eq!(format_clusters(&clusters), "member1:2,member2:3");
        assert_eq!(format_clusters(&[]), "");
    }

    #[test]
    fn a_watch_continues_the_trace_only_of_an_unscheduled_change() {
        assert!(schedule_pending(Some(2), Some(1)));
        assert!(schedule_pending(Some(1), None));
        assert!(!schedule_pending(Some(2), Some(2)));
        assert!(!schedule_pending(None, None));
    }
}
