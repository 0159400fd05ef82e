//! Value validation, keyword by keyword, with kube-apiserver's exact messages.
#![allow(clippy::unwrap_used)]

use flotilla_schema::{ErrorKind, Schema};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::{Value, json};

/// A root schema with `spec` described by `spec_yaml`.
fn schema(spec_yaml: &str) -> Schema {
    let spec: Value = serde_yaml::from_str(spec_yaml).unwrap();
    let root = json!({"type": "object", "properties": {"spec": spec}});
    let props: JSONSchemaProps = serde_json::from_value(root).unwrap();
    match Schema::new(&props) {
        Ok(s) => s,
        Err(errs) => panic!(
            "schema rejected: {:?}",
            errs.iter().map(|e| &e.message).collect::<Vec<_>>()
        ),
    }
}

fn messages(s: &Schema, spec: Value) -> Vec<String> {
    s.validate(&json!({ "spec": spec }))
        .into_iter()
        .map(|e| e.message)
        .collect()
}

/// (schema for `spec`, value of `spec`, expected messages)
fn check(cases: &[(&str, Value, &[&str])]) {
    for (yaml, value, want) in cases {
        let s = schema(yaml);
        let got = messages(&s, value.clone());
        let want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
        assert_eq!(got, want, "schema {yaml}\nvalue {value}");
    }
}

const REPLICAS: &str = "type: object\nproperties:\n  replicas: {type: integer}";

#[test]
fn types() {
    check(&[
        (REPLICAS, json!({"replicas": 3}), &[]),
        (REPLICAS, json!({"replicas": 3.0}), &[]),
        (
            REPLICAS,
            json!({"replicas": "string"}),
            &[
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ],
        ),
        (
            REPLICAS,
            json!({"replicas": 1.5}),
            // The number validator still runs and cannot read 1.5 as an integer either.
            &[
                r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
                r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.replicas"#,
            ],
        ),
        (
            REPLICAS,
            json!({"replicas": null}),
            &[
                r#"spec.replicas: Invalid value: "null": spec.replicas in body must be of type integer: "null""#,
            ],
        ),
        (
            "type: object\nproperties:\n  r: {type: integer, nullable: true}",
            json!({"r": null}),
            &[],
        ),
        (
            "type: object\nproperties:\n  n: {type: number}",
            json!({"n": 1}),
            &[],
        ),
        (
            "type: object\nproperties:\n  b: {type: boolean}",
            json!({"b": "true"}),
            &[r#"spec.b: Invalid value: "string": spec.b in body must be of type boolean: "string""#],
        ),
        (
            "type: object\nproperties:\n  s: {type: string}",
            json!({"s": {"a": 1}}),
            &[r#"spec.s: Invalid value: "object": spec.s in body must be of type string: "object""#],
        ),
        (
            "type: object\nproperties:\n  a: {type: array, items: {type: string}}",
            json!({"a": "x"}),
            &[r#"spec.a: Invalid value: "string": spec.a in body must be of type array: "string""#],
        ),
        (
            "type: object\nproperties:\n  a: {type: array, items: {type: string}}",
            json!({"a": ["x", 1]}),
            &[r#"spec.a[1]: Invalid value: "integer": spec.a[1] in body must be of type string: "integer""#],
        ),
        (
            "type: object",
            json!("x"),
            &[r#"spec: Invalid value: "string": spec in body must be of type object: "string""#],
        ),
    ]);
    let s = schema(REPLICAS);
    let errs = s.validate(&json!({"spec": {"replicas": "x"}}));
    assert_eq!(errs[0].kind, ErrorKind::TypeInvalid);
    assert_eq!(errs[0].field, "spec.replicas");
    assert_eq!(errs[0].bad_value, Some(json!("string")));
}

#[test]
fn int_or_string() {
    let yaml = "type: object\nproperties:\n  port:\n    x-kubernetes-int-or-string: true\n    anyOf: [{type: integer}, {type: string}]";
    check(&[
        (yaml, json!({"port": 80}), &[]),
        (yaml, json!({"port": "http"}), &[]),
        (
            yaml,
            json!({"port": true}),
            &[
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                r#"<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)"#,
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean""#,
            ],
        ),
    ]);
}

#[test]
fn required_and_enum() {
    check(&[
        (
            "type: object\nrequired: [foo]\nproperties:\n  foo: {type: string}",
            json!({}),
            &["spec.foo: Required value"],
        ),
        (
            "type: object\nproperties:\n  mode: {type: string, enum: [a, b]}",
            json!({"mode": "x"}),
            &[r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#],
        ),
        (
            "type: object\nproperties:\n  mode: {type: string, enum: [a, b]}",
            json!({"mode": "a"}),
            &[],
        ),
        (
            "type: object\nproperties:\n  n: {type: integer, enum: [1, 2]}",
            json!({"n": 3}),
            &[r#"spec.n: Unsupported value: 3: supported values: "1", "2""#],
        ),
        // A null enum entry never matches, even with nullable (kube-openapi skips typeless entries).
        (
            "type: object\nproperties:\n  m: {type: string, nullable: true, enum: [Lazy, null]}",
            json!({"m": null}),
            &[r#"spec.m: Unsupported value: null: supported values: "Lazy", "null""#],
        ),
        (
            "type: object\nproperties:\n  m: {type: string, nullable: true, enum: [Lazy, null]}",
            json!({"m": "Lazy"}),
            &[],
        ),
    ]);
}

#[test]
fn strings() {
    check(&[
        (
            "type: object\nproperties:\n  name: {type: string, maxLength: 5}",
            json!({"name": "abcdef"}),
            &["spec.name: Too long: may not be more than 5 bytes"],
        ),
        // Lengths count characters, not bytes.
        (
            "type: object\nproperties:\n  name: {type: string, maxLength: 2}",
            json!({"name": "éé"}),
            &[],
        ),
        (
            "type: object\nproperties:\n  name: {type: string, minLength: 3}",
            json!({"name": "ab"}),
            &[r#"spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long"#],
        ),
        (
            "type: object\nproperties:\n  name: {type: string, pattern: '^[a-z]+$'}",
            json!({"name": "A1"}),
            &[r#"spec.name: Invalid value: "A1": spec.name in body should match '^[a-z]+$'"#],
        ),
        // Only the first failing string check is reported.
        (
            "type: object\nproperties:\n  name: {type: string, maxLength: 1, pattern: '^[a-z]+$'}",
            json!({"name": "A1"}),
            &["spec.name: Too long: may not be more than 1 byte"],
        ),
    ]);
}

#[test]
fn formats() {
    check(&[
        (
            "type: object\nproperties:\n  t: {type: string, format: date-time}",
            json!({"t": "yesterday"}),
            &[r#"spec.t: Invalid value: "yesterday": spec.t in body must be of type date-time: "yesterday""#],
        ),
        (
            "type: object\nproperties:\n  t: {type: string, format: date-time}",
            json!({"t": "2024-01-02T03:04:05Z"}),
            &[],
        ),
        (
            "type: object\nproperties:\n  b: {type: string, format: byte}",
            json!({"b": "not base64!"}),
            &[r#"spec.b: Invalid value: "not base64!": spec.b in body must be of type byte: "not base64!""#],
        ),
        // Unknown formats are ignored.
        (
            "type: object\nproperties:\n  x: {type: string, format: k8s-whatever}",
            json!({"x": "anything"}),
            &[],
        ),
        (
            "type: object\nproperties:\n  r: {type: integer, format: int32}",
            json!({"r": 3_000_000_000_i64}),
            &[
                r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.r"#,
            ],
        ),
        // A string format on a non-string value reports the value's inferred format.
        (
            "type: object\nproperties:\n  t: {type: string, format: date-time}",
            json!({"t": 5}),
            &[r#"spec.t: Invalid value: "int64": spec.t in body must be of type date-time: "int64""#],
        ),
    ]);
}

#[test]
fn numbers() {
    check(&[
        (
            "type: object\nproperties:\n  r: {type: integer, minimum: 1}",
            json!({"r": 0}),
            &["spec.r: Invalid value: 0: spec.r in body should be greater than or equal to 1"],
        ),
        (
            "type: object\nproperties:\n  r: {type: integer, maximum: 5, exclusiveMaximum: true}",
            json!({"r": 5}),
            &["spec.r: Invalid value: 5: spec.r in body should be less than 5"],
        ),
        (
            "type: object\nproperties:\n  r: {type: number, minimum: 0.5, exclusiveMinimum: true}",
            json!({"r": 0.5}),
            &["spec.r: Invalid value: 0.5: spec.r in body should be greater than 0.5"],
        ),
        (
            "type: object\nproperties:\n  r: {type: integer, multipleOf: 5}",
            json!({"r": 7}),
            &["spec.r: Invalid value: 7: spec.r in body should be a multiple of 5"],
        ),
        (
            "type: object\nproperties:\n  r: {type: number, multipleOf: 0.1}",
            json!({"r": 0.3}),
            &[],
        ),
        (
            "type: object\nproperties:\n  r: {type: number, maximum: 1.5}",
            json!({"r": 2}),
            &["spec.r: Invalid value: 2: spec.r in body should be less than or equal to 1"],
        ),
    ]);
}

#[test]
fn arrays_and_objects() {
    check(&[
        (
            "type: object\nproperties:\n  a: {type: array, items: {type: string}, maxItems: 2}",
            json!({"a": ["x", "y", "z"]}),
            &["spec.a: Too many: 3: must have at most 2 items"],
        ),
        (
            "type: object\nproperties:\n  a: {type: array, items: {type: string}, minItems: 1}",
            json!({"a": []}),
            &["spec.a: Invalid value: 0: spec.a in body should have at least 1 items"],
        ),
        (
            "type: object\nproperties:\n  m: {type: object, additionalProperties: {type: string}, maxProperties: 1}",
            json!({"m": {"a": "1", "b": "2"}}),
            &["spec.m: Too many: 2: must have at most 1 item"],
        ),
        (
            "type: object\nproperties:\n  m: {type: object, additionalProperties: {type: string}, minProperties: 1}",
            json!({"m": {}}),
            &["spec.m: Invalid value: 0: spec.m in body should have at least 1 properties"],
        ),
        (
            "type: object\nproperties:\n  m: {type: object, additionalProperties: {type: integer}}",
            json!({"m": {"a": "x"}}),
            &[r#"spec.m.a: Invalid value: "string": spec.m.a in body must be of type integer: "string""#],
        ),
        (
            "type: object\nproperties:\n  m: {type: object, additionalProperties: false}",
            json!({"m": {"a": 1}}),
            &[r#"spec.m: Invalid value: "a": spec.m.a in body is a forbidden property"#],
        ),
    ]);
}

#[test]
fn junctions() {
    check(&[
        (
            "type: object\nproperties:\n  a: {type: string}\n  b: {type: string}\noneOf: [{required: [a]}, {required: [b]}]",
            json!({"a": "x", "b": "y"}),
            &[
                r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            ],
        ),
        (
            "type: object\nproperties:\n  a: {type: string}\n  b: {type: string}\nanyOf: [{required: [a]}, {required: [b]}]",
            json!({}),
            &[
                r#"<nil>: Invalid value: "": "spec" must validate at least one schema (anyOf)"#,
                "spec.a: Required value",
            ],
        ),
        (
            "type: object\nproperties:\n  a: {type: string}\nnot: {required: [a]}",
            json!({"a": "x"}),
            &[r#"<nil>: Invalid value: "": "spec" must not validate the schema (not)"#],
        ),
        (
            "type: object\nproperties:\n  a: {type: string}\nallOf: [{required: [a]}]",
            json!({}),
            &[
                "spec.a: Required value",
                r#"<nil>: Invalid value: "": "spec" must validate all the schemas (allOf). None validated"#,
            ],
        ),
    ]);
}

#[test]
fn list_types() {
    let set =
        "type: object\nproperties:\n  s: {type: array, x-kubernetes-list-type: set, items: {type: string}}";
    let map = "type: object\nproperties:\n  m:\n    type: array\n    x-kubernetes-list-type: map\n    x-kubernetes-list-map-keys: [name]\n    items:\n      type: object\n      required: [name]\n      properties:\n        name: {type: string}\n        v: {type: integer}";
    check(&[
        (set, json!({"s": ["a", "b"]}), &[]),
        (
            set,
            json!({"s": ["a", "b", "a", "a"]}),
            &[r#"spec.s[2]: Duplicate value: "a""#],
        ),
        (map, json!({"m": [{"name": "a", "v": 1}, {"name": "b"}]}), &[]),
        (
            map,
            json!({"m": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]}),
            &[r#"spec.m[1]: Duplicate value: {"name":"a"}"#],
        ),
    ]);
    let s = schema(set);
    let errs = s.validate(&json!({"spec": {"s": ["a", "a"]}}));
    assert_eq!(errs[0].kind, ErrorKind::Duplicate);
    assert_eq!(errs[0].kind.cause_type(), "FieldValueDuplicate");
}

#[test]
fn embedded_resources() {
    let yaml = "type: object\nproperties:\n  t: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}";
    check(&[
        (
            yaml,
            json!({"t": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}}),
            &[],
        ),
        (
            yaml,
            json!({"t": {}}),
            &["spec.t.apiVersion: Required value", "spec.t.kind: Required value"],
        ),
        (
            yaml,
            json!({"t": {"apiVersion": "a/b/c", "kind": "Config_Map"}}),
            &[
                r#"spec.t.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
                r#"spec.t.kind: Invalid value: "Config_Map": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            ],
        ),
        (
            yaml,
            json!({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a/b"}}}),
            &[r#"spec.t.metadata.name: Invalid value: "a/b": may not contain '/'"#],
        ),
    ]);
}

/// Set and map lists and embedded resources deep below properties, additional properties and
/// items are found, beside subtrees that have neither (which the walks skip), and errors keep
/// kube-apiserver's order.
#[test]
fn nested_lists_and_embedded_resources() {
    let yaml = r#"
type: object
properties:
  plain: {type: object, properties: {x: {type: array, items: {type: string}}}}
  groups:
    type: object
    additionalProperties:
      type: array
      items:
        type: object
        properties:
          tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
          other: {type: string}
  items:
    type: array
    items:
      type: object
      properties:
        template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
        plain: {type: integer}
"#;
    check(&[
        (
            yaml,
            json!({
                "plain": {"x": ["a", "a"]},
                "groups": {"b": [{"tags": ["p", "q"]}, {"tags": ["q", "q"], "other": "o"}], "a": [{"tags": ["z", "z"]}]},
                "items": [{"plain": 1}, {"template": {"apiVersion": "v1", "kind": "ConfigMap"}}, {"template": {"kind": "Pod"}}],
            }),
            &[
                "spec.items[2].template.apiVersion: Required value",
                r#"spec.groups[a][0].tags[1]: Duplicate value: "z""#,
                r#"spec.groups[b][1].tags[1]: Duplicate value: "q""#,
            ],
        ),
        (
            yaml,
            json!({"plain": {"x": ["a", "a"]}, "groups": {"a": [{"tags": ["y", "z"]}]}, "items": [{"plain": 2}]}),
            &[],
        ),
    ]);
}

#[test]
fn status_only() {
    let props: JSONSchemaProps = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
            "status": {"type": "object", "properties": {"n": {"type": "integer"}}}
        }
    }))
    .unwrap();
    let s = Schema::new(&props).unwrap();
    let errs = s.validate_status(&json!({"spec": {"a": 1}, "status": {"n": "x"}}));
    let msgs: Vec<String> = errs.into_iter().map(|e| e.message).collect();
    assert_eq!(
        msgs,
        vec![r#"status.n: Invalid value: "string": n in body must be of type integer: "string""#]
    );
}
