//! Policies as the detector sees them ([`PolicyView`] built from either kind) and the status it
//! maintains on them: `Valid`, `observedGeneration`, the template counts, and the revisions of
//! the current generation and selectors ([`crate::revision`]).

use flotilla_api::conditions;
use flotilla_api::policy::{
    ClusterPropagationPolicy, GenerationRevision, PolicyStatus, PropagationPolicy, PropagationSpec,
    SelectorsRevision,
};
use flotilla_api::revision::Revision;
use flotilla_api::well_known::{conditions::VALID, reasons};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use crate::keys::PolicyKey;
use crate::matching::PolicyView;
use crate::revision::{generation_revision, selectors_revision};

fn view(
    key: PolicyKey,
    metadata: &ObjectMeta,
    spec: &PropagationSpec,
    status: Option<&PolicyStatus>,
    valid: bool,
) -> PolicyView {
    PolicyView {
        key,
        uid: metadata.uid.clone().unwrap_or_default(),
        generation: metadata.generation.unwrap_or(0),
        spec: spec.clone(),
        valid,
        deleting: metadata.deletion_timestamp.is_some(),
        revision: generation_revision(metadata, status),
        selectors_revision: selectors_revision(spec, metadata, status),
        // Nothing writes a deleting policy but the removal of its finalizer.
        deleted_at: metadata
            .deletion_timestamp
            .as_ref()
            .and_then(|_| Revision::parse_opt(metadata.resource_version.as_deref())),
    }
}

/// The view of a PropagationPolicy.
pub fn propagation_policy_view(policy: &PropagationPolicy) -> PolicyView {
    let key = PolicyKey::propagation(
        policy.metadata.namespace.clone().unwrap_or_default(),
        policy.metadata.name.clone().unwrap_or_default(),
    );
    view(
        key,
        &policy.metadata,
        &policy.spec,
        policy.status.as_ref(),
        policy.validate().is_ok(),
    )
}

/// The view of a ClusterPropagationPolicy.
pub fn cluster_propagation_policy_view(policy: &ClusterPropagationPolicy) -> PolicyView {
    let key = PolicyKey::cluster(policy.metadata.name.clone().unwrap_or_default());
    view(
        key,
        &policy.metadata,
        &policy.spec.0,
        policy.status.as_ref(),
        policy.validate().is_ok(),
    )
}

/// Template counts of one policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Templates the policy claims.
    pub bound: i64,
    /// Claimed templates whose binding does not reflect the policy's current generation.
    pub pending: i64,
}

/// The status the detector wants on a policy. `violations` is the validation result (message of
/// every violation), `revisions` the generation and selectors revisions to record (see
/// [`crate::revision::revisions_to_record`]; `None` keeps what is recorded).
pub fn desired_status(
    current: Option<&PolicyStatus>,
    generation: Option<i64>,
    violations: Option<String>,
    counts: Counts,
    revisions: (Option<GenerationRevision>, Option<SelectorsRevision>),
    now: Timestamp,
) -> PolicyStatus {
    let mut status = current.cloned().unwrap_or_default();
    status.observed_generation = generation;
    match violations {
        Some(message) => conditions::set(
            &mut status.conditions,
            VALID,
            false,
            reasons::INVALID_POLICY,
            message,
            generation,
            now,
        ),
        None => conditions::set(
            &mut status.conditions,
            VALID,
            true,
            reasons::VALID_POLICY,
            "the policy passed validation",
            generation,
            now,
        ),
    };
    status.bound_templates = Some(counts.bound);
    status.pending_activation_templates = Some(counts.pending);
    let (generation_revision, selectors_revision) = revisions;
    if generation_revision.is_some() {
        status.generation_revision = generation_revision;
    }
    if selectors_revision.is_some() {
        status.selectors_revision = selectors_revision;
    }
    status
}

/// What a policy's reconcile acts on, hashed: the policy without `status`,
/// `metadata.resourceVersion` and `metadata.managedFields`. A policy event that leaves it equal
/// is a status write (the detector's own: the counts, refreshed while templates are being
/// claimed) and does not queue the policy again; otherwise each count refresh would trigger
/// another count of every cached template and, the counts having moved meanwhile, another
/// status write, round after round while templates are processed. The view is rebuilt from
/// every event regardless (it reads the recorded revisions from the status).
pub fn watch_signature(metadata: &ObjectMeta, spec: &PropagationSpec) -> u64 {
    let metadata = ObjectMeta {
        resource_version: None,
        managed_fields: None,
        ..metadata.clone()
    };
    crate::binding::signature_of(&(&metadata, spec))
}

#[cfg(test)]
mod tests {
    use flotilla_api::policy::ResourceSelector;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn ts(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
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

    fn meta() -> ObjectMeta {
        ObjectMeta {
            uid: Some("u".into()),
            generation: Some(3),
            resource_version: Some("40".into()),
            ..Default::default()
        }
    }

    #[test]
    fn views_validate() {
        let mut pp: PropagationPolicy = PropagationPolicy::new("p", spec("Deployment"));
        pp.metadata = ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..meta()
        };
        let view = propagation_policy_view(&pp);
        assert!(view.valid);
        assert_eq!(view.key, PolicyKey::propagation("default", "p"));
        assert_eq!(view.generation_ref(), "u/3");
        assert_eq!(view.revision, Some(Revision::from(40)));
        assert_eq!(view.selectors_revision, Some(Revision::from(40)));
        assert_eq!(view.deleted_at, None);
        pp.spec.resource_selectors.clear();
        assert!(!propagation_policy_view(&pp).valid);
        let mut cpp = ClusterPropagationPolicy::new("c", spec("Deployment").into());
        cpp.metadata.deletion_timestamp = Some(Time(ts(1)));
        cpp.metadata.resource_version = Some("77".into());
        let view = cluster_propagation_policy_view(&cpp);
        assert!(view.deleting);
        assert_eq!(view.deleted_at, Some(Revision::from(77)));
        assert_eq!(view.key, PolicyKey::cluster("c"));
    }

    #[test]
    fn watch_signature_ignores_status_and_resource_version_only() {
        let base = watch_signature(&meta(), &spec("Deployment"));
        // A status write moves the resourceVersion only.
        let mut written = meta();
        written.resource_version = Some("41".into());
        assert_eq!(watch_signature(&written, &spec("Deployment")), base);
        // Everything else the reconcile reads moves it.
        let mut generation = meta();
        generation.generation = Some(4);
        let mut labelled = meta();
        labelled.labels = Some([("k".to_owned(), "v".to_owned())].into());
        let mut finalized = meta();
        finalized.finalizers = Some(vec!["karmada.io/propagation-policy-controller".into()]);
        let mut deleting = meta();
        deleting.deletion_timestamp = Some(Time(ts(1)));
        let mut recreated = meta();
        recreated.uid = Some("u2".into());
        for changed in [generation, labelled, finalized, deleting, recreated] {
            assert_ne!(
                watch_signature(&changed, &spec("Deployment")),
                base,
                "{changed:?}"
            );
        }
        assert_ne!(watch_signature(&meta(), &spec("StatefulSet")), base);
    }

    #[test]
    fn status() {
        let revisions = crate::revision::revisions_to_record(&spec("Deployment"), &meta(), None);
        let status = desired_status(
            None,
            Some(3),
            None,
            Counts { bound: 3, pending: 1 },
            revisions.clone(),
            ts(1000),
        );
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.bound_templates, Some(3));
        assert_eq!(status.pending_activation_templates, Some(1));
        assert_eq!(status.generation_revision, revisions.0);
        assert_eq!(
            status
                .selectors_revision
                .as_ref()
                .map(|r| r.resource_version.as_str()),
            Some("40")
        );
        let valid = &status.conditions[0];
        assert_eq!((valid.type_.as_str(), valid.status.as_str()), ("Valid", "True"));
        assert_eq!(valid.observed_generation, Some(3));
        // Recomputing with the same inputs changes nothing (no write).
        let again = desired_status(
            Some(&status),
            Some(3),
            None,
            Counts { bound: 3, pending: 1 },
            (None, None),
            ts(2000),
        );
        assert_eq!(again, status);
        let invalid = desired_status(
            Some(&status),
            Some(4),
            Some("spec.resourceSelectors: must select at least one resource".into()),
            Counts::default(),
            (None, None),
            ts(3000),
        );
        let valid = &invalid.conditions[0];
        assert_eq!(valid.status, "False");
        assert_eq!(valid.reason, "InvalidPolicy");
        assert!(valid.message.contains("spec.resourceSelectors"));
        assert_eq!(invalid.generation_revision, status.generation_revision, "kept");
    }
}
