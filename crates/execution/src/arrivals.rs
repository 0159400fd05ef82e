//! Works as the control-plane watch delivered them, held for the worker the delivery queued,
//! so that worker does not read the Work again from the API server.
//!
//! The Work cache ([`crate::cache`]) keeps a Work without its manifests, so a worker used to
//! read every Work it reconciled with a GET: one control-plane read per member object, the
//! largest of the pipeline's reads. The watch had just delivered that same Work, whole. Each
//! member now holds the delivered Work ([`Arrivals::offer`]) from the event that queues it until
//! a worker takes it ([`Arrivals::take`]):
//!
//! - **Always the newest delivery.** Every event of a held Work replaces it, and a deletion
//!   drops it, so a held Work is exactly what the cache holds (the same watch feeds both). An
//!   event whose Work cannot be held (over budget, or a relist that reports objects without
//!   them) drops the one held: nothing older than the cache is ever used.
//! - **Never older than what a worker read.** A GET may return a Work the watch has not
//!   delivered yet (the watch lags); its older events may still arrive and be held. A worker
//!   that read a generation the cache did not hold yet fences the Work at that generation
//!   ([`Arrivals::read_from_api`]), and a held Work below the fence is dropped, not used, until
//!   the watch catches up. Only the generation matters: the manifests are the spec. A status
//!   older than the API's makes the status write's resourceVersion precondition fail, and the
//!   retry reads the Work.
//! - **Bounded.** Held Works share one byte budget across members (`--held-works-mib`); an
//!   arrival over it is simply not held, and its worker reads the Work as before. Every queued
//!   name is taken by a worker, its owner's or another replica's (which drops it), so nothing
//!   is held for long: about the member queues' depth.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use flotilla_api::Work;
use serde_json::Value;

/// The default of `--held-works-mib`.
pub const DEFAULT_BUDGET_MIB: usize = 8;

/// The bytes all members' held Works may take, shared.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes (as [`approximate_size`] counts them).
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// The bytes held now.
    #[cfg(test)]
    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit.
    fn charge(self: &Arc<Self>, bytes: usize) -> Option<Charge> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .ok()?;
        Some(Charge {
            budget: Arc::clone(self),
            bytes,
        })
    }
}

/// Bytes taken from a [`Budget`], given back when dropped.
#[derive(Debug)]
struct Charge {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Held {
    work: Work,
    _charge: Charge,
}

/// A generation a worker read from the API before the watch delivered it, of the Work with
/// this uid.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fence {
    uid: Option<String>,
    generation: Option<i64>,
}

#[derive(Debug, Default)]
struct Inner {
    held: HashMap<Arc<str>, Held>,
    fences: HashMap<Arc<str>, Fence>,
}

/// One member's held Works (see the module documentation).
#[derive(Debug)]
pub struct Arrivals {
    budget: Arc<Budget>,
    inner: Mutex<Inner>,
}

/// Where a worker's Work came from (`flotilla_execution_work_reads_total`'s `source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Held from the watch event that queued it.
    Watch,
    /// Read by the reconcile whose report waited (ADR 0027).
    Wait,
    /// A GET to the API server.
    Api,
}

impl Source {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Source::Watch => "watch",
            Source::Wait => "wait",
            Source::Api => "api",
        }
    }
}

impl Arrivals {
    /// Nothing held yet; held Works take from `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        Self {
            budget,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The watch delivered Work `name` (`None`: reported without the object, as a relist
    /// does). Holds it when this delivery queues it (`queued`) or a delivery before did and no
    /// worker has taken it yet, within the budget; otherwise drops whatever was held.
    pub fn offer(&self, name: &Arc<str>, work: Option<Work>, queued: bool) {
        let mut inner = self.inner();
        let was_held = inner.held.remove(name).is_some();
        let Some(work) = work else { return };
        if inner.fences.get(name).is_some_and(|fence| {
            fence.uid != work.metadata.uid || work.metadata.generation >= fence.generation
        }) {
            // The watch caught up with what a worker read (or the Work was re-created).
            inner.fences.remove(name);
        }
        if !(queued || was_held) {
            return;
        }
        if let Some(charge) = self.budget.charge(approximate_size(&work)) {
            inner.held.insert(
                Arc::clone(name),
                Held {
                    work,
                    _charge: charge,
                },
            );
        }
    }

    /// The watch delivered the deletion of Work `name`.
    pub fn deleted(&self, name: &str) {
        let mut inner = self.inner();
        inner.held.remove(name);
        inner.fences.remove(name);
    }

    /// A worker begins reconciling Work `name` (or leaves it to another replica): the Work as
    /// the watch last delivered it, if held and not older than a generation a worker read.
    pub fn take(&self, name: &str) -> Option<Work> {
        let mut inner = self.inner();
        let held = inner.held.remove(name)?;
        match inner.fences.get(name) {
            Some(fence)
                if fence.uid == held.work.metadata.uid
                    && held.work.metadata.generation < fence.generation =>
            {
                None
            }
            _ => Some(held.work),
        }
    }

    /// A worker read Work `name` from the API server, and the cache holds generation `cached`
    /// of that object (`None`: the cache does not hold it, or holds an earlier object of the
    /// same name). A read ahead of the cache fences the Work at the generation read: the
    /// watch may still deliver that object's older generations.
    pub fn read_from_api(&self, name: &Arc<str>, work: &Work, cached: Option<Option<i64>>) {
        let ahead = cached.is_none_or(|cached| work.metadata.generation > cached);
        if ahead {
            self.inner().fences.insert(
                Arc::clone(name),
                Fence {
                    uid: work.metadata.uid.clone(),
                    generation: work.metadata.generation,
                },
            );
        }
    }

    /// How many Works are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner().held.len()
    }

    /// How many Works are fenced.
    #[cfg(test)]
    fn fenced(&self) -> usize {
        self.inner().fences.len()
    }
}

/// About how many bytes `work` takes in memory once decoded: its manifests' JSON trees (the
/// bulk of a Work) node by node, its status's manifest statuses, and a fixed share for the
/// metadata. An estimate for the budget, not an exact figure.
pub fn approximate_size(work: &Work) -> usize {
    const METADATA: usize = 2048;
    let manifests: usize = work.spec.workload.manifests.iter().map(value_size).sum();
    let statuses: usize = work
        .status
        .iter()
        .flat_map(|s| &s.manifest_statuses)
        .filter_map(|m| m.status.as_ref())
        .map(value_size)
        .sum();
    METADATA + manifests + statuses
}

/// About the bytes of a decoded JSON tree: each node's own size, strings' bytes, and each
/// map entry's key and share of the map.
fn value_size(value: &Value) -> usize {
    const NODE: usize = std::mem::size_of::<Value>();
    const ENTRY: usize = 2 * std::mem::size_of::<String>();
    NODE + match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(value_size).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| ENTRY + k.len() + value_size(v)).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn work(uid: &str, generation: i64, replicas: i64) -> Work {
        serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            "metadata": {"name": "w", "namespace": "karmada-es-member1", "uid": uid, "generation": generation},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": replicas},
            }]}},
        }))
        .expect("a Work")
    }

    fn name() -> Arc<str> {
        Arc::from("w")
    }

    fn generation(work: &Work) -> Option<i64> {
        work.metadata.generation
    }

    #[test]
    fn a_queued_delivery_is_held_until_taken_once() {
        let arrivals = Arrivals::new(Budget::new(1 << 20));
        arrivals.offer(&name(), Some(work("u1", 1, 1)), true);
        assert_eq!(arrivals.len(), 1);
        assert_eq!(arrivals.take("w").as_ref().and_then(generation), Some(1));
        assert!(arrivals.take("w").is_none(), "taken once");
    }

    #[test]
    fn a_delivery_that_does_not_queue_is_held_only_to_replace_one_held() {
        let arrivals = Arrivals::new(Budget::new(1 << 20));
        // A status-only change of a Work no worker waits for: nothing to hold.
        arrivals.offer(&name(), Some(work("u1", 1, 1)), false);
        assert_eq!(arrivals.len(), 0);
        // Queued, then a status-only change before the worker took it: the newer one is held.
        arrivals.offer(&name(), Some(work("u1", 2, 2)), true);
        let mut newer = work("u1", 2, 2);
        newer.metadata.resource_version = Some("9".into());
        arrivals.offer(&name(), Some(newer), false);
        let taken = arrivals.take("w").expect("held");
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("9"));
    }

    #[test]
    fn a_delivery_without_the_object_or_a_deletion_drops_the_one_held() {
        let arrivals = Arrivals::new(Budget::new(1 << 20));
        arrivals.offer(&name(), Some(work("u1", 1, 1)), true);
        arrivals.offer(&name(), None, true);
        assert!(
            arrivals.take("w").is_none(),
            "a relist's report drops the older one"
        );

        arrivals.offer(&name(), Some(work("u1", 1, 1)), true);
        arrivals.deleted("w");
        assert!(arrivals.take("w").is_none());
        assert_eq!(arrivals.budget.used(), 0, "every byte given back");
    }

    #[test]
    fn the_budget_bounds_what_is_held_and_is_given_back() {
        let size = approximate_size(&work("u1", 1, 1));
        let budget = Budget::new(2 * size);
        let arrivals = Arrivals::new(Arc::clone(&budget));
        let other = Arrivals::new(Arc::clone(&budget));
        arrivals.offer(&Arc::from("a"), Some(work("u1", 1, 1)), true);
        other.offer(&Arc::from("b"), Some(work("u2", 1, 1)), true);
        // Over the budget shared by both members: not held, and the worker will read it.
        arrivals.offer(&Arc::from("c"), Some(work("u3", 1, 1)), true);
        assert_eq!(arrivals.len() + other.len(), 2);
        assert!(arrivals.take("c").is_none());
        assert_eq!(budget.used(), 2 * size);
        // An over-budget replacement drops the older copy rather than keep it.
        let mut bigger = work("u1", 2, 2);
        bigger.spec.workload.manifests[0]["metadata"]["labels"] = json!({"team": "payments"});
        arrivals.offer(&Arc::from("a"), Some(bigger), false);
        assert!(arrivals.take("a").is_none());
        drop(other);
        assert_eq!(
            budget.used(),
            0,
            "a member's held Works give their bytes back when it goes"
        );
    }

    #[test]
    fn a_generation_read_ahead_of_the_watch_fences_older_deliveries() {
        let arrivals = Arrivals::new(Budget::new(1 << 20));
        // The cache holds generation 1; a worker's GET returns generation 3.
        arrivals.read_from_api(&name(), &work("u1", 3, 3), Some(Some(1)));
        assert_eq!(arrivals.fenced(), 1);
        // The watch now delivers generation 2 and queues the Work: not used.
        arrivals.offer(&name(), Some(work("u1", 2, 2)), true);
        assert!(arrivals.take("w").is_none(), "older than what was applied");
        // Generation 3 arrives: the fence is lifted and the delivery is used.
        arrivals.offer(&name(), Some(work("u1", 3, 3)), true);
        assert_eq!(arrivals.fenced(), 0);
        assert_eq!(arrivals.take("w").as_ref().and_then(generation), Some(3));
    }

    #[test]
    fn a_read_the_cache_already_holds_or_a_re_created_work_sets_no_fence() {
        let arrivals = Arrivals::new(Budget::new(1 << 20));
        arrivals.read_from_api(&name(), &work("u1", 2, 2), Some(Some(2)));
        assert_eq!(arrivals.fenced(), 0, "the watch delivered it already");
        // A read before the watch delivered the Work at all fences it.
        arrivals.read_from_api(&name(), &work("u1", 2, 2), None);
        assert_eq!(arrivals.fenced(), 1);
        // The Work is deleted and re-created (new uid, generation 1): the fence is another
        // object's.
        arrivals.offer(&name(), Some(work("u2", 1, 1)), true);
        assert_eq!(arrivals.fenced(), 0);
        assert_eq!(arrivals.take("w").as_ref().and_then(generation), Some(1));
    }

    #[test]
    fn sizes_grow_with_the_manifests() {
        let small = approximate_size(&work("u1", 1, 1));
        let mut big = work("u1", 1, 1);
        big.spec.workload.manifests[0]["data"] = json!({"key": "x".repeat(10_000)});
        assert!(approximate_size(&big) >= small + 10_000);
    }
}
