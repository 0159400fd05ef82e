//! The record of what applied, in Karmada's format: the Work annotations
//! `policy.karmada.io/applied-cluster-overrides` and `policy.karmada.io/applied-overrides`
//! hold a JSON list of `{"policyName": ..., "overriders": {...}}`, one entry per applied rule,
//! sorted by policy name, written as Go's `encoding/json` writes Karmada's types (field order
//! of the Go structs, `omitempty` where Karmada has it, a `value` of JSON type always present).

use flotilla_api::overrides::{
    CommandArgsOverrider, FieldOverrider, ImageOverrider, LabelAnnotationOverrider, Overriders,
    PlaintextOverrider, SubDocumentOperation,
};

use crate::doc::Doc;

/// Work annotation: the ClusterOverridePolicy rules that applied (Karmada's).
pub const APPLIED_CLUSTER_OVERRIDES_ANNOTATION: &str = "policy.karmada.io/applied-cluster-overrides";
/// Work annotation: the OverridePolicy rules that applied (Karmada's).
pub const APPLIED_OVERRIDES_ANNOTATION: &str = "policy.karmada.io/applied-overrides";

/// One applied rule: its policy's name and its overriders.
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedItem {
    /// The policy's name.
    pub policy_name: String,
    /// The rule's overriders.
    pub overriders: Overriders,
}

/// The annotation value for `items`, or `None` when nothing applied (Karmada then writes no
/// annotation).
pub fn annotation_value(items: &[AppliedItem]) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let mut sorted: Vec<&AppliedItem> = items.iter().collect();
    sorted.sort_by(|a, b| a.policy_name.cmp(&b.policy_name));
    let list = sorted
        .into_iter()
        .map(|item| {
            Doc::Object(vec![
                ("policyName".into(), Doc::String(item.policy_name.clone())),
                ("overriders".into(), overriders(&item.overriders)),
            ])
        })
        .collect();
    Some(Doc::Array(list).to_go_json())
}

fn string(value: &str) -> Doc {
    Doc::String(value.to_owned())
}

fn json(value: Option<&serde_json::Value>) -> Doc {
    value.map(Doc::from).unwrap_or(Doc::Null)
}

fn list<T>(members: &mut Vec<(String, Doc)>, name: &str, items: &[T], each: impl Fn(&T) -> Doc) {
    if !items.is_empty() {
        members.push((name.to_owned(), Doc::Array(items.iter().map(each).collect())));
    }
}

/// Karmada's `Overriders` as Go writes it.
pub fn overriders(o: &Overriders) -> Doc {
    let mut members = Vec::new();
    list(&mut members, "plaintext", &o.plaintext, plaintext);
    list(&mut members, "imageOverrider", &o.image_overrider, image);
    list(
        &mut members,
        "commandOverrider",
        &o.command_overrider,
        command_args,
    );
    list(&mut members, "argsOverrider", &o.args_overrider, command_args);
    list(
        &mut members,
        "labelsOverrider",
        &o.labels_overrider,
        label_annotation,
    );
    list(
        &mut members,
        "annotationsOverrider",
        &o.annotations_overrider,
        label_annotation,
    );
    list(&mut members, "fieldOverrider", &o.field_overrider, field);
    Doc::Object(members)
}

fn plaintext(p: &PlaintextOverrider) -> Doc {
    Doc::Object(vec![
        ("path".into(), string(&p.path)),
        ("operator".into(), string(p.operator.as_str())),
        ("value".into(), json(p.value.as_ref())),
    ])
}

fn image(i: &ImageOverrider) -> Doc {
    let mut members = Vec::new();
    if let Some(predicate) = &i.predicate {
        members.push((
            "predicate".into(),
            Doc::Object(vec![("path".into(), string(&predicate.path))]),
        ));
    }
    members.push(("component".into(), string(i.component.as_str())));
    members.push(("operator".into(), string(i.operator.as_str())));
    if !i.value.is_empty() {
        members.push(("value".into(), string(&i.value)));
    }
    Doc::Object(members)
}

fn command_args(c: &CommandArgsOverrider) -> Doc {
    let mut members = vec![
        ("containerName".into(), string(&c.container_name)),
        ("operator".into(), string(c.operator.as_str())),
    ];
    if !c.value.is_empty() {
        members.push((
            "value".into(),
            Doc::Array(c.value.iter().map(|v| string(v)).collect()),
        ));
    }
    Doc::Object(members)
}

fn label_annotation(l: &LabelAnnotationOverrider) -> Doc {
    Doc::Object(vec![
        ("operator".into(), string(l.operator.as_str())),
        (
            "value".into(),
            Doc::Object(l.value.iter().map(|(k, v)| (k.clone(), string(v))).collect()),
        ),
    ])
}

fn field(f: &FieldOverrider) -> Doc {
    let mut members = vec![("fieldPath".into(), string(&f.field_path))];
    list(&mut members, "json", &f.json, operation);
    list(&mut members, "yaml", &f.yaml, operation);
    Doc::Object(members)
}

fn operation(o: &SubDocumentOperation) -> Doc {
    Doc::Object(vec![
        ("subPath".into(), string(&o.sub_path)),
        ("operator".into(), string(o.operator.as_str())),
        ("value".into(), json(o.value.as_ref())),
    ])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn overriders_of(value: serde_json::Value) -> Overriders {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn nothing_applied_writes_nothing() {
        assert_eq!(annotation_value(&[]), None);
    }

    /// The exact text Karmada writes for the same overriders (Go struct field order, sorted by
    /// policy name, `value` always present on JSON-typed fields, HTML characters escaped).
    #[test]
    fn karmada_format() {
        let items = vec![
            AppliedItem {
                policy_name: "b-policy".into(),
                overriders: overriders_of(json!({
                    "labelsOverrider": [{"operator": "add", "value": {"z": "1", "a": "<x>"}}],
                    "plaintext": [
                        {"path": "/spec/replicas", "operator": "replace", "value": 3},
                        {"path": "/metadata/annotations/x", "operator": "remove"},
                    ],
                })),
            },
            AppliedItem {
                policy_name: "a-policy".into(),
                overriders: overriders_of(json!({
                    "imageOverrider": [
                        {"component": "Registry", "operator": "replace", "value": "example.com"},
                        {"predicate": {"path": "/spec/x"}, "component": "Tag", "operator": "remove"},
                    ],
                    "argsOverrider": [{"containerName": "c", "operator": "remove"}],
                    "commandOverrider": [{"containerName": "c", "operator": "add", "value": ["--v=1"]}],
                    "fieldOverrider": [{"fieldPath": "/data/c", "json": [
                        {"subPath": "/a", "operator": "add", "value": {"k": [1]}},
                        {"subPath": "/b", "operator": "remove"},
                    ]}],
                })),
            },
            AppliedItem {
                policy_name: "a-policy".into(),
                overriders: Overriders::default(),
            },
        ];
        assert_eq!(
            annotation_value(&items).unwrap(),
            concat!(
                r#"[{"policyName":"a-policy","overriders":{"imageOverrider":["#,
                r#"{"component":"Registry","operator":"replace","value":"example.com"},"#,
                r#"{"predicate":{"path":"/spec/x"},"component":"Tag","operator":"remove"}],"#,
                r#""commandOverrider":[{"containerName":"c","operator":"add","value":["--v=1"]}],"#,
                r#""argsOverrider":[{"containerName":"c","operator":"remove"}],"#,
                r#""fieldOverrider":[{"fieldPath":"/data/c","json":["#,
                r#"{"subPath":"/a","operator":"add","value":{"k":[1]}},"#,
                r#"{"subPath":"/b","operator":"remove","value":null}]}]}},"#,
                r#"{"policyName":"a-policy","overriders":{}},"#,
                r#"{"policyName":"b-policy","overriders":{"plaintext":["#,
                r#"{"path":"/spec/replicas","operator":"replace","value":3},"#,
                r#"{"path":"/metadata/annotations/x","operator":"remove","value":null}],"#,
                r#""labelsOverrider":[{"operator":"add","value":{"a":"\u003cx\u003e","z":"1"}}]}}]"#,
            )
        );
    }
}
