//! Stores of the format before the write-ahead log: one redb file with a `kv` table, a revision
//! log (`history`, or the first format's `log`) and a `meta` table. They are read once, to import
//! them ([`import`]); nothing writes them any more.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use imbl::OrdMap;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::codec::{DecodedEvent, decode_history, decode_kv, decode_log_v1};
use crate::log::{io as file_io, sync_dir};
use crate::window::Window;
use crate::{Event, EventKind, KeyValue, State, StoreError, StoreOptions};

pub(crate) const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
/// The revision log: one record per revision ([`crate::codec::encode_history`]), contiguous from
/// the oldest revision not compacted.
pub(crate) const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");
/// The first format of the revision log ([`decode_log_v1`]), which also held every new value.
pub(crate) const LOG_V1: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(crate) const META_REVISION: &str = "revision";

/// One revision's events as its log record holds them.
type Record = (u64, Vec<DecodedEvent>);
/// One revision's events with their new values, as the window holds them.
type Revision = (u64, Vec<Arc<Event>>);

fn db_io<E: Into<redb::Error>>(context: &str) -> impl Fn(E) -> StoreError + '_ {
    move |e| StoreError::Storage(format!("{context}: {}", e.into()))
}

/// Imports the redb store `file` into the new, not yet existing store directory `dir`: its
/// state, revision and watch window, so that watchers resume across the upgrade. Everything is
/// written into a sibling directory first and renamed to `dir` once durable, so a crash leaves
/// either no store in `dir` (the import runs again) or the whole import.
pub(crate) fn import(file: &Path, dir: &Path, options: &StoreOptions) -> Result<(), StoreError> {
    // The open database locks the file until the import is done: a second process importing
    // the same file at the same time fails to open it instead of sharing the staging directory.
    let (_db, state) = load(file, options)?;
    let staging = dir.with_extension("importing");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(file_io(&staging, "removing the unfinished import"))?;
    }
    std::fs::create_dir_all(&staging).map_err(file_io(&staging, "creating"))?;
    crate::writer::write_initial(&staging, &state, options)?;
    std::fs::rename(&staging, dir).map_err(file_io(dir, "renaming the imported store into"))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    tracing::info!(
        from = %file.display(),
        to = %dir.display(),
        revision = state.revision,
        keys = state.map.len(),
        window_events = state.window.len(),
        "imported the store from its redb file"
    );
    Ok(())
}

/// Reads a redb store: the state, the revision and the window of its revision log, and the open
/// database (which holds the file's lock).
pub(crate) fn load(path: &Path, options: &StoreOptions) -> Result<(Database, State), StoreError> {
    let db = Database::builder()
        .set_cache_size(32 << 20)
        .open(path)
        .map_err(|e| StoreError::Storage(format!("opening {}: {e}", path.display())))?;
    let rtx = db.begin_read().map_err(db_io("beginning the load transaction"))?;
    let mut map: OrdMap<String, Arc<KeyValue>> = OrdMap::new();
    match rtx.open_table(KV) {
        Ok(kv) => {
            for entry in kv.iter().map_err(db_io("reading the kv table"))? {
                let (key, value) = entry.map_err(db_io("reading the kv table"))?;
                let key = key.value().to_owned();
                let decoded = decode_kv(&key, value.value())?;
                map.insert(key, Arc::new(decoded));
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(db_io("opening the kv table")(e)),
    }
    let mut revision = match rtx.open_table(META) {
        Ok(meta) => meta
            .get(META_REVISION)
            .map_err(db_io("reading the revision"))?
            .map(|v| v.value())
            .unwrap_or(0),
        Err(redb::TableError::TableDoesNotExist(_)) => 0,
        Err(e) => return Err(db_io("opening the meta table")(e)),
    };

    let mut records = read_records(&rtx, LOG_V1, decode_log_v1)?;
    records.extend(read_records(&rtx, HISTORY, decode_history)?);
    drop(rtx);
    let records = resolve(&map, records)?;
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
        Err(e) => return Err(db_io("opening the revision log")(e)),
    };
    let mut records = Vec::new();
    for entry in table.iter().map_err(db_io("reading the revision log"))? {
        let (rev, bytes) = entry.map_err(db_io("reading the revision log"))?;
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
