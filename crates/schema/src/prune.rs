//! Pruning of unknown fields (apiextensions-apiserver's `pruning.PruneWithOptions`) and of
//! `null`s the schema does not allow (`PruneNonNullableNullsWithoutDefaults`).

use std::fmt::Write as _;

use serde_json::Value;

use crate::node::Node;

/// Records the paths of pruned fields (`UnknownFieldPathOptions`), printed like
/// `spec.foo` and `spec.items[0].bar`.
#[derive(Default)]
pub(crate) struct Tracker {
    on: bool,
    /// The path of the value being visited, as it is printed.
    parent: String,
    /// How many steps `parent` has (a step may print as nothing: the key `""`).
    steps: usize,
    pub(crate) paths: Vec<String>,
}

/// Where a [`Tracker`]'s path stood, to go back to once a child is visited.
#[derive(Clone, Copy)]
struct Mark {
    len: usize,
    steps: usize,
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

    fn mark(&self) -> Mark {
        Mark {
            len: self.parent.len(),
            steps: self.steps,
        }
    }

    fn reset(&mut self, mark: Mark) {
        self.parent.truncate(mark.len);
        self.steps = mark.steps;
    }

    /// Whether the value being visited is the root.
    fn at_root(&self) -> bool {
        self.steps == 0
    }

    fn append_key(&mut self, k: &str) {
        if !self.on {
            return;
        }
        if !self.at_root() {
            self.parent.push('.');
        }
        self.parent.push_str(k);
        self.steps += 1;
    }

    fn append_index(&mut self, i: usize) {
        if self.on {
            let _ = write!(self.parent, "[{i}]");
            self.steps += 1;
        }
    }

    fn record(&mut self, k: &str) {
        if !self.on {
            return;
        }
        let mark = self.mark();
        self.append_key(k);
        self.paths.push(self.parent.clone());
        self.reset(mark);
    }
}

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prunes `x` against `s`; `as_embedded` treats `s` as an embedded resource (the resource root),
/// whose apiVersion, kind and metadata are left alone. Fields are visited in key order
/// (serde_json's maps are sorted).
pub(crate) fn prune_value(x: &mut Value, s: Option<&Node>, as_embedded: bool, t: &mut Tracker) {
    if let Some(s) = s
        && s.preserve_unknown_fields
    {
        skip_prune(x, s, as_embedded || s.embedded_resource, t);
        return;
    }
    let mark = t.mark();
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                for k in map.keys() {
                    t.record(k);
                }
                map.clear();
                return;
            };
            let embedded = as_embedded || s.embedded_resource;
            map.retain(|k, v| {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                let child = match s.properties.get(k) {
                    Some(prop) => Some(prop),
                    None if s.additional_properties.is_some() => s.additional_schema(),
                    None => {
                        if !META_FIELDS.contains(&k.as_str()) || !t.at_root() {
                            t.record(k);
                        }
                        return false;
                    }
                };
                t.append_key(k);
                prune_value(v, child, false, t);
                t.reset(mark);
                true
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                t.append_index(i);
                prune_value(v, item_schema, false, t);
                t.reset(mark);
            }
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: keep unknown fields, but still prune inside
/// the fields the schema does specify.
fn skip_prune(x: &mut Value, s: &Node, embedded: bool, t: &mut Tracker) {
    let mark = t.mark();
    match x {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let child = match s.properties.get(k) {
                    Some(prop) => Some(prop),
                    None if s.additional_properties.is_some() => s.additional_schema(),
                    None => continue,
                };
                t.append_key(k);
                prune_value(v, child, false, t);
                t.reset(mark);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    t.append_index(i);
                    skip_prune(v, item_schema, item_schema.embedded_resource, t);
                    t.reset(mark);
                }
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: drops `null` object fields whose schema is neither
/// nullable nor defaulted (defaulted ones are filled in by defaulting).
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    // Below a value without a schema every schema is absent: nothing can be dropped there.
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => map.retain(|k, v| {
            let schema = s.properties.get(k).or_else(|| s.additional_schema());
            let drop = v.is_null() && schema.is_some_and(|sc| !sc.nullable && sc.default.is_none());
            if !drop {
                prune_nulls(v, schema);
            }
            !drop
        }),
        Value::Array(items) => {
            let item_schema = s.items.as_deref();
            for v in items {
                prune_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}
