//! Strategic merge patch as kube-apiserver applies it (k8s.io/apimachinery
//! `strategicpatch.StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`).
//!
//! Supported: merge keys per [`Shape`], `$patch: replace|delete` in maps and list items,
//! `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`, `$retainKeys`, `null`
//! deletion, unions of primitive lists with a merge strategy (finalizers), replacement of lists
//! without one. Items the patch adds to a merged list go before the live items, as kube-apiserver
//! orders them when no `$setElementOrder` says otherwise.
//!
//! After merging, kube-apiserver decodes the result into the Go type, which drops unknown keys
//! (directives that rode along in new list items or replaced values) and `null` members; the
//! result here gets the same clean-up. Messages follow kube-apiserver's, with the field path
//! appended where it leaves the path out.

use serde_json::{Map, Value};

use crate::error::PatchError;
use crate::gofmt::{go_type_name, go_value};
use crate::shape::Shape;

type Obj = Map<String, Value>;

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

const MAP_TYPE: &str = "map[string]interface {}";
const SLICE_TYPE: &str = "[]interface {}";

/// Apply a strategic merge patch (`application/strategic-merge-patch+json`) to `doc`, using
/// `shape` for merge keys and strategies. An [`Shape::Untyped`] document merges objects and
/// replaces lists (kube-apiserver itself refuses strategic merge patches of custom resources
/// with 415; that decision is the server's).
pub fn strategic_merge_patch(doc: &Value, patch: &Value, shape: &Shape) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(patch)
        )));
    };
    let Value::Object(doc) = doc else {
        return Err(PatchError::BadRequest("invalid JSON document".to_string()));
    };
    let merged = merge_map(doc.clone(), patch.clone(), shape, "")?;
    let mut out = Value::Object(merged);
    typed_round_trip(&mut out, shape);
    Ok(out)
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

fn at(msg: String, path: &str) -> String {
    if path.is_empty() {
        msg
    } else {
        format!("{msg} (at {path})")
    }
}

fn err_no_merge_key(m: &Obj, key: &str, path: &str) -> PatchError {
    PatchError::Internal(at(
        format!(
            "map: {} does not contain declared merge key: {key}",
            go_value(&Value::Object(m.clone()))
        ),
        path,
    ))
}

fn err_bad_arg_type(expected: &str, actual: Option<&Value>, path: &str) -> PatchError {
    PatchError::Internal(at(
        format!("expected a {expected}, but received a {}", go_type_name(actual)),
        path,
    ))
}

fn err_bad_patch_type(directive: &Value, m: &Obj, path: &str) -> PatchError {
    let t = match directive {
        Value::String(s) => s.clone(),
        other => format!("%!s({}={})", go_type_name(Some(other)), go_value(other)),
    };
    PatchError::Internal(at(
        format!(
            "unknown patch type: {t} in map: {}",
            go_value(&Value::Object(m.clone()))
        ),
        path,
    ))
}

fn bad_format(what: &str, path: &str) -> PatchError {
    PatchError::BadRequest(at(format!("invalid patch format of {what}"), path))
}

fn child_path(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

fn item_path(path: &str, key: &str, value: &Value) -> String {
    let shown = match value {
        Value::String(s) => crate::gofmt::go_quote(s),
        other => go_value(other),
    };
    format!("{path}[{key}={shown}]")
}

/// `mergeMap`: merge `patch` into `original`.
fn merge_map(mut original: Obj, mut patch: Obj, shape: &Shape, path: &str) -> Result<Obj, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some(REPLACE) => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some(DELETE) => Ok(Obj::new()),
            _ => Err(err_bad_patch_type(directive, &patch, path)),
        };
    }
    apply_retain_keys_directive(&mut original, &mut patch, path)?;
    merge_patch_into_original(&mut original, &mut patch, shape, path)?;

    for (k, patch_v) in patch {
        let (is_delete_list, key) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            (true, extract_key(&k, DELETE_FROM_PRIMITIVE_LIST, path)?)
        } else {
            (false, k)
        };
        if patch_v.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(orig_v) = original.get(&key) else {
            if !is_delete_list {
                put_cleaned(&mut original, key, patch_v);
            }
            continue;
        };
        if go_type_name(Some(orig_v)) != go_type_name(Some(&patch_v)) {
            if !is_delete_list {
                put_cleaned(&mut original, key, patch_v);
            }
            continue;
        }
        let field_path = child_path(path, &key);
        let field_shape = shape.field(&key);
        match (original.remove(&key), patch_v) {
            (Some(Value::Object(orig_map)), Value::Object(patch_map)) => {
                let merged = match field_shape.object_strategy() {
                    Some(crate::shape::SmpStrategy::Replace) => patch_map,
                    _ => merge_map(orig_map, patch_map, field_shape, &field_path)?,
                };
                original.insert(key, Value::Object(merged));
            }
            (Some(Value::Array(orig_list)), Value::Array(patch_list)) => {
                let (merged, _) =
                    merge_slice_handler(orig_list, patch_list, field_shape, is_delete_list, &field_path)?;
                original.insert(key, Value::Array(merged));
            }
            (_, scalar) => {
                if let Some(v) = remove_directives(scalar) {
                    original.insert(key, v);
                }
            }
        }
    }
    Ok(original)
}

/// A patch value for a key the original lacks (or has with another type): nulls discarded,
/// directives removed, the key dropped if the value itself is a directive.
fn put_cleaned(original: &mut Obj, key: String, mut value: Value) {
    discard_null_values(&mut value);
    match remove_directives(value) {
        Some(v) => {
            original.insert(key, v);
        }
        None => {
            original.remove(&key);
        }
    }
}

/// `extractKey`: `<prefix>/<field>` to `<field>`.
fn extract_key(s: &str, prefix: &str, path: &str) -> Result<String, PatchError> {
    match s.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest.to_string()),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => Err(bad_format("primitive list", path)),
        _ => Err(bad_format("setElementOrder list", path)),
    }
}

/// `applyRetainKeysDirective`: drop original keys not listed in `$retainKeys`.
fn apply_retain_keys_directive(original: &mut Obj, patch: &mut Obj, path: &str) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(list) = retain else {
        return Err(bad_format("retainKeys", path));
    };
    let keep: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_FROM_PRIMITIVE_LIST) || k.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        if !keep.contains(&k.as_str()) {
            return Err(bad_format("retainKeys", path));
        }
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

/// `mergePatchIntoOriginal`: process `$setElementOrder/<field>` together with `<field>`.
fn merge_patch_into_original(
    original: &mut Obj,
    patch: &mut Obj,
    shape: &Shape,
    path: &str,
) -> Result<(), PatchError> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let Some(order_value) = patch.remove(&directive) else {
            continue;
        };
        let Value::Array(order) = order_value else {
            return Err(err_bad_arg_type(SLICE_TYPE, Some(&order_value), path));
        };
        let key = extract_key(&directive, SET_ELEMENT_ORDER, path)?;
        let field_path = child_path(path, &key);
        let original_list = match original.get(&key) {
            None => None,
            Some(Value::Array(l)) => Some(l.clone()),
            Some(other) => return Err(err_bad_arg_type(SLICE_TYPE, Some(other), &field_path)),
        };
        let patch_list = match patch.get(&key) {
            None => None,
            Some(Value::Array(l)) => Some(l.clone()),
            Some(other) => return Err(err_bad_arg_type(SLICE_TYPE, Some(other), &field_path)),
        };
        let field_shape = shape.field(&key);
        let merge_key = field_shape.list_strategy().merge_key().unwrap_or("").to_string();
        validate_patch_with_set_order_list(
            patch_list.as_deref().unwrap_or(&[]),
            &order,
            &merge_key,
            &field_path,
        )?;

        // kube-apiserver merges into the live list's backing array, so its view of the live
        // order afterwards is what that array holds (see `Aliased`).
        let (merged, original_view) = match (&original_list, &patch_list) {
            (Some(o), None) => (o.clone(), o.clone()),
            (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                Some(Value::Array(items)) => (items, Vec::new()),
                _ => continue,
            },
            (Some(o), Some(p)) => merge_slice_handler(o.clone(), p.clone(), field_shape, false, &field_path)?,
            (None, None) => continue,
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives(merged, &order)
        } else {
            partition_maps(merged, &order, &merge_key, &field_path)?
        };
        let kind = slice_element_type(
            &[&original_view, patch_list.as_deref().unwrap_or(&[])],
            &field_path,
        )?;
        let both = normalize_element_order(
            patch_items,
            server_only,
            &order,
            &original_view,
            &merge_key,
            kind,
            &field_path,
        )?;
        original.insert(key.clone(), Value::Array(both));
        patch.remove(&key);
    }
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch items must appear in `$setElementOrder` in the
/// same relative order.
fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    order: &[Value],
    merge_key: &str,
    path: &str,
) -> Result<(), PatchError> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete = if merge_key.is_empty() {
        patch_list.to_vec()
    } else {
        extract_to_delete_items(patch_list.to_vec(), path)?.0
    };
    let (mut pi, mut si) = (0, 0);
    while pi < non_delete.len() && si < order.len() {
        if contains_directive_marker(&non_delete[pi]) {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(&non_delete[pi], &order[si], merge_key, path)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < non_delete.len() && si >= order.len() {
        return Err(PatchError::Internal(at(
            format!(
                "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
                go_value(&Value::Array(patch_list.to_vec())),
                go_value(&Value::Array(order.to_vec()))
            ),
            path,
        )));
    }
    Ok(())
}

fn contains_directive_marker(item: &Value) -> bool {
    item.as_object().is_some_and(|m| m.contains_key(DIRECTIVE))
}

fn merge_key_value_equal(
    left: &Value,
    right: &Value,
    merge_key: &str,
    path: &str,
) -> Result<bool, PatchError> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let Value::Object(l) = left else {
        return Err(err_bad_arg_type(MAP_TYPE, Some(left), path));
    };
    let Value::Object(r) = right else {
        return Err(err_bad_arg_type(MAP_TYPE, Some(right), path));
    };
    let lv = l
        .get(merge_key)
        .ok_or_else(|| err_no_merge_key(l, merge_key, path))?;
    let rv = r
        .get(merge_key)
        .ok_or_else(|| err_no_merge_key(r, merge_key, path))?;
    Ok(lv == rv)
}

/// `extractToDeleteItems`: split list items into kept ones and `$patch: delete` ones.
fn extract_to_delete_items(list: Vec<Value>, path: &str) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut keep = Vec::new();
    let mut delete = Vec::new();
    for v in list {
        let Value::Object(m) = &v else {
            return Err(err_bad_arg_type(MAP_TYPE, Some(&v), path));
        };
        if m.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE) {
            delete.push(v);
        } else {
            keep.push(v);
        }
    }
    Ok((keep, delete))
}

/// `mergeSliceHandler`: merge when the field's strategy merges (or for delete lists), else
/// replace. Returns the result and the caller's view of the original list afterwards.
fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    field_shape: &Shape,
    is_delete_list: bool,
    path: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let strategy = field_shape.list_strategy();
    if strategy.merges() || is_delete_list {
        let key = strategy.merge_key().unwrap_or("");
        merge_slice(original, patch, field_shape.items(), key, is_delete_list, path)
    } else {
        Ok((patch, original))
    }
}

/// A Go slice built from the live list that shares its backing array, as kube-apiserver's
/// `deleteMatchingEntries` (which shifts items left in place) and `append` do: after deleting
/// d items and appending new ones, the caller's length-n view of the live list shows the kept
/// items, then the first d appended items, then stale leftovers. kube-apiserver orders
/// live-only items by that view when it applies `$setElementOrder`, so the result depends on it.
struct Aliased {
    /// The shared backing array, as long as the live list.
    backing: Vec<Value>,
    /// Items appended past the live list's length (never visible to the caller's view).
    extra: Vec<Value>,
    /// The slice's current length.
    len: usize,
}

impl Aliased {
    fn new(original: Vec<Value>) -> Aliased {
        let len = original.len();
        Aliased {
            backing: original,
            extra: Vec::new(),
            len,
        }
    }

    fn current(&self) -> Vec<Value> {
        let visible = self.len.min(self.backing.len());
        let mut out = self.backing[..visible].to_vec();
        out.extend(self.extra.iter().cloned());
        out
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut Value> {
        let n = self.backing.len();
        if i < n {
            self.backing.get_mut(i)
        } else {
            self.extra.get_mut(i - n)
        }
    }

    /// `append(s[:i], s[i+1:]...)`.
    fn remove(&mut self, i: usize) {
        let current = self.current();
        for (j, v) in current.into_iter().enumerate().skip(i + 1) {
            if let Some(slot) = self.get_mut(j - 1) {
                *slot = v;
            }
        }
        if self.len > self.backing.len() {
            self.extra.pop();
        }
        self.len -= 1;
    }

    fn push(&mut self, v: Value) {
        if self.len < self.backing.len() {
            self.backing[self.len] = v;
        } else {
            self.extra.push(v);
        }
        self.len += 1;
    }
}

/// `mergeSlice`. Returns the merged list and the caller's view of `original` afterwards.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    item_shape: &Shape,
    merge_key: &str,
    is_delete_list: bool,
    path: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok((original.clone(), original));
    }
    let kind = slice_element_type(&[&original, &patch], path)?;
    let (server_order, patch, merged, view) = if kind != MAP_TYPE {
        if is_delete_list {
            let kept = original.iter().filter(|v| !patch.contains(v)).cloned().collect();
            return Ok((kept, original));
        }
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for v in original.iter().chain(patch.iter()) {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        (original.clone(), patch, merged, original)
    } else {
        if merge_key.is_empty() {
            return Err(PatchError::Internal(at(
                "cannot merge lists without merge key".to_string(),
                path,
            )));
        }
        let mut list = Aliased::new(original);
        let (patch, replace) = merge_slice_with_special_elements(&mut list, patch, merge_key, path)?;
        if replace {
            // The patch's items are the new list; nothing of the live list is merged.
            (patch.clone(), Vec::new(), patch, list.backing)
        } else {
            let server_order = list.current();
            merge_slice_without_special_elements(&mut list, &patch, merge_key, item_shape, path)?;
            (server_order, patch, list.current(), list.backing)
        }
    };
    let (patch_items, server_only) = if merge_key.is_empty() {
        partition_primitives(merged, &patch)
    } else {
        partition_maps(merged, &patch, merge_key, path)?
    };
    let merged = normalize_element_order(
        patch_items,
        server_only,
        &patch,
        &server_order,
        merge_key,
        kind,
        path,
    )?;
    Ok((merged, view))
}

/// `mergeSliceWithSpecialElements`: apply `$patch: delete` items to `original` and report a
/// `$patch: replace` item; returns the other patch items.
fn merge_slice_with_special_elements(
    original: &mut Aliased,
    patch: Vec<Value>,
    merge_key: &str,
    path: &str,
) -> Result<(Vec<Value>, bool), PatchError> {
    let mut without_special = Vec::new();
    let mut replace = false;
    for v in patch {
        let Value::Object(m) = &v else {
            return Err(err_bad_arg_type(MAP_TYPE, Some(&v), path));
        };
        match m.get(DIRECTIVE) {
            None => without_special.push(v),
            Some(directive) => match directive.as_str() {
                Some(DELETE) => {
                    let Some(key_value) = m.get(merge_key) else {
                        return Err(err_no_merge_key(m, merge_key, path));
                    };
                    while let Some(idx) = find_map_in_slice(&original.current(), merge_key, key_value, path)?
                    {
                        original.remove(idx);
                    }
                }
                Some(REPLACE) => replace = true,
                Some(MERGE) => {
                    return Err(PatchError::Internal(at(
                        "merging lists cannot yet be specified in the patch".to_string(),
                        path,
                    )));
                }
                _ => return Err(err_bad_patch_type(directive, m, path)),
            },
        }
    }
    Ok((without_special, replace))
}

/// `mergeSliceWithoutSpecialElements`: merge items with equal merge keys, append new ones.
fn merge_slice_without_special_elements(
    original: &mut Aliased,
    patch: &[Value],
    merge_key: &str,
    item_shape: &Shape,
    path: &str,
) -> Result<(), PatchError> {
    for v in patch {
        let Value::Object(m) = v else {
            return Err(err_bad_arg_type(MAP_TYPE, Some(v), path));
        };
        let Some(key_value) = m.get(merge_key) else {
            return Err(err_no_merge_key(m, merge_key, path));
        };
        match find_map_in_slice(&original.current(), merge_key, key_value, path)? {
            Some(idx) => {
                let Some(slot) = original.get_mut(idx) else {
                    continue;
                };
                let orig_item = match std::mem::take(slot) {
                    Value::Object(o) => o,
                    _ => Obj::new(),
                };
                let merged = merge_map(
                    orig_item,
                    m.clone(),
                    item_shape,
                    &item_path(path, merge_key, key_value),
                )?;
                *slot = Value::Object(merged);
            }
            None => original.push(v.clone()),
        }
    }
    Ok(())
}

/// `findMapInSliceBasedOnKeyValue`.
fn find_map_in_slice(
    list: &[Value],
    key: &str,
    value: &Value,
    path: &str,
) -> Result<Option<usize>, PatchError> {
    for (i, v) in list.iter().enumerate() {
        let Value::Object(m) = v else {
            return Err(PatchError::Internal(at(
                format!("value for key {i} is not a map"),
                path,
            )));
        };
        if m.get(key) == Some(value) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// `partitionPrimitivesByPresentInList`.
fn partition_primitives(list: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    list.into_iter().partition(|v| by.contains(v))
}

/// `partitionMapsByPresentInList`.
fn partition_maps(
    list: Vec<Value>,
    by: &[Value],
    merge_key: &str,
    path: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut present = Vec::new();
    let mut server_only = Vec::new();
    for v in list {
        let Value::Object(m) = &v else {
            return Err(err_bad_arg_type(MAP_TYPE, Some(&v), path));
        };
        let Some(key_value) = m.get(merge_key) else {
            return Err(err_no_merge_key(m, merge_key, path));
        };
        if find_map_in_slice(by, merge_key, key_value, path)?.is_some() {
            present.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((present, server_only))
}

/// `sliceElementType`: the Go type of the elements of `slices` (all must agree).
fn slice_element_type(slices: &[&[Value]], path: &str) -> Result<&'static str, PatchError> {
    let mut prev: Option<&'static str> = None;
    for s in slices {
        for v in s.iter() {
            let t = go_type_name(Some(v));
            match prev {
                None => {
                    if t == SLICE_TYPE {
                        return Err(PatchError::Unprocessable(at(
                            "lists of lists are not supported".to_string(),
                            path,
                        )));
                    }
                    prev = Some(t);
                }
                Some(p) if p != t => {
                    let all = Value::Array(slices.iter().map(|s| Value::Array(s.to_vec())).collect());
                    return Err(PatchError::Internal(at(
                        format!("list element types are not identical: {}", go_value(&all)),
                        path,
                    )));
                }
                Some(_) => {}
            }
        }
    }
    prev.ok_or_else(|| PatchError::Internal(at("no elements in any of the given slices".to_string(), path)))
}

/// `normalizeElementOrder`: order patch items by `patch_order`, live-only items by
/// `server_order`, then interleave them.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: &str,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, kind, path)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind, path)?;
    Ok(merge_sorted_slice(
        server_only,
        patch,
        server_order,
        merge_key,
        kind,
    ))
}

/// `normalizeSliceOrder`: stable-sort `to_sort` by position in `order` (Go's `sort.SliceStable`
/// with kube-apiserver's comparison, which calls unknown items "less").
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: &str,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    let (mut to_sort, to_delete) = if kind == MAP_TYPE {
        for v in to_sort.iter().chain(order.iter()) {
            let Value::Object(m) = v else {
                return Err(err_bad_arg_type(MAP_TYPE, Some(v), path));
            };
            if !m.contains_key(merge_key) {
                return Err(err_no_merge_key(m, merge_key, path));
            }
        }
        extract_to_delete_items(to_sort, path)?
    } else {
        (to_sort, Vec::new())
    };
    go_stable_sort(&mut to_sort, |a, b| {
        let ia = index_of(order, a, merge_key, kind);
        let ib = index_of(order, b, merge_key, kind);
        match (ia, ib) {
            (Some(ia), Some(ib)) => ia < ib,
            _ => true,
        }
    });
    to_sort.extend(to_delete);
    Ok(to_sort)
}

/// `mergeSortedSlice`: insert each of `left` into `right`, keeping both relative orders and
/// using `server_order` to decide between them.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: &str,
) -> Vec<Value> {
    let size = left.len() + right.len();
    let mut out = Vec::with_capacity(size);
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    for _ in 0..size {
        let take_left = match (left.peek(), right.peek()) {
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_of(server_order, l, merge_key, kind), index_of(server_order, r, merge_key, kind)),
                (Some(li), Some(ri)) if li < ri
            ),
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some(v) = next {
            out.push(v);
        }
    }
    out
}

/// `index`: position of `val` in `list`, by merge key for maps.
fn index_of(list: &[Value], val: &Value, merge_key: &str, kind: &str) -> Option<usize> {
    if kind == MAP_TYPE {
        let key_of = |v: &Value| v.as_object().and_then(|m| m.get(merge_key)).cloned();
        let target = key_of(val);
        list.iter().position(|v| key_of(v) == target)
    } else {
        list.iter().position(|v| v == val)
    }
}

/// Go's `sort.SliceStable` (insertion sort on blocks of 20, then SymMerge), reproduced so that
/// results match kube-apiserver even when `less` is not a strict order.
fn go_stable_sort<F: Fn(&Value, &Value) -> bool>(data: &mut [Value], less: F) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b, &less);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n, &less);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            sym_merge(data, a, a + block, b, &less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, &less);
        }
        block *= 2;
    }
}

fn insertion_sort<F: Fn(&Value, &Value) -> bool>(data: &mut [Value], a: usize, b: usize, less: &F) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&data[j], &data[j - 1]) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sym_merge<F: Fn(&Value, &Value) -> bool>(data: &mut [Value], a: usize, m: usize, b: usize, less: &F) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(&data[h], &data[a]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = a;
        while k + 1 < i {
            data.swap(k, k + 1);
            k += 1;
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(&data[m], &data[h]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(&data[p - c], &data[c]) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        data[start..end].rotate_left(m - start);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less);
    }
}

/// `removeDirectives`: drop maps carrying `$patch` (returning `None` when `v` itself is one).
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(
                m.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// `discardNullValuesFromPatch`: drop null members of objects, recursively.
fn discard_null_values(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(discard_null_values);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_null_values),
        _ => {}
    }
}

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE
        || k == RETAIN_KEYS
        || k.starts_with(&format!("{SET_ELEMENT_ORDER}/"))
        || k.starts_with(&format!("{DELETE_FROM_PRIMITIVE_LIST}/"))
}

/// What decoding into the Go type and encoding again does to the merged object: directive keys
/// are unknown fields and vanish, `null` members are omitted. Untyped content (which
/// kube-apiserver keeps as unstructured JSON) is left as merged.
fn typed_round_trip(v: &mut Value, shape: &Shape) {
    if matches!(shape.resolved(), Shape::Untyped) {
        return;
    }
    match v {
        Value::Object(m) => {
            m.retain(|k, v| !v.is_null() && !is_directive_key(k));
            for (k, child) in m.iter_mut() {
                typed_round_trip(child, shape.field(k));
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| typed_round_trip(item, shape.items())),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
