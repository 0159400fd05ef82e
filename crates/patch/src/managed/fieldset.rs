//! Field sets: the trie of owned paths that managedFields entries serialize as `fieldsV1`
//! (structured-merge-diff `fieldpath.Set`).
//!
//! A set has *members* (paths owned as such) and *children* (subtrees with members further
//! down). In fieldsV1 a member is `"f:name": {}` and a member that also has children carries a
//! `".": {}` marker inside its object.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use super::value;
use crate::error::PatchError;
use crate::gofmt::{go_float, go_quote, write_go_json, write_go_json_string};

/// One step of a field path.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of an object (`f:<name>`).
    Field(String),
    /// An item of a list map, by its key fields sorted by name (`k:{"name":"web"}`).
    Key(Vec<(String, Value)>),
    /// An item of a set, by value (`v:"a.io/x"`).
    Value(Value),
    /// An item of a list by position (`i:0`; structured-merge-diff only produces these for
    /// atomic lists inside validation errors).
    Index(i64),
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The fieldsV1 key of this element (`f:spec`, `k:{"name":"web"}`, `v:"x"`, `i:3`).
    pub fn to_fields_v1_key(&self) -> String {
        // Written into one string: every write of an object encodes every manager's set.
        match self {
            PathElement::Field(name) => {
                let mut key = String::with_capacity(2 + name.len());
                key.push_str("f:");
                key.push_str(name);
                key
            }
            PathElement::Key(fields) => {
                let mut key = String::from("k:{");
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        key.push(',');
                    }
                    write_go_json_string(k, &mut key);
                    key.push(':');
                    write_go_json(v, &mut key);
                }
                key.push('}');
                key
            }
            PathElement::Value(v) => {
                let mut key = String::from("v:");
                write_go_json(v, &mut key);
                key
            }
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parse a fieldsV1 key; `Ok(None)` for element types this version does not know (which
    /// kube-apiserver skips too).
    pub fn from_fields_v1_key(s: &str) -> Result<Option<PathElement>, String> {
        if s.len() < 2 {
            return Err(format!("key must be 2 characters long: {s:?}"));
        }
        let bytes = s.as_bytes();
        if bytes[1] != b':' {
            return Err(format!("missing colon: {s}"));
        }
        let body = &s[2..];
        match bytes[0] {
            b'f' => Ok(Some(PathElement::Field(body.to_string()))),
            b'v' => {
                let v: Value =
                    serde_json::from_str(body).map_err(|e| format!("invalid value in {s:?}: {e}"))?;
                Ok(Some(PathElement::Value(v)))
            }
            b'k' => {
                let v: Value =
                    serde_json::from_str(body).map_err(|e| format!("invalid key in {s:?}: {e}"))?;
                let Value::Object(m) = v else {
                    return Err(format!("invalid key in {s:?}: expected a JSON object"));
                };
                let mut fields: Vec<(String, Value)> = m.into_iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Some(PathElement::Key(fields)))
            }
            b'i' => body
                .parse::<i64>()
                .map(|i| Some(PathElement::Index(i)))
                .map_err(|e| format!("invalid index in {s:?}: {e}")),
            _ => Ok(None),
        }
    }
}

/// structured-merge-diff's `value.ToString`, used in paths shown to people.
fn value_to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.to_string()
            } else if let Some(u) = n.as_u64() {
                u.to_string()
            } else {
                go_float(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => go_quote(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_to_string).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            keys.iter()
                .map(|k| {
                    format!(
                        "{k}={}",
                        m.get(k.as_str()).map(value_to_string).unwrap_or_default()
                    )
                })
                .collect()
        }
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's rendering: `.name`, `[name="web"]`, `[="x"]`, `[3]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_to_string(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_to_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b.iter()) {
                    let c = an.cmp(bn).then_with(|| value::compare(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => value::compare(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

/// A path rendered the way kube-apiserver prints it (`.spec.containers[name="web"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    /// Never holds an empty set.
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// A set of the given paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a [PathElement]>) -> FieldSet {
        let mut s = FieldSet::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    /// Whether the set has no members at any depth.
    pub fn is_empty(&self) -> bool {
        // Subtrees are never empty (every operation drops empty ones), so this is O(1).
        self.members.is_empty() && self.children.is_empty()
    }

    /// The number of member paths.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(FieldSet::len).sum::<usize>()
    }

    /// Add `path` (its parents are not added). The empty path is ignored: nobody owns the
    /// whole object.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert(rest),
                None => {
                    let mut child = FieldSet::new();
                    child.insert(rest);
                    self.children.insert(first.clone(), child);
                }
            },
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The members directly in this set.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The subtrees of this set.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }

    /// The subset below `pe`, without the prefix.
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Whether `pe` is a direct member.
    pub fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Add the paths of `other` to this set.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            match self.children.get_mut(pe) {
                Some(existing) => existing.union_with(child),
                None => {
                    self.children.insert(pe.clone(), child.clone());
                }
            }
        }
    }

    /// Add `pe` as a direct member.
    pub(crate) fn insert_member(&mut self, pe: PathElement) {
        self.members.insert(pe);
    }

    /// Add `child` below `pe` (ignored when empty).
    pub(crate) fn insert_child(&mut self, pe: PathElement, child: FieldSet) {
        if child.is_empty() {
            return;
        }
        match self.children.get_mut(&pe) {
            Some(existing) => existing.union_with(&child),
            None => {
                self.children.insert(pe, child);
            }
        }
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                let theirs = other.children.get(pe)?;
                let i = child.intersection(theirs);
                (!i.is_empty()).then(|| (pe.clone(), i))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths of `self` that are not in `other` (leaf-wise: removing `a` keeps `a.b`).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| match other.children.get(pe) {
                None => Some((pe.clone(), child.clone())),
                Some(theirs) => {
                    let d = child.difference(theirs);
                    (!d.is_empty()).then(|| (pe.clone(), d))
                }
            })
            .collect();
        FieldSet { members, children }
    }

    /// Remove the paths of `other` from this set ([`FieldSet::difference`] in place).
    pub fn difference_with(&mut self, other: &FieldSet) {
        self.members.retain(|m| !other.members.contains(m));
        for (pe, child) in self.children.iter_mut() {
            if let Some(theirs) = other.children.get(pe) {
                child.difference_with(theirs);
            }
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    /// Whether some path is in both sets ([`FieldSet::intersection`] is not empty), found
    /// without building the intersection.
    pub fn intersects(&self, other: &FieldSet) -> bool {
        let (small, large) = if self.members.len() <= other.members.len() {
            (&self.members, &other.members)
        } else {
            (&other.members, &self.members)
        };
        small.iter().any(|m| large.contains(m))
            || self.children.iter().any(|(pe, child)| {
                other
                    .children
                    .get(pe)
                    .is_some_and(|theirs| child.intersects(theirs))
            })
    }

    /// Keep only the paths also in `other` ([`FieldSet::intersection`] in place).
    pub fn intersection_with(&mut self, other: &FieldSet) {
        self.members.retain(|m| other.members.contains(m));
        self.children.retain(|pe, child| match other.children.get(pe) {
            Some(theirs) => {
                child.intersection_with(theirs);
                !child.is_empty()
            }
            None => false,
        });
    }

    /// The direct members, mutably.
    pub(crate) fn members_mut(&mut self) -> &mut BTreeSet<PathElement> {
        &mut self.members
    }

    /// The subtrees, mutably (callers must not leave one empty).
    pub(crate) fn children_mut(&mut self) -> impl Iterator<Item = (&PathElement, &mut FieldSet)> {
        self.children.iter_mut()
    }

    /// Paths of `self` that are neither in `other` nor below a member of `other` (removing `a`
    /// removes `a.b` too).
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(*pe))
            .filter_map(|(pe, child)| match other.children.get(pe) {
                None => Some((pe.clone(), child.clone())),
                Some(theirs) => {
                    let d = child.recursive_difference(theirs);
                    (!d.is_empty()).then(|| (pe.clone(), d))
                }
            })
            .collect();
        FieldSet { members, children }
    }

    /// [`FieldSet::recursive_difference`] in place.
    pub fn recursive_difference_with(&mut self, other: &FieldSet) {
        self.members.retain(|m| !other.members.contains(m));
        self.children.retain(|pe, child| {
            if other.members.contains(pe) {
                return false;
            }
            match other.children.get(pe) {
                None => true,
                Some(theirs) => {
                    child.recursive_difference_with(theirs);
                    !child.is_empty()
                }
            }
        });
    }

    /// Only the paths equal to or below one of `prefixes`' members (structured-merge-diff's
    /// prefix matchers, used for the fields a subresource may change).
    pub fn filter_include(&self, prefixes: &FieldSet) -> FieldSet {
        let members = self
            .members
            .iter()
            .filter(|m| prefixes.members.contains(*m))
            .cloned()
            .collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                if prefixes.members.contains(pe) {
                    return Some((pe.clone(), child.clone()));
                }
                let sub = prefixes.children.get(pe)?;
                let f = child.filter_include(sub);
                (!f.is_empty()).then(|| (pe.clone(), f))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Every member path, in kube-apiserver's order (members before subtrees, each sorted).
    pub fn iter_paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Every member path rendered for messages (`.spec.replicas`).
    pub fn paths(&self) -> Vec<String> {
        self.iter_paths().iter().map(|p| path_string(p)).collect()
    }

    /// The fieldsV1 keys of the set's first path elements (`f:spec`), of members and
    /// children alike.
    pub(crate) fn root_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.members
            .iter()
            .chain(self.children.keys())
            .map(PathElement::to_fields_v1_key)
    }

    /// The fieldsV1 JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !(self.members.is_empty() && self.children.is_empty()) {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        // Walk members and children together in path-element order, as kube-apiserver does
        // (both are sorted: merged as they are iterated).
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let (pe, value) = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(member), Some((child_pe, _))) if *member < *child_pe => (members.next(), Map::new()),
                (Some(_), None) => (members.next(), Map::new()),
                (member, Some((child_pe, child))) => {
                    // Also a member: its own `.` entry beside its children's.
                    let also_member = member.is_some_and(|member| *member == *child_pe);
                    if also_member {
                        members.next();
                    }
                    let (pe, child) = (*child_pe, *child);
                    children.next();
                    (Some(pe), child.emit(also_member))
                }
            };
            if let Some(pe) = pe {
                out.insert(pe.to_fields_v1_key(), Value::Object(value));
            }
        }
        out
    }

    /// Parse a fieldsV1 document.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, PatchError> {
        match v {
            Value::Object(m) => Ok(read_v1(m, "")?.0.unwrap_or_default()),
            Value::Null => Ok(FieldSet::new()),
            other => Err(PatchError::InvalidManagedFields(format!(
                "error decoding set: fieldsV1 must be a JSON object, got {other}"
            ))),
        }
    }
}

/// structured-merge-diff's `readIterV1`: the children of an object, and whether the object
/// itself is a member (it has a `.` key, or nothing below it).
fn read_v1(m: &Map<String, Value>, at: &str) -> Result<(Option<FieldSet>, bool), PatchError> {
    let mut children: Option<FieldSet> = None;
    let mut is_member = false;
    for (key, v) in m {
        if key == "." {
            is_member = true;
            continue;
        }
        let pe = match PathElement::from_fields_v1_key(key) {
            Ok(Some(pe)) => pe,
            Ok(None) => continue,
            Err(e) => {
                return Err(PatchError::InvalidManagedFields(format!(
                    "error decoding set: parsing key as path element at {at:?}: {e}"
                )));
            }
        };
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let sub = match v {
            Value::Object(sub) => sub,
            Value::Null => EMPTY.get_or_init(Map::new),
            other => {
                return Err(PatchError::InvalidManagedFields(format!(
                    "error decoding set: value of {key:?} must be a JSON object, got {other}"
                )));
            }
        };
        let (grandchildren, child_is_member) = read_v1(sub, key)?;
        let set = children.get_or_insert_with(FieldSet::new);
        if child_is_member {
            set.members.insert(pe.clone());
        }
        if let Some(g) = grandchildren.filter(|g| !g.is_empty()) {
            let merged = match set.children.remove(&pe) {
                Some(existing) => existing.union(&g),
                None => g,
            };
            set.children.insert(pe, merged);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.into())
    }

    fn k(name: &str) -> PathElement {
        PathElement::Key(vec![("name".into(), json!(name))])
    }

    #[test]
    fn fields_v1_round_trip_of_a_kube_apiserver_entry() {
        // The shape kube-apiserver writes for `kubectl apply --server-side` of a Deployment.
        let v1 = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        });
        let set = FieldSet::from_fields_v1(&v1).unwrap();
        assert_eq!(set.to_fields_v1(), v1);
        assert!(set.has(&[f("spec"), f("replicas")]));
        assert!(set.has(&[f("spec"), f("template"), f("spec"), f("containers"), k("nginx")]));
        assert!(
            !set.has(&[f("spec"), f("template")]),
            "struct parents are not members"
        );
        assert_eq!(
            set.paths(),
            vec![
                ".metadata.labels.app",
                ".spec.replicas",
                ".spec.selector",
                ".spec.template.metadata.labels.app",
                ".spec.template.spec.containers[name=\"nginx\"]",
                ".spec.template.spec.containers[name=\"nginx\"].image",
                ".spec.template.spec.containers[name=\"nginx\"].name",
                ".spec.template.spec.containers[name=\"nginx\"].ports[containerPort=80,protocol=\"TCP\"]",
                ".spec.template.spec.containers[name=\"nginx\"].ports[containerPort=80,protocol=\"TCP\"].containerPort",
            ]
        );
    }

    #[test]
    fn set_items_values_and_unknown_elements() {
        let v1 = json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a.io/x\"": {}, "v:3": {}}}, "z:future": {"f:x": {}}});
        let set = FieldSet::from_fields_v1(&v1).unwrap();
        assert!(set.has(&[f("metadata"), f("finalizers")]));
        assert!(set.has(&[
            f("metadata"),
            f("finalizers"),
            PathElement::Value(json!("a.io/x"))
        ]));
        // Unknown element types are dropped, as kube-apiserver drops them.
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a.io/x\"": {}, "v:3": {}}}})
        );
        assert_eq!(set.paths()[1], ".metadata.finalizers[=3]");
    }

    #[test]
    fn malformed_fields_v1() {
        for bad in [
            json!({"f": {}}),
            json!({"fx": {}}),
            json!({"k:{bad": {}}),
            json!({"f:a": 1}),
            json!([1]),
        ] {
            let err = FieldSet::from_fields_v1(&bad).unwrap_err();
            assert_eq!(err.http_status(), 400, "{bad}");
        }
    }

    #[test]
    fn set_operations() {
        let a = FieldSet::from_paths([&[f("a"), f("b")][..], &[f("a"), f("c")][..], &[f("d")][..]]);
        let b = FieldSet::from_paths([&[f("a"), f("b")][..], &[f("a")][..]]);
        assert_eq!(a.intersection(&b).paths(), vec![".a.b"]);
        assert_eq!(a.difference(&b).paths(), vec![".d", ".a.c"]);
        assert_eq!(a.recursive_difference(&b).paths(), vec![".d"]);
        assert_eq!(a.union(&b).paths(), vec![".a", ".d", ".a.b", ".a.c"]);
        assert_eq!(a.len(), 3);
        let prefixes = FieldSet::from_paths([&[f("a"), f("c")][..], &[f("d")][..]]);
        assert_eq!(a.filter_include(&prefixes).paths(), vec![".d", ".a.c"]);
        assert!(a.difference(&a).is_empty());
        assert_eq!(a.difference(&a), FieldSet::new());
    }

    /// The in-place operations and `intersects` against the operations that build a new set,
    /// over every pair of a family of sets: members and subtrees at several depths, a member
    /// that is also a subtree's prefix, list keys and set values, the empty set.
    #[test]
    fn in_place_operations_agree_with_the_copying_ones() {
        let key = PathElement::Key(vec![("name".into(), json!("web"))]);
        let item = PathElement::Value(json!("a.io/x"));
        let paths: Vec<Vec<PathElement>> = vec![
            vec![f("a")],
            vec![f("a"), f("b")],
            vec![f("a"), f("c"), f("d")],
            vec![f("d")],
            vec![f("e"), key.clone()],
            vec![f("e"), key.clone(), f("image")],
            vec![f("e"), key, f("ports")],
            vec![f("g"), item],
            vec![f("status"), f("conditions")],
        ];
        // Every subset of the paths whose index bits match one of these masks.
        let masks = [
            0u32,
            0b1,
            0b10,
            0b110,
            0b1001,
            0b111_0000,
            0b1_0101_0101,
            0b1_1111_1111,
            0b1_0000_0010,
        ];
        let sets: Vec<FieldSet> = masks
            .iter()
            .map(|mask| {
                FieldSet::from_paths(
                    paths
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, p)| p.as_slice()),
                )
            })
            .collect();
        for a in &sets {
            for b in &sets {
                assert_eq!(a.intersects(b), !a.intersection(b).is_empty(), "{a:?} {b:?}");
                let mut d = a.clone();
                d.difference_with(b);
                assert_eq!(d, a.difference(b));
                let mut r = a.clone();
                r.recursive_difference_with(b);
                assert_eq!(r, a.recursive_difference(b));
                // What smd_update relies on: taking away the overlap is taking away the other.
                assert_eq!(a.difference(&a.intersection(b)), a.difference(b));
            }
        }
    }

    #[test]
    fn key_elements_serialize_like_go() {
        let pe = PathElement::Key(vec![
            ("containerPort".into(), json!(80)),
            ("protocol".into(), json!("TCP")),
        ]);
        assert_eq!(
            pe.to_fields_v1_key(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(pe.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
        let pe = PathElement::Value(json!("<a&b>"));
        assert_eq!(pe.to_fields_v1_key(), r#"v:"\u003ca\u0026b\u003e""#);
        let parsed = PathElement::from_fields_v1_key(r#"k:{"protocol":"TCP","containerPort":80}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            parsed.to_fields_v1_key(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
    }
}
