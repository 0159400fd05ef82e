//! Field errors in the shape of k8s.io/apimachinery's `field.Error`: a path, a cause type, a
//! bad value and a detail, rendered into the exact message kube-apiserver returns.

use serde_json::Value;

use crate::gofmt;

/// The kind of a field error; maps one to one to a `metav1.CauseType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A required field is missing (`Required value`).
    Required,
    /// A value is malformed or out of range (`Invalid value`).
    Invalid,
    /// A value is not one of an enumeration (`Unsupported value`).
    NotSupported,
    /// A string is longer than allowed (`Too long`).
    TooLong,
    /// A list or map has more entries than allowed (`Too many`).
    TooMany,
    /// A value has the wrong JSON type (rendered as `Invalid value`, like kube-apiserver).
    TypeInvalid,
    /// A field may not be set here (`Forbidden`).
    Forbidden,
    /// A list item repeats another (`Duplicate value`).
    Duplicate,
}

impl ErrorKind {
    /// The `metav1.CauseType` string for a Status cause.
    pub fn cause_type(&self) -> &'static str {
        match self {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::Duplicate => "FieldValueDuplicate",
        }
    }

    /// The human label Go's `ErrorType.String()` prints.
    pub fn label(&self) -> &'static str {
        match self {
            ErrorKind::Required => "Required value",
            ErrorKind::Invalid | ErrorKind::TypeInvalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::Duplicate => "Duplicate value",
        }
    }

    /// Whether the rendered message carries the bad value after the label.
    fn shows_value(&self) -> bool {
        !matches!(
            self,
            ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::TooLong
        )
    }
}

/// One field error, with the message kube-apiserver would return for it.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The field path, e.g. `spec.replicas` or `spec.containers[0].name`.
    pub field: String,
    /// The cause type.
    pub kind: ErrorKind,
    /// The full message: `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
    pub message: String,
    /// The offending value, when the error carries one.
    pub bad_value: Option<Value>,
    /// The detail after the value (`spec.replicas in body must be of type integer: "string"`);
    /// kept separately so [`FieldError::prefixed`] can re-render the message.
    pub detail: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    /// Builds an error and renders its message the way `field.Error.Error()` does.
    pub fn new(
        field: impl Into<String>,
        kind: ErrorKind,
        bad_value: Option<Value>,
        detail: impl Into<String>,
    ) -> FieldError {
        let field = field.into();
        let detail = detail.into();
        let message = render(&field, kind, bad_value.as_ref(), &detail);
        FieldError {
            field,
            kind,
            message,
            bad_value,
            detail,
        }
    }

    /// `field.Required(path, detail)`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::new(field, ErrorKind::Required, None, detail)
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> FieldError {
        FieldError::new(field, ErrorKind::Invalid, Some(value), detail)
    }

    /// `field.TypeInvalid(path, value, detail)`.
    pub fn type_invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> FieldError {
        FieldError::new(field, ErrorKind::TypeInvalid, Some(value), detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::new(field, ErrorKind::Forbidden, None, detail)
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(field: impl Into<String>, value: Value) -> FieldError {
        FieldError::new(field, ErrorKind::Duplicate, Some(value), "")
    }

    /// `field.NotSupported(path, value, supported)`: the detail lists the quoted alternatives.
    pub fn not_supported(field: impl Into<String>, value: Value, supported: &[String]) -> FieldError {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| gofmt::quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        FieldError::new(field, ErrorKind::NotSupported, Some(value), detail)
    }

    /// `field.TooLong(path, _, max)`: the value is never shown.
    pub fn too_long(field: impl Into<String>, max: i64) -> FieldError {
        let detail = if max >= 0 {
            format!(
                "may not be more than {max} {}",
                if max == 1 { "byte" } else { "bytes" }
            )
        } else {
            "value is too long".to_string()
        };
        FieldError::new(field, ErrorKind::TooLong, None, detail)
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> FieldError {
        let detail = if max >= 0 {
            format!(
                "must have at most {max} {}",
                if max == 1 { "item" } else { "items" }
            )
        } else {
            "has too many items".to_string()
        };
        let value = if actual >= 0 {
            Some(Value::from(actual))
        } else {
            None
        };
        FieldError::new(field, ErrorKind::TooMany, value, detail)
    }

    /// This error with `prefix` put in front of its path, e.g. the schema location
    /// `spec.versions[0].schema.openAPIV3Schema` for errors from [`crate::Schema::new`].
    pub fn prefixed(&self, prefix: &str) -> FieldError {
        let field = join_path(prefix, &self.field);
        FieldError::new(field, self.kind, self.bad_value.clone(), self.detail.clone())
    }
}

/// Joins a path prefix and a relative path the way `field.Path` prints them.
pub(crate) fn join_path(prefix: &str, rel: &str) -> String {
    if prefix.is_empty() {
        rel.to_string()
    } else if rel.is_empty() {
        prefix.to_string()
    } else if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        format!("{prefix}.{rel}")
    }
}

/// `field.Error.Error()`: `<field>: <label>[: <value>][: <detail>]`.
fn render(field: &str, kind: ErrorKind, bad_value: Option<&Value>, detail: &str) -> String {
    let mut s = format!("{field}: {}", kind.label());
    if kind.shows_value() {
        if let Some(v) = bad_value {
            s.push_str(": ");
            s.push_str(&render_value(v));
        } else if kind != ErrorKind::TooMany {
            // A nil bad value marshals to JSON `null`.
            s.push_str(": null");
        }
    }
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    s
}

/// How `field.Error` prints a bad value: `%v` for numbers and booleans, `%q` for strings, JSON
/// for the rest.
pub(crate) fn render_value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => gofmt::number_v(n),
        Value::String(s) => gofmt::quote(s),
        other => gofmt::json(other),
    }
}

/// A path into a value or schema, printed like `field.Path`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Path(String);

impl Path {
    /// A path starting at `prefix` (empty for the root).
    pub(crate) fn at(prefix: &str) -> Path {
        Path(prefix.to_string())
    }

    /// `.name`.
    pub(crate) fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `[i]`.
    pub(crate) fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// `[key]`.
    pub(crate) fn key(&self, key: &str) -> Path {
        Path(format!("{}[{key}]", self.0))
    }

    /// The printed path.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_field_error() {
        let cases = [
            (FieldError::required("spec.foo", ""), "spec.foo: Required value"),
            (
                FieldError::required("spec.foo", "must be set"),
                "spec.foo: Required value: must be set",
            ),
            (
                FieldError::forbidden("spec.foo", "may not be set"),
                "spec.foo: Forbidden: may not be set",
            ),
            (
                FieldError::too_long("spec.name", 5),
                "spec.name: Too long: may not be more than 5 bytes",
            ),
            (
                FieldError::too_long("spec.name", 1),
                "spec.name: Too long: may not be more than 1 byte",
            ),
            (
                FieldError::too_many("spec.x", 3, 2),
                "spec.x: Too many: 3: must have at most 2 items",
            ),
            (
                FieldError::not_supported("spec.mode", json!("x"), &["a".into(), "b".into()]),
                r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#,
            ),
            (
                FieldError::duplicate("spec.x[1]", json!({"name": "a"})),
                r#"spec.x[1]: Duplicate value: {"name":"a"}"#,
            ),
            (
                FieldError::invalid("spec.x", json!(1.5), "bad"),
                "spec.x: Invalid value: 1.5: bad",
            ),
            (
                FieldError::invalid("spec.x", json!(null), "bad"),
                "spec.x: Invalid value: null: bad",
            ),
            (
                FieldError::invalid("spec.x", json!(true), "bad"),
                "spec.x: Invalid value: true: bad",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.message, want);
        }
    }

    #[test]
    fn cause_types() {
        assert_eq!(ErrorKind::Required.cause_type(), "FieldValueRequired");
        assert_eq!(ErrorKind::TypeInvalid.cause_type(), "FieldValueTypeInvalid");
        assert_eq!(ErrorKind::Duplicate.cause_type(), "FieldValueDuplicate");
    }

    #[test]
    fn prefixing_rerenders() {
        let err = FieldError::required(
            "properties[spec].type",
            "must not be empty for specified object fields",
        );
        let p = err.prefixed("spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(
            p.field,
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type"
        );
        assert_eq!(
            p.message,
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
        );
        assert_eq!(join_path("a", "[0]"), "a[0]");
        assert_eq!(join_path("a", ""), "a");
    }

    #[test]
    fn paths() {
        let p = Path::at("")
            .child("properties")
            .key("spec")
            .child("items")
            .index(2);
        assert_eq!(p.as_str(), "properties[spec].items[2]");
    }
}
