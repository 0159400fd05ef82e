//! structured-merge-diff's typed operations over JSON values and a [`Shape`]: field sets of a
//! value, comparison of two values, merge of an applied configuration into a live object,
//! removal of owned fields, and validation.
//!
//! Each node is handled by what its shape and value make it:
//! - a *leaf* (scalars, atomic lists and maps, lists under an untyped schema) is owned and
//!   replaced as a whole;
//! - a *map* (granular objects; `null` counts as an empty map) is handled per key;
//! - a *list* (sets and list maps; `null` counts as an empty list) is handled per item, items
//!   identified by [`PathElement::Key`] or [`PathElement::Value`].
//!
//! When both sides are empty maps or lists the node is treated as a leaf, which keeps the
//! difference between `{}` and `null` visible, as in structured-merge-diff.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement, path_string};
use super::value;
use crate::gofmt::{go_quote_list, go_value};
use crate::shape::{ListType, Shape};

static NULL: Value = Value::Null;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Leaf,
    Map,
    List,
}

fn kind_of(shape: &Shape, v: &Value) -> Kind {
    match (shape.resolved(), v) {
        (Shape::Object { atomic: false, .. } | Shape::Untyped, Value::Object(_) | Value::Null) => Kind::Map,
        (
            Shape::List {
                list_type: ListType::Set | ListType::Map { .. },
                ..
            },
            Value::Array(_) | Value::Null,
        ) => Kind::List,
        _ => Kind::Leaf,
    }
}

/// The path element identifying `item` in an associative list of shape `list`.
pub(crate) fn item_path_element(list: &Shape, item: &Value) -> Result<PathElement, String> {
    let (keys, items) = match list.resolved() {
        Shape::List {
            list_type: ListType::Map { keys },
            items,
            ..
        } if !keys.is_empty() => (keys, items),
        Shape::List {
            list_type: ListType::Set | ListType::Map { .. },
            ..
        } => {
            return match item {
                Value::Object(_) => {
                    Err("associative list without keys has an element that's a map type".into())
                }
                Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
                Value::Null => {
                    Err("associative list without keys has an element that's an explicit null".into())
                }
                v => Ok(PathElement::Value(v.clone())),
            };
        }
        _ => return Err("invalid indexing of non-associative list".into()),
    };
    let m = match item {
        Value::Object(m) => m,
        Value::Null => return Err("associative list with keys may not have a null element".into()),
        _ => return Err("associative list with keys may not have non-map elements".into()),
    };
    let mut fields = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(v) = m.get(k) {
            fields.push((k.clone(), v.clone()));
        } else if let Some(d) = items.field(k).default_value() {
            fields.push((k.clone(), d.clone()));
        }
    }
    if fields.is_empty() {
        return Err(format!(
            "associative list with keys has an element that omits all key fields {} (and doesn't have default values for any key fields)",
            go_quote_list(keys)
        ));
    }
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(PathElement::Key(fields))
}

/// The items of an associative list with their path elements (items without one are skipped,
/// as structured-merge-diff skips them).
fn indexed_items<'a>(list: &Shape, items: &'a [Value]) -> Vec<(PathElement, &'a Value)> {
    items
        .iter()
        .filter_map(|item| item_path_element(list, item).ok().map(|pe| (pe, item)))
        .collect()
}

fn is_empty_map(v: Option<&Map<String, Value>>) -> bool {
    v.is_none_or(|m| m.is_empty())
}

fn is_empty_list(v: Option<&Vec<Value>>) -> bool {
    v.is_none_or(|l| l.is_empty())
}

/// `TypedValue.ToFieldSet`: the fields `v` sets.
pub(crate) fn to_field_set(v: &Value, shape: &Shape) -> FieldSet {
    // The root itself is never owned; a leaf root therefore gives the empty set.
    children_field_set(v, shape)
}

/// The fields set below `v` (not `v` itself); `v` is a leaf when this returns `None`.
fn children_field_set(v: &Value, shape: &Shape) -> FieldSet {
    let mut set = FieldSet::new();
    match kind_of(shape, v) {
        Kind::Leaf => {}
        Kind::Map => {
            if let Value::Object(m) = v {
                for (k, child) in m {
                    let pe = PathElement::Field(k.clone());
                    let child_shape = shape.field(k);
                    let is_leaf = kind_of(child_shape, child) == Kind::Leaf;
                    let empty_map = matches!(child, Value::Object(o) if o.is_empty());
                    if is_leaf || child.is_null() || empty_map || !shape.declares(k) {
                        set.insert_member(pe.clone());
                    }
                    if !is_leaf {
                        set.insert_child(pe, children_field_set(child, child_shape));
                    }
                }
            }
        }
        Kind::List => {
            if let Value::Array(items) = v {
                let indexed = indexed_items(shape, items);
                let mut seen = BTreeSet::new();
                let mut duplicates = BTreeSet::new();
                for (pe, _) in &indexed {
                    if !seen.insert(pe) {
                        duplicates.insert(pe.clone());
                    }
                }
                let item_shape = shape.items();
                for (pe, item) in &indexed {
                    set.insert_member(pe.clone());
                    if duplicates.contains(pe) || kind_of(item_shape, item) == Kind::Leaf {
                        continue;
                    }
                    set.insert_child(pe.clone(), children_field_set(item, item_shape));
                }
            }
        }
    }
    set
}

/// `Comparison`: what changed from one value to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    pub removed: FieldSet,
    pub modified: FieldSet,
    pub added: FieldSet,
}

impl Comparison {
    pub fn filtered(self, filter: &super::Filter) -> Comparison {
        Comparison {
            removed: filter.apply_to(self.removed),
            modified: filter.apply_to(self.modified),
            added: filter.apply_to(self.added),
        }
    }
}

/// `TypedValue.Compare`.
pub(crate) fn compare(lhs: &Value, rhs: &Value, shape: &Shape) -> Comparison {
    let mut c = Comparison::default();
    let mut path = Vec::new();
    compare_node(Some(lhs), Some(rhs), shape, &mut path, &mut c);
    c
}

fn compare_node(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    shape: &Shape,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) {
    // Equal values have nothing removed, modified or added below them: one walk that stops
    // at the first difference, instead of a path and a field set per node.
    if let (Some(l), Some(r)) = (lhs, rhs)
        && value::equals(l, r)
    {
        return;
    }
    let kl = lhs.map(|v| kind_of(shape, v));
    let kr = rhs.map(|v| kind_of(shape, v));
    let in_leaf = match (kl, kr) {
        (Some(k), None) | (None, Some(k)) => compare_as(k, lhs, rhs, shape, path, c),
        (Some(l), Some(r)) if l == r => compare_as(r, lhs, rhs, shape, path, c),
        (Some(l), Some(r)) => {
            compare_as(l, lhs, rhs, shape, path, c);
            compare_as(r, lhs, rhs, shape, path, c)
        }
        (None, None) => return,
    };
    if !in_leaf {
        if lhs.is_none() {
            c.added.insert(path);
        } else if rhs.is_none() {
            c.removed.insert(path);
        }
    }
}

fn compare_leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &[PathElement], c: &mut Comparison) {
    match (lhs, rhs) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(l), Some(r)) => {
            if !value::equals(l, r) {
                c.modified.insert(path);
            }
        }
    }
}

/// Compare as `kind`; returns whether the node was a leaf.
fn compare_as(
    kind: Kind,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    shape: &Shape,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) -> bool {
    match kind {
        Kind::Leaf => {
            compare_leaf(lhs, rhs, path, c);
            true
        }
        Kind::Map => {
            let lm = lhs.and_then(Value::as_object);
            let rm = rhs.and_then(Value::as_object);
            if is_empty_map(lm) && is_empty_map(rm) {
                compare_leaf(lhs, rhs, path, c);
                return true;
            }
            // Every key of either side once: `lhs`'s, then those only `rhs` has (the order
            // does not matter, the results are sets).
            let only_right = rm
                .into_iter()
                .flatten()
                .filter(|(k, _)| !lm.is_some_and(|m| m.contains_key(*k)));
            let left = lm
                .into_iter()
                .flatten()
                .map(|(k, l)| (k, Some(l), rm.and_then(|m| m.get(k))));
            for (k, l, r) in left.chain(only_right.map(|(k, r)| (k, None, Some(r)))) {
                path.push(PathElement::Field(k.clone()));
                compare_node(l, r, shape.field(k), path, c);
                path.pop();
            }
            false
        }
        Kind::List => {
            let ll = lhs.and_then(Value::as_array);
            let rl = rhs.and_then(Value::as_array);
            if is_empty_list(ll) && is_empty_list(rl) {
                compare_leaf(lhs, rhs, path, c);
                return true;
            }
            compare_list_items(
                ll.map_or(&[][..], |l| l),
                rl.map_or(&[][..], |l| l),
                shape,
                path,
                c,
            );
            false
        }
    }
}

fn compare_list_items(
    lhs: &[Value],
    rhs: &[Value],
    shape: &Shape,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) {
    let mut order: Vec<PathElement> = Vec::new();
    let mut lvals: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
    for (pe, item) in indexed_items(shape, lhs) {
        let entry = lvals.entry(pe.clone()).or_default();
        if entry.is_empty() {
            order.push(pe);
        }
        entry.push(item);
    }
    let mut rvals: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
    for (pe, item) in indexed_items(shape, rhs) {
        let entry = rvals.entry(pe.clone()).or_default();
        if entry.is_empty() && !lvals.contains_key(&pe) {
            order.push(pe);
        }
        entry.push(item);
    }
    let items = shape.items();
    for pe in order {
        let l = lvals.get(&pe).map_or(&[][..], |v| v.as_slice());
        let r = rvals.get(&pe).map_or(&[][..], |v| v.as_slice());
        path.push(pe);
        match (l.len(), r.len()) {
            (0..=1, 0..=1) => compare_node(l.first().copied(), r.first().copied(), items, path, c),
            (2.., 2..) => {
                let same = l.len() == r.len() && l.iter().zip(r).all(|(a, b)| value::equals(a, b));
                if !same {
                    c.modified.insert(path);
                }
            }
            (2.., _) => {
                if let Some(first) = r.first() {
                    compare_node(None, Some(first), items, path, c);
                }
                c.removed.insert(path);
            }
            (_, _) => {
                if let Some(first) = l.first() {
                    compare_node(Some(first), None, items, path, c);
                }
                c.added.insert(path);
            }
        }
        path.pop();
    }
}

/// `TypedValue.Merge`: `rhs` (an applied configuration) merged into `lhs` (the live object).
pub(crate) fn merge(lhs: &Value, rhs: &Value, shape: &Shape) -> Value {
    merge_node(Some(lhs), Some(rhs), shape).unwrap_or(Value::Null)
}

fn merge_node(lhs: Option<&Value>, rhs: Option<&Value>, shape: &Shape) -> Option<Value> {
    // When the two sides have different kinds, structured-merge-diff walks both but keeps
    // only the right-hand side's result.
    let kind = match (lhs, rhs) {
        (_, Some(r)) => kind_of(shape, r),
        (Some(l), None) => kind_of(shape, l),
        (None, None) => return None,
    };
    let keep_rhs = || rhs.or(lhs).cloned();
    match kind {
        Kind::Leaf => keep_rhs(),
        Kind::Map => {
            let lm = lhs.and_then(Value::as_object);
            let rm = rhs.and_then(Value::as_object);
            if is_empty_map(lm) && is_empty_map(rm) {
                return keep_rhs();
            }
            let mut keys: BTreeSet<&String> = BTreeSet::new();
            keys.extend(lm.into_iter().flat_map(|m| m.keys()));
            keys.extend(rm.into_iter().flat_map(|m| m.keys()));
            let mut out = Map::new();
            for k in keys {
                if let Some(v) = merge_node(
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    shape.field(k),
                ) {
                    out.insert(k.clone(), v);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Kind::List => {
            let ll = lhs.and_then(Value::as_array);
            let rl = rhs.and_then(Value::as_array);
            if is_empty_list(ll) && is_empty_list(rl) {
                return keep_rhs();
            }
            let out = merge_list_items(ll.map_or(&[][..], |l| l), rl.map_or(&[][..], |l| l), shape);
            (!out.is_empty()).then_some(Value::Array(out))
        }
    }
}

/// structured-merge-diff's list merge: items keep the live order, applied items that are new
/// go where the applied order puts them relative to the shared ones.
fn merge_list_items(lhs: &[Value], rhs: &[Value], shape: &Shape) -> Vec<Value> {
    let items = shape.items();
    let mut rhs_pes: Vec<PathElement> = Vec::new();
    let mut observed_rhs: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for (pe, item) in indexed_items(shape, rhs) {
        // Duplicates in the applied configuration were rejected by validation; skip them here.
        if observed_rhs.contains_key(&pe) {
            continue;
        }
        observed_rhs.insert(pe.clone(), item);
        rhs_pes.push(pe);
    }
    let lhs_indexed = indexed_items(shape, lhs);
    let mut observed_lhs: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for (pe, item) in &lhs_indexed {
        if observed_lhs.contains_key(pe) {
            // Duplicated live items are not merged with the applied one.
            observed_lhs.insert(pe.clone(), &NULL);
        } else {
            observed_lhs.insert(pe.clone(), item);
        }
    }
    let mut shared: VecDeque<&PathElement> = rhs_pes
        .iter()
        .filter(|pe| observed_lhs.contains_key(*pe))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (l_len, r_len) = (lhs_indexed.len(), rhs_pes.len());
    let (mut li, mut ri) = (0, 0);
    while li < l_len || ri < r_len {
        if li < l_len && ri < r_len {
            let pe = &lhs_indexed[li].0;
            if *pe == rhs_pes[ri] {
                merged_rhs.insert(&rhs_pes[ri]);
                let l = observed_lhs.get(pe).copied();
                let r = observed_rhs.get(pe).copied();
                out.extend(merge_node(l, r, items));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if observed_rhs.contains_key(pe) && next_shared.is_some_and(|ns| ns != pe) {
                li += 1;
                continue;
            }
        }
        if li < l_len {
            let (pe, item) = &lhs_indexed[li];
            if !observed_rhs.contains_key(pe) {
                out.extend(merge_node(Some(item), None, items));
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < r_len {
            let pe = &rhs_pes[ri];
            merged_rhs.insert(pe);
            let l = observed_lhs.get(pe).copied();
            let r = observed_rhs.get(pe).copied();
            out.extend(merge_node(l, r, items));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// `TypedValue.RemoveItems`: `v` without the members of `to_remove` (a map or list emptied
/// this way becomes `null`).
pub(crate) fn remove_items(v: &Value, to_remove: &FieldSet, shape: &Shape) -> Value {
    match shape.resolved() {
        Shape::Scalar => v.clone(),
        Shape::Untyped => match v {
            Value::Object(m) => remove_from_map(m, false, to_remove, shape),
            Value::Array(_) | Value::Null => Value::Null,
            scalar => scalar.clone(),
        },
        Shape::Object { atomic, .. } => match v {
            Value::Object(m) => remove_from_map(m, *atomic, to_remove, shape),
            _ => Value::Null,
        },
        Shape::List { list_type, .. } => match v {
            Value::Array(items) if !items.is_empty() && *list_type != ListType::Atomic => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item_path_element(shape, item) {
                        Ok(pe) if to_remove.has_member(&pe) => {}
                        Ok(pe) => match to_remove.with_prefix(&pe) {
                            Some(sub) => out.push(remove_items(item, sub, shape.items())),
                            None => out.push(item.clone()),
                        },
                        Err(_) => out.push(item.clone()),
                    }
                }
                if out.is_empty() {
                    Value::Null
                } else {
                    Value::Array(out)
                }
            }
            _ => Value::Null,
        },
        Shape::Defaulted { .. } | Shape::Strategic { .. } => v.clone(),
    }
}

fn remove_from_map(m: &Map<String, Value>, atomic: bool, to_remove: &FieldSet, shape: &Shape) -> Value {
    if m.is_empty() || atomic {
        return Value::Null;
    }
    let mut out = Map::new();
    for (k, val) in m {
        let pe = PathElement::Field(k.clone());
        if to_remove.has_member(&pe) {
            continue;
        }
        let kept = match to_remove.with_prefix(&pe) {
            Some(sub) => remove_items(val, sub, shape.field(k)),
            None => val.clone(),
        };
        out.insert(k.clone(), kept);
    }
    if out.is_empty() {
        Value::Null
    } else {
        Value::Object(out)
    }
}

/// `Set.EnsureNamedFieldsAreMembers`: also own the struct fields above owned paths.
pub(crate) fn ensure_named_fields_are_members(mut set: FieldSet, shape: &Shape) -> FieldSet {
    ensure_named(&mut set, Some(shape));
    set
}

fn ensure_named(set: &mut FieldSet, shape: Option<&Shape>) {
    let resolved = shape.map(Shape::resolved);
    let mut named = Vec::new();
    for (pe, child) in set.children_mut() {
        let child_shape = match (pe, resolved) {
            (PathElement::Field(name), Some(s @ Shape::Object { .. })) => {
                if s.declares(name) {
                    named.push(pe.clone());
                }
                Some(s.field(name))
            }
            (PathElement::Field(name), Some(s @ Shape::Untyped)) => Some(s.field(name)),
            (PathElement::Key(_), Some(s @ Shape::List { .. })) => Some(s.items()),
            _ => None,
        };
        ensure_named(child, child_shape);
    }
    set.members_mut().extend(named);
}

/// Validation of a value against its shape (structured-merge-diff's typed conversion).
/// `allow_duplicates` is set for live objects, which may hold duplicate list-map keys.
pub(crate) fn validate(v: &Value, shape: &Shape, allow_duplicates: bool) -> Result<(), String> {
    let mut errs: Vec<(String, String)> = Vec::new();
    let mut path = Vec::new();
    validate_node(v, shape, allow_duplicates, &mut path, &mut errs);
    match errs.len() {
        0 => Ok(()),
        1 => Err(format_error(&errs[0])),
        _ => {
            let mut lines = vec!["errors:".to_string()];
            lines.extend(errs.iter().map(|e| format!("  {}", format_error(e))));
            Err(lines.join("\n"))
        }
    }
}

fn format_error((path, msg): &(String, String)) -> String {
    if path.is_empty() {
        msg.clone()
    } else {
        format!("{path}: {msg}")
    }
}

fn validate_node(
    v: &Value,
    shape: &Shape,
    allow_duplicates: bool,
    path: &mut Vec<PathElement>,
    errs: &mut Vec<(String, String)>,
) {
    let here = |path: &[PathElement]| path_string(path);
    match shape.resolved() {
        Shape::Scalar => {
            if matches!(v, Value::Object(_) | Value::Array(_)) {
                errs.push((here(path), format!("expected any scalar, got {}", go_value(v))));
            }
        }
        Shape::Untyped => match v {
            Value::Object(m) => {
                for (k, child) in m {
                    path.push(PathElement::Field(k.clone()));
                    validate_node(child, shape.field(k), allow_duplicates, path, errs);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    path.push(PathElement::Index(i as i64));
                    validate_node(child, &Shape::Untyped, allow_duplicates, path, errs);
                    path.pop();
                }
            }
            _ => {}
        },
        Shape::Object { .. } => match v {
            Value::Null => {}
            Value::Object(m) => {
                for (k, child) in m {
                    // Fields a compact shape leaves out are checked only for what lies below.
                    let child_shape = shape.declared_field(k).unwrap_or(&Shape::Untyped);
                    path.push(PathElement::Field(k.clone()));
                    validate_node(child, child_shape, allow_duplicates, path, errs);
                    path.pop();
                }
            }
            other => errs.push((here(path), format!("expected map, got {}", go_value(other)))),
        },
        Shape::List { list_type, items, .. } => match v {
            Value::Null => {}
            Value::Array(list) => {
                let mut seen = BTreeSet::new();
                for (i, child) in list.iter().enumerate() {
                    let pe = if *list_type == ListType::Atomic {
                        PathElement::Index(i as i64)
                    } else {
                        match item_path_element(shape, child) {
                            Ok(pe) => pe,
                            Err(e) => {
                                errs.push((here(path), format!("element {i}: {e}")));
                                return;
                            }
                        }
                    };
                    if *list_type != ListType::Atomic && !seen.insert(pe.clone()) && !allow_duplicates {
                        errs.push((here(path), format!("duplicate entries for key {pe}")));
                    }
                    path.push(pe);
                    validate_node(child, items, allow_duplicates, path, errs);
                    path.pop();
                }
            }
            other => errs.push((here(path), format!("expected list, got {}", go_value(other)))),
        },
        Shape::Defaulted { .. } | Shape::Strategic { .. } => {}
    }
}

#[cfg(test)]
mod tests;
