//! Objects as the services' watches decode them: without `metadata.managedFields`.
//!
//! Every object written by server-side apply or by an update carries `managedFields`: one entry
//! per manager and operation, each with a `fieldsV1` tree naming every field it owns. Decoded,
//! that tree is a [`serde_json::Value`], a map and a string per field, often more values than the
//! rest of the object. No flotilla controller reads it, and watches used to decode it for every
//! event of every binding, Work, template and member object, only to drop it
//! (`flotilla_runtime::watch` clears it before its caches see an object). Skipping it took 12%
//! of the dependency distributor's allocations and 14% of the detector's at N = 10,000
//! (heaptrack, issue 17 round 29; ADR 0014).
//!
//! [`Lean<K>`] decodes `K` with the value of `metadata.managedFields` skipped as it is read, and
//! is the same resource as `K` (`Api<Lean<K>>` lists and watches `K`'s URL); [`metadata`] does
//! it for an `ObjectMeta` field of a type of our own (a [`crate::watched::Watched`] binding).
//! Nothing else changes: every other field, `metadata`'s included, decodes as `K` decodes it,
//! and an object without `managedFields` decodes exactly as before.
//!
//! Only what a service reads is decoded this way: an object written back whole (an update)
//! must be read as `K`, since leaving `managedFields` out of an update is not the same request.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The path left out of a whole object.
const OBJECT: &[&str] = &["metadata", "managedFields"];
/// The path left out of an object's metadata.
const METADATA: &[&str] = &["managedFields"];

/// `K`, decoded without `metadata.managedFields` (see the module docs). Serializes as `K`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Lean<K>(pub K);

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Skip::new(deserializer, OBJECT)).map(Lean)
    }
}

impl<K: Resource> Resource for Lean<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    /// `K`'s: an `Api<Lean<PartialObjectMeta<_>>>` asks for metadata only, as
    /// `Api<PartialObjectMeta<_>>` does.
    fn metadata_api() -> bool {
        K::metadata_api()
    }

    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// An object's metadata without `managedFields`, for `#[serde(deserialize_with)]`.
pub fn metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    ObjectMeta::deserialize(Skip::new(deserializer, METADATA))
}

/// A deserializer that hands its value to the visitor as `inner` does, except that in a map it
/// drops the entry named by the last element of `path`, reached through the entries named by
/// the others. Only maps (and options of them) are looked into; any other value, and a map of
/// an entry off the path, decodes untouched.
struct Skip<D> {
    inner: D,
    /// Never empty.
    path: &'static [&'static str],
}

impl<D> Skip<D> {
    fn new(inner: D, path: &'static [&'static str]) -> Self {
        debug_assert!(!path.is_empty());
        Self { inner, path }
    }

    fn visitor<V>(&self, inner: V) -> SkipVisitor<V> {
        SkipVisitor {
            inner,
            path: self.path,
        }
    }
}

/// Methods that hand the inner deserializer the visitor as it is: the value is not a map.
macro_rules! untouched {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method($($arg,)* visitor)
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Skip<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_map(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = self.visitor(visitor);
        self.inner.deserialize_option(visitor)
    }

    untouched! {
        deserialize_bool(), deserialize_i8(), deserialize_i16(), deserialize_i32(),
        deserialize_i64(), deserialize_i128(), deserialize_u8(), deserialize_u16(),
        deserialize_u32(), deserialize_u64(), deserialize_u128(), deserialize_f32(),
        deserialize_f64(), deserialize_char(), deserialize_str(), deserialize_string(),
        deserialize_bytes(), deserialize_byte_buf(), deserialize_unit(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str), deserialize_seq(),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(), deserialize_ignored_any(),
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// The visitor of a value on the path: a map it is given goes through [`SkipMap`].
struct SkipVisitor<V> {
    inner: V,
    path: &'static [&'static str],
}

/// Visits that hand the inner visitor the value as it is.
macro_rules! passed {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: serde::de::Error>(self, value: $ty) -> Result<V::Value, E> {
                self.inner.$method(value)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for SkipVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(SkipMap {
            inner: map,
            path: self.path,
            descend: false,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Skip::new(deserializer, self.path))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(deserializer)
    }

    passed! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char), visit_str(&str),
        visit_borrowed_str(&'de str), visit_string(String), visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }
}

/// A map on the path: the entry named `path[0]` is dropped if it ends the path, else its value
/// goes on along the rest of it; every other entry is handed over untouched.
struct SkipMap<A> {
    inner: A,
    path: &'static [&'static str],
    /// Whether the key just read is `path[0]` (and the path goes on).
    descend: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkipMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            let on_path = key.as_str() == self.path[0];
            if on_path && self.path.len() == 1 {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.descend = on_path;
            return match key {
                Key::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                Key::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.descend) {
            self.inner.next_value_seed(SkipSeed {
                inner: seed,
                path: &self.path[1..],
            })
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// The seed of a value further along the path.
struct SkipSeed<S> {
    inner: S,
    path: &'static [&'static str],
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for SkipSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Skip::new(deserializer, self.path))
    }
}

/// A map key, borrowed from the input when it can be (JSON keys without escapes).
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string key")
            }

            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(key))
            }

            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key.to_owned()))
            }

            fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::apps::v1::Deployment;
    use kube::core::{DynamicObject, PartialObjectMeta};
    use serde_json::{Value, json};

    use super::*;
    use crate::work::Work;

    /// An object of `kind` with managedFields, and "managedFields" in places that are not the
    /// object's metadata.
    fn object(api_version: &str, kind: &str) -> Value {
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "name": "web",
                "namespace": "default",
                "uid": "u-1",
                "resourceVersion": "7",
                "labels": {"app": "web", "managedFields": "a label, kept"},
                "annotations": {"note\"quoted": "{\"managedFields\":[]}"},
                "managedFields": [
                    {"manager": "kubectl", "operation": "Apply", "apiVersion": api_version,
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}},
                    {"manager": "flotilla-execution", "operation": "Update",
                     "fieldsV1": {"f:status": {".": {}}}}
                ],
                "finalizers": ["a/b"]
            },
            "spec": {
                "managedFields": [1, 2],
                "template": {"metadata": {"managedFields": [{"manager": "in a pod template, kept"}]}}
            },
            "status": {}
        })
    }

    /// `value` as serde_json decodes it into `K` once `metadata.managedFields` is removed.
    fn expected<K: serde::de::DeserializeOwned>(mut value: Value) -> K {
        value["metadata"].as_object_mut().unwrap().remove("managedFields");
        serde_json::from_value(value).unwrap()
    }

    fn lean<K: serde::de::DeserializeOwned>(value: &Value) -> K {
        let text = value.to_string();
        serde_json::from_str::<Lean<K>>(&text).unwrap().0
    }

    #[test]
    fn typed_objects_decode_whole_but_for_their_managed_fields() {
        let deployment = object("apps/v1", "Deployment");
        let decoded: Deployment = lean(&deployment);
        assert!(decoded.metadata.managed_fields.is_none());
        let template = decoded.spec.as_ref().unwrap().template.metadata.as_ref().unwrap();
        assert_eq!(template.managed_fields.as_ref().unwrap().len(), 1);
        assert_eq!(decoded, expected::<Deployment>(deployment.clone()));
        // The same decoder reads the object whole when it has no managedFields.
        let mut plain = deployment;
        plain["metadata"].as_object_mut().unwrap().remove("managedFields");
        assert_eq!(lean::<Deployment>(&plain), expected::<Deployment>(plain.clone()));
    }

    #[test]
    fn flattened_and_metadata_only_objects_skip_them_too() {
        let mut work = object("work.karmada.io/v1alpha1", "Work");
        work["spec"] = json!({"workload": {"manifests": [object("apps/v1", "Deployment")]}});
        let decoded: DynamicObject = lean(&work);
        assert_eq!(decoded, expected::<DynamicObject>(work.clone()));
        // The manifest inside keeps its managedFields: only the object's own metadata is lean.
        assert!(decoded.data["spec"]["workload"]["manifests"][0]["metadata"]["managedFields"].is_array());

        let decoded: Work = lean(&work);
        assert_eq!(
            serde_json::to_value(&decoded).unwrap(),
            serde_json::to_value(expected::<Work>(work.clone())).unwrap()
        );
        assert!(decoded.metadata.managed_fields.is_none());

        let decoded: PartialObjectMeta<DynamicObject> = lean(&work);
        assert!(decoded.metadata.managed_fields.is_none());
        assert_eq!(decoded.metadata.labels.unwrap()["managedFields"], "a label, kept");
        assert_eq!(decoded.metadata.finalizers.unwrap(), ["a/b"]);
    }

    #[test]
    fn keys_with_escapes_and_bad_input_behave_as_without_lean() {
        // An escaped key is not borrowed from the input; "managed\u0046ields" is managedFields.
        let text = r#"{"metadata":{"name":"a","managed\u0046ields":[{"manager":"m"}],"na\u006de2":1}}"#;
        let decoded: PartialObjectMeta<DynamicObject> = serde_json::from_str::<Lean<_>>(text).unwrap().0;
        assert!(decoded.metadata.managed_fields.is_none());
        assert_eq!(decoded.metadata.name.as_deref(), Some("a"));
        // Errors are the decoder's own, at the same place.
        for bad in [
            r#"{"metadata":{"name":5}}"#,
            r#"{"metadata":{"managedFields":[{"manager":"m"}"#,
            r#"{"metadata":[]}"#,
            r#"{"metadata":{"labels":{"a":1}}}"#,
        ] {
            let plain = serde_json::from_str::<PartialObjectMeta<DynamicObject>>(bad).err();
            let lean = serde_json::from_str::<Lean<PartialObjectMeta<DynamicObject>>>(bad).err();
            assert!(lean.is_some(), "{bad}");
            if !bad.contains("managedFields") {
                assert_eq!(lean.map(|e| e.to_string()), plain.map(|e| e.to_string()), "{bad}");
            }
        }
    }

    #[test]
    fn metadata_fields_of_our_own_types_skip_them() {
        #[derive(Deserialize)]
        struct Own {
            #[serde(default, deserialize_with = "metadata")]
            metadata: ObjectMeta,
        }
        let own: Own = serde_json::from_value(object("v1", "Own")).unwrap();
        assert!(own.metadata.managed_fields.is_none());
        assert_eq!(
            own.metadata,
            expected::<Deployment>(object("apps/v1", "Deployment")).metadata
        );
        let own: Own = serde_json::from_value(json!({})).unwrap();
        assert_eq!(own.metadata, ObjectMeta::default());
    }

    #[test]
    fn a_lean_resource_is_its_objects_resource() {
        use kube::core::ApiResource;
        assert_eq!(
            Lean::<Deployment>::url_path(&(), Some("ns")),
            Deployment::url_path(&(), Some("ns"))
        );
        assert_eq!(Lean::<Work>::kind(&()), "Work");
        let resource = ApiResource::erase::<Deployment>(&());
        assert_eq!(
            Lean::<PartialObjectMeta<DynamicObject>>::url_path(&resource, None),
            DynamicObject::url_path(&resource, None)
        );
        assert_eq!(Lean::<DynamicObject>::api_version(&resource), "apps/v1");
        // Requests ask for what `K`'s would: metadata only for a PartialObjectMeta.
        assert!(Lean::<PartialObjectMeta<DynamicObject>>::metadata_api());
        assert!(Lean::<PartialObjectMeta<Deployment>>::metadata_api());
        assert!(!Lean::<DynamicObject>::metadata_api());
        assert!(!Lean::<Work>::metadata_api());
    }
}
