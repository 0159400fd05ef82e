//! `x-kubernetes-embedded-resource` objects: apiVersion/kind/metadata checks
//! (apiextensions-apiserver's `objectmeta.Validate`) and the coercion of their `metadata`
//! through `ObjectMeta` (`objectmeta.Coerce`).

use std::fmt::Write as _;

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
    let mut planner = Planner::at(path);
    planner.visit(x, Some(s), is_resource_root).err()
}

/// `objectmeta.Coerce`: checks apiVersion/kind types in embedded objects and replaces their
/// `metadata` with its `ObjectMeta` round trip, recording dropped unknown fields. On a type
/// error `x` is left as it was: every replacement is worked out first, reading `x`, and made
/// only when there was no error (so the caller need not coerce a copy).
pub(crate) fn coerce(
    path: &str,
    x: &mut Value,
    s: Option<&Node>,
    is_resource_root: bool,
    unknown: &mut Vec<String>,
) -> Result<(), FieldError> {
    let mut planner = Planner::at(path);
    planner.visit(x, s, is_resource_root)?;
    for (at, metadata) in planner.plan {
        if let Some(Value::Object(map)) = locate(x, &at) {
            map.insert("metadata".to_string(), metadata);
        }
    }
    unknown.extend(planner.unknown);
    Ok(())
}

/// One step from a value to a value inside it.
#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The value `at` leads to.
fn locate<'a>(x: &'a mut Value, at: &[Step]) -> Option<&'a mut Value> {
    at.iter().try_fold(x, |x, step| match step {
        Step::Key(k) => x.get_mut(k.as_str()),
        Step::Index(i) => x.get_mut(*i),
    })
}

/// Works out `objectmeta.Coerce`'s replacements without making them.
struct Planner {
    /// The error path of the value being visited (kube-apiserver's: `a.b`, `a[key]`, `a[0]`).
    path: String,
    /// Where the value being visited is.
    at: Vec<Step>,
    /// Each embedded resource's coerced metadata, and where that resource is.
    plan: Vec<(Vec<Step>, Value)>,
    /// Metadata fields the coercion drops.
    unknown: Vec<String>,
}

impl Planner {
    /// A planner for the value at error path `path`.
    fn at(path: &str) -> Self {
        Planner {
            path: path.to_owned(),
            at: Vec::new(),
            plan: Vec::new(),
            unknown: Vec::new(),
        }
    }

    fn visit(&mut self, x: &Value, s: Option<&Node>, is_resource_root: bool) -> Result<(), FieldError> {
        let Some(s) = s else { return Ok(()) };
        match x {
            Value::Object(map) => {
                if s.embedded_resource || is_resource_root {
                    for k in ["apiVersion", "kind"] {
                        if let Some(v) = map.get(k)
                            && !v.is_string()
                        {
                            return Err(FieldError::invalid(
                                child(&self.path, k),
                                v.clone(),
                                "must be a string",
                            ));
                        }
                    }
                    if let Some(meta) = map.get("metadata") {
                        match objectmeta::coerce_object_meta(meta, &self.path) {
                            Ok(c) => {
                                self.unknown.extend(c.unknown);
                                self.plan.push((self.at.clone(), c.value));
                            }
                            Err(e) => {
                                return Err(FieldError::invalid(
                                    child(&self.path, "metadata"),
                                    meta.clone(),
                                    e,
                                ));
                            }
                        }
                    }
                }
                // In key order (serde_json's maps are sorted), as the first error is reported.
                // Subtrees without an embedded resource have nothing to check or coerce.
                for (k, v) in map {
                    let (node, len) = if let Some(prop) = s.properties.get(k) {
                        if !prop.embedded_below {
                            continue;
                        }
                        (Some(prop), self.push_field(k))
                    } else if let Some(extra) = s.additional_schema().filter(|e| e.embedded_below) {
                        (Some(extra), self.push_entry(k))
                    } else {
                        continue;
                    };
                    self.at.push(Step::Key(k.clone()));
                    let result = self.visit(v, node, false);
                    self.at.pop();
                    self.path.truncate(len);
                    result?;
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = s.items.as_deref().filter(|i| i.embedded_below) else {
                    return Ok(());
                };
                for (i, v) in items.iter().enumerate() {
                    let len = self.path.len();
                    let _ = write!(self.path, "[{i}]");
                    self.at.push(Step::Index(i));
                    let result = self.visit(v, Some(item_schema), false);
                    self.at.pop();
                    self.path.truncate(len);
                    result?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Appends `.k` (or `k` at the root) to the path; returns the length to truncate back to.
    fn push_field(&mut self, k: &str) -> usize {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(k);
        len
    }

    /// Appends `[k]` to the path; returns the length to truncate back to.
    fn push_entry(&mut self, k: &str) -> usize {
        let len = self.path.len();
        self.path.push('[');
        self.path.push_str(k);
        self.path.push(']');
        len
    }
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
            // In key order (serde_json's maps are sorted), as kube-apiserver reports.
            for (k, v) in map {
                if let Some(prop) = s.properties.get(k.as_str()) {
                    if prop.embedded_below {
                        walk(&child(path, k), v, Some(prop), false, errs);
                    }
                } else if let Some(extra) = s.additional_schema().filter(|e| e.embedded_below) {
                    walk(&format!("{path}[{k}]"), v, Some(extra), false, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref().filter(|i| i.embedded_below) {
                for (i, v) in items.iter().enumerate() {
                    walk(&format!("{path}[{i}]"), v, Some(item_schema), false, errs);
                }
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
                if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty)
                    && let Value::Object(m) = &mut meta
                {
                    m.insert("name".into(), Value::String("fakename".into()));
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
