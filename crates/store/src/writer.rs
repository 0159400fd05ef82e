//! The durable side: opening the store directory at start-up (importing a redb store, reading
//! the newest checkpoint, replaying the log after it) and the group-commit writer thread.
//!
//! Exactly one thread mutates the state. It drains every queued transaction, decides each one
//! against a working copy of the map (an O(1) clone), appends all of them to the log with one
//! `pwrite` and one `fdatasync`, and only then swaps the working copy in, extends the watch
//! window, wakes watchers and acknowledges the callers. A failed disk write acknowledges every
//! caller of the batch with the error and leaves memory untouched. Once the log has grown by
//! about a checkpoint's size, the thread hands an O(1) copy of the map to a background thread
//! that writes the next checkpoint and deletes the log it covers.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use imbl::OrdMap;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::codec::{Logged, put_logged};
use crate::log::{self, Log, io};
use crate::window::Window;
use crate::{
    Compare, Event, EventKind, KeyValue, Op, Shared, State, StoreError, StoreOptions, Txn, TxnOutcome,
    checkpoint, legacy, undo,
};

/// One revision's events, as the window holds them.
type Revision = (u64, Vec<Arc<Event>>);

type Reply = oneshot::Sender<Result<TxnOutcome, StoreError>>;

enum Msg {
    Txn(Txn, Reply),
    Close,
}

/// Owner of the writer thread's queue and join handle.
pub(crate) struct WriterHandle {
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl WriterHandle {
    pub(crate) fn submit(
        &self,
        txn: Txn,
    ) -> Result<oneshot::Receiver<Result<TxnOutcome, StoreError>>, StoreError> {
        let (reply, rx) = oneshot::channel();
        let guard = self.tx.lock();
        let sender = guard.as_ref().ok_or(StoreError::Closed)?;
        sender
            .send(Msg::Txn(txn, reply))
            .map_err(|_| StoreError::Closed)?;
        Ok(rx)
    }

    pub(crate) fn close(&self) {
        if let Some(sender) = self.tx.lock().take() {
            let _ = sender.send(Msg::Close);
        }
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for WriterHandle {
    fn drop(&mut self) {
        self.close();
    }
}

/// The open store directory, handed from [`load`] to the writer thread.
pub(crate) struct Opened {
    dir: PathBuf,
    /// Held (and locked) for as long as the store is open.
    lock: File,
    log: Log,
    checkpoint_revision: u64,
    /// The newest checkpoint's size.
    checkpoint_bytes: u64,
    /// Log bytes after the newest checkpoint.
    replayed: u64,
}

/// Opens the store directory `dir` (creating it, or importing `options.import_from` into it) and
/// rebuilds the in-memory state (map, revision, window) from its checkpoint and log.
pub(crate) fn load(dir: &Path, options: &StoreOptions) -> Result<(Opened, State), StoreError> {
    let legacy_file = options.import_from.as_deref().filter(|f| f.is_file());
    if let Some(file) = legacy_file
        && !dir.exists()
    {
        legacy::import(file, dir, options)?;
    }
    std::fs::create_dir_all(dir).map_err(io(dir, "creating"))?;
    let lock_path = dir.join("LOCK");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path, "opening"))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(|e| {
        StoreError::Storage(format!(
            "the store in {} is open in another process ({e}): stop the flotilla-apiserver that \
             uses this --data-dir first",
            dir.display()
        ))
    })?;
    if let Some(file) = legacy_file {
        // Imported (now, or by an earlier start that stopped before this rename).
        let mut done = file.as_os_str().to_owned();
        done.push(".imported");
        std::fs::rename(file, &done).map_err(io(file, "renaming the imported store file"))?;
        tracing::info!(
            file = %Path::new(&done).display(),
            "the redb store file was imported and is no longer read; it can be deleted"
        );
    }

    let checkpoint::Checkpoint {
        revision: checkpoint_revision,
        mut map,
        bytes: checkpoint_bytes,
    } = checkpoint::read_newest(dir)?.unwrap_or_default();
    let mut window = Window::new(
        checkpoint_revision,
        options.window_revisions,
        options.window_bytes,
    );
    let mut revision = checkpoint_revision;
    let (tail, replayed) = log::replay(dir, checkpoint_revision, |rev, events| {
        let events = apply_logged(&mut map, rev, events)?;
        window.push_revision(events);
        window.trim();
        revision = rev;
        Ok(())
    })?;
    let log = Log::open(dir, tail, revision + 1, options.segment_bytes, options.fsync)?;
    Ok((
        Opened {
            dir: dir.to_owned(),
            lock,
            log,
            checkpoint_revision,
            checkpoint_bytes,
            replayed,
        },
        State {
            map,
            revision,
            window,
        },
    ))
}

/// Applies one replayed log record to `map`; returns its events as the window holds them (each
/// with the key's previous state, found in `map`).
fn apply_logged(
    map: &mut OrdMap<String, Arc<KeyValue>>,
    revision: u64,
    logged: Vec<Logged>,
) -> Result<Vec<Arc<Event>>, StoreError> {
    let mut events = Vec::with_capacity(logged.len());
    for Logged { key, put } in logged {
        let event = match put {
            Some((create_revision, value)) => {
                let kv = Arc::new(KeyValue {
                    key: key.clone(),
                    value,
                    create_revision,
                    mod_revision: revision,
                });
                let prev = map.insert(key.clone(), kv.clone());
                Event {
                    revision,
                    kind: EventKind::Put,
                    key,
                    value: Some(kv),
                    prev,
                }
            }
            None => {
                let Some(prev) = map.remove(&key) else {
                    return Err(StoreError::Corrupt(format!(
                        "revision {revision}: the log deletes {key:?}, which does not exist at that \
                         revision"
                    )));
                };
                Event {
                    revision,
                    kind: EventKind::Delete,
                    key,
                    value: None,
                    prev: Some(prev),
                }
            }
        };
        events.push(Arc::new(event));
    }
    Ok(events)
}

/// Writes a new store's first checkpoint and log into the empty directory `dir` from `state` (an
/// imported store): the checkpoint at the window's oldest revision, then the window's revisions
/// in the log, so that the window is rebuilt at every start.
pub(crate) fn write_initial(dir: &Path, state: &State, options: &StoreOptions) -> Result<(), StoreError> {
    let at = state.window.compacted;
    let events = state.window.events_after(at, "");
    let mut map = state.map.clone();
    undo(&mut map, &events);
    checkpoint::write(dir, at, &map)?;
    let mut log = Log::open(dir, None, at + 1, options.segment_bytes, options.fsync)?;
    let mut records = Vec::new();
    for group in events.chunk_by(|a, b| a.revision == b.revision) {
        put_logged(&mut records, group[0].revision, group);
    }
    if !records.is_empty() {
        log.append(at + 1, &records)?;
    }
    Ok(())
}

/// Starts the writer thread.
pub(crate) fn spawn(
    opened: Opened,
    shared: Arc<Shared>,
    options: StoreOptions,
) -> Result<WriterHandle, StoreError> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("flotilla-store-writer".into())
        .spawn(move || {
            let checkpoints = Checkpoints {
                dir: opened.dir.clone(),
                revision: opened.checkpoint_revision,
                min_bytes: options.checkpoint_bytes,
                threshold: opened.checkpoint_bytes.max(options.checkpoint_bytes),
                since: opened.replayed,
                running: None,
            };
            let mut writer = Writer {
                log: opened.log,
                _lock: opened.lock,
                shared,
                max_batch: options.max_batch.max(1),
                records: Vec::new(),
                checkpoints,
            };
            writer.run(rx);
        })
        .map_err(|e| StoreError::Storage(format!("starting the writer thread: {e}")))?;
    Ok(WriterHandle {
        tx: Mutex::new(Some(tx)),
        thread: Mutex::new(Some(thread)),
    })
}

struct Writer {
    log: Log,
    _lock: File,
    shared: Arc<Shared>,
    max_batch: usize,
    /// The records of the batch being written (kept to reuse its allocation).
    records: Vec<u8>,
    checkpoints: Checkpoints,
}

/// A checkpoint written: its revision, its size in bytes and how long it took.
type Written = (u64, u64, Duration);

/// When to take the next checkpoint, and the one being written.
struct Checkpoints {
    dir: PathBuf,
    /// Revision of the newest checkpoint written.
    revision: u64,
    min_bytes: u64,
    /// Log bytes after which the next checkpoint is taken: the newest checkpoint's size, at
    /// least `min_bytes`, so that the log never holds much more than the state it rebuilds.
    threshold: u64,
    /// Log bytes appended since the newest checkpoint was taken.
    since: u64,
    /// The background thread writing a checkpoint.
    running: Option<JoinHandle<Result<Written, StoreError>>>,
}

impl Checkpoints {
    /// Collects a finished checkpoint; with `wait`, waits for a running one.
    fn collect(&mut self, wait: bool) {
        if !wait && !self.running.as_ref().is_some_and(|t| t.is_finished()) {
            return;
        }
        let Some(thread) = self.running.take() else {
            return;
        };
        match thread.join() {
            Ok(Ok((revision, bytes, took))) => {
                self.revision = revision;
                self.threshold = bytes.max(self.min_bytes);
                tracing::info!(
                    revision,
                    bytes,
                    seconds = took.as_secs_f64(),
                    "store checkpoint written; the log before it is deleted"
                );
            }
            Ok(Err(err)) => tracing::warn!(
                error = %err,
                "writing a store checkpoint failed; the log still holds every revision, and the \
                 next checkpoint tries again"
            ),
            Err(_) => tracing::error!("the store checkpoint thread panicked"),
        }
    }

    /// Starts a checkpoint at the window's oldest revision once the log has grown enough and
    /// the window has moved past the newest checkpoint.
    fn maybe_start(&mut self, shared: &Shared) {
        self.collect(false);
        if self.running.is_some() || self.since < self.threshold {
            return;
        }
        let (mut map, events, at) = {
            let state = shared.state.read();
            let at = state.window.compacted;
            if at <= self.revision {
                return;
            }
            (state.map.clone(), state.window.events_after(at, ""), at)
        };
        self.since = 0;
        let dir = self.dir.clone();
        let started = std::thread::Builder::new()
            .name("flotilla-store-checkpoint".into())
            .spawn(move || {
                let started = Instant::now();
                undo(&mut map, &events);
                drop(events);
                let bytes = checkpoint::write(&dir, at, &map)?;
                checkpoint::prune(&dir, at)?;
                Ok((at, bytes, started.elapsed()))
            });
        match started {
            Ok(thread) => self.running = Some(thread),
            Err(err) => tracing::warn!(error = %err, "starting the store checkpoint thread failed"),
        }
    }
}

struct Decided {
    reply: Reply,
    outcome: TxnOutcome,
}

impl Writer {
    fn run(&mut self, rx: mpsc::Receiver<Msg>) {
        let mut closing = false;
        while !closing {
            let mut batch = Vec::new();
            match rx.recv() {
                Ok(Msg::Txn(txn, reply)) => batch.push((txn, reply)),
                Ok(Msg::Close) | Err(_) => break,
            }
            while batch.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(Msg::Txn(txn, reply)) => batch.push((txn, reply)),
                    Ok(Msg::Close) => {
                        closing = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            self.commit_batch(batch);
            self.checkpoints.maybe_start(&self.shared);
        }
        // Fail whatever is still queued instead of leaving callers hanging.
        while let Ok(msg) = rx.try_recv() {
            if let Msg::Txn(_, reply) = msg {
                let _ = reply.send(Err(StoreError::Closed));
            }
        }
        self.checkpoints.collect(true);
        self.shared
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.revision_tx.send_modify(|_| {});
        tracing::debug!("store writer stopped");
    }

    fn commit_batch(&mut self, batch: Vec<(Txn, Reply)>) {
        let (mut map, base_revision) = {
            let state = self.shared.state.read();
            (state.map.clone(), state.revision)
        };
        let mut revision = base_revision;
        let mut decided = Vec::with_capacity(batch.len());
        let mut revisions: Vec<Revision> = Vec::new();

        for (txn, reply) in batch {
            if let Some(failed) = check_conditions(&map, &txn) {
                decided.push(Decided {
                    reply,
                    outcome: failed,
                });
                continue;
            }
            let next = revision + 1;
            let mut events = Vec::new();
            let mut results = Vec::with_capacity(txn.ops.len());
            for op in txn.ops {
                match op {
                    Op::Put { key, value } => {
                        let prev = map.get(&key).cloned();
                        let kv = Arc::new(KeyValue {
                            key: key.clone(),
                            value,
                            create_revision: prev.as_ref().map_or(next, |p| p.create_revision),
                            mod_revision: next,
                        });
                        map.insert(key.clone(), kv.clone());
                        // Several writes to one key in one transaction make one event whose
                        // `prev` is the state before the transaction.
                        let before = take_event(&mut events, &key).map_or(prev, |e| e.prev.clone());
                        events.push(Arc::new(Event {
                            revision: next,
                            kind: EventKind::Put,
                            key,
                            value: Some(kv.clone()),
                            prev: before,
                        }));
                        results.push(Some(kv));
                    }
                    Op::Delete { key } => {
                        let prev = map.remove(&key);
                        if prev.is_some() {
                            let before =
                                take_event(&mut events, &key).map_or(prev.clone(), |e| e.prev.clone());
                            if let Some(before) = before {
                                events.push(Arc::new(Event {
                                    revision: next,
                                    kind: EventKind::Delete,
                                    key,
                                    value: None,
                                    prev: Some(before),
                                }));
                            }
                        }
                        results.push(prev);
                    }
                }
            }
            if events.is_empty() {
                decided.push(Decided {
                    reply,
                    outcome: TxnOutcome::Committed { revision, results },
                });
            } else {
                revision = next;
                revisions.push((next, events));
                decided.push(Decided {
                    reply,
                    outcome: TxnOutcome::Committed {
                        revision: next,
                        results,
                    },
                });
            }
        }

        if !revisions.is_empty()
            && let Err(err) = self.write(&revisions, base_revision + 1)
        {
            tracing::error!(error = %err, "group commit failed; the batch is rejected");
            for d in decided {
                let _ = d.reply.send(Err(StoreError::Storage(err.to_string())));
            }
            return;
        }

        if !revisions.is_empty() {
            let mut state = self.shared.state.write();
            state.map = map;
            state.revision = revision;
            for (_, events) in revisions {
                state.window.push_revision(events);
            }
            state.window.trim();
            drop(state);
            self.shared.revision_tx.send_replace(revision);
        }
        for d in decided {
            let _ = d.reply.send(Ok(d.outcome));
        }
    }

    /// Appends the batch's revisions (the first of them `first`) to the log, durably.
    fn write(&mut self, revisions: &[Revision], first: u64) -> Result<(), StoreError> {
        self.records.clear();
        for (rev, events) in revisions {
            put_logged(&mut self.records, *rev, events);
        }
        if self.log.append(first, &self.records)? {
            self.shared
                .synced_commits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.checkpoints.since += self.records.len() as u64;
        if self.records.capacity() > 16 << 20 {
            // One very large batch should not pin its buffer for the life of the store.
            self.records = Vec::new();
        }
        Ok(())
    }
}

/// Removes and returns this transaction's earlier event for `key`, if any.
fn take_event(events: &mut Vec<Arc<Event>>, key: &str) -> Option<Arc<Event>> {
    let index = events.iter().position(|e| e.key == key)?;
    Some(events.remove(index))
}

fn check_conditions(map: &OrdMap<String, Arc<KeyValue>>, txn: &Txn) -> Option<TxnOutcome> {
    for (index, condition) in txn.conditions.iter().enumerate() {
        let current = map.get(&condition.key);
        let holds = match condition.compare {
            Compare::Absent => current.is_none(),
            Compare::Present => current.is_some(),
            Compare::ModRevision(rev) => current.is_some_and(|kv| kv.mod_revision == rev),
        };
        if !holds {
            return Some(TxnOutcome::ConditionFailed {
                index,
                current: current.cloned(),
            });
        }
    }
    None
}
