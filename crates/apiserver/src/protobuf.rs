//! Decoding of `application/vnd.kubernetes.protobuf` request bodies for built-in kinds.
//!
//! kubectl 1.32 and later send protobuf when they create objects through typed clients
//! (`kubectl create namespace`, `create configmap`, `create deployment`, `run`, ...). The body
//! is kube-apiserver's envelope: the magic `k8s\0` and a `runtime.Unknown` message carrying
//! the TypeMeta and the object's bytes. The object is decoded with the field table in
//! `protobuf_schema.rs` (generated from the Go types' tags) into the JSON kube-apiserver would
//! have received, honouring `omitempty` and pointer fields, so it then takes the JSON path.
//! Responses are always JSON (clients accept it).

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::protobuf_schema::{MESSAGES, ROOTS};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// A field type in the table (some variants only appear for kinds not served yet).
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) enum Ty {
    String,
    Bytes,
    Int32,
    Int64,
    Bool,
    Double,
    Time,
    MicroTime,
    Duration,
    FieldsV1,
    Quantity,
    IntOrString,
    RawExtension,
    Message(usize),
    Map(&'static Ty),
    List(&'static Ty),
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct Field {
    pub number: u32,
    pub json: &'static str,
    pub ty: Ty,
    pub repeated: bool,
    pub pointer: bool,
    pub omitempty: bool,
    pub inline: bool,
}

/// One message (a Go struct).
#[derive(Debug)]
pub(crate) struct Message {
    #[allow(dead_code)]
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// Decodes a protobuf request body into the object's JSON form.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let payload = body
        .strip_prefix(b"k8s\x00")
        .ok_or("the protobuf body does not start with the Kubernetes magic number")?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut r = Reader::new(payload);
    while let Some((number, wire)) = r.key()? {
        match (number, wire) {
            (1, 2) => {
                let mut tm = Reader::new(r.bytes()?);
                while let Some((n, w)) = tm.key()? {
                    match (n, w) {
                        (1, 2) => api_version = tm.string()?,
                        (2, 2) => kind = tm.string()?,
                        _ => tm.skip(w)?,
                    }
                }
            }
            (2, 2) => raw = r.bytes()?,
            (3, 2) => {
                let encoding = r.string()?;
                if !encoding.is_empty() {
                    return Err(format!("content encoding {encoding:?} is not supported"));
                }
            }
            _ => r.skip(wire)?,
        }
    }
    let root = ROOTS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, i)| *i)
        .ok_or_else(|| {
            format!("protobuf is not supported for {api_version} {kind}; send application/json")
        })?;
    let mut obj = decode_message(raw, root)?;
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(api_version));
        map.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

fn decode_message(bytes: &[u8], index: usize) -> Result<Value, String> {
    let message = MESSAGES.get(index).ok_or("protobuf table index out of range")?;
    let mut out = Map::new();
    let mut r = Reader::new(bytes);
    while let Some((number, wire)) = r.key()? {
        let Some(field) = message.fields.iter().find(|f| f.number == number) else {
            r.skip(wire)?;
            continue;
        };
        if field.inline {
            let Ty::Message(i) = field.ty else {
                r.skip(wire)?;
                continue;
            };
            if let Value::Object(inner) = decode_message(r.bytes()?, i)? {
                out.extend(inner);
            }
            continue;
        }
        if let Ty::Map(value_ty) = &field.ty {
            let (key, value) = decode_map_entry(r.bytes()?, value_ty)?;
            let entry = out.entry(field.json).or_insert_with(|| json!({}));
            if let Some(m) = entry.as_object_mut() {
                m.insert(key, value);
            }
            continue;
        }
        if field.repeated {
            let values = decode_repeated(&mut r, wire, &field.ty)?;
            let entry = out.entry(field.json).or_insert_with(|| json!([]));
            if let Some(a) = entry.as_array_mut() {
                a.extend(values);
            }
            continue;
        }
        let value = decode_value(&mut r, wire, &field.ty)?;
        if !field.pointer && (is_zero_time(&value, &field.ty) || (field.omitempty && is_zero_scalar(&value)))
        {
            continue;
        }
        out.insert(field.json.to_owned(), value);
    }
    Ok(Value::Object(out))
}

fn is_zero_scalar(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn is_zero_time(v: &Value, ty: &Ty) -> bool {
    matches!(ty, Ty::Time | Ty::MicroTime) && v.is_null()
}

fn decode_map_entry(bytes: &[u8], value_ty: &Ty) -> Result<(String, Value), String> {
    let mut r = Reader::new(bytes);
    let mut key = String::new();
    let mut value = None;
    while let Some((n, w)) = r.key()? {
        match n {
            1 => key = r.string()?,
            2 => {
                value = Some(match value_ty {
                    Ty::List(inner) => {
                        // A map of lists is a map of messages wrapping `repeated items = 1`.
                        let mut lr = Reader::new(r.bytes()?);
                        let mut items = Vec::new();
                        while let Some((_, lw)) = lr.key()? {
                            items.extend(decode_repeated(&mut lr, lw, inner)?);
                        }
                        Value::Array(items)
                    }
                    ty => decode_value(&mut r, w, ty)?,
                })
            }
            _ => r.skip(w)?,
        }
    }
    let value = value.unwrap_or_else(|| zero_of(value_ty));
    Ok((key, value))
}

fn zero_of(ty: &Ty) -> Value {
    match ty {
        Ty::String | Ty::Bytes | Ty::Quantity => json!(""),
        Ty::Int32 | Ty::Int64 | Ty::Double => json!(0),
        Ty::Bool => json!(false),
        Ty::Message(_) | Ty::Map(_) => json!({}),
        Ty::List(_) => json!([]),
        _ => Value::Null,
    }
}

fn decode_repeated(r: &mut Reader, wire: u8, ty: &Ty) -> Result<Vec<Value>, String> {
    // Packed scalars come as one length-delimited run.
    let packable = matches!(ty, Ty::Int32 | Ty::Int64 | Ty::Bool | Ty::Double);
    if packable && wire == 2 {
        let mut inner = Reader::new(r.bytes()?);
        let mut out = Vec::new();
        while !inner.done() {
            let w = if matches!(ty, Ty::Double) { 1 } else { 0 };
            out.push(decode_value(&mut inner, w, ty)?);
        }
        return Ok(out);
    }
    Ok(vec![decode_value(r, wire, ty)?])
}

fn decode_value(r: &mut Reader, wire: u8, ty: &Ty) -> Result<Value, String> {
    Ok(match ty {
        Ty::String | Ty::Quantity if wire == 2 && matches!(ty, Ty::String) => json!(r.string()?),
        Ty::Quantity => {
            let mut q = Reader::new(r.bytes()?);
            let mut s = String::new();
            while let Some((n, w)) = q.key()? {
                if n == 1 { s = q.string()? } else { q.skip(w)? }
            }
            json!(s)
        }
        Ty::String => return Err(format!("wire type {wire} for a string field")),
        Ty::Bytes => json!(base64::engine::general_purpose::STANDARD.encode(r.bytes()?)),
        Ty::Int32 => json!(r.varint()? as i64 as i32),
        Ty::Int64 => json!(r.varint()? as i64),
        Ty::Bool => json!(r.varint()? != 0),
        Ty::Double => json!(f64::from_bits(r.fixed64()?)),
        Ty::Time | Ty::MicroTime => {
            let mut t = Reader::new(r.bytes()?);
            let (mut seconds, mut nanos) = (0i64, 0i64);
            while let Some((n, w)) = t.key()? {
                match n {
                    1 => seconds = t.varint()? as i64,
                    2 => nanos = t.varint()? as i64,
                    _ => t.skip(w)?,
                }
            }
            if seconds == 0 && nanos == 0 {
                Value::Null
            } else {
                let ts = jiff::Timestamp::new(seconds, nanos as i32).map_err(|e| e.to_string())?;
                if matches!(ty, Ty::MicroTime) {
                    json!(ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string())
                } else {
                    json!(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                }
            }
        }
        Ty::Duration => {
            let mut d = Reader::new(r.bytes()?);
            let mut nanos = 0i64;
            while let Some((n, w)) = d.key()? {
                if n == 1 {
                    nanos = d.varint()? as i64
                } else {
                    d.skip(w)?
                }
            }
            json!(go_duration(nanos))
        }
        Ty::FieldsV1 | Ty::RawExtension => {
            let mut f = Reader::new(r.bytes()?);
            let mut raw: &[u8] = &[];
            while let Some((n, w)) = f.key()? {
                if n == 1 { raw = f.bytes()? } else { f.skip(w)? }
            }
            if raw.is_empty() {
                json!({})
            } else {
                serde_json::from_slice(raw).map_err(|e| format!("embedded JSON: {e}"))?
            }
        }
        Ty::IntOrString => {
            let mut f = Reader::new(r.bytes()?);
            let (mut kind, mut int, mut string) = (0u64, 0i64, String::new());
            while let Some((n, w)) = f.key()? {
                match n {
                    1 => kind = f.varint()?,
                    2 => int = f.varint()? as i64 as i32 as i64,
                    3 => string = f.string()?,
                    _ => f.skip(w)?,
                }
            }
            if kind == 1 { json!(string) } else { json!(int) }
        }
        Ty::Message(i) => decode_message(r.bytes()?, *i)?,
        Ty::Map(_) | Ty::List(_) => return Err("nested collection outside a field".into()),
    })
}

/// Go's `time.Duration.String()` for whole nanoseconds.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        return format!(
            "{sign}{}",
            if n.is_multiple_of(1_000_000) {
                format!("{}ms", n / 1_000_000)
            } else {
                format!("{n}ns")
            }
        );
    }
    let total_secs = n / 1_000_000_000;
    let frac = n % 1_000_000_000;
    let (h, m, s) = (total_secs / 3600, (total_secs % 3600) / 60, total_secs % 60);
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{frac:09}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => format!("{sign}{secs}"),
        (0, m) => format!("{sign}{m}m{secs}"),
        (h, m) => format!("{sign}{h}h{m}m{secs}"),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut result = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            result |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(result);
            }
        }
        Err("varint too long".into())
    }

    fn key(&mut self) -> Result<Option<(u32, u8)>, String> {
        if self.done() {
            return Ok(None);
        }
        let k = self.varint()?;
        Ok(Some(((k >> 3) as u32, (k & 7) as u8)))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.varint()? as usize;
        let end = self
            .pos
            .checked_add(len)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn string(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "a string field is not UTF-8".to_owned())
    }

    fn fixed64(&mut self) -> Result<u64, String> {
        let end = self.pos + 8;
        let bytes = self.buf.get(self.pos..end).ok_or("truncated fixed64")?;
        self.pos = end;
        let mut a = [0u8; 8];
        a.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(a))
    }

    fn skip(&mut self, wire: u8) -> Result<(), String> {
        match wire {
            0 => {
                self.varint()?;
            }
            1 => {
                self.fixed64()?;
            }
            2 => {
                self.bytes()?;
            }
            5 => {
                let end = self.pos + 4;
                if end > self.buf.len() {
                    return Err("truncated fixed32".into());
                }
                self.pos = end;
            }
            other => return Err(format!("unsupported wire type {other}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field_bytes(out: &mut Vec<u8>, n: u32, bytes: &[u8]) {
        varint(out, u64::from(n) << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    fn field_varint(out: &mut Vec<u8>, n: u32, v: u64) {
        varint(out, u64::from(n) << 3);
        varint(out, v);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        field_bytes(&mut tm, 1, api_version.as_bytes());
        field_bytes(&mut tm, 2, kind.as_bytes());
        let mut unknown = Vec::new();
        field_bytes(&mut unknown, 1, &tm);
        field_bytes(&mut unknown, 2, raw);
        field_bytes(&mut unknown, 3, b"");
        field_bytes(&mut unknown, 4, b"");
        let mut out = b"k8s\x00".to_vec();
        out.extend(unknown);
        out
    }

    #[test]
    fn decodes_a_configmap_like_kubectl_sends_it() {
        // metadata{name: "cfg", creationTimestamp: {}}, data{a: "1"}, binaryData{b: [0xff]}
        let mut meta = Vec::new();
        field_bytes(&mut meta, 1, b"cfg");
        field_bytes(&mut meta, 8, b""); // zero Time: omitted
        let mut entry = Vec::new();
        field_bytes(&mut entry, 1, b"a");
        field_bytes(&mut entry, 2, b"1");
        let mut bin = Vec::new();
        field_bytes(&mut bin, 1, b"b");
        field_bytes(&mut bin, 2, &[0xff]);
        let mut cm = Vec::new();
        field_bytes(&mut cm, 1, &meta);
        field_bytes(&mut cm, 2, &entry);
        field_bytes(&mut cm, 3, &bin);
        let obj = decode(&envelope("v1", "ConfigMap", &cm)).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}, "binaryData": {"b": "/w=="}})
        );
    }

    #[test]
    fn a_secret_with_string_data_decodes_to_the_json_kube_apiserver_would_get() {
        // metadata{name: "s"}, data{token: "old"}, stringData{token: "new", extra: "ü"}: the
        // JSON path then folds stringData into data, exactly as for a JSON body.
        let mut meta = Vec::new();
        field_bytes(&mut meta, 1, b"s");
        let map_entry = |key: &[u8], value: &[u8]| {
            let mut entry = Vec::new();
            field_bytes(&mut entry, 1, key);
            field_bytes(&mut entry, 2, value);
            entry
        };
        let mut secret = Vec::new();
        field_bytes(&mut secret, 1, &meta);
        field_bytes(&mut secret, 2, &map_entry(b"token", b"old"));
        field_bytes(&mut secret, 4, &map_entry(b"token", b"new"));
        field_bytes(&mut secret, 4, &map_entry(b"extra", "ü".as_bytes()));
        let mut obj = decode(&envelope("v1", "Secret", &secret)).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                   "data": {"token": "b2xk"}, "stringData": {"token": "new", "extra": "ü"}})
        );
        obj = crate::builtin::BuiltinKind::Secret.decode(&obj).unwrap();
        crate::builtin::fold_secret_string_data(&mut obj);
        assert_eq!(obj["data"], json!({"token": "bmV3", "extra": "w7w="}));
        assert!(obj.get("stringData").is_none());
    }

    #[test]
    fn pointer_zeros_survive_and_omitempty_zeros_do_not() {
        // DeploymentSpec: replicas (pointer) = 0, minReadySeconds (omitempty) = 0, paused = false.
        let mut spec = Vec::new();
        field_varint(&mut spec, 1, 0);
        field_varint(&mut spec, 5, 0);
        field_varint(&mut spec, 7, 0);
        let mut d = Vec::new();
        field_bytes(&mut d, 1, b"");
        field_bytes(&mut d, 2, &spec);
        let obj = decode(&envelope("apps/v1", "Deployment", &d)).unwrap();
        assert_eq!(obj["spec"], json!({"replicas": 0}));
    }

    #[test]
    fn int_or_string_and_negative_numbers() {
        // ServicePort{port: 80, targetPort: IntOrString{type: 1, strVal: "http"}}
        let mut target = Vec::new();
        field_varint(&mut target, 1, 1);
        field_bytes(&mut target, 3, b"http");
        let mut port = Vec::new();
        field_varint(&mut port, 3, 80);
        field_bytes(&mut port, 4, &target);
        let mut spec = Vec::new();
        field_bytes(&mut spec, 1, &port);
        let mut svc = Vec::new();
        field_bytes(&mut svc, 2, &spec);
        let obj = decode(&envelope("v1", "Service", &svc)).unwrap();
        assert_eq!(obj["spec"]["ports"][0], json!({"port": 80, "targetPort": "http"}));
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(r.varint().unwrap() as i64, -1);
    }

    #[test]
    fn rejects_garbage_and_unknown_kinds() {
        assert!(decode(b"nope").is_err());
        assert!(
            decode(&envelope("v1", "Frobnicator", b""))
                .unwrap_err()
                .contains("not supported")
        );
        let mut truncated = envelope("v1", "ConfigMap", &[0x0a, 0x05, b'a']);
        truncated.truncate(truncated.len() - 1);
        assert!(decode(&truncated).is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(300_000_000_000), "5m0s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(0), "0s");
    }
}
