//! Which resource serves an `apiVersion`/`kind` on an API server (plural, scope, whether it has
//! a `/status` subresource), cached per server; a miss asks the server's discovery.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, Scope};

/// A resolved kind.
#[derive(Clone, Debug)]
pub struct Kind {
    /// The resource.
    pub resource: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether it has a `/status` subresource.
    pub has_status: bool,
}

impl Kind {
    fn from_discovery(resource: ApiResource, capabilities: &ApiCapabilities) -> Self {
        Self {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
            has_status: capabilities
                .subresources
                .iter()
                .any(|(sub, _)| sub.plural == "status"),
        }
    }

    /// An API handle for objects of this kind in `namespace` (ignored for cluster-scoped kinds).
    pub fn api(&self, client: &Client, namespace: &str) -> kube::Api<DynamicObject> {
        if self.namespaced {
            kube::Api::namespaced_with(client.clone(), namespace, &self.resource)
        } else {
            kube::Api::all_with(client.clone(), &self.resource)
        }
    }

    /// The collection path of objects of this kind in `namespace` (ignored for cluster-scoped
    /// kinds), as writes address it.
    pub fn url_path(&self, namespace: &str) -> String {
        use kube::Resource;
        DynamicObject::url_path(&self.resource, self.namespaced.then_some(namespace))
    }

    /// An API handle across every namespace.
    pub fn api_all(&self, client: &Client) -> kube::Api<DynamicObject> {
        kube::Api::all_with(client.clone(), &self.resource)
    }
}

/// A per-server cache of resolved kinds.
#[derive(Debug, Default)]
pub struct KindCache {
    entries: Mutex<HashMap<(String, String), Kind>>,
}

impl KindCache {
    /// Resolves `api_version`/`kind` through `client`'s discovery (cached).
    pub async fn resolve(&self, client: &Client, api_version: &str, kind: &str) -> Result<Kind, kube::Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.lock().get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await?;
        let resolved = Kind::from_discovery(resource, &capabilities);
        self.lock().insert(key, resolved.clone());
        Ok(resolved)
    }

    /// Forgets `api_version`/`kind` (e.g. after a 404 that may mean a CRD was re-created).
    pub fn forget(&self, api_version: &str, kind: &str) {
        self.lock().remove(&(api_version.to_owned(), kind.to_owned()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Kind>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
