//! The documents a field overrider edits inside a string field, as Karmada edits them
//! (`applyRawJSONPatch`, `applyRawYAMLPatch`):
//!
//! - JSON: the text is patched as it is (members keep their order, numbers their spelling) and
//!   written back compactly; an empty text is left empty; the document must be an object or
//!   an array.
//! - YAML: the text is converted to JSON as `sigs.k8s.io/yaml` does (mapping keys sorted,
//!   non-string keys written as strings), patched, and written back as YAML with keys sorted.
//!   YAML 1.2 is read (`yes` is a string; Go's YAML 1.1 reader would read it as `true`), and
//!   the written YAML is equal in meaning to Go's, not always in spelling (strings that need
//!   quotes get single quotes here, double quotes from Go).

use serde_yaml::Value as Yaml;

use crate::doc::{Doc, go_float, parse};
use crate::patch::{Operation, apply};

fn check_root(doc: &Doc, format: &str) -> Result<(), String> {
    match doc {
        Doc::Object(_) | Doc::Array(_) => Ok(()),
        other => Err(format!(
            "the {format} document is a {}, not an object or a list",
            other.type_name()
        )),
    }
}

/// Applies `operations` to the JSON document `text`.
pub fn patch_json(text: &str, operations: &[(String, Operation)]) -> Result<String, String> {
    if text.is_empty() {
        return Ok(String::new());
    }
    let mut doc = parse(text).map_err(|e| format!("the field does not hold JSON: {e}"))?;
    // evanphx/json-patch reads a document that does not start with '[' as an object.
    if !text.starts_with('[') && !matches!(doc, Doc::Object(_)) {
        return Err(format!(
            "the JSON document is a {}, not an object or a list",
            doc.type_name()
        ));
    }
    apply(&mut doc, operations)?;
    Ok(doc.to_go_json())
}

/// Applies `operations` to the YAML document `text`.
pub fn patch_yaml(text: &str, operations: &[(String, Operation)]) -> Result<String, String> {
    let yaml: Yaml = serde_yaml::from_str(text).map_err(|e| format!("the field does not hold YAML: {e}"))?;
    let mut doc = yaml_to_doc(&yaml)?;
    check_root(&doc, "YAML")?;
    apply(&mut doc, operations)?;
    serde_yaml::to_string(&doc_to_yaml(&doc)).map_err(|e| format!("cannot write the YAML back: {e}"))
}

/// YAML to JSON as `sigs.k8s.io/yaml`'s `YAMLToJSON` converts: mapping keys sorted, scalar keys
/// written as strings.
pub fn yaml_to_doc(yaml: &Yaml) -> Result<Doc, String> {
    Ok(match yaml {
        Yaml::Null => Doc::Null,
        Yaml::Bool(b) => Doc::Bool(*b),
        Yaml::Number(n) => Doc::Number(yaml_number(n)?),
        Yaml::String(s) => Doc::String(s.clone()),
        Yaml::Sequence(items) => Doc::Array(items.iter().map(yaml_to_doc).collect::<Result<_, _>>()?),
        Yaml::Mapping(mapping) => {
            let mut members: Vec<(String, Doc)> = Vec::with_capacity(mapping.len());
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(s) => s.clone(),
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Number(n) => yaml_number(n)?,
                    other => return Err(format!("unsupported map key: {other:?}")),
                };
                members.push((key, yaml_to_doc(value)?));
            }
            members.sort_by(|a, b| a.0.cmp(&b.0));
            members.dedup_by(|later, earlier| later.0 == earlier.0);
            Doc::Object(members)
        }
        Yaml::Tagged(tagged) => yaml_to_doc(&tagged.value)?,
    })
}

fn yaml_number(number: &serde_yaml::Number) -> Result<String, String> {
    if let Some(i) = number.as_i64() {
        return Ok(i.to_string());
    }
    if let Some(u) = number.as_u64() {
        return Ok(u.to_string());
    }
    number
        .as_f64()
        .and_then(go_float)
        .ok_or_else(|| format!("json: unsupported value: {number}"))
}

/// JSON back to YAML, keys sorted.
pub fn doc_to_yaml(doc: &Doc) -> Yaml {
    match doc {
        Doc::Null => Yaml::Null,
        Doc::Bool(b) => Yaml::Bool(*b),
        Doc::Number(text) => {
            if let Ok(i) = text.parse::<i64>() {
                Yaml::Number(i.into())
            } else if let Ok(u) = text.parse::<u64>() {
                Yaml::Number(u.into())
            } else {
                text.parse::<f64>()
                    .map(|f| Yaml::Number(f.into()))
                    .unwrap_or(Yaml::Null)
            }
        }
        Doc::String(s) => Yaml::String(s.clone()),
        Doc::Array(items) => Yaml::Sequence(items.iter().map(doc_to_yaml).collect()),
        Doc::Object(members) => {
            let mut sorted: Vec<&(String, Doc)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            Yaml::Mapping(
                sorted
                    .into_iter()
                    .map(|(k, v)| (Yaml::String(k.clone()), doc_to_yaml(v)))
                    .collect(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    fn replace(path: &str, value: &str) -> (String, Operation) {
        (path.to_owned(), Operation::Replace(Some(parse(value).unwrap())))
    }

    #[test]
    fn json_keeps_order_and_compacts() {
        let text = "{\n  \"db\": {\"port\": 5432, \"host\": \"a\"},\n  \"debug\": false\n}";
        let out = patch_json(text, &[replace("/db/port", "3306")]).unwrap();
        assert_eq!(out, r#"{"db":{"port":3306,"host":"a"},"debug":false}"#);
        let out = patch_json(
            "[1,2]",
            &[("/-".to_owned(), Operation::Add(Some(Doc::Number("3".into()))))],
        )
        .unwrap();
        assert_eq!(out, "[1,2,3]");
    }

    #[test]
    fn json_errors() {
        assert_eq!(patch_json("", &[replace("/a", "1")]).unwrap(), "");
        assert!(
            patch_json("not json", &[replace("/a", "1")])
                .unwrap_err()
                .starts_with("the field does not hold JSON")
        );
        assert_eq!(
            patch_json("5", &[replace("/a", "1")]).unwrap_err(),
            "the JSON document is a number, not an object or a list"
        );
        assert_eq!(
            patch_json(" [1]", &[replace("/0", "1")]).unwrap_err(),
            "the JSON document is a array, not an object or a list"
        );
        assert_eq!(
            patch_json(r#"{"a":1}"#, &[replace("/b", "1")]).unwrap_err(),
            "replace operation does not apply: doc is missing key: /b: missing value"
        );
    }

    #[test]
    fn yaml_is_patched_and_written_back_sorted() {
        let text = "app:\n  database:\n    port: 5432\n    host: db\n  name: web\n";
        let out = patch_yaml(text, &[replace("/app/database/port", "\"3306\"")]).unwrap();
        assert_eq!(
            out,
            "app:\n  database:\n    host: db\n    port: '3306'\n  name: web\n"
        );
        let out = patch_yaml(text, &[replace("/app/database/port", "3306")]).unwrap();
        assert_eq!(
            out,
            "app:\n  database:\n    host: db\n    port: 3306\n  name: web\n"
        );
        let out = patch_yaml(
            "items:\n- a\n- b\n",
            &[(
                "/items/-".to_owned(),
                Operation::Add(Some(Doc::String("c".into()))),
            )],
        )
        .unwrap();
        assert_eq!(out, "items:\n- a\n- b\n- c\n");
    }

    #[test]
    fn yaml_conversions() {
        let yaml: Yaml = serde_yaml::from_str("b: 1.0\na: 1e3\n3: x\ntrue: y\nf: 0.5\n").unwrap();
        let doc = yaml_to_doc(&yaml).unwrap();
        assert_eq!(doc.to_go_json(), r#"{"3":"x","a":1000,"b":1,"f":0.5,"true":"y"}"#);
        let yaml: Yaml = serde_yaml::from_str("? [a]\n: b\n").unwrap();
        assert!(yaml_to_doc(&yaml).is_err());
        let yaml: Yaml = serde_yaml::from_str("a: .inf\n").unwrap();
        assert!(yaml_to_doc(&yaml).is_err());
    }

    #[test]
    fn yaml_errors() {
        assert_eq!(
            patch_yaml("just a string", &[replace("/a", "1")]).unwrap_err(),
            "the YAML document is a string, not an object or a list"
        );
        assert!(
            patch_yaml("a: [", &[replace("/a", "1")])
                .unwrap_err()
                .starts_with("the field does not hold YAML")
        );
        assert_eq!(
            patch_yaml("a: 1\n", &[("/b".to_owned(), Operation::Remove)]).unwrap_err(),
            "error in remove for path: '/b': unable to remove nonexistent key: b: missing value"
        );
    }
}
