//! The write-ahead log: segment files of CRC-framed records, one per revision, appended by the
//! writer thread and replayed over the newest checkpoint at start-up.
//!
//! A segment is `wal-<first revision>.log`: a 16-byte header (magic, first revision), then
//! frames ([`codec::put_frame`]) of [`codec::put_logged`] records in revision order, then zeros.
//! The zeros are written ahead of the records, [`ZERO_CHUNK`] at a time, so that a commit only
//! overwrites blocks the file already has: its `fdatasync` then flushes data alone, without a
//! size change for the file system to journal (on this machine's ext4, a 2 KB record costs
//! 15-25% less CPU and latency and 40% fewer bytes at the device than an append; see ADR 0029).
//! A group commit is one `pwrite` and one `fdatasync` (the `pwrite` alone when the store's
//! [`fsync`](crate::StoreOptions::fsync) is off).
//!
//! Only the newest segment is ever written; a segment is full once a batch would take it past
//! `segment_bytes`, and the batch starts the next one (a batch larger than a segment makes a
//! larger segment). Replay stops at the first frame that is not whole in the newest segment (a
//! write cut short by a crash, never acknowledged) and zeroes what follows it; anywhere else a
//! damaged frame is corruption. (Damage to the disk inside the newest segment looks the same as
//! a cut-short write, and the records after it are dropped with it: the CRC tells a torn frame
//! from a whole one, not why it is torn.) Checkpoints delete the segments they cover
//! (`checkpoint::prune`).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::StoreError;
use crate::codec::{self, Frame, Logged};

/// First bytes of every segment.
const MAGIC: &[u8; 8] = b"FLOWAL01";
/// Magic and first revision.
const HEADER: u64 = 16;
/// Zeros written ahead of the records at a time.
pub(crate) const ZERO_CHUNK: u64 = 4 << 20;

/// One segment file of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Revision of its first record (or of the first record it will hold).
    pub first: u64,
    /// The file.
    pub path: PathBuf,
}

/// The file name of the segment whose first record is `first`.
fn segment_name(first: u64) -> String {
    format!("wal-{first:020}.log")
}

/// The log's segments in `dir`, oldest first.
pub(crate) fn segments(dir: &Path) -> Result<Vec<Segment>, StoreError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir, "listing"))? {
        let entry = entry.map_err(io(dir, "listing"))?;
        let name = entry.file_name();
        let Some(first) = name
            .to_str()
            .and_then(|n| n.strip_prefix("wal-"))
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        found.push(Segment {
            first,
            path: entry.path(),
        });
    }
    found.sort_by_key(|s| s.first);
    Ok(found)
}

/// A storage error naming the path and what was being done to it.
pub(crate) fn io<'a>(path: &'a Path, doing: &'a str) -> impl Fn(std::io::Error) -> StoreError + 'a {
    move |e| StoreError::Storage(format!("{doing} {}: {e}", path.display()))
}

/// Makes the directory entries of `dir` (files created, renamed or removed in it) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir, "syncing the directory"))
}

/// Where replay left the newest segment: the writer appends there.
pub(crate) struct Tail {
    segment: Segment,
    /// End of its last whole record.
    end: u64,
    /// Its length: zeros from `end` on (replay zeroes a cut-short write).
    len: u64,
}

/// Replays every record with a revision above `after` (the checkpoint's), oldest first, through
/// `apply`. Records must follow each other by one revision from `after + 1` on. Returns where
/// the newest segment ends (`None` if there is no segment) and the bytes of the records applied.
pub(crate) fn replay(
    dir: &Path,
    after: u64,
    mut apply: impl FnMut(u64, Vec<Logged>) -> Result<(), StoreError>,
) -> Result<(Option<Tail>, u64), StoreError> {
    let mut segments = segments(dir)?;
    // The newest segment's creation may not have finished (a crash before its header was
    // durable): no record was written to it, so it holds nothing acknowledged. Only the newest
    // can be like that: a segment is created only once every older one is complete.
    if let Some(last) = segments.last()
        && !has_header(last)?
    {
        let bytes = std::fs::read(&last.path).map_err(io(&last.path, "reading"))?;
        if bytes.iter().skip(HEADER as usize).any(|b| *b != 0) {
            return Err(StoreError::Corrupt(format!(
                "{}: its header is damaged, and it holds records",
                last.path.display()
            )));
        }
        tracing::warn!(
            segment = %last.path.display(),
            "the log's newest segment was being created when the process stopped; it is removed"
        );
        std::fs::remove_file(&last.path).map_err(io(&last.path, "removing the unfinished segment"))?;
        segments.pop();
    }
    let Some(first) = segments.first() else {
        return Ok((None, 0));
    };
    if first.first > after + 1 {
        return Err(StoreError::Corrupt(format!(
            "the log in {} starts at revision {}, but the checkpoint holds revisions up to {after} \
             only: revisions {} to {} are missing",
            dir.display(),
            first.first,
            after + 1,
            first.first - 1
        )));
    }
    let mut expected = first.first;
    let mut replayed = 0u64;
    let count = segments.len();
    let mut tail = None;
    for (index, segment) in segments.into_iter().enumerate() {
        let newest = index + 1 == count;
        let bytes = std::fs::read(&segment.path).map_err(io(&segment.path, "reading"))?;
        let shown = segment.path.display().to_string();
        if !header_matches(&bytes, segment.first) {
            return Err(StoreError::Corrupt(format!(
                "{shown} is not a segment of this store's log (its header does not match its name)"
            )));
        }
        if segment.first != expected {
            return Err(StoreError::Corrupt(format!(
                "{shown} starts at revision {}, but the segment before it ends at revision {}",
                segment.first,
                expected - 1
            )));
        }
        let mut pos = HEADER as usize;
        loop {
            match codec::next_frame(&bytes, pos) {
                Frame::Whole(payload, next) => {
                    let context = format!("{shown} at byte {pos}");
                    let (revision, events) = codec::decode_logged(payload, &context)?;
                    if revision != expected {
                        return Err(StoreError::Corrupt(format!(
                            "{context}: the record of revision {revision} follows revision {}",
                            expected - 1
                        )));
                    }
                    if revision > after {
                        apply(revision, events)?;
                        replayed += (next - pos) as u64;
                    }
                    expected += 1;
                    pos = next;
                }
                Frame::End => break,
                Frame::Damaged(why) if newest => {
                    tracing::warn!(
                        segment = %shown,
                        byte = pos,
                        why,
                        "the log ends in a write cut short by a crash (never acknowledged); it is dropped"
                    );
                    break;
                }
                Frame::Damaged(why) => {
                    return Err(StoreError::Corrupt(format!(
                        "{shown} at byte {pos}: {why}, and newer segments follow it"
                    )));
                }
            }
        }
        if newest {
            let len = bytes.len() as u64;
            if bytes[pos..].iter().any(|b| *b != 0) {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&segment.path)
                    .map_err(io(&segment.path, "opening"))?;
                write_zeros(&file, pos as u64, len)
                    .map_err(io(&segment.path, "zeroing the cut-short write in"))?;
                file.sync_data().map_err(io(&segment.path, "syncing"))?;
            }
            tail = Some(Tail {
                segment,
                end: pos as u64,
                len,
            });
        }
    }
    if expected <= after {
        return Err(StoreError::Corrupt(format!(
            "the log in {} ends at revision {}, before the checkpoint's revision {after}",
            dir.display(),
            expected - 1
        )));
    }
    Ok((tail, replayed))
}

/// Whether `bytes` begin with the header of the segment whose first revision is `first`.
fn header_matches(bytes: &[u8], first: u64) -> bool {
    bytes.get(..8) == Some(MAGIC.as_slice()) && bytes.get(8..16) == Some(first.to_le_bytes().as_slice())
}

/// Whether the segment's file begins with its whole header.
fn has_header(segment: &Segment) -> Result<bool, StoreError> {
    let file = File::open(&segment.path).map_err(io(&segment.path, "opening"))?;
    let mut header = [0u8; HEADER as usize];
    match file.read_exact_at(&mut header, 0) {
        Ok(()) => Ok(header_matches(&header, segment.first)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(io(&segment.path, "reading")(e)),
    }
}

/// Writes zeros over `[from, to)` of `file`.
fn write_zeros(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    const BLOCK: usize = 1 << 20;
    let zeros = vec![0u8; BLOCK.min((to.saturating_sub(from)) as usize)];
    let mut at = from;
    while at < to {
        let n = (to - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// The open newest segment, appended to by the writer thread.
pub(crate) struct Log {
    dir: PathBuf,
    file: File,
    segment: Segment,
    /// Where the next record goes.
    offset: u64,
    /// The file's length: zeros from `offset` to here.
    zeroed_to: u64,
    segment_bytes: u64,
    /// Whether an append waits for `fdatasync` ([`crate::StoreOptions::fsync`]).
    fsync: bool,
    /// Why an earlier append failed: after a failed write or `fdatasync` the kernel may have
    /// dropped the pages it could not write, so what the file holds is no longer known and no
    /// later write is accepted (as PostgreSQL and etcd do).
    failed: Option<String>,
}

impl Log {
    /// Opens the log for appending where replay left it, or, without a segment, starts it with
    /// one whose first record will be `next_revision`.
    pub(crate) fn open(
        dir: &Path,
        tail: Option<Tail>,
        next_revision: u64,
        segment_bytes: u64,
        fsync: bool,
    ) -> Result<Log, StoreError> {
        let (file, segment, offset, zeroed_to) = match tail {
            Some(tail) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&tail.segment.path)
                    .map_err(io(&tail.segment.path, "opening"))?;
                (file, tail.segment, tail.end, tail.len)
            }
            None => {
                let (file, segment) = create_segment(dir, next_revision)?;
                (file, segment, HEADER, HEADER + ZERO_CHUNK)
            }
        };
        Ok(Log {
            dir: dir.to_owned(),
            file,
            segment,
            offset,
            zeroed_to,
            segment_bytes,
            fsync,
            failed: None,
        })
    }

    /// Appends `records` (whole frames, the first of them revision `first_revision`) and makes
    /// them durable before returning (written, not synced, when `fsync` is off); says whether it
    /// synced them.
    pub(crate) fn append(&mut self, first_revision: u64, records: &[u8]) -> Result<bool, StoreError> {
        if let Some(failed) = &self.failed {
            return Err(StoreError::Storage(format!(
                "an earlier write to the log failed ({failed}); restart flotilla-apiserver to \
                 accept writes again"
            )));
        }
        let appended = self.try_append(first_revision, records);
        if let Err(err) = &appended {
            self.failed = Some(err.to_string());
        }
        appended
    }

    fn try_append(&mut self, first_revision: u64, records: &[u8]) -> Result<bool, StoreError> {
        let len = records.len() as u64;
        if self.offset > HEADER && self.offset + len > self.segment_bytes {
            self.next_segment(first_revision)?;
        }
        let end = self.offset + len;
        let path = &self.segment.path;
        if end > self.zeroed_to {
            let to = end + ZERO_CHUNK;
            write_zeros(&self.file, end.max(self.zeroed_to), to).map_err(io(path, "extending"))?;
            self.zeroed_to = to;
        }
        self.file
            .write_all_at(records, self.offset)
            .map_err(io(path, "writing"))?;
        if self.fsync {
            self.file.sync_data().map_err(io(path, "syncing"))?;
        }
        self.offset = end;
        Ok(self.fsync)
    }

    /// Starts the segment whose first record is `first`, once the current one is durable.
    fn next_segment(&mut self, first: u64) -> Result<(), StoreError> {
        let (file, segment) = create_segment(&self.dir, first)?;
        self.file = file;
        self.segment = segment;
        self.offset = HEADER;
        self.zeroed_to = HEADER + ZERO_CHUNK;
        Ok(())
    }
}

/// Creates a segment with its header and first zeros, durably (directory entry included).
fn create_segment(dir: &Path, first: u64) -> Result<(File, Segment), StoreError> {
    let path = dir.join(segment_name(first));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io(&path, "creating"))?;
    let mut header = Vec::with_capacity(HEADER as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&first.to_le_bytes());
    file.write_all_at(&header, 0).map_err(io(&path, "writing"))?;
    write_zeros(&file, HEADER, HEADER + ZERO_CHUNK).map_err(io(&path, "extending"))?;
    file.sync_data().map_err(io(&path, "syncing"))?;
    sync_dir(dir)?;
    Ok((file, Segment { first, path }))
}
