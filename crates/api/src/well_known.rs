//! Well-known names: the labels, annotations, namespaces, condition types and reasons through
//! which components cooperate via the control-plane API.
//!
//! Karmada's names are used wherever Karmada has one, so tools written for Karmada keep working;
//! flotilla's own additions live under the `flotilla.io/` prefix.

// ---------------------------------------------------------------------------------------------
// Claims: written by the detector on resource templates (and copied onto bindings).
// ---------------------------------------------------------------------------------------------

/// Annotation on a template: name of the PropagationPolicy that claims it.
pub const PROPAGATION_POLICY_NAME_ANNOTATION: &str = "propagationpolicy.karmada.io/name";
/// Annotation on a template: namespace of the PropagationPolicy that claims it.
pub const PROPAGATION_POLICY_NAMESPACE_ANNOTATION: &str = "propagationpolicy.karmada.io/namespace";
/// Label on a PropagationPolicy and on the templates and bindings it claims: the policy's
/// permanent id.
pub const PROPAGATION_POLICY_PERMANENT_ID_LABEL: &str = "propagationpolicy.karmada.io/permanent-id";
/// Annotation on a template: name of the ClusterPropagationPolicy that claims it.
pub const CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION: &str = "clusterpropagationpolicy.karmada.io/name";
/// Label on a ClusterPropagationPolicy and on the templates and bindings it claims: the
/// policy's permanent id.
pub const CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL: &str =
    "clusterpropagationpolicy.karmada.io/permanent-id";

// ---------------------------------------------------------------------------------------------
// Bindings, Works and member objects.
// ---------------------------------------------------------------------------------------------

/// Label on a ResourceBinding (and on its Works): the binding's permanent id.
pub const RESOURCE_BINDING_PERMANENT_ID_LABEL: &str = "resourcebinding.karmada.io/permanent-id";
/// Label on a ClusterResourceBinding (and on its Works): the binding's permanent id.
pub const CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: &str =
    "clusterresourcebinding.karmada.io/permanent-id";
/// Annotation on a Work: namespace of the ResourceBinding it was made from.
pub const RESOURCE_BINDING_NAMESPACE_ANNOTATION: &str = "resourcebinding.karmada.io/namespace";
/// Annotation on a Work: name of the ResourceBinding it was made from.
pub const RESOURCE_BINDING_NAME_ANNOTATION: &str = "resourcebinding.karmada.io/name";
/// Annotation on a Work: name of the ClusterResourceBinding it was made from.
pub const CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION: &str = "clusterresourcebinding.karmada.io/name";
/// Label on a member object: permanent id of the Work that applied it.
pub const WORK_PERMANENT_ID_LABEL: &str = "work.karmada.io/permanent-id";
/// Annotation on a member object: namespace of the Work that applied it.
pub const WORK_NAMESPACE_ANNOTATION: &str = "work.karmada.io/namespace";
/// Annotation on a member object: name of the Work that applied it.
pub const WORK_NAME_ANNOTATION: &str = "work.karmada.io/name";
/// Annotation on a manifest: the conflict resolution execution applies it with
/// (`overwrite` or `abort`).
pub const CONFLICT_RESOLUTION_ANNOTATION: &str = "work.karmada.io/conflict-resolution";
/// Label on member objects flotilla manages: `"true"`.
pub const MANAGED_LABEL: &str = "karmada.io/managed";
/// Annotation on a member object: UID of its resource template.
pub const RESOURCE_TEMPLATE_UID_ANNOTATION: &str = "resourcetemplate.karmada.io/uid";
/// Annotation on a member object: generation of its resource template.
pub const RESOURCE_TEMPLATE_GENERATION_ANNOTATION: &str = "resourcetemplate.karmada.io/generation";
/// Annotation on an independent binding: the dependencies its template references, as JSON
/// (Karmada compatibility); the dependency distributor reads it to clean up removed references.
pub const DEPENDENCIES_ANNOTATION: &str = "resourcebinding.karmada.io/dependencies";
/// Label on a Namespace: `"true"` keeps it from being propagated to member clusters.
pub const NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL: &str = "namespace.karmada.io/skip-auto-propagation";

// ---------------------------------------------------------------------------------------------
// flotilla's own domain.
// ---------------------------------------------------------------------------------------------

/// The label/annotation domain that is flotilla's own.
pub const FLOTILLA_DOMAIN: &str = "flotilla.io";
/// Annotation on a template: `on`, `force` or `off` overrides execution's `--apply-once-only`
/// for this template.
pub const APPLY_ONCE_ONLY_ANNOTATION: &str = "flotilla.io/apply-once-only";
/// Annotation on a member object: the desired revision execution last applied,
/// `<work generation>/<manifest hash>`.
pub const DESIRED_REVISION_ANNOTATION: &str = "flotilla.io/desired-revision";
/// Annotation on any object: the W3C `traceparent` of the change that last wrote it, so work
/// picked up from a watch can link to the trace that caused it.
pub const TRACE_PARENT_ANNOTATION: &str = "flotilla.io/traceparent";
/// Annotation on a binding: the fingerprint of its template at the binding's last refresh
/// (lazy activation; see `docs/architecture.md`). Written by the detector.
pub const TEMPLATE_FINGERPRINT_ANNOTATION: &str = "flotilla.io/template-fingerprint";
/// Annotation on a binding: `<policy uid>/<generation>` whose propagation fields the binding's
/// spec reflects. Written by the detector.
pub const POLICY_GENERATION_ANNOTATION: &str = "flotilla.io/policy-generation";
/// Annotation on a template: `<fingerprint>@<resourceVersion>`, the write that produced the
/// template's current content as far as the detector knows (its own writes to the template do
/// not change the content, so they must not count as content writes). Written by the detector
/// together with every write it makes to the template; see `docs/lazy-activation.md`.
pub const CONTENT_REVISION_ANNOTATION: &str = "flotilla.io/content-revision";
/// Annotation on a template: the resourceVersion from which a content write counts as a change
/// under its current claim (the write that moved the claim to its policy: the previous
/// claimant's deletion or selector edit, a preemptor's generation, or the claimant's
/// selectors). Written by the detector with every claim change; see `docs/lazy-activation.md`.
pub const CLAIM_REVISION_ANNOTATION: &str = "flotilla.io/claim-revision";
/// Finalizer on bindings (Karmada's): execution deletes the binding's Works (and through them
/// its member objects) before the binding goes. The detector and the dependency distributor
/// create bindings with it already set, which saves execution a metadata write per binding;
/// execution adds it to bindings created without it (by older versions or by hand).
pub const BINDING_CONTROLLER_FINALIZER: &str = "karmada.io/binding-controller";
/// Finalizer the detector keeps on PropagationPolicies (Karmada's): the policy's templates are
/// released (or handed to another policy) before it goes, and its deletion stays visible, with
/// its resourceVersion, until they are.
pub const PROPAGATION_POLICY_FINALIZER: &str = "karmada.io/propagation-policy-controller";
/// Finalizer the detector keeps on ClusterPropagationPolicies (Karmada's).
pub const CLUSTER_PROPAGATION_POLICY_FINALIZER: &str = "karmada.io/cluster-propagation-policy-controller";
/// Annotation on a template written by detectors before `flotilla.io/content-revision`: its
/// fingerprint when a Lazy policy claimed it without creating its binding. Still read (a
/// template whose content equals it is older than the claim) and removed on the detector's next
/// write of the template.
pub const LAZY_BASELINE_ANNOTATION: &str = "flotilla.io/lazy-baseline";
/// Annotation on a template: `<policy uid>/<generation>` the user allows the detector to
/// activate for this template even though it did not change (`flotilla activate`).
pub const ACTIVATE_ANNOTATION: &str = "flotilla.io/activate";
/// Annotation on a binding: the override policy generations in effect for it, as a JSON list
/// of [`crate::overrides::OverrideSnapshot`] (each with its spec). Written by the detector
/// (eager policies at once, Lazy ones per lazy activation); execution renders the binding's
/// Works with exactly these. See `docs/overrides.md`.
pub const OVERRIDES_ANNOTATION: &str = "flotilla.io/overrides";
/// Annotation on a template: `<policy uid>/<generation>,...`, override policy generations the
/// user allows the detector to put in effect for this template although it did not change
/// (`flotilla activate`).
pub const ACTIVATE_OVERRIDES_ANNOTATION: &str = "flotilla.io/activate-overrides";
/// Field manager flotilla's services use for their writes.
pub const FIELD_MANAGER: &str = "flotilla";

/// Annotation on a binding: `Lazy` while the policy that claims it has
/// `activationPreference: Lazy` (absent otherwise). Failover does not re-place such bindings
/// (`docs/failover.md`). Written by the detector with the claim.
pub const ACTIVATION_PREFERENCE_ANNOTATION: &str = "flotilla.io/activation-preference";

// ---------------------------------------------------------------------------------------------
// Failover (Karmada's names).
// ---------------------------------------------------------------------------------------------

/// Taint key on a Cluster whose `Ready` condition is `False` (execution).
pub const NOT_READY_TAINT_KEY: &str = "cluster.karmada.io/not-ready";
/// Taint key on a Cluster whose `Ready` condition is `Unknown` (execution).
pub const UNREACHABLE_TAINT_KEY: &str = "cluster.karmada.io/unreachable";
/// Taint effect: no new placement on the cluster.
pub const TAINT_EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Taint effect: no new placement, and placements that do not tolerate it are evicted.
pub const TAINT_EFFECT_NO_EXECUTE: &str = "NoExecute";
/// Eviction task reason: the cluster has a `NoExecute` taint the placement does not tolerate
/// (or no longer tolerates: its `tolerationSeconds` ran out).
pub const EVICTION_REASON_TAINT_UNTOLERATED: &str = "TaintUntolerated";
/// Eviction task reason: the application was unhealthy in the cluster for longer than
/// `failover.application.decisionConditions.tolerationSeconds`.
pub const EVICTION_REASON_APPLICATION_FAILURE: &str = "ApplicationFailure";
/// Eviction task producer of cluster failover (Karmada's taint manager).
pub const EVICTION_PRODUCER_TAINT_MANAGER: &str = "TaintManager";
/// Eviction task producer of application failover for ResourceBindings (Karmada's name).
pub const EVICTION_PRODUCER_RB_APPLICATION_FAILOVER: &str =
    "resource-binding-application-failover-controller";
/// Eviction task producer of application failover for ClusterResourceBindings (Karmada's
/// name).
pub const EVICTION_PRODUCER_CRB_APPLICATION_FAILOVER: &str =
    "cluster-resource-binding-application-failover-controller";

// ---------------------------------------------------------------------------------------------
// Namespaces.
// ---------------------------------------------------------------------------------------------

/// Prefix of the per-cluster namespace that holds a cluster's Works: `karmada-es-<cluster>`.
pub const EXECUTION_NAMESPACE_PREFIX: &str = "karmada-es-";
/// Namespace of member cluster credentials Secrets.
pub const CLUSTER_SECRET_NAMESPACE: &str = "karmada-cluster";
/// Namespace of flotilla's own objects (leases, configuration).
pub const SYSTEM_NAMESPACE: &str = "flotilla-system";
/// Scheduler name used when a policy names none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The execution namespace of a member cluster.
pub fn execution_namespace(cluster: &str) -> String {
    format!("{EXECUTION_NAMESPACE_PREFIX}{cluster}")
}

/// The member cluster an execution namespace belongs to, if it is one.
pub fn cluster_of_execution_namespace(namespace: &str) -> Option<&str> {
    namespace
        .strip_prefix(EXECUTION_NAMESPACE_PREFIX)
        .filter(|c| !c.is_empty())
}

/// Whether templates in `namespace` are never propagated: `kube-*`, `karmada-*`, and flotilla's
/// own system namespace.
pub fn is_reserved_namespace(namespace: &str) -> bool {
    namespace.starts_with("kube-") || namespace.starts_with("karmada-") || namespace == SYSTEM_NAMESPACE
}

/// Whether a label or annotation key belongs to Karmada's or flotilla's own domains. Changes to
/// such keys are not changes of a template (lazy activation) and are not propagated as content.
///
/// [`APPLY_ONCE_ONLY_ANNOTATION`] is the exception: users write it on templates and execution
/// propagates it in the Work manifest, so changing it is a template change (it must reach the
/// binding and the Work at once, not at the next unrelated edit).
pub fn is_system_metadata_key(key: &str) -> bool {
    if key == APPLY_ONCE_ONLY_ANNOTATION {
        return false;
    }
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    prefix == "karmada.io"
        || prefix.ends_with(".karmada.io")
        || prefix == FLOTILLA_DOMAIN
        || prefix.ends_with(".flotilla.io")
}

// ---------------------------------------------------------------------------------------------
// Conditions and reasons.
// ---------------------------------------------------------------------------------------------

/// Condition types.
pub mod conditions {
    /// Binding: the scheduler produced a result (scheduler).
    pub const SCHEDULED: &str = "Scheduled";
    /// Binding: every Work is applied in its cluster (execution).
    pub const FULLY_APPLIED: &str = "FullyApplied";
    /// Binding: the binding reflects the current generation of its policy (detector).
    pub const POLICY_ACTIVATED: &str = "PolicyActivated";
    /// Binding: every override rule in effect applied in every cluster (execution).
    pub const OVERRIDES_APPLIED: &str = "OverridesApplied";
    /// Binding: the override policies in effect are their current generations (detector).
    pub const OVERRIDES_ACTIVATED: &str = "OverridesActivated";
    /// Work: the manifests are applied to the member (execution).
    pub const APPLIED: &str = "Applied";
    /// Work: whether dispatching is going on or suspended (execution).
    pub const DISPATCHING: &str = "Dispatching";
    /// Cluster: the member's API server answers (execution).
    pub const READY: &str = "Ready";
    /// Policy: the policy passed semantic validation (detector).
    pub const VALID: &str = "Valid";
}

/// Condition reasons.
pub mod reasons {
    /// Generic success.
    pub const SUCCESS: &str = "Success";
    /// Scheduling found no cluster that fits.
    pub const NO_CLUSTER_FIT: &str = "NoClusterFit";
    /// Scheduling constraints (spread, strategy) cannot be met.
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// Scheduling failed with an error.
    pub const SCHEDULER_ERROR: &str = "SchedulerError";
    /// Work dispatching is suspended.
    pub const SUSPEND_DISPATCHING: &str = "SuspendDispatching";
    /// Work dispatching is going on.
    pub const DISPATCHING: &str = "Dispatching";
    /// The message of the `Dispatching=False` condition of a suspended Work.
    pub const SUSPEND_DISPATCHING_MESSAGE: &str = "Work dispatching is in a suspended state.";
    /// A lazy policy changed; the binding still reflects an older generation.
    pub const LAZY_ACTIVATION_PENDING: &str = "LazyActivationPending";
    /// The binding reflects the current policy generation.
    pub const POLICY_ACTIVATED: &str = "PolicyActivated";
    /// A policy failed semantic validation.
    pub const INVALID_POLICY: &str = "InvalidPolicy";
    /// A policy passed semantic validation.
    pub const VALID_POLICY: &str = "ValidPolicy";
    /// Applying a manifest failed.
    pub const APPLY_FAILED: &str = "AppliedFailed";
    /// A manifest was applied.
    pub const APPLY_SUCCESSFUL: &str = "AppliedSuccessful";
    /// The member object exists and flotilla did not create it; conflictResolution is Abort.
    pub const CONFLICT: &str = "Conflict";
    /// The member cluster cannot be reached.
    pub const CLUSTER_UNREACHABLE: &str = "ClusterUnreachable";
    /// Every override rule in effect applied (Karmada's event reason).
    pub const APPLY_OVERRIDE_POLICY_SUCCEED: &str = "ApplyOverridePolicySucceed";
    /// An override rule failed in a cluster and was skipped there (Karmada's event reason).
    pub const APPLY_OVERRIDE_POLICY_FAILED: &str = "ApplyOverridePolicyFailed";
    /// The override policies in effect are their current generations.
    pub const OVERRIDES_ACTIVATED: &str = "OverridesActivated";
}

/// Event reasons (Karmada's where Karmada has one).
pub mod events {
    /// On a Cluster: its taints changed (readiness taints or ClusterTaintPolicies).
    pub const TAINT_CLUSTER_SUCCEED: &str = "TaintClusterSucceed";
    /// On a Cluster: its taints could not be written (Karmada's).
    pub const TAINT_CLUSTER_FAILED: &str = "TaintClusterFailed";
    /// On a binding and its template: the binding was evicted from a cluster (an eviction task
    /// was created; flotilla's: Karmada records nothing then).
    pub const EVICT_WORKLOAD_FROM_CLUSTER_STARTED: &str = "EvictWorkloadFromClusterStarted";
    /// On a binding and its template: an eviction task ended, the old copy goes (Karmada's
    /// graceful eviction controller records it then).
    pub const EVICT_WORKLOAD_FROM_CLUSTER_SUCCEED: &str = "EvictWorkloadFromClusterSucceed";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_namespaces() {
        for ns in [
            "kube-system",
            "kube-public",
            "karmada-system",
            "karmada-es-member1",
            "flotilla-system",
        ] {
            assert!(is_reserved_namespace(ns), "{ns}");
        }
        for ns in ["default", "team-a", "kubeflow", "karmada"] {
            assert!(!is_reserved_namespace(ns), "{ns}");
        }
    }

    #[test]
    fn execution_namespaces() {
        assert_eq!(execution_namespace("member1"), "karmada-es-member1");
        assert_eq!(
            cluster_of_execution_namespace("karmada-es-member1"),
            Some("member1")
        );
        assert_eq!(cluster_of_execution_namespace("karmada-es-"), None);
        assert_eq!(cluster_of_execution_namespace("default"), None);
    }

    #[test]
    fn system_metadata_keys() {
        for key in [
            "propagationpolicy.karmada.io/name",
            "karmada.io/managed",
            "flotilla.io/traceparent",
            "x.flotilla.io/y",
        ] {
            assert!(is_system_metadata_key(key), "{key}");
        }
        for key in [
            "app",
            "refresh-time",
            "example.com/karmada.io",
            "notkarmada.io/x",
            "kubernetes.io/x",
            // User-authored and propagated as content.
            APPLY_ONCE_ONLY_ANNOTATION,
        ] {
            assert!(!is_system_metadata_key(key), "{key}");
        }
    }
}
