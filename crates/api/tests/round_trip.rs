//! The YAML examples of the design seeds deserialize into the api types and serialize back
//! without losing a field.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use flotilla_api::policy::ClusterPropagationPolicy;
use flotilla_api::{PropagationPolicy, ResourceBinding, Work};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `yaml` as `T`, serializes it back and asserts the result equals the input.
fn round_trip<T: DeserializeOwned + Serialize>(yaml: &str) -> T {
    let original: Value = serde_yaml::from_str(yaml).expect("example is valid YAML");
    let typed: T = serde_yaml::from_str(yaml).expect("example deserializes into the api type");
    let back = serde_json::to_value(&typed).expect("serializes");
    pretty_assertions::assert_eq!(back, original);
    typed
}

#[test]
fn lazy_activation_seed_policy() {
    let pp: PropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: policy-delay
spec:
  activationPreference: Lazy
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
  placement:
    clusterAffinity:
      clusterNames:
        - member1
        - member2
"#,
    );
    assert!(pp.spec.is_lazy());
    pp.validate().unwrap();
}

#[test]
fn dispatch_suspension_seed_policies() {
    let all: PropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames:
        - member1
        - member2
        - member3
  suspension:
    suspendDispatching: true
"#,
    );
    let effective = all.spec.suspension.as_ref().unwrap().effective();
    assert!(effective.all_clusters);
    all.validate().unwrap();

    for (clusters, suspended) in [
        ("[member2, member3]", vec!["member2", "member3"]),
        ("[member3]", vec!["member3"]),
    ] {
        let some: PropagationPolicy = round_trip(&format!(
            r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2, member3]
  suspension:
    suspendDispatchingOnClusters:
      clusterNames: {clusters}
"#
        ));
        let effective = some.spec.suspension.as_ref().unwrap().effective();
        assert!(!effective.all_clusters);
        assert_eq!(
            effective.clusters.iter().map(String::as_str).collect::<Vec<_>>(),
            suspended
        );
        assert!(!effective.is_suspended("member1"));
        some.validate().unwrap();
    }
}

#[test]
fn dispatch_suspension_canonical_spelling() {
    let pp: PropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: default
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
  suspension:
    dispatching: false
    dispatchingOnClusters:
      clusterNames: [member2]
"#,
    );
    let suspension = pp.spec.suspension.unwrap();
    assert!(suspension.effective().is_suspended("member2"));
    assert_eq!(suspension.canonical(), suspension);
}

#[test]
fn dispatch_suspension_seed_work() {
    let work: Work = round_trip(
        r#"
apiVersion: work.karmada.io/v1alpha1
kind: Work
metadata:
  name: nginx-xxx
  namespace: karmada-es-member1
spec:
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: nginx
          namespace: default
        spec:
          replicas: 2
          selector:
            matchLabels: {app: nginx}
          template:
            metadata:
              labels: {app: nginx}
            spec:
              containers:
                - name: nginx
                  image: nginx:1.25
  suspendDispatching: true
status:
  conditions:
    - lastTransitionTime: "2024-07-01T08:33:28Z"
      message: Work dispatching is in a suspended state.
      reason: SuspendDispatching
      status: "True"
      type: Dispatching
"#,
    );
    assert_eq!(work.spec.suspend_dispatching, Some(true));
    assert_eq!(work.spec.workload.manifests.len(), 1);
}

#[test]
fn dependencies_seed_policy_and_binding() {
    let pp: PropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: myapp-propagation
spec:
  propagateDeps: true
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: myapp
  placement:
    clusterAffinity:
      clusterNames:
        - member1
        - member2
    replicaScheduling:
      replicaSchedulingType: Duplicated
"#,
    );
    assert!(pp.spec.propagate_deps);

    let rb: ResourceBinding = round_trip(
        r#"
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: my-config-configmap
  namespace: default
spec:
  requiredBy:
    - clusters:
        - name: member1
          replicas: 1
        - name: member2
          replicas: 1
      name: myapp-deployment
      namespace: default
  resource:
    apiVersion: v1
    kind: ConfigMap
    name: my-config
    namespace: default
    resourceVersion: "757297"
"#,
    );
    assert_eq!(rb.spec.required_by[0].clusters.len(), 2);
}

#[test]
fn every_policy_field_round_trips() {
    let cpp: ClusterPropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: everything
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      namespace: team-a
      labelSelector:
        matchLabels: {app: web}
        matchExpressions:
          - {key: tier, operator: In, values: [frontend]}
  propagateDeps: true
  placement:
    clusterAffinities:
      - affinityName: primary
        clusterNames: [member1]
        exclude: [member9]
        labelSelector:
          matchLabels: {env: prod}
        fieldSelector:
          matchExpressions:
            - {key: region, operator: In, values: [eu-west-1]}
      - affinityName: backup
        clusterNames: [member2]
    clusterTolerations:
      - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
    spreadConstraints:
      - {spreadByField: cluster, maxGroups: 2, minGroups: 1}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - targetCluster: {clusterNames: [member1]}
            weight: 1
          - targetCluster: {clusterNames: [member2]}
            weight: 2
  priority: 10
  preemption: Always
  schedulerName: default-scheduler
  failover:
    application:
      decisionConditions: {tolerationSeconds: 120}
      purgeMode: Gracefully
      gracePeriodSeconds: 600
  conflictResolution: Overwrite
  activationPreference: Lazy
  suspension:
    dispatching: true
  preserveResourcesOnDeletion: true
"#,
    );
    assert_eq!(cpp.spec.priority(), 10);
    cpp.validate().unwrap();
}

/// Unknown fields are ignored by the types (forward compatibility) and dropped on the way back;
/// an API server serving the generated structural CRDs prunes them before they are stored.
#[test]
fn unknown_fields_are_ignored() {
    let yaml = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p, namespace: default}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, futureField: 1}]
  someFutureField: {a: b}
"#;
    let pp: PropagationPolicy = serde_yaml::from_str(yaml).unwrap();
    let back = serde_json::to_value(&pp).unwrap();
    assert!(back["spec"].get("someFutureField").is_none());
    assert!(back["spec"]["resourceSelectors"][0].get("futureField").is_none());
    assert_eq!(back["spec"]["resourceSelectors"][0]["kind"], "ConfigMap");
}

/// Values outside an enum are kept verbatim (so validation can name them), never a parse error.
#[test]
fn unknown_enum_values_are_kept() {
    let pp: PropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p, namespace: default}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  activationPreference: Eager
"#,
    );
    assert_eq!(pp.spec.activation_preference.unwrap().as_str(), "Eager");
}

/// Karmada's failover documentation: the application failover policy example and the binding
/// it leads to (an eviction task with `suppressDeletion`), plus a cluster failover task in the
/// shape Karmada's taint manager writes.
#[test]
fn karmada_failover_docs_policy_and_binding() {
    let pp: PropagationPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 120
      purgeMode: Never
    cluster:
      purgeMode: Directly
  propagateDeps: true
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames:
        - member1
        - member2
        - member3
    spreadConstraints:
      - maxGroups: 1
        minGroups: 1
        spreadByField: cluster
"#,
    );
    pp.validate().unwrap();
    let application = pp.spec.failover.as_ref().unwrap().application.as_ref().unwrap();
    assert_eq!(application.toleration_seconds(), 120);
    assert_eq!(
        application.grace_period_seconds(),
        None,
        "only Gracefully has a grace period"
    );

    let rb: ResourceBinding = round_trip(
        r#"
apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: nginx-deployment
  namespace: default
spec:
  resource: {apiVersion: apps/v1, kind: Deployment, namespace: default, name: nginx}
  clusters:
    - name: member1
      replicas: 2
  gracefulEvictionTasks:
    - creationTimestamp: "2023-05-08T09:29:02Z"
      fromCluster: member2
      producer: resource-binding-application-failover-controller
      reason: ApplicationFailure
      suppressDeletion: true
      purgeMode: Never
      clustersBeforeFailover: [member2]
    - fromCluster: member3
      producer: TaintManager
      reason: TaintUntolerated
      purgeMode: Graciously
      replicas: 2
      gracePeriodSeconds: 30
      message: cluster member3 is tainted
      preservedLabelState: {failover.example.com/job: "7"}
status:
  aggregatedStatus:
    - clusterName: member1
      applied: true
      health: Unhealthy
      lastHealthTransitionTime: "2023-05-08T09:27:02Z"
"#,
    );
    let tasks = &rb.spec.graceful_eviction_tasks;
    assert_eq!(
        rb.spec.eviction_task("member2").map(|t| t.reason.as_str()),
        Some("ApplicationFailure")
    );
    assert_eq!(tasks[1].purge_mode(), flotilla_api::policy::PurgeMode::Gracefully);
    assert!(rb.spec.eviction_task("member1").is_none());
}

/// Karmada v1.14's ClusterTaintPolicy example (its release announcement) round-trips, with a
/// taint value added.
#[test]
fn karmada_cluster_taint_policy() {
    let policy: flotilla_api::ClusterTaintPolicy = round_trip(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: detect-cluster-notready
spec:
  targetClusters:
    clusterNames:
    - member1
    - member2
  addOnConditions:
  - conditionType: Ready
    operator: NotIn
    statusValues:
    - "True"
  - conditionType: NetworkAvailable
    operator: NotIn
    statusValues:
    - "True"
  removeOnConditions:
  - conditionType: Ready
    operator: In
    statusValues:
    - "True"
  taints:
  - key: not-ready
    effect: NoSchedule
  - key: not-ready
    value: "yes"
    effect: NoExecute
"#,
    );
    policy.validate().unwrap();
    assert!(policy.spec.has_no_execute_taint());
    assert_eq!(
        policy.spec.taints_summary(),
        "not-ready:NoSchedule,not-ready=yes:NoExecute"
    );
}
