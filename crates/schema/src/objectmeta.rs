//! `ObjectMeta` handling shared by embedded resources and (for the caller) the resource root:
//! the JSON round trip through `metav1.ObjectMeta` that drops unknown and empty fields, and
//! `ValidateObjectMeta` with k8s.io/apimachinery's name, label and annotation rules.

use serde_json::{Map, Value};

use crate::error::FieldError;

/// How `metadata.name` is validated (`ValidateNameFunc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain` (custom resources at the root).
    DnsSubdomain,
    /// `NameIsDNSLabel`.
    DnsLabel,
    /// Path segment rules (embedded resources): not `.`/`..`, no `/` or `%`.
    PathSegment,
}

/// `must be no more than N characters`.
fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `RegexError(msg, fmt, examples...)`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn dns1123_label_ok(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn dns1123_subdomain_ok(v: &str) -> bool {
    v.split('.').all(dns1123_label_ok)
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !dns1123_label_ok(v) {
        if dns1123_subdomain_ok(v) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !dns1123_subdomain_ok(v) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn is_dns1035_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    let b = v.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-';
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn label_name_ok(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName` (`IsLabelKey`).
pub fn is_qualified_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !label_name_ok(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn is_label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !v.is_empty() && !label_name_ok(v) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsPathSegmentName` / `IsPathSegmentPrefix`.
pub fn is_path_segment(v: &str, prefix: bool) -> Vec<String> {
    if !prefix && (v == "." || v == "..") {
        return vec![format!("may not be '{v}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| v.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn name_errors(rule: NameRule, v: &str, prefix: bool) -> Vec<String> {
    match rule {
        NameRule::PathSegment => is_path_segment(v, prefix),
        NameRule::DnsSubdomain => is_dns1123_subdomain(&if prefix {
            mask_trailing_dash(v)
        } else {
            v.to_string()
        }),
        NameRule::DnsLabel => is_dns1123_label(&if prefix {
            mask_trailing_dash(v)
        } else {
            v.to_string()
        }),
    }
}

/// `maskTrailingDash`: a generateName may end in `-`.
fn mask_trailing_dash(v: &str) -> String {
    if v.len() > 1 && v.ends_with('-') {
        format!("{}a", &v[..v.len() - 1])
    } else {
        v.to_string()
    }
}

/// The JSON type name Go's decoder reports in unmarshal errors.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn unmarshal_error(v: &Value, field: &str, go_type: &str) -> String {
    let what = if matches!(v, Value::Number(_)) {
        format!("number {}", crate::gofmt::json(v))
    } else {
        json_type(v).to_string()
    };
    if field.is_empty() {
        format!("json: cannot unmarshal {what} into Go value of type {go_type}")
    } else {
        format!("json: cannot unmarshal {what} into Go struct field {field} of type {go_type}")
    }
}

/// The result of coercing `metadata` through `metav1.ObjectMeta`.
#[derive(Clone, Debug, PartialEq)]
pub struct CoercedMeta {
    /// The metadata as kube-apiserver would store it (unknown and empty fields dropped,
    /// timestamps normalized).
    pub value: Value,
    /// Paths of unknown fields that were dropped, e.g. `metadata.foo` (prefixed by the path of
    /// the object holding the metadata).
    pub unknown: Vec<String>,
}

/// Round-trips `metadata` through `metav1.ObjectMeta` the way kube-apiserver's decoder does.
/// `object_path` is the path of the object holding `metadata` (empty at the root). Errors are
/// the Go JSON decoder's messages.
pub fn coerce_object_meta(meta: &Value, object_path: &str) -> Result<CoercedMeta, String> {
    let Value::Object(m) = meta else {
        if meta.is_null() {
            return Ok(CoercedMeta {
                value: Value::Object(Map::new()),
                unknown: Vec::new(),
            });
        }
        return Err(unmarshal_error(meta, "", "v1.ObjectMeta"));
    };
    let prefix = if object_path.is_empty() {
        "metadata".to_string()
    } else {
        format!("{object_path}.metadata")
    };
    let mut out = Map::new();
    let mut unknown = Vec::new();
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        let v = &m[k.as_str()];
        // Named only in an error.
        let field = || format!("ObjectMeta.{k}");
        match k.as_str() {
            "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => match v {
                Value::String(s) if !s.is_empty() => {
                    out.insert(k.clone(), v.clone());
                }
                Value::String(_) | Value::Null => {}
                other => return Err(unmarshal_error(other, &field(), "string")),
            },
            "generation" | "deletionGracePeriodSeconds" => match v {
                Value::Null => {}
                Value::Number(n) => match n.as_i64() {
                    Some(0) if k == "generation" => {}
                    Some(_) => {
                        out.insert(k.clone(), v.clone());
                    }
                    None => return Err(unmarshal_error(v, &field(), "int64")),
                },
                other => return Err(unmarshal_error(other, &field(), "int64")),
            },
            "creationTimestamp" | "deletionTimestamp" => match v {
                Value::Null => {}
                Value::String(s) => {
                    let t = crate::time::parse_rfc3339(s).ok_or_else(|| {
                        format!(
                            "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse",
                            crate::gofmt::quote(s)
                        )
                    })?;
                    out.insert(k.clone(), Value::String(crate::time::format_rfc3339_utc(t)));
                }
                other => return Err(unmarshal_error(other, &field(), "v1.Time")),
            },
            "labels" | "annotations" => match v {
                Value::Null => {}
                Value::Object(entries) => {
                    let mut strings = Map::new();
                    for (ek, ev) in entries {
                        match ev {
                            Value::String(_) => {
                                strings.insert(ek.clone(), ev.clone());
                            }
                            Value::Null => {
                                strings.insert(ek.clone(), Value::String(String::new()));
                            }
                            other => return Err(unmarshal_error(other, &field(), "string")),
                        }
                    }
                    if !strings.is_empty() {
                        out.insert(k.clone(), Value::Object(strings));
                    }
                }
                other => return Err(unmarshal_error(other, &field(), "map[string]string")),
            },
            "finalizers" => match v {
                Value::Null => {}
                Value::Array(items) => {
                    for it in items {
                        if !it.is_string() && !it.is_null() {
                            return Err(unmarshal_error(it, &field(), "string"));
                        }
                    }
                    let list: Vec<Value> = items
                        .iter()
                        .map(|i| {
                            if i.is_null() {
                                Value::String(String::new())
                            } else {
                                i.clone()
                            }
                        })
                        .collect();
                    if !list.is_empty() {
                        out.insert(k.clone(), Value::Array(list));
                    }
                }
                other => return Err(unmarshal_error(other, &field(), "[]string")),
            },
            "ownerReferences" => match v {
                Value::Null => {}
                Value::Array(items) => {
                    let mut refs = Vec::new();
                    for (i, it) in items.iter().enumerate() {
                        refs.push(coerce_owner_reference(
                            it,
                            &format!("{prefix}.ownerReferences[{i}]"),
                            &mut unknown,
                        )?);
                    }
                    if !refs.is_empty() {
                        out.insert(k.clone(), Value::Array(refs));
                    }
                }
                other => return Err(unmarshal_error(other, &field(), "[]v1.OwnerReference")),
            },
            "managedFields" => match v {
                Value::Null => {}
                Value::Array(items) => {
                    if !items.is_empty() {
                        out.insert(k.clone(), v.clone());
                    }
                }
                other => return Err(unmarshal_error(other, &field(), "[]v1.ManagedFieldsEntry")),
            },
            _ => unknown.push(format!("{prefix}.{k}")),
        }
    }
    Ok(CoercedMeta {
        value: Value::Object(out),
        unknown,
    })
}

fn coerce_owner_reference(v: &Value, path: &str, unknown: &mut Vec<String>) -> Result<Value, String> {
    let Value::Object(m) = v else {
        return Err(unmarshal_error(
            v,
            "ObjectMeta.ownerReferences",
            "v1.OwnerReference",
        ));
    };
    let mut out = Map::new();
    for k in ["apiVersion", "kind", "name", "uid"] {
        let s = match m.get(k) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(unmarshal_error(
                    other,
                    &format!("OwnerReference.ownerReferences.{k}"),
                    "string",
                ));
            }
        };
        out.insert(k.to_string(), Value::String(s));
    }
    for k in ["controller", "blockOwnerDeletion"] {
        match m.get(k) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => {
                out.insert(k.to_string(), Value::Bool(*b));
            }
            Some(other) => {
                return Err(unmarshal_error(
                    other,
                    &format!("OwnerReference.ownerReferences.{k}"),
                    "bool",
                ));
            }
        }
    }
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        if !out.contains_key(k.as_str()) && !matches!(k.as_str(), "controller" | "blockOwnerDeletion") {
            unknown.push(format!("{path}.{k}"));
        }
    }
    Ok(Value::Object(out))
}

/// `ValidateObjectMeta` for a create, on coerced metadata. `requires_namespace` says whether
/// the object is namespaced; `path` is the metadata's path (e.g. `metadata`).
pub fn validate_object_meta(
    meta: &Value,
    requires_namespace: bool,
    rule: NameRule,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let get = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
    let child = |k: &str| format!("{path}.{k}");
    let generate_name = get("generateName");
    if !generate_name.is_empty() {
        for msg in name_errors(rule, generate_name, true) {
            errs.push(FieldError::invalid(
                child("generateName"),
                Value::String(generate_name.into()),
                msg,
            ));
        }
    }
    let name = get("name");
    if name.is_empty() {
        errs.push(FieldError::required(
            child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in name_errors(rule, name, false) {
            errs.push(FieldError::invalid(
                child("name"),
                Value::String(name.into()),
                msg,
            ));
        }
    }
    let namespace = get("namespace");
    if requires_namespace {
        if namespace.is_empty() {
            errs.push(FieldError::required(child("namespace"), ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    child("namespace"),
                    Value::String(namespace.into()),
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            child("namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            child("generation"),
            Value::from(g),
            "must be greater than or equal to 0",
        ));
    }
    let sorted = |k: &str| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = meta
            .get(k)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(a, b)| (a.clone(), b.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    for (k, v) in sorted("labels") {
        for msg in is_qualified_name(&k) {
            errs.push(FieldError::invalid(
                child("labels"),
                Value::String(k.clone()),
                msg,
            ));
        }
        for msg in is_label_value(&v) {
            errs.push(FieldError::invalid(
                child("labels"),
                Value::String(v.clone()),
                msg,
            ));
        }
    }
    let annotations = sorted("annotations");
    let mut total = 0usize;
    for (k, v) in &annotations {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(
                child("annotations"),
                Value::String(k.clone()),
                msg,
            ));
        }
        total += k.len() + v.len();
    }
    if total > 256 * 1024 {
        errs.push(FieldError::too_long(child("annotations"), 256 * 1024));
    }
    if let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) {
        let mut first_controller = String::new();
        for (i, r) in refs.iter().enumerate() {
            let rp = format!("{}[{i}]", child("ownerReferences"));
            let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let api_version = f("apiVersion");
            if api_version.is_empty() {
                errs.push(FieldError::required(
                    format!("{rp}.apiVersion"),
                    "must not be empty",
                ));
            } else if parse_group_version(&api_version)
                .map(|(_, v)| v.is_empty())
                .unwrap_or(true)
            {
                errs.push(FieldError::invalid(
                    format!("{rp}.apiVersion"),
                    Value::String(api_version.clone()),
                    "must be <group>/<version> or <version>",
                ));
            }
            for k in ["kind", "name", "uid"] {
                if f(k).is_empty() {
                    errs.push(FieldError::required(format!("{rp}.{k}"), "must not be empty"));
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                let current = format!("{}/{}", f("kind"), f("name"));
                if first_controller.is_empty() {
                    first_controller = current;
                } else {
                    errs.push(FieldError::invalid(
                        child("ownerReferences"),
                        Value::Array(refs.clone()),
                        format!(
                            "Only one reference can have Controller set to true. Found \"true\" in references for {first_controller} and {current}"
                        ),
                    ));
                }
            }
        }
    }
    if let Some(fins) = meta.get("finalizers").and_then(Value::as_array) {
        let names: Vec<&str> = fins.iter().filter_map(Value::as_str).collect();
        for n in &names {
            for msg in is_qualified_name(n) {
                errs.push(FieldError::invalid(
                    child("finalizers"),
                    Value::String(n.to_string()),
                    msg,
                ));
            }
        }
        if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
            errs.push(FieldError::invalid(
                child("finalizers"),
                Value::Array(fins.clone()),
                "finalizer orphan and foregroundDeletion cannot be both set",
            ));
        }
    }
    errs
}

/// `schema.ParseGroupVersion`: `(group, version)`.
pub fn parse_group_version(gv: &str) -> Result<(String, String), String> {
    if gv.is_empty() || gv == "/" {
        return Ok((String::new(), String::new()));
    }
    match gv.matches('/').count() {
        0 => Ok((String::new(), gv.to_string())),
        1 => {
            let (g, v) = gv.split_once('/').unwrap_or(("", gv));
            Ok((g.to_string(), v.to_string()))
        }
        _ => Err(format!("unexpected GroupVersion string: {gv}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn coercion_drops_unknown_and_empty_fields() {
        let c = coerce_object_meta(
            &json!({"name": "a", "namespace": "", "foo": 1, "labels": {}, "creationTimestamp": "2024-01-02T03:04:05.5+01:00",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "bar": true}]}),
            "spec.template",
        )
        .unwrap();
        assert_eq!(
            c.value,
            json!({"name": "a", "creationTimestamp": "2024-01-02T02:04:05Z",
                   "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}]})
        );
        assert_eq!(
            c.unknown,
            vec![
                "spec.template.metadata.foo".to_string(),
                "spec.template.metadata.ownerReferences[0].bar".to_string()
            ]
        );
        assert_eq!(
            coerce_object_meta(&json!({"name": 5}), "").unwrap_err(),
            "json: cannot unmarshal number 5 into Go struct field ObjectMeta.name of type string"
        );
        assert_eq!(
            coerce_object_meta(&json!("x"), "").unwrap_err(),
            "json: cannot unmarshal string into Go value of type v1.ObjectMeta"
        );
    }

    #[test]
    fn name_rules() {
        assert!(is_dns1123_label("my-name").is_empty());
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots".to_string()]);
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(!is_dns1123_subdomain("Example.com").is_empty());
        assert!(is_dns1035_label("deployment").is_empty());
        assert!(!is_dns1035_label("1abc").is_empty());
        assert!(is_qualified_name("example.com/my-key").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert!(is_label_value("").is_empty());
        assert!(!is_label_value("-a").is_empty());
        assert_eq!(
            is_path_segment("a/b", false),
            vec!["may not contain '/'".to_string()]
        );
        assert_eq!(is_path_segment("..", false), vec!["may not be '..'".to_string()]);
    }

    #[test]
    fn object_meta_validation() {
        let errs = validate_object_meta(
            &json!({"name": "ok", "namespace": "Bad_NS", "labels": {"a/b/c": "v"}}),
            true,
            NameRule::DnsSubdomain,
            "metadata",
        );
        let msgs: Vec<String> = errs.iter().map(|e| e.message.clone()).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(
            msgs[0].starts_with("metadata.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label")
        );
        assert!(
            msgs[1].starts_with("metadata.labels: Invalid value: \"a/b/c\": a valid label key must consist")
        );
        let errs = validate_object_meta(&json!({}), false, NameRule::PathSegment, "spec.t.metadata");
        assert_eq!(
            errs[0].message,
            "spec.t.metadata.name: Required value: name or generateName is required"
        );
    }
}
