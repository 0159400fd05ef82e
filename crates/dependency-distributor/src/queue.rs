//! A deduplicating work queue (client-go's workqueue semantics): a key waits at most once, a key
//! being processed is never handed to a second worker, and a key added while it is processed
//! is processed again afterwards. Failed keys come back after an exponential backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Debug)]
struct State<K> {
    waiting: VecDeque<K>,
    /// When each key in `waiting` was queued, in the same order (the front is the oldest).
    since: VecDeque<std::time::Instant>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
    closed: bool,
}

/// See the module docs. Cheap to clone; clones share the queue.
#[derive(Debug)]
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    base_delay: Duration,
    max_delay: Duration,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            notify: self.notify.clone(),
            base_delay: self.base_delay,
            max_delay: self.max_delay,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// A queue whose failed keys are retried after `base_delay * 2^(failures-1)`, at most
    /// `max_delay`.
    pub fn new(base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                waiting: VecDeque::new(),
                since: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                closed: false,
            })),
            notify: Arc::new(Notify::new()),
            base_delay,
            max_delay,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `key` unless it is already waiting.
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        if state.processing.contains(&key) {
            state.dirty.insert(key);
            return;
        }
        if state.queued.insert(key.clone()) {
            state.waiting.push_back(key);
            state.since.push_back(std::time::Instant::now());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Adds `key` after `delay`.
    pub fn add_after(&self, key: K, delay: Duration) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// Waits for the next key; `None` once the queue is shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.lock();
                if state.closed {
                    return None;
                }
                if let Some(key) = state.waiting.pop_front() {
                    state.since.pop_front();
                    state.queued.remove(&key);
                    state.processing.insert(key.clone());
                    // Wake another worker if more keys wait.
                    if !state.waiting.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed successfully: its backoff resets, and it is queued again if it
    /// was added meanwhile.
    pub fn done(&self, key: &K) {
        let requeue = {
            let mut state = self.lock();
            state.failures.remove(key);
            state.processing.remove(key);
            state.dirty.remove(key)
        };
        if requeue {
            self.add(key.clone());
        }
    }

    /// Marks `key` failed: it comes back after its backoff. Returns the delay.
    pub fn retry(&self, key: &K) -> Duration {
        let delay = {
            let mut state = self.lock();
            state.processing.remove(key);
            state.dirty.remove(key);
            let failures = state.failures.entry(key.clone()).or_insert(0);
            *failures = failures.saturating_add(1);
            let exponent = (*failures - 1).min(16);
            self.base_delay.saturating_mul(1 << exponent).min(self.max_delay)
        };
        self.add_after(key.clone(), delay);
        delay
    }

    /// How many keys wait.
    pub fn len(&self) -> usize {
        self.lock().waiting.len()
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

    /// Stops handing out keys; workers waiting in [`next`](Self::next) return `None`.
    pub fn shutdown(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(Duration::from_millis(5), Duration::from_millis(20))
    }

    #[tokio::test]
    async fn keys_wait_once_in_order() {
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
        assert_eq!(q.next().await, Some("a"));
        q.add("a");
        assert!(q.is_empty(), "not handed out twice at once");
        q.done(&"a");
        assert_eq!(q.next().await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn failures_back_off_exponentially_up_to_the_limit() {
        let q = queue();
        q.add("a");
        let mut delays = vec![];
        for _ in 0..5 {
            let key = q.next().await.unwrap();
            delays.push(q.retry(&key));
        }
        assert_eq!(delays, [5, 10, 20, 20, 20].map(Duration::from_millis).to_vec());
        let key = q.next().await.unwrap();
        q.done(&key);
        q.add("a");
        let key = q.next().await.unwrap();
        assert_eq!(
            q.retry(&key),
            Duration::from_millis(5),
            "success resets the backoff"
        );
    }

    #[tokio::test]
    async fn shutdown_releases_waiting_workers() {
        let q = queue();
        let worker = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await })
        };
        tokio::task::yield_now().await;
        q.shutdown();
        assert_eq!(worker.await.unwrap(), None);
        q.add("late");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn workers_share_keys() {
        let q: WorkQueue<u32> = WorkQueue::new(Duration::from_millis(1), Duration::from_millis(1));
        for i in 0..100 {
            q.add(i);
        }
        let mut handles = vec![];
        for _ in 0..4 {
            let q = q.clone();
            handles.push(tokio::spawn(async move {
                let mut got = vec![];
                while let Ok(Some(key)) = tokio::time::timeout(Duration::from_millis(50), q.next()).await {
                    got.push(key);
                    q.done(&key);
                }
                got
            }));
        }
        let mut all = vec![];
        for handle in handles {
            all.extend(handle.await.unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }
}
