//! Writes answered with the written object's metadata only.
//!
//! Every write to the API server is answered with the whole object it wrote: a Work's status
//! write returns its manifests, a binding's status write its spec and every other writer's
//! status. Most of flotilla's writes never read that answer, or only its metadata (the new
//! resourceVersion and generation), yet the server encodes it, TLS carries it and the client
//! decodes it. These helpers send the same write with
//! `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (what kube-rs sends
//! for `Api<PartialObjectMeta<_>>`, honoured by kube-apiserver for every single-object answer
//! since 1.15 and by flotilla-apiserver), so the answer is the object's metadata.
//!
//! The write itself is unchanged: same path, body, content type, parameters and
//! preconditions; errors (409 Conflict, 404, 422) come back as from any other write.

use kube::api::{Patch, PatchParams};
use kube::core::Request;
use serde::Deserialize;

/// The `Accept` header of a metadata-only answer.
pub const METADATA_ACCEPT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// An answer of which only the metadata is read.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: Written,
}

/// What a write's answer tells of the written object: its new `resourceVersion` and
/// `generation`. The rest of its metadata (labels, annotations, and `managedFields`, the
/// largest part) is skipped as the answer is read, not built.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
}

/// Patches `name` under `url_path` (the collection path, as [`kube::Resource::url_path`]
/// gives it), or its `subresource`, and returns the written object's version ([`Written`]).
pub async fn patch<P: serde::Serialize>(
    client: &kube::Client,
    url_path: &str,
    name: &str,
    subresource: Option<&str>,
    params: &PatchParams,
    patch: &Patch<P>,
) -> Result<Written, kube::Error> {
    let request = Request::new(url_path);
    let mut request = match subresource {
        Some(subresource) => request.patch_subresource(subresource, name, params, patch),
        None => request.patch(name, params, patch),
    }
    .map_err(kube::Error::BuildRequest)?;
    ask_for_metadata(&mut request);
    Ok(client.request::<Answer>(request).await?.metadata)
}

fn ask_for_metadata(request: &mut http::Request<Vec<u8>>) {
    request.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(METADATA_ACCEPT),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_is_unchanged_but_for_the_accept_header() {
        let params = PatchParams::default();
        let body = serde_json::json!({"status": {"x": 1}});
        let plain = Request::new("/apis/work.karmada.io/v1alpha1/namespaces/ns/works")
            .patch_subresource("status", "w", &params, &Patch::Merge(&body))
            .unwrap_or_default();
        let mut lean = plain.clone();
        ask_for_metadata(&mut lean);
        assert_eq!(lean.uri(), plain.uri());
        assert_eq!(lean.method(), plain.method());
        assert_eq!(lean.body(), plain.body());
        assert_eq!(
            lean.headers().get(http::header::CONTENT_TYPE),
            plain.headers().get(http::header::CONTENT_TYPE)
        );
        assert_eq!(
            lean.headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok()),
            Some(METADATA_ACCEPT)
        );
        // An answer decodes from the server's PartialObjectMetadata, whatever else it holds.
        let answer: Answer = serde_json::from_value(serde_json::json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "w", "resourceVersion": "7", "generation": 2,
                "labels": {"a": "b"},
                "managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]}
        }))
        .unwrap_or(Answer {
            metadata: Written::default(),
        });
        assert_eq!(
            answer.metadata,
            Written {
                resource_version: Some("7".to_owned()),
                generation: Some(2)
            }
        );
    }
}
