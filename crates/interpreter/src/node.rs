//! Typed, path-aware reads of untyped JSON objects.
//!
//! Templates arrive as `serde_json::Value` of any kind, possibly malformed. Every read goes
//! through [`Node`], which remembers where it is (`spec.template.spec.volumes[2]`), so a value of
//! the wrong type becomes an [`InterpretError`] that names the field instead of a panic or a
//! silently skipped reference. Absent fields and JSON `null` read as "not set", the way
//! Kubernetes' own decoding treats them.

use serde_json::{Map, Value};

use crate::error::InterpretError;

/// A value inside an object, with its JSON path and a description of the object for errors.
#[derive(Clone, Debug)]
pub(crate) struct Node<'a> {
    value: &'a Value,
    path: String,
    object: &'a str,
}

/// The JSON type of a value, with its article, for error messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `apiVersion kind namespace/name` of an object, for error messages; missing parts are left out.
pub(crate) fn describe(obj: &Value) -> String {
    let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or("");
    let meta = |key: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let mut out = String::new();
    for part in [text("apiVersion"), text("kind")] {
        if !part.is_empty() {
            out.push_str(part);
            out.push(' ');
        }
    }
    let (namespace, name) = (meta("namespace"), meta("name"));
    if !namespace.is_empty() {
        out.push_str(namespace);
        out.push('/');
    }
    out.push_str(if name.is_empty() { "<unnamed>" } else { name });
    out
}

impl<'a> Node<'a> {
    /// The whole object; `object` describes it in error messages.
    pub(crate) fn root(value: &'a Value, object: &'a str) -> Self {
        Self {
            value,
            path: String::new(),
            object,
        }
    }

    /// A node for `value` found at `path` (used by rule paths that resolve their own way).
    pub(crate) fn at_path(value: &'a Value, path: String, object: &'a str) -> Self {
        Self { value, path, object }
    }

    /// The raw value.
    pub(crate) fn value(&self) -> &'a Value {
        self.value
    }

    /// The JSON path of this node; `.` for the object itself.
    pub(crate) fn path(&self) -> &str {
        if self.path.is_empty() { "." } else { &self.path }
    }

    /// The description of the object this node belongs to.
    pub(crate) fn object(&self) -> &'a str {
        self.object
    }

    /// An error saying this node should hold `expected`.
    pub(crate) fn wrong_type(&self, expected: &'static str) -> InterpretError {
        InterpretError::WrongType {
            object: self.object.to_owned(),
            path: self.path().to_owned(),
            expected,
            got: type_name(self.value),
        }
    }

    /// An error saying this node's value is unusable.
    pub(crate) fn invalid(&self, message: impl Into<String>) -> InterpretError {
        InterpretError::InvalidValue {
            object: self.object.to_owned(),
            path: self.path().to_owned(),
            message: message.into(),
        }
    }

    fn child_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// This node as an object.
    pub(crate) fn object_map(&self) -> Result<&'a Map<String, Value>, InterpretError> {
        self.value.as_object().ok_or_else(|| self.wrong_type("an object"))
    }

    /// The field `key` of this object; `None` when absent or null.
    pub(crate) fn field(&self, key: &str) -> Result<Option<Node<'a>>, InterpretError> {
        let map = self.object_map()?;
        Ok(match map.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => Some(Node {
                value,
                path: self.child_path(key),
                object: self.object,
            }),
        })
    }

    /// The field at `keys` below this object; `None` when any step is absent or null.
    pub(crate) fn descend(&self, keys: &[&str]) -> Result<Option<Node<'a>>, InterpretError> {
        let mut node = self.clone();
        for key in keys {
            match node.field(key)? {
                Some(next) => node = next,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }

    /// The elements of this list.
    pub(crate) fn items(&self) -> Result<Vec<Node<'a>>, InterpretError> {
        let list = self.value.as_array().ok_or_else(|| self.wrong_type("a list"))?;
        Ok(list
            .iter()
            .enumerate()
            .map(|(i, value)| Node {
                value,
                path: format!("{}[{i}]", self.path),
                object: self.object,
            })
            .collect())
    }

    /// The elements of the list in field `key`; empty when the field is absent.
    pub(crate) fn list(&self, key: &str) -> Result<Vec<Node<'a>>, InterpretError> {
        match self.field(key)? {
            Some(node) => node.items(),
            None => Ok(Vec::new()),
        }
    }

    /// This node as a string.
    pub(crate) fn as_str(&self) -> Result<&'a str, InterpretError> {
        self.value.as_str().ok_or_else(|| self.wrong_type("a string"))
    }

    /// This node as an integer.
    pub(crate) fn as_int(&self) -> Result<i64, InterpretError> {
        self.value.as_i64().ok_or_else(|| self.wrong_type("an integer"))
    }

    /// This node as a 32-bit integer (replica counts).
    pub(crate) fn as_i32(&self) -> Result<i32, InterpretError> {
        let value = self.as_int()?;
        i32::try_from(value)
            .map_err(|_| self.invalid(format!("{value} is out of range for a 32-bit integer")))
    }

    /// The string in field `key`; `None` when absent.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, InterpretError> {
        self.field(key)?.map(|node| node.as_str()).transpose()
    }

    /// The non-empty string in field `key`; `None` when absent or empty.
    pub(crate) fn opt_name(&self, key: &str) -> Result<Option<&'a str>, InterpretError> {
        Ok(self.opt_str(key)?.filter(|name| !name.is_empty()))
    }

    /// The 32-bit integer in field `key`; `None` when absent.
    pub(crate) fn opt_i32(&self, key: &str) -> Result<Option<i32>, InterpretError> {
        self.field(key)?.map(|node| node.as_i32()).transpose()
    }

    /// Deserializes this node into a typed value, reporting failures at this node's path.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, InterpretError> {
        serde_json::from_value(self.value.clone())
            .map_err(|err| self.invalid(format!("is not a valid {what}: {err}")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn describes_objects() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": "ns", "name": "web"}});
        assert_eq!(describe(&obj), "apps/v1 Deployment ns/web");
        let obj = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}});
        assert_eq!(describe(&obj), "v1 PersistentVolume pv");
        assert_eq!(describe(&json!("x")), "<unnamed>");
    }

    #[test]
    fn paths_follow_fields_and_indexes() {
        let obj = json!({"spec": {"volumes": [{"name": "a"}, {"name": 5}]}});
        let root = Node::root(&obj, "obj");
        let volumes = root.descend(&["spec"]).unwrap().unwrap().list("volumes").unwrap();
        assert_eq!(volumes[1].path(), "spec.volumes[1]");
        let err = volumes[1].opt_str("name").unwrap_err();
        assert_eq!(err.path(), "spec.volumes[1].name");
        assert_eq!(
            err.to_string(),
            "obj: spec.volumes[1].name: expected a string, got a number; fix the field's type in the template"
        );
    }

    #[test]
    fn null_and_absent_read_as_unset() {
        let obj = json!({"a": null});
        let root = Node::root(&obj, "obj");
        assert!(root.field("a").unwrap().is_none());
        assert!(root.field("b").unwrap().is_none());
        assert!(root.list("a").unwrap().is_empty());
        assert!(root.descend(&["a", "b", "c"]).unwrap().is_none());
    }

    #[test]
    fn wrong_container_types_are_errors() {
        let obj = json!({"spec": "x", "list": {"a": 1}, "n": 3_000_000_000_i64});
        let root = Node::root(&obj, "obj");
        let err = root.descend(&["spec", "template"]).unwrap_err();
        assert_eq!(err.path(), "spec");
        assert!(err.to_string().contains("expected an object, got a string"));
        let err = root.list("list").unwrap_err();
        assert!(err.to_string().contains("list: expected a list, got an object"));
        let err = root.opt_i32("n").unwrap_err();
        assert!(err.to_string().contains("out of range"));
        assert_eq!(Node::root(&json!(1), "obj").field("x").unwrap_err().path(), ".");
    }
}
