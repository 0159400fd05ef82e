//! `Schema::new`: kube-apiserver's checks on a CRD version's `openAPIV3Schema`.
#![allow(clippy::unwrap_used)]

use flotilla_schema::{ErrorKind, Schema};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;

const PREFIX: &str = "spec.versions[0].schema.openAPIV3Schema";

fn errors(yaml: &str) -> Vec<String> {
    let v: Value = serde_yaml::from_str(yaml).unwrap();
    let props: JSONSchemaProps = serde_json::from_value(v).unwrap();
    match Schema::new_at(&props, PREFIX) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.into_iter().map(|e| e.message).collect(),
    }
}

fn p(rest: &str) -> String {
    format!("{PREFIX}{rest}")
}

#[test]
fn accepted_schemas() {
    let ok = [
        "type: object\nproperties:\n  spec: {type: object, properties: {a: {type: string}}}",
        "type: object\nx-kubernetes-preserve-unknown-fields: true",
        "type: object\nproperties:\n  metadata: {type: object, properties: {name: {type: string, maxLength: 10}}}",
        "type: object\nproperties:\n  spec:\n    type: object\n    properties:\n      port:\n        x-kubernetes-int-or-string: true\n        anyOf: [{type: integer}, {type: string}]",
        "type: object\nproperties:\n  spec: {type: object, additionalProperties: {type: string}}",
        "type: object\nproperties:\n  spec:\n    type: object\n    properties: {a: {type: string}, b: {type: string}}\n    oneOf: [{required: [a]}, {required: [b]}]",
        "type: object\nproperties:\n  t: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}",
        "type: object\nproperties:\n  spec: {type: object, default: {}, properties: {r: {type: integer, default: 1}}}",
        "type: object\nproperties:\n  spec:\n    type: object\n    x-kubernetes-validations: [{rule: 'self.a == 1'}]\n    properties: {a: {type: integer}}",
        "type: object\nproperties:\n  x: {type: string, format: some-unknown-format}",
    ];
    for yaml in ok {
        assert_eq!(errors(yaml), Vec::<String>::new(), "{yaml}");
    }
}

#[test]
fn rejected_schemas() {
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "nullable: true\ntype: object",
            vec![p(".nullable: Forbidden: nullable cannot be true at the root")],
        ),
        (
            "properties:\n  a: {type: string}",
            vec![p(".type: Required value: must not be empty at the root")],
        ),
        (
            "type: array\nitems: {type: string}",
            vec![p(".type: Invalid value: \"array\": must be object at the root")],
        ),
        (
            "type: object\nproperties:\n  spec: {properties: {a: {type: string}}}",
            vec![p(
                ".properties[spec].type: Required value: must not be empty for specified object fields",
            )],
        ),
        (
            "type: object\nproperties:\n  l: {type: array}",
            vec![p(".properties[l].items: Required value: must be specified")],
        ),
        (
            "type: object\nproperties:\n  l: {type: array, items: {}}",
            vec![p(
                ".properties[l].items.type: Required value: must not be empty for specified array items",
            )],
        ),
        (
            "type: object\nproperties:\n  spec: {type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}",
            vec![p(
                ".properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            )],
        ),
        (
            "type: object\nadditionalProperties: {type: string}",
            vec![p(
                ".additionalProperties: Forbidden: must not be used at the root",
            )],
        ),
        (
            "type: object\nproperties:\n  metadata: {type: object, properties: {labels: {type: object}}}",
            vec![p(
                ".properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            )],
        ),
        (
            "type: object\nproperties:\n  kind: {type: integer}",
            vec![p(
                ".properties[kind].type: Invalid value: \"integer\": must be string",
            )],
        ),
        (
            "type: object\nproperties:\n  l: {type: array, uniqueItems: true, items: {type: string}}",
            vec![p(
                ".properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )],
        ),
        (
            "type: object\nproperties:\n  x: {type: 'null'}",
            vec![
                p(
                    ".properties[x].type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
                ),
                p(
                    ".properties[x].type: Forbidden: type cannot be set to null, use nullable as an alternative",
                ),
            ],
        ),
        (
            "type: object\nproperties:\n  spec:\n    type: object\n    properties: {a: {type: string}}\n    anyOf: [{type: object}]",
            vec![p(
                ".properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
            )],
        ),
        (
            // Completeness is checked for the root's junctions (as kube-apiserver does).
            "type: object\nanyOf: [{properties: {x: {minLength: 1}}}]",
            vec![p(
                ".properties[x]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[x]",
            )],
        ),
        (
            "type: object\nproperties:\n  spec: {type: object, default: {b: 1}, properties: {a: {type: string}}}",
            vec![p(
                ".properties[spec].default: Invalid value: {\"b\":1}: must not have unknown fields",
            )],
        ),
        (
            "type: object\nproperties:\n  r: {type: integer, default: x}",
            vec![p(
                ".properties[r].default: Invalid value: \"string\":  in body must be of type integer: \"string\"",
            )],
        ),
        (
            "type: object\nproperties:\n  metadata: {type: object, default: {name: x}}",
            vec![p(
                ".properties[metadata].default: Forbidden: must not be set in top-level metadata",
            )],
        ),
        (
            "type: object\nproperties:\n  l: {type: array, x-kubernetes-list-type: map, items: {type: object, properties: {a: {type: string}}}}",
            vec![p(
                ".properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
            )],
        ),
        (
            "type: object\nproperties:\n  l: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [a], items: {type: object, properties: {a: {type: string}}}}",
            vec![p(
                ".properties[l].items.properties[a].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            )],
        ),
        (
            "type: object\nproperties:\n  l: {type: array, x-kubernetes-list-type: bag, items: {type: string}}",
            vec![p(
                ".properties[l].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
            )],
        ),
        (
            "type: object\nproperties:\n  s: {type: string, x-kubernetes-list-type: set}",
            vec![p(
                ".properties[s].type: Invalid value: \"string\": must be array if x-kubernetes-list-type is specified",
            )],
        ),
        (
            "type: object\nproperties:\n  t: {type: object, x-kubernetes-embedded-resource: true}",
            vec![p(
                ".properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            )],
        ),
        (
            "type: object\nproperties:\n  x: {type: object, x-kubernetes-preserve-unknown-fields: false}",
            vec![p(
                ".properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
            )],
        ),
        (
            "type: object\nproperties:\n  spec:\n    type: object\n    x-kubernetes-validations: [{rule: ' '}]",
            vec![p(
                ".properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified",
            )],
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(errors(yaml), want, "{yaml}");
    }
}

#[test]
fn invalid_pattern_and_relative_paths() {
    let got = errors("type: object\nproperties:\n  s: {type: string, pattern: '(abc'}");
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with(&p(".properties[s].pattern: Invalid value: \"(abc\": must be a valid regular expression, but isn't: error parsing regexp:")),
        "{got:?}"
    );
    let v: Value = serde_yaml::from_str("type: object\nproperties:\n  l: {type: array}").unwrap();
    let errs = Schema::new(&serde_json::from_value(v).unwrap()).unwrap_err();
    assert_eq!(errs[0].field, "properties[l].items");
    assert_eq!(errs[0].kind, ErrorKind::Required);
    assert_eq!(
        errs[0].prefixed(PREFIX).message,
        p(".properties[l].items: Required value: must be specified")
    );
}

#[test]
fn cel_rules_are_reported() {
    let v: Value =
        serde_yaml::from_str("type: object\nproperties:\n  spec:\n    type: object\n    x-kubernetes-validations: [{rule: 'self.a == 1'}]")
            .unwrap();
    let s = Schema::new(&serde_json::from_value(v).unwrap()).unwrap();
    assert!(s.has_cel_rules());
    let v: Value = serde_yaml::from_str("type: object").unwrap();
    assert!(
        !Schema::new(&serde_json::from_value(v).unwrap())
            .unwrap()
            .has_cel_rules()
    );
}
