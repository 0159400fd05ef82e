//! `x-kubernetes-list-type: set|map` uniqueness (apiextensions-apiserver's
//! `listtype.ValidateListSetsAndMaps`).

use serde_json::{Map, Value};

use crate::error::FieldError;
use crate::gofmt;
use crate::node::Node;

/// Validates every set and map list under `obj` (an object validated by `s`). Subtrees whose
/// schema has no set or map list are not visited.
pub(crate) fn validate(path: &str, s: &Node, obj: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    // serde_json's maps iterate in key order, the order kube-apiserver reports in.
    if let Some(extra) = s.additional_schema().filter(|e| e.lists_below) {
        for (k, v) in obj {
            value(&format!("{path}[{k}]"), extra, v, errs);
        }
    }
    for (k, v) in obj {
        if let Some(sub) = s.properties.get(k.as_str()).filter(|sub| sub.lists_below) {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            value(&p, sub, v, errs);
        }
    }
}

fn value(path: &str, s: &Node, v: &Value, errs: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => array(path, s, items, errs),
        Value::Object(m) => validate(path, s, m, errs),
        _ => {}
    }
}

fn array(path: &str, s: &Node, items: &[Value], errs: &mut Vec<FieldError>) {
    match s.list_type.as_deref() {
        Some("set") => {
            for i in non_unique(&items.iter().map(Key::of).collect::<Vec<_>>()) {
                errs.push(FieldError::duplicate(format!("{path}[{i}]"), items[i].clone()));
            }
        }
        Some("map") => list_map(path, s, items, errs),
        _ => {}
    }
    if let Some(item_schema) = s.items.as_deref().filter(|i| i.lists_below) {
        for (i, item) in items.iter().enumerate() {
            value(&format!("{path}[{i}]"), item_schema, item, errs);
        }
    }
}

/// A list element as Go compares it: scalars by type and value, compounds by their JSON.
#[derive(PartialEq)]
enum Key {
    Unspecified,
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Compound(String),
}

impl Key {
    fn of(v: &Value) -> Key {
        match v {
            Value::Null => Key::Null,
            Value::Bool(b) => Key::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Key::Int(i),
                None => Key::Float(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => Key::Str(s.clone()),
            other => Key::Compound(gofmt::json(other)),
        }
    }
}

/// Indices of the second appearance of each repeated element (`validateListSet`).
fn non_unique(keys: &[Key]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let before = keys[..i].iter().filter(|x| *x == k).count();
        if before == 1 {
            out.push(i);
        }
    }
    out
}

fn list_map(path: &str, s: &Node, items: &[Value], errs: &mut Vec<FieldError>) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                x.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    if s.list_map_keys.len() == 1 {
        let field = &s.list_map_keys[0];
        let keys: Vec<Key> = items
            .iter()
            .map(|x| match x.get(field) {
                Some(k) => Key::of(k),
                None => Key::Unspecified,
            })
            .collect();
        for i in non_unique(&keys) {
            let shown = match items[i].get(field) {
                Some(k) => Value::Object(Map::from_iter([(field.clone(), k.clone())])),
                None => Value::Object(Map::new()),
            };
            errs.push(FieldError::duplicate(format!("{path}[{i}]"), shown));
        }
        return;
    }
    let key_maps: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut m = Map::new();
            for k in &s.list_map_keys {
                if let Some(v) = x.get(k) {
                    m.insert(k.clone(), v.clone());
                }
            }
            Value::Object(m)
        })
        .collect();
    let keys: Vec<Key> = key_maps.iter().map(Key::of).collect();
    for i in non_unique(&keys) {
        errs.push(FieldError::duplicate(format!("{path}[{i}]"), key_maps[i].clone()));
    }
}
