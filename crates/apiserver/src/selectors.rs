//! Label and field selectors: parsing of the query-string forms (all operators) and of the
//! `LabelSelector` JSON form, and matching.

use std::collections::BTreeMap;

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` / `key==value` / `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=value` / `key notin (a,b)` (matches when the key is absent too).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
    /// `key>n`.
    Gt(String, i64),
    /// `key<n`.
    Lt(String, i64),
}

/// A parsed label selector (all requirements must hold).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Requirements, ANDed.
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter syntax.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(input) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Self { requirements })
    }

    /// Parses a `metav1.LabelSelector` JSON object (`matchLabels`, `matchExpressions`).
    pub fn from_json(value: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if let Some(labels) = value.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("matchLabels[{k}] must be a string"))?;
                requirements.push(Requirement::In(k.clone(), vec![v.to_owned()]));
            }
        }
        if let Some(exprs) = value.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or("matchExpressions[].key is required")?;
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                requirements.push(match op {
                    "In" if !values.is_empty() => Requirement::In(key.into(), values),
                    "NotIn" if !values.is_empty() => Requirement::NotIn(key.into(), values),
                    "Exists" if values.is_empty() => Requirement::Exists(key.into()),
                    "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(key.into()),
                    "In" | "NotIn" => {
                        return Err(format!(
                            "for 'in', 'notin' operators, values set can't be empty (key {key})"
                        ));
                    }
                    "Exists" | "DoesNotExist" => {
                        return Err(format!(
                            "values set must be empty for exists and does not exist (key {key})"
                        ));
                    }
                    other => return Err(format!("{other:?} is not a valid label selector operator")),
                });
            }
        }
        Ok(Self { requirements })
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Gt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

fn check_key(key: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err("unable to parse requirement: found '', expected: identifier".into());
    }
    if let Some(msg) = crate::names::check_qualified_name(key) {
        return Err(format!(
            "unable to parse requirement: invalid label key \"{key}\": {msg}"
        ));
    }
    Ok(key.to_owned())
}

fn check_value(value: &str) -> Result<String, String> {
    if let Some(msg) = crate::names::check_label_value(value) {
        return Err(format!(
            "unable to parse requirement: invalid label value: \"{value}\": {msg}"
        ));
    }
    Ok(value.to_owned())
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("found '{rest}', expected: '(' value list ')'"))?;
    inner.split(',').map(|v| check_value(v.trim())).collect()
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(check_key(key.trim())?));
    }
    for (op, ctor) in [("!=", 0), ("==", 1), ("=", 1)] {
        if let Some((k, v)) = part.split_once(op) {
            let key = check_key(k.trim())?;
            let value = check_value(v.trim())?;
            return Ok(if ctor == 0 {
                Requirement::NotIn(key, vec![value])
            } else {
                Requirement::In(key, vec![value])
            });
        }
    }
    for (op, gt) in [(">", true), ("<", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let key = check_key(k.trim())?;
            let n: i64 = v
                .trim()
                .parse()
                .map_err(|_| format!("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer (got {v:?})"))?;
            return Ok(if gt {
                Requirement::Gt(key, n)
            } else {
                Requirement::Lt(key, n)
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        if let Some(set) = rest.strip_prefix("notin") {
            return Ok(Requirement::NotIn(check_key(words[0])?, parse_set(set)?));
        }
        if let Some(set) = rest.strip_prefix("in") {
            return Ok(Requirement::In(check_key(words[0])?, parse_set(set)?));
        }
        return Err(format!(
            "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
        ));
    }
    if part.contains('(') || part.contains(')') || part.contains(' ') {
        return Err(format!(
            "unable to parse requirement: found '{part}', expected: identifier"
        ));
    }
    Ok(Requirement::Exists(check_key(part)?))
}

/// A parsed field selector over `metadata.name` and `metadata.namespace` (plus a few
/// well-known per-kind fields that are compared as strings).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (field, value, equal?) terms, ANDed.
    pub terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d`; `supported` lists the fields this resource accepts.
    pub fn parse(input: &str, supported: &[&str]) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in input.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, value, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(format!("invalid selector: '{input}'; can't understand '{part}'"));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_owned(), value.trim().to_owned(), eq));
        }
        Ok(Self { terms })
    }

    /// Whether the object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(field, value, eq)| {
            let actual = field_value(obj, field);
            (actual.as_deref().unwrap_or("") == value) == *eq
        })
    }

    /// The value of an equality term on `metadata.name`, if any (lets lists fetch one key).
    pub fn name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, _, eq)| f == "metadata.name" && *eq)
            .map(|(_, v, _)| v.as_str())
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

fn field_value(obj: &Value, field: &str) -> Option<String> {
    let mut cur = obj;
    for part in field.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Field-selector fields a kind supports (beyond `metadata.name`/`metadata.namespace`).
pub fn supported_fields(kind: &str) -> Vec<&'static str> {
    let mut fields = vec!["metadata.name", "metadata.namespace"];
    match kind {
        "Pod" => fields.extend([
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        "Event" => fields.extend([
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
        ]),
        "Secret" => fields.push("type"),
        "Namespace" => fields.push("status.phase"),
        "Node" => fields.push("spec.unschedulable"),
        "Job" => fields.push("status.successful"),
        "ReplicaSet" => fields.push("status.replicas"),
        _ => {}
    }
    fields
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_operator() {
        let sel = LabelSelector::parse(
            "app=web,tier!=db,env in (prod, staging),zone notin (a),canary,!legacy,n>3,m<10",
        )
        .unwrap();
        assert_eq!(sel.requirements.len(), 8);
        let good = labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("canary", ""),
            ("n", "4"),
            ("m", "9"),
        ]);
        assert!(sel.matches(&good));
        let mut bad = good.clone();
        bad.insert("legacy".into(), "x".into());
        assert!(!sel.matches(&bad));
        let mut bad = good.clone();
        bad.insert("env".into(), "dev".into());
        assert!(!sel.matches(&bad));
        let mut bad = good;
        bad.insert("n".into(), "2".into());
        assert!(!sel.matches(&bad));
        assert!(
            LabelSelector::parse("a==b")
                .unwrap()
                .matches(&labels(&[("a", "b")]))
        );
        assert!(LabelSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "app in web",
            "a b c",
            "=x",
            "a=b c",
            "x>y",
            "app in (a b)",
            "Bad Key=x",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn json_selectors() {
        let sel = LabelSelector::from_json(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]},
                                 {"key": "old", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert!(sel.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("env", "prod"), ("old", "1")])));
        assert!(
            LabelSelector::from_json(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]})).is_err()
        );
        assert!(
            LabelSelector::from_json(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}))
                .is_err()
        );
    }

    #[test]
    fn field_selectors() {
        let supported = supported_fields("ConfigMap");
        let sel =
            FieldSelector::parse("metadata.name=a,metadata.namespace!=kube-system", &supported).unwrap();
        assert_eq!(sel.name(), Some("a"));
        assert!(sel.matches(&json!({"metadata": {"name": "a", "namespace": "default"}})));
        assert!(!sel.matches(&json!({"metadata": {"name": "a", "namespace": "kube-system"}})));
        assert_eq!(
            FieldSelector::parse("spec.foo=1", &supported).unwrap_err(),
            "field label not supported: spec.foo"
        );
        assert!(FieldSelector::parse("garbage", &supported).is_err());
    }
}
