//! `flotilla activate`'s mechanism: letting one template take its Lazy policy's current
//! generation now, without faking an edit of the template.
//!
//! [`activate`] writes the annotation `flotilla.io/activate: "<policy uid>/<generation>"` on the
//! template. The detector treats it as permission to refresh the template's binding to exactly
//! that policy generation (see [`crate::lazy::decide`]): if the policy has moved on to a newer
//! generation by the time the detector looks, the permission does not apply (the newer
//! generation stays pending until activated or the template changes).
//!
//! The annotation is left on the template after the refresh: it is harmless (generations only
//! grow and uids are unique, so it never matches a later generation) and not removing it saves
//! a write per template. It is under `flotilla.io/`, so it does not count as a template change,
//! and activating again simply overwrites it.

use flotilla_api::policy::{ClusterPropagationPolicy, PropagationPolicy};
use flotilla_api::well_known::{
    ACTIVATE_ANNOTATION, ACTIVATE_OVERRIDES_ANNOTATION, POLICY_GENERATION_ANNOTATION,
};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::json;

use crate::api::{ApiError, BindingApi, get_template, patch_template};
use crate::claim::Claim;
use crate::keys::{Gvk, PolicyKey, TemplateKey};

/// The template to activate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRef {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// `kind`, e.g. `Deployment`.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped templates.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl TemplateRef {
    /// The template's key.
    pub fn key(&self) -> TemplateKey {
        TemplateKey::new(
            Gvk::new(&self.api_version, &self.kind),
            self.namespace.as_deref(),
            self.name.as_str(),
        )
    }
}

/// What [`activate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activation {
    /// The template's policy.
    pub policy: PolicyKey,
    /// The policy generation activated, `<uid>/<generation>`.
    pub generation: String,
    /// The binding already reflected that generation: nothing was written.
    pub already_active: bool,
}

/// Where a claimed template stands with respect to its policy's current generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationState {
    /// The binding reflects the current generation: nothing to activate.
    Current,
    /// `flotilla.io/activate` already names the current generation; the detector has not
    /// refreshed the binding yet.
    Requested,
    /// The binding (or its absence) reflects an older generation or another policy: a change
    /// is pending.
    Pending,
}

/// Classifies a claimed template: `generation` is its policy's current `<uid>/<generation>`,
/// `binding_generation` its binding's `flotilla.io/policy-generation` (`None` without a
/// binding), `requested` its `flotilla.io/activate`. The same "pending" as the policy's
/// `status.pendingActivationTemplates`.
pub fn activation_state(
    generation: &str,
    binding_generation: Option<&str>,
    requested: Option<&str>,
) -> ActivationState {
    if binding_generation == Some(generation) {
        ActivationState::Current
    } else if requested == Some(generation) {
        ActivationState::Requested
    } else {
        ActivationState::Pending
    }
}

/// Why a template could not be activated.
#[derive(Debug, thiserror::Error)]
pub enum ActivateError {
    /// The kind is not served by the API.
    #[error(
        "{template}: the API does not serve {api_version} {kind}: {source}; check the apiVersion and kind"
    )]
    UnknownKind {
        /// The template.
        template: String,
        /// apiVersion asked for.
        api_version: String,
        /// kind asked for.
        kind: String,
        /// Discovery's error.
        source: kube::Error,
    },
    /// The template does not exist.
    #[error("{template} not found")]
    NotFound {
        /// The template.
        template: String,
    },
    /// No policy claims the template.
    #[error("{template} is not claimed by any policy: nothing to activate")]
    NotClaimed {
        /// The template.
        template: String,
    },
    /// The claiming policy is gone (the detector will release the claim).
    #[error("{template} is claimed by {policy}, which no longer exists")]
    PolicyGone {
        /// The template.
        template: String,
        /// The policy the claim names.
        policy: String,
    },
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// Allows the detector to refresh `template`'s binding to its policy's current generation
/// (see the module docs). Returns the policy and generation, and whether the binding already
/// reflected it (then nothing is written).
pub async fn activate(client: &Client, template: &TemplateRef) -> Result<Activation, ActivateError> {
    let key = template.key();
    let gvk = GroupVersionKind::gvk(key.gvk.group(), key.gvk.version(), &key.gvk.kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|source| ActivateError::UnknownKind {
            template: key.to_string(),
            api_version: template.api_version.clone(),
            kind: template.kind.clone(),
            source,
        })?;
    let object = get_template(client, &resource, &key)
        .await?
        .ok_or_else(|| ActivateError::NotFound {
            template: key.to_string(),
        })?;
    let claim = Claim::read_object(&object).ok_or_else(|| ActivateError::NotClaimed {
        template: key.to_string(),
    })?;
    let policy = claim.policy_key();
    let gone = || ActivateError::PolicyGone {
        template: key.to_string(),
        policy: policy.to_string(),
    };
    let read_error = |source| ApiError::Kube {
        action: "reading policy",
        object: policy.to_string(),
        source,
    };
    let metadata = match &claim {
        Claim::PropagationPolicy { namespace, name, .. } => {
            Api::<PropagationPolicy>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(read_error)?
                .map(|p| p.metadata)
        }
        Claim::ClusterPropagationPolicy { name, .. } => Api::<ClusterPropagationPolicy>::all(client.clone())
            .get_opt(name)
            .await
            .map_err(read_error)?
            .map(|p| p.metadata),
    }
    .ok_or_else(gone)?;
    if metadata.uid.as_deref() != Some(claim.id()) {
        return Err(gone());
    }
    let generation = format!("{}/{}", claim.id(), metadata.generation.unwrap_or(0));
    let binding = BindingApi::for_template(client, &key)
        .get(&key.binding_name())
        .await?;
    if binding
        .as_ref()
        .and_then(|b| b.annotation(POLICY_GENERATION_ANNOTATION))
        == Some(generation.as_str())
    {
        return Ok(Activation {
            policy,
            generation,
            already_active: true,
        });
    }
    let patch = json!({"metadata": {"annotations": {ACTIVATE_ANNOTATION: generation}}});
    if !patch_template(client, &resource, &key, &patch).await? {
        return Err(ActivateError::NotFound {
            template: key.to_string(),
        });
    }
    Ok(Activation {
        policy,
        generation,
        already_active: false,
    })
}

/// Allows the detector to put the Lazy override policy generations `generations`
/// (`<uid>/<generation>`) in effect for `template` now (see [`crate::overrides`]): writes
/// `flotilla.io/activate-overrides` on the template. Like `flotilla.io/activate`, it is not a
/// change of the template and is left in place afterwards.
pub async fn activate_overrides(
    client: &Client,
    template: &TemplateRef,
    generations: &[String],
) -> Result<(), ActivateError> {
    let key = template.key();
    let gvk = GroupVersionKind::gvk(key.gvk.group(), key.gvk.version(), &key.gvk.kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|source| ActivateError::UnknownKind {
            template: key.to_string(),
            api_version: template.api_version.clone(),
            kind: template.kind.clone(),
            source,
        })?;
    let patch = json!({"metadata": {"annotations": {ACTIVATE_OVERRIDES_ANNOTATION: generations.join(",")}}});
    if !patch_template(client, &resource, &key, &patch).await? {
        return Err(ActivateError::NotFound {
            template: key.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states() {
        use ActivationState::*;
        let g = "uid-p/3";
        assert_eq!(activation_state(g, Some(g), None), Current);
        // The binding wins over a leftover or stale request.
        assert_eq!(activation_state(g, Some(g), Some("uid-p/2")), Current);
        assert_eq!(activation_state(g, Some(g), Some(g)), Current);
        assert_eq!(activation_state(g, Some("uid-p/2"), Some(g)), Requested);
        assert_eq!(activation_state(g, None, Some(g)), Requested);
        for binding in [None, Some("uid-p/2"), Some("uid-q/3")] {
            for requested in [None, Some("uid-p/2"), Some("uid-q/3"), Some("garbage")] {
                assert_eq!(
                    activation_state(g, binding, requested),
                    Pending,
                    "{binding:?} {requested:?}"
                );
            }
        }
    }
}
