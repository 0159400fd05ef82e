//! Objects as stored and as served: the storage encoding (metadata first, no
//! `resourceVersion`), splicing the revision back in when serving, and metadata helpers.
//!
//! The resourceVersion of an object is its store mod revision; it is not stored inside the
//! value. Values are written with `metadata` as the first key so serving can insert
//! `"resourceVersion"` by splicing bytes instead of parsing every object of a large list.

use std::collections::BTreeMap;

use rand::Rng;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// Encodes an object for storage: `{"metadata":{...},<other keys>}` without resourceVersion.
pub fn encode_for_storage(obj: &Value) -> Vec<u8> {
    encode_with_kept(obj, &[])
}

/// Encodes `obj` with the top-level fields `kept` (stored bytes, sorted by key, none of them
/// in `obj`) put back among its own: the bytes [`encode_for_storage`] gives for the whole
/// object, without the kept fields ever being parsed into values.
pub fn encode_with_kept(obj: &Value, kept: &[(String, &RawValue)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 + kept.iter().map(|(_, raw)| raw.get().len()).sum::<usize>());
    out.extend_from_slice(b"{\"metadata\":");
    let empty = Map::new();
    let map = obj.as_object().unwrap_or(&empty);
    let meta = map.get("metadata").and_then(Value::as_object).unwrap_or(&empty);
    // Written entry by entry, leaving resourceVersion out, rather than from a copy without it.
    // Writing to a Vec cannot fail.
    out.push(b'{');
    let mut first = true;
    for (k, v) in meta {
        if k == "resourceVersion" {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        let _ = serde_json::to_writer(&mut out, k);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, v);
    }
    out.push(b'}');
    // Both in key order (a `Map` is sorted), merged.
    let mut kept = kept.iter().peekable();
    let write_kept = |out: &mut Vec<u8>, key: &str, raw: &RawValue| {
        out.push(b',');
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        out.extend_from_slice(raw.get().as_bytes());
    };
    for (k, v) in map {
        if k == "metadata" {
            continue;
        }
        while let Some((key, raw)) = kept.next_if(|(key, _)| key.as_str() < k.as_str()) {
            write_kept(&mut out, key, raw);
        }
        out.push(b',');
        let _ = serde_json::to_writer(&mut out, k);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, v);
    }
    for (key, raw) in kept {
        write_kept(&mut out, key, raw);
    }
    out.push(b'}');
    out
}

/// The top-level fields a write through the `status` subresource can change, which
/// [`decode_split`] decodes; every other field of the stored object is kept as bytes.
pub const STATUS_WRITE_FIELDS: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// A stored object decoded for a write that changes only [`STATUS_WRITE_FIELDS`].
#[derive(Debug)]
pub struct Split<'a> {
    /// Those fields as an object, `metadata.resourceVersion` set.
    pub decoded: Value,
    /// The other top-level fields (a Work's manifests, a binding's spec) as the stored bytes,
    /// borrowed, sorted by key: [`encode_with_kept`] writes them back as they are.
    pub kept: Vec<(String, &'a RawValue)>,
}

/// Decodes stored bytes as a [`Split`] and sets the resourceVersion: the fields outside
/// [`STATUS_WRITE_FIELDS`] are scanned (validated, not built), so a status write does not
/// decode, copy, compare and drop a spec it leaves alone. `None` when the bytes are not a JSON
/// object.
pub fn decode_split(stored: &[u8], rv: u64) -> Option<Split<'_>> {
    let mut split: Split<'_> = serde_json::from_slice(stored).ok()?;
    split.kept.sort_by(|a, b| a.0.cmp(&b.0));
    set_resource_version(&mut split.decoded, rv);
    Some(split)
}

impl<'de> Deserialize<'de> for Split<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Split<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Split<'de>, A::Error> {
                let mut decoded = Map::new();
                let mut kept = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if STATUS_WRITE_FIELDS.contains(&key.as_str()) {
                        let value: Value = map.next_value()?;
                        decoded.insert(key, value);
                    } else {
                        let raw: &'de RawValue = map.next_value()?;
                        kept.push((key, raw));
                    }
                }
                Ok(Split {
                    decoded: Value::Object(decoded),
                    kept,
                })
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// How every object written by [`encode_for_storage`] begins.
const STORED_HEAD: &[u8] = b"{\"metadata\":{";

/// Serves stored bytes with `resourceVersion` set to `rv` (spliced in without parsing).
pub fn render(stored: &[u8], rv: u64, out: &mut Vec<u8>) {
    if let Some(rest) = stored.strip_prefix(STORED_HEAD) {
        out.extend_from_slice(STORED_HEAD);
        splice_version(rest, rv, out);
    } else {
        // Not written by encode_for_storage: fall back to a parse.
        let value = decode_stored(stored, rv);
        let _ = serde_json::to_writer(out, &value);
    }
}

/// Serves stored bytes as a `PartialObjectMetadata` (what kube-apiserver answers to
/// `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`): the object's
/// metadata with `resourceVersion` set to `rv`. The metadata's bytes are found by scanning
/// them, not by building values; the rest of the object is not read.
pub fn render_partial(stored: &[u8], rv: u64, out: &mut Vec<u8>) {
    match stored_metadata(stored) {
        Some(meta) => {
            out.extend_from_slice(PARTIAL_HEAD);
            out.push(b'{');
            splice_version(&meta[1..], rv, out);
            out.push(b'}');
        }
        None => partial_metadata_into(&decode_stored(stored, rv), out),
    }
}

/// How a `PartialObjectMetadata` begins, up to its metadata.
const PARTIAL_HEAD: &[u8] = br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

/// Writes a decoded object's metadata as a `PartialObjectMetadata`.
pub fn partial_metadata_into(obj: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(PARTIAL_HEAD);
    let _ = serde_json::to_writer(&mut *out, &obj["metadata"]);
    out.push(b'}');
}

/// Writes `"resourceVersion":"<rv>"` and then `rest`, the bytes of a JSON object after its
/// opening brace, with a comma between them unless the object is empty.
fn splice_version(rest: &[u8], rv: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(rv.to_string().as_bytes());
    out.push(b'"');
    if rest.first() != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
}

/// The bytes of the `metadata` object (`{...}`) of bytes written by [`encode_for_storage`].
/// `None` for bytes in another form, or that end before the metadata does.
fn stored_metadata(stored: &[u8]) -> Option<&[u8]> {
    stored.strip_prefix(STORED_HEAD)?;
    let start = STORED_HEAD.len() - 1;
    let len = object_len(&stored[start..])?;
    Some(&stored[start..start + len])
}

/// The length of the JSON object `json` begins with (its first byte is its `{`), found by
/// matching braces outside strings; `None` if it does not end within `json`.
///
/// It does not validate: the bytes are the server's own encoding of a stored object
/// ([`encode_for_storage`]), valid JSON, whose strings may hold braces, quotes (escaped as
/// `\"`) and backslashes (`\\`), and whose arrays hold nothing that changes the count of
/// braces. Skipping the value with serde, which checks every token, cost nearly twice as much
/// for each partial watch event or `PartialObjectMetadata` answer (round 44 of
/// docs/benchmarks.md: 16.5 k instructions per event on the control plane, 9.2 k this way).
fn object_len(json: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = json.get(at) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            b'"' => at = string_end(json, at)?,
            _ => {}
        }
        at += 1;
    }
    None
}

/// The position of the closing quote of the JSON string whose opening quote is at `start`:
/// past every escape (a backslash and the byte after it). `None` if it does not end in `json`.
fn string_end(json: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        at += memchr::memchr2(b'"', b'\\', json.get(at..)?)?;
        if json[at] == b'"' {
            return Some(at);
        }
        at += 2;
    }
}

/// Decodes stored bytes and sets the resourceVersion.
pub fn decode_stored(stored: &[u8], rv: u64) -> Value {
    let mut value: Value = serde_json::from_slice(stored).unwrap_or_else(|_| json!({}));
    set_resource_version(&mut value, rv);
    value
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(obj: &mut Value, rv: u64) {
    if let Some(meta) = metadata_mut(obj) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// `metadata` as a mutable map, created if missing.
pub fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut()
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.labels` as a map of strings.
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    if let Some(meta) = metadata_mut(obj) {
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(finalizers));
        }
    }
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// An owner reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRef {
    /// Owner UID.
    pub uid: String,
    /// Whether the owner's foreground deletion waits for this dependent.
    pub block_owner_deletion: bool,
}

/// `metadata.ownerReferences`.
pub fn owner_refs(obj: &Value) -> Vec<OwnerRef> {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| {
                    Some(OwnerRef {
                        uid: r.get("uid")?.as_str()?.to_owned(),
                        block_owner_deletion: r
                            .get("blockOwnerDeletion")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The few metadata fields selectors and namespace checks read, decoded (with
/// [`decode_stored_metadata`]) without building a full `Value`.
#[derive(Debug, Default, Deserialize)]
pub struct MetaFields {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Deletion timestamp.
    #[serde(default, rename = "deletionTimestamp")]
    pub deletion_timestamp: Option<String>,
}

/// Decodes only the `metadata` of stored bytes into `T`: the bytes start with the metadata
/// ([`encode_for_storage`]), so the rest of the object is never parsed (controllers that read
/// a few metadata fields of every written object need not decode whole objects). Bytes not
/// written by [`encode_for_storage`] are parsed whole. `None` when the metadata does not
/// decode as `T`.
pub fn decode_stored_metadata<T: serde::de::DeserializeOwned>(stored: &[u8]) -> Option<T> {
    if stored.starts_with(STORED_HEAD) {
        let rest = &stored[STORED_HEAD.len() - 1..];
        // One value is read; what follows it is left unread (no `end()` check).
        let mut de = serde_json::Deserializer::from_slice(rest);
        return T::deserialize(&mut de).ok();
    }
    #[derive(Deserialize)]
    struct Wrapped<T> {
        metadata: T,
    }
    serde_json::from_slice::<Wrapped<T>>(stored)
        .ok()
        .map(|w| w.metadata)
}

/// A random UID in the canonical 8-4-4-4-12 form (version 4).
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// kube-apiserver's generateName suffix: five characters from a consonant/digit alphabet.
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let prefix = if prefix.len() > 58 { &prefix[..58] } else { prefix };
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Now, as an RFC 3339 timestamp with second precision (metav1.Time).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now, with microseconds (metav1.MicroTime).
pub fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// Parses a metav1.Time.
pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn storage_round_trip_splices_resource_version() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "99"}, "data": {"k": "v"}});
        let stored = encode_for_storage(&obj);
        assert!(!String::from_utf8_lossy(&stored).contains("99"));
        let mut out = Vec::new();
        render(&stored, 7, &mut out);
        let served: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(served["metadata"]["resourceVersion"], "7");
        assert_eq!(served["metadata"]["name"], "a");
        assert_eq!(served["data"]["k"], "v");
        assert_eq!(decode_stored(&stored, 7), served);
    }

    #[test]
    fn storage_bytes_are_the_metadata_without_resource_version_then_the_rest() {
        for meta in [
            json!({"resourceVersion": "5"}),
            json!({"annotations": {"a\"b": "c\nd"}, "name": "x", "resourceVersion": "5"}),
            json!({"name": "x", "resourceVersion": "5", "uid": "u"}),
            json!({"labels": {"k": "v"}, "name": "x"}),
        ] {
            let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}});
            let mut without = meta.clone();
            without.as_object_mut().unwrap().remove("resourceVersion");
            let expected = format!(
                r#"{{"metadata":{without},"apiVersion":"v1","data":{{"k":"v"}},"kind":"ConfigMap"}}"#
            );
            assert_eq!(String::from_utf8(encode_for_storage(&obj)).unwrap(), expected);
        }
    }

    #[test]
    fn render_handles_empty_metadata_and_foreign_bytes() {
        let stored = encode_for_storage(&json!({"kind": "X"}));
        let mut out = Vec::new();
        render(&stored, 3, &mut out);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "3");
        let mut out = Vec::new();
        render(br#"{"kind":"Y","metadata":{"name":"n"}}"#, 4, &mut out);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "4");
    }

    #[test]
    fn an_object_ends_where_serde_ends_it_and_a_cut_one_nowhere() {
        let serde_len = |json: &[u8]| {
            let mut values = serde_json::Deserializer::from_slice(json).into_iter::<serde::de::IgnoredAny>();
            values.next().and_then(Result::ok).map(|_| values.byte_offset())
        };
        for value in [
            json!({}),
            json!({"a": {}}),
            json!({"a": [{"b": {}}, [], [[{}]], "]"], "c": {"d": {"e": {}}}}),
            // Strings holding braces, quotes, backslashes (one at a string's end), escapes of
            // control characters and non-ASCII text.
            json!({"{": "}", "x}": "{\"}\\", "y": "\\", "z": "\\\"}{", "w": "\u{1}\n\té€𝄞"}),
            json!({"managedFields": [{"fieldsV1": {"f:spec": {"k:{\"name\":\"app\"}": {".": {}}}}}]}),
        ] {
            let text = serde_json::to_vec(&value).unwrap();
            let mut json = text.clone();
            json.extend_from_slice(b",\"rest\":{\"}\":1}}");
            assert_eq!(object_len(&json), Some(text.len()), "{value}");
            assert_eq!(object_len(&json), serde_len(&json), "{value}");
            for cut in 0..text.len() {
                assert_eq!(object_len(&json[..cut]), None, "{value} cut at {cut}");
            }
        }
    }

    #[test]
    fn partial_metadata_is_the_stored_metadata_with_the_resource_version() {
        let partial = |meta: &Value| json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta});
        for meta in [
            json!({}),
            json!({"resourceVersion": "5"}),
            json!({"name": "a", "labels": {"k": "v"}, "resourceVersion": "5"}),
            // Strings holding what ends an object, escapes and non-ASCII text.
            json!({"name": "b", "annotations": {"x}": "{\"}\\", "y": "}\n\u{1}é€𝄞", "z]": "]["}}),
            json!({"name": "c", "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {"f:k": {}}}}],
                "ownerReferences": [{"uid": "u", "controller": true}], "generation": 3}),
        ] {
            let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {"k": "}{", "metadata": "not this"}});
            let stored = encode_for_storage(&obj);
            let mut out = Vec::new();
            render_partial(&stored, 42, &mut out);
            let served: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(served, partial(&decode_stored(&stored, 42)["metadata"]), "{meta}");
            // The rest of the object is not read.
            let mut cut = stored.clone();
            cut.truncate(stored.len() - 3);
            let mut out_cut = Vec::new();
            render_partial(&cut, 42, &mut out_cut);
            assert_eq!(out_cut, out);
        }
        // Bytes not written by encode_for_storage are parsed: metadata not first, or absent.
        for (foreign, meta) in [
            (
                &br#"{"kind":"Y","metadata":{"name":"n"}}"#[..],
                json!({"name": "n", "resourceVersion": "4"}),
            ),
            (&br#"{"kind":"Y"}"#[..], json!({"resourceVersion": "4"})),
        ] {
            let mut out = Vec::new();
            render_partial(foreign, 4, &mut out);
            assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), partial(&meta));
        }
    }

    #[test]
    fn uids_and_generated_names_have_kube_shapes() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(uid.matches('-').count(), 4);
        assert_ne!(uid, new_uid());
        let name = generate_name("web-");
        assert!(name.starts_with("web-") && name.len() == 9);
        assert!(crate::names::is_dns1123_subdomain(&name));
    }

    #[test]
    fn timestamps_parse_back() {
        assert!(parse_time(&now_rfc3339()).is_some());
        assert!(parse_time(&now_micro()).is_some());
    }

    #[test]
    fn metadata_alone_is_decoded_from_stored_bytes() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct Meta {
            name: String,
            #[serde(default, rename = "ownerReferences")]
            owner_references: Option<Vec<Value>>,
        }
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "ownerReferences": [{"uid": "u"}]}, "data": {"k": "v"}});
        let stored = encode_for_storage(&obj);
        let meta: Meta = decode_stored_metadata(&stored).unwrap();
        assert_eq!(meta.name, "a");
        assert_eq!(meta.owner_references, Some(vec![json!({"uid": "u"})]));
        // The rest is not read: even bytes that are not JSON after the metadata decode.
        let mut truncated = stored.clone();
        truncated.truncate(stored.len() - 5);
        assert_eq!(decode_stored_metadata::<Meta>(&truncated), Some(meta));
        // Foreign bytes (metadata not first) are parsed whole.
        let foreign = br#"{"kind":"Y","metadata":{"name":"n"}}"#;
        assert_eq!(decode_stored_metadata::<Meta>(foreign).unwrap().name, "n");
        assert_eq!(decode_stored_metadata::<Meta>(b"{\"metadata\":{}}"), None);
    }

    #[test]
    fn metadata_helpers() {
        let mut obj = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x"],
            "ownerReferences": [{"uid": "u1", "blockOwnerDeletion": true}, {"uid": "u2"}]}});
        assert_eq!(labels(&obj)["a"], "b");
        assert_eq!(finalizers(&obj), vec!["x"]);
        assert_eq!(
            owner_refs(&obj)[0],
            OwnerRef {
                uid: "u1".into(),
                block_owner_deletion: true
            }
        );
        set_finalizers(&mut obj, vec![]);
        assert!(obj["metadata"].get("finalizers").is_none());
        assert!(!is_deleting(&obj));
    }

    fn split_objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
                "metadata": {"name": "w", "namespace": "karmada-es-m1", "finalizers": ["f"]},
                "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "c", "annotations": {"q\"uote": "line\nbreak \u{e9}"}},
                    "data": {"k": "v"}}]}},
                "status": {"conditions": [{"type": "Applied", "status": "True"}]}}),
            // Kept fields before, between and after the decoded ones in key order.
            json!({"aaa": 1, "apiVersion": "example.com/v1", "b": [1, 2.5, null, true], "kind": "K",
                "metadata": {"name": "x"}, "spec": {}, "status": {}, "zzz": "last"}),
            // Nothing kept.
            json!({"apiVersion": "example.com/v1", "kind": "K", "metadata": {"name": "x"}}),
            // Nothing decoded but metadata.
            json!({"metadata": {"name": "x"}, "spec": {"a": {"b": {"c": [{}]}}}}),
            // No metadata at all.
            json!({"spec": 1}),
        ]
    }

    #[test]
    fn a_split_object_decodes_only_what_a_status_write_changes() {
        let stored = encode_for_storage(&split_objects()[0]);
        let split = decode_split(&stored, 12).unwrap();
        let decoded = split.decoded.as_object().unwrap();
        assert_eq!(
            decoded.keys().map(String::as_str).collect::<Vec<_>>(),
            ["apiVersion", "kind", "metadata", "status"]
        );
        assert_eq!(split.decoded["metadata"]["resourceVersion"], "12");
        assert_eq!(split.kept.len(), 1);
        assert_eq!(split.kept[0].0, "spec");
        let spec: Value = serde_json::from_str(split.kept[0].1.get()).unwrap();
        assert_eq!(spec, split_objects()[0]["spec"]);
    }

    #[test]
    fn a_split_object_encodes_to_the_bytes_of_the_whole_object() {
        for obj in split_objects() {
            let stored = encode_for_storage(&obj);
            let split = decode_split(&stored, 3).unwrap();
            assert_eq!(
                String::from_utf8(encode_with_kept(&split.decoded, &split.kept)).unwrap(),
                String::from_utf8(stored.clone()).unwrap(),
                "{obj}"
            );
            // A changed status and metadata are written among the kept bytes as the whole
            // object's encoding would write them.
            let mut decoded = split.decoded.clone();
            decoded["status"] = json!({"phase": "Done", "n": [1, 2]});
            decoded["metadata"]["labels"] = json!({"l": "v"});
            let mut whole = decode_stored(&stored, 3);
            whole["status"] = decoded["status"].clone();
            whole["metadata"]["labels"] = json!({"l": "v"});
            assert_eq!(
                encode_with_kept(&decoded, &split.kept),
                encode_for_storage(&whole),
                "{obj}"
            );
        }
    }

    #[test]
    fn bytes_in_another_order_split_into_sorted_kept_fields() {
        let stored = br#"{"zeta":{"z":1},"status":{"s":true},"metadata":{"name":"n"},"alpha":[1]}"#;
        let split = decode_split(stored, 1).unwrap();
        let keys: Vec<&str> = split.kept.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["alpha", "zeta"]);
        let expected = encode_for_storage(&decode_stored(stored, 1));
        assert_eq!(encode_with_kept(&split.decoded, &split.kept), expected);
    }

    #[test]
    fn bytes_that_are_not_an_object_do_not_split() {
        for stored in [
            &b"[1,2]"[..],
            b"\"s\"",
            b"{\"spec\":",
            b"",
            b"{\"spec\":1}trailing",
        ] {
            assert!(
                decode_split(stored, 1).is_none(),
                "{}",
                String::from_utf8_lossy(stored)
            );
        }
    }
}
