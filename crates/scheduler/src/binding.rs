//! The two binding kinds the service schedules, behind one trait, and the key that names a
//! binding in logs, spans, metrics and gRPC references.

use std::fmt;

use flotilla_api::{ClusterResourceBinding, ResourceBinding, ResourceBindingSpec, ResourceBindingStatus};
use flotilla_proto::v1::{BindingKind, BindingRef};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A ResourceBinding or ClusterResourceBinding: the service treats both alike.
pub trait BindingObject:
    Resource<DynamicType = ()> + Clone + fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Which kind this is.
    const KIND: BindingKind;

    /// The binding's spec.
    fn binding_spec(&self) -> &ResourceBindingSpec;

    /// The binding's status, if it has one.
    fn binding_status(&self) -> Option<&ResourceBindingStatus>;

    /// The binding's spec, to record a write (see [`crate::reconcile`]).
    fn binding_spec_mut(&mut self) -> &mut ResourceBindingSpec;

    /// The binding's status, to record a write.
    fn binding_status_mut(&mut self) -> &mut Option<ResourceBindingStatus>;

    /// The API for bindings of this kind in `namespace` (ignored for cluster-scoped bindings).
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;

    /// The key of this binding.
    fn key(&self) -> BindingKey {
        BindingKey {
            kind: Self::KIND,
            namespace: self.namespace(),
            name: self.name_any(),
        }
    }

    /// A gRPC reference to this binding at its current generation.
    fn reference(&self) -> BindingRef {
        BindingRef {
            kind: Self::KIND as i32,
            namespace: self.namespace().unwrap_or_default(),
            name: self.name_any(),
            generation: self.meta().generation.unwrap_or_default(),
            uid: self.meta().uid.clone().unwrap_or_default(),
        }
    }
}

impl BindingObject for ResourceBinding {
    const KIND: BindingKind = BindingKind::ResourceBinding;

    fn binding_spec(&self) -> &ResourceBindingSpec {
        &self.spec
    }

    fn binding_status(&self) -> Option<&ResourceBindingStatus> {
        self.status.as_ref()
    }

    fn binding_spec_mut(&mut self) -> &mut ResourceBindingSpec {
        &mut self.spec
    }

    fn binding_status_mut(&mut self) -> &mut Option<ResourceBindingStatus> {
        &mut self.status
    }

    fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
        Api::namespaced(client, namespace.unwrap_or("default"))
    }
}

impl BindingObject for ClusterResourceBinding {
    const KIND: BindingKind = BindingKind::ClusterResourceBinding;

    fn binding_spec(&self) -> &ResourceBindingSpec {
        &self.spec
    }

    fn binding_status(&self) -> Option<&ResourceBindingStatus> {
        self.status.as_ref()
    }

    fn binding_spec_mut(&mut self) -> &mut ResourceBindingSpec {
        &mut self.spec
    }

    fn binding_status_mut(&mut self) -> &mut Option<ResourceBindingStatus> {
        &mut self.status
    }

    fn api(client: Client, _namespace: Option<&str>) -> Api<Self> {
        Api::all(client)
    }
}

/// Names one binding: its kind, namespace (ResourceBindings only) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BindingKey {
    /// ResourceBinding or ClusterResourceBinding.
    pub kind: BindingKind,
    /// The namespace of a ResourceBinding; `None` for a ClusterResourceBinding.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

/// Why a gRPC binding reference cannot name a binding.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidReference {
    /// `binding.kind` is unset or unknown.
    #[error(
        "binding.kind is {0}: set BINDING_KIND_RESOURCE_BINDING or BINDING_KIND_CLUSTER_RESOURCE_BINDING"
    )]
    Kind(i32),
    /// `binding.name` is empty.
    #[error("binding.name is empty: name the binding to schedule")]
    Name,
    /// A ResourceBinding reference without a namespace.
    #[error("binding.namespace is empty: a ResourceBinding is namespaced, set its namespace")]
    Namespace,
}

impl BindingKey {
    /// The key a gRPC reference names.
    pub fn from_reference(reference: &BindingRef) -> Result<Self, InvalidReference> {
        let kind = match BindingKind::try_from(reference.kind) {
            Ok(kind @ (BindingKind::ResourceBinding | BindingKind::ClusterResourceBinding)) => kind,
            _ => return Err(InvalidReference::Kind(reference.kind)),
        };
        if reference.name.is_empty() {
            return Err(InvalidReference::Name);
        }
        let namespace = match kind {
            BindingKind::ResourceBinding if reference.namespace.is_empty() => {
                return Err(InvalidReference::Namespace);
            }
            BindingKind::ResourceBinding => Some(reference.namespace.clone()),
            _ => None,
        };
        Ok(Self {
            kind,
            namespace,
            name: reference.name.clone(),
        })
    }

    /// The kind's name as in `kind:` (`ResourceBinding`, `ClusterResourceBinding`).
    pub fn kind_name(&self) -> &'static str {
        kind_name(self.kind)
    }
}

/// The kind's name as in `kind:`.
pub fn kind_name(kind: BindingKind) -> &'static str {
    match kind {
        BindingKind::ClusterResourceBinding => "ClusterResourceBinding",
        _ => "ResourceBinding",
    }
}

impl fmt::Display for BindingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind_name(), self.name),
            None => write!(f, "{} {}", self.kind_name(), self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn references_name_keys() {
        let rb = BindingRef::resource_binding("default", "web-deployment", 3, "u1");
        let key = BindingKey::from_reference(&rb).unwrap();
        assert_eq!(key.to_string(), "ResourceBinding default/web-deployment");
        let crb = BindingRef::cluster_resource_binding("ns-namespace", 1, "u2");
        let key = BindingKey::from_reference(&crb).unwrap();
        assert_eq!(key.namespace, None);
        assert_eq!(key.to_string(), "ClusterResourceBinding ns-namespace");
    }

    #[test]
    fn invalid_references_say_which_field() {
        let mut reference = BindingRef::resource_binding("default", "web", 1, "u");
        reference.kind = 0;
        assert_eq!(
            BindingKey::from_reference(&reference),
            Err(InvalidReference::Kind(0))
        );
        reference.kind = 9;
        assert_eq!(
            BindingKey::from_reference(&reference),
            Err(InvalidReference::Kind(9))
        );
        let reference = BindingRef::resource_binding("default", "", 1, "u");
        assert_eq!(
            BindingKey::from_reference(&reference),
            Err(InvalidReference::Name)
        );
        let reference = BindingRef::resource_binding("", "web", 1, "u");
        let error = BindingKey::from_reference(&reference).unwrap_err();
        assert!(error.to_string().contains("binding.namespace"), "{error}");
        // A cluster-scoped reference ignores a stray namespace.
        let mut reference = BindingRef::cluster_resource_binding("x", 1, "u");
        reference.namespace = "ignored".into();
        assert_eq!(BindingKey::from_reference(&reference).unwrap().namespace, None);
    }
}
