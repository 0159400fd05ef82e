//! Defaulting (apiextensions-apiserver's `defaulting.Default`): a property's `default` fills
//! it when it is absent, or `null` without `nullable`, inside objects that exist; list items
//! and map values that are `null` get their schema's default.

use serde_json::Value;

use crate::node::Node;

fn is_non_nullable_null(x: &Value, s: Option<&Node>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// Applies defaults in place.
pub(crate) fn apply(x: &mut Value, s: Option<&Node>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(default) = &prop.default else { continue };
                let missing = match map.get(k) {
                    None => true,
                    Some(v) => is_non_nullable_null(v, Some(prop)),
                };
                if missing {
                    map.insert(k.clone(), default.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, Some(prop));
                } else if s.additional_properties.is_some() {
                    let extra = s.additional_schema();
                    if is_non_nullable_null(v, extra) {
                        *v = extra.and_then(|e| e.default.clone()).unwrap_or(Value::Null);
                    }
                    apply(v, extra);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.items.as_deref();
            for v in items {
                if is_non_nullable_null(v, item_schema) {
                    *v = item_schema.and_then(|e| e.default.clone()).unwrap_or(Value::Null);
                }
                apply(v, item_schema);
            }
        }
        _ => {}
    }
}
