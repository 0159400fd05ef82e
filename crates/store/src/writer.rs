//! The durable side: loading the redb file at start-up and the group-commit writer thread.
//!
//! Exactly one thread mutates the state. It drains every queued transaction, decides each one
//! against a working copy of the map (an O(1) clone), writes all of them in one redb write
//! transaction with immediate durability, and only after the fsync swaps the working copy in,
//! extends the watch window, wakes watchers and acknowledges the callers. A failed disk write
//! acknowledges every caller of the batch with the error and leaves memory untouched.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use imbl::OrdMap;
use parking_lot::Mutex;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::oneshot;

use crate::codec::{DecodedEvent, decode_history, decode_kv, decode_log_v1, encode_history, encode_kv};
use crate::window::Window;
use crate::{
    Compare, Event, EventKind, KeyValue, Op, Shared, State, StoreError, StoreOptions, Txn, TxnOutcome,
};

pub(crate) const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
/// The revision log: one record per revision ([`encode_history`]), contiguous from the oldest
/// revision not compacted.
pub(crate) const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");
/// The first format of the revision log ([`decode_log_v1`]), which also held every new value.
/// A store that has it is moved to [`HISTORY`] when it is opened.
pub(crate) const LOG_V1: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(crate) const META_REVISION: &str = "revision";

/// One revision's events, as the window holds them.
type Revision = (u64, Vec<Arc<Event>>);
/// One revision's events as its log record holds them.
type Record = (u64, Vec<DecodedEvent>);

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

fn io<E: Into<redb::Error>>(context: &str) -> impl Fn(E) -> StoreError + '_ {
    move |e| StoreError::Storage(format!("{context}: {}", e.into()))
}

/// Opens the database and rebuilds the in-memory state (map, revision, window) from it.
pub(crate) fn load(path: &Path, options: &StoreOptions) -> Result<(Database, State), StoreError> {
    let db = Database::builder()
        .set_cache_size(options.cache_bytes)
        .create(path)
        .map_err(|e| StoreError::Storage(format!("opening {}: {e}", path.display())))?;
    {
        // Make sure the tables exist so a fresh file reads like an empty store.
        let wtx = db
            .begin_write()
            .map_err(io("beginning the initial transaction"))?;
        wtx.open_table(KV).map_err(io("creating the kv table"))?;
        wtx.open_table(HISTORY)
            .map_err(io("creating the history table"))?;
        wtx.open_table(META).map_err(io("creating the meta table"))?;
        wtx.commit().map_err(io("committing the initial transaction"))?;
    }
    let rtx = db.begin_read().map_err(io("beginning the load transaction"))?;
    let kv = rtx.open_table(KV).map_err(io("opening the kv table"))?;
    let mut map: OrdMap<String, Arc<KeyValue>> = OrdMap::new();
    for entry in kv.iter().map_err(io("reading the kv table"))? {
        let (key, value) = entry.map_err(io("reading the kv table"))?;
        let key = key.value().to_owned();
        let decoded = decode_kv(&key, value.value())?;
        map.insert(key, Arc::new(decoded));
    }
    let meta = rtx.open_table(META).map_err(io("opening the meta table"))?;
    let mut revision = meta
        .get(META_REVISION)
        .map_err(io("reading the revision"))?
        .map(|v| v.value())
        .unwrap_or(0);

    let mut records = read_records(&rtx, LOG_V1, decode_log_v1)?;
    let first_format = records.len();
    records.extend(read_records(&rtx, HISTORY, decode_history)?);
    drop((kv, meta, rtx));
    let records = resolve(&map, records)?;
    if first_format > 0 {
        migrate(&db, &records[..first_format])?;
    }
    if let Some((last, _)) = records.last() {
        revision = revision.max(*last);
    }
    let first_logged = records.first().map(|(rev, _)| *rev);
    // Revisions are contiguous in the log; anything before its first entry is compacted.
    let compacted = first_logged.map_or(revision, |first| first - 1);
    let mut window = Window::new(compacted, options.window_revisions, options.window_bytes);
    for (_, events) in records {
        window.push_revision(events);
    }
    window.trim();
    Ok((
        db,
        State {
            map,
            revision,
            window,
        },
    ))
}

/// The records of one log table in revision order, decoded by `decode`; none if the table does
/// not exist.
fn read_records(
    rtx: &redb::ReadTransaction,
    table: TableDefinition<u64, &[u8]>,
    decode: fn(u64, &[u8]) -> Result<Vec<DecodedEvent>, StoreError>,
) -> Result<Vec<Record>, StoreError> {
    let table = match rtx.open_table(table) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(io("opening the revision log")(e)),
    };
    let mut records = Vec::new();
    for entry in table.iter().map_err(io("reading the revision log"))? {
        let (rev, bytes) = entry.map_err(io("reading the revision log"))?;
        records.push((rev.value(), decode(rev.value(), bytes.value())?));
    }
    Ok(records)
}

/// The events of `records` (oldest first, contiguous) with their new values, which the records do
/// not hold: a key's state after a revision is its `prev` in the next record that touches it, or
/// its value in `map` (the `kv` table) if none does. Walking back from the present finds each
/// one; a value is one `Arc` shared by the event that wrote it, the next event's `prev` and the
/// live map, as in memory before the restart.
fn resolve(map: &OrdMap<String, Arc<KeyValue>>, records: Vec<Record>) -> Result<Vec<Revision>, StoreError> {
    // Per key touched so far: its state just after the revision being read.
    let mut after: HashMap<String, Option<Arc<KeyValue>>> = HashMap::new();
    let mut resolved = Vec::with_capacity(records.len());
    for (revision, events) in records.into_iter().rev() {
        let mut built = Vec::with_capacity(events.len());
        for event in events {
            let state = match after.remove(&event.key) {
                Some(state) => state,
                None => map.get(&event.key).cloned(),
            };
            let value = match (event.kind, state) {
                (EventKind::Put, Some(kv)) if kv.mod_revision == revision => Some(kv),
                (EventKind::Delete, None) => None,
                (kind, state) => {
                    return Err(StoreError::Corrupt(format!(
                        "revision {revision}: the log records a {kind:?} of {:?}, but the next state \
                         of that key is {}",
                        event.key,
                        state.map_or("absent".to_owned(), |kv| format!("revision {}", kv.mod_revision)),
                    )));
                }
            };
            let prev = event.prev.map(Arc::new);
            after.insert(event.key.clone(), prev.clone());
            built.push(Arc::new(Event {
                revision,
                kind: event.kind,
                key: event.key,
                value,
                prev,
            }));
        }
        resolved.push((revision, built));
    }
    resolved.reverse();
    Ok(resolved)
}

/// Moves a store's first-format log (`records`, resolved) to the history table, in one write
/// transaction: a crash leaves either format whole.
fn migrate(db: &Database, records: &[Revision]) -> Result<(), StoreError> {
    let wtx = db
        .begin_write()
        .map_err(io("beginning the move of the revision log"))?;
    {
        let mut history = wtx.open_table(HISTORY).map_err(io("opening the history table"))?;
        for (rev, events) in records {
            history
                .insert(*rev, encode_history(events).as_slice())
                .map_err(io("writing the history table"))?;
        }
    }
    wtx.delete_table(LOG_V1)
        .map_err(io("deleting the first-format log table"))?;
    wtx.commit()
        .map_err(io("committing the move of the revision log"))?;
    tracing::info!(
        revisions = records.len(),
        "moved the store's revision log to the history table"
    );
    Ok(())
}

/// Starts the writer thread.
pub(crate) fn spawn(
    db: Database,
    shared: Arc<Shared>,
    options: StoreOptions,
) -> Result<WriterHandle, StoreError> {
    let (tx, rx) = mpsc::channel();
    let disk_compacted = shared.state.read().window.compacted;
    let thread = std::thread::Builder::new()
        .name("flotilla-store-writer".into())
        .spawn(move || {
            let mut writer = Writer {
                db,
                shared,
                max_batch: options.max_batch.max(1),
                disk_compacted,
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
    db: Database,
    shared: Arc<Shared>,
    max_batch: usize,
    /// Log entries `<=` this are already deleted from disk.
    disk_compacted: u64,
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
        }
        // Fail whatever is still queued instead of leaving callers hanging.
        while let Ok(msg) = rx.try_recv() {
            if let Msg::Txn(_, reply) = msg {
                let _ = reply.send(Err(StoreError::Closed));
            }
        }
        self.shared
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.revision_tx.send_modify(|_| {});
        tracing::debug!("store writer stopped");
    }

    fn commit_batch(&mut self, batch: Vec<(Txn, Reply)>) {
        let (mut map, base_revision, compacted) = {
            let state = self.shared.state.read();
            (state.map.clone(), state.revision, state.window.compacted)
        };
        let mut revision = base_revision;
        let mut decided = Vec::with_capacity(batch.len());
        let mut revisions: Vec<Revision> = Vec::new();
        let mut touched: BTreeMap<String, Option<Arc<KeyValue>>> = BTreeMap::new();

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
                        touched.insert(key.clone(), Some(kv.clone()));
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
                            touched.insert(key.clone(), None);
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
            && let Err(err) = self.write(&touched, &revisions, revision, compacted)
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

    fn write(
        &mut self,
        touched: &BTreeMap<String, Option<Arc<KeyValue>>>,
        revisions: &[Revision],
        revision: u64,
        compacted: u64,
    ) -> Result<(), StoreError> {
        let mut wtx = self
            .db
            .begin_write()
            .map_err(io("beginning a write transaction"))?;
        wtx.set_durability(Durability::Immediate)
            .map_err(|e| StoreError::Storage(format!("setting durability: {e}")))?;
        {
            let mut kv = wtx.open_table(KV).map_err(io("opening the kv table"))?;
            for (key, value) in touched {
                match value {
                    Some(v) => {
                        kv.insert(key.as_str(), encode_kv(v).as_slice())
                            .map_err(io("writing the kv table"))?;
                    }
                    None => {
                        kv.remove(key.as_str()).map_err(io("writing the kv table"))?;
                    }
                }
            }
            let mut history = wtx.open_table(HISTORY).map_err(io("opening the history table"))?;
            for (rev, events) in revisions {
                history
                    .insert(*rev, encode_history(events).as_slice())
                    .map_err(io("writing the history table"))?;
            }
            if compacted > self.disk_compacted {
                history
                    .retain_in(self.disk_compacted..=compacted, |_, _| false)
                    .map_err(io("compacting the history table"))?;
            }
            let mut meta = wtx.open_table(META).map_err(io("opening the meta table"))?;
            meta.insert(META_REVISION, revision)
                .map_err(io("writing the revision"))?;
        }
        wtx.commit().map_err(io("committing"))?;
        self.disk_compacted = self.disk_compacted.max(compacted);
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
