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
//! deleted ([`CreatedWorks::take_current`]). Anything else (a Work changed since, deleted, or
//! not here) is read from the API as before. A decision stays one on the API's state: the
//! Work taken is the API's answer to the create, and the status write that follows carries its
//! resourceVersion as a precondition, so a Work changed in between fails it with a conflict and
//! is read again.
//!
//! Bounded: at most [`CAPACITY`] Works wait here, each for at most [`MAX_AGE`]. A Work its
//! worker never takes (another replica owns its cluster, the cluster went away) ages out; a
//! Work left when the hand-off is full is read from the API, as before.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use flotilla_api::Work;

use crate::cache::CachedWork;

/// The most Works waiting for their worker (about 1-3 KiB each, manifests included).
pub const CAPACITY: usize = 256;
/// How long a Work waits for its worker before it is dropped.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// A Work's place: its namespace and name.
type Key = (String, String);

/// See the module docs.
#[derive(Debug, Default)]
pub struct CreatedWorks {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    works: HashMap<Key, (Instant, Work)>,
    /// Keys in the order they were left, with when; a key taken or left again since is skipped
    /// when it reaches the front.
    order: VecDeque<(Instant, Key)>,
}

impl Inner {
    /// Drops, from the front of `order`, keys already taken or left again, and Works older
    /// than [`MAX_AGE`].
    fn prune(&mut self, now: Instant) {
        while let Some((left, key)) = self.order.front() {
            let current = self.works.get(key).is_some_and(|(at, _)| at == left);
            if current && now.duration_since(*left) < MAX_AGE {
                break;
            }
            if current {
                self.works.remove(key);
            }
            self.order.pop_front();
        }
    }
}

impl CreatedWorks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leaves `work` (as its create answered it) for its cluster's worker; `false` when the
    /// hand-off is full (the worker reads it from the API).
    pub fn leave(&self, work: Work, now: Instant) -> bool {
        let (Some(namespace), Some(name)) = (work.metadata.namespace.clone(), work.metadata.name.clone())
        else {
            return false;
        };
        let mut inner = self.lock();
        inner.prune(now);
        let key = (namespace, name);
        if inner.works.len() >= CAPACITY && !inner.works.contains_key(&key) {
            return false;
        }
        inner.order.push_back((now, key.clone()));
        inner.works.insert(key, (now, work));
        true
    }

    /// Takes the Work `namespace/name` if it is here and `cached` (the watch cache's Work) is
    /// still the same generation of it, not being deleted; `None` means: read it from the API.
    /// A Work found stale is dropped.
    pub fn take_current(&self, namespace: &str, name: &str, cached: Option<&CachedWork>) -> Option<Work> {
        let mut inner = self.lock();
        if inner.works.is_empty() {
            return None;
        }
        let (_, work) = inner.works.remove(&(namespace.to_owned(), name.to_owned()))?;
        let cached = cached?;
        (!cached.deleting && cached.generation() == work.metadata.generation).then_some(work)
    }

    /// How many Works wait here.
    pub fn len(&self) -> usize {
        self.lock().works.len()
    }

    /// Whether no Work waits here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn work(name: &str, generation: i64) -> Work {
        Work {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("karmada-es-m1".to_owned()),
                generation: Some(generation),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("5".to_owned()),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        }
    }

    fn cached(work: &Work) -> CachedWork {
        CachedWork::from(work.clone())
    }

    #[test]
    fn a_work_is_taken_once_while_the_cache_holds_its_generation() {
        let works = CreatedWorks::default();
        let now = Instant::now();
        let web = work("web", 1);
        let in_cache = cached(&web);
        assert!(works.leave(web.clone(), now));
        assert_eq!(works.len(), 1);
        // Another Work's name, or another namespace, takes nothing.
        assert!(
            works
                .take_current("karmada-es-m2", "web", Some(&in_cache))
                .is_none()
        );
        assert!(
            works
                .take_current("karmada-es-m1", "db", Some(&in_cache))
                .is_none()
        );
        let taken = works.take_current("karmada-es-m1", "web", Some(&in_cache));
        assert_eq!(taken.and_then(|w| w.metadata.uid), Some("uid-web".to_owned()));
        // Taken once: the next reconcile reads the API.
        assert!(
            works
                .take_current("karmada-es-m1", "web", Some(&in_cache))
                .is_none()
        );
        assert!(works.is_empty());
    }

    #[test]
    fn a_work_changed_or_deleted_since_or_not_cached_is_read_from_the_api() {
        let works = CreatedWorks::default();
        let now = Instant::now();
        // A newer generation in the cache: someone changed the Work after the create.
        works.leave(work("web", 1), now);
        let newer = cached(&work("web", 2));
        assert!(works.take_current("karmada-es-m1", "web", Some(&newer)).is_none());
        assert!(works.is_empty(), "a stale Work is dropped");
        // Being deleted.
        works.leave(work("web", 1), now);
        let mut deleting = work("web", 1);
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(
            works
                .take_current("karmada-es-m1", "web", Some(&cached(&deleting)))
                .is_none()
        );
        // Gone from the cache.
        works.leave(work("web", 1), now);
        assert!(works.take_current("karmada-es-m1", "web", None).is_none());
        assert!(works.is_empty());
    }

    #[test]
    fn the_hand_off_is_bounded_and_works_age_out() {
        let works = CreatedWorks::default();
        let start = Instant::now();
        for i in 0..CAPACITY {
            assert!(works.leave(work(&format!("w{i}"), 1), start));
        }
        // Full: a new Work is not kept (its worker reads it), a Work left again replaces itself.
        assert!(!works.leave(work("late", 1), start));
        assert!(works.leave(work("w0", 1), start));
        assert_eq!(works.len(), CAPACITY);
        // After MAX_AGE the Works nobody took are dropped, and room is made.
        let later = start + MAX_AGE + Duration::from_secs(1);
        assert!(works.leave(work("late", 1), later));
        assert_eq!(works.len(), 1);
        let late = cached(&work("late", 1));
        assert!(works.take_current("karmada-es-m1", "late", Some(&late)).is_some());
        // Keys taken are skipped at the front, so the order stays as small as what waits.
        for i in 0..10 {
            let name = format!("x{i}");
            works.leave(work(&name, 1), later);
            let current = cached(&work(&name, 1));
            assert!(
                works
                    .take_current("karmada-es-m1", &name, Some(&current))
                    .is_some()
            );
        }
        works.leave(work("y", 1), later);
        assert!(works.lock().order.len() <= 2);
    }
}
