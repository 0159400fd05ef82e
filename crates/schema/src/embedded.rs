//! `x-kubernetes-embedded-resource` objects: apiVersion/kind/metadata checks
//! (apiextensions-apiserver's `objectmeta.Validate`) and the coercion of their `metadata`
//! through `ObjectMeta` (`objectmeta.Coerce`).

use serde_json::Value;

use crate::error::FieldError;
use crate::node::Node;
use crate::objectmeta::{self, NameRule};

fn child(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// The first type error `objectmeta.Coerce` would raise (apiVersion/kind not strings, metadata
/// not decodable), without changing anything.
pub(crate) fn coerce_error(path: &str, x: &Value, s: &Node, is_resource_root: bool) -> Option<FieldError> {
    let mut copy = x.clone();
    coerce(path, &mut copy, Some(s), is_resource_root, &mut Vec::new()).err()
}

/// `objectmeta.Coerce`: checks apiVersion/kind types in embedded objects and replaces their
/// `metadata` with its `ObjectMeta` round trip, recording dropped unknown fields.
pub(crate) fn coerce(
    path: &str,
    x: &mut Value,
    s: Option<&Node>,
    is_resource_root: bool,
    unknown: &mut Vec<String>,
) -> Result<(), FieldError> {
    let Some(s) = s else { return Ok(()) };
    match x {
        Value::Object(map) => {
            if s.embedded_resource || is_resource_root {
                for k in ["apiVersion", "kind"] {
                    if let Some(v) = map.get(k) {
                        if !v.is_string() {
                            return Err(FieldError::invalid(child(path, k), v.clone(), "must be a string"));
                        }
                    }
                }
                if let Some(meta) = map.get("metadata") {
                    match objectmeta::coerce_object_meta(meta, path) {
                        Ok(c) => {
                            unknown.extend(c.unknown);
                            map.insert("metadata".to_string(), c.value);
                        }
                        Err(e) => return Err(FieldError::invalid(child(path, "metadata"), meta.clone(), e)),
                    }
                }
            }
            let mut keys: Vec<String> = map.keys().cloned().collect();
            keys.sort();
            for k in keys {
                let Some(v) = map.get_mut(&k) else { continue };
                if let Some(prop) = s.properties.get(&k) {
                    coerce(&child(path, &k), v, Some(prop), false, unknown)?;
                } else if s.additional_properties.is_some() {
                    coerce(&format!("{path}[{k}]"), v, s.additional_schema(), false, unknown)?;
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                coerce(&format!("{path}[{i}]"), v, s.items.as_deref(), false, unknown)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `objectmeta.Validate`: embedded objects need a valid apiVersion and kind, and valid
/// metadata if present.
pub(crate) fn validate(path: &str, x: &Value, s: &Node, is_resource_root: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(path, x, Some(s), is_resource_root, &mut errs);
    errs
}

fn walk(path: &str, x: &Value, s: Option<&Node>, is_resource_root: bool, errs: &mut Vec<FieldError>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => {
            if s.embedded_resource || is_resource_root {
                embedded_resource(path, map, errs);
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                let v = &map[k.as_str()];
                if let Some(prop) = s.properties.get(k.as_str()) {
                    walk(&child(path, k), v, Some(prop), false, errs);
                } else if s.additional_properties.is_some() {
                    walk(&format!("{path}[{k}]"), v, s.additional_schema(), false, errs);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(&format!("{path}[{i}]"), v, s.items.as_deref(), false, errs);
            }
        }
        _ => {}
    }
}

fn embedded_resource(path: &str, x: &serde_json::Map<String, Value>, errs: &mut Vec<FieldError>) {
    if !x.contains_key("apiVersion") {
        errs.push(FieldError::required(child(path, "apiVersion"), ""));
    }
    if !x.contains_key("kind") {
        errs.push(FieldError::required(child(path, "kind"), ""));
    }
    if let Some(v) = x.get("apiVersion") {
        let p = child(path, "apiVersion");
        match v {
            Value::String(s) if s.is_empty() => {
                errs.push(FieldError::invalid(p, v.clone(), "must not be empty"))
            }
            Value::String(s) => {
                if let Err(e) = objectmeta::parse_group_version(s) {
                    errs.push(FieldError::invalid(p, v.clone(), e));
                }
            }
            _ => errs.push(FieldError::invalid(p, v.clone(), "must be a string")),
        }
    }
    if let Some(v) = x.get("kind") {
        let p = child(path, "kind");
        match v {
            Value::String(s) if s.is_empty() => {
                errs.push(FieldError::invalid(p, v.clone(), "must not be empty"))
            }
            Value::String(s) => {
                let msgs = objectmeta::is_dns1035_label(&s.to_lowercase());
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        p,
                        v.clone(),
                        format!(
                            "may have mixed case, but should otherwise match: {}",
                            msgs.join(",")
                        ),
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(p, v.clone(), "must be a string")),
        }
    }
    if let Some(v) = x.get("metadata") {
        let p = child(path, "metadata");
        match objectmeta::coerce_object_meta(v, path) {
            Err(e) => errs.push(FieldError::invalid(p, v.clone(), e)),
            Ok(c) => {
                let mut meta = c.value;
                let requires_namespace = meta
                    .get("namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty());
                if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                    if let Value::Object(m) = &mut meta {
                        m.insert("name".into(), Value::String("fakename".into()));
                    }
                }
                errs.extend(objectmeta::validate_object_meta(
                    &meta,
                    requires_namespace,
                    NameRule::PathSegment,
                    &p,
                ));
            }
        }
    }
}
