//! flotilla-store: the embedded, durable, crash-safe key-value store behind flotilla-apiserver.
//!
//! The model is etcd's: string keys, opaque byte values, one global revision that increases by
//! one for every committed transaction that changes something, and per-key create and mod
//! revisions. Transactions carry conditions (key absent / present / mod revision equals) and
//! put/delete operations; they commit all-or-nothing.
//!
//! - **Durability.** A store is a directory: a write-ahead log of segment files, one
//!   CRC-framed record per revision holding each changed key's new value (`log`), and
//!   checkpoints of every key-value at one revision (`checkpoint`), as etcd's WAL and snapshots.
//!   A call to [`Store::txn`] returns only after its record is appended and `fdatasync`ed, so an
//!   acknowledged write survives `kill -9` and power loss. With [`StoreOptions::fsync`] off it
//!   returns once the record is written: `kill -9` still loses nothing acknowledged, power loss
//!   may (etcd's `--unsafe-no-fsync`). A start reads the newest checkpoint and replays the log
//!   after it. Stores of the earlier format (one redb file) are imported when opened with
//!   [`StoreOptions::import_from`].
//! - **Group commit.** One writer thread drains every pending transaction, checks their
//!   conditions in order, appends them all with one write and one `fdatasync`, applies them to
//!   memory, publishes the events and only then acknowledges each caller. Throughput therefore
//!   grows with concurrency instead of being capped at one fsync per write.
//! - **Checkpoints** are written by a background thread from an O(1) copy of the map, once the
//!   log has grown by about a checkpoint's size; they delete the log segments they cover.
//! - **Reads** are served from memory: the state is a persistent ordered map, so a
//!   [`Snapshot`] is an O(1) clone that stays consistent for as long as it is held.
//! - **Watch** is served from an in-memory window over the log (bounded by revisions and
//!   bytes), rebuilt at start-up so a watcher can resume from a revision older than a restart.
//!   Older revisions are compacted; watching from one yields [`WatchError::Compacted`].

mod checkpoint;
mod codec;
mod legacy;
mod log;
mod watch;
mod window;
mod writer;

use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use imbl::OrdMap;
use parking_lot::{Mutex, RwLock};

pub use watch::{WatchBatch, Watcher};

use window::Window;

/// One stored key with its value and revisions.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The opaque value.
    pub value: Vec<u8>,
    /// Revision at which the key was (last) created.
    pub create_revision: u64,
    /// Revision of the last change to the key.
    pub mod_revision: u64,
}

impl fmt::Debug for KeyValue {
    // Values can be Secrets: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyValue")
            .field("key", &self.key)
            .field("value_len", &self.value.len())
            .field("create_revision", &self.create_revision)
            .field("mod_revision", &self.mod_revision)
            .finish()
    }
}

/// What a [`Condition`] requires of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// The key must not exist.
    Absent,
    /// The key must exist.
    Present,
    /// The key must exist with exactly this mod revision.
    ModRevision(u64),
}

/// A precondition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Key the condition is about.
    pub key: String,
    /// What the key must satisfy.
    pub compare: Compare,
}

/// A write inside a transaction.
#[derive(Clone, PartialEq, Eq)]
pub enum Op {
    /// Create or replace a key.
    Put {
        /// Key to write.
        key: String,
        /// New value.
        value: Vec<u8>,
    },
    /// Remove a key (no event if it does not exist).
    Delete {
        /// Key to remove.
        key: String,
    },
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Put { key, value } => write!(f, "Put({key}, {} bytes)", value.len()),
            Op::Delete { key } => write!(f, "Delete({key})"),
        }
    }
}

/// An all-or-nothing transaction: if every condition holds, every op is applied at one new
/// revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    /// Preconditions, checked in order.
    pub conditions: Vec<Condition>,
    /// Writes, applied in order.
    pub ops: Vec<Op>,
}

impl Txn {
    /// An empty transaction.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a condition.
    pub fn when(mut self, key: impl Into<String>, compare: Compare) -> Self {
        self.conditions.push(Condition {
            key: key.into(),
            compare,
        });
        self
    }

    /// Adds a put.
    pub fn put(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.ops.push(Op::Put {
            key: key.into(),
            value: value.into(),
        });
        self
    }

    /// Adds a delete.
    pub fn delete(mut self, key: impl Into<String>) -> Self {
        self.ops.push(Op::Delete { key: key.into() });
        self
    }
}

/// Result of a transaction whose write reached the disk (or that failed a condition).
#[derive(Clone, Debug)]
pub enum TxnOutcome {
    /// Every condition held; the ops were applied.
    Committed {
        /// The revision of this transaction (the current revision if it changed nothing).
        revision: u64,
        /// Per op: for a put, the new key-value; for a delete, the removed one (if any).
        results: Vec<Option<Arc<KeyValue>>>,
    },
    /// A condition did not hold; nothing was written.
    ConditionFailed {
        /// Index of the first failing condition.
        index: usize,
        /// The key's current state.
        current: Option<Arc<KeyValue>>,
    },
}

/// Kind of change an [`Event`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A key was created or replaced.
    Put,
    /// A key was removed.
    Delete,
}

/// One change to one key at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Revision of the transaction that made the change.
    pub revision: u64,
    /// Put or delete.
    pub kind: EventKind,
    /// The key.
    pub key: String,
    /// The new key-value (puts only).
    pub value: Option<Arc<KeyValue>>,
    /// The key-value before the change (deletes always; puts when the key existed).
    pub prev: Option<Arc<KeyValue>>,
}

impl Event {
    /// Approximate memory held by this event, for the window's byte budget.
    pub(crate) fn weight(&self) -> usize {
        let value =
            |kv: &Option<Arc<KeyValue>>| kv.as_ref().map_or(0, |kv| kv.value.len() + kv.key.len() + 48);
        96 + self.key.len() + value(&self.value) + value(&self.prev)
    }
}

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be read or written.
    #[error("storage error: {0}")]
    Storage(String),
    /// The database contains bytes this version cannot decode.
    #[error("corrupt store: {0}; restore the data directory from a backup or start with an empty one")]
    Corrupt(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

/// Errors of a watch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The requested revision is older than the window: events were compacted away.
    #[error("too old resource version: {requested} ({compacted})")]
    Compacted {
        /// The revision the watcher asked to continue after.
        requested: u64,
        /// The newest compacted revision; watch from it or later (or re-list).
        compacted: u64,
    },
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

/// Tuning of a store.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Revisions kept in the watch window.
    pub window_revisions: usize,
    /// Approximate bytes of event data kept in the watch window.
    pub window_bytes: usize,
    /// Most transactions written in one group commit.
    pub max_batch: usize,
    /// Size at which a log segment is full and the next one starts.
    pub segment_bytes: u64,
    /// Least growth of the log, in bytes, before a checkpoint is taken; past that, a checkpoint
    /// is taken whenever the log has grown by the newest checkpoint's size.
    pub checkpoint_bytes: u64,
    /// A store file of the format before the write-ahead log (one redb file, which versions
    /// before it kept at `<data-dir>/store.redb`): when the store directory does not exist yet,
    /// its state, revision and watch window are imported into it, and the file is renamed to
    /// `<file>.imported`.
    pub import_from: Option<PathBuf>,
    /// Whether a commit waits for `fdatasync` (the default). Off, a commit is written to the log
    /// (the kernel holds it, so an acknowledged write survives the process's `kill -9`) but not
    /// synced: a crash of the machine may lose the newest acknowledged writes. For stores whose
    /// loss costs nothing, such as the simulated member clusters of a development installation
    /// (etcd's `--unsafe-no-fsync`). Segment files, their directory entries and checkpoints are
    /// synced either way, so what a crash leaves is still a log that replays.
    pub fsync: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            window_revisions: 100_000,
            window_bytes: 128 << 20,
            max_batch: 4096,
            segment_bytes: 64 << 20,
            checkpoint_bytes: 64 << 20,
            import_from: None,
            fsync: true,
        }
    }
}

/// Counters describing a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreStats {
    /// Current revision.
    pub revision: u64,
    /// Newest compacted revision.
    pub compacted: u64,
    /// Number of live keys.
    pub keys: usize,
    /// Events in the watch window.
    pub window_events: usize,
    /// Approximate bytes in the watch window.
    pub window_bytes: usize,
    /// Group commits that waited for `fdatasync` since the store was opened (none when
    /// [`StoreOptions::fsync`] is off).
    pub synced_commits: u64,
}

pub(crate) struct State {
    pub(crate) map: OrdMap<String, Arc<KeyValue>>,
    pub(crate) revision: u64,
    pub(crate) window: Window,
}

pub(crate) struct Shared {
    pub(crate) state: RwLock<State>,
    pub(crate) revision_tx: tokio::sync::watch::Sender<u64>,
    pub(crate) closed: std::sync::atomic::AtomicBool,
    /// [`StoreStats::synced_commits`], kept by the writer thread.
    pub(crate) synced_commits: std::sync::atomic::AtomicU64,
}

/// Handle to an open store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
    writer: Arc<writer::WriterHandle>,
    closed: Arc<Mutex<bool>>,
}

impl Store {
    /// Opens (or creates) the store in the directory `dir`, loading its newest checkpoint and
    /// replaying the log after it. Fails if another process has it open.
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let (opened, state) = writer::load(dir.as_ref(), &options)?;
        let revision = state.revision;
        let (revision_tx, _) = tokio::sync::watch::channel(revision);
        let shared = Arc::new(Shared {
            state: RwLock::new(state),
            revision_tx,
            closed: std::sync::atomic::AtomicBool::new(false),
            synced_commits: std::sync::atomic::AtomicU64::new(0),
        });
        let writer = writer::spawn(opened, shared.clone(), options)?;
        Ok(Store {
            shared,
            writer: Arc::new(writer),
            closed: Arc::new(Mutex::new(false)),
        })
    }

    /// Commits a transaction durably; returns once it is on disk and visible to readers.
    pub async fn txn(&self, txn: Txn) -> Result<TxnOutcome, StoreError> {
        let reply = self.writer.submit(txn)?;
        reply.await.map_err(|_| StoreError::Closed)?
    }

    /// Blocking variant of [`Store::txn`] for non-async callers.
    pub fn txn_blocking(&self, txn: Txn) -> Result<TxnOutcome, StoreError> {
        let reply = self.writer.submit(txn)?;
        reply.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// A consistent view of every key at the current revision.
    pub fn snapshot(&self) -> Snapshot {
        let state = self.shared.state.read();
        Snapshot {
            map: state.map.clone(),
            revision: state.revision,
        }
    }

    /// A consistent view at an earlier `revision`, rebuilt by undoing the window's events
    /// (fails with [`WatchError::Compacted`] if they are gone, or if `revision` is in the
    /// future).
    pub fn snapshot_at(&self, revision: u64) -> Result<Snapshot, WatchError> {
        let state = self.shared.state.read();
        if revision < state.window.compacted || revision > state.revision {
            return Err(WatchError::Compacted {
                requested: revision,
                compacted: state.window.compacted,
            });
        }
        let mut map = state.map.clone();
        let events = state.window.events_after(revision, "");
        drop(state);
        undo(&mut map, &events);
        Ok(Snapshot { map, revision })
    }

    /// The current value of one key.
    pub fn get(&self, key: &str) -> Option<Arc<KeyValue>> {
        self.shared.state.read().map.get(key).cloned()
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        self.shared.state.read().revision
    }

    /// The newest compacted revision: watches must start at or after it.
    pub fn compacted_revision(&self) -> u64 {
        self.shared.state.read().window.compacted
    }

    /// Counters for logs and benchmarks.
    pub fn stats(&self) -> StoreStats {
        let state = self.shared.state.read();
        StoreStats {
            revision: state.revision,
            compacted: state.window.compacted,
            keys: state.map.len(),
            window_events: state.window.len(),
            window_bytes: state.window.bytes(),
            synced_commits: self
                .shared
                .synced_commits
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Watches every key starting with `prefix`, delivering each event with a revision greater
    /// than `after_revision` exactly once, in order.
    pub fn watch(&self, prefix: impl Into<String>, after_revision: u64) -> Result<Watcher, WatchError> {
        let compacted = self.compacted_revision();
        if after_revision < compacted {
            return Err(WatchError::Compacted {
                requested: after_revision,
                compacted,
            });
        }
        Ok(Watcher::new(self.shared.clone(), prefix.into(), after_revision))
    }

    /// Stops the writer (once a checkpoint being written is done) and closes the log; later
    /// writes fail with [`StoreError::Closed`] and watchers end with [`WatchError::Closed`].
    pub fn close(&self) {
        let mut closed = self.closed.lock();
        if !*closed {
            *closed = true;
            self.writer.close();
        }
    }
}

/// Takes `events` (in revision order, the newest ones of `map`) back out of `map`: newest first,
/// each key returns to its state before the event.
pub(crate) fn undo(map: &mut OrdMap<String, Arc<KeyValue>>, events: &[Arc<Event>]) {
    for event in events.iter().rev() {
        match &event.prev {
            Some(prev) => {
                map.insert(event.key.clone(), prev.clone());
            }
            None => {
                map.remove(&event.key);
            }
        }
    }
}

/// A consistent, immutable view of the store at one revision.
#[derive(Clone)]
pub struct Snapshot {
    map: OrdMap<String, Arc<KeyValue>>,
    revision: u64,
}

impl Snapshot {
    /// The revision this snapshot reflects.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// One key.
    pub fn get(&self, key: &str) -> Option<&Arc<KeyValue>> {
        self.map.get(key)
    }

    /// Keys starting with `prefix`, in key order, strictly after `start_after` if given.
    pub fn range<'a>(
        &'a self,
        prefix: &'a str,
        start_after: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<KeyValue>> + 'a {
        let lower = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        self.map
            .range::<_, str>((lower, Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v)
    }

    /// Number of live keys in the whole store.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests;
