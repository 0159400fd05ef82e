//! Which override policy generations are in effect for a template's binding: the decision
//! behind the binding annotation `flotilla.io/overrides` (execution renders the binding's Works
//! with exactly what it records), and the status the detector keeps on override policies.
//!
//! > An eager override policy's current generation is in effect for every template it selects,
//! > at once. A Lazy one's generation takes effect for a template when the template's content
//! > was written after that generation was written, or when the user activates it for the
//! > template (`flotilla activate`); until then the template keeps the generation recorded on
//! > its binding (none, if the policy never applied to it).
//!
//! This is the rule of Lazy PropagationPolicies ([`crate::lazy`]), in the API's order
//! (resourceVersions), so the outcome does not depend on which event the detector saw first or
//! on restarts. What a Lazy generation does covers its whole spec: its rules and its resource
//! selectors (a template the new selectors no longer select keeps the old generation until it
//! changes). Two choices:
//!
//! - deleting a policy, Lazy or not, removes its overrides at once (Karmada's behaviour; a
//!   deletion cannot be dated without holding the policy back with a finalizer until every
//!   template it ever applied to changed). To roll a removal out gradually, edit the rules away
//!   first, activate, then delete;
//! - an invalid policy (one that reached the store without flotilla's admission) changes
//!   nothing: what a binding records of it stays, and it is applied to no new template.

use flotilla_api::overrides::{
    ClusterOverridePolicy, OverridePolicy, OverridePolicyKind, OverridePolicyStatus, OverrideSnapshot,
    OverrideSpec,
};
use flotilla_api::policy::GenerationRevision;
use flotilla_api::revision::{Revision, written_after};
use flotilla_api::well_known::{conditions::VALID, reasons};
use flotilla_overrides::select::{ObjectFacts, Specificity, policy_specificity};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

/// Identifies an override policy.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OverrideKey {
    /// ClusterOverridePolicy or OverridePolicy.
    pub kind: OverridePolicyKind,
    /// The OverridePolicy's namespace.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl std::fmt::Display for OverrideKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// What the detector knows of one override policy.
#[derive(Clone, Debug, PartialEq)]
pub struct OverrideView {
    /// Kind, namespace and name.
    pub key: OverrideKey,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// The write that produced the current generation.
    pub revision: Option<Revision>,
    /// Whether the policy passed semantic validation.
    pub valid: bool,
    /// The spec.
    pub spec: OverrideSpec,
}

impl OverrideView {
    /// The view of an OverridePolicy.
    pub fn of_override_policy(policy: &OverridePolicy) -> Self {
        Self::new(
            OverridePolicyKind::OverridePolicy,
            &policy.metadata,
            &policy.spec,
            policy.status.as_ref(),
            policy.validate().is_ok(),
        )
    }

    /// The view of a ClusterOverridePolicy.
    pub fn of_cluster_override_policy(policy: &ClusterOverridePolicy) -> Self {
        Self::new(
            OverridePolicyKind::ClusterOverridePolicy,
            &policy.metadata,
            &policy.spec.0,
            policy.status.as_ref(),
            policy.validate().is_ok(),
        )
    }

    fn new(
        kind: OverridePolicyKind,
        metadata: &ObjectMeta,
        spec: &OverrideSpec,
        status: Option<&OverridePolicyStatus>,
        valid: bool,
    ) -> Self {
        Self {
            key: OverrideKey {
                kind,
                namespace: match kind {
                    OverridePolicyKind::OverridePolicy => metadata.namespace.clone(),
                    OverridePolicyKind::ClusterOverridePolicy => None,
                },
                name: metadata.name.clone().unwrap_or_default(),
            },
            uid: metadata.uid.clone().unwrap_or_default(),
            generation: metadata.generation.unwrap_or(0),
            revision: generation_revision(metadata, status),
            valid,
            spec: spec.clone(),
        }
    }

    /// `<uid>/<generation>`.
    pub fn generation_ref(&self) -> String {
        format!("{}/{}", self.uid, self.generation)
    }

    /// Whether the policy selects `object`: its selectors (none select everything in its
    /// scope), and for an OverridePolicy, only objects of its own namespace.
    pub fn selects(&self, object: &ObjectFacts) -> bool {
        if self.key.kind == OverridePolicyKind::OverridePolicy
            && (object.namespace.is_empty()
                || self.key.namespace.as_deref() != Some(object.namespace.as_str()))
        {
            return false;
        }
        policy_specificity(object, &self.spec.resource_selectors) > Specificity::Mismatch
    }

    /// This generation as a binding records it.
    pub fn snapshot(&self) -> OverrideSnapshot {
        OverrideSnapshot {
            kind: self.key.kind,
            namespace: self.key.namespace.clone(),
            name: self.key.name.clone(),
            uid: self.uid.clone(),
            generation: self.generation,
            spec: self.spec.clone(),
        }
    }
}

/// The write that produced the policy's current generation: the recorded one while
/// `status.generationRevision` names the current generation, else the policy's current
/// resourceVersion (the detector, the only other writer, has not written it since).
pub fn generation_revision(metadata: &ObjectMeta, status: Option<&OverridePolicyStatus>) -> Option<Revision> {
    match status.and_then(|s| s.generation_revision.as_ref()) {
        Some(recorded) if Some(recorded.generation) == metadata.generation => {
            Revision::parse(&recorded.resource_version)
        }
        _ => Revision::parse_opt(metadata.resource_version.as_deref()),
    }
}

/// The status the detector wants on an override policy: `Valid` (with the violations'
/// message), the observed generation, and the generation revision recorded the first time the
/// generation is seen.
pub fn desired_status(
    current: Option<&OverridePolicyStatus>,
    metadata: &ObjectMeta,
    violations: Option<String>,
    now: Timestamp,
) -> OverridePolicyStatus {
    let mut status = current.cloned().unwrap_or_default();
    let generation = metadata.generation;
    status.observed_generation = generation;
    let (valid, reason, message) = match violations {
        Some(message) => (false, reasons::INVALID_POLICY, message),
        None => (
            true,
            reasons::VALID_POLICY,
            "the policy passed validation".to_owned(),
        ),
    };
    flotilla_api::conditions::set(
        &mut status.conditions,
        VALID,
        valid,
        reason,
        message,
        generation,
        now,
    );
    let recorded = status
        .generation_revision
        .as_ref()
        .is_some_and(|r| Some(r.generation) == generation);
    if !recorded
        && let (Some(generation), Some(revision)) = (generation, generation_revision(metadata, current))
    {
        status.generation_revision = Some(GenerationRevision {
            generation,
            resource_version: revision.to_string(),
        });
    }
    status
}

/// The inputs of the decision, all read from stored objects.
#[derive(Clone, Copy, Debug)]
pub struct OverridesInput<'a> {
    /// The template's apiVersion, kind, namespace, name and labels.
    pub template: &'a ObjectFacts,
    /// The write that produced the template's current content.
    pub content_revision: Option<Revision>,
    /// The template's `flotilla.io/activate-overrides`.
    pub activation: Option<&'a str>,
    /// What the binding records (`flotilla.io/overrides`).
    pub recorded: &'a [OverrideSnapshot],
    /// The override policies that exist: at least every ClusterOverridePolicy and every
    /// OverridePolicy of the template's namespace.
    pub policies: &'a [OverrideView],
}

/// A Lazy policy generation waiting for the template to change (or be activated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingOverride {
    /// The policy.
    pub policy: OverrideKey,
    /// Its uid.
    pub uid: String,
    /// Its current generation.
    pub generation: i64,
}

impl PendingOverride {
    /// `<uid>/<generation>` (what `flotilla activate` records).
    pub fn generation_ref(&self) -> String {
        format!("{}/{}", self.uid, self.generation)
    }
}

/// What is in effect for the binding, and what waits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OverridesDecision {
    /// The entries of `flotilla.io/overrides`, ordered by kind, namespace and name.
    pub in_effect: Vec<OverrideSnapshot>,
    /// Lazy generations that wait.
    pub pending: Vec<PendingOverride>,
}

/// Whether `activation` (a `flotilla.io/activate-overrides` value) names `generation_ref`.
pub fn is_activated(activation: Option<&str>, generation_ref: &str) -> bool {
    activation.is_some_and(|list| list.split(',').any(|entry| entry.trim() == generation_ref))
}

/// The template's labels together with every label a ClusterOverridePolicy that selects it may
/// add (`labelsOverrider` `add` and `replace`, in any rule, current or recorded generation).
///
/// Execution selects OverridePolicies against the object as the ClusterOverridePolicies left it
/// in each cluster (Karmada's order), so an OverridePolicy selecting by a label a
/// ClusterOverridePolicy adds must be in effect for the binding; execution then checks the
/// selector exactly, per cluster. (A label a ClusterOverridePolicy removes, or writes with a
/// plaintext operation, is not foreseen here.)
fn labels_after_cluster_overrides(input: &OverridesInput<'_>) -> ObjectFacts {
    let mut facts = input.template.clone();
    let cluster_specs = input
        .policies
        .iter()
        .filter(|p| {
            p.key.kind == OverridePolicyKind::ClusterOverridePolicy && p.valid && p.selects(input.template)
        })
        .map(|p| &p.spec)
        .chain(
            input
                .recorded
                .iter()
                .filter(|r| r.kind == OverridePolicyKind::ClusterOverridePolicy)
                .map(|r| &r.spec),
        );
    for spec in cluster_specs {
        for rule in spec.rules().iter() {
            for overrider in &rule.overriders.labels_overrider {
                if matches!(
                    overrider.operator,
                    flotilla_api::overrides::OverriderOperator::Add
                        | flotilla_api::overrides::OverriderOperator::Replace
                ) {
                    facts
                        .labels
                        .extend(overrider.value.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
    }
    facts
}

/// Decides what is in effect (see the module docs).
pub fn decide(input: &OverridesInput<'_>) -> OverridesDecision {
    let after_cluster_overrides = labels_after_cluster_overrides(input);
    // Only policies that exist are looked at: the entries of deleted ones are dropped (a
    // deletion applies at once).
    let mut decision = OverridesDecision::default();
    for policy in input.policies {
        let recorded = input.recorded.iter().find(|r| r.uid == policy.uid);
        let selects = policy.selects(input.template)
            || (policy.key.kind == OverridePolicyKind::OverridePolicy
                && policy.selects(&after_cluster_overrides));
        let now = selects.then(|| policy.snapshot());
        let effect = if !policy.valid {
            recorded.cloned()
        } else if !policy.spec.is_lazy()
            || is_activated(input.activation, &policy.generation_ref())
            || written_after(input.content_revision, policy.revision)
        {
            now
        } else {
            let kept = recorded.cloned();
            let differs = kept.as_ref().map(|k| k.generation) != now.as_ref().map(|n| n.generation);
            if differs {
                decision.pending.push(PendingOverride {
                    policy: policy.key.clone(),
                    uid: policy.uid.clone(),
                    generation: policy.generation,
                });
            }
            kept
        };
        decision.in_effect.extend(effect);
    }
    decision
        .in_effect
        .sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    decision
}

/// The message of the `OverridesActivated=False` condition.
pub fn pending_message(pending: &[PendingOverride]) -> String {
    let list: Vec<String> = pending
        .iter()
        .map(|p| format!("{} generation {}", p.policy, p.generation))
        .collect();
    let (verb, pronoun) = if pending.len() == 1 {
        ("is", "it takes")
    } else {
        ("are", "they take")
    };
    format!(
        "{} {verb} pending: {pronoun} effect when the template next changes (or with flotilla activate)",
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn template(labels: serde_json::Value) -> ObjectFacts {
        ObjectFacts::of(&flotilla_overrides::doc::Doc::from(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": labels},
        })))
    }

    fn view(kind: OverridePolicyKind, name: &str, generation: i64, written: u64, lazy: bool) -> OverrideView {
        let spec: OverrideSpec = serde_json::from_value(json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "web"}}}],
            "activationPreference": if lazy { Some("Lazy") } else { None },
            "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"gen": generation.to_string()}}]}}],
        }))
        .unwrap();
        OverrideView {
            key: OverrideKey {
                kind,
                namespace: (kind == OverridePolicyKind::OverridePolicy).then(|| "default".to_owned()),
                name: name.into(),
            },
            uid: format!("uid-{name}"),
            generation,
            revision: Some(Revision::from(written)),
            valid: true,
            spec,
        }
    }

    fn op(name: &str, generation: i64, written: u64, lazy: bool) -> OverrideView {
        view(
            OverridePolicyKind::OverridePolicy,
            name,
            generation,
            written,
            lazy,
        )
    }

    fn generations(decision: &OverridesDecision) -> Vec<(String, i64)> {
        decision
            .in_effect
            .iter()
            .map(|e| (e.name.clone(), e.generation))
            .collect()
    }

    fn decide_with(
        facts: &ObjectFacts,
        content: u64,
        activation: Option<&str>,
        recorded: &[OverrideSnapshot],
        policies: &[OverrideView],
    ) -> OverridesDecision {
        decide(&OverridesInput {
            template: facts,
            content_revision: Some(Revision::from(content)),
            activation,
            recorded,
            policies,
        })
    }

    #[test]
    fn eager_policies_apply_at_once_and_follow_their_selectors() {
        let web = template(json!({"app": "web"}));
        let other = template(json!({"app": "other"}));
        let p = op("p", 3, 500, false);
        // Whatever was recorded and however old the template.
        let recorded = vec![op("p", 1, 100, false).snapshot()];
        let d = decide_with(&web, 10, None, &recorded, std::slice::from_ref(&p));
        assert_eq!(generations(&d), vec![("p".to_owned(), 3)]);
        assert!(d.pending.is_empty());
        // Not selected: nothing in effect.
        let d = decide_with(&other, 10, None, &recorded, std::slice::from_ref(&p));
        assert!(d.in_effect.is_empty());
        // An OverridePolicy of another namespace never applies.
        let mut elsewhere = op("p", 3, 500, false);
        elsewhere.key.namespace = Some("elsewhere".into());
        assert!(
            decide_with(&web, 10, None, &[], &[elsewhere])
                .in_effect
                .is_empty()
        );
    }

    /// A Lazy generation applies to templates written after it, or activated; others keep
    /// what they have (the seed's cases, for override policies).
    #[test]
    fn lazy_decision_table() {
        let web = template(json!({"app": "web"}));
        let g1 = op("p", 1, 100, true);
        let g2 = op("p", 2, 200, true);
        /// `(case, content revision, activation, recorded, in effect after, pending)`.
        type Case<'a> = (
            &'a str,
            u64,
            Option<&'a str>,
            Vec<OverrideSnapshot>,
            Vec<(String, i64)>,
            bool,
        );
        let cases: Vec<Case<'_>> = vec![
            // Template created after the policy: in effect at once (Simple Case 1).
            ("created after", 150, None, vec![], vec![("p".into(), 1)], false),
            // Template older than the policy: waits (Simple Case 2).
            ("older than the policy", 50, None, vec![], vec![], true),
            // An edit of the policy waits for the template's next change.
            (
                "edited, template older",
                150,
                None,
                vec![g1.snapshot()],
                vec![("p".into(), 1)],
                true,
            ),
            (
                "edited, template changed after",
                250,
                None,
                vec![g1.snapshot()],
                vec![("p".into(), 2)],
                false,
            ),
            // Activated: the named generation applies without a template change.
            (
                "activated",
                150,
                Some("uid-p/2"),
                vec![g1.snapshot()],
                vec![("p".into(), 2)],
                false,
            ),
            (
                "activated among others",
                150,
                Some("uid-q/7, uid-p/2"),
                vec![g1.snapshot()],
                vec![("p".into(), 2)],
                false,
            ),
            // A stale activation grants nothing.
            (
                "stale activation",
                150,
                Some("uid-p/1"),
                vec![g1.snapshot()],
                vec![("p".into(), 1)],
                true,
            ),
            // Already current: nothing pending.
            (
                "current",
                150,
                None,
                vec![g2.snapshot()],
                vec![("p".into(), 2)],
                false,
            ),
        ];
        for (case, content, activation, recorded, expected, pending) in cases {
            let policy = if case == "created after" || case == "older than the policy" {
                &g1
            } else {
                &g2
            };
            let d = decide_with(&web, content, activation, &recorded, std::slice::from_ref(policy));
            assert_eq!(generations(&d), expected, "{case}");
            assert_eq!(!d.pending.is_empty(), pending, "{case}");
        }
    }

    #[test]
    fn a_lazy_selector_edit_waits_too() {
        // Generation 2 no longer selects the template: it keeps generation 1 until it changes.
        let web = template(json!({"app": "web"}));
        let g1 = op("p", 1, 100, true);
        let mut g2 = op("p", 2, 200, true);
        g2.spec.resource_selectors[0].kind = "StatefulSet".into();
        let d = decide_with(&web, 150, None, &[g1.snapshot()], std::slice::from_ref(&g2));
        assert_eq!(generations(&d), vec![("p".to_owned(), 1)]);
        assert_eq!(d.pending.len(), 1);
        let d = decide_with(&web, 250, None, &[g1.snapshot()], std::slice::from_ref(&g2));
        assert!(d.in_effect.is_empty());
        assert!(d.pending.is_empty());
    }

    #[test]
    fn unknown_revisions_wait() {
        let web = template(json!({"app": "web"}));
        let mut g2 = op("p", 2, 200, true);
        g2.revision = None;
        let d = decide(&OverridesInput {
            template: &web,
            content_revision: Some(Revision::from(999)),
            activation: None,
            recorded: &[],
            policies: std::slice::from_ref(&g2),
        });
        assert!(d.in_effect.is_empty());
        assert_eq!(d.pending.len(), 1);
        let g2 = op("p", 2, 200, true);
        let d = decide(&OverridesInput {
            template: &web,
            content_revision: None,
            activation: None,
            recorded: &[],
            policies: std::slice::from_ref(&g2),
        });
        assert!(d.in_effect.is_empty());
    }

    #[test]
    fn deleted_and_invalid_policies() {
        let web = template(json!({"app": "web"}));
        let gone = op("gone", 4, 100, true);
        // A deleted policy's entry goes at once, Lazy or not.
        let d = decide_with(&web, 50, None, &[gone.snapshot()], &[]);
        assert!(d.in_effect.is_empty());
        // A policy deleted and created again (another uid) is another policy.
        let mut again = op("gone", 1, 300, true);
        again.uid = "uid-new".into();
        let d = decide_with(&web, 50, None, &[gone.snapshot()], std::slice::from_ref(&again));
        assert!(d.in_effect.is_empty());
        assert_eq!(d.pending.len(), 1);
        // An invalid policy keeps what is recorded and reaches no new template.
        let mut invalid = op("bad", 2, 100, false);
        invalid.valid = false;
        let recorded = vec![op("bad", 1, 50, false).snapshot()];
        let d = decide_with(&web, 500, None, &recorded, std::slice::from_ref(&invalid));
        assert_eq!(generations(&d), vec![("bad".to_owned(), 1)]);
        assert!(decide_with(&web, 500, None, &[], &[invalid]).in_effect.is_empty());
    }

    #[test]
    fn entries_are_ordered_by_kind_namespace_and_name() {
        let web = template(json!({"app": "web"}));
        let policies = vec![
            op("b", 1, 1, false),
            op("a", 1, 1, false),
            view(OverridePolicyKind::ClusterOverridePolicy, "z", 1, 1, false),
        ];
        let d = decide_with(&web, 10, None, &[], &policies);
        let order: Vec<(OverridePolicyKind, String)> =
            d.in_effect.iter().map(|e| (e.kind, e.name.clone())).collect();
        assert_eq!(
            order,
            vec![
                (OverridePolicyKind::ClusterOverridePolicy, "z".to_owned()),
                (OverridePolicyKind::OverridePolicy, "a".to_owned()),
                (OverridePolicyKind::OverridePolicy, "b".to_owned()),
            ]
        );
        // The annotation round-trips.
        let text = OverrideSnapshot::annotation_value(&d.in_effect).unwrap();
        assert_eq!(OverrideSnapshot::parse_annotation(Some(&text)), d.in_effect);
        assert!(OverrideSnapshot::parse_annotation(Some("garbage")).is_empty());
        assert_eq!(OverrideSnapshot::annotation_value(&[]), None);
    }

    #[test]
    fn override_policies_selecting_labels_a_cluster_override_policy_adds_are_in_effect() {
        let plain = template(json!({"app": "other"}));
        let mut cop = view(OverridePolicyKind::ClusterOverridePolicy, "cop", 1, 1, false);
        cop.spec = serde_json::from_value(json!({
            "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"app": "web"}}]}}],
        }))
        .unwrap();
        let by_label = op("by-label", 1, 1, false);
        let d = decide_with(&plain, 10, None, &[], &[cop.clone(), by_label.clone()]);
        assert_eq!(
            generations(&d),
            vec![("cop".to_owned(), 1), ("by-label".to_owned(), 1)]
        );
        // Without the ClusterOverridePolicy the OverridePolicy does not select the template.
        assert!(
            decide_with(&plain, 10, None, &[], &[by_label])
                .in_effect
                .is_empty()
        );
    }

    #[test]
    fn status_records_each_generation_once() {
        let metadata = ObjectMeta {
            generation: Some(2),
            resource_version: Some("200".into()),
            ..Default::default()
        };
        let now = Timestamp::UNIX_EPOCH;
        let status = desired_status(None, &metadata, None, now);
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            status.generation_revision,
            Some(GenerationRevision {
                generation: 2,
                resource_version: "200".into()
            })
        );
        assert_eq!(status.conditions[0].status, "True");
        // After the status write the resourceVersion moved; the recorded revision stays.
        let later = ObjectMeta {
            resource_version: Some("201".into()),
            ..metadata.clone()
        };
        assert_eq!(
            generation_revision(&later, Some(&status)),
            Some(Revision::from(200))
        );
        let again = desired_status(Some(&status), &later, None, now);
        assert_eq!(again, status);
        let invalid = desired_status(Some(&status), &later, Some("spec.x: bad".into()), now);
        assert_eq!(invalid.conditions[0].status, "False");
        assert_eq!(invalid.conditions[0].message, "spec.x: bad");
    }

    #[test]
    fn pending_messages() {
        let one = PendingOverride {
            policy: OverrideKey {
                kind: OverridePolicyKind::OverridePolicy,
                namespace: Some("default".into()),
                name: "p".into(),
            },
            uid: "u".into(),
            generation: 2,
        };
        assert_eq!(
            pending_message(std::slice::from_ref(&one)),
            "OverridePolicy default/p generation 2 is pending: it takes effect when the template next changes (or with flotilla activate)"
        );
    }
}
