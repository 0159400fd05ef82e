//! On-disk encoding: frames, write-ahead log records and checkpoint entries (the current
//! format), and the redb tables' values and history records (the format before it, read only to
//! import such a store).
//!
//! The format is a small length-prefixed binary layout owned by this crate alone; decoding is
//! defensive because the bytes come from disk and a torn or foreign file must surface as
//! [`StoreError::Corrupt`] rather than a panic.

use std::sync::Arc;

use crate::{Event, EventKind, KeyValue, StoreError};

/// Bytes in front of every frame's payload: its length and its CRC-32, both little-endian.
pub(crate) const FRAME_HEADER: usize = 8;

/// Appends one frame to `out`: the payload `write` appends, behind its length and CRC-32. A
/// payload is never empty, so a length of zero (the zeros past a log's last record) ends a
/// sequence of frames.
pub(crate) fn put_frame(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER]);
    write(out);
    let payload = &out[start + FRAME_HEADER..];
    let len = payload.len() as u32;
    let crc = crc32fast::hash(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + FRAME_HEADER].copy_from_slice(&crc.to_le_bytes());
}

/// The frame's length and CRC-32 as its header holds them.
pub(crate) fn frame_header(header: &[u8; FRAME_HEADER]) -> (usize, u32) {
    let [a, b, c, d, e, f, g, h] = *header;
    (
        u32::from_le_bytes([a, b, c, d]) as usize,
        u32::from_le_bytes([e, f, g, h]),
    )
}

/// What [`next_frame`] found at a position.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A whole frame whose CRC matches: its payload, and where the next frame starts.
    Whole(&'a [u8], usize),
    /// The end of the frames: zeros, or no room left for a header.
    End,
    /// Bytes that are not a whole frame: what is wrong with them.
    Damaged(String),
}

/// Reads the frame that starts at `pos` in `bytes`.
pub(crate) fn next_frame(bytes: &[u8], pos: usize) -> Frame<'_> {
    let Some(header) = bytes
        .get(pos..pos + FRAME_HEADER)
        .and_then(|h| <&[u8; FRAME_HEADER]>::try_from(h).ok())
    else {
        return Frame::End;
    };
    let (len, crc) = frame_header(header);
    if len == 0 {
        return Frame::End;
    }
    let start = pos + FRAME_HEADER;
    let Some(payload) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
        return Frame::Damaged(format!(
            "a frame of {len} bytes runs past the end of the file ({} bytes)",
            bytes.len()
        ));
    };
    if crc32fast::hash(payload) != crc {
        return Frame::Damaged(format!("the checksum of a frame of {len} bytes does not match"));
    }
    Frame::Whole(payload, start + len)
}

/// Appends the write-ahead log record of one revision: the revision, then per event its key
/// and, for a put, the new value with its create revision (its mod revision is the record's).
/// A delete is an event without a value. The previous state is not written: replaying the log
/// in order over the checkpoint before it finds it.
pub(crate) fn put_logged(out: &mut Vec<u8>, revision: u64, events: &[Arc<Event>]) {
    put_frame(out, |out| {
        out.extend_from_slice(&revision.to_le_bytes());
        put_u32(out, events.len() as u32);
        for event in events {
            put_bytes(out, event.key.as_bytes());
            match event.value.as_deref() {
                Some(kv) => {
                    out.push(0);
                    out.extend_from_slice(&kv.create_revision.to_le_bytes());
                    put_bytes(out, &kv.value);
                }
                None => out.push(1),
            }
        }
    });
}

/// One event of a log record, as [`put_logged`] wrote it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Logged {
    /// The key.
    pub key: String,
    /// A put's create revision and new value; `None` for a delete.
    pub put: Option<(u64, Vec<u8>)>,
}

/// Decodes the payload of one log record; `context` names the file and position for errors.
pub(crate) fn decode_logged(payload: &[u8], context: &str) -> Result<(u64, Vec<Logged>), StoreError> {
    let mut reader = Reader::new(payload, context);
    let revision = reader.u64()?;
    let count = reader.u32()? as usize;
    let mut events = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let key = reader.string()?;
        let put = match reader.u8()? {
            0 => {
                let create_revision = reader.u64()?;
                Some((create_revision, reader.bytes()?.to_vec()))
            }
            1 => None,
            other => return Err(reader.corrupt(&format!("unknown event kind {other}"))),
        };
        events.push(Logged { key, put });
    }
    if !reader.rest().is_empty() {
        return Err(reader.corrupt("trailing bytes after the last event"));
    }
    Ok((revision, events))
}

/// Appends one key-value of a checkpoint: key, create revision, mod revision, value.
pub(crate) fn put_entry(out: &mut Vec<u8>, kv: &KeyValue) {
    put_bytes(out, kv.key.as_bytes());
    out.extend_from_slice(&kv.create_revision.to_le_bytes());
    out.extend_from_slice(&kv.mod_revision.to_le_bytes());
    put_bytes(out, &kv.value);
}

/// Decodes the key-values of one checkpoint frame written by [`put_entry`].
pub(crate) fn decode_entries(payload: &[u8], context: &str) -> Result<Vec<KeyValue>, StoreError> {
    let mut reader = Reader::new(payload, context);
    let mut entries = Vec::new();
    while reader.pos < payload.len() {
        let key = reader.string()?;
        let create_revision = reader.u64()?;
        let mod_revision = reader.u64()?;
        let value = reader.bytes()?.to_vec();
        entries.push(KeyValue {
            key,
            value,
            create_revision,
            mod_revision,
        });
    }
    Ok(entries)
}

/// Encodes a redb store's materialized value: `create_revision`, `mod_revision`, then the value
/// bytes. Only tests write it now, to check that such stores are imported.
#[cfg(test)]
pub(crate) fn encode_kv(kv: &KeyValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + kv.value.len());
    out.extend_from_slice(&kv.create_revision.to_le_bytes());
    out.extend_from_slice(&kv.mod_revision.to_le_bytes());
    out.extend_from_slice(&kv.value);
    out
}

/// Decodes what [`encode_kv`] wrote for `key`.
pub(crate) fn decode_kv(key: &str, bytes: &[u8]) -> Result<KeyValue, StoreError> {
    let mut reader = Reader::new(bytes, key);
    let create_revision = reader.u64()?;
    let mod_revision = reader.u64()?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: reader.rest().to_vec(),
        create_revision,
        mod_revision,
    })
}

/// Encodes every event of one revision as one history record: per event its kind, its key and
/// the key's state before the revision. The state after it is not written: it is the next
/// record's `prev` of that key, or the `kv` table's value if no later record touches the key
/// (see `legacy::resolve`). Only tests write it now, to check that such stores are imported.
#[cfg(test)]
pub(crate) fn encode_history(events: &[Arc<Event>]) -> Vec<u8> {
    let size = events
        .iter()
        .map(|e| 9 + e.key.len() + e.prev.as_ref().map_or(0, |kv| 20 + kv.value.len()))
        .sum::<usize>();
    let mut out = Vec::with_capacity(4 + size);
    put_u32(&mut out, events.len() as u32);
    for event in events {
        put_kind(&mut out, event.kind);
        put_bytes(&mut out, event.key.as_bytes());
        put_optional_kv(&mut out, event.prev.as_deref());
    }
    out
}

/// Decodes one history record written by [`encode_history`] at `revision`.
pub(crate) fn decode_history(revision: u64, bytes: &[u8]) -> Result<Vec<DecodedEvent>, StoreError> {
    decode_record(revision, bytes, false)
}

/// Decodes one record of the first log format (`log` table, written before the `history`
/// table), which held each event's new value before its previous one. The new value is read
/// past: it is found as `history` records' are, so both formats load alike.
pub(crate) fn decode_log_v1(revision: u64, bytes: &[u8]) -> Result<Vec<DecodedEvent>, StoreError> {
    decode_record(revision, bytes, true)
}

fn decode_record(revision: u64, bytes: &[u8], with_value: bool) -> Result<Vec<DecodedEvent>, StoreError> {
    let context = format!("revision {revision}");
    let mut reader = Reader::new(bytes, &context);
    let count = reader.u32()? as usize;
    let mut events = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let kind = match reader.u8()? {
            0 => EventKind::Put,
            1 => EventKind::Delete,
            other => return Err(reader.corrupt(&format!("unknown event kind {other}"))),
        };
        let key = reader.string()?;
        if with_value {
            reader.optional_kv(&key)?;
        }
        let prev = reader.optional_kv(&key)?;
        events.push(DecodedEvent { kind, key, prev });
    }
    if !reader.rest().is_empty() {
        return Err(reader.corrupt("trailing bytes after the last event"));
    }
    Ok(events)
}

/// Encodes one record of the first log format, as versions before the `history` table wrote it:
/// per event its kind, key, new value and previous value. Only tests write it now, to check that
/// such stores still open.
#[cfg(test)]
pub(crate) fn encode_log_v1(events: &[Arc<Event>]) -> Vec<u8> {
    let mut out = Vec::new();
    put_u32(&mut out, events.len() as u32);
    for event in events {
        put_kind(&mut out, event.kind);
        put_bytes(&mut out, event.key.as_bytes());
        put_optional_kv(&mut out, event.value.as_deref());
        put_optional_kv(&mut out, event.prev.as_deref());
    }
    out
}

/// One event as read back from a record: what the record holds, before its new value is found.
pub(crate) struct DecodedEvent {
    pub kind: EventKind,
    pub key: String,
    pub prev: Option<KeyValue>,
}

#[cfg(test)]
fn put_kind(out: &mut Vec<u8>, kind: EventKind) {
    out.push(match kind {
        EventKind::Put => 0,
        EventKind::Delete => 1,
    });
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
fn put_optional_kv(out: &mut Vec<u8>, kv: Option<&KeyValue>) {
    match kv {
        None => out.push(0),
        Some(kv) => {
            out.push(1);
            out.extend_from_slice(&kv.create_revision.to_le_bytes());
            out.extend_from_slice(&kv.mod_revision.to_le_bytes());
            put_bytes(out, &kv.value);
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    context: &'a str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], context: &'a str) -> Self {
        Self {
            bytes,
            pos: 0,
            context,
        }
    }

    fn corrupt(&self, what: &str) -> StoreError {
        StoreError::Corrupt(format!("{}: {what} at byte {}", self.context, self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.bytes.len());
        match end {
            Some(end) => {
                let slice = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(slice)
            }
            None => Err(self.corrupt(&format!("record truncated (wanted {n} more bytes)"))),
        }
    }

    fn u8(&mut self) -> Result<u8, StoreError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, StoreError> {
        let mut buf = [0u8; 4];
        buf.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(buf))
    }

    fn u64(&mut self) -> Result<u64, StoreError> {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(buf))
    }

    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, StoreError> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.corrupt("key is not UTF-8"))
    }

    fn optional_kv(&mut self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        match self.u8()? {
            0 => Ok(None),
            1 => {
                let create_revision = self.u64()?;
                let mod_revision = self.u64()?;
                let value = self.bytes()?.to_vec();
                Ok(Some(KeyValue {
                    key: key.to_owned(),
                    value,
                    create_revision,
                    mod_revision,
                }))
            }
            other => Err(self.corrupt(&format!("bad presence flag {other}"))),
        }
    }

    fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.pos..];
        self.pos = self.bytes.len();
        rest
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn kv(key: &str, value: &[u8], create: u64, modr: u64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.to_vec(),
            create_revision: create,
            mod_revision: modr,
        }
    }

    #[test]
    fn kv_round_trips() {
        let original = kv("/a/b", b"{\"x\":1}", 3, 9);
        let decoded = decode_kv("/a/b", &encode_kv(&original)).unwrap();
        assert_eq!(decoded, original);
    }

    #[test]
    fn truncated_kv_is_corrupt_not_panic() {
        let err = decode_kv("/k", &[1, 2, 3]).unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt(ref m) if m.contains("/k")),
            "{err}"
        );
    }

    fn sample_events() -> Vec<Arc<Event>> {
        vec![
            Arc::new(Event {
                revision: 7,
                kind: EventKind::Put,
                key: "/a".into(),
                value: Some(Arc::new(kv("/a", b"new", 5, 7))),
                prev: Some(Arc::new(kv("/a", b"old", 5, 6))),
            }),
            Arc::new(Event {
                revision: 7,
                kind: EventKind::Put,
                key: "/c".into(),
                value: Some(Arc::new(kv("/c", b"created", 7, 7))),
                prev: None,
            }),
            Arc::new(Event {
                revision: 7,
                kind: EventKind::Delete,
                key: "/b".into(),
                value: None,
                prev: Some(Arc::new(kv("/b", b"gone", 2, 2))),
            }),
        ]
    }

    fn summary(decoded: &[DecodedEvent]) -> Vec<(EventKind, &str, Option<&KeyValue>)> {
        decoded
            .iter()
            .map(|e| (e.kind, e.key.as_str(), e.prev.as_ref()))
            .collect()
    }

    #[test]
    fn history_records_round_trip_without_the_new_values() {
        let events = sample_events();
        let bytes = encode_history(&events);
        let decoded = decode_history(7, &bytes).unwrap();
        assert_eq!(
            summary(&decoded),
            vec![
                (EventKind::Put, "/a", Some(&kv("/a", b"old", 5, 6))),
                (EventKind::Put, "/c", None),
                (EventKind::Delete, "/b", Some(&kv("/b", b"gone", 2, 2))),
            ]
        );
        // Kind, key and previous state only: the new values are not in the record.
        let expected = 4 + (1 + 4 + 2 + 1 + 16 + 4 + 3) + (1 + 4 + 2 + 1) + (1 + 4 + 2 + 1 + 16 + 4 + 4);
        assert_eq!(bytes.len(), expected);
        assert!(!bytes.windows(3).any(|w| w == b"new"));
        assert!(!bytes.windows(7).any(|w| w == b"created"));
    }

    #[test]
    fn first_format_log_records_read_as_history_records() {
        let events = sample_events();
        let decoded = decode_log_v1(7, &encode_log_v1(&events)).unwrap();
        assert_eq!(
            summary(&decoded),
            summary(&decode_history(7, &encode_history(&events)).unwrap())
        );
    }

    #[test]
    fn garbage_records_are_corrupt() {
        let mut bytes = encode_history(&[]);
        bytes[0] = 5; // claims five events, has none
        assert!(matches!(decode_history(1, &bytes), Err(StoreError::Corrupt(_))));
        let mut bytes = encode_history(&[]);
        bytes.push(0xff);
        assert!(matches!(decode_history(1, &bytes), Err(StoreError::Corrupt(_))));
        let mut bytes = encode_history(&sample_events());
        bytes[4] = 9; // the first event's kind
        let err = decode_history(7, &bytes).err().unwrap();
        assert!(
            matches!(err, StoreError::Corrupt(ref m) if m.contains("revision 7") && m.contains("kind 9")),
            "{err}"
        );
        // A first-format record cut inside an event's new value.
        let bytes = encode_log_v1(&sample_events());
        assert!(matches!(
            decode_log_v1(7, &bytes[..20]),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn frames_round_trip_and_end_at_zeros() {
        let mut bytes = Vec::new();
        put_frame(&mut bytes, |b| b.extend_from_slice(b"first"));
        put_frame(&mut bytes, |b| b.extend_from_slice(b"second"));
        let end = bytes.len();
        bytes.extend_from_slice(&[0; 32]);
        let Frame::Whole(first, next) = next_frame(&bytes, 0) else {
            panic!("the first frame is whole");
        };
        assert_eq!((first, next), (&b"first"[..], FRAME_HEADER + 5));
        let Frame::Whole(second, next) = next_frame(&bytes, next) else {
            panic!("the second frame is whole");
        };
        assert_eq!((second, next), (&b"second"[..], end));
        assert_eq!(next_frame(&bytes, next), Frame::End, "zeros end the frames");
        assert_eq!(
            next_frame(&bytes, bytes.len() - 3),
            Frame::End,
            "no room for a header"
        );
        assert_eq!(next_frame(&bytes[..end], end), Frame::End, "the end of the bytes");
    }

    #[test]
    fn damaged_frames_say_what_is_wrong() {
        let mut bytes = Vec::new();
        put_frame(&mut bytes, |b| b.extend_from_slice(b"payload"));
        let cut = next_frame(&bytes[..bytes.len() - 1], 0);
        assert!(
            matches!(cut, Frame::Damaged(ref why) if why.contains("runs past the end")),
            "{cut:?}"
        );
        let mut flipped = bytes.clone();
        flipped[FRAME_HEADER + 2] ^= 1;
        let flipped = next_frame(&flipped, 0);
        assert!(
            matches!(flipped, Frame::Damaged(ref why) if why.contains("checksum")),
            "{flipped:?}"
        );
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(next_frame(&huge, 0), Frame::Damaged(_)));
    }

    #[test]
    fn log_records_hold_new_values_and_create_revisions_but_no_previous_state() {
        let events = sample_events();
        let mut bytes = Vec::new();
        put_logged(&mut bytes, 7, &events);
        let Frame::Whole(payload, _) = next_frame(&bytes, 0) else {
            panic!("one whole frame");
        };
        let (revision, logged) = decode_logged(payload, "test").unwrap();
        assert_eq!(revision, 7);
        assert_eq!(
            logged,
            vec![
                Logged {
                    key: "/a".into(),
                    put: Some((5, b"new".to_vec()))
                },
                Logged {
                    key: "/c".into(),
                    put: Some((7, b"created".to_vec()))
                },
                Logged {
                    key: "/b".into(),
                    put: None
                },
            ]
        );
        assert!(!bytes.windows(3).any(|w| w == b"old"));
        assert!(!bytes.windows(4).any(|w| w == b"gone"));
        let mut bad = payload.to_vec();
        bad[8 + 4 + 4 + 2] = 9; // the first event's kind
        let err = decode_logged(&bad, "wal-1.log at byte 16").unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt(ref m) if m.contains("wal-1.log at byte 16") && m.contains("kind 9")),
            "{err}"
        );
        assert!(decode_logged(&payload[..payload.len() - 1], "test").is_err());
    }

    #[test]
    fn checkpoint_entries_round_trip() {
        let entries = [
            kv("/a", b"1", 1, 4),
            kv("/b/c", b"", 2, 2),
            kv("/d", &[0xff; 300], 3, 9),
        ];
        let mut bytes = Vec::new();
        for entry in &entries {
            put_entry(&mut bytes, entry);
        }
        assert_eq!(decode_entries(&bytes, "test").unwrap(), entries);
        assert!(decode_entries(&bytes[..bytes.len() - 1], "test").is_err());
    }
}
