//! Lazy activation (`activationPreference: Lazy`, seed `lazy-activation-preference.md`): whether
//! a claimed template's binding is refreshed from its active policy now, or waits for the
//! template's next change.
//!
//! The criterion: a policy change never by itself changes the propagation of a template whose
//! active policy is Lazy. Claims still move at once (binding relationship); only the refresh of
//! the binding waits. Unlike Karmada, which decides from in-memory event history ("was this
//! reconcile triggered by a policy change?") and so forgets pending changes on restart, the
//! decision here reads only what is stored in the objects:
//!
//! - the binding's `flotilla.io/template-fingerprint`: the template content its spec reflects;
//! - the binding's `flotilla.io/policy-generation` (`<policy uid>/<generation>`): the policy
//!   generation its propagation fields reflect;
//! - the template's `flotilla.io/lazy-baseline`: its fingerprint when a Lazy policy claimed it
//!   without a binding;
//! - the policy's `status.selectorsObservedAt`: when its current resource selectors took
//!   effect (its creation, or the detector's first sight of a selector edit);
//! - the template's `flotilla.io/activate`: the user's permission to activate one policy
//!   generation for this template without changing it (`flotilla activate`).
//!
//! [`decide`] is the whole decision table; `docs` in the crate README walk through the seed's
//! cases.

use k8s_openapi::jiff::Timestamp;

/// What the decision knows about the template's existing binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindingFacts<'a> {
    /// `flotilla.io/template-fingerprint`, if the detector ever refreshed the binding.
    pub fingerprint: Option<&'a str>,
    /// `flotilla.io/policy-generation`.
    pub policy_generation: Option<&'a str>,
    /// Whether the binding's propagation fields already equal what the active policy's current
    /// generation would write.
    pub propagation_matches: bool,
}

/// The inputs of the decision, all read from stored objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LazyInput<'a> {
    /// Whether the active policy is Lazy.
    pub lazy: bool,
    /// The active policy's `<uid>/<generation>`.
    pub policy_generation: &'a str,
    /// The template's current fingerprint.
    pub fingerprint: &'a str,
    /// The template's `metadata.creationTimestamp`.
    pub template_created: Option<Timestamp>,
    /// When the active policy's current selectors took effect.
    pub selectors_since: Option<Timestamp>,
    /// The template's `flotilla.io/lazy-baseline`.
    pub baseline: Option<&'a str>,
    /// The template's `flotilla.io/activate`.
    pub activation: Option<&'a str>,
    /// The template's binding, if it exists.
    pub binding: Option<BindingFacts<'a>>,
}

/// Why a binding is refreshed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshReason {
    /// The active policy is not Lazy: policy changes apply at once.
    Immediate,
    /// The template changed since the binding (or the lazy baseline) was recorded.
    TemplateChanged,
    /// The template was created after the policy's selectors took effect (seed, Notes 1: "if
    /// you create a policy first, then ... the resource will be propagated at once").
    CreatedAfterPolicy,
    /// The user activated this policy generation for the template (`flotilla.io/activate`).
    Activated,
}

/// What to do with the binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyAction {
    /// Write the binding from the template and the policy's current generation, and record the
    /// fingerprint and policy generation.
    Refresh(RefreshReason),
    /// The binding's propagation fields already equal the current generation's: record the
    /// generation (activated without a spec change).
    Record,
    /// The binding already records the current generation and the template did not change.
    Current,
    /// A Lazy change is pending: leave the spec alone and say so (`PolicyActivated=False`).
    Pending,
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LazyDecision {
    /// What to do with the binding.
    pub action: LazyAction,
    /// Record the template's current fingerprint as its `flotilla.io/lazy-baseline` (a Lazy
    /// policy claimed a template that existed before it, and nothing else tells later whether
    /// the template changed).
    pub write_baseline: bool,
}

impl LazyDecision {
    fn new(action: LazyAction) -> Self {
        Self {
            action,
            write_baseline: false,
        }
    }
}

/// Decides what happens to the binding of a template whose active policy is known (see the
/// module docs for the inputs).
///
/// 1. Not Lazy: refresh (the writer compares desired and stored content and writes only a
///    difference).
/// 2. `flotilla.io/activate` names the current generation: refresh (unless already current).
/// 3. The reference fingerprint is the binding's, else the template's baseline. A different
///    current fingerprint means the template changed: refresh.
/// 4. No reference: a template created at or after the policy's selectors took effect is
///    refreshed (seed special case 1); an older one gets a baseline and waits (special case 2,
///    seed Case 4 "hit").
/// 5. Unchanged template: no binding, or propagation fields that differ from the current
///    generation's, is pending; equal fields are recorded as activated; an already recorded
///    generation needs nothing.
pub fn decide(input: &LazyInput<'_>) -> LazyDecision {
    if !input.lazy {
        return LazyDecision::new(LazyAction::Refresh(RefreshReason::Immediate));
    }
    let already_current = input
        .binding
        .is_some_and(|b| b.policy_generation == Some(input.policy_generation));
    if input.activation == Some(input.policy_generation) && !already_current {
        return LazyDecision::new(LazyAction::Refresh(RefreshReason::Activated));
    }
    let reference = input.binding.and_then(|b| b.fingerprint).or(input.baseline);
    let write_baseline = match reference {
        Some(reference) if reference != input.fingerprint => {
            return LazyDecision::new(LazyAction::Refresh(RefreshReason::TemplateChanged));
        }
        Some(_) => false,
        None => match (input.template_created, input.selectors_since) {
            (Some(created), Some(since)) if created >= since => {
                return LazyDecision::new(LazyAction::Refresh(RefreshReason::CreatedAfterPolicy));
            }
            _ => true,
        },
    };
    let action = match input.binding {
        None => LazyAction::Pending,
        Some(_) if already_current => LazyAction::Current,
        Some(b) if b.propagation_matches => LazyAction::Record,
        Some(_) => LazyAction::Pending,
    };
    LazyDecision {
        action,
        write_baseline,
    }
}

/// Parses `<uid>/<generation>` (the `flotilla.io/policy-generation` and `flotilla.io/activate`
/// format).
pub fn parse_generation_ref(value: &str) -> Option<(&str, i64)> {
    let (uid, generation) = value.rsplit_once('/')?;
    let generation = generation.parse().ok()?;
    (!uid.is_empty()).then_some((uid, generation))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEN: &str = "uid-p/2";
    const OLD_GEN: &str = "uid-p/1";
    const OTHER_POLICY_GEN: &str = "uid-q/5";

    fn t(seconds: i64) -> Option<Timestamp> {
        Timestamp::from_second(seconds).ok()
    }

    fn input<'a>() -> LazyInput<'a> {
        LazyInput {
            lazy: true,
            policy_generation: GEN,
            fingerprint: "fp-now",
            template_created: t(100),
            selectors_since: t(200),
            baseline: None,
            activation: None,
            binding: None,
        }
    }

    fn binding<'a>(
        fingerprint: Option<&'a str>,
        generation: Option<&'a str>,
        matches: bool,
    ) -> Option<BindingFacts<'a>> {
        Some(BindingFacts {
            fingerprint,
            policy_generation: generation,
            propagation_matches: matches,
        })
    }

    fn act(action: LazyAction) -> LazyDecision {
        LazyDecision {
            action,
            write_baseline: false,
        }
    }

    fn refresh(reason: RefreshReason) -> LazyDecision {
        act(LazyAction::Refresh(reason))
    }

    #[test]
    fn not_lazy_always_refreshes() {
        for b in [
            None,
            binding(Some("fp-now"), Some(GEN), true),
            binding(Some("fp-old"), Some(OLD_GEN), false),
        ] {
            let i = LazyInput {
                lazy: false,
                binding: b,
                ..input()
            };
            assert_eq!(decide(&i), refresh(RefreshReason::Immediate));
        }
    }

    #[test]
    fn lazy_with_binding() {
        // Template changed since the binding was refreshed.
        let i = LazyInput {
            binding: binding(Some("fp-old"), Some(OLD_GEN), false),
            ..input()
        };
        assert_eq!(decide(&i), refresh(RefreshReason::TemplateChanged));
        // Unchanged, fields differ: pending (seed Case 1 Lazy).
        let i = LazyInput {
            binding: binding(Some("fp-now"), Some(OLD_GEN), false),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Pending));
        // Unchanged, fields equal (e.g. only the priority changed): activated without a write
        // to the spec.
        let i = LazyInput {
            binding: binding(Some("fp-now"), Some(OLD_GEN), true),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Record));
        // Unchanged, already on this generation.
        let i = LazyInput {
            binding: binding(Some("fp-now"), Some(GEN), true),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Current));
        // The binding's fingerprint wins over a (stale) baseline.
        let i = LazyInput {
            baseline: Some("fp-other"),
            binding: binding(Some("fp-now"), Some(OLD_GEN), false),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Pending));
    }

    #[test]
    fn lazy_without_binding() {
        // Baseline recorded, template unchanged: pending, nothing to write.
        let i = LazyInput {
            baseline: Some("fp-now"),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Pending));
        // Baseline recorded, template changed: refresh (seed Simple Case 2, second step).
        let i = LazyInput {
            baseline: Some("fp-old"),
            ..input()
        };
        assert_eq!(decide(&i), refresh(RefreshReason::TemplateChanged));
        // No baseline, template older than the policy: record a baseline and wait (special
        // case 2, seed Case 4 "hit", Simple Case 2 first step).
        assert_eq!(
            decide(&input()),
            LazyDecision {
                action: LazyAction::Pending,
                write_baseline: true
            }
        );
        // No baseline, template created after (or in the same second as) the policy: refresh
        // at once (special case 1, Simple Case 1).
        for created in [t(200), t(300)] {
            let i = LazyInput {
                template_created: created,
                ..input()
            };
            assert_eq!(decide(&i), refresh(RefreshReason::CreatedAfterPolicy));
        }
        // Unknown times are treated as "existed before": never propagate by surprise.
        for (created, since) in [(None, t(1)), (t(1), None), (None, None)] {
            let i = LazyInput {
                template_created: created,
                selectors_since: since,
                ..input()
            };
            assert_eq!(
                decide(&i),
                LazyDecision {
                    action: LazyAction::Pending,
                    write_baseline: true
                }
            );
        }
    }

    #[test]
    fn binding_never_refreshed_by_the_detector() {
        // An attached binding made by the dependency distributor has no fingerprint: the
        // baseline, then the creation time decide.
        let attached = binding(None, None, false);
        let i = LazyInput {
            binding: attached,
            baseline: Some("fp-now"),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Pending));
        let i = LazyInput {
            binding: attached,
            ..input()
        };
        assert_eq!(
            decide(&i),
            LazyDecision {
                action: LazyAction::Pending,
                write_baseline: true
            }
        );
        let i = LazyInput {
            binding: binding(None, None, true),
            ..input()
        };
        assert_eq!(
            decide(&i),
            LazyDecision {
                action: LazyAction::Record,
                write_baseline: true
            }
        );
        let i = LazyInput {
            binding: attached,
            template_created: t(500),
            ..input()
        };
        assert_eq!(decide(&i), refresh(RefreshReason::CreatedAfterPolicy));
    }

    #[test]
    fn activation_annotation() {
        // Names the current generation: refresh without a template change.
        let i = LazyInput {
            activation: Some(GEN),
            binding: binding(Some("fp-now"), Some(OLD_GEN), false),
            ..input()
        };
        assert_eq!(decide(&i), refresh(RefreshReason::Activated));
        let i = LazyInput {
            activation: Some(GEN),
            baseline: Some("fp-now"),
            ..input()
        };
        assert_eq!(decide(&i), refresh(RefreshReason::Activated));
        // Already activated: the annotation left behind is harmless.
        let i = LazyInput {
            activation: Some(GEN),
            binding: binding(Some("fp-now"), Some(GEN), true),
            ..input()
        };
        assert_eq!(decide(&i), act(LazyAction::Current));
        // A stale generation, or another policy's, grants nothing.
        for stale in [OLD_GEN, OTHER_POLICY_GEN, "garbage"] {
            let i = LazyInput {
                activation: Some(stale),
                binding: binding(Some("fp-now"), Some(OLD_GEN), false),
                ..input()
            };
            assert_eq!(decide(&i), act(LazyAction::Pending), "{stale}");
        }
    }

    /// The seed's four cases, default and Lazy, from the point of view of the template's
    /// binding after the claim has been decided. "Old" bindings reflect the previous policy
    /// (or the previous generation) and the template did not change.
    #[test]
    fn seed_cases_default_and_lazy() {
        let unchanged_binding_of_previous = binding(Some("fp-now"), Some(OTHER_POLICY_GEN), false);
        let unchanged_binding_of_old_generation = binding(Some("fp-now"), Some(OLD_GEN), false);
        let cases = [
            ("Case 1 policy still matches", unchanged_binding_of_old_generation),
            (
                "Case 2 policy no longer matches / deleted",
                unchanged_binding_of_previous,
            ),
            ("Case 3 preemption", unchanged_binding_of_previous),
            (
                "Case 4 hit with a leftover binding",
                unchanged_binding_of_previous,
            ),
        ];
        for (name, b) in cases {
            let default = LazyInput {
                lazy: false,
                binding: b,
                ..input()
            };
            assert_eq!(
                decide(&default),
                refresh(RefreshReason::Immediate),
                "{name} default"
            );
            let lazy = LazyInput {
                binding: b,
                ..input()
            };
            assert_eq!(decide(&lazy), act(LazyAction::Pending), "{name} lazy");
            // ... until the template changes.
            let changed = LazyInput {
                fingerprint: "fp-next",
                binding: b,
                ..input()
            };
            assert_eq!(
                decide(&changed),
                refresh(RefreshReason::TemplateChanged),
                "{name} lazy, then changed"
            );
        }
        // Case 4 hit without a binding: default refreshes, Lazy records a baseline and waits.
        let default = LazyInput {
            lazy: false,
            ..input()
        };
        assert_eq!(decide(&default), refresh(RefreshReason::Immediate));
        assert_eq!(decide(&input()).action, LazyAction::Pending);
    }

    #[test]
    fn generation_refs() {
        assert_eq!(parse_generation_ref("abc-123/4"), Some(("abc-123", 4)));
        assert_eq!(parse_generation_ref("a/b/7"), Some(("a/b", 7)));
        for bad in ["", "abc", "abc/", "/4", "abc/x", "abc/4.5"] {
            assert_eq!(parse_generation_ref(bad), None, "{bad}");
        }
    }
}
