//! The pre-processed schema tree every algorithm walks: a `JSONSchemaProps` converted once,
//! with formats stripped the way kube-apiserver strips unsupported ones, patterns compiled and
//! `x-kubernetes-*` extensions resolved.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use regex::Regex;
use serde_json::Value;

use crate::formats;
use crate::goregex;

/// `additionalProperties`: either a boolean or a schema.
#[derive(Clone, Debug)]
pub(crate) enum Additional {
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {schema}`.
    Schema(Box<Node>),
}

/// One schema node.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    /// `type` as written.
    pub type_: String,
    /// The type list the value validator checks (`[integer, string]` for int-or-string).
    pub types: Vec<String>,
    pub nullable: bool,
    /// The format the value validator checks, after stripping unsupported formats.
    pub format: String,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    /// The pattern as written and its compiled form (or the compile error).
    pub pattern: Option<(String, Result<Regex, String>)>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub enum_: Vec<Value>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub all_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub properties: BTreeMap<String, Node>,
    pub additional_properties: Option<Additional>,
    pub items: Option<Box<Node>>,
    pub default: Option<Value>,
    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
    /// Whether this node or one below it through properties, additional properties or items
    /// is an `x-kubernetes-embedded-resource`: the walks that check and coerce embedded
    /// resources skip the subtrees without one.
    pub embedded_below: bool,
    /// Whether this node or one below it (the same children) is a `set` or `map` list: the
    /// list uniqueness walk skips the subtrees without one.
    pub lists_below: bool,
}

impl Node {
    /// Converts a schema (recursively).
    pub(crate) fn from_props(p: &JSONSchemaProps) -> Node {
        let type_ = p.type_.clone().unwrap_or_default();
        let int_or_string = p.x_kubernetes_int_or_string.unwrap_or(false);
        let types = if int_or_string {
            vec!["integer".to_string(), "string".to_string()]
        } else if type_.is_empty() {
            Vec::new()
        } else {
            vec![type_.clone()]
        };
        let format = strip_format(p.format.as_deref().unwrap_or(""), &types);
        let pattern = p
            .pattern
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(|s| (s.clone(), goregex::compile(s)));
        let items = match &p.items {
            Some(JSONSchemaPropsOrArray::Schema(s)) => Some(Box::new(Node::from_props(s))),
            // Arrays of item schemas are rejected by `Schema::new`; validate against none.
            Some(JSONSchemaPropsOrArray::Schemas(_)) | None => None,
        };
        let additional_properties = p.additional_properties.as_ref().map(|a| match a {
            JSONSchemaPropsOrBool::Bool(b) => Additional::Bool(*b),
            JSONSchemaPropsOrBool::Schema(s) => Additional::Schema(Box::new(Node::from_props(s))),
        });
        let list =
            |v: &Option<Vec<JSONSchemaProps>>| v.iter().flatten().map(Node::from_props).collect::<Vec<_>>();
        let mut node = Node {
            type_,
            types,
            nullable: p.nullable.unwrap_or(false),
            format,
            maximum: p.maximum,
            exclusive_maximum: p.exclusive_maximum.unwrap_or(false),
            minimum: p.minimum,
            exclusive_minimum: p.exclusive_minimum.unwrap_or(false),
            max_length: p.max_length,
            min_length: p.min_length,
            pattern,
            max_items: p.max_items,
            min_items: p.min_items,
            unique_items: p.unique_items.unwrap_or(false),
            multiple_of: p.multiple_of,
            enum_: p.enum_.iter().flatten().map(|j| j.0.clone()).collect(),
            max_properties: p.max_properties,
            min_properties: p.min_properties,
            required: p.required.clone().unwrap_or_default(),
            all_of: list(&p.all_of),
            one_of: list(&p.one_of),
            any_of: list(&p.any_of),
            not: p.not.as_ref().map(|n| Box::new(Node::from_props(n))),
            properties: p
                .properties
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), Node::from_props(v)))
                .collect(),
            additional_properties,
            items,
            default: p.default.as_ref().map(|d| d.0.clone()).filter(|d| !d.is_null()),
            preserve_unknown_fields: p.x_kubernetes_preserve_unknown_fields.unwrap_or(false),
            embedded_resource: p.x_kubernetes_embedded_resource.unwrap_or(false),
            list_type: p.x_kubernetes_list_type.clone(),
            list_map_keys: p.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
            map_type: p.x_kubernetes_map_type.clone(),
            embedded_below: false,
            lists_below: false,
        };
        let below = |flag: fn(&Node) -> bool| {
            node.properties.values().any(flag)
                || node.additional_schema().is_some_and(flag)
                || node.items.as_deref().is_some_and(flag)
        };
        let embedded_below = node.embedded_resource || below(|n| n.embedded_below);
        let lists_below =
            matches!(node.list_type.as_deref(), Some("set" | "map")) || below(|n| n.lists_below);
        node.embedded_below = embedded_below;
        node.lists_below = lists_below;
        node
    }

    /// The schema for an `additionalProperties` entry, if it is a schema.
    pub(crate) fn additional_schema(&self) -> Option<&Node> {
        match &self.additional_properties {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// kube-apiserver's `StripUnsupportedFormatsPostProcessor`: formats it does not validate are
/// dropped, so they are ignored rather than rejected.
fn strip_format(format: &str, types: &[String]) -> String {
    if format.is_empty() {
        return String::new();
    }
    let single = if types.len() == 1 { types[0].as_str() } else { "" };
    let keep = match single {
        "" | "string" => formats::is_supported(format),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep { format.to_string() } else { String::new() }
}
