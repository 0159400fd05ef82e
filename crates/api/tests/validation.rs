//! `validate()` tables: every rule with a passing and a failing case and the exact message.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use flotilla_api::policy::ClusterPropagationPolicy;
use flotilla_api::{Cluster, PropagationPolicy};

/// A PropagationPolicy in namespace `default` whose spec is `spec` (YAML, indented 2 spaces).
fn pp(spec: &str) -> PropagationPolicy {
    let yaml = format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: p\n  namespace: default\nspec:\n{spec}"
    );
    serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}\n{yaml}"))
}

fn violations(policy: &PropagationPolicy) -> Vec<String> {
    match policy.validate() {
        Ok(()) => vec![],
        Err(v) => v.0.iter().map(ToString::to_string).collect(),
    }
}

const SELECT: &str = "  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n";

/// (case, spec YAML, expected violations). An empty expectation is a passing case.
const CASES: &[(&str, &str, &[&str])] = &[
    ("minimal policy", SELECT, &[]),
    (
        "no selectors",
        "  resourceSelectors: []\n",
        &["spec.resourceSelectors: must select at least one resource: add an entry with apiVersion and kind"],
    ),
    (
        "selector without apiVersion and kind",
        "  resourceSelectors: [{apiVersion: '', kind: ''}]\n",
        &[
            "spec.resourceSelectors[0].apiVersion: is required, for example apps/v1",
            "spec.resourceSelectors[0].kind: is required, for example Deployment",
        ],
    ),
    (
        "malformed apiVersion",
        "  resourceSelectors: [{apiVersion: 'apps/v1/x', kind: Deployment}]\n",
        &[
            "spec.resourceSelectors[0].apiVersion: \"apps/v1/x\" is not <version> or <group>/<version>, for example v1 or apps/v1",
        ],
    ),
    (
        "core apiVersion",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n",
        &[],
    ),
    (
        "selector in own namespace",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: default}]\n",
        &[],
    ),
    (
        "selector in another namespace",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: other}]\n",
        &[
            "spec.resourceSelectors[0].namespace: \"other\" differs from the policy's namespace \"default\": a PropagationPolicy only selects templates in its own namespace; remove the field or use a ClusterPropagationPolicy",
        ],
    ),
    (
        "invalid selector name",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: 'a/b'}]\n",
        &["spec.resourceSelectors[0].name: \"a/b\" is not a valid object name"],
    ),
    (
        "label selector: valid expressions",
        "  resourceSelectors:\n    - apiVersion: v1\n      kind: ConfigMap\n      labelSelector:\n        matchLabels: {app: web}\n        matchExpressions:\n          - {key: tier, operator: In, values: [a]}\n          - {key: x, operator: Exists}\n",
        &[],
    ),
    (
        "label selector: bad operator, missing and extra values, bad key and value",
        "  resourceSelectors:\n    - apiVersion: v1\n      kind: ConfigMap\n      labelSelector:\n        matchLabels: {'bad key': 'bad value!'}\n        matchExpressions:\n          - {key: tier, operator: Like, values: [a]}\n          - {key: tier, operator: In}\n          - {key: tier, operator: Exists, values: [a]}\n",
        &[
            "spec.resourceSelectors[0].labelSelector.matchLabels: \"bad key\" is not a valid label key",
            "spec.resourceSelectors[0].labelSelector.matchLabels.bad key: \"bad value!\" is not a valid label value (at most 63 characters: letters, digits, '-', '_', '.')",
            "spec.resourceSelectors[0].labelSelector.matchExpressions[0].operator: unsupported value \"Like\": use one of In, NotIn, Exists, DoesNotExist",
            "spec.resourceSelectors[0].labelSelector.matchExpressions[1].values: must be non-empty when operator is In",
            "spec.resourceSelectors[0].labelSelector.matchExpressions[2].values: must be empty when operator is Exists",
        ],
    ),
    (
        "known enums",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  preemption: Always\n  conflictResolution: Overwrite\n  activationPreference: Lazy\n",
        &[],
    ),
    (
        "unknown preemption",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  preemption: Sometimes\n",
        &["spec.preemption: unsupported value \"Sometimes\": use one of Always, Never"],
    ),
    (
        "unknown conflictResolution",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  conflictResolution: Merge\n",
        &["spec.conflictResolution: unsupported value \"Merge\": use one of Abort, Overwrite"],
    ),
    (
        "unknown activationPreference",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  activationPreference: Eager\n",
        &[
            "spec.activationPreference: unsupported value \"Eager\": the only supported value is Lazy; omit the field for immediate activation",
        ],
    ),
    (
        "empty schedulerName",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  schedulerName: ''\n",
        &["spec.schedulerName: must not be empty; omit it to use default-scheduler"],
    ),
    (
        "suspend all",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatching: true}\n",
        &[],
    ),
    (
        "suspend some",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatchingOnClusters: {clusterNames: [m1, m2]}}\n",
        &[],
    ),
    (
        "both suspension fields",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatching: true, dispatchingOnClusters: {clusterNames: [m1]}}\n",
        &[
            "spec.suspension.dispatchingOnClusters: cannot be combined with dispatching: true, which already suspends every cluster; remove one of them",
        ],
    ),
    (
        "both suspension fields, seed spelling",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {suspendDispatching: true, suspendDispatchingOnClusters: {clusterNames: [m1]}}\n",
        &[
            "spec.suspension.dispatchingOnClusters: cannot be combined with dispatching: true, which already suspends every cluster; remove one of them",
        ],
    ),
    (
        "not-all with clusters",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatching: false, dispatchingOnClusters: {clusterNames: [m1]}}\n",
        &[],
    ),
    (
        "both spellings agree",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatching: true, suspendDispatching: true}\n",
        &[],
    ),
    (
        "both spellings disagree",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatching: true, suspendDispatching: false}\n",
        &[
            "spec.suspension.suspendDispatching: conflicts with dispatching (true vs false): suspendDispatching is an alias of dispatching; set only dispatching",
        ],
    ),
    (
        "cluster list spellings disagree",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatchingOnClusters: {clusterNames: [m1]}, suspendDispatchingOnClusters: {clusterNames: [m2]}}\n",
        &[
            "spec.suspension.suspendDispatchingOnClusters: conflicts with dispatchingOnClusters: suspendDispatchingOnClusters is an alias of dispatchingOnClusters; set only dispatchingOnClusters",
        ],
    ),
    (
        "duplicate and empty suspended clusters",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {dispatchingOnClusters: {clusterNames: [m1, m1, '']}}\n",
        &[
            "spec.suspension.dispatchingOnClusters.clusterNames[1]: duplicate cluster name \"m1\"",
            "spec.suspension.dispatchingOnClusters.clusterNames[2]: cluster name must not be empty",
        ],
    ),
    (
        "scheduling suspension on a policy",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  suspension: {scheduling: true}\n",
        &["spec.suspension.scheduling: is not supported on policies (it is a binding-only field); remove it"],
    ),
    (
        "cluster names",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {clusterAffinity: {clusterNames: [m1, m2], exclude: [m3]}}\n",
        &[],
    ),
    (
        "duplicate cluster names",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {clusterAffinity: {clusterNames: [m1, m1], exclude: [m3, m3]}}\n",
        &[
            "spec.placement.clusterAffinity.clusterNames[1]: duplicate cluster name \"m1\"",
            "spec.placement.clusterAffinity.exclude[1]: duplicate cluster name \"m3\"",
        ],
    ),
    (
        "affinity and affinities",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    clusterAffinity: {clusterNames: [m1]}\n    clusterAffinities: [{affinityName: a, clusterNames: [m2]}]\n",
        &["spec.placement.clusterAffinities: cannot be combined with clusterAffinity; use one of them"],
    ),
    (
        "affinity names missing and duplicated",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    clusterAffinities: [{affinityName: a}, {affinityName: a}, {affinityName: ''}]\n",
        &[
            "spec.placement.clusterAffinities[1].affinityName: duplicate affinity name \"a\"",
            "spec.placement.clusterAffinities[2].affinityName: is required",
        ],
    ),
    (
        "field selector",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {clusterAffinity: {fieldSelector: {matchExpressions: [{key: region, operator: In, values: [eu]}]}}}\n",
        &[],
    ),
    (
        "bad field selector",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {clusterAffinity: {fieldSelector: {matchExpressions: [{key: color, operator: Exists}]}}}\n",
        &[
            "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].key: unsupported key \"color\": use one of provider, region, zone",
            "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].operator: unsupported value \"Exists\": use one of In, NotIn",
            "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].values: must be non-empty when operator is Exists",
        ],
    ),
    (
        "tolerations",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {clusterTolerations: [{key: a, operator: Equal, value: b, effect: NoSchedule}, {operator: Exists}]}\n",
        &[],
    ),
    (
        "bad tolerations",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {clusterTolerations: [{operator: Equal}, {key: a, operator: Exists, value: b}, {key: a, operator: Like}, {key: a, effect: Sometimes}]}\n",
        &[
            "spec.placement.clusterTolerations[0].key: is required when operator is Equal; use operator Exists to tolerate every taint",
            "spec.placement.clusterTolerations[1].value: must be empty when operator is Exists",
            "spec.placement.clusterTolerations[2].operator: unsupported value \"Like\": use one of Equal, Exists",
            "spec.placement.clusterTolerations[3].effect: unsupported value \"Sometimes\": use one of NoSchedule, PreferNoSchedule, NoExecute",
        ],
    ),
    (
        "spread by field",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {spreadConstraints: [{spreadByField: cluster, minGroups: 1, maxGroups: 2}]}\n",
        &[],
    ),
    (
        "bad spread constraints",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {spreadConstraints: [{spreadByField: cluster, spreadByLabel: x}, {}, {spreadByField: planet}, {spreadByLabel: 'a b'}, {spreadByField: zone, minGroups: 3, maxGroups: 2}, {spreadByField: zone, minGroups: -1}]}\n",
        &[
            "spec.placement.spreadConstraints[0]: spreadByField and spreadByLabel cannot be combined; set one of them",
            "spec.placement.spreadConstraints[1]: set one of spreadByField or spreadByLabel",
            "spec.placement.spreadConstraints[2].spreadByField: unsupported value \"planet\": use one of cluster, region, zone, provider",
            "spec.placement.spreadConstraints[3].spreadByLabel: \"a b\" is not a valid label key",
            "spec.placement.spreadConstraints[4].maxGroups: must not be less than minGroups (2 < 3)",
            "spec.placement.spreadConstraints[5].minGroups: must not be negative, got -1",
        ],
    ),
    (
        "weighted",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Weighted, weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [m1]}, weight: 1}]}}}\n",
        &[],
    ),
    (
        "negative and zero weights",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Weighted, weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [m1]}, weight: -2}, {targetCluster: {clusterNames: [m2]}, weight: 0}]}}}\n",
        &[
            "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight: must be at least 1, got -2",
            "spec.placement.replicaScheduling.weightPreference.staticWeightList[1].weight: must be at least 1, got 0",
        ],
    ),
    (
        "unknown scheduling enums",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {replicaScheduling: {replicaSchedulingType: Tripled, replicaDivisionPreference: Random, weightPreference: {dynamicWeight: Magic}}}\n",
        &[
            "spec.placement.replicaScheduling.replicaSchedulingType: unsupported value \"Tripled\": use one of Duplicated, Divided",
            "spec.placement.replicaScheduling.replicaDivisionPreference: unsupported value \"Random\": use one of Aggregated, Weighted",
            "spec.placement.replicaScheduling.weightPreference.dynamicWeight: unsupported value \"Magic\": use one of AvailableReplicas",
        ],
    ),
    (
        "static and dynamic weights",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {replicaScheduling: {replicaDivisionPreference: Weighted, weightPreference: {dynamicWeight: AvailableReplicas, staticWeightList: [{targetCluster: {clusterNames: [m1]}, weight: 1}]}}}\n",
        &[
            "spec.placement.replicaScheduling.weightPreference.dynamicWeight: cannot be combined with staticWeightList; use one of them",
        ],
    ),
    (
        "static weights with Aggregated",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {replicaScheduling: {replicaDivisionPreference: Aggregated, weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [m1]}, weight: 1}]}}}\n",
        &[
            "spec.placement.replicaScheduling.weightPreference.staticWeightList: is only used with replicaDivisionPreference: Weighted; remove it or switch to Weighted",
        ],
    ),
    (
        "failover",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  propagateDeps: true\n  failover: {application: {decisionConditions: {tolerationSeconds: 30}, purgeMode: Gracefully, gracePeriodSeconds: 60}, cluster: {purgeMode: Directly}}\n",
        &[],
    ),
    (
        "failover in Karmada's older spellings",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  propagateDeps: true\n  failover: {application: {decisionConditions: {tolerationSeconds: 0}, purgeMode: Graciously, gracePeriodSeconds: 60}, cluster: {purgeMode: Immediately}}\n",
        &[],
    ),
    (
        "application failover with defaults and purgeMode Never",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  propagateDeps: true\n  failover: {application: {decisionConditions: {}, purgeMode: Never}, cluster: {purgeMode: Never}}\n",
        &[],
    ),
    (
        "application failover without propagateDeps",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  failover: {application: {decisionConditions: {tolerationSeconds: 30}}}\n",
        &[
            "spec.propagateDeps: must be true when spec.failover.application is set (the workload's dependencies must move with it); add `propagateDeps: true`",
        ],
    ),
    (
        "cluster failover alone needs no propagateDeps",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  failover: {cluster: {purgeMode: Gracefully}}\n",
        &[],
    ),
    (
        "grace period without a graceful purge",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  propagateDeps: true\n  failover: {application: {purgeMode: Immediately, gracePeriodSeconds: 60}}\n",
        &[
            "spec.failover.application.gracePeriodSeconds: only takes effect when purgeMode is Gracefully, but purgeMode is Immediately; remove gracePeriodSeconds or set purgeMode: Gracefully",
        ],
    ),
    (
        "bad failover",
        "  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  propagateDeps: true\n  failover: {application: {decisionConditions: {tolerationSeconds: -1}, purgeMode: Later, gracePeriodSeconds: 0}, cluster: {purgeMode: Soon}}\n",
        &[
            "spec.failover.application.decisionConditions.tolerationSeconds: must not be negative, got -1",
            "spec.failover.application.purgeMode: unsupported value \"Later\": use one of Never, Directly, Gracefully",
            "spec.failover.application.gracePeriodSeconds: must be greater than 0, got 0",
            "spec.failover.cluster.purgeMode: unsupported value \"Soon\": use one of Never, Directly, Gracefully",
        ],
    ),
];

#[test]
fn propagation_policy_rules() {
    let mut failures = Vec::new();
    for (case, spec, expected) in CASES {
        let got = violations(&pp(spec));
        if got != *expected {
            failures.push(format!(
                "case {case:?}:\n  expected {expected:#?}\n  got      {got:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn cluster_propagation_policy_may_select_any_namespace() {
    let cpp: ClusterPropagationPolicy = serde_yaml::from_str(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: c}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: other}]\n  suspension: {dispatching: true, dispatchingOnClusters: {clusterNames: [m1]}}\n",
    )
    .unwrap();
    let messages: Vec<String> = cpp
        .validate()
        .unwrap_err()
        .0
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "spec.suspension.dispatchingOnClusters: cannot be combined with dispatching: true, which already suspends every cluster; remove one of them"
        ]
    );
}

#[test]
fn violations_display_joins_every_message() {
    let err = pp("  resourceSelectors: []\n  preemption: Sometimes\n")
        .validate()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.resourceSelectors: must select at least one resource: add an entry with apiVersion and kind; \
         spec.preemption: unsupported value \"Sometimes\": use one of Always, Never"
    );
}

#[test]
fn cluster_rules() {
    let cluster = |spec: &str| -> Vec<String> {
        let c: Cluster = serde_yaml::from_str(&format!(
            "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: m1}}\nspec:\n{spec}"
        ))
        .unwrap();
        c.validate()
            .err()
            .map(|v| v.0.iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    };
    assert!(cluster("  apiEndpoint: https://127.0.0.1:6443\n  secretRef: {namespace: karmada-cluster, name: m1}\n  taints: [{key: a, effect: NoSchedule}]\n").is_empty());
    assert_eq!(
        cluster("  syncMode: Push\n"),
        ["spec.apiEndpoint: is required: set the member's API server URL, for example https://10.0.0.1:6443"]
    );
    assert_eq!(
        cluster(
            "  apiEndpoint: ftp://x\n  secretRef: {namespace: 'Bad_NS', name: 'a/b'}\n  taints: [{key: 'a b', effect: Sometimes}]\n"
        ),
        [
            "spec.apiEndpoint: \"ftp://x\" is not an http(s) URL; use for example https://10.0.0.1:6443",
            "spec.secretRef.namespace: \"Bad_NS\" is not a valid namespace name",
            "spec.secretRef.name: \"a/b\" is not a valid Secret name",
            "spec.taints[0].effect: unsupported value \"Sometimes\": use one of NoSchedule, PreferNoSchedule, NoExecute",
            "spec.taints[0].key: \"a b\" is not a valid taint key",
        ]
    );
}

#[test]
fn name_syntax() {
    use flotilla_api::validation::{
        is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name,
    };
    assert!(is_dns1123_label("member-1"));
    assert!(!is_dns1123_label("Member"));
    assert!(!is_dns1123_label("-a"));
    assert!(!is_dns1123_label(&"a".repeat(64)));
    assert!(is_dns1123_subdomain("a.b-c.d"));
    assert!(!is_dns1123_subdomain("a..b"));
    assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    assert!(is_qualified_name("app.kubernetes.io/name"));
    assert!(is_qualified_name("App_1"));
    assert!(!is_qualified_name("/name"));
    assert!(!is_qualified_name("a/b/c"));
    assert!(is_label_value(""));
    assert!(is_label_value("v1.2_3-a"));
    assert!(!is_label_value("-a"));
}

/// The violations of a ClusterTaintPolicy whose spec is `spec` (YAML, indented 2 spaces), as
/// flotilla-apiserver's admission sees it with `--allow-no-execute-taint-policy=allow`.
fn taint_policy_violations(spec: &str, allow_no_execute: bool) -> Vec<String> {
    let yaml = format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata:\n  name: t\nspec:\n{spec}"
    );
    let policy: flotilla_api::ClusterTaintPolicy =
        serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}\n{yaml}"));
    match policy.validate_admission(allow_no_execute) {
        Ok(()) => vec![],
        Err(v) => v.0.iter().map(ToString::to_string).collect(),
    }
}

const READY_NOT_TRUE: &str =
    "  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['True']}]\n";

/// (case, spec YAML, allow NoExecute, expected violations). Karmada's webhook refuses NoExecute
/// taints (unless allowed) and duplicate key/effect pairs; flotilla also refuses what the
/// Cluster's own validation would refuse later (key and value syntax, unknown effects) and what
/// can never match (unknown operators and statuses, an empty condition type).
const TAINT_POLICY_CASES: &[(&str, &str, bool, &[&str])] = &[
    (
        "Karmada's documented example",
        "  targetClusters: {clusterNames: [member1, member2]}\n  addOnConditions: [{conditionType: KubeComponentsHealthy, operator: NotIn, statusValues: ['True']}]\n  removeOnConditions: [{conditionType: KubeComponentsHealthy, operator: In, statusValues: ['True']}]\n  taints: [{key: kube-components-unhealthy, effect: NoSchedule}]\n",
        false,
        &[],
    ),
    (
        "NoExecute, refused by default",
        "  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['True']}]\n  taints: [{key: not-ready, effect: NoSchedule}, {key: not-ready, effect: NoExecute}]\n",
        false,
        &[
            "spec.taints[1].effect: NoExecute is not allowed: such a taint evicts every workload that does not tolerate it; the administrator allows NoExecute taints in ClusterTaintPolicies with flotilla-apiserver --allow-no-execute-taint-policy (karmada-webhook's flag)",
        ],
    ),
    (
        "NoExecute, allowed",
        "  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['True']}]\n  taints: [{key: not-ready, effect: NoSchedule}, {key: not-ready, effect: NoExecute}]\n",
        true,
        &[],
    ),
    (
        "neither add nor remove conditions (Karmada accepts it; it does nothing)",
        "  taints: [{key: a, value: b, effect: PreferNoSchedule}]\n",
        false,
        &[],
    ),
    (
        "no taints",
        "  taints: []\n",
        false,
        &["spec.taints: must list at least one taint: add an entry with key and effect"],
    ),
    (
        "duplicate key and effect",
        "  taints: [{key: a, effect: NoSchedule}, {key: a, value: x, effect: NoSchedule}, {key: a, effect: PreferNoSchedule}]\n",
        false,
        &["spec.taints[1]: duplicate taint a:NoSchedule: taints must be unique by key and effect"],
    ),
    (
        "bad key, value and effect",
        "  taints: [{key: '', effect: NoSchedule}, {key: 'a b', value: 'not ok!', effect: Sometimes}]\n",
        false,
        &[
            "spec.taints[0].key: is required, for example example.com/network-unavailable",
            "spec.taints[1].key: \"a b\" is not a valid taint key: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            "spec.taints[1].value: \"not ok!\" is not a valid taint value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            "spec.taints[1].effect: unsupported value \"Sometimes\": use one of NoSchedule, PreferNoSchedule, NoExecute",
        ],
    ),
    (
        "bad match conditions",
        "  addOnConditions: [{conditionType: '', operator: Equals, statusValues: ['true', 'Unknown']}]\n  removeOnConditions: [{conditionType: Ready, operator: In, statusValues: [Maybe]}]\n  taints: [{key: a, effect: NoSchedule}]\n",
        false,
        &[
            "spec.addOnConditions[0].conditionType: is required, for example Ready",
            "spec.addOnConditions[0].operator: unsupported value \"Equals\": use one of In, NotIn",
            "spec.addOnConditions[0].statusValues[0]: \"true\" is not a condition status: use True, False or Unknown",
            "spec.removeOnConditions[0].statusValues[0]: \"Maybe\" is not a condition status: use True, False or Unknown",
        ],
    ),
    (
        "target clusters as a cluster affinity",
        "  targetClusters:\n    clusterNames: [m1, m1]\n    labelSelector: {matchLabels: {env: prod}}\n    fieldSelector: {matchExpressions: [{key: planet, operator: In, values: [earth]}]}\n  taints: [{key: a, effect: NoSchedule}]\n",
        false,
        &[
            "spec.targetClusters.clusterNames[1]: duplicate cluster name \"m1\"",
            "spec.targetClusters.fieldSelector.matchExpressions[0].key: unsupported key \"planet\": use one of provider, region, zone",
        ],
    ),
];

#[test]
fn cluster_taint_policy_rules() {
    let mut failures = Vec::new();
    for (case, spec, allow, expected) in TAINT_POLICY_CASES {
        let got = taint_policy_violations(spec, *allow);
        if got != *expected {
            failures.push(format!(
                "case {case:?}:\n  expected {expected:#?}\n  got      {got:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // `validate()` (the services' check) allows NoExecute: the refusal is an admission rule.
    let policy: flotilla_api::ClusterTaintPolicy = serde_yaml::from_str(&format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata: {{name: t}}\nspec:\n{READY_NOT_TRUE}  taints: [{{key: x, effect: NoExecute}}]\n"
    ))
    .unwrap();
    assert_eq!(policy.validate(), Ok(()));
    assert!(policy.validate_admission(false).is_err());
}
