//! Lazy activation (`activationPreference: Lazy`, seed `lazy-activation-preference.md`): whether
//! a claimed template's binding is refreshed from its active policy now, or waits for the
//! template's next change.
//!
//! The criterion: a policy change never by itself changes the propagation of a template whose
//! active policy is Lazy. Claims still move at once (binding relationship); only the refresh of
//! the binding waits.
//!
//! Karmada decides from in-memory event history ("was this reconcile triggered by a policy
//! change?"), so its answer depends on which event its watch delivered first and is forgotten on
//! restart. Here the decision is a function of the API's state only, in the API's own order:
//!
//! > A Lazy policy's generation applies to a template when the template's content was written
//! > after that generation was written and after the policy became the template's claimant,
//! > or when the user activated the generation for the template (`flotilla activate`).
//! > Otherwise the template keeps the propagation its binding has (none, when it has no
//! > binding).
//!
//! "Written after" compares resourceVersions ([`flotilla_api::revision`]): the template's
//! *content revision* (the write that produced its current fingerprint) against the policy's
//! *generation revision* (the write that produced its current spec generation, recorded in
//! `status.generationRevision`) and the template's *claim revision* (the write that moved its
//! claim to the policy: another policy's deletion, selector edit or preemption), see
//! [`crate::revision`]. So "a template created after the policy propagates at once", "a
//! template that existed before waits for its next change" (seed, Notes 1) and "a claim moved
//! by a policy change does not refresh the binding" (seed, Cases 2 and 3) hold whatever the
//! order and timing in which the detector sees the objects, across restarts and relists.
//!
//! A template whose content changed before the policy's current generation was written (both
//! changes made while the detector was busy or down) has its binding's content refreshed with
//! the propagation it already has; the new generation stays pending ([`LazyAction::RefreshContent`]).
//!
//! [`decide`] is the whole decision table.

use flotilla_api::revision::{Revision, written_after};

/// What the decision knows about the template's existing binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindingFacts<'a> {
    /// `flotilla.io/template-fingerprint`: the template content the binding reflects (`None`
    /// for a binding the detector never refreshed, e.g. one the dependency distributor made).
    pub fingerprint: Option<&'a str>,
    /// `flotilla.io/policy-generation`: the policy generation its propagation fields reflect.
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
    /// The write that produced the active policy's current generation.
    pub policy_revision: Option<Revision>,
    /// The template's current fingerprint.
    pub fingerprint: &'a str,
    /// The write that produced the template's current content.
    pub content_revision: Option<Revision>,
    /// The revision from which a content write counts under the current claim (`None`: no
    /// constraint, e.g. claims made by detectors that did not record it).
    pub claim_revision: Option<Revision>,
    /// The template's `flotilla.io/activate`.
    pub activation: Option<&'a str>,
    /// The template's binding, if it exists.
    pub binding: Option<BindingFacts<'a>>,
}

/// Why a binding is refreshed with the policy's current generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshReason {
    /// The active policy is not Lazy: policy changes apply at once.
    Immediate,
    /// The template changed since the binding was refreshed, and the binding already reflects
    /// the current generation (or propagates exactly as it would): only its content moves.
    TemplateChanged,
    /// The template's content was written after the policy's current generation and after the
    /// claim moved to the policy: created after the policy (seed, Notes 1), or changed since the
    /// policy change.
    TemplateNewer,
    /// The user activated this policy generation for the template (`flotilla.io/activate`).
    Activated,
}

/// What to do with the binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyAction {
    /// Write the binding from the template and the policy's current generation, and record the
    /// fingerprint and policy generation.
    Refresh(RefreshReason),
    /// The template changed, but before the policy's current generation was written: write the
    /// binding's content from the template, keep its propagation fields and recorded generation
    /// (the new generation stays pending).
    RefreshContent,
    /// The binding's propagation fields already equal the current generation's and the
    /// template did not change: record the generation (activated without a spec change).
    Record,
    /// The binding already records the current generation and the template did not change.
    Current,
    /// A Lazy change is pending: leave the spec alone and say so (`PolicyActivated=False`).
    Pending,
}

impl LazyAction {
    /// Whether the policy's current generation is pending after this action.
    pub fn leaves_pending(self) -> bool {
        matches!(self, LazyAction::Pending | LazyAction::RefreshContent)
    }
}

/// Decides what happens to the binding of a template whose active policy is known (see the
/// module docs for the rule).
///
/// 1. Not Lazy: refresh (the writer compares desired and stored content and writes only a
///    difference).
/// 2. The binding already reflects the current generation: refresh its content if the template
///    changed since, else nothing.
/// 3. `flotilla.io/activate` names the current generation: refresh.
/// 4. The template's content was written after the current generation and at or after the
///    claim revision (a template whose own write made the policy claim it counts): refresh.
/// 5. Otherwise the generation waits: no binding stays without one; a binding whose
///    propagation already equals the generation's is recorded as activated (and gets the
///    template's content); a binding the detector refreshed before gets the template's content
///    with its old propagation; anything else is left alone.
pub fn decide(input: &LazyInput<'_>) -> LazyAction {
    if !input.lazy {
        return LazyAction::Refresh(RefreshReason::Immediate);
    }
    let changed_since = |b: &BindingFacts<'_>| b.fingerprint != Some(input.fingerprint);
    if let Some(b) = input.binding
        && b.policy_generation == Some(input.policy_generation)
    {
        return if changed_since(&b) {
            LazyAction::Refresh(RefreshReason::TemplateChanged)
        } else {
            LazyAction::Current
        };
    }
    if input.activation == Some(input.policy_generation) {
        return LazyAction::Refresh(RefreshReason::Activated);
    }
    let since_claim = input
        .claim_revision
        .is_none_or(|claimed| input.content_revision.is_some_and(|content| content >= claimed));
    if written_after(input.content_revision, input.policy_revision) && since_claim {
        return LazyAction::Refresh(RefreshReason::TemplateNewer);
    }
    match input.binding {
        None => LazyAction::Pending,
        Some(b) if b.propagation_matches && changed_since(&b) => {
            LazyAction::Refresh(RefreshReason::TemplateChanged)
        }
        Some(b) if b.propagation_matches => LazyAction::Record,
        Some(b) if b.fingerprint.is_some() && changed_since(&b) => LazyAction::RefreshContent,
        Some(_) => LazyAction::Pending,
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

    /// The policy's current generation was written at revision 200.
    const POLICY: u64 = 200;
    const OLDER: u64 = 100;
    const NEWER: u64 = 300;

    fn input<'a>() -> LazyInput<'a> {
        LazyInput {
            lazy: true,
            policy_generation: GEN,
            policy_revision: Some(Revision::from(POLICY)),
            fingerprint: "fp-now",
            content_revision: Some(Revision::from(OLDER)),
            claim_revision: None,
            activation: None,
            binding: None,
        }
    }

    fn written(revision: u64) -> Option<Revision> {
        Some(Revision::from(revision))
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

    const fn refresh(reason: RefreshReason) -> LazyAction {
        LazyAction::Refresh(reason)
    }

    #[test]
    fn not_lazy_always_refreshes() {
        for b in [
            None,
            binding(Some("fp-now"), Some(GEN), true),
            binding(Some("fp-old"), Some(OLD_GEN), false),
        ] {
            for content in [OLDER, NEWER] {
                let i = LazyInput {
                    lazy: false,
                    binding: b,
                    content_revision: written(content),
                    ..input()
                };
                assert_eq!(decide(&i), refresh(RefreshReason::Immediate));
            }
        }
    }

    /// Every combination of: binding (none / on the current generation / on an older one, with
    /// equal or different propagation, refreshed by the detector or not), template content
    /// (unchanged since the binding or changed), and content revision (older or newer than the
    /// policy's generation).
    #[test]
    fn decision_table() {
        use LazyAction::*;
        use RefreshReason::*;
        // (case, binding, fingerprint, content revision, expected)
        let cases: Vec<(&str, Option<BindingFacts<'_>>, &str, u64, LazyAction)> = vec![
            // No binding: the template waits unless written after the policy generation
            // (seed Simple Case 2 and Notes 1).
            ("no binding, older", None, "fp-now", OLDER, Pending),
            ("no binding, newer", None, "fp-now", NEWER, Refresh(TemplateNewer)),
            // The binding is on the current generation: content only.
            (
                "current, unchanged",
                binding(Some("fp-now"), Some(GEN), true),
                "fp-now",
                OLDER,
                Current,
            ),
            (
                "current, changed",
                binding(Some("fp-old"), Some(GEN), true),
                "fp-now",
                OLDER,
                Refresh(TemplateChanged),
            ),
            (
                "current, changed after",
                binding(Some("fp-old"), Some(GEN), true),
                "fp-now",
                NEWER,
                Refresh(TemplateChanged),
            ),
            // An older generation with other propagation: pending (seed Case 1) until the
            // template is written after the generation.
            (
                "old generation, unchanged",
                binding(Some("fp-now"), Some(OLD_GEN), false),
                "fp-now",
                OLDER,
                Pending,
            ),
            (
                "old generation, changed before the policy",
                binding(Some("fp-old"), Some(OLD_GEN), false),
                "fp-now",
                OLDER,
                RefreshContent,
            ),
            (
                "old generation, changed after the policy",
                binding(Some("fp-old"), Some(OLD_GEN), false),
                "fp-now",
                NEWER,
                Refresh(TemplateNewer),
            ),
            // Another policy's binding (claim moved, seed Cases 2-4): the same.
            (
                "other policy, unchanged",
                binding(Some("fp-now"), Some(OTHER_POLICY_GEN), false),
                "fp-now",
                OLDER,
                Pending,
            ),
            (
                "other policy, changed before",
                binding(Some("fp-old"), Some(OTHER_POLICY_GEN), false),
                "fp-now",
                OLDER,
                RefreshContent,
            ),
            (
                "other policy, newer",
                binding(Some("fp-now"), Some(OTHER_POLICY_GEN), false),
                "fp-now",
                NEWER,
                Refresh(TemplateNewer),
            ),
            // Equal propagation (e.g. only the priority changed): recorded without a spec
            // change, with the template's content if it changed.
            (
                "equal propagation, unchanged",
                binding(Some("fp-now"), Some(OLD_GEN), true),
                "fp-now",
                OLDER,
                Record,
            ),
            (
                "equal propagation, changed",
                binding(Some("fp-old"), Some(OLD_GEN), true),
                "fp-now",
                OLDER,
                Refresh(TemplateChanged),
            ),
            // A binding the detector never refreshed (made by the dependency distributor):
            // never rewritten with propagation it did not choose.
            (
                "attached, older",
                binding(None, None, false),
                "fp-now",
                OLDER,
                Pending,
            ),
            (
                "attached, newer",
                binding(None, None, false),
                "fp-now",
                NEWER,
                Refresh(TemplateNewer),
            ),
            (
                "attached, equal",
                binding(None, None, true),
                "fp-now",
                OLDER,
                Refresh(TemplateChanged),
            ),
        ];
        for (case, b, fingerprint, content, expected) in cases {
            let i = LazyInput {
                binding: b,
                fingerprint,
                content_revision: written(content),
                ..input()
            };
            assert_eq!(decide(&i), expected, "{case}");
        }
    }

    /// A claim moved to the policy by a policy change (another policy deleted, narrowed or
    /// preempted) after the template's last write leaves the propagation alone, even when the
    /// policy itself is older than the template; a write after the move counts.
    #[test]
    fn claim_moved_by_a_policy_change() {
        let moved_at = written(250);
        let older_policy = LazyInput {
            policy_revision: written(150),
            content_revision: written(200),
            claim_revision: moved_at,
            binding: binding(Some("fp-now"), Some(OTHER_POLICY_GEN), false),
            ..input()
        };
        assert_eq!(decide(&older_policy), LazyAction::Pending);
        let changed_after = LazyInput {
            content_revision: written(260),
            fingerprint: "fp-next",
            ..older_policy
        };
        assert_eq!(decide(&changed_after), refresh(RefreshReason::TemplateNewer));
        // A template whose own write made the policy claim it (the claim revision is the
        // template's content revision) counts.
        let hit_by_its_own_write = LazyInput {
            policy_revision: written(150),
            content_revision: written(200),
            claim_revision: written(200),
            ..input()
        };
        assert_eq!(
            decide(&hit_by_its_own_write),
            refresh(RefreshReason::TemplateNewer)
        );
        // An unknown content revision never counts against a claim revision.
        let unknown = LazyInput {
            content_revision: None,
            ..hit_by_its_own_write
        };
        assert_eq!(decide(&unknown), LazyAction::Pending);
    }

    #[test]
    fn unknown_revisions_never_activate() {
        // A resourceVersion that does not parse is "not later": the conservative side.
        for (content, policy) in [(None, written(POLICY)), (written(NEWER), None), (None, None)] {
            let i = LazyInput {
                content_revision: content,
                policy_revision: policy,
                ..input()
            };
            assert_eq!(decide(&i), LazyAction::Pending, "{content:?} {policy:?}");
        }
        // Equal revisions cannot happen for two objects; if they did, not "after".
        let i = LazyInput {
            content_revision: written(POLICY),
            ..input()
        };
        assert_eq!(decide(&i), LazyAction::Pending);
    }

    #[test]
    fn activation_annotation() {
        // Names the current generation: refresh without a template change.
        for b in [None, binding(Some("fp-now"), Some(OLD_GEN), false)] {
            let i = LazyInput {
                activation: Some(GEN),
                binding: b,
                ..input()
            };
            assert_eq!(decide(&i), refresh(RefreshReason::Activated));
        }
        // Already activated: the annotation left behind is harmless.
        let i = LazyInput {
            activation: Some(GEN),
            binding: binding(Some("fp-now"), Some(GEN), true),
            ..input()
        };
        assert_eq!(decide(&i), LazyAction::Current);
        // A stale generation, or another policy's, grants nothing.
        for stale in [OLD_GEN, OTHER_POLICY_GEN, "garbage"] {
            let i = LazyInput {
                activation: Some(stale),
                binding: binding(Some("fp-now"), Some(OLD_GEN), false),
                ..input()
            };
            assert_eq!(decide(&i), LazyAction::Pending, "{stale}");
        }
    }

    /// The seed's four cases, default and Lazy, from the point of view of the template's
    /// binding after the claim has been decided. "Old" bindings reflect the previous policy
    /// (or the previous generation) and the template did not change since.
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
            ("Case 4 hit without a binding", None),
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
            assert_eq!(decide(&lazy), LazyAction::Pending, "{name} lazy");
            // ... until the template changes (its next write is newer than the policy).
            let changed = LazyInput {
                fingerprint: "fp-next",
                content_revision: written(NEWER),
                binding: b,
                ..input()
            };
            assert_eq!(
                decide(&changed),
                refresh(RefreshReason::TemplateNewer),
                "{name} lazy, then changed"
            );
        }
    }

    #[test]
    fn pending_after() {
        assert!(LazyAction::Pending.leaves_pending());
        assert!(LazyAction::RefreshContent.leaves_pending());
        for action in [
            LazyAction::Current,
            LazyAction::Record,
            LazyAction::Refresh(RefreshReason::TemplateNewer),
        ] {
            assert!(!action.leaves_pending(), "{action:?}");
        }
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
