//! The checks kube-apiserver runs on a CRD version's `openAPIV3Schema` before accepting it:
//! `ValidateCustomResourceDefinitionOpenAPISchema` (minus CEL compilation), the structural
//! schema rules (`ValidateStructural`: invariants and completeness) and the validation of
//! `default` values (`ValidateDefaults`: pruned, valid, and valid metadata).
//!
//! Paths are relative to the schema root (`properties[spec].type`); the caller prefixes them
//! with `spec.versions[i].schema.openAPIV3Schema`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::error::{FieldError, Path};
use crate::goregex;
use crate::node::Node;
use crate::{embedded, prune, validate};

/// Every check, in kube-apiserver's order and with its messages.
pub(crate) fn check(props: &JSONSchemaProps, prefix: &str) -> Vec<FieldError> {
    let root = Path::at(prefix);
    let mut errs = Vec::new();
    if props.nullable.unwrap_or(false) {
        errs.push(FieldError::forbidden(
            root.child("nullable").as_str(),
            "nullable cannot be true at the root",
        ));
    }
    // NewStructural's conversion errors overlap with the OpenAPI checks, so kube-apiserver
    // shows them only when nothing else is wrong.
    let init_err = conversion_error(props);
    if init_err.is_none() {
        let structural = validate_structural(props, &root);
        if !structural.is_empty() {
            errs.extend(structural);
        } else {
            let node = Node::from_props(props);
            errs.extend(validate_defaults(&node, &root));
        }
    }
    let ctx = Ctx {
        allow_defaults: true,
        forbid_reason: String::new(),
        inside_meta: false,
    };
    openapi_schema(props, &root, &ctx, true, &mut errs);
    if errs.is_empty()
        && let Some(e) = init_err
    {
        errs.push(FieldError::invalid(
            root.as_str(),
            Value::String(String::new()),
            e,
        ));
    }
    errs
}

/// `NewStructural`'s refusals.
fn conversion_error(p: &JSONSchemaProps) -> Option<String> {
    if p.id.as_deref().is_some_and(|s| !s.is_empty()) {
        return Some("OpenAPIV3Schema 'id' is not supported".into());
    }
    if p.schema.as_deref().is_some_and(|s| !s.is_empty()) {
        return Some("OpenAPIV3Schema 'schema' is not supported".into());
    }
    if p.ref_path.as_deref().is_some_and(|s| !s.is_empty()) {
        return Some("OpenAPIV3Schema '$ref' is not supported".into());
    }
    if p.pattern_properties.as_ref().is_some_and(|m| !m.is_empty()) {
        return Some("OpenAPIV3Schema 'patternProperties' is not supported".into());
    }
    if p.dependencies.as_ref().is_some_and(|m| !m.is_empty()) {
        return Some("OpenAPIV3Schema 'dependencies' is not supported".into());
    }
    if p.additional_items.is_some() {
        return Some("OpenAPIV3Schema 'additionalItems' is not supported".into());
    }
    if p.definitions.as_ref().is_some_and(|m| !m.is_empty()) {
        return Some("OpenAPIV3Schema 'definitions' is not supported".into());
    }
    if p.x_kubernetes_preserve_unknown_fields == Some(false) {
        return Some(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined".into(),
        );
    }
    match &p.items {
        Some(JSONSchemaPropsOrArray::Schemas(_)) => {
            return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into());
        }
        Some(JSONSchemaPropsOrArray::Schema(s)) => {
            if let Some(e) = conversion_error(s) {
                return Some(e);
            }
        }
        None => {}
    }
    let children = p
        .properties
        .iter()
        .flat_map(|m| m.values())
        .chain(p.all_of.iter().flatten())
        .chain(p.any_of.iter().flatten())
        .chain(p.one_of.iter().flatten())
        .chain(p.not.as_deref());
    for c in children {
        if let Some(e) = conversion_error(c) {
            return Some(e);
        }
    }
    if let Some(JSONSchemaPropsOrBool::Schema(s)) = &p.additional_properties {
        return conversion_error(s);
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn type_of(p: &JSONSchemaProps) -> &str {
    p.type_.as_deref().unwrap_or("")
}

fn items_schema(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &p.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
        _ => None,
    }
}

fn str_value(s: &str) -> Value {
    Value::String(s.to_string())
}

/// `ValidateStructural`: invariants plus completeness, sorted by message like kube-apiserver.
fn validate_structural(p: &JSONSchemaProps, root: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(p, Level::Root, root, &mut errs);
    completeness_value(p, Some(p), root, root, &mut errs);
    // Sort on the rendered message under a non-empty prefix so a root error (`x: ...`) sorts
    // as it does after the caller's prefix is added.
    errs.sort_by_key(|e| e.prefixed("x").message);
    errs
}

fn invariants(s: &JSONSchemaProps, lvl: Level, path: &Path, errs: &mut Vec<FieldError>) {
    let ty = type_of(s);
    let embedded = s.x_kubernetes_embedded_resource.unwrap_or(false);
    let preserve = s.x_kubernetes_preserve_unknown_fields.unwrap_or(false);
    let int_or_string = s.x_kubernetes_int_or_string.unwrap_or(false);

    if ty == "array" && s.items.is_none() {
        errs.push(FieldError::required(
            path.child("items").as_str(),
            "must be specified",
        ));
    }
    if let Some(items) = items_schema(s) {
        invariants(items, Level::Item, &path.child("items"), errs);
    }
    for (k, v) in s.properties.iter().flatten() {
        invariants(v, Level::Field, &path.child("properties").key(k), errs);
    }
    if let Some(ap) = &s.additional_properties {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties").as_str(),
                "must not be used at the root",
            ));
        }
        if let JSONSchemaPropsOrBool::Schema(a) = ap {
            invariants(a, Level::Field, &path.child("additionalProperties"), errs);
        }
    }
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields").as_str(),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-embedded-resource").as_str(),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(s.any_of.as_deref());
    let skip_first_all_of_any_of = s
        .all_of
        .as_ref()
        .and_then(|a| a.first())
        .is_some_and(|f| is_int_or_string_any_of(f.any_of.as_deref()));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, path, errs);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && ty != "object" {
        let p = path.child("type");
        if ty.is_empty() {
            errs.push(FieldError::required(
                p.as_str(),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                p.as_str(),
                str_value(ty),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(path.child("type").as_str(), detail));
    }
    if embedded && s.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            path.child("additionalProperties").as_str(),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            path.child("type").as_str(),
            str_value(ty),
            "must be object at the root",
        ));
    }
    let props = s.properties.as_ref();
    for meta in ["kind", "apiVersion"] {
        if let Some(p) = props.and_then(|m| m.get(meta))
            && check_metadata
            && type_of(p) != "string"
        {
            errs.push(FieldError::invalid(
                path.child("properties").key(meta).child("type").as_str(),
                str_value(type_of(p)),
                "must be string",
            ));
        }
    }
    if let Some(m) = props.and_then(|m| m.get("metadata")) {
        metadata_invariants(
            m,
            check_metadata,
            lvl,
            &path.child("properties").key("metadata"),
            errs,
        );
    }
    if embedded && !preserve && props.is_none_or(|m| m.is_empty()) {
        errs.push(FieldError::required(
            path.child("properties").as_str(),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn metadata_invariants(
    s: &JSONSchemaProps,
    check_metadata: bool,
    lvl: Level,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    if check_metadata && type_of(s) != "object" {
        errs.push(FieldError::invalid(
            path.child("type").as_str(),
            str_value(type_of(s)),
            "must be object",
        ));
    }
    if lvl == Level::Root {
        // Only `type`, `default` and restrictions of `name`/`generateName` may be given.
        let mut rest = s.clone();
        if let Some(props) = &rest.properties
            && props.keys().all(|k| k == "name" || k == "generateName")
        {
            rest.properties = None;
        }
        rest.type_ = None;
        rest.default = None;
        if rest.properties.as_ref().is_some_and(|m| m.is_empty()) {
            rest.properties = None;
        }
        if rest != JSONSchemaProps::default() {
            errs.push(FieldError::forbidden(
                path.as_str(),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

/// The `anyOf: [{type: integer}, {type: string}]` that int-or-string fields carry.
fn is_int_or_string_any_of(any_of: Option<&[JSONSchemaProps]>) -> bool {
    let Some(a) = any_of else { return false };
    a.len() == 2
        && a[0]
            == JSONSchemaProps {
                type_: Some("integer".into()),
                ..Default::default()
            }
        && a[1]
            == JSONSchemaProps {
                type_: Some("string".into()),
                ..Default::default()
            }
}

fn value_validation(
    s: &JSONSchemaProps,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, v) in s.any_of.iter().flatten().enumerate() {
            nested(v, false, false, &path.child("anyOf").index(i), errs);
        }
    }
    for (i, v) in s.all_of.iter().flatten().enumerate() {
        nested(
            v,
            skip_first_all_of_any_of && i == 0,
            false,
            &path.child("allOf").index(i),
            errs,
        );
    }
    for (i, v) in s.one_of.iter().flatten().enumerate() {
        nested(v, false, false, &path.child("oneOf").index(i), errs);
    }
    if let Some(not) = &s.not {
        nested(not, false, false, &path.child("not"), errs);
    }
    if let Some(pattern) = s.pattern.as_deref().filter(|p| !p.is_empty())
        && let Err(e) = goregex::compile(pattern)
    {
        errs.push(FieldError::invalid(
            path.child("pattern").as_str(),
            str_value(pattern),
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

/// `validateNestedValueValidation`: inside `allOf`/`anyOf`/`oneOf`/`not` only value
/// validations may appear.
fn nested(
    v: &JSONSchemaProps,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    value_validation(v, skip_any_of, skip_all_of_any_of, path, errs);
    if let Some(items) = items_schema(v) {
        nested(items, false, false, &path.child("items"), errs);
    }
    for (k, p) in v.properties.iter().flatten() {
        nested(p, false, false, &path.child("properties").key(k), errs);
    }
    let forbid = |errs: &mut Vec<FieldError>, name: &str, detail: &str| {
        errs.push(FieldError::forbidden(path.child(name).as_str(), detail));
    };
    if !type_of(v).is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    // `additionalProperties: false` converts to nothing here; `true` or a schema is forbidden.
    if matches!(
        v.additional_properties,
        Some(JSONSchemaPropsOrBool::Schema(_)) | Some(JSONSchemaPropsOrBool::Bool(true))
    ) {
        forbid(errs, "additionalProperties", "must be undefined to be structural");
    }
    if v.default.as_ref().is_some_and(|d| !d.0.is_null()) {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if v.title.as_deref().is_some_and(|t| !t.is_empty()) {
        forbid(errs, "title", "must be empty to be structural");
    }
    if v.description.as_deref().is_some_and(|t| !t.is_empty()) {
        forbid(errs, "description", "must be empty to be structural");
    }
    if v.nullable.unwrap_or(false) {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if v.x_kubernetes_preserve_unknown_fields.unwrap_or(false) {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if v.x_kubernetes_embedded_resource.unwrap_or(false) {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if v.x_kubernetes_int_or_string.unwrap_or(false) {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if v.x_kubernetes_list_map_keys
        .as_ref()
        .is_some_and(|k| !k.is_empty())
    {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.x_kubernetes_list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.x_kubernetes_map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if v.x_kubernetes_validations.as_ref().is_some_and(|r| !r.is_empty()) {
        forbid(errs, "x-kubernetes-validations", "must be empty to be structural");
    }
    if v.properties.as_ref().is_some_and(|m| m.contains_key("metadata")) {
        errs.push(FieldError::forbidden(
            path.child("properties").key("metadata").as_str(),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateValueValidationCompleteness`: every field a value validation mentions must be
/// specified by the structural part of the schema.
fn completeness_value(
    v: &JSONSchemaProps,
    s: Option<&JSONSchemaProps>,
    s_path: &Path,
    v_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path.as_str(),
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    if let Some(not) = &v.not {
        completeness_nested(not, Some(s), s_path, &v_path.child("not"), errs);
    }
    for (i, x) in v.all_of.iter().flatten().enumerate() {
        completeness_nested(x, Some(s), s_path, &v_path.child("allOf").index(i), errs);
    }
    for (i, x) in v.any_of.iter().flatten().enumerate() {
        completeness_nested(x, Some(s), s_path, &v_path.child("anyOf").index(i), errs);
    }
    for (i, x) in v.one_of.iter().flatten().enumerate() {
        completeness_nested(x, Some(s), s_path, &v_path.child("oneOf").index(i), errs);
    }
}

fn completeness_nested(
    v: &JSONSchemaProps,
    s: Option<&JSONSchemaProps>,
    s_path: &Path,
    v_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path.as_str(),
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    completeness_value(v, Some(s), s_path, v_path, errs);
    if let Some(items) = items_schema(v) {
        completeness_nested(
            items,
            items_schema(s),
            &s_path.child("items"),
            &v_path.child("items"),
            errs,
        );
    }
    for (k, vf) in v.properties.iter().flatten() {
        match s.properties.as_ref().and_then(|m| m.get(k)) {
            None => errs.push(FieldError::required(
                s_path.child("properties").key(k).as_str(),
                format!("because it is defined in {}", v_path.child("properties").key(k)),
            )),
            Some(sf) => completeness_nested(
                vf,
                Some(sf),
                &s_path.child("properties").key(k),
                &v_path.child("properties").key(k),
                errs,
            ),
        }
    }
}

/// Context of `specStandardValidatorV3`.
#[derive(Clone)]
struct Ctx {
    allow_defaults: bool,
    forbid_reason: String,
    inside_meta: bool,
}

impl Ctx {
    fn forbid_defaults(&self, reason: &str) -> Ctx {
        Ctx {
            allow_defaults: false,
            forbid_reason: reason.to_string(),
            ..self.clone()
        }
    }

    fn inside_meta(&self) -> Ctx {
        Ctx {
            inside_meta: true,
            ..self.clone()
        }
    }
}

const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// `specStandardValidatorV3.validate`.
fn standard(s: &JSONSchemaProps, path: &Path, ctx: &Ctx, errs: &mut Vec<FieldError>) {
    let ty = type_of(s);
    if !ty.is_empty() && !OPENAPI_V3_TYPES.contains(&ty) {
        let supported: Vec<String> = OPENAPI_V3_TYPES.iter().map(|t| t.to_string()).collect();
        errs.push(FieldError::not_supported(
            path.child("type").as_str(),
            str_value(ty),
            &supported,
        ));
    }
    if s.default.is_some() && !ctx.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !ctx.forbid_reason.is_empty() {
            detail.push(' ');
            detail.push_str(&ctx.forbid_reason);
        }
        errs.push(FieldError::forbidden(path.child("default").as_str(), detail));
    }
    if s.id.as_deref().is_some_and(|i| !i.is_empty()) {
        errs.push(FieldError::forbidden(
            path.child("id").as_str(),
            "id is not supported",
        ));
    }
    if s.additional_items.is_some() {
        errs.push(FieldError::forbidden(
            path.child("additionalItems").as_str(),
            "additionalItems is not supported",
        ));
    }
    if s.pattern_properties.as_ref().is_some_and(|m| !m.is_empty()) {
        errs.push(FieldError::forbidden(
            path.child("patternProperties").as_str(),
            "patternProperties is not supported",
        ));
    }
    if s.definitions.as_ref().is_some_and(|m| !m.is_empty()) {
        errs.push(FieldError::forbidden(
            path.child("definitions").as_str(),
            "definitions is not supported",
        ));
    }
    if s.dependencies.is_some() {
        errs.push(FieldError::forbidden(
            path.child("dependencies").as_str(),
            "dependencies is not supported",
        ));
    }
    if s.ref_path.is_some() {
        errs.push(FieldError::forbidden(
            path.child("$ref").as_str(),
            "$ref is not supported",
        ));
    }
    if ty == "null" {
        errs.push(FieldError::forbidden(
            path.child("type").as_str(),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if matches!(s.items, Some(JSONSchemaPropsOrArray::Schemas(_))) {
        errs.push(FieldError::forbidden(
            path.child("items").as_str(),
            "items must be a schema object and not an array",
        ));
    }
    if ctx.inside_meta && s.x_kubernetes_embedded_resource.unwrap_or(false) {
        errs.push(FieldError::forbidden(
            path.child("x-kubernetes-embedded-resource").as_str(),
            "must not be used inside of resource meta",
        ));
    }
}

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// `ValidateCustomResourceDefinitionOpenAPISchema` without CEL compilation.
fn openapi_schema(s: &JSONSchemaProps, path: &Path, ctx: &Ctx, is_root: bool, errs: &mut Vec<FieldError>) {
    standard(s, path, ctx, errs);
    if s.unique_items.unwrap_or(false) {
        errs.push(FieldError::forbidden(
            path.child("uniqueItems").as_str(),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = &s.additional_properties {
        let has_props = s.properties.as_ref().is_some_and(|m| !m.is_empty());
        if has_props && !matches!(ap, JSONSchemaPropsOrBool::Bool(true)) {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties").as_str(),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let JSONSchemaPropsOrBool::Schema(a) = ap {
            let sub = if ctx.inside_meta {
                ctx.forbid_defaults("inside additionalProperties applying to object metadata")
            } else {
                ctx.clone()
            };
            openapi_schema(a, &path.child("additionalProperties"), &sub, false, errs);
        }
    }
    let embedded = s.x_kubernetes_embedded_resource.unwrap_or(false);
    for (k, p) in s.properties.iter().flatten() {
        let mut sub = ctx.clone();
        if (is_root || embedded) && META_FIELDS.contains(&k.as_str()) {
            sub = sub.inside_meta();
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {k}"));
            }
        }
        openapi_schema(p, &path.child("properties").key(k), &sub, false, errs);
    }
    if let Some(not) = &s.not {
        openapi_schema(not, &path.child("not"), ctx, false, errs);
    }
    for (i, x) in s.all_of.iter().flatten().enumerate() {
        openapi_schema(x, &path.child("allOf").index(i), ctx, false, errs);
    }
    for (i, x) in s.one_of.iter().flatten().enumerate() {
        openapi_schema(x, &path.child("oneOf").index(i), ctx, false, errs);
    }
    for (i, x) in s.any_of.iter().flatten().enumerate() {
        openapi_schema(x, &path.child("anyOf").index(i), ctx, false, errs);
    }
    for (k, x) in s.definitions.iter().flatten() {
        openapi_schema(x, &path.child("definitions").key(k), ctx, false, errs);
    }
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(x)) => openapi_schema(x, &path.child("items"), ctx, false, errs),
        Some(JSONSchemaPropsOrArray::Schemas(xs)) => {
            for (i, x) in xs.iter().enumerate() {
                openapi_schema(x, &path.child("items").index(i), ctx, false, errs);
            }
        }
        None => {}
    }
    if s.x_kubernetes_preserve_unknown_fields == Some(false) {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields").as_str(),
            Value::Bool(false),
            "must be true or undefined",
        ));
    }
    list_and_map_types(s, path, errs);
    validation_rules(s, path, errs);
}

fn list_and_map_types(s: &JSONSchemaProps, path: &Path, errs: &mut Vec<FieldError>) {
    let ty = type_of(s);
    if let Some(map_type) = &s.x_kubernetes_map_type {
        if ty != "object" {
            let detail = "must be object if x-kubernetes-map-type is specified";
            if ty.is_empty() {
                errs.push(FieldError::required(path.child("type").as_str(), detail));
            } else {
                errs.push(FieldError::invalid(
                    path.child("type").as_str(),
                    str_value(ty),
                    detail,
                ));
            }
        }
        if map_type != "atomic" && map_type != "granular" {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-map-type").as_str(),
                str_value(map_type),
                &["atomic".into(), "granular".into()],
            ));
        }
    }
    let list_type = s.x_kubernetes_list_type.as_deref();
    if list_type.is_some() && ty != "array" {
        let detail = "must be array if x-kubernetes-list-type is specified";
        if ty.is_empty() {
            errs.push(FieldError::required(path.child("type").as_str(), detail));
        } else {
            errs.push(FieldError::invalid(
                path.child("type").as_str(),
                str_value(ty),
                detail,
            ));
        }
    } else if list_type == Some("set")
        && let Some(is) = items_schema(s)
    {
        let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
        match type_of(is) {
            "array"
                if is
                    .x_kubernetes_list_type
                    .as_deref()
                    .is_some_and(|t| t != "atomic") =>
            {
                errs.push(FieldError::invalid(
                    path.child("items").child("x-kubernetes-list-type").as_str(),
                    is.x_kubernetes_list_type
                        .clone()
                        .map(Value::String)
                        .unwrap_or(Value::Null),
                    detail,
                ));
            }
            "object" if is.x_kubernetes_map_type.as_deref() != Some("atomic") => {
                // kube-apiserver reports the item's list type here (a quirk kept on purpose).
                errs.push(FieldError::invalid(
                    path.child("items").child("x-kubernetes-map-type").as_str(),
                    is.x_kubernetes_list_type
                        .clone()
                        .map(Value::String)
                        .unwrap_or(Value::Null),
                    detail,
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type
        && !["atomic", "set", "map"].contains(&lt)
    {
        errs.push(FieldError::not_supported(
            path.child("x-kubernetes-list-type").as_str(),
            str_value(lt),
            &["atomic".into(), "set".into(), "map".into()],
        ));
    }
    let keys = s.x_kubernetes_list_map_keys.clone().unwrap_or_default();
    if !keys.is_empty() {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(FieldError::required(
                path.child("x-kubernetes-list-type").as_str(),
                detail,
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                path.child("x-kubernetes-list-type").as_str(),
                str_value(lt),
                detail,
            )),
            _ => {}
        }
    }
    let keys_value = Value::Array(keys.iter().map(|k| str_value(k)).collect());
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                path.child("x-kubernetes-list-map-keys").as_str(),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errs.push(FieldError::required(
                path.child("items").as_str(),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(JSONSchemaPropsOrArray::Schemas(xs)) => errs.push(FieldError::invalid(
                path.child("items").as_str(),
                serde_json::to_value(xs).unwrap_or(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(JSONSchemaPropsOrArray::Schema(is)) => {
                if type_of(is) != "object" {
                    errs.push(FieldError::invalid(
                        path.child("items").child("type").as_str(),
                        str_value(type_of(is)),
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let mut seen = std::collections::BTreeSet::new();
                    for k in &keys {
                        match is.properties.as_ref().and_then(|m| m.get(k)) {
                            Some(kp) => {
                                if matches!(type_of(kp), "array" | "object") {
                                    // kube-apiserver reports the item's type here (a quirk kept on purpose).
                                    errs.push(FieldError::invalid(
                                        path.child("items").child("properties").key(k).child("type").as_str(),
                                        str_value(type_of(is)),
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    ));
                                }
                            }
                            None => errs.push(FieldError::invalid(
                                path.child("x-kubernetes-list-map-keys").as_str(),
                                keys_value.clone(),
                                "entries must all be names of item properties",
                            )),
                        }
                        if !seen.insert(k.as_str()) {
                            errs.push(FieldError::invalid(
                                path.child("x-kubernetes-list-map-keys").as_str(),
                                keys_value.clone(),
                                "must not contain duplicate entries",
                            ));
                        }
                    }
                }
            }
        }
    }
    // validateMapListKeysMapSet.
    if let (Some(is), Some(lt @ ("set" | "map"))) = (items_schema(s), list_type) {
        if is.nullable.unwrap_or(false) {
            errs.push(FieldError::forbidden(
                path.child("items").child("nullable").as_str(),
                format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            let required = is.required.clone().unwrap_or_default();
            for k in &keys {
                let Some(kp) = is.properties.as_ref().and_then(|m| m.get(k)) else {
                    continue;
                };
                let kpath = path.child("items").child("properties").key(k);
                if !required.contains(k) && kp.default.is_none() {
                    errs.push(FieldError::required(
                        kpath.child("default").as_str(),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if kp.nullable.unwrap_or(false) {
                    errs.push(FieldError::forbidden(
                        kpath.child("nullable").as_str(),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
    }
}

/// The static checks on `x-kubernetes-validations` entries (the rules themselves are not
/// compiled: CEL is out of scope, see the crate docs).
fn validation_rules(s: &JSONSchemaProps, path: &Path, errs: &mut Vec<FieldError>) {
    let has_newlines = |x: &str| x.contains('\n') || x.contains('\r');
    for (i, rule) in s.x_kubernetes_validations.iter().flatten().enumerate() {
        let rp = path.child("x-kubernetes-validations").index(i);
        let trimmed_rule = rule.rule.trim();
        let message = rule.message.clone().unwrap_or_default();
        let trimmed_msg = message.trim();
        if trimmed_rule.is_empty() {
            errs.push(FieldError::required(
                rp.child("rule").as_str(),
                "rule is not specified",
            ));
        } else if !message.is_empty() && trimmed_msg.is_empty() {
            errs.push(FieldError::invalid(
                rp.child("message").as_str(),
                str_value(&message),
                "must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_msg) {
            errs.push(FieldError::invalid(
                rp.child("message").as_str(),
                str_value(&message),
                "must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
            errs.push(FieldError::required(
                rp.child("message").as_str(),
                "message must be specified if rule contains line breaks",
            ));
        }
        let msg_expr = rule.message_expression.clone().unwrap_or_default();
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(FieldError::required(
                rp.child("messageExpression").as_str(),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = &rule.reason {
            let supported = [
                "FieldValueDuplicate",
                "FieldValueForbidden",
                "FieldValueInvalid",
                "FieldValueRequired",
            ];
            if !supported.contains(&reason.as_str()) {
                let list: Vec<String> = supported.iter().map(|s| s.to_string()).collect();
                errs.push(FieldError::not_supported(
                    rp.child("reason").as_str(),
                    str_value(reason),
                    &list,
                ));
            }
        }
        let field_path = rule.field_path.clone().unwrap_or_default();
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(FieldError::invalid(
                rp.child("fieldPath").as_str(),
                str_value(&field_path),
                "must be non-empty if specified",
            ));
        }
        if has_newlines(&field_path) {
            errs.push(FieldError::invalid(
                rp.child("fieldPath").as_str(),
                str_value(&field_path),
                "must not contain line breaks",
            ));
        }
    }
}

/// `ValidateDefaults`: each `default` must be pruned already, carry valid metadata where it
/// covers an embedded object, and validate against its own schema.
fn validate_defaults(root: &Node, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // The resource root behaves as an embedded resource.
    let mut as_resource = root.clone();
    as_resource.embedded_resource = true;
    defaults_walk(&as_resource, path, false, &mut errs);
    errs
}

fn defaults_walk(s: &Node, path: &Path, inside_meta: bool, errs: &mut Vec<FieldError>) {
    let inside_meta = inside_meta && !s.embedded_resource;
    if let Some(default) = &s.default {
        let dpath = path.child("default");
        if inside_meta {
            let found = validate::validate(s, default, dpath.as_str());
            errs.extend(found);
        } else {
            let mut pruned = default.clone();
            prune::prune_value(
                &mut pruned,
                Some(s),
                s.embedded_resource,
                &mut prune::Tracker::off(),
            );
            if pruned != *default {
                errs.push(FieldError::invalid(
                    dpath.as_str(),
                    default.clone(),
                    "must not have unknown fields",
                ));
            }
            if let Some(e) = embedded::coerce_error(dpath.as_str(), default, s, s.embedded_resource) {
                errs.push(e);
            } else {
                let meta_errs = embedded::validate(dpath.as_str(), default, s, s.embedded_resource);
                if !meta_errs.is_empty() {
                    errs.extend(meta_errs);
                } else {
                    errs.extend(validate::validate(s, default, dpath.as_str()));
                }
            }
        }
    }
    if let Some(items) = &s.items {
        defaults_walk(items, &path.child("items"), inside_meta, errs);
    }
    for (k, p) in &s.properties {
        let sub_inside = inside_meta || (s.embedded_resource && META_FIELDS.contains(&k.as_str()));
        defaults_walk(p, &path.child("properties").key(k), sub_inside, errs);
    }
}
