//! Names of the objects the detector works on: resource kinds, templates, policies, and the
//! binding name Karmada derives from a template.
//!
//! A template's key is copied wherever the template is queued, cached or looked up (the
//! template queue holds two copies of each queued key, and at 10,000 templates ten thousand may
//! wait at once). So its parts are shared strings: the apiVersion, kind and namespace every
//! template of a kind and namespace repeats are one interned copy ([`shared`]), and the name is
//! one copy per template, so copying a key allocates nothing.

use std::fmt;
use std::sync::Arc;

use flotilla_runtime::intern::Interner;

/// The apiVersions, kinds and namespaces of the templates (and bindings) the detector holds.
static SHARED: Interner<str> = Interner::new();

/// The shared copy of `value`, an apiVersion, kind or namespace many templates repeat.
pub fn shared(value: &str) -> Arc<str> {
    SHARED.intern(value)
}

/// A resource kind as a policy selects it: exact `apiVersion` and `kind`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// `v1` or `<group>/<version>`.
    pub api_version: Arc<str>,
    /// The kind, e.g. `Deployment`.
    pub kind: Arc<str>,
}

impl Gvk {
    /// A kind from its apiVersion and kind (shared copies of both).
    pub fn new(api_version: impl AsRef<str>, kind: impl AsRef<str>) -> Self {
        Self {
            api_version: shared(api_version.as_ref()),
            kind: shared(kind.as_ref()),
        }
    }

    /// The API group; empty for the core group.
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(group, _)| group)
            .unwrap_or("")
    }

    /// The API version without the group.
    pub fn version(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(_, version)| version)
            .unwrap_or(&self.api_version)
    }

    /// Whether this is the kind `api_version` `kind` (as a resource selector names it).
    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        *self.api_version == *api_version && *self.kind == *kind
    }

    /// Whether the kind can be watched at all: a well-formed apiVersion and a kind.
    pub fn is_well_formed(&self) -> bool {
        let parts: Vec<&str> = self.api_version.split('/').collect();
        !self.kind.is_empty() && parts.len() <= 2 && parts.iter().all(|p| !p.is_empty())
    }

    /// Whether objects of this kind are never templates: flotilla's (Karmada's) own API groups.
    pub fn is_own_group(&self) -> bool {
        is_own_group(self.group())
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

/// Whether `group` is one of flotilla's own API groups, whose objects are never propagated.
pub fn is_own_group(group: &str) -> bool {
    matches!(
        group,
        flotilla_api::policy::GROUP | flotilla_api::work::GROUP | flotilla_api::cluster::GROUP
    )
}

/// One resource template. Copies share every part (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TemplateKey {
    /// Its kind.
    pub gvk: Gvk,
    /// Its namespace, a [`shared`] copy; `None` for cluster-scoped templates.
    pub namespace: Option<Arc<str>>,
    /// Its name.
    pub name: Arc<str>,
}

impl TemplateKey {
    /// The key of the template of kind `gvk` in `namespace` (an empty one is none) named `name`.
    pub fn new(gvk: Gvk, namespace: Option<&str>, name: impl Into<Arc<str>>) -> Self {
        Self {
            gvk,
            namespace: namespace.filter(|ns| !ns.is_empty()).map(shared),
            name: name.into(),
        }
    }

    /// The key of the template of kind `gvk` with `metadata` (an empty namespace is none).
    pub fn of(gvk: &Gvk, metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Self::new(
            gvk.clone(),
            metadata.namespace.as_deref(),
            metadata.name.as_deref().unwrap_or_default(),
        )
    }

    /// `namespace/name` or `name`.
    pub fn object_key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.to_string(),
        }
    }

    /// The name of the template's binding.
    pub fn binding_name(&self) -> String {
        binding_name(&self.gvk.kind, &self.name)
    }
}

impl fmt::Display for TemplateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.gvk, self.object_key())
    }
}

/// The two policy kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// Namespaced `PropagationPolicy`.
    PropagationPolicy,
    /// Cluster-scoped `ClusterPropagationPolicy`.
    ClusterPropagationPolicy,
}

impl PolicyKind {
    /// The kind as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::PropagationPolicy => "PropagationPolicy",
            PolicyKind::ClusterPropagationPolicy => "ClusterPropagationPolicy",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One policy.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyKey {
    /// PropagationPolicy or ClusterPropagationPolicy.
    pub kind: PolicyKind,
    /// Namespace of a PropagationPolicy; `None` for a ClusterPropagationPolicy.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl PolicyKey {
    /// A PropagationPolicy's key.
    pub fn propagation(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: PolicyKind::PropagationPolicy,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A ClusterPropagationPolicy's key.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            kind: PolicyKind::ClusterPropagationPolicy,
            namespace: None,
            name: name.into(),
        }
    }

    /// `namespace/name` or `name`.
    pub fn object_key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl fmt::Display for PolicyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.object_key())
    }
}

/// The binding name of a template: `<name>-<kind>` lower-cased, with `:` (allowed in some RBAC
/// names, not in a binding's) replaced by `.` — Karmada's `names.GenerateBindingName`.
pub fn binding_name(kind: &str, name: &str) -> String {
    format!("{}-{}", name.replace(':', "."), kind).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvk_parts() {
        let deploy = Gvk::new("apps/v1", "Deployment");
        assert_eq!(deploy.group(), "apps");
        assert_eq!(deploy.version(), "v1");
        assert!(deploy.is_well_formed());
        let cm = Gvk::new("v1", "ConfigMap");
        assert_eq!(cm.group(), "");
        assert_eq!(cm.version(), "v1");
        assert!(cm.is_well_formed());
        assert!(cm.is("v1", "ConfigMap"));
        assert!(!cm.is("v1", "Secret") && !cm.is("apps/v1", "ConfigMap"));
        for bad in [
            Gvk::new("", "X"),
            Gvk::new("a/b/c", "X"),
            Gvk::new("/v1", "X"),
            Gvk::new("apps/", "X"),
            Gvk::new("v1", ""),
        ] {
            assert!(!bad.is_well_formed(), "{bad}");
        }
    }

    #[test]
    fn own_groups_are_never_templates() {
        for api_version in [
            "policy.karmada.io/v1alpha1",
            "work.karmada.io/v1alpha2",
            "work.karmada.io/v1alpha1",
            "cluster.karmada.io/v1alpha1",
        ] {
            assert!(Gvk::new(api_version, "X").is_own_group(), "{api_version}");
        }
        for api_version in ["v1", "apps/v1", "policy/v1", "example.io/v1"] {
            assert!(!Gvk::new(api_version, "X").is_own_group(), "{api_version}");
        }
    }

    #[test]
    fn binding_names_follow_karmada() {
        assert_eq!(binding_name("Deployment", "nginx"), "nginx-deployment");
        assert_eq!(
            binding_name("ClusterRole", "system:aggregate-to-edit"),
            "system.aggregate-to-edit-clusterrole"
        );
        assert_eq!(binding_name("Workflow", "Nightly"), "nightly-workflow");
    }

    #[test]
    fn keys_share_their_parts() {
        let metadata = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: Some("team-a".into()),
            name: Some("web".into()),
            ..Default::default()
        };
        let first = TemplateKey::of(&Gvk::new("apps/v1", "Deployment"), &metadata);
        let second = TemplateKey::new(Gvk::new("apps/v1", "Deployment"), Some("team-a"), "db");
        assert!(Arc::ptr_eq(&first.gvk.api_version, &second.gvk.api_version));
        assert!(Arc::ptr_eq(&first.gvk.kind, &second.gvk.kind));
        assert!(Arc::ptr_eq(
            first.namespace.as_ref().unwrap(),
            second.namespace.as_ref().unwrap()
        ));
        let copy = first.clone();
        assert!(Arc::ptr_eq(&first.name, &copy.name));
        assert_eq!(copy, first);
        assert_ne!(first, second);
        // An empty namespace is none, as the API server treats it.
        assert_eq!(
            TemplateKey::new(Gvk::new("v1", "Namespace"), Some(""), "n").namespace,
            None
        );
    }

    #[test]
    fn display() {
        let key = TemplateKey {
            gvk: Gvk::new("apps/v1", "Deployment"),
            namespace: Some("default".into()),
            name: "web".into(),
        };
        assert_eq!(key.to_string(), "apps/v1 Deployment default/web");
        assert_eq!(key.binding_name(), "web-deployment");
        assert_eq!(
            PolicyKey::propagation("default", "pp").to_string(),
            "PropagationPolicy default/pp"
        );
        assert_eq!(
            PolicyKey::cluster("cpp").to_string(),
            "ClusterPropagationPolicy cpp"
        );
    }
}
