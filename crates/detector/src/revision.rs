//! When things were written, in the API's order: a template's *content revision* and a
//! policy's *generation* and *selectors revisions*. Lazy activation and the choice between
//! policies that newly match a template compare them ([`flotilla_api::revision`] explains why
//! resourceVersions are comparable).
//!
//! **Template.** Its `metadata.resourceVersion` moves with every write, including the detector's
//! own (claim labels and annotations) and other writes that do not change its content (status,
//! `flotilla.io/activate`). The detector therefore records, with every write it makes to a
//! template, `flotilla.io/content-revision: <fingerprint>@<resourceVersion>`: the revision of the
//! write that produced the content it sees, taken before its own write (which carries that
//! resourceVersion as its precondition, so nothing can slip in between). The content revision
//! is then:
//!
//! - the recorded revision, while the template's fingerprint still equals the recorded one;
//! - otherwise (the content changed since, or the detector never wrote the template) the
//!   template's `metadata.resourceVersion`: the content changed at that write or, if other
//!   writers touched only non-content fields since, at an earlier one (templates are rarely
//!   written by anyone but their owner and flotilla, so this is exact in practice).
//!
//! **Policy.** The detector records, in the policy's status, the resourceVersion at which it
//! saw each new spec generation (`status.generationRevision`) and the one from which the
//! current selectors apply (`status.selectorsRevision`), with the status write's own
//! resourceVersion precondition. The policy is written by users (spec and metadata) and the
//! detector (status, the permanent-id label, which it writes only once the generation is
//! recorded), so the resourceVersion the detector sees with a new generation is the write that
//! produced it — unless a user changed only the policy's metadata before the detector recorded
//! the generation: then the generation is dated by that later write, the conservative side
//! (templates written in between wait for their next change).

use flotilla_api::policy::{GenerationRevision, PolicyStatus, PropagationSpec, SelectorsRevision};
use flotilla_api::revision::{Revision, latest};
use flotilla_api::well_known::{CONTENT_REVISION_ANNOTATION, LAZY_BASELINE_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::matching::{ClaimChange, PolicyView};

/// The `flotilla.io/content-revision` value for content `fingerprint` written at `revision`.
pub fn content_revision_value(fingerprint: &str, revision: Revision) -> String {
    format!("{fingerprint}@{revision}")
}

/// Parses a `flotilla.io/content-revision` value; revision `0` is [`Revision::ORIGIN`] (older
/// than any write).
pub fn parse_content_revision(value: &str) -> Option<(&str, Revision)> {
    let (fingerprint, revision) = value.rsplit_once('@')?;
    let revision = match revision {
        "0" => Revision::ORIGIN,
        other => Revision::parse(other)?,
    };
    (!fingerprint.is_empty()).then_some((fingerprint, revision))
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The write that produced the template's current content (`fingerprint`), see the module
/// docs. A legacy `flotilla.io/lazy-baseline` equal to the fingerprint (written by detectors
/// before content revisions, when a Lazy policy claimed a template that predated it) means
/// "older than the claim": [`Revision::ORIGIN`].
pub fn content_revision(object: &Value, fingerprint: &str) -> Option<Revision> {
    if let Some((recorded, revision)) =
        annotation(object, CONTENT_REVISION_ANNOTATION).and_then(parse_content_revision)
    {
        if recorded == fingerprint {
            return Some(revision);
        }
    } else if annotation(object, LAZY_BASELINE_ANNOTATION) == Some(fingerprint) {
        return Some(Revision::ORIGIN);
    }
    Revision::parse_opt(
        object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str),
    )
}

/// The revision from which a write of the template's content counts as a change under the
/// claim `change` gives to `claimant` (recorded as `flotilla.io/claim-revision`): the write
/// that moved the claim, so that a policy change that moves a claim never, by itself, changes
/// the template's propagation under a Lazy claimant (seed: "the resource is unbound ... bound to
/// the new Policy and not perform the refresh of the binding if new Policy is Lazy").
///
/// - hit: the claimant's selectors (a template written after them was claimed by its own
///   write);
/// - preemption: the later of the preemptor's and the previous claimant's generations (one of
///   them made the preemption possible);
/// - replacement of a claimant being deleted: its deletion (kept visible by its finalizer), or
///   the claimant's selectors if they came later;
/// - replacement of a claimant that no longer matches: the later of its selectors and the new
///   claimant's (a template whose labels changed was written after both, and counts);
/// - replacement of a claimant that vanished without trace (its finalizer removed by hand):
///   after anything the detector can date.
///
/// `previous` is the previous claimant's view, if it still exists (with the claim's uid);
/// `written` the template's content revision. `None` for a kept claim (the recorded value
/// stands) or when nothing can be dated.
pub fn claim_revision(
    change: &ClaimChange,
    claimant: &PolicyView,
    previous: Option<&PolicyView>,
    written: Option<Revision>,
) -> Option<Revision> {
    match change {
        ClaimChange::Kept => None,
        ClaimChange::Hit => claimant.selectors_revision,
        ClaimChange::Preempted { .. } => latest([claimant.revision, previous.and_then(|p| p.revision)]),
        ClaimChange::Replaced { .. } => match previous {
            Some(gone) if gone.deleting => latest([gone.deleted_at, claimant.selectors_revision]),
            Some(narrowed) => latest([narrowed.selectors_revision, claimant.selectors_revision]),
            None => latest([written, claimant.selectors_revision, claimant.revision]).map(Revision::next),
        },
    }
}

/// Parses a recorded `flotilla.io/claim-revision`.
pub fn recorded_claim_revision(object: &Value) -> Option<Revision> {
    annotation(object, flotilla_api::well_known::CLAIM_REVISION_ANNOTATION).and_then(Revision::parse)
}

/// The write that produced the policy's current spec generation: the recorded one while
/// `status.generationRevision` names the current generation, else the policy's current
/// resourceVersion (the detector has not recorded this generation yet, so nothing it does has
/// written the policy since).
pub fn generation_revision(metadata: &ObjectMeta, status: Option<&PolicyStatus>) -> Option<Revision> {
    match status.and_then(|s| s.generation_revision.as_ref()) {
        Some(recorded) if Some(recorded.generation) == metadata.generation => {
            Revision::parse(&recorded.resource_version)
        }
        _ => Revision::parse_opt(metadata.resource_version.as_deref()),
    }
}

/// The fingerprint of a policy's resource selectors (16 hex digits).
pub fn selectors_fingerprint(spec: &PropagationSpec) -> String {
    let value = serde_json::to_value(&spec.resource_selectors).unwrap_or_default();
    crate::fingerprint::fingerprint(&serde_json::json!({ "resourceSelectors": value }))
}

/// The write from which the policy's current selectors apply: the recorded one while
/// `status.selectorsRevision` is for the current selectors, else the current generation's
/// (the selectors changed in, or before, the first generation the detector saw them in).
pub fn selectors_revision(
    spec: &PropagationSpec,
    metadata: &ObjectMeta,
    status: Option<&PolicyStatus>,
) -> Option<Revision> {
    match status.and_then(|s| s.selectors_revision.as_ref()) {
        Some(recorded) if recorded.fingerprint == selectors_fingerprint(spec) => {
            Revision::parse(&recorded.resource_version)
        }
        _ => generation_revision(metadata, status),
    }
}

/// The revisions to record in the policy's status: `None` for each that is already recorded
/// for the current generation / selectors (or that cannot be told: no generation or
/// resourceVersion).
pub fn revisions_to_record(
    spec: &PropagationSpec,
    metadata: &ObjectMeta,
    status: Option<&PolicyStatus>,
) -> (Option<GenerationRevision>, Option<SelectorsRevision>) {
    let generation = metadata.generation.zip(generation_revision(metadata, status));
    let generation = generation
        .filter(|(g, _)| {
            status
                .and_then(|s| s.generation_revision.as_ref())
                .is_none_or(|r| r.generation != *g)
        })
        .map(|(generation, revision)| GenerationRevision {
            generation,
            resource_version: revision.to_string(),
        });
    let fingerprint = selectors_fingerprint(spec);
    let selectors = selectors_revision(spec, metadata, status)
        .filter(|_| {
            status
                .and_then(|s| s.selectors_revision.as_ref())
                .is_none_or(|r| r.fingerprint != fingerprint)
        })
        .map(|revision| SelectorsRevision {
            fingerprint,
            resource_version: revision.to_string(),
        });
    (generation, selectors)
}

#[cfg(test)]
mod tests {
    use flotilla_api::policy::ResourceSelector;
    use serde_json::json;

    use super::*;

    fn template(resource_version: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": "web", "resourceVersion": resource_version, "annotations": annotations}})
    }

    #[test]
    fn content_revision_values() {
        assert_eq!(content_revision_value("abc", Revision::from(42)), "abc@42");
        assert_eq!(
            parse_content_revision("abc@42"),
            Some(("abc", Revision::from(42)))
        );
        assert_eq!(parse_content_revision("abc@0"), Some(("abc", Revision::ORIGIN)));
        for bad in ["", "abc", "@42", "abc@", "abc@x", "abc@042", "abc@-1"] {
            assert_eq!(parse_content_revision(bad), None, "{bad}");
        }
    }

    #[test]
    fn content_revision_of_a_template() {
        // Never written by the detector: its own resourceVersion.
        assert_eq!(
            content_revision(&template("50", json!({})), "fp"),
            Some(Revision::from(50))
        );
        // Written by the detector since its content last changed: the recorded revision, not
        // the detector's own write.
        let recorded = template("60", json!({"flotilla.io/content-revision": "fp@50"}));
        assert_eq!(content_revision(&recorded, "fp"), Some(Revision::from(50)));
        // Changed since the record: its resourceVersion.
        assert_eq!(content_revision(&recorded, "fp2"), Some(Revision::from(60)));
        // A garbled record is ignored.
        let garbled = template("60", json!({"flotilla.io/content-revision": "nonsense"}));
        assert_eq!(content_revision(&garbled, "fp"), Some(Revision::from(60)));
        // Legacy baseline: older than anything while the content is unchanged.
        let legacy = template("60", json!({"flotilla.io/lazy-baseline": "fp"}));
        assert_eq!(content_revision(&legacy, "fp"), Some(Revision::ORIGIN));
        assert_eq!(content_revision(&legacy, "fp2"), Some(Revision::from(60)));
        // A content revision wins over a legacy baseline.
        let both = template(
            "60",
            json!({"flotilla.io/content-revision": "fp@55", "flotilla.io/lazy-baseline": "fp"}),
        );
        assert_eq!(content_revision(&both, "fp"), Some(Revision::from(55)));
        // No usable resourceVersion: unknown.
        assert_eq!(content_revision(&template("", json!({})), "fp"), None);
    }

    fn view(name: &str, revision: u64, selectors: u64) -> PolicyView {
        PolicyView {
            key: crate::keys::PolicyKey::propagation("default", name),
            uid: format!("uid-{name}"),
            generation: 1,
            spec: PropagationSpec::default(),
            valid: true,
            deleting: false,
            revision: Some(Revision::from(revision)),
            selectors_revision: Some(Revision::from(selectors)),
            deleted_at: None,
        }
    }

    #[test]
    fn claim_revisions() {
        let claimant = view("new", 50, 40);
        let from = claimant.key.clone();
        let written = Some(Revision::from(30));
        let at = |r: u64| Some(Revision::from(r));
        assert_eq!(claim_revision(&ClaimChange::Kept, &claimant, None, written), None);
        assert_eq!(
            claim_revision(&ClaimChange::Hit, &claimant, None, written),
            at(40)
        );
        // Preemption: the preemptor's generation, or the old claimant's if it came later.
        let old = view("old", 20, 10);
        let preempted = ClaimChange::Preempted { from: from.clone() };
        assert_eq!(claim_revision(&preempted, &claimant, Some(&old), written), at(50));
        assert_eq!(
            claim_revision(&preempted, &claimant, Some(&view("old", 60, 10)), written),
            at(60)
        );
        // Replacement of a deleting claimant: its deletion.
        let replaced = ClaimChange::Replaced { from };
        let mut deleting = view("old", 20, 10);
        deleting.deleting = true;
        deleting.deleted_at = at(70);
        assert_eq!(
            claim_revision(&replaced, &claimant, Some(&deleting), written),
            at(70)
        );
        // ... or the new claimant's selectors, if they came later.
        deleting.deleted_at = at(35);
        assert_eq!(
            claim_revision(&replaced, &claimant, Some(&deleting), written),
            at(40)
        );
        // Replacement of a claimant that no longer matches: its selector edit.
        assert_eq!(
            claim_revision(&replaced, &claimant, Some(&view("old", 90, 80)), written),
            at(80)
        );
        // A claimant gone without trace: after anything known.
        assert_eq!(claim_revision(&replaced, &claimant, None, at(99)), at(100));
        assert_eq!(claim_revision(&replaced, &claimant, None, written), at(51));
    }

    #[test]
    fn recorded_claim_revisions() {
        let t = template("5", json!({"flotilla.io/claim-revision": "42"}));
        assert_eq!(recorded_claim_revision(&t), Some(Revision::from(42)));
        assert_eq!(recorded_claim_revision(&template("5", json!({}))), None);
        let garbled = template("5", json!({"flotilla.io/claim-revision": "x"}));
        assert_eq!(recorded_claim_revision(&garbled), None);
    }

    fn spec(kind: &str) -> PropagationSpec {
        PropagationSpec {
            resource_selectors: vec![ResourceSelector {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn meta(generation: i64, resource_version: &str) -> ObjectMeta {
        ObjectMeta {
            generation: Some(generation),
            resource_version: Some(resource_version.into()),
            ..Default::default()
        }
    }

    #[test]
    fn selectors_fingerprint_depends_on_selectors_only() {
        let a = spec("Deployment");
        let mut b = a.clone();
        b.priority = Some(4);
        b.placement.cluster_affinity = Some(Default::default());
        assert_eq!(selectors_fingerprint(&a), selectors_fingerprint(&b));
        assert_ne!(
            selectors_fingerprint(&a),
            selectors_fingerprint(&spec("StatefulSet"))
        );
    }

    #[test]
    fn a_new_policy_is_dated_by_its_resource_version() {
        let s = spec("Deployment");
        let m = meta(1, "11");
        assert_eq!(generation_revision(&m, None), Some(Revision::from(11)));
        assert_eq!(selectors_revision(&s, &m, None), Some(Revision::from(11)));
        let (generation, selectors) = revisions_to_record(&s, &m, None);
        assert_eq!(
            generation,
            Some(GenerationRevision {
                generation: 1,
                resource_version: "11".into()
            })
        );
        assert_eq!(
            selectors,
            Some(SelectorsRevision {
                fingerprint: selectors_fingerprint(&s),
                resource_version: "11".into()
            })
        );
    }

    #[test]
    fn recorded_revisions_survive_later_writes() {
        let s = spec("Deployment");
        let status = PolicyStatus {
            generation_revision: Some(GenerationRevision {
                generation: 1,
                resource_version: "11".into(),
            }),
            selectors_revision: Some(SelectorsRevision {
                fingerprint: selectors_fingerprint(&s),
                resource_version: "11".into(),
            }),
            ..Default::default()
        };
        // The status write itself (and a later label) moved the resourceVersion on.
        let m = meta(1, "15");
        assert_eq!(generation_revision(&m, Some(&status)), Some(Revision::from(11)));
        assert_eq!(
            selectors_revision(&s, &m, Some(&status)),
            Some(Revision::from(11))
        );
        assert_eq!(revisions_to_record(&s, &m, Some(&status)), (None, None));

        // A placement edit: a new generation, the selectors keep their revision.
        let edited = meta(2, "20");
        assert_eq!(
            generation_revision(&edited, Some(&status)),
            Some(Revision::from(20))
        );
        assert_eq!(
            selectors_revision(&s, &edited, Some(&status)),
            Some(Revision::from(11))
        );
        let (generation, selectors) = revisions_to_record(&s, &edited, Some(&status));
        assert_eq!(
            generation.map(|g| (g.generation, g.resource_version)),
            Some((2, "20".into()))
        );
        assert_eq!(selectors, None);

        // A selector edit: both move.
        let other = spec("StatefulSet");
        assert_eq!(
            selectors_revision(&other, &edited, Some(&status)),
            Some(Revision::from(20))
        );
        let (_, selectors) = revisions_to_record(&other, &edited, Some(&status));
        assert_eq!(
            selectors.map(|s| (s.fingerprint, s.resource_version)),
            Some((selectors_fingerprint(&other), "20".into()))
        );
    }

    #[test]
    fn unknown_revisions_are_not_recorded() {
        let s = spec("Deployment");
        let m = ObjectMeta {
            generation: Some(1),
            resource_version: Some("not-a-number".into()),
            ..Default::default()
        };
        assert_eq!(generation_revision(&m, None), None);
        assert_eq!(revisions_to_record(&s, &m, None), (None, None));
    }
}
