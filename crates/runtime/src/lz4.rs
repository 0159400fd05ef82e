//! LZ4 block compression against a dictionary whose match table is built once (ADR 0019).
//!
//! [`crate::packed`] compresses every cache record against the same few kilobytes of
//! dictionary. `lz4_flex::block::compress_into_with_dict` rebuilds its hash table from the
//! dictionary on each call: for an 8 KiB dictionary and a 1.5 KiB record, that set-up was more
//! than half of the compression's cost. Here the dictionary's table is built once ([`Prepared::new`]) and
//! each record starts from a copy of it (8 KiB).
//!
//! The output is a standard LZ4 block that refers back into the dictionary as if the dictionary
//! immediately preceded the input, so `lz4_flex::block::decompress_into_with_dict` reads it
//! (the tests check that round trip). Only the compressor is ours; the format's rules are
//! LZ4's: a sequence is a token (literal length, match length - 4), the literals, a 2-byte
//! little-endian offset and the match; the block ends with literals only; the last match
//! starts at least [`MF_LIMIT`] bytes before the end and ends at least [`LAST_LITERALS`] bytes
//! before it.

/// The shortest match LZ4 encodes.
const MIN_MATCH: usize = 4;
/// The last bytes of a block are always literals.
const LAST_LITERALS: usize = 5;
/// The last match starts at least this many bytes before the end of the block.
const MF_LIMIT: usize = 12;
/// The farthest a match reaches back.
const MAX_DISTANCE: usize = 65_535;
/// log2 of the match table's entries.
const HASH_LOG: u32 = 12;
/// The match table's entries: the last position (in the dictionary followed by the input) where
/// 4 bytes with that hash were seen.
const TABLE_SIZE: usize = 1 << HASH_LOG;

/// The longest input [`compress`] takes after a dictionary of `dictionary_len` bytes: positions
/// in the dictionary followed by the input are kept as 16-bit numbers.
pub(crate) fn fits(dictionary_len: usize, input_len: usize) -> bool {
    dictionary_len + input_len <= usize::from(u16::MAX) + 1
}

/// A dictionary's match table, built once and copied for each record.
pub(crate) struct Prepared {
    table: Box<[u16; TABLE_SIZE]>,
    dictionary_len: usize,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("dictionary_len", &self.dictionary_len)
            .finish_non_exhaustive()
    }
}

impl Prepared {
    /// The match table of `dictionary`: every position of it, the later ones winning (they
    /// are nearer to the input).
    ///
    /// # Panics
    ///
    /// If the dictionary is longer than 64 KiB (a packed codec's are [`crate::packed::DICTIONARY_BYTES`]).
    pub(crate) fn new(dictionary: &[u8]) -> Self {
        assert!(fits(dictionary.len(), 0), "an LZ4 dictionary is at most 64 KiB");
        let mut table = Box::new([0u16; TABLE_SIZE]);
        for position in 0..dictionary.len().saturating_sub(MIN_MATCH - 1) {
            // position < 64 Ki (asserted above).
            table[hash(read_u32(dictionary, position))] = position as u16;
        }
        Self {
            table,
            dictionary_len: dictionary.len(),
        }
    }
}

/// The 4 bytes at `at` as a little-endian number.
fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The table entry of 4 bytes (Knuth's multiplicative hash, as LZ4's reference compressor).
fn hash(sequence: u32) -> usize {
    (sequence.wrapping_mul(2_654_435_761) >> (32 - HASH_LOG)) as usize
}

/// The 8 bytes at `at` as a little-endian number.
fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// How many leading bytes `a` and `b` (of the same length) share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut at = 0;
    while at + 8 <= a.len() {
        let differ = read_u64(a, at) ^ read_u64(b, at);
        if differ != 0 {
            // The lowest differing byte of little-endian words is the first one.
            return at + (differ.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < a.len() && a[at] == b[at] {
        at += 1;
    }
    at
}

/// The dictionary followed by the input, read by position.
struct Stream<'a> {
    dictionary: &'a [u8],
    input: &'a [u8],
}

impl Stream<'_> {
    fn byte(&self, position: usize) -> u8 {
        match position.checked_sub(self.dictionary.len()) {
            Some(at) => self.input[at],
            None => self.dictionary[position],
        }
    }

    /// How many bytes from `position` on equal `input[at..end]`'s, 8 at a time. The two may
    /// overlap (a match may run into the bytes it repeats, as LZ4 decodes them).
    fn common(&self, mut position: usize, mut at: usize, end: usize) -> usize {
        let start = at;
        while at < end {
            let (region, from) = match position.checked_sub(self.dictionary.len()) {
                Some(from) => (self.input, from),
                None => (self.dictionary, position),
            };
            let run = (end - at).min(region.len() - from);
            let equal = common_prefix(&region[from..from + run], &self.input[at..at + run]);
            at += equal;
            position += equal;
            if equal < run {
                break;
            }
            // The match ran to the end of the dictionary: it goes on in the input.
        }
        at - start
    }

    fn u32_at(&self, position: usize) -> u32 {
        if position >= self.dictionary.len() {
            read_u32(self.input, position - self.dictionary.len())
        } else if position + MIN_MATCH <= self.dictionary.len() {
            read_u32(self.dictionary, position)
        } else {
            u32::from_le_bytes([
                self.byte(position),
                self.byte(position + 1),
                self.byte(position + 2),
                self.byte(position + 3),
            ])
        }
    }
}

/// Appends `input` compressed against `dictionary` (whose table is `prepared`) to `out`, as one
/// LZ4 block.
///
/// # Panics
///
/// If `prepared` is not `dictionary`'s, or the input does not [`fits`] after it.
pub(crate) fn compress(prepared: &Prepared, dictionary: &[u8], input: &[u8], out: &mut Vec<u8>) {
    assert_eq!(
        prepared.dictionary_len,
        dictionary.len(),
        "the dictionary's own table"
    );
    assert!(
        fits(dictionary.len(), input.len()),
        "the input fits the 16-bit positions"
    );
    out.reserve(input.len() + input.len() / 255 + 16);
    let n = input.len();
    if n <= MF_LIMIT {
        literals_only(out, input);
        return;
    }
    let stream = Stream { dictionary, input };
    let base = dictionary.len();
    let mut table = *prepared.table;
    // A match may start at `last_start` at the latest and end at `match_end` at the latest.
    let last_start = n - MF_LIMIT;
    let match_end = n - LAST_LITERALS;
    let mut anchor = 0;
    let mut at = 0;
    let mut misses = 0usize;
    while at <= last_start {
        let sequence = read_u32(input, at);
        let slot = hash(sequence);
        let candidate = usize::from(table[slot]);
        let position = base + at;
        // position < 64 Ki: `fits` was asserted.
        table[slot] = position as u16;
        if candidate >= position
            || position - candidate > MAX_DISTANCE
            || stream.u32_at(candidate) != sequence
        {
            // Skip faster through bytes that do not repeat, as LZ4's reference compressor.
            misses += 1;
            at += 1 + (misses >> 6);
            continue;
        }
        let (mut start, mut from) = (at, candidate);
        let mut length = MIN_MATCH + stream.common(candidate + MIN_MATCH, at + MIN_MATCH, match_end);
        while start > anchor && from > 0 && stream.byte(from - 1) == input[start - 1] {
            start -= 1;
            from -= 1;
            length += 1;
        }
        sequence_out(out, &input[anchor..start], position - candidate, length);
        at = start + length;
        anchor = at;
        misses = 0;
        if at <= last_start {
            // The bytes just before the next search point may start the next match.
            let before = at - 2;
            table[hash(read_u32(input, before))] = (base + before) as u16;
        }
    }
    literals_only(out, &input[anchor..]);
}

/// A length beyond a token's 15: bytes of 255 and the remainder.
fn length_out(out: &mut Vec<u8>, mut length: usize) {
    while length >= 255 {
        out.push(255);
        length -= 255;
    }
    // length < 255 here.
    out.push(length as u8);
}

/// One sequence: `literals`, then a match of `length` bytes `offset` back.
fn sequence_out(out: &mut Vec<u8>, literals: &[u8], offset: usize, length: usize) {
    debug_assert!((1..=MAX_DISTANCE).contains(&offset) && length >= MIN_MATCH);
    let extra = length - MIN_MATCH;
    // Both nibbles are at most 15.
    out.push(((literals.len().min(15) as u8) << 4) | extra.min(15) as u8);
    if literals.len() >= 15 {
        length_out(out, literals.len() - 15);
    }
    out.extend_from_slice(literals);
    // offset <= MAX_DISTANCE fits 16 bits.
    out.extend_from_slice(&(offset as u16).to_le_bytes());
    if extra >= 15 {
        length_out(out, extra - 15);
    }
}

/// The block's last sequence: literals only.
fn literals_only(out: &mut Vec<u8>, literals: &[u8]) {
    out.push((literals.len().min(15) as u8) << 4);
    if literals.len() >= 15 {
        length_out(out, literals.len() - 15);
    }
    out.extend_from_slice(literals);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// JSON shaped like the cache records the codecs pack.
    fn record(rng: &mut Rng, i: usize) -> Vec<u8> {
        let clusters: Vec<String> = (0..1 + rng.below(6)).map(|c| format!("\"member{c}\"")).collect();
        format!(
            r#"{{"metadata":{{"name":"app-{i:05}-deployment","namespace":"shop-{}","uid":"{:08x}-4b1d-4e6f-9a0c-{:012x}","generation":{},"labels":{{"propagationpolicy.karmada.io/permanent-id":"50c99cbf-db7b-493a"}}}},"spec":{{"resource":{{"apiVersion":"apps/v1","kind":"Deployment","name":"app-{i:05}"}},"clusters":[{}],"replicas":{}}},"status":{{"conditions":[{{"type":"Scheduled","status":"True","reason":"Success","message":"Binding has been scheduled successfully."}}]}}}}"#,
            rng.below(4),
            rng.next() as u32,
            rng.next() & 0xffff_ffff_ffff,
            rng.below(9),
            clusters.join(","),
            rng.below(50),
        )
        .into_bytes()
    }

    fn dictionary(rng: &mut Rng) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut i = 0;
        while bytes.len() < 8 * 1024 {
            bytes.extend(record(rng, i));
            i += 1;
        }
        bytes[bytes.len() - 8 * 1024..].to_vec()
    }

    fn ours(dictionary: &[u8], input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        compress(&Prepared::new(dictionary), dictionary, input, &mut out);
        out
    }

    /// Compresses with ours, decompresses with lz4_flex, and checks the bytes come back.
    fn round_trip(dictionary: &[u8], input: &[u8]) -> usize {
        let compressed = ours(dictionary, input);
        let mut back = vec![0; input.len()];
        let written = lz4_flex::block::decompress_into_with_dict(&compressed, &mut back, dictionary)
            .unwrap_or_else(|e| panic!("{} bytes did not decompress: {e}", input.len()));
        assert_eq!(written, input.len());
        assert_eq!(back, input, "{} bytes came back different", input.len());
        compressed.len()
    }

    #[test]
    fn records_read_back_with_lz4_flex_and_shrink_like_lz4_flex() {
        let mut rng = Rng(0x5eed);
        let dict = dictionary(&mut rng);
        let (mut ours_total, mut theirs_total, mut plain) = (0, 0, 0);
        for i in 0..500 {
            let input = record(&mut rng, 1000 + i);
            ours_total += round_trip(&dict, &input);
            // The same record packs to the same bytes (the scheduler compares packed records).
            assert_eq!(ours(&dict, &input), ours(&dict, &input));
            theirs_total += lz4_flex::block::compress_with_dict(&input, &dict).len();
            plain += input.len();
        }
        // A record mostly repeats the dictionary: both shrink it to a small part of itself.
        assert!(ours_total * 3 < plain, "{ours_total} of {plain} bytes");
        // And ours, which indexes every position of the dictionary, at least as well.
        assert!(
            ours_total <= theirs_total + theirs_total / 20,
            "ours {ours_total} bytes, lz4_flex {theirs_total}"
        );
    }

    #[test]
    fn every_short_input_and_every_boundary_reads_back() {
        let mut rng = Rng(7);
        let dict = dictionary(&mut rng);
        let sample = record(&mut rng, 42);
        // Every length around the format's limits, of text that matches the dictionary.
        for len in 0..=sample.len().min(200) {
            round_trip(&dict, &sample[..len]);
        }
        // The dictionary itself, its first and last bytes (matches at offset 65535 and at its start).
        round_trip(&dict, &dict);
        round_trip(&dict, &dict[..64]);
        round_trip(&dict, &dict[dict.len() - 64..]);
        // Matches that start in the dictionary and run on into the input.
        let tail = &dict[dict.len() - 50..];
        round_trip(
            &dict,
            &[tail, tail, tail, b"end of the record, in literals"].concat(),
        );
        assert_eq!(
            Stream {
                dictionary: &dict,
                input: &[tail, tail].concat()
            }
            .common(dict.len() - 50, 50, 100),
            50,
            "50 bytes of the dictionary then of the input repeat the second half"
        );
        // A tiny dictionary, and none that matches.
        round_trip(b"abcd", b"abcdabcdabcdabcdabcdabcdxyz");
        round_trip(&[0xff; 16], b"nothing here repeats the dictionary's bytes at all");
    }

    #[test]
    fn long_runs_of_literals_and_matches_read_back() {
        let mut rng = Rng(99);
        let dict = dictionary(&mut rng);
        // Overlapping matches (offset 1) longer than 15 + 255 x n bytes.
        for len in [13, 19, 20, 270, 271, 524, 525, 4_000] {
            round_trip(&dict, &vec![b'a'; len]);
        }
        // Random bytes: literal runs of every length class.
        for len in [14, 15, 16, 269, 270, 271, 1_000, 10_000] {
            let noise: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            round_trip(&dict, &noise);
        }
        // Random mixes of dictionary pieces and noise.
        for _ in 0..300 {
            let mut input = Vec::new();
            for _ in 0..rng.below(12) {
                if rng.below(2) == 0 {
                    let from = rng.below(dict.len());
                    let to = (from + rng.below(300)).min(dict.len());
                    input.extend_from_slice(&dict[from..to]);
                } else {
                    let len = rng.below(40);
                    input.extend((0..len).map(|_| rng.next() as u8));
                }
            }
            round_trip(&dict, &input);
        }
    }

    #[test]
    fn the_largest_input_after_the_dictionary_reads_back() {
        let mut rng = Rng(3);
        let dict = dictionary(&mut rng);
        let mut input = Vec::new();
        let mut i = 0;
        while input.len() < 64 * 1024 - dict.len() {
            input.extend(record(&mut rng, i));
            i += 1;
        }
        input.truncate(64 * 1024 - dict.len());
        assert!(fits(dict.len(), input.len()));
        assert!(!fits(dict.len(), input.len() + 1));
        round_trip(&dict, &input);
    }
}
