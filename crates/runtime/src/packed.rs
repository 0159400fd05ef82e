//! Records a watch cache keeps for every object but reads only now and then, packed small: the
//! record's JSON, compressed with LZ4 against a dictionary learned from earlier records of the
//! same [`Codec`] (ADR 0019).
//!
//! The objects of one kind look alike: a binding's JSON repeats its policy's placement, the same
//! keys, annotation names, cluster names and condition reasons as every other binding of the
//! installation. Compressed alone, a 1.5 KiB binding shrinks by about half (LZ4 finds little to
//! repeat inside one record); compressed against a few kilobytes of bindings like it, it shrinks
//! to about an eighth, mostly the bytes that really differ (names, uids, versions, times).
//!
//! A [`Codec`] is one kind of record (one per cache type, a `static`). Its first dictionary is
//! the first [`DICTIONARY_BYTES`] of JSON it packs. Those first records can be unlike the ones a
//! cache keeps for long: after a cold start with many new objects they are the objects as they
//! were created (a binding not scheduled yet, no conditions), and the same objects settled
//! compress against them to twice the size they would against settled ones. So the codec learns
//! again, from the records it packs then, each time the number of records it has packed doubles
//! after [`FIRST_RELEARN`], up to [`MAX_DICTIONARIES`] dictionaries in its life. A record says in
//! its first byte which dictionary it was packed with (none: 0), and every dictionary is kept for
//! as long as the process lives, so each record reads back the same way for as long as it lives:
//! at most [`MAX_DICTIONARIES`] x [`DICTIONARY_BYTES`] per codec (13 dictionaries, 104 KiB, after a
//! million records).
//!
//! Packing costs a JSON write and an LZ4 compression; reading costs a decompression and a JSON
//! read. That suits what is read when an object is acted on, not on every event or timer tick:
//! keep those fields typed beside the [`Packed`] record. A dictionary's match table is built once,
//! the first time a record is packed with it, and each record starts from a copy
//! ([`crate::lz4`]); rebuilding it from the dictionary for every record had cost more than the
//! compression itself. The JSON and the compressed block are written into buffers each thread
//! keeps, so a record costs one allocation: its own.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// How much JSON a [`Codec`] learns a dictionary from: a few records of a typical kind
/// (bindings are 1-2 KiB). More costs every packing a longer table set-up for little gain.
pub const DICTIONARY_BYTES: usize = 8 * 1024;

/// The number of records a [`Codec`] packs before it learns its second dictionary; it learns
/// the next each time that number doubles.
pub const FIRST_RELEARN: u64 = 256;

/// The most dictionaries a [`Codec`] learns in its life (the last one is kept from then on).
pub const MAX_DICTIONARIES: usize = 24;

/// The first byte of a record compressed without a dictionary; dictionary `n` (from 1) is tag `n`.
const WITHOUT_DICTIONARY: u8 = 0;

/// Scratch buffers a thread keeps beyond this many bytes are let go after use (a rare huge
/// record must not stay allocated for the life of the thread).
const SCRATCH_KEPT_BYTES: usize = 64 * 1024;

/// A thread's buffers for the JSON of a record and for its packed bytes.
#[derive(Default)]
struct Scratch {
    json: Vec<u8>,
    block: Vec<u8>,
}

impl Scratch {
    /// Lets go of a buffer that grew beyond [`SCRATCH_KEPT_BYTES`].
    fn trim(&mut self) {
        for buffer in [&mut self.json, &mut self.block] {
            if buffer.capacity() > SCRATCH_KEPT_BYTES {
                *buffer = Vec::new();
            }
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's [`Scratch`] (fresh buffers if it is in use further up the stack).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = f(&mut scratch);
            scratch.trim();
            result
        }
        Err(_) => f(&mut Scratch::default()),
    })
}

/// One kind of packed record and the dictionaries its records share (see the module docs).
#[derive(Debug)]
pub struct Codec {
    /// Records packed so far.
    packed: AtomicU64,
    /// How many dictionaries are learned: the newest is `dictionaries[learned - 1]`.
    learned: AtomicUsize,
    /// The count of [`Codec::packed`] records from which the next dictionary is learned.
    learn_from: AtomicU64,
    /// The JSON the next dictionary is learned from, until it is [`DICTIONARY_BYTES`] long.
    learning: Mutex<Vec<u8>>,
    /// The dictionaries, in the order they were learned; never change once set.
    dictionaries: [OnceLock<Box<[u8]>>; MAX_DICTIONARIES],
    /// The match table of the dictionary records are packed with now (by tag), built when the
    /// first record is packed with it; older dictionaries only read records back and need none.
    table: Mutex<Option<(u8, Arc<crate::lz4::Prepared>)>>,
    /// When the second dictionary is learned ([`FIRST_RELEARN`]; smaller in tests).
    first_relearn: u64,
    /// How many dictionaries are learned at most ([`MAX_DICTIONARIES`]; fewer in tests).
    max_dictionaries: usize,
}

/// A packed record: one allocation of the compressed JSON, a tag byte and the JSON's length.
#[derive(Clone, PartialEq, Eq)]
pub struct Packed(Box<[u8]>);

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} bytes)", self.0.len())
    }
}

impl Packed {
    /// The record's size in memory (its bytes, not the allocation's header).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the record has no bytes (never: a record has at least its tag and length).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The record's bytes, for a cache that keeps them inside an allocation of its own (read
    /// back with [`Codec::unpack_bytes`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Default for Codec {
    fn default() -> Self {
        Self::new()
    }
}

impl Codec {
    /// A codec with no dictionary yet (usable as a `static`).
    pub const fn new() -> Self {
        Self::with_schedule(FIRST_RELEARN, MAX_DICTIONARIES)
    }

    /// A codec that learns its second dictionary after `first_relearn` records and learns
    /// `max_dictionaries` at most (at most [`MAX_DICTIONARIES`]).
    const fn with_schedule(first_relearn: u64, max_dictionaries: usize) -> Self {
        assert!(max_dictionaries >= 1 && max_dictionaries <= MAX_DICTIONARIES);
        Self {
            packed: AtomicU64::new(0),
            learned: AtomicUsize::new(0),
            learn_from: AtomicU64::new(0),
            learning: Mutex::new(Vec::new()),
            dictionaries: [const { OnceLock::new() }; MAX_DICTIONARIES],
            table: Mutex::new(None),
            first_relearn,
            max_dictionaries,
        }
    }

    /// `value` as a packed record.
    ///
    /// # Panics
    ///
    /// If `value` cannot be written as JSON: a map with keys that are not strings. Cache
    /// records are API types and the caches' own structs, which always can.
    pub fn pack<T: Serialize + ?Sized>(&self, value: &T) -> Packed {
        with_scratch(|scratch| self.pack_with(value, scratch))
    }

    /// [`Codec::pack`] with `scratch` for the JSON and the packed bytes.
    fn pack_with<T: Serialize + ?Sized>(&self, value: &T, scratch: &mut Scratch) -> Packed {
        let Scratch { json, block } = scratch;
        json.clear();
        serde_json::to_writer(&mut *json, value).expect("a cache record serializes as JSON");
        let count = self.packed.fetch_add(1, Ordering::Relaxed) + 1;
        let learned = self.learned.load(Ordering::Acquire);
        let tag = if learned > 0 && count < self.learn_from.load(Ordering::Relaxed) {
            learned
        } else {
            self.learn(json, count)
        };
        let tag = u8::try_from(tag).expect("MAX_DICTIONARIES is below 256");
        let length = u32::try_from(json.len()).expect("a cache record is smaller than 4 GiB");
        block.clear();
        block.push(tag);
        block.extend_from_slice(&length.to_le_bytes());
        match self.dictionary_of(tag) {
            Some(dictionary) if crate::lz4::fits(dictionary.len(), json.len()) => {
                let prepared = self.table_of(tag, dictionary);
                crate::lz4::compress(&prepared, dictionary, json, block);
            }
            dictionary => {
                // Without a dictionary, or a record too long for the prepared table's 16-bit
                // positions (tens of KiB): lz4_flex's own compressor.
                block.resize(5 + lz4_flex::block::get_maximum_output_size(json.len()), 0);
                let written = match dictionary {
                    Some(dictionary) => {
                        lz4_flex::block::compress_into_with_dict(json, &mut block[5..], dictionary)
                    }
                    None => lz4_flex::block::compress_into(json, &mut block[5..]),
                }
                .expect("the buffer has the maximum compressed size");
                block.truncate(5 + written);
            }
        }
        // Copied into an allocation of its own size: what a cache keeps is allocated together,
        // not scattered among freed buffers (ADR 0016).
        Packed(block.as_slice().into())
    }

    /// The match table of `dictionary`, whose tag is `tag`.
    fn table_of(&self, tag: u8, dictionary: &[u8]) -> Arc<crate::lz4::Prepared> {
        let mut table = self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*table {
            Some((of, prepared)) if *of == tag => prepared.clone(),
            _ => {
                let prepared = Arc::new(crate::lz4::Prepared::new(dictionary));
                *table = Some((tag, prepared.clone()));
                prepared
            }
        }
    }

    /// The record `packed` read back as a `T`.
    ///
    /// # Panics
    ///
    /// If `packed` was not made by this codec from a `T`'s JSON: records are written and read
    /// by the same process with the same types, so that is a bug, not an input error.
    pub fn unpack<T: DeserializeOwned>(&self, packed: &Packed) -> T {
        self.unpack_bytes(&packed.0)
    }

    /// The record whose [`Packed::as_bytes`] are `bytes` read back as a `T`.
    ///
    /// # Panics
    ///
    /// If `bytes` are not a record this codec made from a `T`'s JSON (see [`Codec::unpack`]).
    pub fn unpack_bytes<T: DeserializeOwned>(&self, bytes: &[u8]) -> T {
        with_scratch(|scratch| {
            self.decompress_into(bytes, &mut scratch.json);
            serde_json::from_slice(&scratch.json)
                .expect("a packed record reads back as the type it was packed from")
        })
    }

    /// The JSON text of `packed`.
    ///
    /// # Panics
    ///
    /// If `packed` was not made by this codec (see [`Codec::unpack`]).
    pub fn json(&self, packed: &Packed) -> Vec<u8> {
        self.json_of(&packed.0)
    }

    /// The JSON text of the record whose bytes are `bytes`.
    fn json_of(&self, bytes: &[u8]) -> Vec<u8> {
        let mut json = Vec::new();
        self.decompress_into(bytes, &mut json);
        json
    }

    /// Replaces `json` with the JSON text of the record whose bytes are `bytes`.
    fn decompress_into(&self, bytes: &[u8], json: &mut Vec<u8>) {
        let (header, compressed) = bytes.split_at(5);
        let length = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        json.clear();
        json.resize(length, 0);
        let written = match self.dictionary_of(header[0]) {
            Some(dictionary) => lz4_flex::block::decompress_into_with_dict(compressed, json, dictionary),
            None => lz4_flex::block::decompress_into(compressed, json),
        }
        .expect("a packed record decompresses as it was compressed");
        json.truncate(written);
    }

    /// The dictionary a record's tag names (`None` for [`WITHOUT_DICTIONARY`]).
    fn dictionary_of(&self, tag: u8) -> Option<&[u8]> {
        if tag == WITHOUT_DICTIONARY {
            return None;
        }
        let dictionary = self
            .dictionaries
            .get(usize::from(tag) - 1)
            .and_then(OnceLock::get)
            .unwrap_or_else(|| panic!("a packed record's tag {tag} names a dictionary this codec learned"));
        Some(dictionary)
    }

    /// The newest dictionary, if one is learned (for tests and measurements).
    pub fn dictionary(&self) -> Option<&[u8]> {
        let learned = self.learned.load(Ordering::Acquire);
        self.dictionary_of(u8::try_from(learned).ok()?)
    }

    /// How many dictionaries the codec has learned so far (for tests and measurements).
    pub fn dictionaries(&self) -> usize {
        self.learned.load(Ordering::Acquire)
    }

    /// Adds `json`, the `count`th record packed, to what the next dictionary is learned from if
    /// one is being learned; returns the tag to pack it with: the newest dictionary's, which is
    /// the one this record completed if it did.
    fn learn(&self, json: &[u8], count: u64) -> usize {
        let mut learning = self
            .learning
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let learned = self.learned.load(Ordering::Acquire);
        if learned > 0 && count < self.learn_from.load(Ordering::Relaxed) {
            // Another thread completed the dictionary meanwhile.
            return learned;
        }
        learning.extend_from_slice(json);
        if learning.len() < DICTIONARY_BYTES {
            return learned;
        }
        // LZ4 matches reach back 64 KiB at most; the dictionary is the most recent bytes.
        let dictionary: Box<[u8]> = learning[learning.len() - DICTIONARY_BYTES..].into();
        *learning = Vec::new();
        if self.dictionaries[learned].set(dictionary).is_err() {
            unreachable!("dictionaries are set under the learning lock, each once");
        }
        let learned = learned + 1;
        // Dictionary n + 1 is learned once first_relearn x 2^(n - 1) records are packed.
        let learn_from = if learned < self.max_dictionaries {
            // learned - 1 < MAX_DICTIONARIES: the shift cannot reach 64.
            self.first_relearn
                .saturating_mul(1 << (learned - 1))
                .max(count + 1)
        } else {
            u64::MAX
        };
        self.learn_from.store(learn_from, Ordering::Relaxed);
        self.learned.store(learned, Ordering::Release);
        learned
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde::Deserialize;

    use super::*;

    /// A record shaped like a cached binding: mostly what every record shares.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Record {
        name: String,
        uid: String,
        generation: i64,
        labels: BTreeMap<String, String>,
        clusters: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    fn record(i: usize) -> Record {
        Record {
            name: format!("app-{i:05}-deployment"),
            uid: format!("{:08x}-4b1d-4e6f-9a0c-{:012x}", i * 7919, i * 104_729),
            generation: i as i64 % 7,
            labels: BTreeMap::from([
                (
                    "propagationpolicy.karmada.io/permanent-id".to_owned(),
                    "50c99cbf-db7b-493a".to_owned(),
                ),
                ("app.kubernetes.io/part-of".to_owned(), "storefront".to_owned()),
            ]),
            clusters: (1..=5).map(|c| format!("member{c}")).collect(),
            note: i
                .is_multiple_of(3)
                .then(|| "Binding has been scheduled successfully.".to_owned()),
        }
    }

    fn json_len(value: &Record) -> usize {
        serde_json::to_vec(value).unwrap().len()
    }

    /// `record(i)` as a binding looks when it is created: not scheduled, nothing to say.
    fn created(i: usize) -> Record {
        Record {
            clusters: Vec::new(),
            note: None,
            ..record(i)
        }
    }

    /// `record(i)` settled: scheduled, with what the later stages write.
    fn settled(i: usize) -> Record {
        let mut record = record(i);
        record.note = Some(format!(
            "Binding has been scheduled successfully; all works applied at generation {}",
            i % 7
        ));
        record.labels.insert(
            "resourcebinding.karmada.io/dependencies".to_owned(),
            r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"shop"}]"#.to_owned(),
        );
        record
    }

    #[test]
    fn records_read_back_before_and_after_the_dictionary_is_learned() {
        let codec = Codec::new();
        let packed: Vec<(Record, Packed)> = (0..200)
            .map(|i| {
                let value = record(i);
                let packed = codec.pack(&value);
                (value, packed)
            })
            .collect();
        assert!(
            codec.dictionary().is_some(),
            "200 records are more than the dictionary needs"
        );
        assert_eq!(
            packed[0].1.0[0], WITHOUT_DICTIONARY,
            "the first record came before the dictionary"
        );
        assert_eq!(packed[199].1.0[0], 1, "packed with the first dictionary");
        for (value, packed) in &packed {
            assert_eq!(&codec.unpack::<Record>(packed), value);
            // The bytes kept inside a larger allocation read back the same.
            let mut kept = b"before".to_vec();
            kept.extend_from_slice(packed.as_bytes());
            kept.extend_from_slice(b"after");
            let inner = &kept[6..6 + packed.len()];
            assert_eq!(&codec.unpack_bytes::<Record>(inner), value);
        }
    }

    #[test]
    fn the_first_dictionary_is_the_first_records_and_stays_until_the_first_relearn() {
        let codec = Codec::new();
        let mut first = Vec::new();
        let mut i = 0;
        while codec.dictionary().is_none() {
            first.extend(serde_json::to_vec(&record(i)).unwrap());
            codec.pack(&record(i));
            i += 1;
        }
        let learned = codec.dictionary().unwrap().to_vec();
        assert_eq!(learned.len(), DICTIONARY_BYTES);
        assert_eq!(learned, first[first.len() - DICTIONARY_BYTES..]);
        while (i as u64) < FIRST_RELEARN - 1 {
            codec.pack(&record(i));
            i += 1;
        }
        assert_eq!(codec.dictionary().unwrap(), &learned[..]);
        assert_eq!(codec.dictionaries(), 1);
        // From the FIRST_RELEARN-th record on, the next dictionary is learned from the records
        // packed then.
        let mut next = Vec::new();
        while codec.dictionaries() == 1 {
            next.extend(serde_json::to_vec(&settled(i)).unwrap());
            codec.pack(&settled(i));
            i += 1;
        }
        assert_eq!(
            codec.dictionary().unwrap(),
            &next[next.len() - DICTIONARY_BYTES..]
        );
        assert_eq!(
            codec.dictionary_of(1).unwrap(),
            &learned[..],
            "the first dictionary is kept for the records packed with it"
        );
    }

    #[test]
    fn a_codec_learns_again_from_the_records_it_packs_later() {
        // What a cache sees after a cold start: every object as it was created, then every
        // object settled.
        let relearning = Codec::new();
        let first_only = Codec::with_schedule(FIRST_RELEARN, 1);
        let mut kept = Vec::new();
        for i in 0..2_000 {
            for codec in [&relearning, &first_only] {
                kept.push((created(i), codec.pack(&created(i))));
            }
        }
        let mut sizes = [0, 0];
        for i in 0..2_000 {
            for (n, codec) in [&relearning, &first_only].into_iter().enumerate() {
                let packed = codec.pack(&settled(i));
                sizes[n] += packed.len();
                kept.push((settled(i), packed));
            }
        }
        // 4,000 records each: learned at the start, after 256, 512, 1,024 and 2,048.
        assert_eq!(relearning.dictionaries(), 5);
        assert_eq!(first_only.dictionaries(), 1);
        assert!(
            sizes[0] * 4 < sizes[1] * 3,
            "settled records packed to {} bytes against settled ones, {} against created ones",
            sizes[0],
            sizes[1]
        );
        // Every record reads back, whichever dictionary it was packed with.
        for (n, (value, packed)) in kept.iter().enumerate() {
            let codec = [&relearning, &first_only][n % 2];
            assert_eq!(&codec.unpack::<Record>(packed), value);
        }
    }

    #[test]
    fn a_codec_stops_learning_at_its_most_dictionaries() {
        let codec = Codec::with_schedule(2, 3);
        let packed: Vec<_> = (0..1_000)
            .map(|i| (settled(i), codec.pack(&settled(i))))
            .collect();
        assert_eq!(codec.dictionaries(), 3);
        assert_eq!(packed[999].1.0[0], 3);
        for (value, packed) in &packed {
            assert_eq!(&codec.unpack::<Record>(packed), value);
        }
    }

    #[test]
    fn similar_records_pack_to_a_fraction_of_their_json() {
        let codec = Codec::new();
        for i in 0..20 {
            codec.pack(&record(i));
        }
        let (json, packed): (usize, usize) = (1000..1100)
            .map(|i| (json_len(&record(i)), codec.pack(&record(i)).len()))
            .fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        assert!(
            packed * 3 < json,
            "100 records of {json} bytes of JSON packed to {packed} bytes"
        );
        // Without a dictionary LZ4 finds little to repeat inside one record.
        let alone = lz4_flex::block::compress(&serde_json::to_vec(&record(1000)).unwrap()).len();
        assert!(
            alone * 100 > packed * 2,
            "the dictionary is what makes the difference"
        );
    }

    #[test]
    fn records_of_any_size_read_back() {
        let codec = Codec::new();
        let mut huge = record(1);
        huge.note = Some("x".repeat(200_000));
        let empty = Record {
            name: String::new(),
            uid: String::new(),
            generation: 0,
            labels: BTreeMap::new(),
            clusters: Vec::new(),
            note: None,
        };
        // A first record larger than the dictionary completes it on its own.
        let packed_huge = codec.pack(&huge);
        assert_eq!(codec.dictionary().map(<[u8]>::len), Some(DICTIONARY_BYTES));
        let packed_empty = codec.pack(&empty);
        assert_eq!(codec.unpack::<Record>(&packed_huge), huge);
        assert_eq!(codec.unpack::<Record>(&packed_empty), empty);
        assert_eq!(codec.unpack::<Record>(&codec.pack(&huge)), huge);
        assert_eq!(codec.json(&packed_empty), serde_json::to_vec(&empty).unwrap());
    }

    #[test]
    fn threads_packing_at_once_share_the_dictionaries() {
        // Relearning often, so that threads pack while others complete dictionaries.
        let codec = Arc::new(Codec::with_schedule(16, MAX_DICTIONARIES));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let codec = Arc::clone(&codec);
                std::thread::spawn(move || {
                    (0..300)
                        .map(|i| {
                            let value = if i % 2 == 0 {
                                record(t * 1000 + i)
                            } else {
                                settled(i)
                            };
                            let packed = codec.pack(&value);
                            (value, packed)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for thread in threads {
            for (value, packed) in thread.join().unwrap() {
                assert_eq!(codec.unpack::<Record>(&packed), value);
            }
        }
        assert_eq!(codec.dictionary().map(<[u8]>::len), Some(DICTIONARY_BYTES));
        // 1,200 records: learned at the start, after 16, 32, ..., 1,024.
        assert_eq!(codec.dictionaries(), 8);
    }

    #[test]
    fn a_record_can_be_read_as_part_of_its_type() {
        #[derive(Deserialize)]
        struct NameOnly {
            name: String,
        }
        let codec = Codec::new();
        let packed = codec.pack(&record(42));
        assert_eq!(codec.unpack::<NameOnly>(&packed).name, "app-00042-deployment");
    }
}
