//! `metadata.managedFields` entries: decoding, manager identity, encoding and ordering, as
//! k8s.io/apimachinery's managedfields package does them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use crate::gofmt::go_json_string;
use crate::time;

/// `metav1.ManagedFieldsOperationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// A manager's identity: kube-apiserver keys entries by manager, operation, subresource and,
/// for updates only, the API version (appliers keep one entry across versions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ManagerKey {
    pub manager: String,
    pub operation: Operation,
    /// Empty for appliers.
    pub api_version: String,
    pub subresource: String,
}

impl ManagerKey {
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> ManagerKey {
        ManagerKey {
            manager: manager.to_string(),
            operation,
            api_version: if operation == Operation::Apply {
                String::new()
            } else {
                api_version.to_string()
            },
            subresource: subresource.to_string(),
        }
    }

    /// `BuildManagerIdentifier`: the JSON kube-apiserver uses as the key (and sorts by when it
    /// groups conflicts).
    pub fn identifier(&self) -> String {
        let mut parts = Vec::new();
        if !self.manager.is_empty() {
            parts.push(format!("\"manager\":{}", go_json_string(&self.manager)));
        }
        parts.push(format!("\"operation\":\"{}\"", self.operation.as_str()));
        if !self.api_version.is_empty() {
            parts.push(format!("\"apiVersion\":{}", go_json_string(&self.api_version)));
        }
        if !self.subresource.is_empty() {
            parts.push(format!("\"subresource\":{}", go_json_string(&self.subresource)));
        }
        format!("{{{}}}", parts.join(","))
    }
}

/// A manager's fields at an API version (`fieldpath.VersionedSet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VersionedSet {
    pub set: FieldSet,
    pub api_version: String,
    pub applied: bool,
}

/// All entries of an object (`internal.ManagedInterface`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Managed {
    pub fields: BTreeMap<ManagerKey, VersionedSet>,
    /// Normalised RFC 3339 times; a key without a time is encoded without one.
    pub times: BTreeMap<ManagerKey, String>,
}

fn str_field<'a>(entry: &'a Map<String, Value>, name: &str, index: usize) -> Result<&'a str, String> {
    match entry.get(name) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "managed fields entry {index}: {name} must be a string, got {other}"
        )),
    }
}

/// `DecodeManagedFields`. `None` and `null` decode to no entries.
pub(crate) fn decode(entries: Option<&Value>) -> Result<Managed, String> {
    let list = match entries {
        None | Some(Value::Null) => return Ok(Managed::default()),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(format!("metadata.managedFields must be a list, got {other}")),
    };
    let mut managed = Managed::default();
    for (i, entry) in list.iter().enumerate() {
        let Value::Object(entry) = entry else {
            return Err(format!("managed fields entry {i} must be an object, got {entry}"));
        };
        let operation = match str_field(entry, "operation", i)? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        let api_version = str_field(entry, "apiVersion", i)?;
        if api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match str_field(entry, "fieldsType", i)? {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ));
            }
        }
        let key = ManagerKey::new(
            str_field(entry, "manager", i)?,
            operation,
            api_version,
            str_field(entry, "subresource", i)?,
        );
        let set = FieldSet::from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null))
            .map_err(|e| format!("error decoding versioned set from entry {i}: {e}"))?;
        match str_field(entry, "time", i)? {
            "" => {
                managed.times.remove(&key);
            }
            t => {
                let t = time::normalize(t)
                    .ok_or_else(|| format!("managed fields entry {i}: invalid time {t:?}"))?;
                managed.times.insert(key.clone(), t);
            }
        }
        managed.fields.insert(
            key,
            VersionedSet {
                set,
                api_version: api_version.to_string(),
                applied: operation == Operation::Apply,
            },
        );
    }
    Ok(managed)
}

/// `isResetManagedFields`: an empty list, or a list of one empty entry, asks to clear them.
pub(crate) fn is_reset(entries: Option<&Value>) -> bool {
    match entries {
        Some(Value::Array(list)) => match list.as_slice() {
            [] => true,
            [Value::Object(m)] => m.is_empty(),
            _ => false,
        },
        _ => false,
    }
}

/// `encodeManagedFields`: the entries in kube-apiserver's order (Apply before Update, then by
/// time, manager, API version and subresource), or `None` when there are none.
pub(crate) fn encode(managed: &Managed) -> Option<Value> {
    if managed.fields.is_empty() {
        return None;
    }
    let mut entries: Vec<(&ManagerKey, &VersionedSet)> = managed.fields.iter().collect();
    let operation_of = |vs: &VersionedSet, key: &ManagerKey| {
        if vs.applied {
            Operation::Apply
        } else {
            key.operation
        }
    };
    let seconds = |key: &ManagerKey| {
        managed
            .times
            .get(key)
            .and_then(|t| time::parse_rfc3339(t))
            .unwrap_or(0)
    };
    entries.sort_by(|(ka, va), (kb, vb)| {
        operation_of(va, ka)
            .as_str()
            .cmp(operation_of(vb, kb).as_str())
            .then_with(|| seconds(ka).cmp(&seconds(kb)))
            .then_with(|| ka.manager.cmp(&kb.manager))
            .then_with(|| va.api_version.cmp(&vb.api_version))
            .then_with(|| ka.subresource.cmp(&kb.subresource))
    });
    let encoded = entries
        .into_iter()
        .map(|(key, vs)| {
            let mut e = Map::new();
            if !key.manager.is_empty() {
                e.insert("manager".into(), Value::String(key.manager.clone()));
            }
            e.insert(
                "operation".into(),
                Value::String(operation_of(vs, key).as_str().into()),
            );
            e.insert("apiVersion".into(), Value::String(vs.api_version.clone()));
            if let Some(t) = managed.times.get(key) {
                e.insert("time".into(), Value::String(t.clone()));
            }
            e.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            e.insert("fieldsV1".into(), vs.set.to_fields_v1());
            if !key.subresource.is_empty() {
                e.insert("subresource".into(), Value::String(key.subresource.clone()));
            }
            Value::Object(e)
        })
        .collect();
    Some(Value::Array(encoded))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers_match_kube_apiserver() {
        let k = ManagerKey::new("kubectl", Operation::Apply, "apps/v1", "");
        assert_eq!(k.identifier(), r#"{"manager":"kubectl","operation":"Apply"}"#);
        let k = ManagerKey::new("kube-controller-manager", Operation::Update, "apps/v1", "status");
        assert_eq!(
            k.identifier(),
            r#"{"manager":"kube-controller-manager","operation":"Update","apiVersion":"apps/v1","subresource":"status"}"#
        );
    }

    #[test]
    fn decode_encode_round_trip_and_order() {
        let entries = json!([
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}},
            {"manager": "a", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:y": {}}}},
            {"manager": "z", "operation": "Apply", "apiVersion": "v1", "time": "2024-01-01T00:00:09Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:z": {}}}},
            {"manager": "s", "operation": "Update", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}
        ]);
        let managed = decode(Some(&entries)).unwrap();
        assert_eq!(managed.fields.len(), 4);
        let out = encode(&managed).unwrap();
        let names: Vec<&str> = out
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        // Apply first; then by time (no time sorts as 0); then by manager.
        assert_eq!(names, ["z", "s", "a", "b"]);
        assert_eq!(out[1], entries[3]);
        assert_eq!(decode(Some(&out)).unwrap(), managed);
    }

    #[test]
    fn decode_errors() {
        for (bad, want) in [
            (
                json!([{"manager": "m", "operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}]),
                "operation must be `Apply` or `Update`",
            ),
            (
                json!([{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1"}]),
                "apiVersion must not be empty",
            ),
            (
                json!([{"manager": "m", "operation": "Update", "apiVersion": "v1"}]),
                "missing fieldsType in managed fields entry 0",
            ),
            (
                json!([{"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV2"}]),
                "invalid fieldsType \"FieldsV2\" in managed fields entry 0",
            ),
        ] {
            assert_eq!(decode(Some(&bad)).unwrap_err(), want);
        }
        assert!(is_reset(Some(&json!([]))));
        assert!(is_reset(Some(&json!([{}]))));
        assert!(!is_reset(None));
        assert!(!is_reset(Some(&json!(null))));
    }
}
