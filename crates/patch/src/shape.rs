//! The type information strategic merge patch and server-side apply need about an object.
//!
//! A [`Shape`] is a small tree describing, for each field, what kube-apiserver knows from the Go
//! struct tags (`patchStrategy`, `patchMergeKey`) and the OpenAPI extensions
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, defaults of
//! list-map keys). Strategic merge patch reads the `smp` half, server-side apply the rest.
//!
//! Shapes may be compact: a field that an [`Shape::Object`] does not declare (and that is not
//! covered by `additional`) is treated as a granular struct field whose own children are again
//! undeclared struct fields, whose lists are atomic, and whose scalars are leaves. That is exactly
//! how the built-in Kubernetes types behave for every field without list/map/struct markers, so a
//! shape only has to spell out the fields that deviate (maps, atomic structs, associative lists,
//! patch strategies, key defaults).

use std::collections::BTreeMap;

use serde_json::Value;

/// How server-side apply treats a list (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq)]
pub enum ListType {
    /// The list is one value, owned and replaced as a whole (the default for lists).
    Atomic,
    /// A set of scalars (`x-kubernetes-list-type: set`): each value is owned separately.
    Set,
    /// A list of objects identified by key fields (`x-kubernetes-list-type: map` with
    /// `x-kubernetes-list-map-keys`): each item and each of its fields is owned separately.
    Map {
        /// The key field names, in schema order.
        keys: Vec<String>,
    },
}

/// A field's strategic-merge-patch strategy (the Go `patchStrategy`/`patchMergeKey` tags).
///
/// kube-apiserver splits the tag on `,` and drops `retainKeys`, which only tells clients to send
/// a `$retainKeys` directive; the server honours the directive wherever it appears. The variants
/// keep the tag faithfully so shapes document the API, and the server-side semantics are:
///
/// | variant | on a list | on a map ([`Shape::Strategic`]) |
/// |---|---|---|
/// | `Replace` | replaced by the patch (also what a list without a tag does) | replaced by the patch (`patchStrategy:"replace"`) |
/// | `Merge { key }` | merged; items matched by `key`, or unioned when `key` is `None` (primitive lists such as finalizers) | merged |
/// | `RetainKeys` | replaced | merged (`patchStrategy:"retainKeys"`) |
/// | `MergeRetainKeys { key }` | as `Merge` (`patchStrategy:"merge,retainKeys"`) | merged |
#[derive(Debug, Clone, PartialEq)]
pub enum SmpStrategy {
    /// No merge: the patch value replaces the live one.
    Replace,
    /// `patchStrategy:"merge"`, with `patchMergeKey` for lists of objects.
    Merge {
        /// The merge key; `None` for lists of scalars.
        key: Option<String>,
    },
    /// `patchStrategy:"retainKeys"`.
    RetainKeys,
    /// `patchStrategy:"merge,retainKeys"`.
    MergeRetainKeys {
        /// The merge key; `None` for lists of scalars.
        key: Option<String>,
    },
}

impl SmpStrategy {
    /// Whether the server merges list items (true for `Merge` and `MergeRetainKeys`).
    pub fn merges(&self) -> bool {
        matches!(
            self,
            SmpStrategy::Merge { .. } | SmpStrategy::MergeRetainKeys { .. }
        )
    }

    /// The merge key of a merging strategy.
    pub fn merge_key(&self) -> Option<&str> {
        match self {
            SmpStrategy::Merge { key } | SmpStrategy::MergeRetainKeys { key } => key.as_deref(),
            SmpStrategy::Replace | SmpStrategy::RetainKeys => None,
        }
    }
}

/// The shape of a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A scalar (string, number, boolean): a leaf.
    Scalar,
    /// A JSON object.
    Object {
        /// Declared fields (struct fields / OpenAPI `properties`).
        fields: BTreeMap<String, Shape>,
        /// Shape of the values of undeclared keys (`map[string]T`, `additionalProperties`,
        /// or [`Shape::Untyped`] for `x-kubernetes-preserve-unknown-fields`). `None` means
        /// undeclared keys are further struct fields (see the module docs).
        additional: Option<Box<Shape>>,
        /// `x-kubernetes-map-type: atomic` / `+structType=atomic`: owned and replaced as a whole
        /// by server-side apply.
        atomic: bool,
    },
    /// A JSON array.
    List {
        /// Server-side apply semantics.
        list_type: ListType,
        /// Strategic merge patch semantics.
        smp: SmpStrategy,
        /// Shape of the items.
        items: Box<Shape>,
    },
    /// No schema (unknown kinds, `x-kubernetes-preserve-unknown-fields`): server-side apply
    /// deduces the type from the value (objects granular, every key a map entry; lists atomic);
    /// strategic merge patch merges objects and replaces lists.
    Untyped,
    /// A field with a schema default. structured-merge-diff uses the default of a list-map key
    /// field when an item omits it (`protocol: TCP` of container and service ports).
    Defaulted {
        /// The default value.
        default: Value,
        /// The field's shape.
        shape: Box<Shape>,
    },
    /// An object field carrying an explicit `patchStrategy` (`replace` on
    /// PodDisruptionBudget `spec.selector`, `retainKeys` on Deployment `spec.strategy`).
    /// Server-side apply ignores it.
    Strategic {
        /// The field's patch strategy.
        smp: SmpStrategy,
        /// The field's shape.
        shape: Box<Shape>,
    },
}

/// An undeclared struct field: granular object, undeclared keys are again struct fields.
static OPEN_OBJECT: Shape = Shape::Object {
    fields: BTreeMap::new(),
    additional: None,
    atomic: false,
};
static UNTYPED: Shape = Shape::Untyped;

impl Shape {
    /// The shape with [`Shape::Defaulted`] and [`Shape::Strategic`] annotations removed.
    pub fn resolved(&self) -> &Shape {
        let mut s = self;
        loop {
            match s {
                Shape::Defaulted { shape, .. } | Shape::Strategic { shape, .. } => s = shape,
                other => return other,
            }
        }
    }

    /// The shape of field `name` of an object (undeclared fields of an [`Shape::Object`] without
    /// `additional` are open structs; everything under [`Shape::Untyped`] is untyped).
    pub fn field(&self, name: &str) -> &Shape {
        match self.resolved() {
            Shape::Object {
                fields, additional, ..
            } => match fields.get(name) {
                Some(f) => f,
                None => match additional {
                    Some(a) => a,
                    None => &OPEN_OBJECT,
                },
            },
            Shape::Untyped => &UNTYPED,
            Shape::Scalar | Shape::List { .. } => &OPEN_OBJECT,
            Shape::Defaulted { .. } | Shape::Strategic { .. } => &UNTYPED,
        }
    }

    /// The shape the schema declares for field `name` (a declared field, or the map's value
    /// shape); `None` for an undeclared field of a compact shape.
    pub fn declared_field(&self, name: &str) -> Option<&Shape> {
        match self.resolved() {
            Shape::Object {
                fields, additional, ..
            } => fields.get(name).or(additional.as_deref()),
            Shape::Untyped => Some(&UNTYPED),
            _ => None,
        }
    }

    /// Whether `name` is a struct field rather than a map entry. structured-merge-diff records
    /// map entries themselves as owned, struct fields only through their leaves.
    pub fn declares(&self, name: &str) -> bool {
        match self.resolved() {
            Shape::Object {
                fields, additional, ..
            } => fields.contains_key(name) || additional.is_none(),
            Shape::Untyped => false,
            _ => true,
        }
    }

    /// The shape of the items of a list (untyped for anything else).
    pub fn items(&self) -> &Shape {
        match self.resolved() {
            Shape::List { items, .. } => items,
            _ => &UNTYPED,
        }
    }

    /// The schema default of this field, if any.
    pub fn default_value(&self) -> Option<&Value> {
        let mut s = self;
        loop {
            match s {
                Shape::Defaulted { default, .. } => return Some(default),
                Shape::Strategic { shape, .. } => s = shape,
                _ => return None,
            }
        }
    }

    /// The explicit patch strategy of an object field ([`Shape::Strategic`]).
    pub fn object_strategy(&self) -> Option<&SmpStrategy> {
        let mut s = self;
        loop {
            match s {
                Shape::Strategic { smp, .. } => return Some(smp),
                Shape::Defaulted { shape, .. } => s = shape,
                _ => return None,
            }
        }
    }

    /// The patch strategy of a list field (`Replace` for anything that is not a list).
    pub fn list_strategy(&self) -> &SmpStrategy {
        static REPLACE: SmpStrategy = SmpStrategy::Replace;
        match self.resolved() {
            Shape::List { smp, .. } => smp,
            _ => &REPLACE,
        }
    }

    /// Whether server-side apply treats values of this shape as one leaf.
    pub fn is_atomic(&self) -> bool {
        match self.resolved() {
            Shape::Object { atomic, .. } => *atomic,
            Shape::List { list_type, .. } => *list_type == ListType::Atomic,
            Shape::Scalar => true,
            _ => false,
        }
    }

    /// The shape of an OpenAPI v3 schema as kube-apiserver reads it for custom resources
    /// (structured-merge-diff's schema conversion): `properties` are struct fields,
    /// `additionalProperties` map values, `x-kubernetes-preserve-unknown-fields` makes other
    /// keys untyped, `x-kubernetes-map-type: atomic` makes an object one leaf, arrays are atomic
    /// unless `x-kubernetes-list-type` is `set` or `map` (keyed by
    /// `x-kubernetes-list-map-keys`), `default`s of properties are kept for list-map keys, and
    /// `x-kubernetes-patch-strategy`/`x-kubernetes-patch-merge-key` give the strategic merge
    /// patch strategy (custom resources have none).
    pub fn from_openapi_v3(schema: &Value) -> Shape {
        let Some(s) = schema.as_object() else {
            return Shape::Untyped;
        };
        let str_of = |k: &str| s.get(k).and_then(Value::as_str);
        let preserve = s
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool)
            == Some(true);
        let shape = if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            Shape::Scalar
        } else {
            match str_of("type") {
                Some("object") | None
                    if s.contains_key("properties") || s.contains_key("additionalProperties") =>
                {
                    let fields: BTreeMap<String, Shape> = s
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|p| {
                            p.iter()
                                .map(|(k, v)| (k.clone(), Shape::from_openapi_v3(v)))
                                .collect()
                        })
                        .unwrap_or_default();
                    let additional = match s.get("additionalProperties") {
                        Some(Value::Object(a)) => {
                            Some(Box::new(Shape::from_openapi_v3(&Value::Object(a.clone()))))
                        }
                        Some(Value::Bool(true)) => Some(Box::new(Shape::Untyped)),
                        _ if preserve => Some(Box::new(Shape::Untyped)),
                        // Structural schemas prune anything else: no undeclared keys remain.
                        _ => None,
                    };
                    Shape::Object {
                        fields,
                        additional,
                        atomic: str_of("x-kubernetes-map-type") == Some("atomic"),
                    }
                }
                Some("object") if preserve => Shape::Untyped,
                Some("object") => Shape::Object {
                    fields: BTreeMap::new(),
                    additional: None,
                    atomic: str_of("x-kubernetes-map-type") == Some("atomic"),
                },
                Some("array") => {
                    let items = s
                        .get("items")
                        .map(Shape::from_openapi_v3)
                        .unwrap_or(Shape::Untyped);
                    let list_type = match str_of("x-kubernetes-list-type") {
                        Some("set") => ListType::Set,
                        Some("map") => ListType::Map {
                            keys: s
                                .get("x-kubernetes-list-map-keys")
                                .and_then(Value::as_array)
                                .map(|k| k.iter().filter_map(Value::as_str).map(str::to_string).collect())
                                .unwrap_or_default(),
                        },
                        _ => ListType::Atomic,
                    };
                    let key = str_of("x-kubernetes-patch-merge-key").map(str::to_string);
                    let smp = match str_of("x-kubernetes-patch-strategy") {
                        Some(p) if p.split(',').any(|x| x == "merge") && p.contains("retainKeys") => {
                            SmpStrategy::MergeRetainKeys { key }
                        }
                        Some(p) if p.split(',').any(|x| x == "merge") => SmpStrategy::Merge { key },
                        _ => SmpStrategy::Replace,
                    };
                    Shape::List {
                        list_type,
                        smp,
                        items: Box::new(items),
                    }
                }
                Some(_) => Shape::Scalar,
                None if preserve => Shape::Untyped,
                None => Shape::Untyped,
            }
        };
        let shape = match str_of("x-kubernetes-patch-strategy") {
            Some("replace") if matches!(shape, Shape::Object { .. }) => {
                shape.with_object_strategy(SmpStrategy::Replace)
            }
            Some("retainKeys") if matches!(shape, Shape::Object { .. }) => {
                shape.with_object_strategy(SmpStrategy::RetainKeys)
            }
            _ => shape,
        };
        match s.get("default") {
            Some(d) if !d.is_null() => shape.with_default(d.clone()),
            _ => shape,
        }
    }

    /// A granular object with the given declared fields and no other keys.
    pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Shape)>) -> Shape {
        Shape::Object {
            fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            additional: None,
            atomic: false,
        }
    }

    /// An atomic object (`+structType=atomic`) with the given declared fields.
    pub fn atomic_object<'a>(fields: impl IntoIterator<Item = (&'a str, Shape)>) -> Shape {
        Shape::Object {
            fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            additional: None,
            atomic: true,
        }
    }

    /// A granular map (`map[string]T`, `additionalProperties`) whose values have shape `values`.
    pub fn map_of(values: Shape) -> Shape {
        Shape::Object {
            fields: BTreeMap::new(),
            additional: Some(Box::new(values)),
            atomic: false,
        }
    }

    /// An atomic map (`x-kubernetes-map-type: atomic`) of scalars.
    pub fn atomic_map() -> Shape {
        Shape::Object {
            fields: BTreeMap::new(),
            additional: Some(Box::new(Shape::Scalar)),
            atomic: true,
        }
    }

    /// An object with declared fields whose other keys are untyped
    /// (`x-kubernetes-preserve-unknown-fields: true` next to `properties`).
    pub fn preserving_unknown<'a>(fields: impl IntoIterator<Item = (&'a str, Shape)>) -> Shape {
        Shape::Object {
            fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            additional: Some(Box::new(Shape::Untyped)),
            atomic: false,
        }
    }

    /// An atomic list without a patch strategy.
    pub fn atomic_list(items: Shape) -> Shape {
        Shape::List {
            list_type: ListType::Atomic,
            smp: SmpStrategy::Replace,
            items: Box::new(items),
        }
    }

    /// A set of scalars (`x-kubernetes-list-type: set`) without a patch strategy.
    pub fn set(items: Shape) -> Shape {
        Shape::List {
            list_type: ListType::Set,
            smp: SmpStrategy::Replace,
            items: Box::new(items),
        }
    }

    /// A list map keyed by `keys`, without a patch strategy.
    pub fn list_map(keys: &[&str], items: Shape) -> Shape {
        Shape::List {
            list_type: ListType::Map {
                keys: keys.iter().map(|k| k.to_string()).collect(),
            },
            smp: SmpStrategy::Replace,
            items: Box::new(items),
        }
    }

    /// This list shape with patch strategy `smp`.
    pub fn with_list_strategy(self, smp: SmpStrategy) -> Shape {
        match self {
            Shape::List { list_type, items, .. } => Shape::List {
                list_type,
                smp,
                items,
            },
            other => other,
        }
    }

    /// This shape with an explicit object patch strategy ([`Shape::Strategic`]).
    pub fn with_object_strategy(self, smp: SmpStrategy) -> Shape {
        Shape::Strategic {
            smp,
            shape: Box::new(self),
        }
    }

    /// This shape with a schema default ([`Shape::Defaulted`]).
    pub fn with_default(self, default: Value) -> Shape {
        Shape::Defaulted {
            default,
            shape: Box::new(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn navigation_resolves_annotations_and_undeclared_fields() {
        let port = Shape::object([("protocol", Shape::Scalar.with_default(json!("TCP")))]);
        let list =
            Shape::list_map(&["containerPort", "protocol"], port).with_list_strategy(SmpStrategy::Merge {
                key: Some("containerPort".into()),
            });
        let spec = Shape::object([("ports", list), ("labels", Shape::map_of(Shape::Scalar))]);

        assert_eq!(
            spec.field("ports").list_strategy().merge_key(),
            Some("containerPort")
        );
        assert_eq!(
            spec.field("ports").items().field("protocol").default_value(),
            Some(&json!("TCP"))
        );
        assert!(spec.declares("ports"));
        assert!(
            spec.declares("somethingElse"),
            "undeclared fields of a struct are struct fields"
        );
        assert!(
            !spec.field("labels").declares("app"),
            "map entries are not struct fields"
        );
        assert_eq!(spec.field("unknown"), &OPEN_OBJECT);
        assert_eq!(Shape::Untyped.field("x"), &Shape::Untyped);
        assert!(!Shape::Untyped.declares("x"));
    }

    #[test]
    fn strategies_describe_server_behaviour() {
        assert!(
            SmpStrategy::MergeRetainKeys {
                key: Some("name".into())
            }
            .merges()
        );
        assert!(!SmpStrategy::RetainKeys.merges());
        let selector = Shape::atomic_object([]).with_object_strategy(SmpStrategy::Replace);
        assert_eq!(selector.object_strategy(), Some(&SmpStrategy::Replace));
        assert!(selector.is_atomic());
    }
}
