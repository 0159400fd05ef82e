//! Reading an object of any kind as one JSON tree, without its `metadata.managedFields`.
//!
//! The services read templates, dependencies and member objects whose kind they know only at
//! run time. `Api<DynamicObject>` decodes such an object into a `DynamicObject` (typed
//! metadata, the rest as a JSON tree), which the services then turned into a
//! `serde_json::Value` again (`serde_json::to_value`) to read it: every object was built twice,
//! and both times with its `managedFields`, often the largest part of an object written by
//! server-side apply, which none of them reads (a Work's manifest drops them; the dependency
//! fingerprint does not cover them; ownership and health read labels, annotations and status).
//!
//! [`get`] and [`patch`] send the same requests as `Api<DynamicObject>::get_opt` and `patch`
//! (same path, parameters, body and headers) and decode the answer once into a `Value`,
//! skipping `metadata.managedFields` as it is read ([`Object`]).

use std::fmt;

use kube::api::{GetParams, Patch, PatchParams};
use kube::core::Request;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An object decoded as a JSON tree without `metadata.managedFields`.
#[derive(Debug)]
pub struct Object(pub Value);

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(FieldsVisitor {
                skip: None,
                nested: Some("metadata"),
            })
            .map(Object)
    }
}

/// Reads a map into a `Value::Object`: the entry named `skip` is not built; the entry named
/// `nested` is read by a visitor skipping `managedFields`.
struct FieldsVisitor {
    skip: Option<&'static str>,
    nested: Option<&'static str>,
}

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a Kubernetes object (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.skip == Some(key.as_str()) {
                map.next_value::<IgnoredAny>()?;
            } else if self.nested == Some(key.as_str()) {
                let value = map.next_value_seed(MetadataSeed)?;
                fields.insert(key, value);
            } else {
                let value = map.next_value::<Value>()?;
                fields.insert(key, value);
            }
        }
        Ok(Value::Object(fields))
    }
}

/// `metadata` without `managedFields`; any other JSON value (a malformed object's `metadata`)
/// is kept as it is.
struct MetadataSeed;

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("object metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        FieldsVisitor {
            skip: Some("managedFields"),
            nested: None,
        }
        .visit_map(map)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
    }
}

/// Reads `name` under `url_path` (the collection path, as [`kube::Resource::url_path`] gives
/// it); `None` when it does not exist (404).
pub async fn get(client: &kube::Client, url_path: &str, name: &str) -> Result<Option<Value>, kube::Error> {
    let request = Request::new(url_path)
        .get(name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    match client.request::<Object>(request).await {
        Ok(object) => Ok(Some(object.0)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error),
    }
}

/// Patches `name` under `url_path` and returns the written object.
pub async fn patch<P: Serialize>(
    client: &kube::Client,
    url_path: &str,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> Result<Value, kube::Error> {
    let request = Request::new(url_path)
        .patch(name, params, patch)
        .map_err(kube::Error::BuildRequest)?;
    Ok(client.request::<Object>(request).await?.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Value {
        serde_json::from_str::<Object>(text)
            .map(|o| o.0)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn an_object_reads_whole_but_for_its_managed_fields() {
        let object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"app": "web"},
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
                "resourceVersion": "12",
            },
            "spec": {"replicas": 2, "template": {"metadata": {"managedFields": "kept: not object metadata"}}},
            "status": {"readyReplicas": 1},
        });
        let mut expected = object.clone();
        expected["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        assert_eq!(read(&object.to_string()), expected);
        assert!(expected["metadata"].get("managedFields").is_none());
        // Only the object's own metadata loses them.
        assert_eq!(
            read(&object.to_string())["spec"]["template"]["metadata"]["managedFields"],
            json!("kept: not object metadata")
        );
    }

    #[test]
    fn an_object_without_metadata_or_with_odd_metadata_reads_as_it_is() {
        for object in [
            json!({"kind": "Status", "code": 404}),
            json!({"metadata": null, "x": [1, 2.5, true, "s"]}),
            json!({"metadata": "text"}),
            json!({"metadata": [1, {"managedFields": 1}]}),
            json!({"metadata": {}}),
        ] {
            assert_eq!(read(&object.to_string()), object);
        }
    }

    #[test]
    fn what_is_not_an_object_is_refused() {
        for text in ["[1]", "\"text\"", "1", "null"] {
            let error = serde_json::from_str::<Object>(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains("a Kubernetes object"), "{text}: {error}");
        }
    }
}
