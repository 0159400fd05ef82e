//! [`Schema`]: one CRD version's `openAPIV3Schema`, checked and pre-processed once, with the
//! operations kube-apiserver applies to custom resources.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::error::FieldError;
use crate::node::Node;
use crate::{defaulting, embedded, listtype, prune, structural, validate};

/// The list semantics of an array field, for merge patches and server-side apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListInfo {
    /// `atomic` (the default for CRD lists), `set` or `map`.
    pub list_type: String,
    /// `x-kubernetes-list-map-keys` for `map` lists.
    pub map_keys: Vec<String>,
}

/// A CRD version's structural schema, ready to validate, prune and default custom resources.
#[derive(Clone, Debug)]
pub struct Schema {
    props: JSONSchemaProps,
    root: Node,
    has_cel: bool,
}

impl Schema {
    /// Checks `props` the way kube-apiserver checks a CRD version's `openAPIV3Schema` and
    /// pre-processes it. Error paths are relative to the schema root (`properties[spec].type`);
    /// prefix them with [`FieldError::prefixed`] (`spec.versions[0].schema.openAPIV3Schema`).
    pub fn new(props: &JSONSchemaProps) -> Result<Schema, Vec<FieldError>> {
        Schema::new_at(props, "")
    }

    /// [`Schema::new`] with error paths under `prefix` (e.g.
    /// `spec.versions[0].schema.openAPIV3Schema`). Unlike prefixing afterwards, this also puts
    /// the prefix into details that quote a path (`because it is defined in ...`).
    pub fn new_at(props: &JSONSchemaProps, prefix: &str) -> Result<Schema, Vec<FieldError>> {
        let errs = structural::check(props, prefix);
        if !errs.is_empty() {
            return Err(errs);
        }
        Ok(Schema::new_unchecked(props))
    }

    /// Pre-processes `props` without checking it (for schemas already accepted, e.g. CRDs read
    /// back from storage).
    pub fn new_unchecked(props: &JSONSchemaProps) -> Schema {
        let root = Node::from_props(props);
        Schema {
            props: props.clone(),
            root,
            has_cel: has_cel(props),
        }
    }

    /// The schema as given.
    pub fn props(&self) -> &JSONSchemaProps {
        &self.props
    }

    /// Whether the schema has `x-kubernetes-validations` (CEL) rules. They are accepted but
    /// not evaluated; an API server may want to warn about that.
    pub fn has_cel_rules(&self) -> bool {
        self.has_cel
    }

    /// Validates a custom resource (after pruning and defaulting): OpenAPI value validation,
    /// embedded resources, and set/map list uniqueness, in kube-apiserver's order. The root
    /// `apiVersion`, `kind` and `metadata` are the caller's to check.
    pub fn validate(&self, value: &Value) -> Vec<FieldError> {
        let mut errs = validate::validate(&self.root, value, "");
        errs.extend(embedded::validate("", value, &self.root, false));
        if let Value::Object(map) = value {
            listtype::validate("", &self.root, map, &mut errs);
        }
        errs
    }

    /// Validates only `status` against `properties.status` (the status subresource's update).
    pub fn validate_status(&self, value: &Value) -> Vec<FieldError> {
        let Some(status) = value.get("status") else {
            return Vec::new();
        };
        let Some(s) = self.root.properties.get("status") else {
            return Vec::new();
        };
        let mut errs = validate::validate(s, status, "status");
        errs.extend(embedded::validate("status", status, s, false));
        if let Value::Object(map) = status {
            listtype::validate("status", s, map, &mut errs);
        }
        errs
    }

    /// Removes the fields the schema does not specify (except under
    /// `x-kubernetes-preserve-unknown-fields`), drops `null`s the schema neither allows nor
    /// defaults, and reduces the `metadata` of embedded resources to `ObjectMeta`'s fields.
    /// Root `apiVersion`, `kind` and `metadata` are kept as they are. Returns the removed
    /// paths as kube-apiserver reports them for `fieldValidation=Strict|Warn`
    /// (`unknown field "spec.foo"`): pruned fields first, then embedded metadata fields, each
    /// group sorted.
    pub fn prune(&self, value: &mut Value) -> Vec<String> {
        let mut tracker = prune::Tracker::on();
        prune::prune_value(value, Some(&self.root), true, &mut tracker);
        let mut paths = tracker.paths;
        paths.sort();
        prune::prune_nulls(value, Some(&self.root));
        // Without an embedded resource in the schema there is no metadata to coerce.
        if !self.root.embedded_below {
            return paths;
        }
        // Metadata that does not decode is left for `validate` to report (a failed coercion
        // changes nothing).
        let mut unknown = Vec::new();
        if embedded::coerce("", value, Some(&self.root), false, &mut unknown).is_ok() {
            unknown.sort();
            paths.extend(unknown);
        }
        paths
    }

    /// Applies the schema's `default`s (on create/update and when reading from storage).
    pub fn apply_defaults(&self, value: &mut Value) {
        defaulting::apply(value, Some(&self.root));
    }

    /// The list semantics of the array at `path` (field names; `*` steps into list items or
    /// map values); `None` if there is no array there.
    pub fn list_type_at(&self, path: &[&str]) -> Option<ListInfo> {
        let node = node_at(&self.root, path)?;
        if node.type_ != "array" {
            return None;
        }
        Some(ListInfo {
            list_type: node.list_type.clone().unwrap_or_else(|| "atomic".to_string()),
            map_keys: node.list_map_keys.clone(),
        })
    }

    /// `x-kubernetes-map-type` of the object at `path` (`granular`, the default, or `atomic`);
    /// `None` if there is no object there.
    pub fn map_type_at(&self, path: &[&str]) -> Option<String> {
        let node = node_at(&self.root, path)?;
        if node.type_ != "object" {
            return None;
        }
        Some(node.map_type.clone().unwrap_or_else(|| "granular".to_string()))
    }

    /// The schema at `path` (field names; `*` steps into list items or map values).
    pub fn props_at(&self, path: &[&str]) -> Option<&JSONSchemaProps> {
        let mut cur = &self.props;
        for seg in path {
            cur = if *seg == "*" {
                match (&cur.items, &cur.additional_properties) {
                    (Some(JSONSchemaPropsOrArray::Schema(s)), _) => s,
                    (_, Some(JSONSchemaPropsOrBool::Schema(s))) => s,
                    _ => return None,
                }
            } else {
                match cur.properties.as_ref().and_then(|p| p.get(*seg)) {
                    Some(p) => p,
                    None => match &cur.additional_properties {
                        Some(JSONSchemaPropsOrBool::Schema(s)) => s,
                        _ => return None,
                    },
                }
            };
        }
        Some(cur)
    }
}

fn node_at<'a>(root: &'a Node, path: &[&str]) -> Option<&'a Node> {
    let mut cur = root;
    for seg in path {
        cur = if *seg == "*" {
            cur.items.as_deref().or_else(|| cur.additional_schema())?
        } else {
            cur.properties.get(*seg).or_else(|| cur.additional_schema())?
        };
    }
    Some(cur)
}

fn has_cel(p: &JSONSchemaProps) -> bool {
    if p.x_kubernetes_validations.as_ref().is_some_and(|v| !v.is_empty()) {
        return true;
    }
    let items = match &p.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => vec![s.as_ref()],
        Some(JSONSchemaPropsOrArray::Schemas(v)) => v.iter().collect(),
        None => Vec::new(),
    };
    let additional = match &p.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
        _ => None,
    };
    p.properties
        .iter()
        .flat_map(|m| m.values())
        .chain(items)
        .chain(additional)
        .chain(p.all_of.iter().flatten())
        .chain(p.any_of.iter().flatten())
        .chain(p.one_of.iter().flatten())
        .chain(p.not.as_deref())
        .any(has_cel)
}
