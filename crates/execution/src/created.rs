//! Works the binding workers have just created, handed to their cluster's worker so it does not
//! read them back: [`CreatedWorks`].
//!
//! A cluster's worker reads a Work from the API before it applies it (the watch cache keeps
//! only its digests, [`crate::cache`]). For a Work the binding worker has just created, that
//! read returns what the create sent: the create was an apply patch answered `201 Created`
//! ([`flotilla_runtime::lean::Written::created`]), so the Work was new, with no status and no
//! other writer's fields, and its name, namespace, uid, resourceVersion and generation are in
//! the answer. The binding worker leaves that Work here; the cluster's worker takes it instead
//! of reading it, when the watch cache still holds the same generation of the Work, not being
//! deleted ([`CreatedWorks::take_current`]). The watch may deliver the new Work before the
//! create's answer is handled, and an idle worker would then read it: the binding worker
//! announces a create under way ([`CreatedWorks::expect`]), and the worker waits for its answer
//! (at most [`ANSWER_WAIT`]). Anything else (a Work changed since, deleted, or
//! not here) is read from the API as before. A decision stays one on the API's state: the
//! Work taken is the API's answer to the create, and the status write that follows carries its
//! resourceVersion as a precondition, so a Work changed in between fails it with a conflict and
//! is read again.
//!
//! Bounded: at most [`CAPACITY`] Works wait here, each for at most [`MAX_AGE`]. A Work its
//! worker never takes (another replica owns its cluster, the cluster went away) ages out; a
//! Work left when the hand-off is full is read from the API, as before.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_api::Work;
use tokio::sync::Notify;

use crate::cache::CachedWork;

/// The most Works waiting for their worker (about 1-3 KiB each, manifests included).
pub const CAPACITY: usize = 256;
/// How long a Work waits for its worker before it is dropped.
pub const MAX_AGE: Duration = Duration::from_secs(30);
/// How long a worker waits for the answer of a create under way before it reads the Work.
pub const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// A Work's place: its namespace and name.
type Key = (String, String);

/// See the module docs.
#[derive(Debug, Default)]
pub struct CreatedWorks {
    inner: Mutex<Inner>,
}

/// What the hand-off holds for one Work.
#[derive(Debug)]
enum Slot {
    /// A create is under way; its answer wakes the waiting worker.
    Pending(Arc<Notify>),
    /// The create's answer, as its Work.
    Ready(Box<Work>),
}

#[derive(Debug, Default)]
struct Inner {
    works: HashMap<Key, (Instant, Slot)>,
    /// Keys in the order they were left, with when; a key taken or left again since is skipped
    /// when it reaches the front.
    order: VecDeque<(Instant, Key)>,
}

impl Inner {
    /// Drops, from the front of `order`, keys already taken or left again, and slots older
    /// than [`MAX_AGE`].
    fn prune(&mut self, now: Instant) {
        while let Some((left, key)) = self.order.front() {
            let current = self.works.get(key).is_some_and(|(at, _)| at == left);
            if current && now.duration_since(*left) < MAX_AGE {
                break;
            }
            if current {
                self.remove(&key.clone());
            }
            self.order.pop_front();
        }
    }

    /// Removes `key`'s slot, waking a worker waiting for it.
    fn remove(&mut self, key: &Key) -> Option<Slot> {
        let (_, slot) = self.works.remove(key)?;
        if let Slot::Pending(answered) = &slot {
            answered.notify_waiters();
        }
        Some(slot)
    }

    /// Puts `slot` for `key` (a slot already there keeps its age); `false` when the hand-off
    /// is full.
    fn put(&mut self, key: Key, slot: Slot, now: Instant) -> bool {
        self.prune(now);
        if let Some((_, held)) = self.works.get_mut(&key) {
            if let Slot::Pending(answered) = std::mem::replace(held, slot) {
                answered.notify_waiters();
            }
            return true;
        }
        if self.works.len() >= CAPACITY {
            return false;
        }
        self.order.push_back((now, key.clone()));
        self.works.insert(key, (now, slot));
        true
    }
}

impl CreatedWorks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Announces a create of `namespace/name` under way: until its answer is left
    /// ([`CreatedWorks::leave`]) or forgotten ([`CreatedWorks::forget`]), the Work's worker
    /// waits for it (at most [`ANSWER_WAIT`]) instead of reading the Work. The watch can deliver
    /// the created Work before the create's answer is handled; without this, an idle worker
    /// would read every Work back. `false` when the hand-off is full.
    pub fn expect(&self, namespace: &str, name: &str, now: Instant) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock().put(key, Slot::Pending(Arc::new(Notify::new())), now)
    }

    /// Leaves `work` (as its create answered it) for its cluster's worker, in the slot
    /// [`CreatedWorks::expect`] made for it; `false` when there is none (the hand-off was full,
    /// or a worker gave up waiting and read the Work: what it then wrote is newer than this).
    pub fn leave(&self, work: Work, now: Instant) -> bool {
        let (Some(namespace), Some(name)) = (work.metadata.namespace.clone(), work.metadata.name.clone())
        else {
            return false;
        };
        let key = (namespace, name);
        let mut inner = self.lock();
        if !matches!(inner.works.get(&key), Some((_, Slot::Pending(_)))) {
            return false;
        }
        inner.put(key, Slot::Ready(Box::new(work)), now)
    }

    /// Drops what is held for `namespace/name` (a write that failed, or did not create the
    /// Work): its worker reads it.
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut inner = self.lock();
        if !inner.works.is_empty() {
            inner.remove(&(namespace.to_owned(), name.to_owned()));
        }
    }

    /// Takes the Work `namespace/name` as its create answered it, waiting for a create under
    /// way, if `cached` (the watch cache's Work, read once the answer is here) is still that
    /// generation of it, not being deleted. `None` means: read it from the API. A Work found
    /// stale is dropped.
    pub async fn take_current(
        &self,
        namespace: &str,
        name: &str,
        cached: impl Fn() -> Option<Arc<CachedWork>>,
    ) -> Option<Work> {
        let key = (namespace.to_owned(), name.to_owned());
        let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
        loop {
            let answered = {
                let mut inner = self.lock();
                if inner.works.is_empty() {
                    return None;
                }
                match inner.works.get(&key) {
                    None => return None,
                    Some((_, Slot::Pending(answered))) => Arc::clone(answered),
                    Some((_, Slot::Ready(_))) => {
                        let Some(Slot::Ready(work)) = inner.remove(&key) else {
                            return None;
                        };
                        drop(inner);
                        let cached = cached()?;
                        return (!cached.deleting && cached.generation() == work.metadata.generation)
                            .then_some(*work);
                    }
                }
            };
            // `notify_waiters` wakes only futures that exist: the future is made and enabled
            // before the slot is looked at again, so an answer left in between is not missed.
            let notified = answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let still_pending = matches!(
                self.lock().works.get(&key),
                Some((_, Slot::Pending(p))) if Arc::ptr_eq(p, &answered)
            );
            if still_pending && tokio::time::timeout_at(deadline, notified).await.is_err() {
                self.forget(namespace, name);
                return None;
            }
        }
    }

    /// How many Works (and creates under way) the hand-off holds.
    pub fn len(&self) -> usize {
        self.lock().works.len()
    }

    /// Whether the hand-off holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    const NS: &str = "karmada-es-m1";

    fn work(name: &str, generation: i64) -> Work {
        Work {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(NS.to_owned()),
                generation: Some(generation),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("5".to_owned()),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        }
    }

    /// A create announced and answered.
    fn created(works: &CreatedWorks, work: Work, now: Instant) -> bool {
        let name = work.metadata.name.clone().unwrap_or_default();
        works.expect(NS, &name, now) && works.leave(work, now)
    }

    fn cached(work: &Work) -> Option<Arc<CachedWork>> {
        Some(Arc::new(CachedWork::from(work.clone())))
    }

    #[tokio::test]
    async fn a_work_is_taken_once_while_the_cache_holds_its_generation() {
        let works = CreatedWorks::default();
        let now = Instant::now();
        let web = work("web", 1);
        assert!(created(&works, web.clone(), now));
        assert_eq!(works.len(), 1);
        // Another Work's name, or another namespace, takes nothing.
        assert!(
            works
                .take_current("karmada-es-m2", "web", || cached(&web))
                .await
                .is_none()
        );
        assert!(works.take_current(NS, "db", || cached(&web)).await.is_none());
        let taken = works.take_current(NS, "web", || cached(&web)).await;
        assert_eq!(taken.and_then(|w| w.metadata.uid), Some("uid-web".to_owned()));
        // Taken once: the next reconcile reads the API.
        assert!(works.take_current(NS, "web", || cached(&web)).await.is_none());
        assert!(works.is_empty());
    }

    #[tokio::test]
    async fn a_work_changed_or_deleted_since_or_not_cached_is_read_from_the_api() {
        let works = CreatedWorks::default();
        let now = Instant::now();
        // A newer generation in the cache: someone changed the Work after the create.
        created(&works, work("web", 1), now);
        assert!(
            works
                .take_current(NS, "web", || cached(&work("web", 2)))
                .await
                .is_none()
        );
        assert!(works.is_empty(), "a stale Work is dropped");
        // Being deleted.
        created(&works, work("web", 1), now);
        let mut deleting = work("web", 1);
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(
            works
                .take_current(NS, "web", || cached(&deleting))
                .await
                .is_none()
        );
        // Gone from the cache.
        created(&works, work("web", 1), now);
        assert!(works.take_current(NS, "web", || None).await.is_none());
        assert!(works.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_waits_for_the_answer_of_a_create_under_way() {
        let works = Arc::new(CreatedWorks::default());
        let web = work("web", 1);
        // The watch was faster than the create's answer: the worker waits for it.
        assert!(works.expect(NS, "web", Instant::now()));
        let waiting = tokio::spawn({
            let works = Arc::clone(&works);
            let web = web.clone();
            async move { works.take_current(NS, "web", || cached(&web)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        works.leave(web.clone(), Instant::now());
        let taken = waiting.await.ok().flatten();
        assert_eq!(taken.and_then(|w| w.metadata.uid), Some("uid-web".to_owned()));
        assert!(works.is_empty());

        // A write that did not create the Work (or failed) is forgotten: the worker reads it.
        works.expect(NS, "web", Instant::now());
        let waiting = tokio::spawn({
            let works = Arc::clone(&works);
            let web = web.clone();
            async move { works.take_current(NS, "web", || cached(&web)).await }
        });
        tokio::task::yield_now().await;
        works.forget(NS, "web");
        assert!(waiting.await.ok().flatten().is_none());

        // An answer that never comes: the worker reads the Work after ANSWER_WAIT.
        works.expect(NS, "web", Instant::now());
        let started = tokio::time::Instant::now();
        assert!(works.take_current(NS, "web", || cached(&web)).await.is_none());
        assert!(started.elapsed() >= ANSWER_WAIT);
        assert!(works.is_empty(), "the slot is dropped");
        // Its answer, arriving after the worker read (and perhaps wrote) the Work, is older
        // than what the worker saw: not kept.
        assert!(!works.leave(web.clone(), Instant::now()));
        assert!(works.is_empty());
    }

    #[test]
    fn the_hand_off_is_bounded_and_works_age_out() {
        let works = CreatedWorks::default();
        let start = Instant::now();
        for i in 0..CAPACITY {
            assert!(created(&works, work(&format!("w{i}"), 1), start));
        }
        // Full: a new Work or create is not kept (its worker reads it), a Work left again
        // replaces itself.
        assert!(!created(&works, work("late", 1), start));
        assert!(created(&works, work("w0", 1), start));
        assert_eq!(works.len(), CAPACITY);
        // After MAX_AGE the Works nobody took are dropped, and room is made.
        let later = start + MAX_AGE + Duration::from_secs(1);
        assert!(created(&works, work("late", 1), later));
        assert_eq!(works.len(), 1);
        // Keys taken are skipped at the front, so the order stays as small as what waits.
        for i in 0..10 {
            let name = format!("x{i}");
            created(&works, work(&name, 1), later);
            works.forget(NS, &name);
        }
        works.forget(NS, "late");
        created(&works, work("y", 1), later);
        assert_eq!(works.len(), 1);
        // An answer without a slot (never announced, or given up on) is not kept.
        assert!(!works.leave(work("z", 1), later));
        assert_eq!(works.len(), 1);
        assert!(works.lock().order.len() <= 1);
    }
}
