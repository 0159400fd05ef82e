//! Records a watch cache keeps for every object but reads only now and then, packed small: the
//! record's JSON, compressed with zstd against a dictionary learned from the first records of the
//! same [`Codec`] (ADR 0019).
//!
//! The objects of one kind look alike: a binding's JSON repeats its policy's placement, the same
//! keys, annotation names, cluster names and condition reasons as every other binding of the
//! installation. Compressed alone, a 1.5 KiB binding shrinks by about half (little repeats
//! inside one record); compressed against a few kilobytes of earlier bindings it shrinks to
//! about a tenth, mostly the bytes that really differ (names, uids, versions, times).
//!
//! Those bytes are why the codec is zstd (level 1) and no longer LZ4 (issue 17, round 17): uids,
//! resourceVersions, trace ids and timestamps are hexadecimal and decimal text, which a match
//! finder cannot shorten but an entropy coder can (4 bits of a hexadecimal digit's 8). On the
//! benchmark's bindings (2.8 KiB of JSON each, the same 8 KiB dictionary) LZ4 packed 283 bytes a
//! record and zstd 168, at about the same cost per record (a few microseconds either way).
//!
//! A [`Codec`] is one kind of record (one per cache type, a `static`). Its dictionary is the
//! first [`DICTIONARY_BYTES`] of JSON it packs, taken once and never changed: every record
//! packed with it must be read with the same bytes. Records packed before the dictionary was
//! complete are compressed without one and say so in their first byte, so they read back the
//! same way for as long as they live. The dictionary is prepared once for compression and once
//! for decompression, and each codec reuses one context of each, so packing allocates only the
//! record.
//!
//! Packing costs a JSON write and a compression; reading costs a decompression and a JSON read.
//! That suits what is read when an object is acted on, not on every event or timer tick: keep
//! those fields typed beside the [`Packed`] record.

use std::sync::{Mutex, MutexGuard, OnceLock};

use serde::Serialize;
use serde::de::DeserializeOwned;
use zstd_safe::{CCtx, CDict, DCtx, DDict};

/// How much JSON a [`Codec`] learns its dictionary from: a few records of a typical kind
/// (bindings are 1-3 KiB).
pub const DICTIONARY_BYTES: usize = 8 * 1024;

/// zstd's compression level: its fastest, which on cache records packs within a few percent of
/// its default (3).
const LEVEL: i32 = 1;

/// The first byte of a record compressed without a dictionary.
const WITHOUT_DICTIONARY: u8 = 0;
/// The first byte of a record compressed against its codec's dictionary.
const WITH_DICTIONARY: u8 = 1;

/// One kind of packed record and the dictionary its records share (see the module docs).
pub struct Codec {
    /// The JSON packed so far, until it is [`DICTIONARY_BYTES`] long.
    learning: Mutex<Vec<u8>>,
    /// The dictionary, once learned; never changes after.
    dictionary: OnceLock<Dictionary>,
    /// The compression context every record of this codec is packed with (made on first use).
    compressor: Mutex<Option<CCtx<'static>>>,
    /// The decompression context every record of this codec is read with (made on first use).
    decompressor: Mutex<Option<DCtx<'static>>>,
}

/// A learned dictionary: its bytes, and the same prepared for each direction.
struct Dictionary {
    bytes: Box<[u8]>,
    compress: CDict<'static>,
    decompress: DDict<'static>,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("dictionary", &self.dictionary().map(<[u8]>::len))
            .finish_non_exhaustive()
    }
}

/// A packed record: one allocation of a tag byte and the compressed JSON (a zstd frame, which
/// carries the JSON's length).
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

    /// Whether the record has no bytes (never: a record has at least its tag and a frame).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for Codec {
    fn default() -> Self {
        Self::new()
    }
}

/// `mutex`'s guard; a context left by a panicking thread is reset before each use anyway.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Codec {
    /// A codec with no dictionary yet (usable as a `static`).
    pub const fn new() -> Self {
        Self {
            learning: Mutex::new(Vec::new()),
            dictionary: OnceLock::new(),
            compressor: Mutex::new(None),
            decompressor: Mutex::new(None),
        }
    }

    /// `value` as a packed record.
    ///
    /// # Panics
    ///
    /// If `value` cannot be written as JSON: a map with keys that are not strings. Cache
    /// records are API types and the caches' own structs, which always can.
    pub fn pack<T: Serialize + ?Sized>(&self, value: &T) -> Packed {
        let json = serde_json::to_vec(value).expect("a cache record serializes as JSON");
        let dictionary = match self.dictionary.get() {
            Some(dictionary) => Some(dictionary),
            None => self.learn(&json),
        };
        let mut bytes = vec![0; 1 + zstd_safe::compress_bound(json.len())];
        let written = {
            let mut context = lock(&self.compressor);
            let context = context.get_or_insert_with(CCtx::create);
            match dictionary {
                Some(dictionary) => {
                    bytes[0] = WITH_DICTIONARY;
                    context.compress_using_cdict(&mut bytes[1..], &json, &dictionary.compress)
                }
                None => {
                    bytes[0] = WITHOUT_DICTIONARY;
                    context.compress(&mut bytes[1..], &json, LEVEL)
                }
            }
        }
        .expect("the buffer has the maximum compressed size");
        // Copied into an allocation of its own size (not shrunk in place): what a cache keeps
        // is allocated together, not scattered among freed buffers (ADR 0016).
        Packed(bytes[..1 + written].into())
    }

    /// The record `packed` read back as a `T`.
    ///
    /// # Panics
    ///
    /// If `packed` was not made by this codec from a `T`'s JSON: records are written and read
    /// by the same process with the same types, so that is a bug, not an input error.
    pub fn unpack<T: DeserializeOwned>(&self, packed: &Packed) -> T {
        let json = self.json(packed);
        serde_json::from_slice(&json).expect("a packed record reads back as the type it was packed from")
    }

    /// The JSON text of `packed`.
    ///
    /// # Panics
    ///
    /// If `packed` was not made by this codec (see [`Codec::unpack`]).
    pub fn json(&self, packed: &Packed) -> Vec<u8> {
        let (tag, frame) = packed.0.split_first().expect("a packed record has a tag byte");
        let length = zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten()
            .and_then(|length| usize::try_from(length).ok())
            .expect("a packed record's frame says how long its JSON is");
        let mut json = Vec::with_capacity(length);
        let mut context = lock(&self.decompressor);
        let context = context.get_or_insert_with(DCtx::create);
        match *tag {
            WITHOUT_DICTIONARY => context.decompress(&mut json, frame),
            WITH_DICTIONARY => {
                let dictionary = self
                    .dictionary
                    .get()
                    .expect("a record packed with the dictionary is read by the codec that learned it");
                context.decompress_using_ddict(&mut json, frame, &dictionary.decompress)
            }
            tag => panic!("a packed record starts with tag 0 or 1, not {tag}"),
        }
        .expect("a packed record decompresses as it was compressed");
        json
    }

    /// The dictionary, if it is learned (for tests and measurements).
    pub fn dictionary(&self) -> Option<&[u8]> {
        self.dictionary.get().map(|dictionary| &dictionary.bytes[..])
    }

    /// Adds `json` to what the dictionary is learned from; returns the dictionary once it is
    /// complete (with this record, or because another thread completed it meanwhile).
    fn learn(&self, json: &[u8]) -> Option<&Dictionary> {
        let mut learning = lock(&self.learning);
        if let Some(dictionary) = self.dictionary.get() {
            return Some(dictionary);
        }
        learning.extend_from_slice(json);
        if learning.len() < DICTIONARY_BYTES {
            return None;
        }
        // The most recent bytes: zstd, like LZ4, finds the nearest matches cheapest.
        let bytes: Box<[u8]> = learning[learning.len() - DICTIONARY_BYTES..].into();
        *learning = Vec::new();
        Some(self.dictionary.get_or_init(|| Dictionary {
            // JSON never starts with zstd's dictionary magic number, so both read the bytes as
            // raw content.
            compress: CDict::create(&bytes, LEVEL),
            decompress: DDict::create(&bytes),
            bytes,
        }))
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
            note: (i % 3 == 0).then(|| "Binding has been scheduled successfully.".to_owned()),
        }
    }

    fn json_len(value: &Record) -> usize {
        serde_json::to_vec(value).unwrap().len()
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
        assert_eq!(packed[199].1.0[0], WITH_DICTIONARY);
        for (value, packed) in &packed {
            assert_eq!(&codec.unpack::<Record>(packed), value);
        }
    }

    #[test]
    fn the_dictionary_is_the_first_records_and_never_changes() {
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
        for j in i..i + 100 {
            codec.pack(&record(j));
        }
        assert_eq!(codec.dictionary().unwrap(), &learned[..]);
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
        // Without a dictionary little repeats inside one record.
        let alone = Codec::new().pack(&record(1000)).len();
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
    fn threads_packing_at_once_share_one_dictionary() {
        let codec = Arc::new(Codec::new());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let codec = Arc::clone(&codec);
                std::thread::spawn(move || {
                    (0..300)
                        .map(|i| {
                            let value = record(t * 1000 + i);
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
