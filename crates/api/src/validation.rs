//! Semantic validation of the API types.
//!
//! The same functions run in the apiserver's admission (the user's `kubectl apply` fails with
//! the message) and in the services (a policy that reached the store anyway, e.g. through a
//! kube-apiserver without flotilla's admission, gets an `Invalid` condition and an event and is
//! ignored). Every [`Violation`] names the field by its JSON path and says how to fix it.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::cluster::Cluster;

mod overrides;
use crate::policy::{
    ClusterAffinity, ClusterPropagationPolicy, FailoverBehavior, Placement, PropagationPolicy,
    PropagationSpec, PurgeMode, ReplicaDivisionPreference, ReplicaSchedulingStrategy, ResourceSelector,
    SpreadConstraint, SuspendClusters, Suspension,
};
use crate::taint_policy::{ClusterTaintPolicy, MatchCondition, TaintEffect};
pub use overrides::{is_json_pointer, validate_override_spec};

/// One problem with an object: the field (JSON path) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// JSON path of the offending field, e.g. `spec.suspension.dispatchingOnClusters`.
    pub field: String,
    /// A sentence saying what is wrong and how to fix it.
    pub message: String,
}

impl Violation {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every problem found with one object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Violations(pub Vec<Violation>);

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, violation) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{violation}")?;
        }
        Ok(())
    }
}

impl Violations {
    fn into_result(self) -> Result<(), Violations> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl PropagationPolicy {
    /// Checks the policy; returns every violation found.
    pub fn validate(&self) -> Result<(), Violations> {
        let mut out = Vec::new();
        validate_spec(&self.spec, self.metadata.namespace.as_deref(), &mut out);
        Violations(out).into_result()
    }
}

impl ClusterPropagationPolicy {
    /// Checks the policy; returns every violation found.
    pub fn validate(&self) -> Result<(), Violations> {
        let mut out = Vec::new();
        validate_spec(&self.spec, None, &mut out);
        Violations(out).into_result()
    }
}

impl Cluster {
    /// Checks the cluster registration; returns every violation found.
    pub fn validate(&self) -> Result<(), Violations> {
        let mut out = Vec::new();
        match self.spec.api_endpoint.as_deref() {
            None | Some("") => out.push(Violation::new(
                "spec.apiEndpoint",
                "is required: set the member's API server URL, for example https://10.0.0.1:6443",
            )),
            Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => {
                out.push(Violation::new(
                    "spec.apiEndpoint",
                    format!("{url:?} is not an http(s) URL; use for example https://10.0.0.1:6443"),
                ))
            }
            Some(_) => {}
        }
        if let Some(secret) = &self.spec.secret_ref {
            if !is_dns1123_label(&secret.namespace) {
                out.push(Violation::new(
                    "spec.secretRef.namespace",
                    format!("{:?} is not a valid namespace name", secret.namespace),
                ));
            }
            if !is_dns1123_subdomain(&secret.name) {
                out.push(Violation::new(
                    "spec.secretRef.name",
                    format!("{:?} is not a valid Secret name", secret.name),
                ));
            }
        }
        for (i, taint) in self.spec.taints.iter().enumerate() {
            check_effect(
                &format!("spec.taints[{i}].effect"),
                Some(&taint.effect),
                false,
                &mut out,
            );
            if !is_qualified_name(&taint.key) {
                out.push(Violation::new(
                    format!("spec.taints[{i}].key"),
                    format!("{:?} is not a valid taint key", taint.key),
                ));
            }
        }
        Violations(out).into_result()
    }
}

impl ClusterTaintPolicy {
    /// Checks the policy; returns every violation found. `NoExecute` taints are allowed (see
    /// [`ClusterTaintPolicy::validate_admission`]).
    pub fn validate(&self) -> Result<(), Violations> {
        self.validate_admission(true)
    }

    /// Checks the policy as flotilla-apiserver's admission does: like
    /// [`ClusterTaintPolicy::validate`], and, unless `allow_no_execute`
    /// (`--allow-no-execute-taint-policy`), refuses `NoExecute` taints as karmada-webhook does.
    pub fn validate_admission(&self, allow_no_execute: bool) -> Result<(), Violations> {
        let mut out = Vec::new();
        let spec = &self.spec;
        if let Some(affinity) = &spec.target_clusters {
            check_cluster_affinity("spec.targetClusters", affinity, &mut out);
        }
        for (field, conditions) in [
            ("addOnConditions", &spec.add_on_conditions),
            ("removeOnConditions", &spec.remove_on_conditions),
        ] {
            for (i, condition) in conditions.iter().enumerate() {
                check_match_condition(&format!("spec.{field}[{i}]"), condition, &mut out);
            }
        }
        if spec.taints.is_empty() {
            out.push(Violation::new(
                "spec.taints",
                "must list at least one taint: add an entry with key and effect",
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, taint) in spec.taints.iter().enumerate() {
            let path = format!("spec.taints[{i}]");
            if taint.key.is_empty() {
                out.push(Violation::new(
                    format!("{path}.key"),
                    "is required, for example example.com/network-unavailable",
                ));
            } else if !is_qualified_name(&taint.key) {
                out.push(Violation::new(
                    format!("{path}.key"),
                    format!(
                        "{:?} is not a valid taint key: an optional DNS subdomain and '/', then at most 63 \
                         letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                        taint.key
                    ),
                ));
            }
            if !is_label_value(&taint.value) {
                out.push(Violation::new(
                    format!("{path}.value"),
                    format!(
                        "{:?} is not a valid taint value: at most 63 letters, digits, '-', '_' or '.', \
                         starting and ending with a letter or digit",
                        taint.value
                    ),
                ));
            }
            if !taint.effect.is_known() {
                out.push(unsupported(
                    &format!("{path}.effect"),
                    taint.effect.as_str(),
                    TaintEffect::KNOWN,
                ));
            } else if taint.effect == TaintEffect::NoExecute && !allow_no_execute {
                out.push(Violation::new(
                    format!("{path}.effect"),
                    "NoExecute is not allowed: such a taint evicts every workload that does not tolerate it; \
                     the administrator allows NoExecute taints in ClusterTaintPolicies with \
                     flotilla-apiserver --allow-no-execute-taint-policy (karmada-webhook's flag)",
                ));
            }
            if !seen.insert((taint.key.as_str(), taint.effect.as_str())) {
                out.push(Violation::new(
                    path,
                    format!(
                        "duplicate taint {}:{}: taints must be unique by key and effect",
                        taint.key, taint.effect
                    ),
                ));
            }
        }
        Violations(out).into_result()
    }
}

fn check_match_condition(path: &str, condition: &MatchCondition, out: &mut Vec<Violation>) {
    if condition.condition_type.is_empty() {
        out.push(Violation::new(
            format!("{path}.conditionType"),
            "is required, for example Ready",
        ));
    }
    if !condition.operator.is_known() {
        out.push(unsupported(
            &format!("{path}.operator"),
            condition.operator.as_str(),
            &["In", "NotIn"],
        ));
    }
    for (j, value) in condition.status_values.iter().enumerate() {
        if !matches!(value.as_str(), "True" | "False" | "Unknown") {
            out.push(Violation::new(
                format!("{path}.statusValues[{j}]"),
                format!("{value:?} is not a condition status: use True, False or Unknown"),
            ));
        }
    }
}

fn validate_spec(spec: &PropagationSpec, policy_namespace: Option<&str>, out: &mut Vec<Violation>) {
    if spec.resource_selectors.is_empty() {
        out.push(Violation::new(
            "spec.resourceSelectors",
            "must select at least one resource: add an entry with apiVersion and kind",
        ));
    }
    for (i, selector) in spec.resource_selectors.iter().enumerate() {
        check_resource_selector(
            &format!("spec.resourceSelectors[{i}]"),
            selector,
            policy_namespace,
            "a PropagationPolicy only selects templates in its own namespace; remove the field or use a \
             ClusterPropagationPolicy",
            out,
        );
    }

    if let Some(preemption) = &spec.preemption
        && !preemption.is_known()
    {
        out.push(unsupported(
            "spec.preemption",
            preemption.as_str(),
            &["Always", "Never"],
        ));
    }
    if let Some(resolution) = &spec.conflict_resolution
        && !resolution.is_known()
    {
        out.push(unsupported(
            "spec.conflictResolution",
            resolution.as_str(),
            &["Abort", "Overwrite"],
        ));
    }
    if let Some(activation) = &spec.activation_preference
        && !activation.is_known()
    {
        out.push(Violation::new(
            "spec.activationPreference",
            format!(
                "unsupported value {:?}: the only supported value is Lazy; omit the field for immediate activation",
                activation.as_str()
            ),
        ));
    }
    if let Some(name) = &spec.scheduler_name
        && name.is_empty()
    {
        out.push(Violation::new(
            "spec.schedulerName",
            "must not be empty; omit it to use default-scheduler",
        ));
    }
    if let Some(suspension) = &spec.suspension {
        check_suspension("spec.suspension", suspension, out);
    }
    check_placement("spec.placement", &spec.placement, out);
    if let Some(failover) = &spec.failover {
        check_failover("spec.failover", failover, out);
        if failover.application.is_some() && !spec.propagate_deps {
            // Karmada's rule: the workload's ConfigMaps and Secrets must move with it.
            out.push(Violation::new(
                "spec.propagateDeps",
                "must be true when spec.failover.application is set (the workload's dependencies \
                 must move with it); add `propagateDeps: true`",
            ));
        }
    }
}

fn unsupported(field: &str, value: &str, allowed: &[&str]) -> Violation {
    Violation::new(
        field,
        format!("unsupported value {value:?}: use one of {}", allowed.join(", ")),
    )
}

/// Checks a suspension as written in a policy.
fn check_suspension(path: &str, suspension: &Suspension, out: &mut Vec<Violation>) {
    if let (Some(canonical), Some(alias)) = (suspension.dispatching, suspension.suspend_dispatching)
        && canonical != alias
    {
        out.push(Violation::new(
            format!("{path}.suspendDispatching"),
            format!(
                "conflicts with dispatching ({canonical} vs {alias}): suspendDispatching is an alias of dispatching; \
                 set only dispatching"
            ),
        ));
    }
    if let (Some(canonical), Some(alias)) = (
        &suspension.dispatching_on_clusters,
        &suspension.suspend_dispatching_on_clusters,
    ) && !same_clusters(canonical, alias)
    {
        out.push(Violation::new(
            format!("{path}.suspendDispatchingOnClusters"),
            "conflicts with dispatchingOnClusters: suspendDispatchingOnClusters is an alias of dispatchingOnClusters; \
             set only dispatchingOnClusters",
        ));
    }
    if suspension.dispatching() == Some(true) && suspension.dispatching_on_clusters().is_some() {
        out.push(Violation::new(
            format!("{path}.dispatchingOnClusters"),
            "cannot be combined with dispatching: true, which already suspends every cluster; remove one of them",
        ));
    }
    for (field, clusters) in [
        ("dispatchingOnClusters", &suspension.dispatching_on_clusters),
        (
            "suspendDispatchingOnClusters",
            &suspension.suspend_dispatching_on_clusters,
        ),
    ] {
        if let Some(clusters) = clusters {
            check_cluster_names(
                &format!("{path}.{field}.clusterNames"),
                &clusters.cluster_names,
                out,
            );
        }
    }
    if suspension.scheduling.is_some() {
        out.push(Violation::new(
            format!("{path}.scheduling"),
            "is not supported on policies (it is a binding-only field); remove it",
        ));
    }
}

fn same_clusters(a: &SuspendClusters, b: &SuspendClusters) -> bool {
    let a: BTreeSet<_> = a.cluster_names.iter().collect();
    let b: BTreeSet<_> = b.cluster_names.iter().collect();
    a == b
}

fn check_cluster_names(path: &str, names: &[String], out: &mut Vec<Violation>) {
    let mut seen = BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            out.push(Violation::new(
                format!("{path}[{i}]"),
                "cluster name must not be empty",
            ));
        } else if !seen.insert(name.as_str()) {
            out.push(Violation::new(
                format!("{path}[{i}]"),
                format!("duplicate cluster name {name:?}"),
            ));
        }
    }
}

fn check_placement(path: &str, placement: &Placement, out: &mut Vec<Violation>) {
    if let Some(affinity) = &placement.cluster_affinity {
        check_cluster_affinity(&format!("{path}.clusterAffinity"), affinity, out);
    }
    if placement.cluster_affinity.is_some() && !placement.cluster_affinities.is_empty() {
        out.push(Violation::new(
            format!("{path}.clusterAffinities"),
            "cannot be combined with clusterAffinity; use one of them",
        ));
    }
    let mut names = BTreeSet::new();
    for (i, term) in placement.cluster_affinities.iter().enumerate() {
        let term_path = format!("{path}.clusterAffinities[{i}]");
        if term.affinity_name.is_empty() {
            out.push(Violation::new(format!("{term_path}.affinityName"), "is required"));
        } else if !names.insert(term.affinity_name.as_str()) {
            out.push(Violation::new(
                format!("{term_path}.affinityName"),
                format!("duplicate affinity name {:?}", term.affinity_name),
            ));
        }
        check_cluster_affinity(&term_path, &term.affinity, out);
    }
    for (i, toleration) in placement.cluster_tolerations.iter().enumerate() {
        check_toleration(&format!("{path}.clusterTolerations[{i}]"), toleration, out);
    }
    for (i, constraint) in placement.spread_constraints.iter().enumerate() {
        check_spread_constraint(&format!("{path}.spreadConstraints[{i}]"), constraint, out);
    }
    if let Some(strategy) = &placement.replica_scheduling {
        check_replica_scheduling(&format!("{path}.replicaScheduling"), strategy, out);
    }
}

fn check_cluster_affinity(path: &str, affinity: &ClusterAffinity, out: &mut Vec<Violation>) {
    check_cluster_names(&format!("{path}.clusterNames"), &affinity.cluster_names, out);
    check_cluster_names(&format!("{path}.exclude"), &affinity.exclude_clusters, out);
    if let Some(selector) = &affinity.label_selector {
        check_label_selector(&format!("{path}.labelSelector"), selector, out);
    }
    if let Some(fields) = &affinity.field_selector {
        for (i, requirement) in fields.match_expressions.iter().enumerate() {
            let req_path = format!("{path}.fieldSelector.matchExpressions[{i}]");
            if !matches!(requirement.key.as_str(), "provider" | "region" | "zone") {
                out.push(Violation::new(
                    format!("{req_path}.key"),
                    format!(
                        "unsupported key {:?}: use one of provider, region, zone",
                        requirement.key
                    ),
                ));
            }
            if !matches!(requirement.operator.as_str(), "In" | "NotIn") {
                out.push(unsupported(
                    &format!("{req_path}.operator"),
                    &requirement.operator,
                    &["In", "NotIn"],
                ));
            }
            if requirement.values.as_ref().is_none_or(|v| v.is_empty()) {
                out.push(Violation::new(
                    format!("{req_path}.values"),
                    format!("must be non-empty when operator is {}", requirement.operator),
                ));
            }
        }
    }
}

fn check_toleration(path: &str, toleration: &Toleration, out: &mut Vec<Violation>) {
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    match operator {
        "Equal" => {
            if toleration.key.as_deref().is_none_or(str::is_empty) {
                out.push(Violation::new(
                    format!("{path}.key"),
                    "is required when operator is Equal; use operator Exists to tolerate every taint",
                ));
            }
        }
        "Exists" => {
            if toleration.value.as_deref().is_some_and(|v| !v.is_empty()) {
                out.push(Violation::new(
                    format!("{path}.value"),
                    "must be empty when operator is Exists",
                ));
            }
        }
        other => out.push(unsupported(
            &format!("{path}.operator"),
            other,
            &["Equal", "Exists"],
        )),
    }
    check_effect(&format!("{path}.effect"), toleration.effect.as_deref(), true, out);
}

fn check_effect(path: &str, effect: Option<&str>, empty_allowed: bool, out: &mut Vec<Violation>) {
    match effect {
        Some("NoSchedule" | "PreferNoSchedule" | "NoExecute") => {}
        None | Some("") if empty_allowed => {}
        Some(other) => out.push(unsupported(
            path,
            other,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        )),
        None => out.push(Violation::new(
            path,
            "is required: use NoSchedule, PreferNoSchedule or NoExecute",
        )),
    }
}

fn check_spread_constraint(path: &str, constraint: &SpreadConstraint, out: &mut Vec<Violation>) {
    let by_label = constraint.spread_by_label.as_deref().filter(|l| !l.is_empty());
    match (&constraint.spread_by_field, by_label) {
        (Some(_), Some(_)) => out.push(Violation::new(
            path,
            "spreadByField and spreadByLabel cannot be combined; set one of them",
        )),
        (None, None) => out.push(Violation::new(path, "set one of spreadByField or spreadByLabel")),
        (Some(field), None) if !field.is_known() => out.push(unsupported(
            &format!("{path}.spreadByField"),
            field.as_str(),
            &["cluster", "region", "zone", "provider"],
        )),
        (None, Some(label)) if !is_qualified_name(label) => out.push(Violation::new(
            format!("{path}.spreadByLabel"),
            format!("{label:?} is not a valid label key"),
        )),
        _ => {}
    }
    for (field, value) in [
        ("minGroups", constraint.min_groups),
        ("maxGroups", constraint.max_groups),
    ] {
        if let Some(value) = value
            && value < 0
        {
            out.push(Violation::new(
                format!("{path}.{field}"),
                format!("must not be negative, got {value}"),
            ));
        }
    }
    if let (Some(min), Some(max)) = (constraint.min_groups, constraint.max_groups)
        && max > 0
        && max < min
    {
        out.push(Violation::new(
            format!("{path}.maxGroups"),
            format!("must not be less than minGroups ({max} < {min})"),
        ));
    }
}

fn check_replica_scheduling(path: &str, strategy: &ReplicaSchedulingStrategy, out: &mut Vec<Violation>) {
    if let Some(kind) = &strategy.replica_scheduling_type
        && !kind.is_known()
    {
        out.push(unsupported(
            &format!("{path}.replicaSchedulingType"),
            kind.as_str(),
            &["Duplicated", "Divided"],
        ));
    }
    if let Some(preference) = &strategy.replica_division_preference
        && !preference.is_known()
    {
        out.push(unsupported(
            &format!("{path}.replicaDivisionPreference"),
            preference.as_str(),
            &["Aggregated", "Weighted"],
        ));
    }
    let Some(weights) = &strategy.weight_preference else {
        return;
    };
    let weights_path = format!("{path}.weightPreference");
    if !weights.static_weight_list.is_empty() && weights.dynamic_weight.is_some() {
        out.push(Violation::new(
            format!("{weights_path}.dynamicWeight"),
            "cannot be combined with staticWeightList; use one of them",
        ));
    }
    if let Some(dynamic) = &weights.dynamic_weight
        && !dynamic.is_known()
    {
        out.push(unsupported(
            &format!("{weights_path}.dynamicWeight"),
            dynamic.as_str(),
            &["AvailableReplicas"],
        ));
    }
    if strategy.replica_division_preference.as_ref() == Some(&ReplicaDivisionPreference::Aggregated)
        && !weights.static_weight_list.is_empty()
    {
        out.push(Violation::new(
            format!("{weights_path}.staticWeightList"),
            "is only used with replicaDivisionPreference: Weighted; remove it or switch to Weighted",
        ));
    }
    for (i, weight) in weights.static_weight_list.iter().enumerate() {
        let weight_path = format!("{weights_path}.staticWeightList[{i}]");
        if weight.weight < 1 {
            out.push(Violation::new(
                format!("{weight_path}.weight"),
                format!("must be at least 1, got {}", weight.weight),
            ));
        }
        check_cluster_affinity(
            &format!("{weight_path}.targetCluster"),
            &weight.target_cluster,
            out,
        );
    }
}

fn check_failover(path: &str, failover: &FailoverBehavior, out: &mut Vec<Violation>) {
    if let Some(application) = &failover.application {
        let app_path = format!("{path}.application");
        if let Some(seconds) = application.decision_conditions.toleration_seconds
            && seconds < 0
        {
            out.push(Violation::new(
                format!("{app_path}.decisionConditions.tolerationSeconds"),
                format!("must not be negative, got {seconds}"),
            ));
        }
        if let Some(mode) = &application.purge_mode
            && !mode.is_known()
        {
            out.push(unsupported(
                &format!("{app_path}.purgeMode"),
                mode.as_str(),
                &["Never", "Directly", "Gracefully"],
            ));
        }
        if let Some(seconds) = application.grace_period_seconds {
            if seconds <= 0 {
                out.push(Violation::new(
                    format!("{app_path}.gracePeriodSeconds"),
                    format!("must be greater than 0, got {seconds}"),
                ));
            }
            let mode = application.purge_mode();
            if mode.is_known() && !mode.is_gracefully() {
                out.push(Violation::new(
                    format!("{app_path}.gracePeriodSeconds"),
                    format!(
                        "only takes effect when purgeMode is Gracefully, but purgeMode is {}; \
                         remove gracePeriodSeconds or set purgeMode: Gracefully",
                        application
                            .purge_mode
                            .as_ref()
                            .map_or("Gracefully", PurgeMode::as_str)
                    ),
                ));
            }
        }
    }
    if let Some(cluster) = &failover.cluster
        && let Some(mode) = &cluster.purge_mode
        && !mode.is_known()
    {
        out.push(unsupported(
            &format!("{path}.cluster.purgeMode"),
            mode.as_str(),
            &["Never", "Directly", "Gracefully"],
        ));
    }
}

/// Checks one `resourceSelectors` entry at `path` of a policy in `policy_namespace` (`None`: a
/// cluster-scoped policy); `namespace_scope` explains the rule a foreign namespace breaks.
fn check_resource_selector(
    path: &str,
    selector: &ResourceSelector,
    policy_namespace: Option<&str>,
    namespace_scope: &str,
    out: &mut Vec<Violation>,
) {
    if selector.api_version.is_empty() {
        out.push(Violation::new(
            format!("{path}.apiVersion"),
            "is required, for example apps/v1",
        ));
    } else if !is_api_version(&selector.api_version) {
        out.push(Violation::new(
            format!("{path}.apiVersion"),
            format!(
                "{:?} is not <version> or <group>/<version>, for example v1 or apps/v1",
                selector.api_version
            ),
        ));
    }
    if selector.kind.is_empty() {
        out.push(Violation::new(
            format!("{path}.kind"),
            "is required, for example Deployment",
        ));
    }
    if let (Some(policy_ns), Some(ns)) = (policy_namespace, selector.namespace())
        && ns != policy_ns
    {
        out.push(Violation::new(
            format!("{path}.namespace"),
            format!("{ns:?} differs from the policy's namespace {policy_ns:?}: {namespace_scope}"),
        ));
    }
    if let Some(name) = selector.name()
        && !is_dns1123_subdomain(name)
        && !is_path_segment_name(name)
    {
        out.push(Violation::new(
            format!("{path}.name"),
            format!("{name:?} is not a valid object name"),
        ));
    }
    if let Some(labels) = &selector.label_selector {
        check_label_selector(&format!("{path}.labelSelector"), labels, out);
    }
}

/// Checks a label selector's keys, values and operators.
pub fn check_label_selector(path: &str, selector: &LabelSelector, out: &mut Vec<Violation>) {
    for (key, value) in selector.match_labels.iter().flatten() {
        if !is_qualified_name(key) {
            out.push(Violation::new(
                format!("{path}.matchLabels"),
                format!("{key:?} is not a valid label key"),
            ));
        }
        if !is_label_value(value) {
            out.push(Violation::new(
                format!("{path}.matchLabels.{key}"),
                format!("{value:?} is not a valid label value (at most 63 characters: letters, digits, '-', '_', '.')"),
            ));
        }
    }
    for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let req_path = format!("{path}.matchExpressions[{i}]");
        if !is_qualified_name(&requirement.key) {
            out.push(Violation::new(
                format!("{req_path}.key"),
                format!("{:?} is not a valid label key", requirement.key),
            ));
        }
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => out.push(Violation::new(
                format!("{req_path}.values"),
                format!("must be non-empty when operator is {}", requirement.operator),
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.push(Violation::new(
                format!("{req_path}.values"),
                format!("must be empty when operator is {}", requirement.operator),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(unsupported(
                &format!("{req_path}.operator"),
                other,
                &["In", "NotIn", "Exists", "DoesNotExist"],
            )),
        }
        for (j, value) in values.iter().enumerate() {
            if !is_label_value(value) {
                out.push(Violation::new(
                    format!("{req_path}.values[{j}]"),
                    format!("{value:?} is not a valid label value"),
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Name syntax (Kubernetes' apimachinery validation rules).
// ---------------------------------------------------------------------------------------------

/// A DNS-1123 label: at most 63 lowercase alphanumerics or '-', starting and ending alphanumeric.
pub fn is_dns1123_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && starts_and_ends_alphanumeric(value)
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels (each label may
/// be up to 63 characters).
pub fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && starts_and_ends_alphanumeric(part)
        })
}

/// A name usable as a URL path segment (the rule for kinds whose names need not be DNS names,
/// e.g. RBAC objects): non-empty, not `.` or `..`, no `/` or `%`.
pub fn is_path_segment_name(value: &str) -> bool {
    !value.is_empty() && value != "." && value != ".." && !value.contains('/') && !value.contains('%')
}

/// A qualified name (label/annotation key): an optional DNS-1123 subdomain prefix and `/`, then
/// a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric.
pub fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if let Some(prefix) = prefix
        && !is_dns1123_subdomain(prefix)
    {
        return false;
    }
    !name.is_empty() && name.len() <= 63 && is_name_part(name)
}

/// A label value: empty, or at most 63 alphanumerics, '-', '_' or '.', starting and ending
/// alphanumeric.
pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_name_part(value))
}

fn is_name_part(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && starts_and_ends_alphanumeric(value)
}

fn starts_and_ends_alphanumeric(value: &str) -> bool {
    let bytes = value.as_bytes();
    matches!((bytes.first(), bytes.last()), (Some(first), Some(last)) if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric())
}

/// `v1` or `group/v1`: a version, optionally preceded by a DNS-1123 subdomain group.
fn is_api_version(value: &str) -> bool {
    let (group, version) = match value.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, value),
    };
    group.is_none_or(is_dns1123_subdomain) && is_dns1123_label(version)
}
