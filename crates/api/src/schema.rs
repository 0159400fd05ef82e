//! Hand-written JSON schemas for fields whose Rust type (`serde_json::Value`) says nothing to
//! schemars: embedded manifests and free-form status. They must stay structural so an API server
//! keeps their content instead of pruning it.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A whole Kubernetes object embedded in another (Work manifests).
pub(crate) fn embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of embedded Kubernetes objects.
pub(crate) fn embedded_resources(generator: &mut SchemaGenerator) -> Schema {
    let item = embedded_resource(generator);
    json_schema!({
        "type": "array",
        "items": item,
    })
}

/// Any JSON object, kept as is (a member object's `status`).
pub(crate) fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON value, kept as is (an override's `value`: Karmada's `apiextensionsv1.JSON`).
pub(crate) fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
