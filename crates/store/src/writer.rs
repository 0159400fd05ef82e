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

use crate::codec::{decode_events, decode_kv, encode_events, encode_kv};
use crate::window::Window;
use crate::{
    Compare, Event, EventKind, KeyValue, Op, Shared, State, StoreError, StoreOptions, Txn, TxnOutcome,
};

const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const META_REVISION: &str = "revision";

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
        .create(path)
        .map_err(|e| StoreError::Storage(format!("opening {}: {e}", path.display())))?;
    {
        // Make sure the tables exist so a fresh file reads like an empty store.
        let wtx = db
            .begin_write()
            .map_err(io("beginning the initial transaction"))?;
        wtx.open_table(KV).map_err(io("creating the kv table"))?;
        wtx.open_table(LOG).map_err(io("creating the log table"))?;
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

    let log = rtx.open_table(LOG).map_err(io("opening the log table"))?;
    let mut records = Vec::new();
    for entry in log.iter().map_err(io("reading the log table"))? {
        let (rev, bytes) = entry.map_err(io("reading the log table"))?;
        records.push((rev.value(), decode_events(rev.value(), bytes.value())?));
    }
    if let Some((last, _)) = records.last() {
        revision = revision.max(*last);
    }
    let first_logged = records.first().map(|(rev, _)| *rev);
    // Revisions are contiguous in the log; anything before its first entry is compacted.
    let compacted = first_logged.map_or(revision, |first| first - 1);
    let mut window = Window::new(compacted, options.window_revisions, options.window_bytes);
    // Share values between consecutive events of one key and with the live map, so loading a
    // window does not duplicate every object in memory.
    let mut latest: HashMap<String, Arc<KeyValue>> = HashMap::new();
    for (rev, events) in records {
        let mut built = Vec::with_capacity(events.len());
        for event in events {
            let share = |kv: KeyValue, latest: &HashMap<String, Arc<KeyValue>>| -> Arc<KeyValue> {
                if let Some(live) = map.get(&kv.key)
                    && live.mod_revision == kv.mod_revision
                {
                    return live.clone();
                }
                if let Some(previous) = latest.get(&kv.key)
                    && previous.mod_revision == kv.mod_revision
                {
                    return previous.clone();
                }
                Arc::new(kv)
            };
            let prev = event.prev.map(|kv| share(kv, &latest));
            let value = event.value.map(|kv| share(kv, &latest));
            match &value {
                Some(v) => {
                    latest.insert(event.key.clone(), v.clone());
                }
                None => {
                    latest.remove(&event.key);
                }
            }
            built.push(Arc::new(Event {
                revision: rev,
                kind: event.kind,
                key: event.key,
                value,
                prev,
            }));
        }
        window.push_revision(built);
    }
    window.trim();
    drop((kv, meta, log, rtx));
    Ok((
        db,
        State {
            map,
            revision,
            window,
        },
    ))
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
        let mut revisions: Vec<(u64, Vec<Arc<Event>>)> = Vec::new();
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
        revisions: &[(u64, Vec<Arc<Event>>)],
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
            let mut log = wtx.open_table(LOG).map_err(io("opening the log table"))?;
            for (rev, events) in revisions {
                log.insert(*rev, encode_events(events).as_slice())
                    .map_err(io("writing the log table"))?;
            }
            if compacted > self.disk_compacted {
                log.retain_in(self.disk_compacted..=compacted, |_, _| false)
                    .map_err(io("compacting the log table"))?;
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
