//! One scheduling attempt per binding at a time in this process, and the newest version of each
//! binding this process has read from the API or written.
//!
//! A binding is scheduled from two sides: its watch events (through the work queue, which never
//! hands one key to two workers) and gRPC `Schedule` calls (the detector's, after each binding
//! write). Without coordination the two run at once on the same binding, both write, and one of
//! them loses with 409 Conflict, reads the binding again and finds nothing left to do; and a
//! watch event of an older version, arriving after this process already wrote a newer one,
//! makes it decide on a stale copy and write against it, losing again. In the throughput
//! benchmark that was one failed write per member object.
//!
//! So attempts on one binding take turns ([`Attempts::lock`]), and each records the newest
//! resourceVersion it saw ([`Turn::observe`]). A watch-triggered attempt whose cached copy is
//! older than that ([`Turn::is_older`]) is skipped: the event of the newer version is on its way
//! and queues the binding again. This is an optimisation, never an input of a decision: a
//! restarted process knows nothing, skips nothing and converges as before (every write still
//! carries the resourceVersion it was decided on). resourceVersions are compared as integers,
//! as the API orders them (`flotilla_api::revision`); one that is not an integer is never
//! called older.
//!
//! Both are held only while they say something the watch cache does not (issue 17): a binding's
//! turn exists while an attempt runs or waits on it, and its newest version until the watch
//! cache holds that version or a newer one: checked when the watch delivers one
//! ([`Attempts::caught_up`]) and when an attempt ends, since the watch often delivers a write
//! before the writer reads the answer, and an attempt may read a version delivered long ago
//! ([`Attempts::delivered_by`]). Kept for every binding ever scheduled, they were about 230 bytes
//! per binding (key strings, a map slot, a shared mutex), as much as the scheduler's cached
//! copy of the binding itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OwnedMutexGuard;

use crate::binding::BindingKey;

/// What the watch cache holds of a binding: its resourceVersion as an integer, if it holds it.
pub type Delivered = Box<dyn Fn(&BindingKey) -> Option<u64> + Send + Sync>;

/// The per-binding turns and versions of one process.
#[derive(Default)]
pub struct Attempts {
    /// The turn of each binding an attempt runs or waits on.
    turns: Mutex<HashMap<BindingKey, Arc<tokio::sync::Mutex<()>>>>,
    /// The newest resourceVersion this process read or wrote of each binding whose watch cache
    /// does not hold it yet.
    seen: Mutex<HashMap<BindingKey, u64>>,
    /// The watch caches, one per binding kind, registered as each controller starts.
    caches: Mutex<Vec<Delivered>>,
}

impl std::fmt::Debug for Attempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (turns, versions) = self.len();
        f.debug_struct("Attempts")
            .field("turns", &turns)
            .field("versions", &versions)
            .finish_non_exhaustive()
    }
}

/// One attempt's turn on a binding: other attempts on it wait until this is dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    attempts: &'a Attempts,
    key: BindingKey,
    turn: Arc<tokio::sync::Mutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

// Each map's size is published while its lock is held, so the gauge (`flotilla_scheduler_
// attempt_state_bindings`) ends on the last size, and no lock is taken inside the other.
fn report_turns(len: usize) {
    crate::metrics::metrics().set_attempt_state("turn", len);
}

fn report_versions(len: usize) {
    crate::metrics::metrics().set_attempt_state("version", len);
}

fn parse(resource_version: Option<&str>) -> Option<u64> {
    resource_version?.parse().ok()
}

impl Attempts {
    /// Waits for `key`'s turn.
    pub async fn lock(&self, key: &BindingKey) -> Turn<'_> {
        let turn = {
            let mut turns = lock(&self.turns);
            let turn = Arc::clone(turns.entry(key.clone()).or_default());
            report_turns(turns.len());
            turn
        };
        let guard = Arc::clone(&turn).lock_owned().await;
        Turn {
            attempts: self,
            key: key.clone(),
            turn,
            guard: Some(guard),
        }
    }

    /// The watch cache holds `key` at `resource_version` (an integer, as
    /// [`crate::binding::StoredBinding::resource_version`] reads it): a version seen that is not
    /// newer is forgotten. Called as the watch delivers a version, and as an attempt ends.
    pub fn caught_up(&self, key: &BindingKey, resource_version: Option<u64>) {
        let Some(delivered) = resource_version else {
            return;
        };
        let mut seen = lock(&self.seen);
        if seen.get(key).is_some_and(|version| *version <= delivered) {
            seen.remove(key);
            report_versions(seen.len());
        }
    }

    /// Registers a watch cache: when an attempt ends, a version it holds needs no guarding.
    pub fn delivered_by(&self, cache: Delivered) {
        lock(&self.caches).push(cache);
    }

    /// What a registered watch cache holds of `key`.
    fn delivered(&self, key: &BindingKey) -> Option<u64> {
        lock(&self.caches).iter().find_map(|cache| cache(key))
    }

    /// Forgets a deleted binding (a binding created again under its name starts afresh: its
    /// versions are newer anyway).
    pub fn forget(&self, key: &BindingKey) {
        let mut seen = lock(&self.seen);
        if seen.remove(key).is_some() {
            report_versions(seen.len());
        }
    }

    /// How many bindings have a turn taken or waited for, and how many a version the watch cache
    /// does not hold yet.
    pub fn len(&self) -> (usize, usize) {
        (lock(&self.turns).len(), lock(&self.seen).len())
    }
}

impl Turn<'_> {
    /// Records a version read from the API or returned by a write.
    pub fn observe(&mut self, resource_version: Option<&str>) {
        if let Some(version) = parse(resource_version) {
            let mut seen = lock(&self.attempts.seen);
            match seen.get_mut(&self.key) {
                Some(newest) => *newest = (*newest).max(version),
                None => {
                    seen.insert(self.key.clone(), version);
                    report_versions(seen.len());
                }
            }
        }
    }

    /// Whether a copy at `resource_version` is older than a version this process has seen.
    pub fn is_older(&self, resource_version: Option<&str>) -> bool {
        let newest = lock(&self.attempts.seen).get(&self.key).copied();
        matches!((parse(resource_version), newest), (Some(copy), Some(seen)) if copy < seen)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut turns = lock(&self.attempts.turns);
        // The map's reference and this turn's: nobody waits, so the turn goes (a later attempt
        // takes a new one). A waiter holds a clone, taken under this same lock.
        if Arc::strong_count(&self.turn) == 2
            && turns.get(&self.key).is_some_and(|t| Arc::ptr_eq(t, &self.turn))
        {
            turns.remove(&self.key);
        }
        report_turns(turns.len());
        drop(turns);
        // The watch may have delivered what this attempt read or wrote before it recorded it.
        // Nothing held, nothing to check (a later attempt's version is checked as it ends).
        if lock(&self.attempts.seen).contains_key(&self.key) {
            let delivered = self.attempts.delivered(&self.key);
            self.attempts.caught_up(&self.key, delivered);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use flotilla_proto::v1::BindingKind;

    use super::*;

    fn key(name: &str) -> BindingKey {
        BindingKey {
            kind: BindingKind::ResourceBinding,
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    #[tokio::test]
    async fn a_copy_is_older_only_than_a_newer_version_seen() {
        let attempts = Attempts::default();
        let mut turn = attempts.lock(&key("a")).await;
        assert!(!turn.is_older(Some("5")), "nothing seen yet");
        turn.observe(Some("10"));
        turn.observe(Some("7"));
        assert!(turn.is_older(Some("9")));
        assert!(!turn.is_older(Some("10")));
        assert!(!turn.is_older(Some("11")));
        // Versions that are not integers are never called older, nor remembered.
        assert!(!turn.is_older(Some("abc")));
        assert!(!turn.is_older(None));
        turn.observe(Some("xyz"));
        assert!(turn.is_older(Some("9")));
        // Another binding's versions are its own.
        assert!(!attempts.lock(&key("b")).await.is_older(Some("1")));
    }

    #[tokio::test]
    async fn attempts_on_one_binding_take_turns_and_others_do_not_wait() {
        let attempts = Arc::new(Attempts::default());
        let mut first = attempts.lock(&key("a")).await;
        first.observe(Some("3"));
        // Another binding goes ahead.
        let other = tokio::time::timeout(Duration::from_secs(5), attempts.lock(&key("b"))).await;
        assert!(other.is_ok());
        drop(other);
        // The same binding waits for the first attempt, then sees what it saw.
        let waiting = {
            let attempts = Arc::clone(&attempts);
            tokio::spawn(async move { attempts.lock(&key("a")).await.is_older(Some("2")) })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(
            attempts.len(),
            (1, 1),
            "b's turn went when it ended; a's is waited on"
        );
        drop(first);
        assert!(waiting.await.unwrap_or(false));
        assert_eq!(attempts.len(), (0, 1), "no turn is left once every attempt ended");
        attempts.forget(&key("a"));
        assert!(!attempts.lock(&key("a")).await.is_older(Some("2")));
        assert_eq!(attempts.len(), (0, 0));
    }

    #[tokio::test]
    async fn a_version_is_kept_until_the_watch_delivers_it_or_a_newer_one() {
        let attempts = Attempts::default();
        attempts.lock(&key("a")).await.observe(Some("10"));
        attempts.lock(&key("b")).await.observe(Some("4"));
        // An older event, and one without a version, change nothing.
        attempts.caught_up(&key("a"), Some(9));
        attempts.caught_up(&key("a"), None);
        assert!(attempts.lock(&key("a")).await.is_older(Some("9")));
        // The version itself: the cache holds it now, so the stale copies it guarded against
        // are gone; b is untouched.
        attempts.caught_up(&key("a"), Some(10));
        assert_eq!(attempts.len(), (0, 1));
        assert!(!attempts.lock(&key("a")).await.is_older(Some("9")));
        // A newer version delivered also covers the one seen.
        attempts.caught_up(&key("b"), Some(7));
        assert_eq!(attempts.len(), (0, 0));
        // A binding never seen: nothing to forget.
        attempts.caught_up(&key("c"), Some(1));
        assert_eq!(attempts.len(), (0, 0));
    }

    #[tokio::test]
    async fn a_version_the_cache_already_holds_goes_when_the_attempt_ends() {
        let attempts = Attempts::default();
        // The watch cache of this test: a holds version 12, b is not cached.
        attempts.delivered_by(Box::new(|key: &BindingKey| (key.name == "a").then_some(12)));
        // The watch delivered the write before the attempt read the answer (or the attempt read
        // a version delivered long ago): nothing left to guard once it ends.
        {
            let mut turn = attempts.lock(&key("a")).await;
            turn.observe(Some("11"));
            turn.observe(Some("12"));
            assert!(turn.is_older(Some("11")), "guarded while the attempt runs");
        }
        assert_eq!(attempts.len(), (0, 0));
        // A version newer than the cache's, or of a binding not cached, is kept for the watch.
        attempts.lock(&key("a")).await.observe(Some("13"));
        attempts.lock(&key("b")).await.observe(Some("3"));
        assert_eq!(attempts.len(), (0, 2));
        assert!(attempts.lock(&key("a")).await.is_older(Some("12")));
    }

    #[tokio::test]
    async fn the_turn_handed_to_a_waiter_still_excludes_the_next_attempt() {
        let attempts = Arc::new(Attempts::default());
        let first = attempts.lock(&key("a")).await;
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (holding, held) = tokio::sync::oneshot::channel::<()>();
        let second = {
            let attempts = Arc::clone(&attempts);
            tokio::spawn(async move {
                let turn = attempts.lock(&key("a")).await;
                let _ = holding.send(());
                let _ = released.await;
                drop(turn);
            })
        };
        tokio::task::yield_now().await;
        // The first turn ends with the second waiting on it: the turn is handed over, not
        // dropped, so a third attempt waits for the second.
        drop(first);
        assert!(held.await.is_ok());
        let third = {
            let attempts = Arc::clone(&attempts);
            tokio::spawn(async move { drop(attempts.lock(&key("a")).await) })
        };
        tokio::task::yield_now().await;
        assert!(
            !third.is_finished(),
            "the third attempt ran while the second held the turn"
        );
        let _ = release.send(());
        assert!(second.await.is_ok());
        assert!(tokio::time::timeout(Duration::from_secs(5), third).await.is_ok());
        assert_eq!(attempts.len(), (0, 0));
    }
}
