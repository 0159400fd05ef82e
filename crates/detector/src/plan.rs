//! One template's reconcile as a pure function: from the template, the policies and the
//! binding (all as stored), the writes that bring them to the desired state.
//!
//! [`plan_template`] combines the claim decision ([`crate::matching`]), the lazy decision
//! ([`crate::lazy`]) and the binding content ([`crate::binding`]). The controller only reads the
//! inputs from its caches (or, when a write depends on it, from the API) and performs the
//! writes; running the plan again on the result yields no writes.

use flotilla_api::conditions;
use flotilla_api::overrides::OverrideSnapshot;
use flotilla_api::revision::Revision;
use flotilla_api::well_known::conditions::OVERRIDES_ACTIVATED;
use flotilla_api::well_known::{
    ACTIVATE_ANNOTATION, ACTIVATE_OVERRIDES_ANNOTATION, ACTIVATION_PREFERENCE_ANNOTATION,
    CLAIM_REVISION_ANNOTATION, CONTENT_REVISION_ANNOTATION, LAZY_BASELINE_ANNOTATION, MANAGED_LABEL,
    OVERRIDES_ANNOTATION, POLICY_GENERATION_ANNOTATION, TEMPLATE_FINGERPRINT_ANNOTATION,
    TRACE_PARENT_ANNOTATION, conditions::POLICY_ACTIVATED, is_reserved_namespace, reasons,
};
use flotilla_interpreter::{InterpretError, ReplicaInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::binding::{
    BindingView, desired_spec_with, new_binding, owner_reference, propagation_equal, spec_patch,
    with_propagation_of,
};
use crate::claim::{Claim, OwnedMetadata};
use crate::content::TemplateContent;
use crate::keys::{PolicyKey, TemplateKey};
use crate::lazy::{BindingFacts, LazyAction, LazyInput, decide};
use crate::matching::{ClaimChange, ClaimDecision, PolicyView, TemplateMeta, decide_claim};
use crate::overrides::{OverrideView, OverridesInput};
use crate::revision::{claim_revision, content_revision, content_revision_value, recorded_claim_revision};
use flotilla_overrides::select::ObjectFacts;

/// The outcome of one template reconcile, as recorded on its trace span and in metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Not a template (reserved namespace, flotilla's own kinds, a member copy, being deleted).
    Ignored,
    /// Claimed by an invalid policy: frozen.
    InvalidPolicy,
    /// The interpreter rejected the template; the claim is kept, the binding not written.
    InvalidTemplate,
    /// A policy claimed the template (hit, preemption or replacement of a gone claimant).
    Claimed,
    /// The template's claim was released and no policy claims it.
    Unclaimed,
    /// The binding was created or its spec changed.
    Refreshed,
    /// A Lazy policy change is pending for the template.
    LazySkipped,
    /// Nothing needed changing (metadata or conditions may still have been brought in line).
    Unchanged,
}

impl Outcome {
    /// The label value: `claimed`, `lazy-skipped`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ignored => "ignored",
            Outcome::InvalidPolicy => "invalid-policy",
            Outcome::InvalidTemplate => "invalid-template",
            Outcome::Claimed => "claimed",
            Outcome::Unclaimed => "unclaimed",
            Outcome::Refreshed => "refreshed",
            Outcome::LazySkipped => "lazy-skipped",
            Outcome::Unchanged => "unchanged",
        }
    }
}

/// A Warning event to emit on the template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Event reason.
    pub reason: &'static str,
    /// Event message (names the field).
    pub message: String,
}

/// A change of one of the detector's conditions on a binding (`PolicyActivated`,
/// `OverridesActivated`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionChange {
    /// Set the condition.
    Set {
        /// The condition type.
        type_: &'static str,
        /// `True` or `False`.
        status: bool,
        /// Reason.
        reason: &'static str,
        /// Message.
        message: String,
    },
    /// Remove the condition (e.g. the binding has no policy any more).
    Remove {
        /// The condition type.
        type_: &'static str,
    },
}

impl ConditionChange {
    /// Sets `PolicyActivated`.
    pub fn policy_activated(status: bool, reason: &'static str, message: String) -> Self {
        ConditionChange::Set {
            type_: POLICY_ACTIVATED,
            status,
            reason,
            message,
        }
    }

    /// Applies the change to a condition list; returns whether it changed. The controller
    /// re-applies it to a freshly read list when its status write meets a conflict, so other
    /// writers' conditions are never lost.
    pub fn apply(&self, conditions: &mut Vec<Condition>, now: Timestamp) -> bool {
        match self {
            ConditionChange::Set {
                type_,
                status,
                reason,
                message,
            } => conditions::set(conditions, type_, *status, reason, message.clone(), None, now),
            ConditionChange::Remove { type_ } => conditions::remove(conditions, type_),
        }
    }

    /// Applies every change; returns whether any changed.
    pub fn apply_all(changes: &[ConditionChange], conditions: &mut Vec<Condition>, now: Timestamp) -> bool {
        // Every change applies (no short-circuit).
        let mut changed = false;
        for change in changes {
            changed |= change.apply(conditions, now);
        }
        changed
    }
}

/// The writes to a template's binding.
#[derive(Clone, Debug, PartialEq)]
pub enum BindingWrite {
    /// Nothing to write.
    None,
    /// Create the binding, then set its conditions.
    Create {
        /// The complete object.
        object: Value,
        /// The conditions to set after creation.
        conditions: Vec<ConditionChange>,
    },
    /// Change an existing binding.
    Update {
        /// Merge patch of the main resource (`metadata` and/or `spec`), if anything changes.
        patch: Option<Value>,
        /// Whether the patch changes the spec (the scheduler is told).
        spec_changed: bool,
        /// The condition changes that change the stored conditions (none: no status write).
        conditions: Vec<ConditionChange>,
    },
}

impl BindingWrite {
    /// Whether the write creates the binding or changes its spec.
    pub fn changes_spec(&self) -> bool {
        match self {
            BindingWrite::None => false,
            BindingWrite::Create { .. } => true,
            BindingWrite::Update { spec_changed, .. } => *spec_changed,
        }
    }

    /// Whether anything is written.
    pub fn is_empty(&self) -> bool {
        match self {
            BindingWrite::None => true,
            BindingWrite::Create { .. } => false,
            BindingWrite::Update {
                patch, conditions, ..
            } => patch.is_none() && conditions.is_empty(),
        }
    }
}

/// Everything one template reconcile writes.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplatePlan {
    /// What happened.
    pub outcome: Outcome,
    /// The policy that claims (or froze) the template after this reconcile.
    pub policy: Option<PolicyKey>,
    /// How the claim changed, when a policy claims the template.
    pub claim_change: Option<ClaimChange>,
    /// The lazy decision, when a valid policy claims the template.
    pub lazy: Option<LazyAction>,
    /// Merge patch of the template (`{"metadata": ...}`, with its resourceVersion as
    /// precondition), if its claim changes.
    pub template_patch: Option<Value>,
    /// The binding writes.
    pub binding: BindingWrite,
    /// A Warning event for the template.
    pub warning: Option<Warning>,
    /// Whether the binding's `flotilla.io/overrides` changes.
    pub overrides_changed: bool,
}

impl TemplatePlan {
    fn nothing(outcome: Outcome, policy: Option<PolicyKey>) -> Self {
        Self {
            outcome,
            policy,
            claim_change: None,
            lazy: None,
            template_patch: None,
            binding: BindingWrite::None,
            warning: None,
            overrides_changed: false,
        }
    }

    /// Whether the plan writes nothing.
    pub fn is_noop(&self) -> bool {
        self.template_patch.is_none() && self.binding.is_empty()
    }
}

/// The inputs of a template reconcile.
#[derive(Clone, Copy, Debug)]
pub struct TemplateInput<'a> {
    /// The template's key.
    pub key: &'a TemplateKey,
    /// The template (with `apiVersion` and `kind` set): its metadata is read, not its content
    /// (the cache holds metadata only).
    pub object: &'a Value,
    /// What is read of its content (fingerprint, replicas), computed from the whole object.
    pub content: &'a TemplateContent,
    /// The policies that may match it (both kinds, valid or not).
    pub policies: &'a [PolicyView],
    /// Its binding, if one exists under the binding name.
    pub binding: Option<&'a BindingView>,
    /// The trace to record on a binding whose spec changes.
    pub traceparent: Option<&'a str>,
    /// The override policies: at least every ClusterOverridePolicy and every OverridePolicy of
    /// the template's namespace.
    pub overrides: &'a [OverrideView],
}

/// Whether an object is never a template: reserved namespaces, flotilla's own kinds, objects
/// flotilla applied (`karmada.io/managed`), and objects being deleted.
pub fn is_ignored(key: &TemplateKey, object: &Value) -> bool {
    key.namespace.as_deref().is_some_and(is_reserved_namespace)
        || key.gvk.is_own_group()
        || object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(MANAGED_LABEL))
            .is_some()
        || object
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
}

fn template_str<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The message of the `PolicyActivated=False` condition of a binding whose policy change is
/// pending.
pub fn pending_message(policy: &PolicyView) -> String {
    format!(
        "policy {} generation {} is pending: it takes effect when the template next changes",
        policy.key, policy.generation
    )
}

/// The message of the `PolicyActivated=True` condition.
pub fn activated_message(policy: &PolicyView) -> String {
    format!(
        "the binding reflects policy {} generation {}",
        policy.key, policy.generation
    )
}

/// The template's `metadata` merge patch that brings the detector's keys to `owned`, or `None`
/// when they already are. Every write also records the template's content revision
/// (`crate::revision`), so that this write, which changes no content, is never taken for a
/// content change; it drops a legacy `flotilla.io/lazy-baseline`, and carries the
/// resourceVersion it was planned on as precondition, so the recorded revision is exact.
fn template_patch(
    object: &Value,
    owned: OwnedMetadata,
    fingerprint: &str,
    written: Option<Revision>,
) -> Option<Value> {
    owned.patch_for(object)?;
    let mut owned = owned.annotation(LAZY_BASELINE_ANNOTATION, None);
    if let Some(written) = written {
        owned = owned.annotation(
            CONTENT_REVISION_ANNOTATION,
            Some(content_revision_value(fingerprint, written)),
        );
    }
    let mut metadata = owned.patch_for(object)?;
    if let Some(resource_version) = template_str(object, "/metadata/resourceVersion") {
        metadata.insert(
            "resourceVersion".into(),
            Value::String(resource_version.to_owned()),
        );
    }
    Some(json!({ "metadata": metadata }))
}

/// Plans one template reconcile.
pub fn plan_template(input: &TemplateInput<'_>) -> TemplatePlan {
    let TemplateInput {
        key,
        object,
        content,
        policies,
        binding,
        traceparent,
        overrides,
    } = *input;
    if is_ignored(key, object) {
        return TemplatePlan::nothing(Outcome::Ignored, None);
    }
    let fp = content.fingerprint.as_str();
    let written = content_revision(object, fp);
    let mut meta = TemplateMeta::from_object(object);
    meta.written = written;
    let current = Claim::read_object(object);
    let template = TemplateFacts {
        key,
        object,
        fingerprint: fp,
        replicas: &content.replicas,
        written,
        overrides,
    };
    let mut plan = match decide_claim(&meta, current.as_ref(), policies) {
        ClaimDecision::Frozen(policy) => {
            TemplatePlan::nothing(Outcome::InvalidPolicy, Some(policy.key.clone()))
        }
        ClaimDecision::Unclaimed { released } => plan_unclaimed(&template, binding, released.is_some()),
        ClaimDecision::Claimed { policy, change } => {
            plan_claimed(&template, policies, policy, change, binding, traceparent)
        }
    };
    plan.overrides_changed = match &plan.binding {
        BindingWrite::Create { object, .. } => object
            .pointer("/metadata/annotations")
            .is_some_and(|a| a.get(OVERRIDES_ANNOTATION).is_some()),
        BindingWrite::Update { patch, .. } => patch
            .as_ref()
            .and_then(|p| p.pointer("/metadata/annotations"))
            .is_some_and(|a| a.get(OVERRIDES_ANNOTATION).is_some()),
        BindingWrite::None => false,
    };
    plan
}

/// The override decision for a template whose binding (existing or about to be created) the
/// detector writes: the `flotilla.io/overrides` value and the `OverridesActivated` change.
fn overrides_for(
    template: &TemplateFacts<'_>,
    binding: Option<&BindingView>,
) -> (Option<String>, Option<ConditionChange>) {
    let recorded_text = binding.and_then(|b| b.annotation(OVERRIDES_ANNOTATION));
    // No override policy anywhere in scope and none recorded: nothing to decide (most templates).
    let decision = if template.overrides.is_empty() && recorded_text.is_none() {
        crate::overrides::OverridesDecision::default()
    } else {
        let facts = ObjectFacts::of(&flotilla_overrides::doc::Doc::from(template.object));
        let recorded = OverrideSnapshot::parse_annotation(recorded_text);
        crate::overrides::decide(&OverridesInput {
            template: &facts,
            content_revision: template.written,
            activation: annotation(template.object, ACTIVATE_OVERRIDES_ANNOTATION),
            recorded: &recorded,
            policies: template.overrides,
        })
    };
    let condition = if !decision.pending.is_empty() {
        Some(ConditionChange::Set {
            type_: OVERRIDES_ACTIVATED,
            status: false,
            reason: reasons::LAZY_ACTIVATION_PENDING,
            message: crate::overrides::pending_message(&decision.pending),
        })
    } else if binding.is_some_and(|b| conditions::find(&b.conditions, OVERRIDES_ACTIVATED).is_some()) {
        Some(ConditionChange::Set {
            type_: OVERRIDES_ACTIVATED,
            status: true,
            reason: reasons::OVERRIDES_ACTIVATED,
            message: "the binding reflects the current generation of every override policy that selects the template"
                .to_owned(),
        })
    } else {
        None
    };
    (OverrideSnapshot::annotation_value(&decision.in_effect), condition)
}

/// What the planners know of the template.
struct TemplateFacts<'a> {
    key: &'a TemplateKey,
    object: &'a Value,
    fingerprint: &'a str,
    replicas: &'a Result<Option<ReplicaInfo>, InterpretError>,
    written: Option<Revision>,
    overrides: &'a [OverrideView],
}

fn plan_unclaimed(
    template: &TemplateFacts<'_>,
    binding: Option<&BindingView>,
    released: bool,
) -> TemplatePlan {
    let template_patch = template_patch(
        template.object,
        OwnedMetadata::claim(None).annotation(CLAIM_REVISION_ANNOTATION, None),
        template.fingerprint,
        template.written,
    );
    let binding_write = match binding {
        Some(b) => {
            // A released binding stays, and so do its Works: override policies keep applying
            // to it (as Karmada's binding controller keeps applying them).
            let (overrides, overrides_condition) = overrides_for(template, Some(b));
            let patch = OwnedMetadata::claim(None)
                .annotation(OVERRIDES_ANNOTATION, overrides)
                .annotation(ACTIVATION_PREFERENCE_ANNOTATION, None)
                .patch_for(&b.object)
                .map(|m| json!({ "metadata": m }));
            let changes = [
                Some(ConditionChange::Remove {
                    type_: POLICY_ACTIVATED,
                }),
                overrides_condition,
            ];
            BindingWrite::Update {
                patch,
                spec_changed: false,
                conditions: changing(b, changes.into_iter().flatten()),
            }
        }
        None => BindingWrite::None,
    };
    let outcome = if released || template_patch.is_some() || !binding_write.is_empty() {
        Outcome::Unclaimed
    } else {
        Outcome::Unchanged
    };
    TemplatePlan {
        outcome,
        policy: None,
        claim_change: None,
        lazy: None,
        template_patch,
        binding: binding_write,
        warning: None,
        overrides_changed: false,
    }
}

fn plan_claimed(
    template: &TemplateFacts<'_>,
    previous_claimants: &[PolicyView],
    policy: &PolicyView,
    change: ClaimChange,
    binding: Option<&BindingView>,
    traceparent: Option<&str>,
) -> TemplatePlan {
    let TemplateFacts {
        key,
        object,
        fingerprint: fp,
        replicas,
        written,
        ..
    } = *template;
    let claim = Claim::of(policy);
    let claim_revision = match &change {
        ClaimChange::Kept => recorded_claim_revision(object),
        moved => {
            let previous = Claim::read_object(object).and_then(|claim| {
                previous_claimants
                    .iter()
                    .find(|p| p.key == claim.policy_key() && p.uid == claim.id())
            });
            claim_revision(moved, policy, previous, written)
        }
    };
    let mut template_owned = OwnedMetadata::claim(Some(&claim));
    if !matches!(change, ClaimChange::Kept) {
        template_owned =
            template_owned.annotation(CLAIM_REVISION_ANNOTATION, claim_revision.map(|r| r.to_string()));
    }
    let template_patch = template_patch(object, template_owned, fp, written);
    let generation_ref = policy.generation_ref();
    let binding_fp = binding.and_then(|b| b.annotation(TEMPLATE_FINGERPRINT_ANNOTATION));
    // spec.resource.resourceVersion moves only with the content (docs/architecture.md).
    let resource_version = match binding {
        Some(b) if binding_fp == Some(fp) => b.spec.resource.resource_version.clone(),
        _ => template_str(object, "/metadata/resourceVersion").map(str::to_owned),
    };
    let claimed = !matches!(change, ClaimChange::Kept);
    let desired = match desired_spec_with(object, replicas.clone(), key, &policy.spec, resource_version) {
        Ok(desired) => desired,
        Err(error) => {
            return TemplatePlan {
                outcome: Outcome::InvalidTemplate,
                policy: Some(policy.key.clone()),
                claim_change: Some(change),
                lazy: None,
                template_patch,
                binding: BindingWrite::None,
                overrides_changed: false,
                warning: Some(Warning {
                    reason: "InvalidTemplate",
                    message: format!("cannot build the binding of {key} under {}: {error}", policy.key),
                }),
            };
        }
    };
    let lazy = decide(&LazyInput {
        lazy: policy.spec.is_lazy(),
        policy_generation: &generation_ref,
        policy_revision: policy.revision,
        fingerprint: fp,
        content_revision: written,
        claim_revision,
        activation: annotation(object, ACTIVATE_ANNOTATION),
        binding: binding.map(|b| BindingFacts {
            fingerprint: binding_fp,
            policy_generation: b.annotation(POLICY_GENERATION_ANNOTATION),
            propagation_matches: propagation_equal(&b.spec, &desired),
        }),
    });

    let (overrides, overrides_condition) = overrides_for(template, binding);
    // Failover reads it from the binding: a Lazy policy's bindings are not re-placed
    // (`docs/failover.md`). It follows the claimant at once, like the claim itself.
    let mut binding_owned = OwnedMetadata::claim(Some(&claim))
        .annotation(
            ACTIVATION_PREFERENCE_ANNOTATION,
            policy.spec.is_lazy().then(|| "Lazy".to_owned()),
        )
        .annotation(OVERRIDES_ANNOTATION, overrides);
    let with_overrides = |policy_condition: ConditionChange| {
        let mut changes = vec![policy_condition];
        changes.extend(overrides_condition.clone());
        changes
    };
    let activated = with_overrides(ConditionChange::policy_activated(
        true,
        reasons::POLICY_ACTIVATED,
        activated_message(policy),
    ));
    let pending = with_overrides(ConditionChange::policy_activated(
        false,
        reasons::LAZY_ACTIVATION_PENDING,
        pending_message(policy),
    ));
    let binding_write = match (lazy, binding) {
        (LazyAction::Refresh(_), None) => {
            binding_owned = binding_owned
                .annotation(TEMPLATE_FINGERPRINT_ANNOTATION, Some(fp.to_owned()))
                .annotation(POLICY_GENERATION_ANNOTATION, Some(generation_ref.clone()))
                .annotation(TRACE_PARENT_ANNOTATION, traceparent.map(str::to_owned));
            let metadata = binding_owned.patch_for(&json!({})).unwrap_or_default();
            let template_uid = template_str(object, "/metadata/uid").unwrap_or_default();
            BindingWrite::Create {
                object: new_binding(key, template_uid, metadata, &desired),
                conditions: activated,
            }
        }
        (LazyAction::Refresh(_), Some(b)) => {
            binding_owned = binding_owned
                .annotation(TEMPLATE_FINGERPRINT_ANNOTATION, Some(fp.to_owned()))
                .annotation(POLICY_GENERATION_ANNOTATION, Some(generation_ref.clone()));
            let spec = spec_patch(&b.spec, &desired);
            refreshed(b, key, object, binding_owned, spec, traceparent, activated)
        }
        (LazyAction::RefreshContent, Some(b)) => {
            binding_owned = binding_owned.annotation(TEMPLATE_FINGERPRINT_ANNOTATION, Some(fp.to_owned()));
            let spec = spec_patch(&b.spec, &with_propagation_of(&desired, &b.spec));
            refreshed(b, key, object, binding_owned, spec, traceparent, pending)
        }
        (LazyAction::Record, Some(b)) => {
            binding_owned =
                binding_owned.annotation(POLICY_GENERATION_ANNOTATION, Some(generation_ref.clone()));
            update(b, key, object, &binding_owned, None, activated)
        }
        (LazyAction::Current, Some(b)) => update(b, key, object, &binding_owned, None, activated),
        (LazyAction::Pending, Some(b)) => update(b, key, object, &binding_owned, None, pending),
        (_, None) => BindingWrite::None,
    };
    let outcome = if claimed {
        Outcome::Claimed
    } else if binding_write.changes_spec() {
        Outcome::Refreshed
    } else if lazy.leaves_pending() {
        Outcome::LazySkipped
    } else {
        Outcome::Unchanged
    };
    TemplatePlan {
        outcome,
        policy: Some(policy.key.clone()),
        claim_change: Some(change),
        lazy: Some(lazy),
        template_patch,
        binding: binding_write,
        warning: None,
        overrides_changed: false,
    }
}

/// The update of a binding whose spec is refreshed (`spec`: the patch, if anything changes):
/// a changed spec records the trace of the change.
fn refreshed(
    binding: &BindingView,
    key: &TemplateKey,
    object: &Value,
    mut owned: OwnedMetadata,
    spec: Option<Value>,
    traceparent: Option<&str>,
    conditions: Vec<ConditionChange>,
) -> BindingWrite {
    if spec.is_some()
        && let Some(traceparent) = traceparent
    {
        owned = owned.annotation(TRACE_PARENT_ANNOTATION, Some(traceparent.to_owned()));
    }
    update(binding, key, object, &owned, spec, conditions)
}

fn update(
    binding: &BindingView,
    key: &TemplateKey,
    object: &Value,
    owned: &OwnedMetadata,
    spec: Option<Value>,
    conditions: Vec<ConditionChange>,
) -> BindingWrite {
    let mut patch = Map::new();
    let mut metadata = owned.patch_for(&binding.object).unwrap_or_default();
    if let Some(uid) = template_str(object, "/metadata/uid")
        && !binding.is_owned_by(uid)
    {
        metadata.insert(
            "ownerReferences".into(),
            binding.owner_references_with(&owner_reference(key, uid)),
        );
    }
    if !metadata.is_empty() {
        patch.insert("metadata".into(), Value::Object(metadata));
    }
    let spec_changed = spec.is_some();
    if let Some(spec) = spec {
        patch.insert("spec".into(), spec);
    }
    BindingWrite::Update {
        patch: (!patch.is_empty()).then_some(Value::Object(patch)),
        spec_changed,
        conditions: changing(binding, conditions),
    }
}

/// The changes that would change the binding's stored conditions (the transition time does
/// not matter for "would it change").
fn changing(
    binding: &BindingView,
    changes: impl IntoIterator<Item = ConditionChange>,
) -> Vec<ConditionChange> {
    changes
        .into_iter()
        .filter(|change| change.apply(&mut binding.conditions.clone(), Timestamp::UNIX_EPOCH))
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
