//! The resource catalog: which group/version/resources are served, their kinds, scopes,
//! subresources and storage prefixes. Built-ins are a static table; CRDs add entries at run time.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::crd::CrdVersion;

/// How objects of a resource are checked and defaulted.
#[derive(Clone, Debug)]
pub enum Flavor {
    /// A built-in kind validated through its k8s-openapi type.
    Builtin(crate::builtin::BuiltinKind),
    /// A custom resource served from a CRD.
    Custom(Arc<CrdVersion>),
}

/// The `scale` subresource's paths (JSON pointers into the object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleSpec {
    /// Path of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// Path of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// Path of the label selector string, if any.
    pub label_selector: Option<String>,
}

/// One served group/version/resource.
#[derive(Clone, Debug)]
pub struct ResourceDef {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether a `status` subresource splits status from the main resource.
    pub status: bool,
    /// The `scale` subresource, if served.
    pub scale: Option<ScaleSpec>,
    /// Whether this version is the preferred (storage) version of its group.
    pub preferred: bool,
    /// Validation/defaulting flavor.
    pub flavor: Flavor,
    /// Storage prefix shared by all versions, e.g. `/registry/apps/deployments/`.
    pub prefix: String,
    /// Whether the resource can be created (false while its CRD is terminating).
    pub creatable: bool,
}

impl ResourceDef {
    /// `group/version` or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{}{ns}/{name}", self.prefix),
            _ => format!("{}{name}", self.prefix),
        }
    }

    /// Prefix of a list (all namespaces when `namespace` is None).
    pub fn list_prefix(&self, namespace: Option<&str>) -> String {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{}{ns}/", self.prefix),
            _ => self.prefix.clone(),
        }
    }

    /// The `<Kind>List` kind.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether this is a CRD-served resource.
    pub fn is_custom(&self) -> bool {
        matches!(self.flavor, Flavor::Custom(_))
    }

    /// Verbs advertised in discovery.
    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Storage prefix of a group/resource.
pub fn storage_prefix(group: &str, plural: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("/registry/{group}/{plural}/")
}

/// Everything served, indexed for routing and discovery. Immutable; replaced wholesale when
/// CRDs change.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// (group, version, plural) -> definition.
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceDef>>,
    /// Group -> versions in preference order.
    groups: BTreeMap<String, Vec<String>>,
}

impl Catalog {
    /// Builds a catalog from definitions (the first version listed per group is preferred
    /// unless a definition says otherwise).
    pub fn new(defs: Vec<ResourceDef>) -> Self {
        let mut catalog = Catalog::default();
        for def in defs {
            let versions = catalog.groups.entry(def.group.clone()).or_default();
            if !versions.contains(&def.version) {
                if def.preferred {
                    versions.insert(0, def.version.clone());
                } else {
                    versions.push(def.version.clone());
                }
            }
            catalog.by_gvr.insert(
                (def.group.clone(), def.version.clone(), def.plural.clone()),
                Arc::new(def),
            );
        }
        catalog
    }

    /// Looks up a resource.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_gvr
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
            .cloned()
    }

    /// Looks up a resource by kind in one group/version.
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.resources(group, version)
            .into_iter()
            .find(|d| d.kind == kind)
    }

    /// The preferred-version definition of a group/resource.
    pub fn preferred(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        let versions = self.groups.get(group)?;
        versions.iter().find_map(|v| self.get(group, v, plural))
    }

    /// Every definition of one group/version.
    pub fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.by_gvr
            .range((group.to_owned(), version.to_owned(), String::new())..)
            .take_while(|((g, v, _), _)| g == group && v == version)
            .map(|(_, d)| d.clone())
            .collect()
    }

    /// Groups (other than core) and their versions, preferred first.
    pub fn groups(&self) -> impl Iterator<Item = (&String, &Vec<String>)> {
        self.groups.iter().filter(|(g, _)| !g.is_empty())
    }

    /// Versions of one group, preferred first.
    pub fn versions(&self, group: &str) -> Option<&Vec<String>> {
        self.groups.get(group)
    }

    /// Every definition.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_gvr.values()
    }

    /// One definition per storage prefix (the preferred version), for controllers that walk
    /// every object.
    pub fn storage_resources(&self) -> Vec<Arc<ResourceDef>> {
        let mut seen = BTreeMap::new();
        for def in self.by_gvr.values() {
            let preferred = self
                .groups
                .get(&def.group)
                .and_then(|vs| vs.iter().position(|v| *v == def.version))
                .unwrap_or(usize::MAX);
            let entry = seen.entry(def.prefix.clone()).or_insert((preferred, def.clone()));
            if preferred < entry.0 {
                *entry = (preferred, def.clone());
            }
        }
        seen.into_values().map(|(_, d)| d).collect()
    }

    /// The definition owning a storage key (preferred version).
    pub fn for_key(&self, key: &str) -> Option<Arc<ResourceDef>> {
        // Keys look like /registry/<group>/<plural>/...
        let rest = key.strip_prefix("/registry/")?;
        let mut parts = rest.splitn(3, '/');
        let group = parts.next()?;
        let plural = parts.next()?;
        let group = if group == "core" { "" } else { group };
        self.preferred(group, plural)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::builtin;

    #[test]
    fn builtin_catalog_routes_and_keys() {
        let catalog = Catalog::new(builtin::definitions());
        let deploy = catalog.get("apps", "v1", "deployments").unwrap();
        assert_eq!(deploy.kind, "Deployment");
        assert_eq!(
            deploy.key(Some("ns1"), "web"),
            "/registry/apps/deployments/ns1/web"
        );
        assert_eq!(deploy.list_prefix(None), "/registry/apps/deployments/");
        let ns = catalog.get("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        assert_eq!(ns.key(None, "default"), "/registry/core/namespaces/default");
        assert_eq!(
            catalog.for_key("/registry/core/configmaps/a/b").unwrap().kind,
            "ConfigMap"
        );
        assert_eq!(
            catalog.by_kind("batch", "v1", "CronJob").unwrap().plural,
            "cronjobs"
        );
        assert!(catalog.groups().any(|(g, _)| g == "events.k8s.io"));
    }
}
