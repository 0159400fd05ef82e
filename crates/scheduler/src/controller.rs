//! The watch side: one kube-runtime controller per binding kind, reconciling every binding
//! whenever it changes and every binding whenever the cluster inventory changes. Reconciling a
//! binding whose inputs did not change recomputes its result in memory and writes nothing, so
//! this is cheap and needs no bookkeeping of which binding "needs" scheduling.
//!
//! A missed gRPC call, a scheduler restart, a joined, removed or NotReady cluster, a changed
//! placement or a reschedule request all arrive here as watch events.

use std::sync::Arc;
use std::time::Duration;

use flotilla_api::conditions;
use flotilla_api::well_known::conditions::SCHEDULED;
use futures::StreamExt;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};

use crate::binding::BindingObject;
use crate::metrics::metrics;
use crate::reconcile::{Context, ReconcileError, Trigger, schedule_binding};

/// Bindings reconciled at once per kind.
const CONCURRENCY: u16 = 16;
/// A binding is reconciled again after this long even without events (a safety net: the
/// watches are the guarantee).
const RESYNC: Duration = Duration::from_secs(600);
/// Backoff after a failed attempt (API error, too many conflicts, inventory not synced).
const RETRY: Duration = Duration::from_secs(2);
/// An unschedulable binding is tried again this often, besides on every inventory change: the
/// change that makes it schedulable may have been seen by another replica first (whose decision
/// this replica's stale view then overwrote), or may not show in the inventory at all.
const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(10);

/// When a watch-triggered binding is looked at again without events.
fn next_attempt(report: &crate::reconcile::Report) -> Duration {
    if report.unschedulable.is_some() {
        UNSCHEDULABLE_RETRY
    } else {
        RESYNC
    }
}

/// A running controller for one binding kind.
pub struct Running<K: BindingObject> {
    /// The controller's cache of bindings of this kind.
    pub store: Store<K>,
    /// The controller task.
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts the controller for bindings of kind `K` until `shutdown`.
pub fn start<K>(client: Client, ctx: Arc<Context>, shutdown: flotilla_runtime::Shutdown) -> Running<K>
where
    K: BindingObject,
    K: Resource<DynamicType = ()>,
{
    let api: Api<K> = Api::all(client);
    let controller = Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(CONCURRENCY))
        .reconcile_all_on(ctx.inventory.changes())
        .graceful_shutdown_on(shutdown.cancelled_owned());
    let store = controller.store();
    let task = tokio::spawn(async move {
        controller
            .run(reconcile::<K>, error_policy::<K>, ctx)
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "binding controller event");
                }
            })
            .await;
    });
    Running { store, task }
}

async fn reconcile<K: BindingObject>(binding: Arc<K>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let key = binding.key();
    let report = schedule_binding(&ctx, &key, Some(binding), Trigger::Watch).await?;
    Ok(Action::requeue(next_attempt(&report)))
}

fn error_policy<K: BindingObject>(binding: Arc<K>, error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(binding = %binding.key(), %error, "scheduling failed; retrying");
    Action::requeue(RETRY)
}

/// Counts the bindings in `stores` whose `Scheduled` condition is `False`.
pub fn count_unschedulable<K: BindingObject>(store: &Store<K>) -> usize {
    store
        .state()
        .iter()
        .filter(|b| {
            b.binding_status()
                .and_then(|s| conditions::find(&s.conditions, SCHEDULED))
                .is_some_and(|c| c.status == "False")
        })
        .count()
}

/// Keeps the unschedulable-bindings gauge current from both caches until `shutdown`.
pub async fn report_unschedulable<A: BindingObject, B: BindingObject>(
    a: Store<A>,
    b: Store<B>,
    shutdown: flotilla_runtime::Shutdown,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => metrics().set_unschedulable(count_unschedulable(&a) + count_unschedulable(&b)),
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
        }
    }

    #[test]
    fn unschedulable_bindings_are_tried_again_soon() {
        assert_eq!(
            next_attempt(&report(Some("0/3 clusters are available"))),
            UNSCHEDULABLE_RETRY
        );
        assert_eq!(next_attempt(&report(None)), RESYNC);
        assert!(UNSCHEDULABLE_RETRY < RESYNC);
    }
}
