//! Thin typed access to the objects the detector reads and writes through the API (as opposed
//! to its caches): bindings of either kind, templates of any kind, and policies' status.

use flotilla_api::work::{ClusterResourceBinding, ResourceBinding};
use flotilla_proto::v1::BindingRef;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Api, Client};
use serde_json::Value;

use crate::binding::BindingView;
use crate::keys::{Gvk, TemplateKey};

/// Errors of the detector's API calls; each names the object.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// An API call failed.
    #[error("{action} {object}: {source}")]
    Kube {
        /// What was attempted, e.g. `patching binding`.
        action: &'static str,
        /// The object, e.g. `default/web-deployment`.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// An object could not be converted (should not happen: the detector built it).
    #[error("{object}: {message}")]
    Convert {
        /// The object.
        object: String,
        /// What went wrong.
        message: String,
    },
}

impl ApiError {
    /// Whether the error is the API's 409 Conflict (or AlreadyExists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ApiError::Kube { source: kube::Error::Api(e), .. } if e.code == 409)
    }

    /// Whether the error is the API's 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::Kube { source: kube::Error::Api(e), .. } if e.code == 404)
    }
}

fn kube_error<'a>(action: &'static str, object: &'a str) -> impl FnOnce(kube::Error) -> ApiError + 'a {
    move |source| ApiError::Kube {
        action,
        object: object.to_owned(),
        source,
    }
}

/// Merge patch parameters with flotilla's field manager.
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(flotilla_api::well_known::FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

/// The binding API for one template: a ResourceBinding in its namespace, or a
/// ClusterResourceBinding.
pub enum BindingApi {
    /// ResourceBindings in one namespace.
    Namespaced(Api<ResourceBinding>),
    /// ClusterResourceBindings.
    Cluster(Api<ClusterResourceBinding>),
}

impl BindingApi {
    /// The binding API for `key`'s binding.
    pub fn for_template(client: &Client, key: &TemplateKey) -> Self {
        match &key.namespace {
            Some(ns) => BindingApi::Namespaced(Api::namespaced(client.clone(), ns)),
            None => BindingApi::Cluster(Api::all(client.clone())),
        }
    }

    /// Reads a binding; `None` when it does not exist.
    pub async fn get(&self, name: &str) -> Result<Option<BindingView>, ApiError> {
        match self {
            BindingApi::Namespaced(api) => Ok(api
                .get_opt(name)
                .await
                .map_err(kube_error("reading binding", name))?
                .as_ref()
                .map(BindingView::from_resource_binding)),
            BindingApi::Cluster(api) => Ok(api
                .get_opt(name)
                .await
                .map_err(kube_error("reading binding", name))?
                .as_ref()
                .map(BindingView::from_cluster_resource_binding)),
        }
    }

    /// Creates a binding from its JSON.
    pub async fn create(&self, object: &Value) -> Result<BindingView, ApiError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let convert = |e: serde_json::Error| ApiError::Convert {
            object: name.clone(),
            message: e.to_string(),
        };
        match self {
            BindingApi::Namespaced(api) => {
                let binding: ResourceBinding = serde_json::from_value(object.clone()).map_err(convert)?;
                let created = api
                    .create(&PostParams::default(), &binding)
                    .await
                    .map_err(kube_error("creating binding", &name))?;
                Ok(BindingView::from_resource_binding(&created))
            }
            BindingApi::Cluster(api) => {
                let binding: ClusterResourceBinding =
                    serde_json::from_value(object.clone()).map_err(convert)?;
                let created = api
                    .create(&PostParams::default(), &binding)
                    .await
                    .map_err(kube_error("creating binding", &name))?;
                Ok(BindingView::from_cluster_resource_binding(&created))
            }
        }
    }

    /// Applies a merge patch to the binding's status, answered with metadata only (the caller
    /// does not read the answer).
    pub async fn patch_status_answering_metadata(
        &self,
        client: &Client,
        name: &str,
        patch: &Value,
    ) -> Result<(), ApiError> {
        let url_path = match self {
            BindingApi::Namespaced(api) => api.resource_url(),
            BindingApi::Cluster(api) => api.resource_url(),
        };
        flotilla_runtime::lean::patch(
            client,
            url_path,
            name,
            Some("status"),
            &patch_params(),
            &Patch::Merge(patch),
        )
        .await
        .map(|_| ())
        .map_err(kube_error("patching binding", name))
    }

    /// Applies a merge patch to the binding (`status` = the status subresource).
    pub async fn patch(&self, name: &str, patch: &Value, status: bool) -> Result<BindingView, ApiError> {
        let params = patch_params();
        let patch = Patch::Merge(patch);
        match self {
            BindingApi::Namespaced(api) => {
                let patched = if status {
                    api.patch_status(name, &params, &patch).await
                } else {
                    api.patch(name, &params, &patch).await
                }
                .map_err(kube_error("patching binding", name))?;
                Ok(BindingView::from_resource_binding(&patched))
            }
            BindingApi::Cluster(api) => {
                let patched = if status {
                    api.patch_status(name, &params, &patch).await
                } else {
                    api.patch(name, &params, &patch).await
                }
                .map_err(kube_error("patching binding", name))?;
                Ok(BindingView::from_cluster_resource_binding(&patched))
            }
        }
    }
}

/// The gRPC reference of a binding.
pub fn binding_ref(view: &BindingView) -> BindingRef {
    let generation = view.generation.unwrap_or(0);
    let uid = view.uid.as_deref().unwrap_or_default();
    match &view.namespace {
        Some(ns) => BindingRef::resource_binding(ns, &view.name, generation, uid),
        None => BindingRef::cluster_resource_binding(&view.name, generation, uid),
    }
}

/// The API of one template kind, scoped to the template's namespace.
pub fn template_api(client: &Client, resource: &ApiResource, key: &TemplateKey) -> Api<DynamicObject> {
    match &key.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// A template as JSON with `apiVersion` and `kind` set (list and watch items may lack them).
pub fn template_json(object: &DynamicObject, gvk: &Gvk) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    with_type(&mut value, gvk);
    value
}

/// Sets a template's `apiVersion` and `kind`.
fn with_type(value: &mut Value, gvk: &Gvk) {
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(gvk.api_version.to_string()));
        map.insert("kind".into(), Value::String(gvk.kind.to_string()));
    }
}

/// Reads a template; `None` when it does not exist.
pub async fn get_template(
    client: &Client,
    resource: &ApiResource,
    key: &TemplateKey,
) -> Result<Option<Value>, ApiError> {
    // Decoded once, as a JSON tree without managedFields (`flotilla_runtime::object`): a
    // binding's content drops them.
    let url_path = <DynamicObject as kube::Resource>::url_path(resource, key.namespace.as_deref());
    let object = flotilla_runtime::object::get(client, &url_path, &key.name)
        .await
        .map_err(|source| ApiError::Kube {
            action: "reading template",
            object: key.to_string(),
            source,
        })?;
    Ok(object.map(|mut value| {
        with_type(&mut value, &key.gvk);
        value
    }))
}

/// Merge-patches a template; `Ok(false)` when it no longer exists.
pub async fn patch_template(
    client: &Client,
    resource: &ApiResource,
    key: &TemplateKey,
    patch: &Value,
) -> Result<bool, ApiError> {
    // Answered with metadata only: the template is not read back.
    let url_path = <DynamicObject as kube::Resource>::url_path(resource, key.namespace.as_deref());
    match flotilla_runtime::lean::patch(
        client,
        &url_path,
        &key.name,
        None,
        &patch_params(),
        &Patch::Merge(patch),
    )
    .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(source) => Err(ApiError::Kube {
            action: "patching template",
            object: key.to_string(),
            source,
        }),
    }
}
