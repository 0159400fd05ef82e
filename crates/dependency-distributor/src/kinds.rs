//! Resolving an `(apiVersion, kind)` to the API resource that serves it (plural, scope), for
//! reading templates and dependency objects of any kind through the dynamic API. Built-in kinds
//! are known up front; others are discovered once and cached. A kind the API does not serve
//! (a CRD not installed yet) is not cached, so it is found once it appears.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};

/// A served kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// How to address it.
    pub resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// The kinds known without discovery: `(apiVersion, kind, plural, namespaced)`.
const BUILT_IN: &[(&str, &str, &str, bool)] = &[
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "PersistentVolume", "persistentvolumes", false),
    ("v1", "Pod", "pods", true),
    ("v1", "Service", "services", true),
    ("apps/v1", "Deployment", "deployments", true),
    ("apps/v1", "StatefulSet", "statefulsets", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    ("apps/v1", "ReplicaSet", "replicasets", true),
    ("batch/v1", "Job", "jobs", true),
    ("batch/v1", "CronJob", "cronjobs", true),
    ("networking.k8s.io/v1", "Ingress", "ingresses", true),
];

/// Splits an apiVersion into group and version (`v1` is the core group).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = split_api_version(api_version);
    GroupVersionKind::gvk(group, version, kind)
}

/// The resolver and its cache.
pub struct Kinds {
    client: Client,
    cache: Mutex<HashMap<(String, String), Resolved>>,
}

impl Kinds {
    /// A resolver that knows the built-in kinds.
    pub fn new(client: Client) -> Self {
        let cache = BUILT_IN
            .iter()
            .map(|(api_version, kind, plural, namespaced)| {
                (
                    ((*api_version).to_owned(), (*kind).to_owned()),
                    Resolved {
                        resource: ApiResource::from_gvk_with_plural(&gvk(api_version, kind), plural),
                        namespaced: *namespaced,
                    },
                )
            })
            .collect();
        Self {
            client,
            cache: Mutex::new(cache),
        }
    }

    /// The API resource serving `kind` in `api_version`; `Ok(None)` when the API does not
    /// serve it (yet).
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Option<Resolved>, kube::Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(Some(found.clone()));
        }
        match kube::discovery::pinned_kind(&self.client, &gvk(api_version, kind)).await {
            Ok((resource, capabilities)) => {
                let resolved = Resolved {
                    resource,
                    namespaced: capabilities.scope == Scope::Namespaced,
                };
                self.cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, resolved.clone());
                Ok(Some(resolved))
            }
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_split_into_group_and_version() {
        assert_eq!(split_api_version("v1"), ("", "v1"));
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(split_api_version("example.io/v1beta1"), ("example.io", "v1beta1"));
    }

    #[test]
    fn built_in_kinds_address_the_right_paths() {
        let cm = ApiResource::from_gvk_with_plural(&gvk("v1", "ConfigMap"), "configmaps");
        assert_eq!(cm.group, "");
        assert_eq!(cm.api_version, "v1");
        let deploy = ApiResource::from_gvk_with_plural(&gvk("apps/v1", "Deployment"), "deployments");
        assert_eq!(deploy.group, "apps");
        assert_eq!(deploy.api_version, "apps/v1");
        let pv = BUILT_IN.iter().find(|k| k.1 == "PersistentVolume").unwrap();
        assert!(!pv.3, "PersistentVolumes are cluster-scoped");
    }
}
