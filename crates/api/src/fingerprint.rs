//! The template fingerprint: what "the template changed" means. One implementation for every
//! service: the detector compares it for lazy activation, the dependency distributor moves an
//! attached binding's `spec.resource.resourceVersion` only when its object's fingerprint moves.
//!
//! Contract (`docs/architecture.md`, "Resource templates"): SHA-256, first 16 hex digits, of the
//! template's canonical JSON without `status`, `metadata.managedFields`,
//! `metadata.resourceVersion`, `metadata.generation`, and without labels and annotations whose
//! key prefix is `karmada.io`, `*.karmada.io`, `flotilla.io` or `*.flotilla.io` (except
//! `flotilla.io/apply-once-only`, user content that execution propagates; see
//! [`is_system_metadata_key`]).
//!
//! Canonical JSON here means object keys sorted bytewise at every level and no whitespace, so
//! the value does not depend on the order an API server wrote the fields in (nor on whether
//! `serde_json` was built with `preserve_order`). A label or annotation map that is empty after
//! the system keys are removed counts as absent, so claiming a template (which adds the first
//! annotations to it) does not change its fingerprint.

use std::fmt::Write as _;

use crate::well_known::is_system_metadata_key;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fingerprint of a template (any object, as JSON).
pub fn fingerprint(object: &Value) -> String {
    let mut hasher = Sha256::new();
    let mut buffer = String::new();
    match object {
        Value::Object(map) => {
            buffer.push('{');
            let mut first = true;
            for (key, value) in sorted(map) {
                match key.as_str() {
                    "status" => continue,
                    "metadata" => {
                        let Some(metadata) = value.as_object() else {
                            write_entry(&mut buffer, &mut first, key, value);
                            continue;
                        };
                        separator(&mut buffer, &mut first);
                        write_string(&mut buffer, key);
                        buffer.push(':');
                        write_metadata(&mut buffer, metadata);
                    }
                    _ => write_entry(&mut buffer, &mut first, key, value),
                }
            }
            buffer.push('}');
        }
        other => write_value(&mut buffer, other),
    }
    hasher.update(buffer.as_bytes());
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(16);
    for byte in &digest[..8] {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn write_metadata(buffer: &mut String, metadata: &serde_json::Map<String, Value>) {
    buffer.push('{');
    let mut first = true;
    for (key, value) in sorted(metadata) {
        match key.as_str() {
            "managedFields" | "resourceVersion" | "generation" => {}
            "labels" | "annotations" => match value.as_object() {
                Some(map) => {
                    let kept: Vec<(&String, &Value)> = sorted(map)
                        .into_iter()
                        .filter(|(k, _)| !is_system_metadata_key(k))
                        .collect();
                    if kept.is_empty() {
                        continue;
                    }
                    separator(buffer, &mut first);
                    write_string(buffer, key);
                    buffer.push_str(":{");
                    let mut inner_first = true;
                    for (k, v) in kept {
                        write_entry(buffer, &mut inner_first, k, v);
                    }
                    buffer.push('}');
                }
                None if value.is_null() => {}
                None => write_entry(buffer, &mut first, key, value),
            },
            _ => write_entry(buffer, &mut first, key, value),
        }
    }
    buffer.push('}');
}

fn sorted(map: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

fn separator(buffer: &mut String, first: &mut bool) {
    if !*first {
        buffer.push(',');
    }
    *first = false;
}

fn write_entry(buffer: &mut String, first: &mut bool, key: &str, value: &Value) {
    separator(buffer, first);
    write_string(buffer, key);
    buffer.push(':');
    write_value(buffer, value);
}

fn write_string(buffer: &mut String, s: &str) {
    // serde_json's string escaping is canonical (one spelling per string).
    buffer.push_str(&Value::String(s.to_owned()).to_string());
}

fn write_value(buffer: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            buffer.push('{');
            let mut first = true;
            for (key, value) in sorted(map) {
                write_entry(buffer, &mut first, key, value);
            }
            buffer.push('}');
        }
        Value::Array(items) => {
            buffer.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    buffer.push(',');
                }
                write_value(buffer, item);
            }
            buffer.push(']');
        }
        scalar => buffer.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn base() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "uid": "u1",
                "resourceVersion": "10",
                "generation": 3,
                "managedFields": [{"manager": "kubectl"}],
                "labels": {"app": "web"},
                "annotations": {"note": "x"},
            },
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"readyReplicas": 2},
        })
    }

    fn with(mut value: Value, pointer: &str, new: Value) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let target = if parent.is_empty() {
            &mut value
        } else {
            value.pointer_mut(parent).unwrap()
        };
        if new.is_null() {
            target.as_object_mut().unwrap().remove(key);
        } else {
            target.as_object_mut().unwrap().insert(key.to_owned(), new);
        }
        value
    }

    #[test]
    fn format_is_16_hex_digits() {
        let fp = fingerprint(&base());
        assert_eq!(fp.len(), 16);
        assert!(
            fp.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{fp}"
        );
        assert_eq!(fp, fingerprint(&base()), "deterministic");
    }

    #[test]
    fn excluded_fields_do_not_count() {
        let fp = fingerprint(&base());
        for (pointer, value) in [
            ("/status", json!({"readyReplicas": 0})),
            ("/status", Value::Null),
            ("/metadata/managedFields", json!([{"manager": "other"}])),
            ("/metadata/managedFields", Value::Null),
            ("/metadata/resourceVersion", json!("11")),
            ("/metadata/resourceVersion", Value::Null),
            ("/metadata/generation", json!(4)),
            ("/metadata/generation", Value::Null),
        ] {
            assert_eq!(
                fingerprint(&with(base(), pointer, value.clone())),
                fp,
                "{pointer} = {value}"
            );
        }
    }

    #[test]
    fn system_labels_and_annotations_do_not_count() {
        let fp = fingerprint(&base());
        for key in [
            "karmada.io/managed",
            "propagationpolicy.karmada.io/name",
            "clusterpropagationpolicy.karmada.io/permanent-id",
            "flotilla.io/lazy-baseline",
            "flotilla.io/content-revision",
            "flotilla.io/activate",
            "x.flotilla.io/y",
        ] {
            for field in ["labels", "annotations"] {
                let pointer = format!("/metadata/{field}/{key}");
                let mut changed = base();
                changed["metadata"][field][key] = json!("v");
                assert_eq!(fingerprint(&changed), fp, "{pointer}");
            }
        }
    }

    #[test]
    fn first_claim_annotation_does_not_count() {
        let bare = with(
            with(base(), "/metadata/annotations", Value::Null),
            "/metadata/labels",
            Value::Null,
        );
        let fp = fingerprint(&bare);
        let claimed = with(
            with(
                bare.clone(),
                "/metadata/annotations",
                json!({"propagationpolicy.karmada.io/name": "pp"}),
            ),
            "/metadata/labels",
            json!({"propagationpolicy.karmada.io/permanent-id": "u"}),
        );
        assert_eq!(fingerprint(&claimed), fp);
        let empty_maps = with(
            with(bare, "/metadata/annotations", json!({})),
            "/metadata/labels",
            json!({}),
        );
        assert_eq!(fingerprint(&empty_maps), fp);
    }

    #[test]
    fn user_changes_count() {
        let fp = fingerprint(&base());
        let mut changes = vec![
            with(base(), "/spec/replicas", json!(3)),
            with(base(), "/metadata/labels/refresh-time", json!("1700000000")),
            with(base(), "/metadata/labels/app", json!("api")),
            with(base(), "/metadata/labels", Value::Null),
            with(base(), "/metadata/annotations/note", json!("y")),
            with(
                base(),
                "/metadata/annotations/example.com~1karmada.io",
                json!("v"),
            ),
            with(base(), "/metadata/uid", json!("u2")),
            with(base(), "/metadata/finalizers", json!(["x"])),
            with(base(), "/data", json!({"k": "v"})),
        ];
        // A key that only looks like a system key.
        let mut lookalike = base();
        lookalike["metadata"]["labels"]["notkarmada.io/x"] = json!("v");
        changes.push(lookalike);
        // The per-template apply-once-only mode is user content that execution propagates.
        let mut apply_once = base();
        apply_once["metadata"]["annotations"]["flotilla.io/apply-once-only"] = json!("on");
        changes.push(apply_once);
        for changed in changes {
            assert_ne!(fingerprint(&changed), fp, "{changed}");
        }
    }

    #[test]
    fn key_order_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","labels":{"b":"2","a":"1"}},"data":{"y":"1","x":"2"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"data":{"x":"2","y":"1"},"metadata":{"labels":{"a":"1","b":"2"},"name":"a"},"apiVersion":"v1","kind":"ConfigMap"}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        // Array order does matter.
        let c = with(a.clone(), "/data", json!({"list": [1, 2]}));
        let d = with(a, "/data", json!({"list": [2, 1]}));
        assert_ne!(fingerprint(&c), fingerprint(&d));
    }

    #[test]
    fn malformed_metadata_is_fingerprinted_as_is() {
        let odd = json!({"metadata": "not an object", "spec": 1});
        let odd2 = json!({"metadata": "different", "spec": 1});
        assert_ne!(fingerprint(&odd), fingerprint(&odd2));
        let labels_not_map = json!({"metadata": {"labels": "x"}});
        let labels_not_map2 = json!({"metadata": {"labels": "y"}});
        assert_ne!(fingerprint(&labels_not_map), fingerprint(&labels_not_map2));
        assert_eq!(fingerprint(&json!(null)).len(), 16);
    }

    #[test]
    fn strings_are_escaped() {
        let a = json!({"data": {"k": "a\",\"b"}});
        let b = json!({"data": {"k": "a", "b": ""}});
        assert_ne!(fingerprint(&a), fingerprint(&b));
    }
}
