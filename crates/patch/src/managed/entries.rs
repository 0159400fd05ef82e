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
    pub set: Fields,
    pub api_version: String,
    pub applied: bool,
}

/// A manager's field set, or the `fieldsV1` of a stored entry not decoded yet.
///
/// Most writes change the fields of one or two managers; every other entry goes back to the
/// store as it came. A stored entry's set is therefore decoded only when an operation may
/// change it ([`Fields::may_touch`]), and an entry never decoded is written back as the JSON
/// it was read as, which is what decoding and encoding it again would give: stored entries
/// were written by [`encode`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields {
    /// Empty while `stored` holds the fields.
    set: FieldSet,
    /// A JSON object, as [`FieldSet::from_fields_v1`] reads it.
    stored: Option<Value>,
}

impl From<FieldSet> for Fields {
    fn from(set: FieldSet) -> Fields {
        Fields { set, stored: None }
    }
}

impl Fields {
    /// The set, decoded first if it is still stored. A stored `fieldsV1` that does not decode
    /// (a store written by something other than this crate) counts as no fields.
    pub fn set_mut(&mut self) -> &mut FieldSet {
        if let Some(stored) = self.stored.take() {
            self.set = FieldSet::from_fields_v1(&stored).unwrap_or_default();
        }
        &mut self.set
    }

    pub fn into_set(mut self) -> FieldSet {
        self.set_mut();
        self.set
    }

    /// The set if it is decoded.
    pub fn decoded(&self) -> Option<&FieldSet> {
        self.stored.is_none().then_some(&self.set)
    }

    /// The set if it is decoded, to change.
    pub fn decoded_mut(&mut self) -> Option<&mut FieldSet> {
        self.stored.is_none().then_some(&mut self.set)
    }

    /// Whether an operation on paths that start with the top-level fields `roots` (as
    /// fieldsV1 keys, `f:spec`) can change this set or find anything in it. A decoded set is
    /// always touched; a stored one only if it has one of those keys at the top, since every
    /// set operation works on the first path element alone before it looks further.
    pub fn may_touch(&self, roots: &[String]) -> bool {
        match &self.stored {
            None => true,
            Some(Value::Object(top)) => roots.iter().any(|root| top.contains_key(root)),
            Some(_) => false,
        }
    }

    /// Whether the set has no members. For a stored set: whether its `fieldsV1` has nothing
    /// but the `.` marker ([`encode`] never writes an empty entry).
    pub fn is_empty(&self) -> bool {
        match &self.stored {
            None => self.set.is_empty(),
            Some(Value::Object(top)) => top.keys().all(|key| key == "."),
            Some(_) => true,
        }
    }

    /// The `fieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        match &self.stored {
            Some(stored) => stored.clone(),
            None => self.set.to_fields_v1(),
        }
    }
}

/// Equal when the sets are, however they are held.
impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        match (self.decoded(), other.decoded()) {
            (Some(a), Some(b)) => a == b,
            _ => self.clone().into_set() == other.clone().into_set(),
        }
    }
}

impl Eq for Fields {}

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
    decode_with(entries, |fields_v1, i| {
        FieldSet::from_fields_v1(fields_v1)
            .map(Fields::from)
            .map_err(|e| format!("error decoding versioned set from entry {i}: {e}"))
    })
}

/// [`decode`] for the entries of a stored object: each entry's `fieldsV1` is kept as it is
/// until an operation needs the set ([`Fields`]); only its type is checked here.
pub(crate) fn decode_stored(entries: Option<&Value>) -> Result<Managed, String> {
    decode_with(entries, |fields_v1, i| match fields_v1 {
        Value::Object(_) => Ok(Fields {
            set: FieldSet::new(),
            stored: Some(fields_v1.clone()),
        }),
        Value::Null => Ok(Fields::default()),
        other => Err(format!(
            "error decoding versioned set from entry {i}: fieldsV1 must be a JSON object, got {other}"
        )),
    })
}

fn decode_with(
    entries: Option<&Value>,
    fields: impl Fn(&Value, usize) -> Result<Fields, String>,
) -> Result<Managed, String> {
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
        let set = fields(entry.get("fieldsV1").unwrap_or(&Value::Null), i)?;
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
    fn stored_entries_keep_their_fields_v1_until_needed() {
        let entries = json!([
            {"manager": "a", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {".": {}, "f:k": {}}}}},
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:03Z",
             "fieldsType": "FieldsV1", "fieldsV1": null}
        ]);
        let stored = decode_stored(Some(&entries)).unwrap();
        let decoded = decode(Some(&entries)).unwrap();
        // Equal however the sets are held, and encoded alike.
        assert_eq!(stored, decoded);
        assert_eq!(encode(&stored), encode(&decoded));
        assert_eq!(encode(&stored).unwrap()[0], entries[0]);
        let key = |m: &str| ManagerKey::new(m, Operation::Update, "v1", "");
        let a = &stored.fields[&key("a")].set;
        assert!(a.decoded().is_none());
        assert!(a.may_touch(&["f:data".to_owned()]));
        assert!(!a.may_touch(&["f:status".to_owned(), "f:spec".to_owned()]));
        assert!(!a.is_empty());
        // No fields at all need no decoding later.
        let b = &stored.fields[&key("b")].set;
        assert!(b.is_empty() && b.decoded().is_some());
        let mut a = a.clone();
        assert_eq!(
            a.set_mut().paths(),
            [".data.x", ".metadata.labels", ".metadata.labels.k"]
        );
        assert!(a.decoded().is_some());
        // Only the type of a stored fieldsV1 is checked as it is read.
        let bad = json!([{"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": [1]}]);
        assert_eq!(
            decode_stored(Some(&bad)).unwrap_err(),
            "error decoding versioned set from entry 0: fieldsV1 must be a JSON object, got [1]"
        );
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
