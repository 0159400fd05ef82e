//! Pruning of unknown fields (apiextensions-apiserver's `pruning.PruneWithOptions`) and of
//! `null`s the schema does not allow (`PruneNonNullableNullsWithoutDefaults`).

use serde_json::Value;

use crate::node::Node;

/// Records the paths of pruned fields (`UnknownFieldPathOptions`), printed like
/// `spec.foo` and `spec.items[0].bar`.
#[derive(Default)]
pub(crate) struct Tracker {
    on: bool,
    parent: Vec<String>,
    pub(crate) paths: Vec<String>,
}

impl Tracker {
    /// A tracker that records paths.
    pub(crate) fn on() -> Tracker {
        Tracker {
            on: true,
            ..Tracker::default()
        }
    }

    /// A tracker that records nothing.
    pub(crate) fn off() -> Tracker {
        Tracker::default()
    }

    fn append_key(&mut self, k: &str) {
        if !self.on {
            return;
        }
        if !self.parent.is_empty() {
            self.parent.push(".".into());
        }
        self.parent.push(k.to_string());
    }

    fn append_index(&mut self, i: usize) {
        if self.on {
            self.parent.push(format!("[{i}]"));
        }
    }

    fn record(&mut self, k: &str) {
        if !self.on {
            return;
        }
        let len = self.parent.len();
        self.append_key(k);
        self.paths.push(self.parent.concat());
        self.parent.truncate(len);
    }
}

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prunes `x` against `s`; `as_embedded` treats `s` as an embedded resource (the resource root),
/// whose apiVersion, kind and metadata are left alone.
pub(crate) fn prune_value(x: &mut Value, s: Option<&Node>, as_embedded: bool, t: &mut Tracker) {
    if let Some(s) = s {
        if s.preserve_unknown_fields {
            skip_prune(x, s, as_embedded || s.embedded_resource, t);
            return;
        }
    }
    let depth = t.parent.len();
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                let mut keys: Vec<String> = map.keys().cloned().collect();
                keys.sort();
                for k in keys {
                    t.record(&k);
                    map.remove(&k);
                }
                return;
            };
            let embedded = as_embedded || s.embedded_resource;
            let mut keys: Vec<String> = map.keys().cloned().collect();
            keys.sort();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(&k) {
                    t.append_key(&k);
                    if let Some(v) = map.get_mut(&k) {
                        prune_value(v, Some(prop), false, t);
                    }
                    t.parent.truncate(depth);
                } else if s.additional_properties.is_some() {
                    t.append_key(&k);
                    if let Some(v) = map.get_mut(&k) {
                        prune_value(v, s.additional_schema(), false, t);
                    }
                    t.parent.truncate(depth);
                } else {
                    if !META_FIELDS.contains(&k.as_str()) || !t.parent.is_empty() {
                        t.record(&k);
                    }
                    map.remove(&k);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                t.append_index(i);
                prune_value(v, item_schema, false, t);
                t.parent.truncate(depth);
            }
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: keep unknown fields, but still prune inside
/// the fields the schema does specify.
fn skip_prune(x: &mut Value, s: &Node, embedded: bool, t: &mut Tracker) {
    let depth = t.parent.len();
    match x {
        Value::Object(map) => {
            let mut keys: Vec<String> = map.keys().cloned().collect();
            keys.sort();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let Some(v) = map.get_mut(&k) else { continue };
                if let Some(prop) = s.properties.get(&k) {
                    t.append_key(&k);
                    prune_value(v, Some(prop), false, t);
                    t.parent.truncate(depth);
                } else if s.additional_properties.is_some() {
                    t.append_key(&k);
                    prune_value(v, s.additional_schema(), false, t);
                    t.parent.truncate(depth);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    t.append_index(i);
                    skip_prune(v, item_schema, item_schema.embedded_resource, t);
                    t.parent.truncate(depth);
                }
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: drops `null` object fields whose schema is neither
/// nullable nor defaulted (defaulted ones are filled in by defaulting).
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let schema = s.and_then(|s| s.properties.get(&k).or_else(|| s.additional_schema()));
                let drop = map.get(&k).is_some_and(Value::is_null)
                    && schema.is_some_and(|sc| !sc.nullable && sc.default.is_none());
                if drop {
                    map.remove(&k);
                } else if let Some(v) = map.get_mut(&k) {
                    prune_nulls(v, schema);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items {
                prune_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}
