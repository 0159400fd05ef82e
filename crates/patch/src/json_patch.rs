//! JSON patch (RFC 6902) as kube-apiserver applies it: the semantics and error texts of
//! evanphx/json-patch v4, which kube-apiserver uses for `application/json-patch+json`.
//!
//! Quirks kept on purpose because clients can observe them: `replace` of a missing object member
//! adds it, `copy` from a missing member copies `null`, negative array indices count from the
//! end, and a `path` without a leading `/` has its first segment ignored.

use serde_json::{Map, Value};

use crate::error::PatchError;

/// kube-apiserver's limit on the number of operations in one JSON patch.
pub const MAX_OPERATIONS: usize = 10_000;

/// Apply a JSON patch (`application/json-patch+json`) to `doc`.
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = match patch {
        Value::Array(ops) => ops,
        other => {
            return Err(PatchError::BadRequest(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                json_kind(other)
            )));
        }
    };
    let mut decoded = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Value::Object(m) => decoded.push(m),
            Value::Null => {
                return Err(PatchError::BadRequest(
                    "json patch operation must be an object, got null".to_string(),
                ));
            }
            other => {
                return Err(PatchError::BadRequest(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                    json_kind(other)
                )));
            }
        }
    }
    if decoded.len() > MAX_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            decoded.len()
        )));
    }
    let mut doc = doc.clone();
    for op in decoded {
        apply_op(&mut doc, op).map_err(PatchError::Unprocessable)?;
    }
    Ok(doc)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

const MISSING: &str = "missing value";
const INVALID_INDEX: &str = "invalid index referenced";
const TEST_FAILED: &str = "test failed";

/// A string member of an operation (`path`, `from`): `Ok(None)` when absent or null.
fn string_member(op: &Map<String, Value>, name: &str) -> Result<Option<String>, String> {
    match op.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            json_kind(other)
        )),
    }
}

fn apply_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), String> {
    let kind = match op.get("op") {
        Some(Value::String(s)) => s.as_str(),
        _ => "unknown",
    };
    let path = string_member(op, "path");
    let from = string_member(op, "from");
    let value = op.get("value");
    match kind {
        "add" => {
            let path = path
                .ok()
                .flatten()
                .ok_or_else(|| format!("add operation failed to decode path: {MISSING}"))?;
            let (con, key) = find_object(doc, &path).ok_or_else(|| {
                format!("add operation does not apply: doc is missing path: \"{path}\": {MISSING}")
            })?;
            container_add(con, &key, value.cloned().unwrap_or(Value::Null))
                .map_err(|e| format!("error in add for path: '{path}': {e}"))
        }
        "remove" => {
            let path = path
                .ok()
                .flatten()
                .ok_or_else(|| format!("remove operation failed to decode path: {MISSING}"))?;
            let (con, key) = find_object(doc, &path).ok_or_else(|| {
                format!("remove operation does not apply: doc is missing path: \"{path}\": {MISSING}")
            })?;
            container_remove(con, &key)
                .map(|_| ())
                .map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
        "replace" => {
            let path = decoded_path("replace operation failed to decode path", path)?;
            if path.is_empty() {
                return match value {
                    Some(v @ (Value::Object(_) | Value::Array(_))) => {
                        *doc = v.clone();
                        Ok(())
                    }
                    _ => Err("replace operation value must be object or array".to_string()),
                };
            }
            let (con, key) = find_object(doc, &path).ok_or_else(|| {
                format!("replace operation does not apply: doc is missing path: {path}: {MISSING}")
            })?;
            container_get(con, &key).map_err(|_| {
                format!("replace operation does not apply: doc is missing key: {path}: {MISSING}")
            })?;
            container_set(con, &key, value.cloned().unwrap_or(Value::Null))
                .map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
        "move" => {
            let from = decoded_from("move operation failed to decode from", from)?;
            let (con, key) = find_object(doc, &from).ok_or_else(|| {
                format!("move operation does not apply: doc is missing from path: {from}: {MISSING}")
            })?;
            container_get(con, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
            let moved =
                container_remove(con, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
            let path = decoded_path("move operation failed to decode path", path)?;
            let (con, key) = find_object(doc, &path).ok_or_else(|| {
                format!("move operation does not apply: doc is missing destination path: {path}: {MISSING}")
            })?;
            container_add(con, &key, moved).map_err(|e| format!("error in move for path: '{path}': {e}"))
        }
        "copy" => {
            let from = decoded_from("copy operation failed to decode from", from)?;
            let (con, key) = find_object(doc, &from).ok_or_else(|| {
                format!("copy operation does not apply: doc is missing from path: {from}: {MISSING}")
            })?;
            let copied = container_get(con, &key)
                .map_err(|e| format!("error in copy for from: '{from}': {e}"))?
                .unwrap_or(Value::Null);
            let path = path
                .ok()
                .flatten()
                .ok_or_else(|| format!("copy operation failed to decode path: {MISSING}"))?;
            let (con, key) = find_object(doc, &path).ok_or_else(|| {
                format!("copy operation does not apply: doc is missing destination path: {path}: {MISSING}")
            })?;
            container_add(con, &key, copied).map_err(|e| format!("error while adding value during copy: {e}"))
        }
        "test" => {
            let path = decoded_path("test operation failed to decode path", path)?;
            if path.is_empty() {
                return match value {
                    Some(v) if v == doc => Ok(()),
                    _ => Err(format!("testing value {path} failed: {TEST_FAILED}")),
                };
            }
            let (con, key) = find_object(doc, &path).ok_or_else(|| {
                format!("test operation does not apply: is missing path: {path}: {MISSING}")
            })?;
            let current =
                container_get(con, &key).map_err(|e| format!("error in test for path: '{path}': {e}"))?;
            let passed = match (current, value) {
                (None, None | Some(Value::Null)) => true,
                (None, Some(_)) | (Some(_), None) => false,
                (Some(cur), Some(want)) => &cur == want,
            };
            if passed {
                Ok(())
            } else {
                Err(format!("testing value {path} failed: {TEST_FAILED}"))
            }
        }
        other => Err(format!("Unexpected kind: {other}")),
    }
}

fn decoded_path(context: &str, path: Result<Option<String>, String>) -> Result<String, String> {
    match path {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(format!("{context}: operation missing path field: {MISSING}")),
        Err(e) => Err(format!("{context}: {e}")),
    }
}

fn decoded_from(context: &str, from: Result<Option<String>, String>) -> Result<String, String> {
    match from {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(format!("{context}: operation, missing from field: {MISSING}")),
        Err(e) => Err(format!("{context}: {e}")),
    }
}

/// RFC 6901 unescaping (`~1` is `/`, `~0` is `~`), in one left-to-right pass.
fn decode_key(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut chars = k.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.peek() {
                Some('1') => {
                    chars.next();
                    out.push('/');
                    continue;
                }
                Some('0') => {
                    chars.next();
                    out.push('~');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// The container holding the last segment of `path`, and that segment (unescaped).
fn find_object<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let split: Vec<&str> = path.split('/').collect();
    if split.len() < 2 {
        return None;
    }
    let parts = &split[1..split.len() - 1];
    let key = decode_key(split[split.len() - 1]);
    let mut cur = doc;
    for part in parts {
        let part = decode_key(part);
        let next = match cur {
            Value::Object(m) => m.get_mut(&part)?,
            Value::Array(items) => {
                let idx = resolve_index(&part, items.len()).ok()?;
                items.get_mut(idx)?
            }
            _ => return None,
        };
        if !matches!(next, Value::Object(_) | Value::Array(_)) {
            return None;
        }
        cur = next;
    }
    if !matches!(cur, Value::Object(_) | Value::Array(_)) {
        return None;
    }
    Some((cur, key))
}

/// Go's `strconv.Atoi`.
fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.Atoi: parsing {}: invalid syntax",
            crate::gofmt::go_quote(s)
        ));
    }
    s.parse::<i64>().map_err(|_| {
        format!(
            "strconv.Atoi: parsing {}: value out of range",
            crate::gofmt::go_quote(s)
        )
    })
}

/// An existing element's index (negative counts from the end).
fn resolve_index(key: &str, len: usize) -> Result<usize, String> {
    let idx = atoi(key)?;
    let len = len as i64;
    let idx = if idx < 0 {
        if idx < -len {
            return Err(format!("Unable to access invalid index: {idx}: {INVALID_INDEX}"));
        }
        idx + len
    } else {
        idx
    };
    if idx >= len {
        return Err(format!("Unable to access invalid index: {idx}: {INVALID_INDEX}"));
    }
    Ok(idx as usize)
}

fn container_get(con: &Value, key: &str) -> Result<Option<Value>, String> {
    match con {
        Value::Object(m) => Ok(m.get(key).filter(|v| !v.is_null()).cloned()),
        Value::Array(items) => {
            let idx = resolve_index(key, items.len())?;
            Ok(items.get(idx).filter(|v| !v.is_null()).cloned())
        }
        _ => Err(MISSING.to_string()),
    }
}

fn container_set(con: &mut Value, key: &str, val: Value) -> Result<(), String> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
            Ok(())
        }
        Value::Array(items) => {
            let idx = resolve_index(key, items.len())?;
            if let Some(slot) = items.get_mut(idx) {
                *slot = val;
            }
            Ok(())
        }
        _ => Err(MISSING.to_string()),
    }
}

fn container_add(con: &mut Value, key: &str, val: Value) -> Result<(), String> {
    match con {
        Value::Object(m) => {
            m.insert(key.to_string(), val);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(val);
                return Ok(());
            }
            let idx = atoi(key).map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            let size = items.len() as i64 + 1;
            if idx >= size || idx < -size {
                return Err(format!("Unable to access invalid index: {idx}: {INVALID_INDEX}"));
            }
            let idx = if idx < 0 { idx + size } else { idx };
            items.insert(idx as usize, val);
            Ok(())
        }
        _ => Err(MISSING.to_string()),
    }
}

fn container_remove(con: &mut Value, key: &str) -> Result<Value, String> {
    match con {
        Value::Object(m) => m
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: {MISSING}")),
        Value::Array(items) => {
            let idx = resolve_index(key, items.len())?;
            Ok(items.remove(idx))
        }
        _ => Err(MISSING.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn patch(doc: Value, ops: Value) -> Result<Value, PatchError> {
        json_patch(&doc, &ops)
    }

    #[test]
    fn add_remove_replace() {
        let doc = json!({"spec": {"replicas": 1, "list": [1, 2]}});
        let got = patch(
            doc,
            json!([
                {"op": "add", "path": "/spec/paused", "value": true},
                {"op": "add", "path": "/spec/list/1", "value": 9},
                {"op": "add", "path": "/spec/list/-", "value": 3},
                {"op": "remove", "path": "/spec/list/0"},
                {"op": "replace", "path": "/spec/replicas", "value": 5}
            ]),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({"spec": {"replicas": 5, "paused": true, "list": [9, 2, 3]}})
        );
    }

    #[test]
    fn move_copy_test() {
        let doc = json!({"a": {"b": 1}, "c": [1, 2]});
        let got = patch(
            doc,
            json!([
                {"op": "test", "path": "/a/b", "value": 1},
                {"op": "copy", "from": "/a", "path": "/d"},
                {"op": "move", "from": "/c/0", "path": "/c/-"},
                {"op": "move", "from": "/a/b", "path": "/e"}
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"a": {}, "c": [2, 1], "d": {"b": 1}, "e": 1}));
    }

    #[test]
    fn pointer_escaping() {
        let doc = json!({"metadata": {"annotations": {"a/b": "x", "c~d": "y"}}});
        let got = patch(
            doc,
            json!([
                {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "1"},
                {"op": "remove", "path": "/metadata/annotations/c~0d"},
                {"op": "add", "path": "/metadata/annotations/~01", "value": "z"}
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"metadata": {"annotations": {"a/b": "1", "~1": "z"}}}));
    }

    #[test]
    fn test_failure_and_missing_paths_name_the_path() {
        let doc = json!({"spec": {"replicas": 1}});
        let cases = [
            (
                json!([{"op": "test", "path": "/spec/replicas", "value": 2}]),
                "testing value /spec/replicas failed: test failed",
            ),
            (
                json!([{"op": "test", "path": "/spec/replicas", "value": 1.0}]),
                "testing value /spec/replicas failed: test failed",
            ),
            (
                json!([{"op": "remove", "path": "/spec/paused"}]),
                "error in remove for path: '/spec/paused': Unable to remove nonexistent key: paused: missing value",
            ),
            (
                json!([{"op": "add", "path": "/status/x", "value": 1}]),
                "add operation does not apply: doc is missing path: \"/status/x\": missing value",
            ),
            (
                json!([{"op": "add", "path": "/spec/replicas/x", "value": 1}]),
                "add operation does not apply: doc is missing path: \"/spec/replicas/x\": missing value",
            ),
            (
                json!([{"op": "move", "from": "/spec/nope", "path": "/x"}]),
                "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value",
            ),
            (
                json!([{"op": "frobnicate", "path": "/x"}]),
                "Unexpected kind: frobnicate",
            ),
            (
                json!([{"op": "add", "value": 1}]),
                "add operation failed to decode path: missing value",
            ),
            (
                json!([{"op": "test", "path": "/spec/absent", "value": 1}]),
                "testing value /spec/absent failed: test failed",
            ),
        ];
        for (ops, want) in cases {
            let err = patch(doc.clone(), ops.clone()).unwrap_err();
            assert_eq!(err, PatchError::Unprocessable(want.to_string()), "{ops}");
            assert_eq!(err.http_status(), 422);
        }
    }

    #[test]
    fn array_index_errors() {
        let doc = json!({"l": [1, 2]});
        let err = patch(doc.clone(), json!([{"op": "add", "path": "/l/5", "value": 0}])).unwrap_err();
        assert_eq!(
            err.message(),
            "error in add for path: '/l/5': Unable to access invalid index: 5: invalid index referenced"
        );
        let err = patch(doc.clone(), json!([{"op": "add", "path": "/l/x", "value": 0}])).unwrap_err();
        assert_eq!(
            err.message(),
            "error in add for path: '/l/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax"
        );
        let err = patch(
            doc.clone(),
            json!([{"op": "replace", "path": "/l/2", "value": 0}]),
        )
        .unwrap_err();
        assert_eq!(
            err.message(),
            "replace operation does not apply: doc is missing key: /l/2: missing value"
        );
        // Negative indices count from the end.
        assert_eq!(
            patch(doc, json!([{"op": "remove", "path": "/l/-1"}])).unwrap(),
            json!({"l": [1]})
        );
    }

    #[test]
    fn v4_quirks_are_kept() {
        // replace of a missing member adds it; copy of a missing member copies null;
        // test of an absent member against null passes.
        let got = patch(
            json!({"a": 1}),
            json!([
                {"op": "replace", "path": "/b", "value": 2},
                {"op": "copy", "from": "/missing", "path": "/c"},
                {"op": "test", "path": "/absent", "value": null}
            ]),
        )
        .unwrap();
        assert_eq!(got, json!({"a": 1, "b": 2, "c": null}));
    }

    #[test]
    fn whole_document_replace_and_test() {
        let got = patch(json!({"a": 1}), json!([{"op": "test", "path": "", "value": {"a": 1}}, {"op": "replace", "path": "", "value": {"b": 2}}])).unwrap();
        assert_eq!(got, json!({"b": 2}));
    }

    #[test]
    fn malformed_patches_are_bad_requests() {
        let err = patch(json!({}), json!({"op": "add"})).unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert_eq!(
            err.message(),
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        );
        let err = patch(json!({}), json!(["add"])).unwrap_err();
        assert_eq!(
            err.message(),
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation"
        );
        let too_many = Value::Array(vec![
            json!({"op": "test", "path": "/a", "value": 1});
            MAX_OPERATIONS + 1
        ]);
        assert_eq!(patch(json!({"a": 1}), too_many).unwrap_err().http_status(), 413);
    }
}
