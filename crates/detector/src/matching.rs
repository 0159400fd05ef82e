//! Which policy a template belongs to: selector matching with Karmada's implicit priorities,
//! the order between policies, preemption, and the claim decision that combines them.
//!
//! Karmada semantics followed here (source: `karmada-io/karmada`, `pkg/`):
//!
//! - Selector matching and implicit priority: `util/selector.go` `ResourceSelectorPriority`:
//!   apiVersion and kind must be equal, a set `namespace` must equal the template's; a set
//!   `name` decides alone (name match); otherwise a `labelSelector` must match (label match);
//!   otherwise the selector matches every object of the kind. A policy's implicit priority is
//!   the highest of its selectors' (`ResourceMatchSelectorsPriority`).
//! - A PropagationPolicy only matches templates in its own namespace, never cluster-scoped ones
//!   (`detector.go` `LookForMatchedPolicy`).
//! - Within one kind: explicit `priority` first, then implicit priority, then the lexically
//!   smaller name (`detector/compare.go` `getHighestPriorityPropagationPolicy`,
//!   `getHigherPriorityPropagationPolicy`).
//! - Between kinds: a matching PropagationPolicy always wins over any ClusterPropagationPolicy,
//!   whatever their explicit priorities: `detector/policy.go` `propagateResource` looks for a
//!   PropagationPolicy first and only falls back to ClusterPropagationPolicies when none
//!   matches. Karmada never compares explicit priority across kinds.
//! - Claims are sticky: a claimed template stays with its policy while the policy exists and
//!   matches, even if a better policy appears (`propagateResource` steps 1 and 2), unless that
//!   policy preempts it.
//! - Preemption (`detector/preemption.go`): only a policy with `preemption: Always` preempts.
//!   A PropagationPolicy preempts a PropagationPolicy of strictly lower explicit priority
//!   (`preemptPropagationPolicy`) and any ClusterPropagationPolicy regardless of priority
//!   (`preemptClusterPropagationPolicyDirectly`); a ClusterPropagationPolicy preempts a
//!   ClusterPropagationPolicy of strictly lower explicit priority
//!   (`preemptClusterPropagationPolicy`) and never a PropagationPolicy. Implicit priority plays
//!   no part in preemption.
//!
//! Where flotilla differs, deliberately:
//!
//! - Karmada evaluates preemption when the preempting policy is reconciled and relies on event
//!   order; here every template reconcile evaluates it (level-triggered). When several policies
//!   could preempt the claimant, the best of them by the order above wins; that choice is a
//!   fixed point (no other candidate can preempt it in turn), so repeated reconciles never
//!   flap.
//! - Karmada's webhook requires `name` on every selector of a preempting policy; flotilla's
//!   validation does not, so preemption applies to every template the policy matches.
//! - A claimant that no longer matches the template (its selectors or the template's labels
//!   changed) releases it here; Karmada only notices on a policy update.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use flotilla_api::policy::{PreemptionBehavior, PropagationSpec, ResourceSelector};
use flotilla_api::revision::Revision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::claim::Claim;
use crate::keys::{PolicyKey, PolicyKind};

/// How specifically a selector (or a policy) matches a template; higher wins ties of explicit
/// priority. Karmada's `util.ImplicitPriority`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImplicitPriority {
    /// No match.
    Mismatch,
    /// The selector names neither a name nor labels: every object of the kind.
    MatchAll,
    /// The selector's label selector matches.
    MatchLabelSelector,
    /// The selector's name matches.
    MatchName,
}

/// The identity and labels of a template, as matching needs them.
#[derive(Clone, Debug, Default)]
pub struct TemplateMeta<'a> {
    /// `apiVersion`.
    pub api_version: &'a str,
    /// `kind`.
    pub kind: &'a str,
    /// `metadata.namespace`; `None` for cluster-scoped templates.
    pub namespace: Option<&'a str>,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.labels`.
    pub labels: BTreeMap<&'a str, &'a str>,
    /// The write that produced the template's current content (`crate::revision`), when known.
    pub written: Option<Revision>,
}

impl<'a> TemplateMeta<'a> {
    /// Reads the fields from a template object; missing fields read as empty.
    pub fn from_object(object: &'a serde_json::Value) -> Self {
        let str_at = |ptr: &str| object.pointer(ptr).and_then(|v| v.as_str());
        let labels = object
            .pointer("/metadata/labels")
            .and_then(|v| v.as_object())
            .map(|map| {
                map.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            api_version: str_at("/apiVersion").unwrap_or_default(),
            kind: str_at("/kind").unwrap_or_default(),
            namespace: str_at("/metadata/namespace").filter(|ns| !ns.is_empty()),
            name: str_at("/metadata/name").unwrap_or_default(),
            labels,
            written: None,
        }
    }
}

/// Whether a Kubernetes label selector matches `labels` (`metav1.LabelSelectorAsSelector`
/// semantics). An empty selector matches everything; a malformed one (unknown operator, `In`
/// without values, `Exists` with values) matches nothing.
pub fn label_selector_matches(selector: &LabelSelector, labels: &BTreeMap<&str, &str>) -> bool {
    if let Some(match_labels) = &selector.match_labels {
        for (key, value) in match_labels {
            if labels.get(key.as_str()) != Some(&value.as_str()) {
                return false;
            }
        }
    }
    for requirement in selector.match_expressions.iter().flatten() {
        let values: &[String] = requirement.values.as_deref().unwrap_or_default();
        let current = labels.get(requirement.key.as_str());
        let ok = match requirement.operator.as_str() {
            "In" if !values.is_empty() => current.is_some_and(|v| values.iter().any(|w| w == v)),
            "NotIn" if !values.is_empty() => current.is_none_or(|v| values.iter().all(|w| w != v)),
            "Exists" if values.is_empty() => current.is_some(),
            "DoesNotExist" if values.is_empty() => current.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// How `selector` matches `template` (Karmada's `ResourceSelectorPriority`).
pub fn selector_priority(template: &TemplateMeta<'_>, selector: &ResourceSelector) -> ImplicitPriority {
    if template.api_version != selector.api_version || template.kind != selector.kind {
        return ImplicitPriority::Mismatch;
    }
    if let Some(namespace) = selector.namespace()
        && template.namespace != Some(namespace)
    {
        return ImplicitPriority::Mismatch;
    }
    if let Some(name) = selector.name() {
        return if name == template.name {
            ImplicitPriority::MatchName
        } else {
            ImplicitPriority::Mismatch
        };
    }
    match &selector.label_selector {
        None => ImplicitPriority::MatchAll,
        Some(label_selector) if label_selector_matches(label_selector, &template.labels) => {
            ImplicitPriority::MatchLabelSelector
        }
        Some(_) => ImplicitPriority::Mismatch,
    }
}

/// A policy as the detector reasons about it: either kind, with what validation and the
/// policy's status say about it.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyView {
    /// Kind, namespace and name.
    pub key: PolicyKey,
    /// `metadata.uid`, the permanent id claims carry.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// The spec.
    pub spec: PropagationSpec,
    /// Whether the policy passed semantic validation.
    pub valid: bool,
    /// Whether the policy is being deleted (`deletionTimestamp` set).
    pub deleting: bool,
    /// The write that produced the policy's current generation (`crate::revision`).
    pub revision: Option<Revision>,
    /// The write from which the policy's current resource selectors apply.
    pub selectors_revision: Option<Revision>,
    /// For a policy being deleted, the write that marked it deleted (its finalizer keeps it, and
    /// its resourceVersion, visible until its templates are released).
    pub deleted_at: Option<Revision>,
}

impl PolicyView {
    /// `<uid>/<generation>`: what a binding records as the policy generation it reflects.
    pub fn generation_ref(&self) -> String {
        format!("{}/{}", self.uid, self.generation)
    }

    /// Whether this policy can claim templates at all: valid and not being deleted.
    pub fn is_active(&self) -> bool {
        self.valid && !self.deleting
    }

    /// How this policy matches `template` (the best of its selectors); a PropagationPolicy
    /// never matches templates outside its namespace.
    pub fn priority_for(&self, template: &TemplateMeta<'_>) -> ImplicitPriority {
        if self.key.kind == PolicyKind::PropagationPolicy
            && (template.namespace.is_none() || template.namespace != self.key.namespace.as_deref())
        {
            return ImplicitPriority::Mismatch;
        }
        self.spec
            .resource_selectors
            .iter()
            .map(|s| selector_priority(template, s))
            .max()
            .unwrap_or(ImplicitPriority::Mismatch)
    }

    /// Whether this policy matches `template`.
    pub fn matches(&self, template: &TemplateMeta<'_>) -> bool {
        self.priority_for(template) > ImplicitPriority::Mismatch
    }
}

/// Orders two policies that both match `template`: `Less` means `a` wins.
pub fn compare_policies(template: &TemplateMeta<'_>, a: &PolicyView, b: &PolicyView) -> Ordering {
    let kind_rank = |p: &PolicyView| match p.key.kind {
        PolicyKind::PropagationPolicy => 0,
        PolicyKind::ClusterPropagationPolicy => 1,
    };
    kind_rank(a)
        .cmp(&kind_rank(b))
        .then_with(|| b.spec.priority().cmp(&a.spec.priority()))
        .then_with(|| b.priority_for(template).cmp(&a.priority_for(template)))
        .then_with(|| a.key.name.cmp(&b.key.name))
        .then_with(|| a.key.namespace.cmp(&b.key.namespace))
}

/// The best of `policies` that are active and match `template`.
pub fn best_policy<'a>(
    template: &TemplateMeta<'_>,
    policies: impl IntoIterator<Item = &'a PolicyView>,
) -> Option<&'a PolicyView> {
    policies
        .into_iter()
        .filter(|p| p.is_active() && p.matches(template))
        .min_by(|a, b| compare_policies(template, a, b))
}

/// The policy that claims an unclaimed `template`: of the active policies that match it, the
/// one that matched it first in the API's order. A policy started matching the template at the
/// later of its selectors' revision and the template's content revision, so policies whose
/// selectors predate the template's content all matched at once and Karmada's order
/// ([`compare_policies`]) picks among them, while a policy created after the template loses to
/// an older one that matched it before (claims are sticky; without preemption a newer policy
/// never takes a claim, whichever order the detector saw them in). When a revision is unknown,
/// Karmada's order alone decides.
pub fn first_match<'a>(
    template: &TemplateMeta<'_>,
    policies: impl IntoIterator<Item = &'a PolicyView>,
) -> Option<&'a PolicyView> {
    let candidates: Vec<&PolicyView> = policies
        .into_iter()
        .filter(|p| p.is_active() && p.matches(template))
        .collect();
    let matched_at = |p: &PolicyView| p.selectors_revision.zip(template.written).map(|(s, w)| s.max(w));
    if candidates.iter().any(|p| matched_at(p).is_none()) {
        return best_policy(template, candidates);
    }
    candidates.into_iter().min_by(|a, b| {
        matched_at(a)
            .cmp(&matched_at(b))
            .then_with(|| compare_policies(template, a, b))
    })
}

/// Whether `preemptor` may take a template claimed by `claimant` (Karmada's preemption rules,
/// see the module docs).
pub fn can_preempt(preemptor: &PolicyView, claimant: &PolicyView) -> bool {
    if preemptor.spec.preemption() != PreemptionBehavior::Always {
        return false;
    }
    match (preemptor.key.kind, claimant.key.kind) {
        (PolicyKind::PropagationPolicy, PolicyKind::ClusterPropagationPolicy) => true,
        (PolicyKind::ClusterPropagationPolicy, PolicyKind::PropagationPolicy) => false,
        _ => preemptor.spec.priority() > claimant.spec.priority(),
    }
}

/// How the claim of a template changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimChange {
    /// The template stays with its current policy.
    Kept,
    /// An unclaimed template is claimed (seed: "policy hit").
    Hit,
    /// A policy with `preemption: Always` took the template from its claimant (seed: "policy
    /// preemption").
    Preempted {
        /// The previous claimant.
        from: PolicyKey,
    },
    /// The previous claimant is gone or no longer matches and another policy claims the
    /// template (seed: "policy no longer match or deleted").
    Replaced {
        /// The previous claimant as the claim named it.
        from: PolicyKey,
    },
}

/// What the detector does about a template's claim.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimDecision<'a> {
    /// The claimant is invalid: the template and its binding are frozen until the policy is
    /// valid again (or deleted).
    Frozen(&'a PolicyView),
    /// The template is (now) claimed by `policy`.
    Claimed {
        /// The claiming policy.
        policy: &'a PolicyView,
        /// How the claim changed.
        change: ClaimChange,
    },
    /// No policy claims the template.
    Unclaimed {
        /// The claim the template carried (now released), if any.
        released: Option<PolicyKey>,
    },
}

/// Decides the claim of `template`, which currently carries `current`, given every policy that
/// could match it (both kinds, valid or not).
pub fn decide_claim<'a>(
    template: &TemplateMeta<'_>,
    current: Option<&Claim>,
    policies: &'a [PolicyView],
) -> ClaimDecision<'a> {
    let claimant = current.and_then(|claim| {
        policies
            .iter()
            .find(|p| p.key == claim.policy_key() && p.uid == claim.id() && !p.deleting)
    });
    if let Some(claimant) = claimant {
        if !claimant.valid {
            return ClaimDecision::Frozen(claimant);
        }
        if claimant.matches(template) {
            let preemptor = best_policy(
                template,
                policies
                    .iter()
                    .filter(|p| p.key != claimant.key && can_preempt(p, claimant)),
            );
            return match preemptor {
                Some(preemptor) => ClaimDecision::Claimed {
                    policy: preemptor,
                    change: ClaimChange::Preempted {
                        from: claimant.key.clone(),
                    },
                },
                None => ClaimDecision::Claimed {
                    policy: claimant,
                    change: ClaimChange::Kept,
                },
            };
        }
    }
    // A released claim goes to the best policy that matches now: the release happened when
    // the claimant went away, a moment the API no longer records once the policy is gone.
    let decision = |policy, change| ClaimDecision::Claimed { policy, change };
    match current.map(Claim::policy_key) {
        Some(from) => match best_policy(template, policies) {
            Some(policy) => decision(policy, ClaimChange::Replaced { from }),
            None => ClaimDecision::Unclaimed { released: Some(from) },
        },
        None => match first_match(template, policies) {
            Some(policy) => decision(policy, ClaimChange::Hit),
            None => ClaimDecision::Unclaimed { released: None },
        },
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::policy::PreemptionBehavior;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a str, &'a str> {
        pairs.iter().copied().collect()
    }

    fn template<'a>(ns: Option<&'a str>, name: &'a str, l: &[(&'a str, &'a str)]) -> TemplateMeta<'a> {
        TemplateMeta {
            api_version: "apps/v1",
            kind: "Deployment",
            namespace: ns,
            name,
            labels: labels(l),
            written: None,
        }
    }

    fn deploy_selector() -> ResourceSelector {
        ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            ..Default::default()
        }
    }

    fn by_name(name: &str) -> ResourceSelector {
        ResourceSelector {
            name: Some(name.into()),
            ..deploy_selector()
        }
    }

    fn by_labels(pairs: &[(&str, &str)]) -> ResourceSelector {
        ResourceSelector {
            label_selector: Some(LabelSelector {
                match_labels: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                match_expressions: None,
            }),
            ..deploy_selector()
        }
    }

    fn policy(key: PolicyKey, selectors: Vec<ResourceSelector>) -> PolicyView {
        PolicyView {
            uid: format!("uid-{}", key.name),
            key,
            generation: 1,
            spec: PropagationSpec {
                resource_selectors: selectors,
                ..Default::default()
            },
            valid: true,
            deleting: false,
            revision: None,
            selectors_revision: None,
            deleted_at: None,
        }
    }

    fn pp(name: &str, selectors: Vec<ResourceSelector>) -> PolicyView {
        policy(PolicyKey::propagation("default", name), selectors)
    }

    fn cpp(name: &str, selectors: Vec<ResourceSelector>) -> PolicyView {
        policy(PolicyKey::cluster(name), selectors)
    }

    fn with_priority(mut p: PolicyView, priority: i32, preemption: Option<PreemptionBehavior>) -> PolicyView {
        p.spec.priority = Some(priority);
        p.spec.preemption = preemption;
        p
    }

    fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let sel = |exprs: Vec<LabelSelectorRequirement>| LabelSelector {
            match_labels: None,
            match_expressions: Some(exprs),
        };
        assert!(label_selector_matches(&LabelSelector::default(), &l));
        assert!(label_selector_matches(
            &sel(vec![expr("app", "In", Some(&["web", "api"]))]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("app", "In", Some(&["api"]))]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("missing", "In", Some(&["x"]))]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("app", "In", Some(&[]))]),
            &l
        ));
        assert!(!label_selector_matches(&sel(vec![expr("app", "In", None)]), &l));
        assert!(label_selector_matches(
            &sel(vec![expr("app", "NotIn", Some(&["api"]))]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("missing", "NotIn", Some(&["x"]))]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("app", "NotIn", Some(&["web"]))]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("app", "NotIn", None)]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("tier", "Exists", None)]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("missing", "Exists", None)]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("tier", "Exists", Some(&["x"]))]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("missing", "DoesNotExist", None)]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("app", "DoesNotExist", None)]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("app", "Matches", Some(&["web"]))]),
            &l
        ));
        // matchLabels and matchExpressions are ANDed.
        let both = LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![expr("tier", "In", Some(&["back"]))]),
        };
        assert!(!label_selector_matches(&both, &l));
        let both_ok = LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![expr("tier", "In", Some(&["front"]))]),
        };
        assert!(label_selector_matches(&both_ok, &l));
        let wrong_value = LabelSelector {
            match_labels: Some([("app".to_string(), "api".to_string())].into()),
            match_expressions: None,
        };
        assert!(!label_selector_matches(&wrong_value, &l));
    }

    #[test]
    fn selector_fields() {
        let t = template(Some("default"), "web", &[("app", "web")]);
        // apiVersion and kind must be exact.
        assert_eq!(
            selector_priority(&t, &deploy_selector()),
            ImplicitPriority::MatchAll
        );
        let other_version = ResourceSelector {
            api_version: "apps/v1beta1".into(),
            ..deploy_selector()
        };
        assert_eq!(selector_priority(&t, &other_version), ImplicitPriority::Mismatch);
        let other_kind = ResourceSelector {
            kind: "StatefulSet".into(),
            ..deploy_selector()
        };
        assert_eq!(selector_priority(&t, &other_kind), ImplicitPriority::Mismatch);
        // namespace: empty matches any, set must be equal.
        for (ns, want) in [
            (None, ImplicitPriority::MatchAll),
            (Some(""), ImplicitPriority::MatchAll),
            (Some("default"), ImplicitPriority::MatchAll),
            (Some("other"), ImplicitPriority::Mismatch),
        ] {
            let s = ResourceSelector {
                namespace: ns.map(str::to_owned),
                ..deploy_selector()
            };
            assert_eq!(selector_priority(&t, &s), want, "{ns:?}");
        }
        let cluster_scoped = template(None, "web", &[]);
        let with_ns = ResourceSelector {
            namespace: Some("default".into()),
            ..deploy_selector()
        };
        assert_eq!(
            selector_priority(&cluster_scoped, &with_ns),
            ImplicitPriority::Mismatch
        );
        // name decides alone, even against a label selector that would not match.
        assert_eq!(
            selector_priority(&t, &by_name("web")),
            ImplicitPriority::MatchName
        );
        assert_eq!(selector_priority(&t, &by_name("api")), ImplicitPriority::Mismatch);
        let name_and_bad_labels = ResourceSelector {
            name: Some("web".into()),
            ..by_labels(&[("app", "nope")])
        };
        assert_eq!(
            selector_priority(&t, &name_and_bad_labels),
            ImplicitPriority::MatchName
        );
        let empty_name = ResourceSelector {
            name: Some(String::new()),
            ..deploy_selector()
        };
        assert_eq!(selector_priority(&t, &empty_name), ImplicitPriority::MatchAll);
        // labels.
        assert_eq!(
            selector_priority(&t, &by_labels(&[("app", "web")])),
            ImplicitPriority::MatchLabelSelector
        );
        assert_eq!(
            selector_priority(&t, &by_labels(&[("app", "api")])),
            ImplicitPriority::Mismatch
        );
    }

    #[test]
    fn policy_priority_is_best_selector_and_pp_stays_in_namespace() {
        let t = template(Some("default"), "web", &[("app", "web")]);
        let p = pp(
            "p",
            vec![by_labels(&[("app", "web")]), by_name("web"), deploy_selector()],
        );
        assert_eq!(p.priority_for(&t), ImplicitPriority::MatchName);
        let other_ns = policy(PolicyKey::propagation("other", "p"), vec![deploy_selector()]);
        assert!(!other_ns.matches(&t));
        let cluster_scoped = template(None, "web", &[]);
        assert!(!pp("p", vec![deploy_selector()]).matches(&cluster_scoped));
        assert!(cpp("c", vec![deploy_selector()]).matches(&cluster_scoped));
        assert!(cpp("c", vec![deploy_selector()]).matches(&t));
        assert!(!pp("none", vec![]).matches(&t));
    }

    #[test]
    fn explicit_then_implicit_then_name() {
        let t = template(Some("default"), "web", &[("app", "web")]);
        let all_high = with_priority(pp("a-all", vec![deploy_selector()]), 5, None);
        let name_low = with_priority(pp("b-name", vec![by_name("web")]), 1, None);
        let policies = vec![name_low.clone(), all_high.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&all_high.key));

        let name = pp("z-name", vec![by_name("web")]);
        let labels = pp("a-labels", vec![by_labels(&[("app", "web")])]);
        let all = pp("a-all", vec![deploy_selector()]);
        let policies = vec![all.clone(), labels.clone(), name.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&name.key));
        let policies = vec![all.clone(), labels.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&labels.key));

        // Ties go to the lexically smaller name.
        let b = pp("b", vec![deploy_selector()]);
        let a = pp("a", vec![deploy_selector()]);
        let policies = vec![b.clone(), a.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&a.key));
        let policies = vec![a.clone(), b.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&a.key));

        // Negative explicit priority loses to the default 0.
        let negative = with_priority(pp("a-neg", vec![by_name("web")]), -1, None);
        let default = pp("z-default", vec![deploy_selector()]);
        let policies = vec![negative, default.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&default.key));
    }

    #[test]
    fn propagation_policy_beats_cluster_policy_whatever_the_priority() {
        let t = template(Some("default"), "web", &[]);
        let low_pp = with_priority(pp("p", vec![deploy_selector()]), -100, None);
        let high_cpp = with_priority(cpp("c", vec![by_name("web")]), 100, None);
        let policies = vec![high_cpp.clone(), low_pp.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&low_pp.key));
        // Among cluster policies the usual order applies.
        let c2 = with_priority(cpp("a", vec![deploy_selector()]), 1, None);
        let policies = vec![c2, high_cpp.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&high_cpp.key));
    }

    #[test]
    fn inactive_policies_never_match() {
        let t = template(Some("default"), "web", &[]);
        let mut invalid = pp("a", vec![deploy_selector()]);
        invalid.valid = false;
        let mut deleting = pp("b", vec![deploy_selector()]);
        deleting.deleting = true;
        let ok = pp("c", vec![deploy_selector()]);
        let policies = vec![invalid.clone(), deleting.clone()];
        assert_eq!(best_policy(&t, &policies), None);
        let policies = vec![invalid, deleting, ok.clone()];
        assert_eq!(best_policy(&t, &policies).map(|p| &p.key), Some(&ok.key));
    }

    /// Every pair of kinds x priority relation x preemption setting.
    #[test]
    fn preemption_matrix() {
        use PreemptionBehavior::{Always, Never};
        let mk = |kind: PolicyKind, priority: i32, preemption: Option<PreemptionBehavior>| {
            let p = match kind {
                PolicyKind::PropagationPolicy => pp("p", vec![deploy_selector()]),
                PolicyKind::ClusterPropagationPolicy => cpp("c", vec![deploy_selector()]),
            };
            with_priority(p, priority, preemption)
        };
        let kinds = [
            PolicyKind::PropagationPolicy,
            PolicyKind::ClusterPropagationPolicy,
        ];
        for preemptor_kind in kinds {
            for claimant_kind in kinds {
                for (preemptor_priority, claimant_priority) in [(1, 0), (0, 0), (0, 1)] {
                    for preemption in [None, Some(Never), Some(Always)] {
                        let preemptor = mk(preemptor_kind, preemptor_priority, preemption.clone());
                        let claimant = mk(claimant_kind, claimant_priority, Some(Always));
                        let expected = preemption == Some(Always)
                            && match (preemptor_kind, claimant_kind) {
                                (PolicyKind::PropagationPolicy, PolicyKind::ClusterPropagationPolicy) => true,
                                (PolicyKind::ClusterPropagationPolicy, PolicyKind::PropagationPolicy) => {
                                    false
                                }
                                _ => preemptor_priority > claimant_priority,
                            };
                        assert_eq!(
                            can_preempt(&preemptor, &claimant),
                            expected,
                            "{preemptor_kind:?}({preemptor_priority}, {preemption:?}) vs {claimant_kind:?}({claimant_priority})"
                        );
                    }
                }
            }
        }
    }

    fn claim_of(p: &PolicyView) -> Claim {
        Claim::of(p)
    }

    fn since(mut p: PolicyView, selectors: u64) -> PolicyView {
        p.selectors_revision = Some(Revision::from(selectors));
        p
    }

    /// An unclaimed template goes to the policy that matched it first in the API's order, not
    /// to whichever the detector happened to see first; policies that matched at once are
    /// ordered as Karmada orders them.
    #[test]
    fn hit_goes_to_the_first_policy_to_match() {
        let mut t = template(Some("default"), "web", &[("app", "web")]);
        // `better` wins Karmada's order (explicit priority), `older` matched first.
        let older = since(pp("older", vec![deploy_selector()]), 20);
        let better = since(with_priority(pp("better", vec![deploy_selector()]), 5, None), 30);
        let policies = vec![better.clone(), older.clone()];
        let winner = |t: &TemplateMeta<'_>| match decide_claim(t, None, &policies) {
            ClaimDecision::Claimed {
                policy,
                change: ClaimChange::Hit,
            } => policy.key.name.clone(),
            other => panic!("{other:?}"),
        };
        // The template existed before both: `older` matched it first.
        t.written = Some(Revision::from(10));
        assert_eq!(winner(&t), "older");
        // Written between them: `older` matched it (at the template's write), `better` later.
        t.written = Some(Revision::from(25));
        assert_eq!(winner(&t), "older");
        // Written after both: both matched at once; Karmada's order decides.
        t.written = Some(Revision::from(40));
        assert_eq!(winner(&t), "better");
        // Unknown revisions: Karmada's order.
        t.written = None;
        assert_eq!(winner(&t), "better");
        t.written = Some(Revision::from(10));
        let unknown = vec![
            pp("unknown", vec![deploy_selector()]),
            better.clone(),
            older.clone(),
        ];
        assert_eq!(
            first_match(&t, &unknown).map(|p| p.key.name.as_str()),
            best_policy(&t, &unknown).map(|p| p.key.name.as_str())
        );
        // Same revision: Karmada's order (a PropagationPolicy before a ClusterPropagationPolicy).
        let cluster = since(cpp("cluster", vec![deploy_selector()]), 20);
        let both = vec![cluster, older.clone()];
        assert_eq!(first_match(&t, &both).map(|p| p.key.name.as_str()), Some("older"));
        // Inactive or non-matching policies never win, however old.
        let mut invalid = since(pp("invalid", vec![deploy_selector()]), 1);
        invalid.valid = false;
        let elsewhere = since(pp("elsewhere", vec![by_name("other")]), 1);
        let some = vec![invalid, elsewhere, better.clone()];
        assert_eq!(
            first_match(&t, &some).map(|p| p.key.name.as_str()),
            Some("better")
        );
    }

    /// A released claim (claimant gone) goes to the best policy that matches now.
    #[test]
    fn replaced_claim_goes_to_the_best_policy() {
        let mut t = template(Some("default"), "web", &[]);
        t.written = Some(Revision::from(10));
        let gone = pp("gone", vec![deploy_selector()]);
        let older = since(pp("older", vec![deploy_selector()]), 20);
        let better = since(with_priority(pp("better", vec![deploy_selector()]), 5, None), 30);
        let policies = vec![older, better];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&gone)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[1],
                change: ClaimChange::Replaced {
                    from: gone.key.clone()
                }
            }
        );
    }

    #[test]
    fn claim_hit_keep_and_release() {
        let t = template(Some("default"), "web", &[("app", "web")]);
        let a = pp("a", vec![deploy_selector()]);
        let policies = vec![a.clone()];
        assert_eq!(
            decide_claim(&t, None, &policies),
            ClaimDecision::Claimed {
                policy: &policies[0],
                change: ClaimChange::Hit
            }
        );
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&a)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[0],
                change: ClaimChange::Kept
            }
        );
        assert_eq!(
            decide_claim(&t, None, &[]),
            ClaimDecision::Unclaimed { released: None }
        );
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&a)), &[]),
            ClaimDecision::Unclaimed {
                released: Some(a.key.clone())
            }
        );
    }

    #[test]
    fn claims_are_sticky_without_preemption() {
        let t = template(Some("default"), "web", &[("app", "web")]);
        let claimant = pp("z", vec![deploy_selector()]);
        let better = with_priority(pp("a", vec![by_name("web")]), 10, Some(PreemptionBehavior::Never));
        let policies = vec![better, claimant.clone()];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&claimant)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[1],
                change: ClaimChange::Kept
            }
        );
    }

    #[test]
    fn preemption_moves_claims() {
        let t = template(Some("default"), "web", &[]);
        let claimant = with_priority(pp("a", vec![deploy_selector()]), 1, None);
        let preemptor = with_priority(pp("b", vec![by_name("web")]), 2, Some(PreemptionBehavior::Always));
        let policies = vec![claimant.clone(), preemptor.clone()];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&claimant)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[1],
                change: ClaimChange::Preempted {
                    from: claimant.key.clone()
                }
            }
        );
        // Equal explicit priority does not preempt, whatever the implicit priority.
        let equal = with_priority(pp("c", vec![by_name("web")]), 1, Some(PreemptionBehavior::Always));
        let policies = vec![claimant.clone(), equal];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&claimant)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[0],
                change: ClaimChange::Kept
            }
        );
        // A PropagationPolicy with Always takes from a higher-priority ClusterPropagationPolicy.
        let cluster_claimant = with_priority(cpp("c", vec![deploy_selector()]), 100, None);
        let pp_preemptor = with_priority(
            pp("p", vec![deploy_selector()]),
            0,
            Some(PreemptionBehavior::Always),
        );
        let policies = vec![cluster_claimant.clone(), pp_preemptor];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&cluster_claimant)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[1],
                change: ClaimChange::Preempted {
                    from: cluster_claimant.key.clone()
                }
            }
        );
        // A ClusterPropagationPolicy never takes from a PropagationPolicy.
        let cpp_preemptor = with_priority(
            cpp("c", vec![deploy_selector()]),
            100,
            Some(PreemptionBehavior::Always),
        );
        let policies = vec![claimant.clone(), cpp_preemptor];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&claimant)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[0],
                change: ClaimChange::Kept
            }
        );
    }

    /// The chosen preemptor cannot itself be preempted by another candidate: repeated
    /// reconciles settle.
    #[test]
    fn preemption_settles() {
        let t = template(Some("default"), "web", &[]);
        let claimant = with_priority(cpp("claimant", vec![deploy_selector()]), 0, None);
        let candidates = vec![
            claimant.clone(),
            with_priority(
                cpp("c5", vec![deploy_selector()]),
                5,
                Some(PreemptionBehavior::Always),
            ),
            with_priority(
                pp("p1", vec![deploy_selector()]),
                1,
                Some(PreemptionBehavior::Always),
            ),
            with_priority(
                pp("p3", vec![deploy_selector()]),
                3,
                Some(PreemptionBehavior::Always),
            ),
            with_priority(
                pp("p2", vec![deploy_selector()]),
                2,
                Some(PreemptionBehavior::Always),
            ),
        ];
        let mut claim = claim_of(&claimant);
        let mut winners = Vec::new();
        for _ in 0..4 {
            match decide_claim(&t, Some(&claim), &candidates) {
                ClaimDecision::Claimed { policy, .. } => {
                    winners.push(policy.key.name.clone());
                    claim = claim_of(policy);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(winners, vec!["p3", "p3", "p3", "p3"]);
    }

    #[test]
    fn stale_claims_are_replaced() {
        let t = template(Some("default"), "web", &[("app", "web")]);
        let gone = pp("gone", vec![deploy_selector()]);
        let next = pp("next", vec![deploy_selector()]);
        let policies = vec![next.clone()];
        // Claimant deleted.
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&gone)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[0],
                change: ClaimChange::Replaced {
                    from: gone.key.clone()
                }
            }
        );
        // Claimant recreated under the same name: a different uid is a different policy.
        let mut recreated = gone.clone();
        recreated.uid = "uid-new".into();
        let policies = vec![recreated];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&gone)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[0],
                change: ClaimChange::Replaced {
                    from: gone.key.clone()
                }
            }
        );
        // Claimant no longer matches (selectors changed).
        let narrowed = pp("gone", vec![by_name("other")]);
        let policies = vec![narrowed.clone(), next.clone()];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&narrowed)), &policies),
            ClaimDecision::Claimed {
                policy: &policies[1],
                change: ClaimChange::Replaced {
                    from: narrowed.key.clone()
                }
            }
        );
        // Claimant being deleted.
        let mut deleting = pp("gone", vec![deploy_selector()]);
        deleting.deleting = true;
        let policies = vec![deleting.clone()];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&deleting)), &policies),
            ClaimDecision::Unclaimed {
                released: Some(deleting.key.clone())
            }
        );
    }

    #[test]
    fn invalid_claimant_freezes_the_template() {
        let t = template(Some("default"), "web", &[]);
        let mut invalid = pp("a", vec![deploy_selector()]);
        invalid.valid = false;
        let preemptor = with_priority(
            pp("b", vec![deploy_selector()]),
            10,
            Some(PreemptionBehavior::Always),
        );
        let policies = vec![invalid.clone(), preemptor];
        assert_eq!(
            decide_claim(&t, Some(&claim_of(&invalid)), &policies),
            ClaimDecision::Frozen(&policies[0])
        );
        // An invalid policy never claims an unclaimed template.
        let policies = vec![invalid];
        assert_eq!(
            decide_claim(&t, None, &policies),
            ClaimDecision::Unclaimed { released: None }
        );
    }

    #[test]
    fn template_meta_from_object() {
        let object = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "n": 1}},
        });
        let meta = TemplateMeta::from_object(&object);
        assert_eq!(meta.api_version, "apps/v1");
        assert_eq!(meta.namespace, Some("default"));
        assert_eq!(meta.labels, labels(&[("app", "web")]));
        let cluster = serde_json::json!({"metadata": {"name": "x", "namespace": ""}});
        assert_eq!(TemplateMeta::from_object(&cluster).namespace, None);
    }
}
