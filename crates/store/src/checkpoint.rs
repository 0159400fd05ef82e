//! Checkpoints: every key-value of the store at one revision, written in the background so that
//! the log before it can be deleted and a restart replays only what came after.
//!
//! A checkpoint is `checkpoint-<revision>.ckpt`: magic, then frames ([`codec::put_frame`]): the
//! first holds the revision and the number of key-values, each next one up to [`BLOCK`] bytes of
//! [`codec::put_entry`] key-values, and a zero length ends them. It is written to a `.tmp` file,
//! synced, renamed into place and its directory synced, so a checkpoint under its final name is
//! always whole; a damaged one is corruption, never skipped.
//!
//! The writer takes a checkpoint at the watch window's oldest revision (the state the window's
//! events are undone to), not at the newest: the log after it then still holds every revision of
//! the window, and a restart rebuilds the window as it was.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use imbl::OrdMap;

use crate::codec::{self, FRAME_HEADER};
use crate::log::{io, segments, sync_dir};
use crate::{KeyValue, StoreError};

/// First bytes of every checkpoint.
const MAGIC: &[u8; 8] = b"FLOCKP01";
/// Bytes of key-values gathered into one frame.
const BLOCK: usize = 1 << 20;

/// The file name of the checkpoint at `revision`.
fn name(revision: u64) -> String {
    format!("checkpoint-{revision:020}.ckpt")
}

/// The checkpoints in `dir` by revision, oldest first.
fn checkpoints(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir, "listing"))? {
        let entry = entry.map_err(io(dir, "listing"))?;
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str() else {
            continue;
        };
        if name.ends_with(".tmp") {
            // A checkpoint that was being written when the process stopped.
            let path = entry.path();
            std::fs::remove_file(&path).map_err(io(&path, "removing the unfinished checkpoint"))?;
            continue;
        }
        if let Some(revision) = name
            .strip_prefix("checkpoint-")
            .and_then(|n| n.strip_suffix(".ckpt"))
            .and_then(|n| n.parse().ok())
        {
            found.push((revision, entry.path()));
        }
    }
    found.sort_by_key(|(revision, _)| *revision);
    Ok(found)
}

/// Writes the checkpoint of `map` at `revision` into `dir`, durably; returns its size in bytes.
pub(crate) fn write(
    dir: &Path,
    revision: u64,
    map: &OrdMap<String, Arc<KeyValue>>,
) -> Result<u64, StoreError> {
    let path = dir.join(name(revision));
    let tmp = path.with_extension("tmp");
    let file = File::create(&tmp).map_err(io(&tmp, "creating"))?;
    let mut out = BufWriter::with_capacity(BLOCK + (64 << 10), file);
    let mut written = 0u64;
    let mut emit = |out: &mut BufWriter<File>, bytes: &[u8]| -> Result<(), StoreError> {
        written += bytes.len() as u64;
        out.write_all(bytes).map_err(io(&tmp, "writing"))
    };
    emit(&mut out, MAGIC)?;
    let mut block = Vec::with_capacity(BLOCK + (64 << 10));
    codec::put_frame(&mut block, |b| {
        b.extend_from_slice(&revision.to_le_bytes());
        b.extend_from_slice(&(map.len() as u64).to_le_bytes());
    });
    let mut values = map.values().peekable();
    while values.peek().is_some() {
        // Key-values go straight into the frame until it holds about a block.
        codec::put_frame(&mut block, |b| {
            for kv in values.by_ref() {
                codec::put_entry(b, kv);
                if b.len() >= BLOCK {
                    break;
                }
            }
        });
        emit(&mut out, &block)?;
        block.clear();
    }
    block.extend_from_slice(&[0; FRAME_HEADER]);
    emit(&mut out, &block)?;
    let file = out
        .into_inner()
        .map_err(|e| io(&tmp, "writing")(e.into_error()))?;
    file.sync_all().map_err(io(&tmp, "syncing"))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io(&path, "renaming the checkpoint into"))?;
    sync_dir(dir)?;
    Ok(written)
}

/// A checkpoint as read back.
#[derive(Default)]
pub(crate) struct Checkpoint {
    /// Its revision.
    pub revision: u64,
    /// Every key-value at that revision.
    pub map: OrdMap<String, Arc<KeyValue>>,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The newest checkpoint in `dir`, or `None` if there is none. Unfinished checkpoints (`.tmp`)
/// are removed.
pub(crate) fn read_newest(dir: &Path) -> Result<Option<Checkpoint>, StoreError> {
    let Some((revision, path)) = checkpoints(dir)?.pop() else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    let corrupt = |what: String| StoreError::Corrupt(format!("checkpoint {shown}: {what}"));
    let file = File::open(&path).map_err(io(&path, "opening"))?;
    let bytes = file.metadata().map_err(io(&path, "reading"))?.len();
    let mut reader = BufReader::with_capacity(BLOCK, file);
    let mut magic = [0u8; 8];
    reader
        .read_exact(&mut magic)
        .map_err(|e| corrupt(format!("reading its header: {e}")))?;
    if &magic != MAGIC {
        return Err(corrupt("it is not a checkpoint of this store".into()));
    }
    let mut frame = Vec::new();
    let header = read_frame(&mut reader, &mut frame).map_err(&corrupt)?;
    let Some(header) = header.filter(|h| h.len() == 16) else {
        return Err(corrupt("its first frame is not a header".into()));
    };
    let (stored_revision, count) = header.split_at(8);
    let stored_revision = u64::from_le_bytes(stored_revision.try_into().unwrap_or_default());
    let count = u64::from_le_bytes(count.try_into().unwrap_or_default());
    if stored_revision != revision {
        return Err(corrupt(format!(
            "it holds revision {stored_revision}, not {revision}"
        )));
    }
    let mut map = OrdMap::new();
    let mut index = 0usize;
    loop {
        index += 1;
        let Some(payload) = read_frame(&mut reader, &mut frame).map_err(&corrupt)? else {
            break;
        };
        for kv in codec::decode_entries(payload, &format!("checkpoint {shown}, frame {index}"))? {
            map.insert(kv.key.clone(), Arc::new(kv));
        }
    }
    if map.len() as u64 != count {
        return Err(corrupt(format!(
            "it holds {} key-values, its header says {count}",
            map.len()
        )));
    }
    Ok(Some(Checkpoint { revision, map, bytes }))
}

/// Reads the next frame into `buf`: its payload, or `None` at the zero length that ends them.
fn read_frame<'a>(reader: &mut impl Read, buf: &'a mut Vec<u8>) -> Result<Option<&'a [u8]>, String> {
    let mut header = [0u8; FRAME_HEADER];
    reader
        .read_exact(&mut header)
        .map_err(|e| format!("it ends inside a frame header ({e})"))?;
    let (len, crc) = codec::frame_header(&header);
    if len == 0 {
        return Ok(None);
    }
    buf.resize(len, 0);
    reader
        .read_exact(buf)
        .map_err(|e| format!("it ends inside a frame of {len} bytes ({e})"))?;
    if crc32fast::hash(buf) != crc {
        return Err(format!("the checksum of a frame of {len} bytes does not match"));
    }
    Ok(Some(buf.as_slice()))
}

/// Deletes what the checkpoint at `revision` makes unnecessary: older checkpoints, and every
/// log segment whose records are all at or before `revision` (the segment after it starts at
/// `revision + 1` or earlier). The newest segment is never deleted.
pub(crate) fn prune(dir: &Path, revision: u64) -> Result<(), StoreError> {
    for (older, path) in checkpoints(dir)? {
        if older < revision {
            std::fs::remove_file(&path).map_err(io(&path, "removing the older checkpoint"))?;
        }
    }
    let segments = segments(dir)?;
    for pair in segments.windows(2) {
        if pair[1].first <= revision + 1 {
            std::fs::remove_file(&pair[0].path).map_err(io(&pair[0].path, "removing the log segment"))?;
        }
    }
    sync_dir(dir)
}
