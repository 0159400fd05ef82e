//! The content fingerprint of a dependency object, as `docs/architecture.md` defines it for
//! templates: SHA-256 (first 16 hex digits) of the object's canonical JSON without `status`,
//! `metadata.managedFields`, `metadata.resourceVersion`, `metadata.generation` and without
//! labels/annotations of Karmada's or flotilla's domains.
//!
//! An attached binding's `spec.resource.resourceVersion` moves only when the fingerprint does,
//! so writes that do not change what is propagated (a claim annotation, a status) do not make
//! execution re-apply the object everywhere.

use std::fmt::Write as _;

use flotilla_api::well_known::is_system_metadata_key;
use serde_json::Value;

/// The fingerprint of `object`: 16 lower-case hex digits.
pub fn fingerprint(object: &Value) -> String {
    let mut stripped = object.clone();
    if let Some(map) = stripped.as_object_mut() {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in ["managedFields", "resourceVersion", "generation"] {
                metadata.remove(field);
            }
            for field in ["labels", "annotations"] {
                if let Some(entries) = metadata.get_mut(field).and_then(Value::as_object_mut) {
                    entries.retain(|key, _| !is_system_metadata_key(key));
                }
            }
        }
    }
    let mut canonical = String::new();
    write_canonical(&stripped, &mut canonical);
    let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in digest.as_ref().iter().take(8) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// JSON with object keys sorted, whatever map type `serde_json` was built with (a crate in the
/// build enabling `preserve_order` must not change fingerprints).
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config_map() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "app-config",
                "namespace": "default",
                "uid": "u1",
                "resourceVersion": "10",
                "generation": 1,
                "labels": {"app": "web", "karmada.io/managed": "true"},
                "annotations": {"flotilla.io/traceparent": "00-1-2-01", "note": "x"},
                "managedFields": [{"manager": "kubectl"}],
            },
            "data": {"a": "1", "b": "2"},
            "status": {"whatever": true},
        })
    }

    #[test]
    fn sixteen_hex_digits() {
        let fp = fingerprint(&config_map());
        assert_eq!(fp.len(), 16);
        assert!(
            fp.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn ignores_bookkeeping() {
        let base = fingerprint(&config_map());
        let mut other = config_map();
        other["metadata"]["resourceVersion"] = json!("11");
        other["metadata"]["generation"] = json!(2);
        other["metadata"]["managedFields"] = json!([]);
        other["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] = json!("p");
        other["metadata"]["annotations"]["flotilla.io/traceparent"] = json!("00-3-4-01");
        other["status"] = json!({"other": 1});
        assert_eq!(fingerprint(&other), base);
    }

    #[test]
    fn key_order_does_not_matter() {
        let a = json!({"data": {"a": "1", "b": "2"}, "kind": "ConfigMap"});
        let b: Value = serde_json::from_str(r#"{"kind":"ConfigMap","data":{"b":"2","a":"1"}}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
    }

    #[test]
    fn content_changes_change_it() {
        let base = fingerprint(&config_map());
        for change in [
            |v: &mut Value| v["data"]["a"] = json!("changed"),
            |v: &mut Value| v["metadata"]["labels"]["app"] = json!("api"),
            |v: &mut Value| v["metadata"]["annotations"]["note"] = json!("y"),
            |v: &mut Value| v["metadata"]["uid"] = json!("u2"),
        ] {
            let mut changed = config_map();
            change(&mut changed);
            assert_ne!(fingerprint(&changed), base, "{changed}");
        }
    }

    #[test]
    fn strings_are_escaped() {
        let a = json!({"data": {"k": "a\",\"b"}});
        let b = json!({"data": {"k": "a", "b": ""}});
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }
}
