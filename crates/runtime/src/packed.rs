//! Records a watch cache keeps for every object but reads only now and then, packed small: the
//! record's JSON, compressed with LZ4 against a dictionary learned from the first records of the
//! same [`Codec`] (ADR 0019).
//!
//! The objects of one kind look alike: a binding's JSON repeats its policy's placement, the same
//! keys, annotation names, cluster names and condition reasons as every other binding of the
//! installation. Compressed alone, a 1.5 KiB binding shrinks by about half (LZ4 finds little to
//! repeat inside one record); compressed against a few kilobytes of earlier bindings it shrinks
//! to about an eighth, mostly the bytes that really differ (names, uids, versions, times).
//!
//! A [`Codec`] is one kind of record (one per cache type, a `static`). Its dictionary is the
//! first [`DICTIONARY_BYTES`] of JSON it packs, taken once and never changed: every record
//! packed with it must be read with the same bytes. Records packed before the dictionary was
//! complete are compressed without one and say so in their first byte, so they read back the
//! same way for as long as they live.
//!
//! Packing costs a JSON write and an LZ4 compression (the dictionary's hash table is rebuilt per
//! record: a few microseconds for [`DICTIONARY_BYTES`]); reading costs a decompression and a JSON
//! read. That suits what is read when an object is acted on, not on every event or timer tick:
//! keep those fields typed beside the [`Packed`] record.

use std::sync::{Mutex, OnceLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// How much JSON a [`Codec`] learns its dictionary from: a few records of a typical kind
/// (bindings are 1-2 KiB). More costs every packing a longer table set-up for little gain.
pub const DICTIONARY_BYTES: usize = 8 * 1024;

/// The first byte of a record compressed without a dictionary.
const WITHOUT_DICTIONARY: u8 = 0;
/// The first byte of a record compressed against its codec's dictionary.
const WITH_DICTIONARY: u8 = 1;

/// One kind of packed record and the dictionary its records share (see the module docs).
#[derive(Debug)]
pub struct Codec {
    /// The JSON packed so far, until it is [`DICTIONARY_BYTES`] long.
    learning: Mutex<Vec<u8>>,
    /// The dictionary, once learned; never changes after.
    dictionary: OnceLock<Box<[u8]>>,
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
        Self {
            learning: Mutex::new(Vec::new()),
            dictionary: OnceLock::new(),
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
        let dictionary = match self.dictionary() {
            Some(dictionary) => Some(dictionary),
            None => self.learn(&json),
        };
        let (tag, dictionary) = match dictionary {
            Some(dictionary) => (WITH_DICTIONARY, dictionary),
            None => (WITHOUT_DICTIONARY, &[][..]),
        };
        let length = u32::try_from(json.len()).expect("a cache record is smaller than 4 GiB");
        let mut bytes = vec![0; 5 + lz4_flex::block::get_maximum_output_size(json.len())];
        bytes[0] = tag;
        bytes[1..5].copy_from_slice(&length.to_le_bytes());
        let written = if tag == WITH_DICTIONARY {
            lz4_flex::block::compress_into_with_dict(&json, &mut bytes[5..], dictionary)
        } else {
            lz4_flex::block::compress_into(&json, &mut bytes[5..])
        }
        .expect("the buffer has the maximum compressed size");
        // Copied into an allocation of its own size (not shrunk in place): what a cache keeps
        // is allocated together, not scattered among freed buffers (ADR 0016).
        Packed(bytes[..5 + written].into())
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
        let json = self.json_of(bytes);
        serde_json::from_slice(&json).expect("a packed record reads back as the type it was packed from")
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
        let (header, compressed) = bytes.split_at(5);
        let length = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut json = vec![0; length];
        let written = match header[0] {
            WITHOUT_DICTIONARY => lz4_flex::block::decompress_into(compressed, &mut json),
            WITH_DICTIONARY => {
                let dictionary = self
                    .dictionary
                    .get()
                    .expect("a record packed with the dictionary is read by the codec that learned it");
                lz4_flex::block::decompress_into_with_dict(compressed, &mut json, dictionary)
            }
            tag => panic!("a packed record starts with tag 0 or 1, not {tag}"),
        }
        .expect("a packed record decompresses as it was compressed");
        json.truncate(written);
        json
    }

    /// The dictionary, if it is learned (for tests and measurements).
    pub fn dictionary(&self) -> Option<&[u8]> {
        self.dictionary.get().map(AsRef::as_ref)
    }

    /// Adds `json` to what the dictionary is learned from; returns the dictionary once it is
    /// complete (with this record, or because another thread completed it meanwhile).
    fn learn(&self, json: &[u8]) -> Option<&[u8]> {
        let mut learning = self
            .learning
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(dictionary) = self.dictionary() {
            return Some(dictionary);
        }
        learning.extend_from_slice(json);
        if learning.len() < DICTIONARY_BYTES {
            return None;
        }
        // LZ4 matches reach back 64 KiB at most; the dictionary is the most recent bytes.
        let dictionary: Box<[u8]> = learning[learning.len() - DICTIONARY_BYTES..].into();
        *learning = Vec::new();
        Some(self.dictionary.get_or_init(|| dictionary).as_ref())
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
            // The bytes kept inside a larger allocation read back the same.
            let mut kept = b"before".to_vec();
            kept.extend_from_slice(packed.as_bytes());
            kept.extend_from_slice(b"after");
            let inner = &kept[6..6 + packed.len()];
            assert_eq!(&codec.unpack_bytes::<Record>(inner), value);
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
