//! Policies as the detector sees them ([`PolicyView`] built from either kind) and the status it
//! maintains on them: `Valid`, `observedGeneration`, the template counts and the time the
//! current resource selectors took effect.
//!
//! "When the selectors took effect" (lazy activation, seed Notes 1) is stored in the policy's
//! status as `selectorsObservedAt` together with `selectorsFingerprint`, the fingerprint of the
//! selectors it belongs to, so it survives restarts:
//!
//! - a policy seen for the first time (no `selectorsFingerprint`) took effect at its
//!   `creationTimestamp`;
//! - when the selectors' fingerprint differs from the recorded one, they took effect when the
//!   detector saw them.
//!
//! Approximation: a selector edit made while the detector is down is dated when the detector
//! comes back. A template created in between is then treated as older than the edit (its Lazy
//! propagation waits for its next change) — the conservative side of the criterion.

use flotilla_api::conditions;
use flotilla_api::policy::{ClusterPropagationPolicy, PolicyStatus, PropagationPolicy, PropagationSpec};
use flotilla_api::well_known::{conditions::VALID, reasons};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use crate::keys::PolicyKey;
use crate::matching::PolicyView;

/// The fingerprint of a policy's resource selectors (16 hex digits).
pub fn selectors_fingerprint(spec: &PropagationSpec) -> String {
    let value = serde_json::to_value(&spec.resource_selectors).unwrap_or_default();
    crate::fingerprint::fingerprint(&serde_json::json!({ "resourceSelectors": value }))
}

/// When the policy's current selectors took effect, from its status, or from `observed` (the
/// `(selectors fingerprint, time)` this detector process recorded before its status write
/// landed). `None` when unknown.
pub fn selectors_since(
    spec: &PropagationSpec,
    metadata: &ObjectMeta,
    status: Option<&PolicyStatus>,
    observed: Option<&(String, Timestamp)>,
) -> Option<Timestamp> {
    let current = selectors_fingerprint(spec);
    let recorded = status.and_then(|s| s.selectors_fingerprint.as_deref());
    if recorded == Some(current.as_str()) {
        return status.and_then(|s| s.selectors_observed_at.as_ref()).map(|t| t.0);
    }
    if let Some((fingerprint, at)) = observed
        && *fingerprint == current
    {
        return Some(*at);
    }
    if recorded.is_none() {
        return metadata.creation_timestamp.as_ref().map(|t| t.0);
    }
    None
}

/// The `(selectors fingerprint, time)` to record when the status does not yet describe the
/// current selectors: the creation time for a policy never seen before, `now` for an edit.
pub fn selectors_observation(
    spec: &PropagationSpec,
    metadata: &ObjectMeta,
    status: Option<&PolicyStatus>,
    now: Timestamp,
) -> Option<(String, Timestamp)> {
    let current = selectors_fingerprint(spec);
    let recorded = status.and_then(|s| s.selectors_fingerprint.as_deref());
    match recorded {
        Some(fingerprint) if fingerprint == current => None,
        Some(_) => Some((current, now)),
        None => Some((
            current,
            metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now),
        )),
    }
}

fn view(
    key: PolicyKey,
    metadata: &ObjectMeta,
    spec: &PropagationSpec,
    status: Option<&PolicyStatus>,
    valid: bool,
    observed: Option<&(String, Timestamp)>,
) -> PolicyView {
    PolicyView {
        key,
        uid: metadata.uid.clone().unwrap_or_default(),
        generation: metadata.generation.unwrap_or(0),
        spec: spec.clone(),
        valid,
        deleting: metadata.deletion_timestamp.is_some(),
        selectors_since: selectors_since(spec, metadata, status, observed),
    }
}

/// The view of a PropagationPolicy.
pub fn propagation_policy_view(
    policy: &PropagationPolicy,
    observed: Option<&(String, Timestamp)>,
) -> PolicyView {
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
        observed,
    )
}

/// The view of a ClusterPropagationPolicy.
pub fn cluster_propagation_policy_view(
    policy: &ClusterPropagationPolicy,
    observed: Option<&(String, Timestamp)>,
) -> PolicyView {
    let key = PolicyKey::cluster(policy.metadata.name.clone().unwrap_or_default());
    view(
        key,
        &policy.metadata,
        &policy.spec.0,
        policy.status.as_ref(),
        policy.validate().is_ok(),
        observed,
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
/// every violation), `observation` the selectors observation to record (see
/// [`selectors_observation`]).
pub fn desired_status(
    current: Option<&PolicyStatus>,
    generation: Option<i64>,
    violations: Option<String>,
    counts: Counts,
    observation: Option<&(String, Timestamp)>,
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
    if let Some((fingerprint, at)) = observation {
        status.selectors_fingerprint = Some(fingerprint.clone());
        status.selectors_observed_at = Some(Time(*at));
    }
    status
}

#[cfg(test)]
mod tests {
    use flotilla_api::policy::ResourceSelector;

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

    fn meta(created: i64) -> ObjectMeta {
        ObjectMeta {
            creation_timestamp: Some(Time(ts(created))),
            uid: Some("u".into()),
            generation: Some(3),
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
    fn since_first_sight_is_creation() {
        let s = spec("Deployment");
        assert_eq!(selectors_since(&s, &meta(100), None, None), Some(ts(100)));
        assert_eq!(
            selectors_observation(&s, &meta(100), None, ts(500)),
            Some((selectors_fingerprint(&s), ts(100)))
        );
        let no_creation = ObjectMeta::default();
        assert_eq!(
            selectors_observation(&s, &no_creation, None, ts(500)),
            Some((selectors_fingerprint(&s), ts(500)))
        );
    }

    #[test]
    fn since_recorded_and_edited() {
        let s = spec("Deployment");
        let recorded = PolicyStatus {
            selectors_fingerprint: Some(selectors_fingerprint(&s)),
            selectors_observed_at: Some(Time(ts(200))),
            ..Default::default()
        };
        assert_eq!(
            selectors_since(&s, &meta(100), Some(&recorded), None),
            Some(ts(200))
        );
        assert_eq!(
            selectors_observation(&s, &meta(100), Some(&recorded), ts(500)),
            None
        );
        // Edited selectors: unknown until observed, then the observation time.
        let edited = spec("StatefulSet");
        assert_eq!(selectors_since(&edited, &meta(100), Some(&recorded), None), None);
        let observation = selectors_observation(&edited, &meta(100), Some(&recorded), ts(500));
        assert_eq!(observation, Some((selectors_fingerprint(&edited), ts(500))));
        assert_eq!(
            selectors_since(&edited, &meta(100), Some(&recorded), observation.as_ref()),
            Some(ts(500))
        );
        // An observation of other selectors does not apply.
        let stale = (selectors_fingerprint(&s), ts(900));
        assert_eq!(
            selectors_since(&edited, &meta(100), Some(&recorded), Some(&stale)),
            None
        );
    }

    #[test]
    fn views_validate() {
        let mut pp: PropagationPolicy = PropagationPolicy::new("p", spec("Deployment"));
        pp.metadata.namespace = Some("default".into());
        pp.metadata = ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..meta(100)
        };
        let view = propagation_policy_view(&pp, None);
        assert!(view.valid);
        assert_eq!(view.key, PolicyKey::propagation("default", "p"));
        assert_eq!(view.generation_ref(), "u/3");
        assert_eq!(view.selectors_since, Some(ts(100)));
        pp.spec.resource_selectors.clear();
        assert!(!propagation_policy_view(&pp, None).valid);
        let mut cpp = ClusterPropagationPolicy::new("c", spec("Deployment").into());
        cpp.metadata.deletion_timestamp = Some(Time(ts(1)));
        let view = cluster_propagation_policy_view(&cpp, None);
        assert!(view.deleting);
        assert_eq!(view.key, PolicyKey::cluster("c"));
    }

    #[test]
    fn status() {
        let observation = ("fp".to_string(), ts(100));
        let status = desired_status(
            None,
            Some(2),
            None,
            Counts { bound: 3, pending: 1 },
            Some(&observation),
            ts(1000),
        );
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(status.bound_templates, Some(3));
        assert_eq!(status.pending_activation_templates, Some(1));
        assert_eq!(status.selectors_fingerprint.as_deref(), Some("fp"));
        assert_eq!(status.selectors_observed_at, Some(Time(ts(100))));
        let valid = &status.conditions[0];
        assert_eq!((valid.type_.as_str(), valid.status.as_str()), ("Valid", "True"));
        assert_eq!(valid.observed_generation, Some(2));
        // Recomputing with the same inputs changes nothing (no write).
        let again = desired_status(
            Some(&status),
            Some(2),
            None,
            Counts { bound: 3, pending: 1 },
            None,
            ts(2000),
        );
        assert_eq!(again, status);
        let invalid = desired_status(
            Some(&status),
            Some(3),
            Some("spec.resourceSelectors: must select at least one resource".into()),
            Counts::default(),
            None,
            ts(3000),
        );
        let valid = &invalid.conditions[0];
        assert_eq!(valid.status, "False");
        assert_eq!(valid.reason, "InvalidPolicy");
        assert!(valid.message.contains("spec.resourceSelectors"));
        assert_eq!(invalid.selectors_fingerprint.as_deref(), Some("fp"), "kept");
    }
}
