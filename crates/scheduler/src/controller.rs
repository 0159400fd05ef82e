//! The watch side: per binding kind, a watch into a cache of [`StoredBinding`]s (ADR 0016,
//! 0018, 0019) and a work queue of binding keys, drained by workers that schedule each binding.
//! A binding is queued whenever what scheduling reads of it changes
//! ([`StoredBinding::schedules_as`]), and every binding whenever the cluster inventory changes
//! and once every [`RESYNC`]. Scheduling a binding whose inputs did not change recomputes its
//! result in memory and writes nothing, so this is cheap and needs no bookkeeping of which
//! binding "needs" scheduling; a change that leaves those inputs alone is not queued at all.
//!
//! A missed gRPC call, a scheduler restart, a joined, removed or NotReady cluster, a changed
//! placement or a reschedule request all arrive here as watch events.
//!
//! The queue is [`flotilla_runtime::queue::WorkQueue`] (one key is never scheduled by two
//! workers at once; failures back off per key), reported as `flotilla_workqueue_depth` and
//! `flotilla_workqueue_oldest_wait_seconds` with `queue` = the kind.

use std::sync::Arc;
use std::time::Duration;

use flotilla_api::watched::Watched;
use flotilla_proto::v1::BindingKind;
use flotilla_runtime::cache::{self, Cache, Update};
use flotilla_runtime::queue::WorkQueue;
use futures::StreamExt;
use kube::{Api, Client};
use tokio::task::JoinSet;

use crate::binding::{BindingKey, BindingObject, StoredBinding, kind_name};
use crate::metrics::metrics;
use crate::reconcile::{Context, Trigger, schedule_binding};

/// Workers per binding kind.
const CONCURRENCY: usize = 16;
/// Every binding is scheduled again this often even without events (a safety net: the watches
/// are the guarantee). One timer queues them all: a timer per binding (a task and a copy of its
/// key, about 0.4 KiB) was the scheduler's second largest memory after its cache.
const RESYNC: Duration = Duration::from_secs(600);
/// First backoff after a failed attempt (API error, too many conflicts, inventory not synced),
/// doubling per consecutive failure of the binding up to [`RETRY_MAX`].
const RETRY_BASE: Duration = Duration::from_millis(500);
/// Longest backoff after failed attempts.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// An unschedulable binding is tried again this often, besides on every inventory change: the
/// change that makes it schedulable may have been seen by another replica first (whose decision
/// this replica's stale view then overwrote), or may not show in the inventory at all.
const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(10);

/// How long after a failover deadline the binding is looked at: the deadline must have passed
/// when it is (a check a moment early would find nothing due and wait for the resync).
const DEADLINE_SLACK: Duration = Duration::from_millis(100);

/// How long the watch leaves a binding that was never scheduled to the `Schedule` call of its
/// creator. The detector creates a binding, writes its `PolicyActivated` condition and then
/// calls `Schedule`; scheduling from the create event at once would race that condition write
/// (one of the two writes loses with 409 Conflict and is repeated after a re-read, which was
/// a fifth of all failed writes in the throughput benchmark). The call is the fast path; the
/// watch still schedules the binding after this grace when no call came.
const FIRST_SCHEDULE_GRACE: Duration = Duration::from_millis(250);

/// Whether the watch waits [`FIRST_SCHEDULE_GRACE`] before scheduling `binding`: it was never
/// scheduled (no `status.schedulerObservedGeneration`).
fn awaits_first_schedule(binding: &StoredBinding) -> bool {
    binding.observed_generation().is_none()
}

/// When a watch-triggered binding is looked at again without events, if before the next
/// [`RESYNC`] could: soon when it is unschedulable, at its next failover deadline (toleration,
/// grace period).
fn next_attempt(report: &crate::reconcile::Report) -> Option<Duration> {
    let unschedulable = report.unschedulable.is_some().then_some(UNSCHEDULABLE_RETRY);
    let deadline = report.next_check.map(|due| due + DEADLINE_SLACK);
    [unschedulable, deadline]
        .into_iter()
        .flatten()
        .min()
        .filter(|due| *due < RESYNC)
}

/// A running controller for one binding kind.
pub struct Running {
    /// Which kind.
    pub kind: BindingKind,
    /// The controller's cache of bindings of this kind.
    pub cache: Cache<StoredBinding>,
    /// Keys of bindings waiting to be scheduled.
    pub queue: WorkQueue<BindingKey>,
    synced: tokio::sync::watch::Receiver<bool>,
    /// The watch, the inventory listener and the workers.
    pub task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Waits until the cache holds its first complete list.
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|synced| *synced).await;
    }
}

/// Starts the controller for bindings of kind `K` until `shutdown`.
pub fn start<K: BindingObject>(
    client: Client,
    ctx: Arc<Context>,
    shutdown: flotilla_runtime::Shutdown,
) -> Running {
    let (cache, writer) = Cache::new();
    {
        let cache: Cache<StoredBinding> = cache.clone();
        ctx.attempts.delivered_by(Box::new(move |key: &BindingKey| {
            (key.kind == K::KIND)
                .then(|| cache.get(key.namespace.as_deref(), &key.name))
                .flatten()
                .and_then(|binding| binding.resource_version())
        }));
    }
    let queue: WorkQueue<BindingKey> = WorkQueue::new(RETRY_BASE, RETRY_MAX);
    let (synced_tx, synced) = tokio::sync::watch::channel(false);
    // The watch and the inventory listener run until shutdown aborts them.
    let mut background = JoinSet::new();
    {
        let queue = queue.clone();
        let ctx = ctx.clone();
        background.spawn(cache::run(
            Api::<Watched<K>>::all(client),
            writer,
            |binding| StoredBinding::of::<K>(binding.into_binding()),
            move |update| {
                match update {
                    Update::Applied { old, new } => {
                        let key = new.key();
                        ctx.attempts.caught_up(&key, new.resource_version());
                        // The version before was queued when it arrived; an attempt on this
                        // one would decide the same when scheduling reads the same of both
                        // (execution's reports of a binding without failover, other writers'
                        // annotations).
                        let queued = !old.is_some_and(|old| new.schedules_as(old));
                        metrics().binding_event(queued);
                        if !queued {
                            return;
                        }
                        if awaits_first_schedule(new) {
                            queue.add_after(key, FIRST_SCHEDULE_GRACE)
                        } else {
                            queue.add(key)
                        }
                    }
                    // Nothing to schedule; a retry or resync already queued finds it gone.
                    Update::Deleted(binding) => ctx.attempts.forget(&binding.key()),
                    // Every listed binding was reported (and queued) before this.
                    Update::Synced => {
                        synced_tx.send_replace(true);
                    }
                }
            },
        ));
    }
    {
        let (queue, cache) = (queue.clone(), cache.clone());
        let mut changes = ctx.inventory.changes();
        background.spawn(async move {
            while changes.next().await.is_some() {
                queue_all(&cache, &queue);
            }
        });
    }
    {
        let (queue, cache) = (queue.clone(), cache.clone());
        background.spawn(async move {
            let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + RESYNC, RESYNC);
            loop {
                resync.tick().await;
                queue_all(&cache, &queue);
            }
        });
    }
    let mut workers = JoinSet::new();
    for _ in 0..CONCURRENCY {
        workers.spawn(work::<K>(ctx.clone(), cache.clone(), queue.clone()));
    }
    let stop = queue.clone();
    let task = tokio::spawn(async move {
        shutdown.cancelled().await;
        // Workers finish the binding in hand and return.
        stop.shut_down();
        while workers.join_next().await.is_some() {}
        background.abort_all();
    });
    Running {
        kind: K::KIND,
        cache,
        queue,
        synced,
        task,
    }
}

fn queue_all(cache: &Cache<StoredBinding>, queue: &WorkQueue<BindingKey>) {
    for binding in cache.state() {
        queue.add(binding.key());
    }
}

/// One worker: schedules queued bindings of kind `K` until the queue shuts down.
async fn work<K: BindingObject>(
    ctx: Arc<Context>,
    cache: Cache<StoredBinding>,
    queue: WorkQueue<BindingKey>,
) {
    while let Some(key) = queue.next().await {
        match cache.get(key.namespace.as_deref(), &key.name) {
            // Deleted meanwhile: nothing to schedule, no failures to remember.
            None => queue.forget(&key),
            Some(stored) => {
                match schedule_binding::<K>(&ctx, &key, Some(stored.binding()), Trigger::Watch).await {
                    Ok(report) => {
                        queue.forget(&key);
                        if let Some(due) = next_attempt(&report) {
                            queue.add_after(key.clone(), due);
                        }
                    }
                    Err(error) => {
                        let delay = queue.add_rate_limited(key.clone());
                        tracing::warn!(binding = %key, %error, retry_in = ?delay, "scheduling failed; retrying");
                    }
                }
            }
        }
        queue.done(&key);
    }
}

/// Reports both kinds' queues.
fn report_queues(a: &Running, b: &Running) {
    for running in [a, b] {
        flotilla_telemetry::metrics::report_queue(
            "flotilla-scheduler",
            kind_name(running.kind),
            running.queue.len(),
            running.queue.oldest_wait(),
        );
    }
}

/// Counts the eviction tasks in the bindings of `cache`.
pub fn count_eviction_tasks(cache: &Cache<StoredBinding>) -> usize {
    cache.state().iter().map(|b| b.eviction_tasks()).sum()
}

/// Counts the bindings in `cache` whose `Scheduled` condition is `False`.
pub fn count_unschedulable(cache: &Cache<StoredBinding>) -> usize {
    cache.state().iter().filter(|b| b.unschedulable()).count()
}

/// Keeps the unschedulable-bindings gauge and the queue metrics current until `shutdown`.
pub async fn report(a: &Running, b: &Running, shutdown: flotilla_runtime::Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {
                metrics().set_unschedulable(count_unschedulable(&a.cache) + count_unschedulable(&b.cache));
                metrics().set_eviction_tasks(count_eviction_tasks(&a.cache) + count_eviction_tasks(&b.cache));
                report_queues(a, b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::{Outcome, Report};

    fn report(unschedulable: Option<&str>) -> Report {
        Report {
            outcome: Outcome::Unchanged,
            clusters: Vec::new(),
            observed_generation: Some(1),
            generation: 1,
            unschedulable: unschedulable.map(str::to_owned),
            next_check: None,
        }
    }

    #[test]
    fn failover_deadlines_bring_bindings_back_in_time() {
        let mut due = report(None);
        due.next_check = Some(Duration::from_secs(30));
        assert_eq!(next_attempt(&due), Some(Duration::from_secs(30) + DEADLINE_SLACK));
        due.unschedulable = Some("0/3 clusters are available".into());
        assert_eq!(next_attempt(&due), Some(UNSCHEDULABLE_RETRY));
        due.next_check = Some(Duration::from_secs(5));
        assert_eq!(next_attempt(&due), Some(Duration::from_secs(5) + DEADLINE_SLACK));
        // A deadline past the next resync is met by the resync, without a timer of its own.
        due.next_check = Some(Duration::from_secs(3600));
        due.unschedulable = None;
        assert_eq!(next_attempt(&due), None);
    }

    #[test]
    fn only_never_scheduled_bindings_wait_for_their_creators_call() {
        let mut binding = crate::binding::CachedBinding::of(flotilla_api::ResourceBinding::new(
            "web-deployment",
            Default::default(),
        ));
        assert!(
            awaits_first_schedule(&StoredBinding::from(&binding)),
            "no status yet"
        );
        binding.status = Some(Default::default());
        assert!(
            awaits_first_schedule(&StoredBinding::from(&binding)),
            "a status without the scheduler's fields"
        );
        if let Some(status) = binding.status.as_mut() {
            status.scheduler_observed_generation = Some(1);
        }
        assert!(
            !awaits_first_schedule(&StoredBinding::from(&binding)),
            "scheduled once: changes go at once"
        );
        const { assert!(FIRST_SCHEDULE_GRACE.as_millis() < 1000) };
    }

    #[test]
    fn unschedulable_bindings_are_tried_again_soon() {
        assert_eq!(
            next_attempt(&report(Some("0/3 clusters are available"))),
            Some(UNSCHEDULABLE_RETRY)
        );
        assert_eq!(
            next_attempt(&report(None)),
            None,
            "a scheduled binding waits for events or the resync of every binding"
        );
        assert!(UNSCHEDULABLE_RETRY < RESYNC);
    }
}
