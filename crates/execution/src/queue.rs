//! A deduplicating work queue with per-key exponential backoff (client-go's workqueue
//! semantics): a key is queued at most once, a key being processed is never handed to a second
//! worker, and a key added while it is processed is queued again when the worker is done.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

struct State<K> {
    queue: VecDeque<K>,
    /// When each key in `queue` was queued, in the same order (the front is the oldest).
    since: VecDeque<std::time::Instant>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
    shut_down: bool,
}

/// A work queue of keys. Cheap to clone; clones share the queue.
pub struct Queue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    base_backoff: Duration,
    max_backoff: Duration,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            notify: self.notify.clone(),
            base_backoff: self.base_backoff,
            max_backoff: self.max_backoff,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Queue<K> {
    /// An empty queue whose failed keys are retried after `base_backoff`, doubling per
    /// consecutive failure up to `max_backoff`.
    pub fn new(base_backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                since: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                shut_down: false,
            })),
            notify: Arc::new(Notify::new()),
            base_backoff,
            max_backoff,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `key` unless it is already queued; a key being processed is queued again when
    /// its worker calls [`Queue::done`].
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.shut_down || state.queued.contains(&key) {
            return;
        }
        if state.processing.contains(&key) {
            state.dirty.insert(key);
            return;
        }
        state.queued.insert(key.clone());
        state.queue.push_back(key);
        state.since.push_back(std::time::Instant::now());
        drop(state);
        self.notify.notify_one();
    }

    /// Queues `key` after `delay`.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// Queues `key` after its next backoff (the key failed); returns the backoff.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let failures = {
            let mut state = self.lock();
            let failures = state.failures.entry(key.clone()).or_insert(0);
            *failures = failures.saturating_add(1);
            *failures
        };
        let delay = backoff(self.base_backoff, self.max_backoff, failures);
        self.add_after(key, delay);
        delay
    }

    /// Forgets `key`'s failures (it succeeded).
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// The next key to process, waiting for one; `None` once the queue is shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            {
                let mut state = self.lock();
                if let Some(key) = state.queue.pop_front() {
                    state.since.pop_front();
                    state.queued.remove(&key);
                    state.processing.insert(key.clone());
                    let more = !state.queue.is_empty();
                    drop(state);
                    if more {
                        // Let another idle worker pick up the next key.
                        self.notify.notify_one();
                    }
                    return Some(key);
                }
                if state.shut_down {
                    return None;
                }
            }
            self.notify.notified().await;
        }
    }

    /// Marks `key` processed; queues it again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut state = self.lock();
        state.processing.remove(key);
        if state.dirty.remove(key) && !state.shut_down && state.queued.insert(key.clone()) {
            state.queue.push_back(key.clone());
            state.since.push_back(std::time::Instant::now());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Keys waiting to be processed.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// How long the oldest waiting key has waited (zero when none waits).
    pub fn oldest_wait(&self) -> std::time::Duration {
        self.lock()
            .since
            .front()
            .map(|at| at.elapsed())
            .unwrap_or_default()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out keys; waiting workers get `None`.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

/// `base * 2^(failures-1)`, at most `max`.
pub fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    base.saturating_mul(1u32 << exponent).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Queue<&'static str> {
        Queue::new(Duration::from_millis(5), Duration::from_millis(40))
    }

    #[tokio::test]
    async fn keys_are_deduplicated_and_fifo() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(q.next().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_processing_comes_back_after_done() {
        let q = queue();
        q.add("a");
        let key = q.next().await.unwrap();
        q.add("a");
        assert!(q.is_empty(), "not handed to a second worker while processing");
        q.done(&key);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn failed_keys_come_back_after_backoff() {
        let q = queue();
        assert_eq!(q.add_rate_limited("a"), Duration::from_millis(5));
        assert_eq!(q.add_rate_limited("a"), Duration::from_millis(10));
        let got = tokio::time::timeout(Duration::from_secs(5), q.next()).await;
        assert_eq!(got.ok().flatten(), Some("a"));
        q.forget(&"a");
        assert_eq!(q.add_rate_limited("a"), Duration::from_millis(5));
    }

    #[tokio::test]
    async fn shut_down_wakes_waiting_workers() {
        let q = queue();
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await })
        };
        tokio::task::yield_now().await;
        q.shut_down();
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert_eq!(got.ok().and_then(Result::ok), Some(None));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        let got: Vec<u128> = (1..=6).map(|n| backoff(base, max, n).as_millis()).collect();
        assert_eq!(got, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(base, max, u32::MAX), max);
    }
}
