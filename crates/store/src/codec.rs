//! On-disk encoding of materialized values and revision-log entries.
//!
//! The format is a small length-prefixed binary layout owned by this crate alone; decoding is
//! defensive because the bytes come from disk and a torn or foreign file must surface as
//! [`StoreError::Corrupt`] rather than a panic.

use std::sync::Arc;

use crate::{Event, EventKind, KeyValue, StoreError};

/// Encodes a materialized value: `create_revision`, `mod_revision`, then the value bytes.
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
/// (see `writer::resolve`). Writing it too, as the first log format did, wrote every object
/// twice (three times on an update) per revision.
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
}
