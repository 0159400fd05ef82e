//! One manifest through every applicable override policy, for one cluster: Karmada's
//! `ApplyOverridePolicies` (`pkg/util/overridemanager/overridemanager.go`).
//!
//! 1. ClusterOverridePolicies that select the object, least specific first, then by name
//!    ([`crate::select`]); each rule whose `targetCluster` selects the cluster (or that has
//!    none), in order.
//! 2. For a namespaced object, then the OverridePolicies of its namespace the same way, selected
//!    against the object *as the ClusterOverridePolicies left it*.
//!
//! Within a rule the overriders apply in Karmada's order: image, command, args, labels,
//! annotations, field, plaintext.
//!
//! Where Karmada fails the whole Work when one rule fails, a rule that fails here is skipped
//! (none of its changes apply) and reported; the other rules, policies and clusters still
//! apply.

use std::fmt;

use flotilla_api::overrides::{OverridePolicyKind, OverrideSpec, Overriders};
use serde_json::Value;

use crate::applied::{AppliedItem, annotation_value};
use crate::doc::Doc;
use crate::overriders::{self, CommandOrArgs, LabelsOrAnnotations};
use crate::select::{ClusterFacts, ObjectFacts, Specificity, cluster_matches, policy_specificity};

/// An override policy, as the engine reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySource {
    /// ClusterOverridePolicy or OverridePolicy.
    pub kind: OverridePolicyKind,
    /// The OverridePolicy's namespace (`None` for a ClusterOverridePolicy).
    pub namespace: Option<String>,
    /// The policy's name.
    pub name: String,
    /// Its spec (or the spec of the generation in effect, for a Lazy policy).
    pub spec: OverrideSpec,
}

impl PolicySource {
    /// `OverridePolicy <namespace>/<name>` or `ClusterOverridePolicy <name>`.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// A rule that could not be applied in one cluster (and was skipped there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleFailure {
    /// The policy, `OverridePolicy <namespace>/<name>` or `ClusterOverridePolicy <name>`.
    pub policy: String,
    /// The rule's field path: `spec.overrideRules[<i>]`, or `spec` for the deprecated form.
    pub rule: String,
    /// The overrider within the rule, e.g. `plaintext[1]` or `imageOverrider[0]`.
    pub overrider: String,
    /// What went wrong (names the path or value).
    pub message: String,
}

impl fmt::Display for RuleFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}.overriders.{}: {}",
            self.policy, self.rule, self.overrider, self.message
        )
    }
}

/// A manifest with its overrides applied for one cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// The manifest.
    pub manifest: Value,
    /// The `policy.karmada.io/applied-cluster-overrides` annotation, if any rule applied.
    pub applied_cluster_overrides: Option<String>,
    /// The `policy.karmada.io/applied-overrides` annotation, if any rule applied.
    pub applied_overrides: Option<String>,
    /// The rules skipped because they failed.
    pub failures: Vec<RuleFailure>,
}

/// Applies `policies` (both kinds, in any order; OverridePolicies of other namespaces than the
/// manifest's are ignored) to `manifest` for `cluster`.
pub fn render(manifest: &Value, cluster: &ClusterFacts, policies: &[PolicySource]) -> Rendered {
    let mut doc = Doc::from(manifest);
    let mut failures = Vec::new();
    let cluster_policies: Vec<&PolicySource> = policies
        .iter()
        .filter(|p| p.kind == OverridePolicyKind::ClusterOverridePolicy)
        .collect();
    let applied_cluster = apply_group(&mut doc, cluster, &cluster_policies, &mut failures);
    let namespace = ObjectFacts::of(&doc).namespace;
    let applied_namespaced = if namespace.is_empty() {
        Vec::new()
    } else {
        let namespaced: Vec<&PolicySource> = policies
            .iter()
            .filter(|p| {
                p.kind == OverridePolicyKind::OverridePolicy
                    && p.namespace.as_deref() == Some(namespace.as_str())
            })
            .collect();
        apply_group(&mut doc, cluster, &namespaced, &mut failures)
    };
    Rendered {
        manifest: Value::from(&doc),
        applied_cluster_overrides: annotation_value(&applied_cluster),
        applied_overrides: annotation_value(&applied_namespaced),
        failures,
    }
}

/// The policies of one group that select the object, in the order they apply.
pub fn ordered<'a>(object: &ObjectFacts, policies: &[&'a PolicySource]) -> Vec<&'a PolicySource> {
    let mut selected: Vec<(Specificity, &PolicySource)> = policies
        .iter()
        .map(|p| (policy_specificity(object, &p.spec.resource_selectors), *p))
        .filter(|(specificity, _)| *specificity > Specificity::Mismatch)
        .collect();
    selected.sort_by(|(a, p), (b, q)| a.cmp(b).then_with(|| p.name.cmp(&q.name)));
    selected.into_iter().map(|(_, p)| p).collect()
}

fn apply_group(
    doc: &mut Doc,
    cluster: &ClusterFacts,
    policies: &[&PolicySource],
    failures: &mut Vec<RuleFailure>,
) -> Vec<AppliedItem> {
    let object = ObjectFacts::of(doc);
    let mut applied = Vec::new();
    for policy in ordered(&object, policies) {
        let deprecated = policy.spec.uses_deprecated_form();
        for (i, rule) in policy.spec.rules().iter().enumerate() {
            if rule
                .target_cluster
                .as_ref()
                .is_some_and(|target| !cluster_matches(cluster, target))
            {
                continue;
            }
            let mut candidate = doc.clone();
            match apply_rule(&mut candidate, &rule.overriders) {
                Ok(()) => {
                    *doc = candidate;
                    applied.push(AppliedItem {
                        policy_name: policy.name.clone(),
                        overriders: rule.overriders.clone(),
                    });
                }
                Err((overrider, message)) => failures.push(RuleFailure {
                    policy: policy.display_name(),
                    rule: if deprecated {
                        "spec".to_owned()
                    } else {
                        format!("spec.overrideRules[{i}]")
                    },
                    overrider,
                    message,
                }),
            }
        }
    }
    applied
}

/// Applies one rule's overriders in Karmada's order; on failure, which overrider and why.
pub fn apply_rule(doc: &mut Doc, o: &Overriders) -> Result<(), (String, String)> {
    fn at(name: &'static str, i: usize) -> impl FnOnce(String) -> (String, String) {
        move |message| (format!("{name}[{i}]"), message)
    }
    for (i, image) in o.image_overrider.iter().enumerate() {
        overriders::image(doc, image).map_err(at("imageOverrider", i))?;
    }
    for (i, command) in o.command_overrider.iter().enumerate() {
        overriders::command_args(doc, CommandOrArgs::Command, command).map_err(at("commandOverrider", i))?;
    }
    for (i, args) in o.args_overrider.iter().enumerate() {
        overriders::command_args(doc, CommandOrArgs::Args, args).map_err(at("argsOverrider", i))?;
    }
    for (i, labels) in o.labels_overrider.iter().enumerate() {
        overriders::labels_annotations(doc, LabelsOrAnnotations::Labels, labels)
            .map_err(at("labelsOverrider", i))?;
    }
    for (i, annotations) in o.annotations_overrider.iter().enumerate() {
        overriders::labels_annotations(doc, LabelsOrAnnotations::Annotations, annotations)
            .map_err(at("annotationsOverrider", i))?;
    }
    for (i, field) in o.field_overrider.iter().enumerate() {
        overriders::field(doc, field).map_err(at("fieldOverrider", i))?;
    }
    // Karmada applies the plaintext list as one patch; applying its operations one by one on a
    // copy gives the same all-or-nothing result and says which one failed.
    let mut patched = doc.clone();
    for (i, plaintext) in o.plaintext.iter().enumerate() {
        overriders::plaintext(&mut patched, std::slice::from_ref(plaintext)).map_err(at("plaintext", i))?;
    }
    *doc = patched;
    Ok(())
}
