//! A work queue of object keys with client-go's guarantees: a key is queued at most once, is
//! processed by one worker at a time, a key added while it is being processed is processed
//! again afterwards, and failed keys come back after an exponential backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

struct State<K> {
    order: VecDeque<K>,
    /// When each key in `order` was queued, in the same order (the front is the oldest).
    since: VecDeque<std::time::Instant>,
    queued: HashSet<K>,
    active: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
}

/// The queue; clones share it.
pub struct Queue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            notify: Arc::clone(&self.notify),
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for Queue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Queue<K> {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                order: VecDeque::new(),
                since: VecDeque::new(),
                queued: HashSet::new(),
                active: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
            })),
            notify: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` (no-op if already queued; deferred if being processed).
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.active.contains(&key) {
            state.dirty.insert(key);
            return;
        }
        if state.queued.insert(key.clone()) {
            state.order.push_back(key);
            state.since.push_back(std::time::Instant::now());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay`.
    pub fn add_after(&self, key: K, delay: Duration) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// Waits for the next key and marks it active; call [`Queue::done`] when finished.
    pub async fn next(&self) -> K {
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.lock();
                if let Some(key) = state.order.pop_front() {
                    state.since.pop_front();
                    state.queued.remove(&key);
                    state.active.insert(key.clone());
                    let more = !state.order.is_empty();
                    drop(state);
                    if more {
                        // Wake another worker for the rest.
                        self.notify.notify_one();
                    }
                    return key;
                }
            }
            notified.await;
        }
    }

    /// Marks `key` finished. `ok == false` queues it again after a backoff that doubles with
    /// each consecutive failure (100 ms up to 30 s); success forgets past failures.
    pub fn done(&self, key: &K, ok: bool) {
        let mut state = self.lock();
        state.active.remove(key);
        let retry = if ok {
            state.failures.remove(key);
            None
        } else {
            let failures = state.failures.entry(key.clone()).or_insert(0);
            *failures += 1;
            Some(backoff(*failures))
        };
        let again = state.dirty.remove(key);
        drop(state);
        if again {
            self.add(key.clone());
        } else if let Some(delay) = retry {
            self.add_after(key.clone(), delay);
        }
    }

    /// Keys waiting (not counting those being processed).
    pub fn len(&self) -> usize {
        self.lock().order.len()
    }

    /// How long the oldest waiting key has waited (zero when none waits).
    pub fn oldest_wait(&self) -> std::time::Duration {
        self.lock()
            .since
            .front()
            .map(|at| at.elapsed())
            .unwrap_or_default()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no key is waiting or being processed.
    pub fn is_idle(&self) -> bool {
        let state = self.lock();
        state.order.is_empty() && state.active.is_empty()
    }
}

/// The retry delay after `failures` consecutive failures.
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    Duration::from_millis(100u64.saturating_mul(1 << exponent)).min(Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn deduplicates_and_keeps_order() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, "a");
        assert_eq!(q.next().await, "b");
        assert!(q.is_empty());
        assert!(!q.is_idle());
        q.done(&"a", true);
        q.done(&"b", true);
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn key_added_while_active_comes_back_after_done() {
        let q = Queue::new();
        q.add("a");
        let key = q.next().await;
        q.add("a");
        assert!(q.is_empty(), "not handed to a second worker while active");
        q.done(&key, true);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, "a");
    }

    #[tokio::test]
    async fn failures_back_off() {
        let q = Queue::new();
        q.add("a");
        let key = q.next().await;
        q.done(&key, false);
        assert!(q.is_empty());
        let again = tokio::time::timeout(Duration::from_secs(1), q.next()).await;
        assert_eq!(again.ok(), Some("a"));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(4), Duration::from_millis(800));
        assert_eq!(backoff(30), Duration::from_secs(30));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(30));
    }

    #[tokio::test]
    async fn waiting_worker_is_woken() {
        let q: Queue<u32> = Queue::new();
        let worker = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await })
        };
        tokio::task::yield_now().await;
        q.add(7);
        let got = tokio::time::timeout(Duration::from_secs(5), worker).await;
        assert_eq!(got.ok().and_then(Result::ok), Some(7));
    }
}
