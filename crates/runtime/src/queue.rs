//! The work queue every flotilla controller feeds from its watches: keys of objects to
//! reconcile, with client-go's workqueue guarantees.
//!
//! - A key waits at most once: adding a waiting key again is a no-op.
//! - A key being processed (handed out by [`WorkQueue::next`], not yet [`WorkQueue::done`]) is
//!   never handed to a second worker, however many workers call `next` concurrently; adding it
//!   meanwhile marks it dirty, and `done` queues it again.
//! - [`WorkQueue::add_rate_limited`] queues a failed key after a per-key exponential backoff
//!   ([`backoff`]); [`WorkQueue::forget`] resets it once the key succeeds.
//! - [`WorkQueue::add_after`] queues a key later; of several pending delays for one key the
//!   earliest wins; [`WorkQueue::cancel_after`] drops the pending one.
//! - After [`WorkQueue::shut_down`] nothing is queued any more and `next` returns `None` at
//!   once, to waiting workers too, even if keys still wait.
//! - A queue that a burst of keys made large (every object of an installation at a start or a
//!   resync) gives most of that room back as it drains.
//!
//! Beyond client-go's: a key can be queued as [`Priority::Deferred`] (follow-up work, such as
//! a status report, that must not hold up changes). A deferred key is served as if it had been
//! added the queue's deferral ([`WorkQueue::set_deferral`]) later than it was, and at once when
//! no other key waits: under a backlog, changes go first and a deferred key waits at most about
//! the deferral longer than a change would; without a backlog nothing waits. Adding a deferred
//! key as [`Priority::Normal`] moves it to the back of the normal keys. Keys of one priority
//! keep the order of their adds.
//!
//! A worker's loop:
//!
//! ```no_run
//! # async fn reconcile(_: &str) -> Result<(), ()> { Ok(()) }
//! # async fn worker(queue: flotilla_runtime::queue::WorkQueue<String>) {
//! while let Some(key) = queue.next().await {
//!     match reconcile(&key).await {
//!         Ok(()) => queue.forget(&key),
//!         Err(()) => {
//!             queue.add_rate_limited(key.clone());
//!         }
//!     }
//!     queue.done(&key);
//! }
//! # }
//! ```

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The first retry delay of [`WorkQueue::default`].
pub const DEFAULT_BASE_BACKOFF: Duration = Duration::from_millis(100);

/// The longest retry delay of [`WorkQueue::default`].
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The deferral of a new queue ([`WorkQueue::set_deferral`]).
pub const DEFAULT_DEFERRAL: Duration = Duration::from_secs(30);

/// The retry delay after `failures` consecutive failures: `base * 2^(failures-1)`, at most
/// `max` (`failures` 0 counts as 1).
pub fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    // 2^31 is the largest power of two a u32 factor holds; any cap beyond it is reached anyway.
    let exponent = failures.saturating_sub(1).min(31);
    base.saturating_mul(1u32 << exponent).min(max)
}

/// How soon a queued key is wanted (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Served after the normal keys added up to the queue's deferral after it.
    Deferred,
    /// Served in the order of adds.
    #[default]
    Normal,
}

/// A key in one of the lanes: the key, when it entered the lane, and the number of that entry
/// (an entry is current while [`State::queued`] holds the same number for its key; a key moved
/// to the normal lane leaves a stale entry behind in the deferred one).
type Entry<K> = (K, Instant, u64);

struct State<K> {
    /// Normal keys waiting, oldest first.
    normal: VecDeque<Entry<K>>,
    /// Deferred keys waiting, oldest first (and stale entries, skipped).
    deferred: VecDeque<Entry<K>>,
    /// The keys waiting, with the priority and number of their current entry.
    queued: HashMap<K, (Priority, u64)>,
    /// The number of the next entry.
    next_entry: u64,
    /// Keys handed out and not yet done.
    processing: HashSet<K>,
    /// Keys added while being processed (with the highest priority asked for): queued again on
    /// `done`.
    dirty: HashMap<K, Priority>,
    /// Consecutive failures per key, for the backoff.
    failures: HashMap<K, u32>,
    /// When each key with a pending delayed add is due (the earliest asked for), and the
    /// highest priority asked for.
    delayed: HashMap<K, (Instant, Priority)>,
    /// How much later than its add a deferred key counts as queued.
    deferral: Duration,
    shut_down: bool,
}

/// The capacity (keys) up to which a queue keeps the room a burst of keys made it take.
const KEPT_ROOM: usize = 1024;

impl<K: Clone + Eq + Hash> State<K> {
    /// Gives back most of the room a burst of keys made the lanes and `queued` take, once no
    /// more than a quarter of it is used: a queue that held every object of an installation once
    /// (a start, a resync) does not keep that much memory for the rest of its life. Shrinking to
    /// twice what waits keeps the cost amortised: the room halves at least each time.
    fn give_back_spare_room(&mut self) {
        fn shrink<T>(lane: &mut VecDeque<T>) {
            let used = lane.len();
            if lane.capacity() > KEPT_ROOM && used * 4 < lane.capacity() {
                lane.shrink_to(used * 2);
            }
        }
        shrink(&mut self.normal);
        shrink(&mut self.deferred);
        let waiting = self.queued.len();
        if self.queued.capacity() > KEPT_ROOM && waiting * 4 < self.queued.capacity() {
            self.queued.shrink_to(waiting * 2);
        }
    }

    /// The lane of `priority`.
    fn lane(&mut self, priority: Priority) -> &mut VecDeque<Entry<K>> {
        match priority {
            Priority::Normal => &mut self.normal,
            Priority::Deferred => &mut self.deferred,
        }
    }

    /// Queues `key` at `priority` unless it waits at that priority or a higher one (a deferred
    /// key asked for as normal moves to the back of the normal lane). Says whether a key was
    /// added to those waiting.
    fn push(&mut self, key: K, priority: Priority) -> bool {
        let entry = self.next_entry;
        let added = match self.queued.get_mut(&key) {
            Some((queued, _)) if *queued >= priority => return false,
            Some(current) => {
                *current = (priority, entry);
                false
            }
            None => {
                self.queued.insert(key.clone(), (priority, entry));
                true
            }
        };
        self.next_entry += 1;
        self.lane(priority).push_back((key, Instant::now(), entry));
        added
    }

    /// Drops the stale entries at the fronts of both lanes.
    fn drop_stale_fronts(&mut self) {
        let queued = &self.queued;
        for (lane, priority) in [
            (&mut self.normal, Priority::Normal),
            (&mut self.deferred, Priority::Deferred),
        ] {
            while let Some((key, _, entry)) = lane.front()
                && queued.get(key) != Some(&(priority, *entry))
            {
                lane.pop_front();
            }
        }
    }

    /// Takes the key to serve next: the front normal key, unless the front deferred key counts
    /// as queued before it (its add plus the deferral) or no normal key waits.
    fn pop(&mut self) -> Option<K> {
        self.drop_stale_fronts();
        let deferred_first = match (self.normal.front(), self.deferred.front()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some((_, normal, _)), Some((_, deferred, _))) => deferred
                .checked_add(self.deferral)
                .is_some_and(|counts_from| counts_from <= *normal),
        };
        let lane = if deferred_first {
            Priority::Deferred
        } else {
            Priority::Normal
        };
        let (key, _, _) = self.lane(lane).pop_front()?;
        self.queued.remove(&key);
        self.give_back_spare_room();
        Some(key)
    }
}

struct Inner<K> {
    state: Mutex<State<K>>,
    /// Wakes workers waiting in `next`.
    notify: Notify,
    base_backoff: Duration,
    max_backoff: Duration,
}

/// A deduplicating work queue of keys (see the module docs). Cheap to clone; clones share the
/// queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("WorkQueue")
            .field("waiting", &state.queued.len())
            .field("processing", &state.processing.len())
            .field("delayed", &state.delayed.len())
            .field("shut_down", &state.shut_down)
            .field("base_backoff", &self.inner.base_backoff)
            .field("max_backoff", &self.inner.max_backoff)
            .field("deferral", &state.deferral)
            .finish()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for WorkQueue<K> {
    /// A queue retrying after [`DEFAULT_BASE_BACKOFF`] up to [`DEFAULT_MAX_BACKOFF`].
    fn default() -> Self {
        Self::new(DEFAULT_BASE_BACKOFF, DEFAULT_MAX_BACKOFF)
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue whose failed keys come back after `base_backoff`, doubling with each
    /// consecutive failure up to `max_backoff`, and whose deferral is [`DEFAULT_DEFERRAL`].
    pub fn new(base_backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    normal: VecDeque::new(),
                    deferred: VecDeque::new(),
                    queued: HashMap::new(),
                    next_entry: 0,
                    processing: HashSet::new(),
                    dirty: HashMap::new(),
                    failures: HashMap::new(),
                    delayed: HashMap::new(),
                    deferral: DEFAULT_DEFERRAL,
                    shut_down: false,
                }),
                notify: Notify::new(),
                base_backoff,
                max_backoff,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A worker that panicked holding the lock left the state consistent: every mutation
        // below completes before anything can panic.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets how much later than its add a deferred key counts as queued (`Duration::MAX`: it
    /// waits for every normal key).
    pub fn set_deferral(&self, deferral: Duration) {
        self.lock().deferral = deferral;
    }

    /// Queues `key` unless it already waits; a key being processed is queued again when its
    /// worker calls [`WorkQueue::done`]. No-op after shutdown.
    pub fn add(&self, key: K) {
        self.add_with(key, Priority::Normal);
    }

    /// [`WorkQueue::add`] at `priority`: a key waiting as deferred and added as normal moves to
    /// the normal keys; a key being processed is queued again on `done` at the highest
    /// priority it was added with meanwhile.
    pub fn add_with(&self, key: K, priority: Priority) {
        let mut state = self.lock();
        if state.shut_down {
            return;
        }
        if state.processing.contains(&key) {
            let dirty = state.dirty.entry(key).or_insert(priority);
            *dirty = (*dirty).max(priority);
            return;
        }
        if state.push(key, priority) {
            drop(state);
            self.inner.notify.notify_one();
        }
    }

    /// Queues `key` after `delay` (at once when zero). If the key already has an earlier
    /// delayed add pending, this one is dropped; a later pending one is superseded. Must be
    /// called within a Tokio runtime (a timer task waits out the delay).
    pub fn add_after(&self, key: K, delay: Duration) {
        self.add_after_with(key, delay, Priority::Normal);
    }

    /// [`WorkQueue::add_after`] at `priority`; of several pending delays for one key, the
    /// earliest fires, at the highest priority any of them asked for.
    pub fn add_after_with(&self, key: K, delay: Duration, priority: Priority) {
        if delay.is_zero() {
            self.add_with(key, priority);
            return;
        }
        let due = Instant::now() + delay;
        {
            let mut state = self.lock();
            if state.shut_down {
                return;
            }
            match state.delayed.get_mut(&key) {
                Some((at, pending)) if *at <= due => {
                    *pending = (*pending).max(priority);
                    return;
                }
                Some(superseded) => *superseded = (due, superseded.1.max(priority)),
                None => {
                    state.delayed.insert(key.clone(), (due, priority));
                }
            }
        }
        // Weak: a dropped queue does not live on in its timers.
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(fire_after(inner, key, due));
    }

    /// Drops `key`'s pending delayed add, if any (its timer then queues nothing), and says
    /// whether there was one: `false` once it has fired.
    pub fn cancel_after<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock().delayed.remove(key).is_some()
    }

    /// Queues `key` after its backoff (it failed once more) and returns that backoff.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let failures = {
            let mut state = self.lock();
            let failures = state.failures.entry(key.clone()).or_insert(0);
            *failures = failures.saturating_add(1);
            *failures
        };
        let delay = backoff(self.inner.base_backoff, self.inner.max_backoff, failures);
        self.add_after(key, delay);
        delay
    }

    /// Forgets `key`'s failures (it succeeded): its next backoff starts from the base again.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Waits for the next key and marks it processing; call [`WorkQueue::done`] when finished.
    /// `None` once the queue is shut down. Cancel-safe: a dropped call takes no key.
    pub async fn next(&self) -> Option<K> {
        loop {
            // Registered before the state is read, so an add or shutdown between the read
            // and the await still wakes this worker.
            let notified = self.inner.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.shut_down {
                    return None;
                }
                if let Some(key) = state.pop() {
                    state.processing.insert(key.clone());
                    let more = !state.queued.is_empty();
                    drop(state);
                    if more {
                        // Another idle worker takes the next key.
                        self.inner.notify.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` finished; queues it again if it was added while being processed.
    pub fn done(&self, key: &K) {
        let mut state = self.lock();
        state.processing.remove(key);
        if let Some(priority) = state.dirty.remove(key)
            && !state.shut_down
            && state.push(key.clone(), priority)
        {
            drop(state);
            self.inner.notify.notify_one();
        }
    }

    /// Keys waiting (not counting those being processed or delayed).
    pub fn len(&self) -> usize {
        self.lock().queued.len()
    }

    /// Keys waiting as [`Priority::Deferred`].
    pub fn deferred_len(&self) -> usize {
        let state = self.lock();
        state
            .queued
            .values()
            .filter(|(p, _)| *p == Priority::Deferred)
            .count()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no key waits or is being processed (delayed adds not counted).
    pub fn is_idle(&self) -> bool {
        let state = self.lock();
        state.queued.is_empty() && state.processing.is_empty()
    }

    /// How long the key waiting longest in its lane has waited (zero when none waits); a key
    /// moved from the deferred keys to the normal ones waits anew.
    pub fn oldest_wait(&self) -> Duration {
        let mut state = self.lock();
        state.drop_stale_fronts();
        [state.normal.front(), state.deferred.front()]
            .into_iter()
            .flatten()
            .map(|(_, since, _)| since.elapsed())
            .max()
            .unwrap_or_default()
    }

    /// Stops the queue: nothing is queued any more, and every worker waiting in or later
    /// calling [`WorkQueue::next`] gets `None`.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.inner.notify.notify_waiters();
    }
}

/// The timer of one delayed add: adds `key` at `due` unless an earlier delay has taken its
/// place (and fired) or the queue is gone.
async fn fire_after<K: Clone + Eq + Hash + Send + 'static>(inner: Weak<Inner<K>>, key: K, due: Instant) {
    tokio::time::sleep_until(due).await;
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let queue = WorkQueue { inner };
    let current = {
        let mut state = queue.lock();
        match state.delayed.get(&key) {
            Some((at, priority)) if *at == due => {
                let priority = *priority;
                state.delayed.remove(&key);
                Some(priority)
            }
            _ => None,
        }
    };
    if let Some(priority) = current {
        queue.add_with(key, priority);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const BASE: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_millis(40);

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(BASE, MAX)
    }

    /// `next` within `wait` of (paused) time, or `None` if no key came.
    async fn next_within(q: &WorkQueue<&'static str>, wait: Duration) -> Option<&'static str> {
        tokio::time::timeout(wait, q.next()).await.ok().flatten()
    }

    #[tokio::test]
    async fn keys_wait_once_in_fifo_order() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add("a");
        q.add("c");
        q.add("b");
        assert_eq!(q.len(), 3);
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(q.next().await, Some("b"));
        assert_eq!(q.next().await, Some("c"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn deferred_keys_wait_behind_normal_ones_in_the_order_of_their_adds() {
        let q = queue();
        q.add_with("a", Priority::Deferred);
        q.add("b");
        q.add_with("c", Priority::Deferred);
        q.add("d");
        q.add_with("a", Priority::Deferred);
        assert_eq!(q.len(), 4);
        assert_eq!(q.deferred_len(), 2);
        let mut got = vec![];
        while let Some(key) = next_within(&q, Duration::from_millis(10)).await {
            got.push(key);
            q.done(&key);
        }
        assert_eq!(got, ["b", "d", "a", "c"]);
        assert!(q.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn a_deferred_key_counts_as_queued_the_deferral_after_its_add() {
        let q = queue();
        q.set_deferral(Duration::from_secs(10));
        q.add_with("report", Priority::Deferred);
        tokio::time::advance(Duration::from_secs(4)).await;
        q.add("early");
        tokio::time::advance(Duration::from_secs(7)).await;
        q.add("late");
        // "report" counts from 10 s: after "early" (4 s), before "late" (11 s).
        let mut got = vec![];
        for _ in 0..3 {
            got.push(q.next().await.unwrap());
        }
        assert_eq!(got, ["early", "report", "late"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deferred_key_waits_for_every_normal_key_under_an_endless_deferral() {
        let q = queue();
        q.set_deferral(Duration::MAX);
        q.add_with("report", Priority::Deferred);
        tokio::time::advance(Duration::from_secs(3600)).await;
        q.add("change");
        assert_eq!(q.next().await, Some("change"));
        assert_eq!(
            q.next().await,
            Some("report"),
            "and is served once nothing else waits"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_deferred_key_added_as_normal_moves_to_the_back_of_the_normal_keys() {
        let q = queue();
        q.add_with("a", Priority::Deferred);
        q.add("b");
        tokio::time::advance(Duration::from_secs(2)).await;
        q.add("a");
        assert_eq!(q.len(), 2, "still one entry per key");
        assert_eq!(q.deferred_len(), 0);
        assert_eq!(q.oldest_wait(), Duration::from_secs(2), "b's wait; a waits anew");
        q.add_with("b", Priority::Deferred);
        assert_eq!(
            q.deferred_len(),
            0,
            "a normal key is not deferred by a deferred add"
        );
        assert_eq!(q.next().await, Some("b"));
        assert_eq!(q.next().await, Some("a"));
        assert!(q.is_empty());
        assert_eq!(q.oldest_wait(), Duration::ZERO);
        assert_eq!(
            next_within(&q, Duration::from_secs(60)).await,
            None,
            "a's old deferred entry is not handed out"
        );
        // Its key queued again later is served once, from its new entry.
        q.done(&"a");
        q.add_with("a", Priority::Deferred);
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(next_within(&q, Duration::from_secs(60)).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_while_processing_comes_back_at_the_highest_priority_asked_for() {
        let q = queue();
        q.add("a");
        let a = q.next().await.unwrap();
        q.add_with("a", Priority::Deferred);
        q.add_with("x", Priority::Deferred);
        q.done(&a);
        q.add("b");
        assert_eq!(q.next().await, Some("b"), "a came back deferred");
        assert_eq!(q.next().await, Some("x"));
        assert_eq!(q.next().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        q.done(&"x");

        q.add("a");
        let a = q.next().await.unwrap();
        q.add_with("x", Priority::Deferred);
        q.add_with("a", Priority::Deferred);
        q.add("a");
        q.add_with("a", Priority::Deferred);
        q.done(&a);
        assert_eq!(q.next().await, Some("a"), "a came back normal");
        assert_eq!(q.next().await, Some("x"));
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_keep_their_priority_and_the_earliest_fires_at_the_highest() {
        let q = queue();
        q.add_after_with("report", Duration::from_secs(1), Priority::Deferred);
        q.add_after_with("both", Duration::from_secs(1), Priority::Deferred);
        q.add_after("both", Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(q.len(), 2);
        assert_eq!(q.deferred_len(), 1, "only report is deferred");
        q.add("change");
        assert_eq!(q.next().await, Some("both"));
        assert_eq!(q.next().await, Some("change"));
        assert_eq!(q.next().await, Some("report"));
        assert_eq!(
            next_within(&q, Duration::from_secs(60)).await,
            None,
            "the superseded delay adds nothing"
        );
        // A later normal delay superseded by an earlier deferred one fires as normal.
        q.add_after("x", Duration::from_secs(5));
        q.add_after_with("x", Duration::from_secs(1), Priority::Deferred);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!((q.len(), q.deferred_len()), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_drained_deferred_lane_gives_back_its_room() {
        let q: WorkQueue<u32> = WorkQueue::new(BASE, MAX);
        for key in 0..10_000 {
            q.add_with(key, Priority::Deferred);
        }
        // Every one of them moved: the deferred lane holds stale entries only.
        for key in 0..10_000 {
            q.add(key);
        }
        assert_eq!((q.len(), q.deferred_len()), (10_000, 0));
        for expected in 0..10_000 {
            assert_eq!(q.next().await, Some(expected));
            q.done(&expected);
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(1), q.next())
                .await
                .is_err(),
            "nothing stale is handed out"
        );
        let state = q.lock();
        assert!(
            state.deferred.is_empty(),
            "stale entries are dropped as they come to the front"
        );
        assert!(state.deferred.capacity() <= 2 * KEPT_ROOM && state.normal.capacity() <= 2 * KEPT_ROOM);
    }

    #[tokio::test]
    async fn a_drained_queue_gives_back_the_room_a_burst_took() {
        let q: WorkQueue<u32> = WorkQueue::new(BASE, MAX);
        for key in 0..20_000 {
            q.add(key);
        }
        let room = |q: &WorkQueue<u32>| {
            let state = q.lock();
            (state.normal.capacity(), state.queued.capacity())
        };
        assert!(room(&q).0 >= 20_000 && room(&q).1 >= 20_000);
        for expected in 0..20_000 {
            assert_eq!(
                q.next().await,
                Some(expected),
                "order is kept while the room shrinks"
            );
            q.done(&expected);
            let (waiting, queued) = room(&q);
            let left = (19_999 - expected) as usize;
            assert!(waiting >= left && queued >= left);
        }
        let (waiting, queued) = room(&q);
        assert!(
            waiting <= 2 * KEPT_ROOM && queued <= 2 * KEPT_ROOM,
            "room kept after draining: {waiting} and {queued} keys"
        );
        // The queue works as before.
        q.add(7);
        q.add(7);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some(7));
    }

    #[tokio::test]
    async fn len_counts_waiting_keys_only_and_idle_counts_processing_too() {
        let q = queue();
        assert!(q.is_idle());
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        assert!(!q.is_idle());
        let a = q.next().await.unwrap();
        assert_eq!(q.len(), 1);
        let b = q.next().await.unwrap();
        assert_eq!(q.len(), 0);
        assert!(q.is_empty());
        assert!(!q.is_idle(), "two keys are still being processed");
        q.done(&a);
        assert!(!q.is_idle());
        q.done(&b);
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn a_key_added_while_processing_comes_back_after_done_once() {
        let q = queue();
        q.add("a");
        let key = q.next().await.unwrap();
        q.add("a");
        q.add("a");
        assert!(q.is_empty(), "not queued while being processed");
        q.done(&key);
        assert_eq!(q.len(), 1, "queued again, once");
        assert_eq!(q.next().await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty(), "not dirty any more: done does not queue it again");
        assert!(q.is_idle());
    }

    #[tokio::test]
    async fn done_without_an_add_meanwhile_does_not_requeue() {
        let q = queue();
        q.add("a");
        let key = q.next().await.unwrap();
        q.done(&key);
        assert!(q.is_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn a_processing_key_is_not_handed_to_a_second_worker() {
        let q = queue();
        q.add("a");
        let first = q.next().await.unwrap();
        let second = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await })
        };
        q.add("a");
        // Paused time: this only lets every task run until all are idle.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!second.is_finished(), "second worker got a key being processed");
        q.done(&first);
        let got = tokio::time::timeout(Duration::from_secs(1), second).await;
        assert_eq!(got.unwrap().unwrap(), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_workers_are_each_woken_for_a_key() {
        let q: WorkQueue<u32> = WorkQueue::default();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.next().await })
            })
            .collect();
        tokio::task::yield_now().await;
        q.add(1);
        q.add(2);
        let mut got = vec![];
        for worker in workers {
            got.push(
                tokio::time::timeout(Duration::from_secs(1), worker)
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        got.sort_unstable();
        assert_eq!(got, [Some(1), Some(2)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_next_takes_no_key() {
        let q = queue();
        assert_eq!(next_within(&q, Duration::from_secs(1)).await, None);
        q.add("a");
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_next_dropped_after_its_wakeup_passes_the_wakeup_on() {
        let q = queue();
        // This worker waits first, so the add wakes it (Notify wakes in arrival order)...
        // Boxed, so that dropping it drops the future itself.
        let mut first = Box::pin(q.next());
        let pending =
            std::future::poll_fn(|cx| std::task::Poll::Ready(first.as_mut().poll(cx).is_pending())).await;
        assert!(pending);
        let second = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await })
        };
        tokio::task::yield_now().await;
        q.add("a");
        // ...but is cancelled before it runs: the other waiting worker must get the key.
        drop(first);
        let got = tokio::time::timeout(Duration::from_secs(1), second).await;
        assert_eq!(got.unwrap().unwrap(), Some("a"));
    }

    /// Several threads of workers and a producer re-adding keys: no key is ever processed by
    /// two workers at once, and every key's last add is processed after it was made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_workers_process_each_key_exclusively_and_see_the_last_add() {
        const KEYS: u32 = 20;
        const ROUNDS: u32 = 200;
        let q: WorkQueue<u32> = WorkQueue::default();
        let in_flight = Arc::new(Mutex::new(HashSet::new()));
        let overlaps = Arc::new(AtomicUsize::new(0));
        // The round of each key's latest add, and the round each key was last processed for.
        let added = Arc::new(Mutex::new(HashMap::new()));
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (q, in_flight, overlaps) = (q.clone(), in_flight.clone(), overlaps.clone());
                let (added, seen) = (added.clone(), seen.clone());
                tokio::spawn(async move {
                    while let Some(key) = q.next().await {
                        if !in_flight.lock().unwrap().insert(key) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        let round = added.lock().unwrap()[&key];
                        // Long enough that the producer re-adds keys being processed.
                        for _ in 0..5 {
                            tokio::task::yield_now().await;
                        }
                        seen.lock().unwrap().insert(key, round);
                        in_flight.lock().unwrap().remove(&key);
                        q.done(&key);
                    }
                })
            })
            .collect();
        // The producer runs on the runtime's threads too, alongside the workers.
        let producer = {
            let (q, added) = (q.clone(), added.clone());
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    for key in 0..KEYS {
                        added.lock().unwrap().insert(key, round);
                        // Both lanes, and moves between them.
                        let priority = if (key + round) % 3 == 0 {
                            Priority::Deferred
                        } else {
                            Priority::Normal
                        };
                        q.add_with(key, priority);
                        tokio::task::yield_now().await;
                    }
                }
            })
        };
        producer.await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), async {
            while !q.is_idle() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the workers drain the queue");
        q.shut_down();
        for worker in workers {
            worker.await.unwrap();
        }
        assert_eq!(
            overlaps.load(Ordering::SeqCst),
            0,
            "a key was processed twice at once"
        );
        let seen = seen.lock().unwrap();
        for key in 0..KEYS {
            assert_eq!(
                seen.get(&key),
                Some(&(ROUNDS - 1)),
                "key {key} missed its last add"
            );
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        let got: Vec<u128> = (1..=6).map(|n| backoff(base, max, n).as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(base, max, 0), base, "no failure yet counts as the first");
        assert_eq!(backoff(base, max, 32), max);
        assert_eq!(backoff(base, max, u32::MAX), max);
        assert_eq!(
            backoff(Duration::from_secs(1), Duration::MAX, u32::MAX),
            Duration::from_secs(1 << 31),
            "the factor saturates instead of overflowing"
        );
    }

    #[test]
    fn the_defaults_are_the_detectors_100ms_to_30s() {
        let got: Vec<Duration> = [1, 2, 9, 10, 100]
            .into_iter()
            .map(|n| backoff(DEFAULT_BASE_BACKOFF, DEFAULT_MAX_BACKOFF, n))
            .collect();
        let ms = Duration::from_millis;
        assert_eq!(got, [ms(100), ms(200), ms(25_600), ms(30_000), ms(30_000)]);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_adds_back_off_per_key_up_to_the_cap() {
        let q = queue();
        let mut delays = vec![];
        for _ in 0..6 {
            delays.push(q.add_rate_limited("a"));
        }
        let ms = Duration::from_millis;
        assert_eq!(delays, [ms(5), ms(10), ms(20), ms(40), ms(40), ms(40)]);
        assert_eq!(q.add_rate_limited("b"), BASE, "backoff is per key");
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_key_comes_back_after_exactly_its_backoff() {
        let q = queue();
        q.add("a");
        for expected in [5, 10, 20, 40, 40] {
            let key = q.next().await.unwrap();
            let delay = q.add_rate_limited(key);
            q.done(&key);
            assert_eq!(delay, Duration::from_millis(expected));
            assert!(q.is_empty(), "not back before its backoff");
            let started = Instant::now();
            assert_eq!(next_within(&q, Duration::from_secs(1)).await, Some("a"));
            assert_eq!(started.elapsed(), delay);
            q.done(&"a");
            q.add("a");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn forget_resets_the_backoff() {
        let q = queue();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        assert_eq!(q.add_rate_limited("a"), BASE * 4);
        q.forget(&"a");
        assert_eq!(q.add_rate_limited("a"), BASE);
        q.forget(&"b");
        assert_eq!(
            q.add_rate_limited("b"),
            BASE,
            "forgetting an unknown key is harmless"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_while_dirty_comes_back_at_once_and_after_the_backoff() {
        // client-go's order: a key added during a failing reconcile is reconciled again at
        // once (newer input), and the backoff's add still follows.
        let q = queue();
        q.add("a");
        let key = q.next().await.unwrap();
        q.add("a");
        q.add_rate_limited(key);
        q.done(&key);
        assert_eq!(q.len(), 1);
        let key = q.next().await.unwrap();
        q.done(&key);
        let started = Instant::now();
        assert_eq!(next_within(&q, Duration::from_secs(1)).await, Some("a"));
        assert_eq!(started.elapsed(), BASE);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_waits_out_the_delay() {
        let q = queue();
        let started = Instant::now();
        q.add_after("a", Duration::from_secs(3));
        assert!(q.is_empty());
        tokio::time::sleep(Duration::from_millis(2999)).await;
        assert!(q.is_empty(), "not before its delay");
        assert_eq!(next_within(&q, Duration::from_secs(10)).await, Some("a"));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_zero_adds_at_once() {
        let q = queue();
        q.add_after("a", Duration::ZERO);
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_earliest_pending_delay_wins() {
        let q = queue();
        let started = Instant::now();
        q.add_after("a", Duration::from_secs(5));
        q.add_after("a", Duration::from_secs(1));
        q.add_after("b", Duration::from_secs(2));
        q.add_after("b", Duration::from_secs(6));
        assert_eq!(next_within(&q, Duration::from_secs(10)).await, Some("a"));
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        q.done(&"a");
        assert_eq!(next_within(&q, Duration::from_secs(10)).await, Some("b"));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        q.done(&"b");
        assert_eq!(
            next_within(&q, Duration::from_secs(60)).await,
            None,
            "the superseded delays add nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_delay_adds_nothing_and_a_fired_one_cannot_be_cancelled() {
        let q = queue();
        q.add_after("a", Duration::from_secs(1));
        q.add_after("b", Duration::from_secs(1));
        assert!(q.cancel_after("a"));
        assert!(!q.cancel_after("a"), "cancelled once");
        assert_eq!(next_within(&q, Duration::from_secs(10)).await, Some("b"));
        assert!(!q.cancel_after("b"), "already fired");
        q.done(&"b");
        assert_eq!(
            next_within(&q, Duration::from_secs(60)).await,
            None,
            "a never came"
        );
        // A delay added after a cancel fires at its own time.
        let started = Instant::now();
        q.add_after("a", Duration::from_secs(2));
        assert!(q.cancel_after("a"));
        q.add_after("a", Duration::from_secs(3));
        assert_eq!(next_within(&q, Duration::from_secs(10)).await, Some("a"));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_already_waiting_is_not_queued_twice() {
        let q = queue();
        q.add_after("a", Duration::from_secs(1));
        q.add("a");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_wakes_every_waiting_worker_with_none() {
        let q = queue();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.next().await })
            })
            .collect();
        tokio::task::yield_now().await;
        q.shut_down();
        for worker in workers {
            let got = tokio::time::timeout(Duration::from_secs(1), worker).await;
            assert_eq!(got.unwrap().unwrap(), None);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_shut_down_queue_hands_out_and_accepts_nothing() {
        let q = queue();
        q.add("waiting");
        q.add("busy");
        let busy = q.next().await.unwrap();
        q.add("busy");
        q.add_after("delayed", Duration::from_secs(1));
        q.shut_down();
        assert_eq!(q.next().await, None, "keys still waiting are not handed out");
        q.add("late");
        q.add_after("late", Duration::from_secs(1));
        q.add_rate_limited("late");
        q.done(&busy);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(q.len(), 1, "only the key waiting before the shutdown");
        assert_eq!(q.next().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn oldest_wait_is_the_wait_of_the_front_key() {
        let q = queue();
        assert_eq!(q.oldest_wait(), Duration::ZERO);
        q.add("a");
        tokio::time::advance(Duration::from_secs(3)).await;
        q.add("b");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.oldest_wait(), Duration::from_secs(5));
        q.add("a");
        assert_eq!(
            q.oldest_wait(),
            Duration::from_secs(5),
            "a re-add keeps its place and age"
        );
        let a = q.next().await.unwrap();
        assert_eq!(q.oldest_wait(), Duration::from_secs(2));
        q.add(a);
        q.done(&a);
        tokio::time::advance(Duration::from_secs(1)).await;
        q.next().await.unwrap();
        assert_eq!(
            q.oldest_wait(),
            Duration::from_secs(1),
            "requeued on done: waits anew"
        );
        q.next().await.unwrap();
        assert_eq!(q.oldest_wait(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_queue_leaves_its_timers_harmless() {
        let q = queue();
        q.add_after("a", Duration::from_secs(1));
        let weak = Arc::downgrade(&q.inner);
        drop(q);
        assert!(weak.upgrade().is_none(), "timers do not keep the queue alive");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
