//! JSON merge patch (RFC 7386) as kube-apiserver applies it (evanphx/json-patch v4
//! `MergePatch`): `null` deletes, objects merge recursively, everything else is replaced.
//! Nulls inside newly added objects are dropped; nulls inside arrays are kept.

use serde_json::{Map, Value};

use crate::error::PatchError;

/// Apply a JSON merge patch (`application/merge-patch+json`) to `doc`.
///
/// Both must be JSON objects, as kube-apiserver requires for `kubectl label`, `kubectl annotate`,
/// `kubectl scale` and merge patches of custom resources.
pub fn merge_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "Invalid JSON Patch: a merge patch must be a JSON object, got {}",
            kind_name(patch)
        )));
    };
    let Value::Object(doc) = doc else {
        return Err(PatchError::BadRequest(format!(
            "Invalid JSON Document: the patched object must be a JSON object, got {}",
            kind_name(doc)
        )));
    };
    let mut out = doc.clone();
    merge_docs(&mut out, patch);
    Ok(Value::Object(out))
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn merge_docs(doc: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            doc.remove(k);
            continue;
        }
        match doc.get_mut(k) {
            Some(cur) if !cur.is_null() => {
                let merged = merge_value(std::mem::take(cur), v);
                *cur = merged;
            }
            _ => {
                let mut v = v.clone();
                prune_nulls(&mut v);
                doc.insert(k.clone(), v);
            }
        }
    }
}

/// evanphx `merge`: objects merge into objects; anything else replaces (nulls pruned only when
/// the current value is not an object).
fn merge_value(cur: Value, patch: &Value) -> Value {
    match cur {
        Value::Object(mut cur_doc) => match patch {
            Value::Object(patch_doc) => {
                merge_docs(&mut cur_doc, patch_doc);
                Value::Object(cur_doc)
            }
            other => other.clone(),
        },
        _ => {
            let mut p = patch.clone();
            prune_nulls(&mut p);
            p
        }
    }
}

/// Drop null members of objects, recursively (array elements that are null stay).
pub(crate) fn prune_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            for v in m.values_mut() {
                prune_nulls(v);
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                prune_nulls(item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        // The test cases of RFC 7386 appendix A that apply to object documents.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (doc, patch, want) in cases {
            assert_eq!(merge_patch(&doc, &patch).unwrap(), want, "{doc} + {patch}");
        }
    }

    #[test]
    fn arrays_replace_and_keep_null_elements() {
        let doc = json!({"spec": {"finalizers": ["a", "b"]}});
        let got = merge_patch(&doc, &json!({"spec": {"finalizers": ["c", null]}})).unwrap();
        assert_eq!(got, json!({"spec": {"finalizers": ["c", null]}}));
    }

    #[test]
    fn kubectl_label_and_scale_patches() {
        let deploy = json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        });
        // `kubectl label deployment web tier=frontend`
        let labelled = merge_patch(&deploy, &json!({"metadata": {"labels": {"tier": "frontend"}}})).unwrap();
        assert_eq!(
            labelled["metadata"]["labels"],
            json!({"app": "web", "tier": "frontend"})
        );
        // `kubectl label deployment web app-`
        let unlabelled = merge_patch(&labelled, &json!({"metadata": {"labels": {"app": null}}})).unwrap();
        assert_eq!(unlabelled["metadata"]["labels"], json!({"tier": "frontend"}));
        // `kubectl scale deployment web --replicas=3` (merge patch on the scale subresource)
        let scaled = merge_patch(&deploy, &json!({"spec": {"replicas": 3}})).unwrap();
        assert_eq!(scaled["spec"]["replicas"], json!(3));
        assert_eq!(scaled["spec"]["template"], deploy["spec"]["template"]);
    }

    #[test]
    fn rejects_non_object_patches() {
        for bad in [json!([1]), json!("x"), json!(null)] {
            let err = merge_patch(&json!({}), &bad).unwrap_err();
            assert_eq!(err.http_status(), 400);
            assert!(err.message().starts_with("Invalid JSON Patch"), "{err}");
        }
    }
}
