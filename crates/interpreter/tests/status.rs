//! Health, reflected status and aggregated status.

#![allow(clippy::unwrap_used)]

use flotilla_api::work::ResourceHealth;
use flotilla_interpreter::{Health, aggregate_status, awaits_controller, health, reflect_status, try_health};
use serde_json::{Value, json};

fn object(api_version: &str, kind: &str, generation: i64, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"namespace": "ns", "name": "w", "generation": generation},
        "spec": spec,
        "status": status,
    })
}

// ---------------------------------------------------------------------------------------------
// Health.
// ---------------------------------------------------------------------------------------------

#[test]
fn deployment_and_stateful_set_health() {
    for kind in ["Deployment", "StatefulSet"] {
        let spec = json!({"replicas": 3});
        let cases = [
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 3}),
                Health::Healthy,
                "rolled out",
            ),
            (
                json!({"observedGeneration": 1, "updatedReplicas": 3, "availableReplicas": 3}),
                Health::Unhealthy,
                "old generation",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 3}),
                Health::Unhealthy,
                "not all updated",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 2}),
                Health::Unhealthy,
                "not all available",
            ),
            (json!(null), Health::Unhealthy, "no status yet"),
        ];
        for (status, expected, why) in cases {
            assert_eq!(
                health(&object("apps/v1", kind, 2, spec.clone(), status)),
                expected,
                "{kind}: {why}"
            );
        }
        // Without spec.replicas only generation and availability count (Karmada).
        let obj = object(
            "apps/v1",
            kind,
            1,
            json!({}),
            json!({"observedGeneration": 1, "updatedReplicas": 0}),
        );
        assert_eq!(health(&obj), Health::Healthy, "{kind}");
    }
}

#[test]
fn replica_set_and_daemon_set_health() {
    let rs = |status| object("apps/v1", "ReplicaSet", 1, json!({"replicas": 2}), status);
    assert_eq!(
        health(&rs(json!({"observedGeneration": 1, "availableReplicas": 2}))),
        Health::Healthy
    );
    assert_eq!(
        health(&rs(json!({"observedGeneration": 1, "availableReplicas": 1}))),
        Health::Unhealthy
    );
    assert_eq!(
        health(&rs(json!({"observedGeneration": 0, "availableReplicas": 2}))),
        Health::Unhealthy
    );
    let ds = |status| object("apps/v1", "DaemonSet", 1, json!({}), status);
    let ok = json!({"observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3});
    assert_eq!(health(&ds(ok)), Health::Healthy);
    let rolling = json!({"observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 2, "numberAvailable": 3});
    assert_eq!(health(&ds(rolling)), Health::Unhealthy);
    let unavailable = json!({"observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 1});
    assert_eq!(health(&ds(unavailable)), Health::Unhealthy);
}

#[test]
fn job_health() {
    let job = |status| object("batch/v1", "Job", 1, json!({}), status);
    assert_eq!(health(&job(json!({"active": 2}))), Health::Healthy, "running");
    assert_eq!(
        health(&job(
            json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1})
        )),
        Health::Healthy
    );
    assert_eq!(
        health(&job(
            json!({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]})
        )),
        Health::Unhealthy
    );
    assert_eq!(
        health(&job(
            json!({"conditions": [{"type": "Failed", "status": "False"}]})
        )),
        Health::Healthy
    );
}

#[test]
fn pod_health() {
    let pod = |status| object("v1", "Pod", 1, json!({}), status);
    let ready =
        |value: &str| json!([{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": value}]);
    assert_eq!(
        health(&pod(json!({"phase": "Running", "conditions": ready("True")}))),
        Health::Healthy
    );
    assert_eq!(
        health(&pod(json!({"phase": "Running", "conditions": ready("False")}))),
        Health::Unhealthy
    );
    assert_eq!(health(&pod(json!({"phase": "Running"}))), Health::Unhealthy);
    assert_eq!(health(&pod(json!({"phase": "Succeeded"}))), Health::Healthy);
    assert_eq!(
        health(&pod(json!({"phase": "Pending", "conditions": ready("True")}))),
        Health::Unhealthy
    );
    assert_eq!(health(&pod(json!({"phase": "Failed"}))), Health::Unhealthy);
}

#[test]
fn service_ingress_claim_and_budget_health() {
    let service = |spec, status| object("v1", "Service", 1, spec, status);
    assert_eq!(
        health(&service(json!({"type": "ClusterIP"}), json!({}))),
        Health::Healthy
    );
    assert_eq!(health(&service(json!({}), json!(null))), Health::Healthy);
    let lb = json!({"type": "LoadBalancer"});
    assert_eq!(
        health(&service(lb.clone(), json!({"loadBalancer": {}}))),
        Health::Unhealthy
    );
    assert_eq!(
        health(&service(
            lb.clone(),
            json!({"loadBalancer": {"ingress": [{"ip": ""}]}})
        )),
        Health::Unhealthy
    );
    assert_eq!(
        health(&service(
            lb.clone(),
            json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}})
        )),
        Health::Healthy
    );
    assert_eq!(
        health(&service(
            lb,
            json!({"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}})
        )),
        Health::Healthy
    );
    let ingress = |status| object("networking.k8s.io/v1", "Ingress", 1, json!({}), status);
    assert_eq!(health(&ingress(json!({}))), Health::Unhealthy);
    assert_eq!(
        health(&ingress(
            json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}})
        )),
        Health::Healthy
    );
    let claim = |phase| {
        object(
            "v1",
            "PersistentVolumeClaim",
            1,
            json!({}),
            json!({"phase": phase}),
        )
    };
    assert_eq!(health(&claim("Bound")), Health::Healthy);
    assert_eq!(health(&claim("Pending")), Health::Unhealthy);
    let pdb = |current, desired| {
        object(
            "policy/v1",
            "PodDisruptionBudget",
            1,
            json!({}),
            json!({"currentHealthy": current, "desiredHealthy": desired}),
        )
    };
    assert_eq!(health(&pdb(3, 2)), Health::Healthy);
    assert_eq!(health(&pdb(1, 2)), Health::Unhealthy);
}

#[test]
fn kinds_without_a_health_rule_are_healthy() {
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("example.io/v1", "Workflow"),
        ("batch/v1", "CronJob"),
        ("v1", "PersistentVolume"),
        ("apps/v1beta1", "Deployment"),
    ] {
        let obj = object(
            api_version,
            kind,
            5,
            json!({"replicas": 3}),
            json!({"phase": "Failed"}),
        );
        assert_eq!(health(&obj), Health::Healthy, "{api_version} {kind}");
    }
    assert_eq!(health(&json!("not even an object")), Health::Healthy);
}

#[test]
fn malformed_known_kinds_have_unknown_health() {
    let obj = object(
        "apps/v1",
        "Deployment",
        1,
        json!({"replicas": 1}),
        json!({"updatedReplicas": "1"}),
    );
    assert_eq!(health(&obj), Health::Unknown);
    let err = try_health(&obj).unwrap_err();
    assert_eq!(err.path(), "status.updatedReplicas");
    let obj = object("v1", "Pod", 1, json!({}), json!("Running"));
    assert_eq!(health(&obj), Health::Unknown);
    let obj = object(
        "v1",
        "Pod",
        1,
        json!({}),
        json!({"phase": "Running", "conditions": {"Ready": true}}),
    );
    assert_eq!(try_health(&obj).unwrap_err().path(), "status.conditions");
    assert_eq!(
        try_health(&object("v1", "ConfigMap", 1, json!({}), json!(1))).unwrap(),
        Health::Healthy
    );
}

/// Every kind whose controller records the generation it acted on is awaited until it has
/// (no status, an older one, or a missing `observedGeneration`); an observed generation ends
/// the wait whatever the counts say; other kinds, other API versions and objects that cannot
/// be read are never awaited.
#[test]
fn controllers_are_awaited_until_they_observe_the_generation() {
    let observed = |generation: i64| json!({"observedGeneration": generation, "replicas": 0});
    for kind in ["Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"] {
        let spec = json!({"replicas": 3});
        assert!(
            awaits_controller(&object("apps/v1", kind, 1, spec.clone(), Value::Null)),
            "{kind}: just created"
        );
        let mut fresh = object("apps/v1", kind, 1, spec.clone(), Value::Null);
        fresh.as_object_mut().unwrap().remove("status");
        assert!(awaits_controller(&fresh), "{kind}: no status field");
        assert!(
            awaits_controller(&object("apps/v1", kind, 1, spec.clone(), json!({}))),
            "{kind}: empty status"
        );
        assert!(
            awaits_controller(&object("apps/v1", kind, 2, spec.clone(), observed(1))),
            "{kind}: spec changed"
        );
        assert!(
            !awaits_controller(&object("apps/v1", kind, 2, spec.clone(), observed(2))),
            "{kind}: observed"
        );
        // Unavailable but observed: the controller has reported; health says the rest.
        assert!(
            !awaits_controller(&object("apps/v1", kind, 1, spec.clone(), observed(1))),
            "{kind}: 0 ready"
        );
        // Not the apps/v1 kind, or unreadable: not waited for.
        assert!(!awaits_controller(&object(
            "apps/v1beta1",
            kind,
            1,
            spec.clone(),
            Value::Null
        )));
        assert!(!awaits_controller(&object(
            "apps/v1",
            kind,
            1,
            spec.clone(),
            json!({"observedGeneration": "1"})
        )));
        assert!(!awaits_controller(&object(
            "apps/v1",
            kind,
            1,
            spec,
            json!("Running")
        )));
    }
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "Service"),
        ("v1", "Pod"),
        ("v1", "PersistentVolumeClaim"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("example.io/v1", "Widget"),
    ] {
        assert!(
            !awaits_controller(&object(api_version, kind, 1, json!({}), Value::Null)),
            "{kind}"
        );
    }
}

#[test]
fn health_converts_to_the_api_enum() {
    assert_eq!(ResourceHealth::from(Health::Healthy), ResourceHealth::Healthy);
    assert_eq!(ResourceHealth::from(Health::Unhealthy), ResourceHealth::Unhealthy);
    assert_eq!(ResourceHealth::from(Health::Unknown), ResourceHealth::Unknown);
}

// ---------------------------------------------------------------------------------------------
// Reflected status.
// ---------------------------------------------------------------------------------------------

fn member(kind: &str, api_version: &str, generation: i64, template_generation: &str, status: Value) -> Value {
    let mut obj = object(api_version, kind, generation, json!({}), status);
    obj["metadata"]["annotations"] = json!({"resourcetemplate.karmada.io/generation": template_generation});
    obj
}

#[test]
fn deployment_reflects_counts_and_generations() {
    let obj = member(
        "Deployment",
        "apps/v1",
        4,
        "7",
        json!({
            "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
            "unavailableReplicas": 1, "observedGeneration": 4,
            "conditions": [{"type": "Available", "status": "True"}], "collisionCount": 1,
        }),
    );
    assert_eq!(
        reflect_status(&obj),
        Some(json!({
            "generation": 4, "resourceTemplateGeneration": 7,
            "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
            "unavailableReplicas": 1, "observedGeneration": 4,
        }))
    );
    // Nothing collected yet: no status, or a status with nothing to reflect.
    let mut bare = member("Deployment", "apps/v1", 0, "x", json!({"conditions": []}));
    assert_eq!(reflect_status(&bare), None);
    bare.as_object_mut().unwrap().remove("status");
    assert_eq!(reflect_status(&bare), None);
    // A bad annotation reads as 0 (not caught up); wrong-typed counts are left out.
    let odd = member(
        "Deployment",
        "apps/v1",
        2,
        "seven",
        json!({"replicas": "3", "readyReplicas": 1}),
    );
    assert_eq!(
        reflect_status(&odd),
        Some(json!({"generation": 2, "readyReplicas": 1}))
    );
}

#[test]
fn stateful_set_reflects_counts_and_observed_generation() {
    let obj = member(
        "StatefulSet",
        "apps/v1",
        3,
        "2",
        json!({
            "replicas": 3, "readyReplicas": 3, "currentReplicas": 3, "updatedReplicas": 3,
            "availableReplicas": 3, "observedGeneration": 3, "currentRevision": "web-1", "collisionCount": 0,
        }),
    );
    assert_eq!(
        reflect_status(&obj),
        Some(json!({
            "generation": 3, "resourceTemplateGeneration": 2, "availableReplicas": 3,
            "currentReplicas": 3, "readyReplicas": 3, "replicas": 3, "updatedReplicas": 3,
            "observedGeneration": 3,
        }))
    );
}

#[test]
fn replica_set_and_daemon_set_reflect_their_counts() {
    let rs = member(
        "ReplicaSet",
        "apps/v1",
        1,
        "1",
        json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "fullyLabeledReplicas": 2, "observedGeneration": 1}),
    );
    assert_eq!(
        reflect_status(&rs),
        Some(
            json!({"generation": 1, "resourceTemplateGeneration": 1, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1})
        )
    );
    let ds = member(
        "DaemonSet",
        "apps/v1",
        1,
        "1",
        json!({"currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberReady": 2, "numberAvailable": 2, "updatedNumberScheduled": 2, "numberMisscheduled": 0, "observedGeneration": 1, "collisionCount": 3}),
    );
    assert_eq!(
        reflect_status(&ds),
        Some(
            json!({"generation": 1, "resourceTemplateGeneration": 1, "currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberReady": 2, "numberAvailable": 2, "updatedNumberScheduled": 2, "observedGeneration": 1})
        )
    );
}

#[test]
fn job_reflects_progress_conditions_and_times() {
    let status = json!({
        "active": 1, "succeeded": 2, "failed": 0, "ready": 1, "terminating": 0,
        "conditions": [{"type": "SuccessCriteriaMet", "status": "False"}],
        "startTime": "2024-01-01T00:00:00Z", "uncountedTerminatedPods": {},
    });
    let obj = object("batch/v1", "Job", 1, json!({}), status);
    assert_eq!(
        reflect_status(&obj),
        Some(json!({
            "active": 1, "succeeded": 2, "failed": 0,
            "conditions": [{"type": "SuccessCriteriaMet", "status": "False"}],
            "startTime": "2024-01-01T00:00:00Z",
        }))
    );
}

#[test]
fn pods_and_unknown_kinds_reflect_the_whole_status() {
    let status =
        json!({"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [{"name": "c", "ready": true}]});
    assert_eq!(
        reflect_status(&object("v1", "Pod", 1, json!({}), status.clone())),
        Some(status.clone())
    );
    assert_eq!(
        reflect_status(&object("example.io/v1", "Workflow", 1, json!({}), status.clone())),
        Some(status)
    );
    assert_eq!(
        reflect_status(&object("example.io/v1", "Workflow", 1, json!({}), json!("done"))),
        None
    );
    assert_eq!(
        reflect_status(&json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {}})),
        None
    );
}

#[test]
fn services_reflect_load_balancer_status_only() {
    let status = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}, "conditions": []});
    let lb = object(
        "v1",
        "Service",
        1,
        json!({"type": "LoadBalancer"}),
        status.clone(),
    );
    assert_eq!(
        reflect_status(&lb),
        Some(json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}))
    );
    let pending = object("v1", "Service", 1, json!({"type": "LoadBalancer"}), json!({}));
    assert_eq!(reflect_status(&pending), Some(json!({"loadBalancer": {}})));
    let cluster_ip = object("v1", "Service", 1, json!({"type": "ClusterIP"}), status);
    assert_eq!(reflect_status(&cluster_ip), None);
}

#[test]
fn budgets_and_autoscalers_reflect_selected_fields() {
    let pdb = object(
        "policy/v1",
        "PodDisruptionBudget",
        1,
        json!({}),
        json!({"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3, "observedGeneration": 1}),
    );
    assert_eq!(
        reflect_status(&pdb),
        Some(json!({"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}))
    );
    let hpa = object(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        1,
        json!({}),
        json!({"currentReplicas": 2, "desiredReplicas": 4, "currentMetrics": []}),
    );
    assert_eq!(
        reflect_status(&hpa),
        Some(json!({"currentReplicas": 2, "desiredReplicas": 4}))
    );
}

// ---------------------------------------------------------------------------------------------
// Aggregated status.
// ---------------------------------------------------------------------------------------------

fn items(list: &[(&str, Value)]) -> Vec<(String, Value)> {
    list.iter().map(|(c, s)| ((*c).to_owned(), s.clone())).collect()
}

fn deployment_member(generation: i64, observed: i64, template_generation: i64, counts: i64) -> Value {
    json!({
        "generation": generation, "resourceTemplateGeneration": template_generation, "observedGeneration": observed,
        "replicas": counts, "readyReplicas": counts, "updatedReplicas": counts, "availableReplicas": counts,
    })
}

#[test]
fn deployment_counts_are_summed_and_generation_follows_every_member() {
    let template = object(
        "apps/v1",
        "Deployment",
        5,
        json!({"replicas": 5}),
        json!({"observedGeneration": 4, "conditions": [{"type": "Available", "status": "True"}], "replicas": 9, "unavailableReplicas": 2}),
    );
    let caught_up = items(&[
        ("m1", deployment_member(2, 2, 5, 2)),
        ("m2", deployment_member(7, 7, 6, 3)),
    ]);
    assert_eq!(
        aggregate_status(&template, &caught_up),
        Some(json!({
            "observedGeneration": 5, "conditions": [{"type": "Available", "status": "True"}],
            "replicas": 5, "readyReplicas": 5, "updatedReplicas": 5, "availableReplicas": 5,
        }))
    );
    // One member still on an older template: observedGeneration stays.
    let behind = items(&[
        ("m1", deployment_member(2, 2, 4, 2)),
        ("m2", deployment_member(7, 7, 5, 3)),
    ]);
    assert_eq!(
        aggregate_status(&template, &behind).unwrap()["observedGeneration"],
        json!(4)
    );
    // One member whose controller has not observed its own latest spec.
    let stale = items(&[
        ("m1", deployment_member(3, 2, 5, 2)),
        ("m2", deployment_member(7, 7, 5, 3)),
    ]);
    assert_eq!(
        aggregate_status(&template, &stale).unwrap()["observedGeneration"],
        json!(4)
    );
    // A member whose status was not collected yet holds the generation back but adds nothing.
    let uncollected = items(&[("m1", deployment_member(2, 2, 5, 2)), ("m2", Value::Null)]);
    let got = aggregate_status(&template, &uncollected).unwrap();
    assert_eq!(got["observedGeneration"], json!(4));
    assert_eq!(got["replicas"], json!(2));
}

#[test]
fn deployment_status_round_trips_from_member_objects() {
    let members = [("m1", 2), ("m2", 1)].map(|(cluster, replicas)| {
        let obj = member(
            "Deployment",
            "apps/v1",
            3,
            "8",
            json!({"replicas": replicas, "readyReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas, "observedGeneration": 3}),
        );
        (cluster.to_owned(), reflect_status(&obj).unwrap())
    });
    let template = object("apps/v1", "Deployment", 8, json!({"replicas": 3}), json!(null));
    assert_eq!(
        aggregate_status(&template, &members),
        Some(
            json!({"observedGeneration": 8, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3})
        )
    );
}

#[test]
fn stateful_set_counts_are_summed() {
    let template = object("apps/v1", "StatefulSet", 2, json!({"replicas": 4}), json!({}));
    let member = |counts: i64, template_generation: i64| {
        json!({"generation": 1, "observedGeneration": 1, "resourceTemplateGeneration": template_generation,
               "replicas": counts, "readyReplicas": counts, "currentReplicas": counts, "updatedReplicas": counts, "availableReplicas": counts})
    };
    assert_eq!(
        aggregate_status(&template, &items(&[("m1", member(1, 2)), ("m2", member(3, 2))])),
        Some(
            json!({"observedGeneration": 2, "replicas": 4, "readyReplicas": 4, "currentReplicas": 4, "updatedReplicas": 4, "availableReplicas": 4})
        )
    );
    // The template's generation, not the member's, decides whether a member caught up.
    let got = aggregate_status(&template, &items(&[("m1", member(1, 1)), ("m2", member(3, 2))])).unwrap();
    assert!(got.get("observedGeneration").is_none(), "{got}");
}

#[test]
fn replica_set_and_daemon_set_counts_are_summed() {
    let rs = object("apps/v1", "ReplicaSet", 1, json!({}), json!({}));
    let member = json!({"generation": 1, "observedGeneration": 1, "resourceTemplateGeneration": 1, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1});
    assert_eq!(
        aggregate_status(&rs, &items(&[("m1", member.clone()), ("m2", member)])),
        Some(json!({"observedGeneration": 1, "replicas": 4, "readyReplicas": 2, "availableReplicas": 2}))
    );
    let ds = object("apps/v1", "DaemonSet", 1, json!({}), json!({}));
    let member = json!({"generation": 1, "observedGeneration": 1, "resourceTemplateGeneration": 1, "currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberReady": 2, "numberAvailable": 1, "numberUnavailable": 1, "updatedNumberScheduled": 2});
    assert_eq!(
        aggregate_status(&ds, &items(&[("m1", member.clone()), ("m2", member)])),
        Some(
            json!({"observedGeneration": 1, "currentNumberScheduled": 4, "desiredNumberScheduled": 4, "numberReady": 4, "numberAvailable": 2, "numberUnavailable": 2, "updatedNumberScheduled": 4})
        )
    );
}

fn condition(kind: &str, time: &str) -> Value {
    json!({"type": kind, "status": "True", "lastTransitionTime": time, "lastProbeTime": time})
}

#[test]
fn job_progress_is_summed_while_running() {
    let template = object("batch/v1", "Job", 1, json!({}), json!({}));
    let members = items(&[
        (
            "m1",
            json!({"active": 2, "succeeded": 1, "startTime": "2024-01-01T00:00:05Z"}),
        ),
        (
            "m2",
            json!({"active": 1, "failed": 1, "startTime": "2024-01-01T00:00:02Z"}),
        ),
    ]);
    assert_eq!(
        aggregate_status(&template, &members),
        Some(json!({"active": 3, "succeeded": 1, "failed": 1, "startTime": "2024-01-01T00:00:02Z"}))
    );
    // A start time only once every cluster started; an existing one is kept.
    let partly = items(&[
        ("m1", json!({"active": 1, "startTime": "2024-01-01T00:00:05Z"})),
        ("m2", Value::Null),
    ]);
    assert_eq!(aggregate_status(&template, &partly), Some(json!({"active": 1})));
    let started = object(
        "batch/v1",
        "Job",
        1,
        json!({}),
        json!({"startTime": "2023-12-31T00:00:00Z"}),
    );
    assert_eq!(
        aggregate_status(&started, &members).unwrap()["startTime"],
        json!("2023-12-31T00:00:00Z")
    );
}

#[test]
fn job_completes_when_every_cluster_completes() {
    let template = object("batch/v1", "Job", 1, json!({}), json!({"active": 2}));
    let done = |at: &str| {
        json!({"succeeded": 2, "startTime": "2024-01-01T00:00:00Z", "completionTime": at,
               "conditions": [condition("SuccessCriteriaMet", at), condition("Complete", at)]})
    };
    let members = items(&[
        ("m1", done("2024-01-01T00:10:00Z")),
        ("m2", done("2024-01-01T00:20:00Z")),
    ]);
    assert_eq!(
        aggregate_status(&template, &members),
        Some(json!({
            "succeeded": 4,
            "conditions": [
                {"type": "Complete", "status": "True", "lastProbeTime": "2024-01-01T00:20:00Z", "lastTransitionTime": "2024-01-01T00:20:00Z", "reason": "Completed", "message": "Job completed"},
                {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": "2024-01-01T00:20:00Z", "lastTransitionTime": "2024-01-01T00:20:00Z", "reason": "CompletionsReached", "message": "All member clusters have met success criteria"},
            ],
            "startTime": "2024-01-01T00:00:00Z",
            "completionTime": "2024-01-01T00:20:00Z",
        }))
    );
    // One cluster still running: not complete, no completion time.
    let members = items(&[
        ("m1", done("2024-01-01T00:10:00Z")),
        ("m2", json!({"active": 1, "startTime": "2024-01-01T00:00:00Z"})),
    ]);
    let got = aggregate_status(&template, &members).unwrap();
    assert!(got.get("conditions").is_none(), "{got}");
    assert!(got.get("completionTime").is_none(), "{got}");
    assert_eq!(got["active"], json!(1));
}

#[test]
fn job_failure_names_the_failed_clusters() {
    let template = object("batch/v1", "Job", 1, json!({}), json!({}));
    let failed = |at: &str| json!({"failed": 3, "conditions": [condition("Failed", at)]});
    let members = items(&[
        ("m1", failed("2024-01-01T00:05:00Z")),
        ("m2", json!({"active": 1})),
        ("m3", failed("2024-01-01T00:07:00+02:00")),
    ]);
    let got = aggregate_status(&template, &members).unwrap();
    assert_eq!(
        got["conditions"],
        json!([{
            "type": "Failed", "status": "True",
            // 00:07+02:00 is earlier than 00:05Z: times are compared as times, not text.
            "lastProbeTime": "2024-01-01T00:05:00Z", "lastTransitionTime": "2024-01-01T00:05:00Z",
            "reason": "JobFailed", "message": "Job executed failed in member clusters m1,m3",
        }])
    );
    assert_eq!(got["failed"], json!(6));
}

#[test]
fn finished_jobs_keep_their_status() {
    for kind in ["Complete", "Failed"] {
        let status = json!({"succeeded": 1, "conditions": [{"type": kind, "status": "True"}]});
        let template = object("batch/v1", "Job", 1, json!({}), status.clone());
        let members = items(&[("m1", json!({"active": 5}))]);
        assert_eq!(aggregate_status(&template, &members), Some(status), "{kind}");
    }
}

#[test]
fn pod_phase_is_the_most_severe_and_containers_are_listed() {
    let template = object("v1", "Pod", 1, json!({}), json!({"phase": "Pending"}));
    let running = json!({"phase": "Running", "podIP": "10.0.0.1",
        "containerStatuses": [{"name": "c", "ready": true, "restartCount": 2, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}],
        "initContainerStatuses": [{"name": "i", "ready": false, "state": {"terminated": {"exitCode": 0}}}]});
    let succeeded = json!({"phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": false}]});
    assert_eq!(
        aggregate_status(
            &template,
            &items(&[("m1", running.clone()), ("m2", succeeded.clone())])
        ),
        Some(json!({
            "phase": "Running",
            "containerStatuses": [
                {"ready": true, "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}},
                {"ready": false, "state": {}},
            ],
            "initContainerStatuses": [{"ready": false, "state": {"terminated": {"exitCode": 0}}}],
        }))
    );
    let phase =
        |members: &[(&str, Value)]| aggregate_status(&template, &items(members)).unwrap()["phase"].clone();
    assert_eq!(
        phase(&[("m1", succeeded.clone()), ("m2", succeeded.clone())]),
        json!("Succeeded")
    );
    assert_eq!(
        phase(&[("m1", running.clone()), ("m2", Value::Null)]),
        json!("Pending"),
        "uncollected counts as Pending"
    );
    assert_eq!(
        phase(&[("m1", running.clone()), ("m2", json!({"phase": "Failed"}))]),
        json!("Failed")
    );
    assert_eq!(
        phase(&[("m1", json!({"phase": "Pending"})), ("m2", running)]),
        json!("Pending")
    );
    // Only an unknown phase: no phase at all.
    let got = aggregate_status(&template, &items(&[("m1", json!({"phase": "Unknown"}))])).unwrap();
    assert_eq!(got, json!({}));
    // No clusters: the template's status is kept.
    assert_eq!(
        aggregate_status(&template, &[]),
        Some(json!({"phase": "Pending"}))
    );
}

#[test]
fn unknown_kinds_are_not_aggregated() {
    let members = items(&[("m1", json!({"phase": "Ready"}))]);
    for (api_version, kind) in [
        ("example.io/v1", "Workflow"),
        ("v1", "ConfigMap"),
        ("apps/v1beta1", "Deployment"),
    ] {
        let template = object(api_version, kind, 1, json!({}), json!({"phase": "Old"}));
        assert_eq!(
            aggregate_status(&template, &members),
            None,
            "{api_version} {kind}"
        );
    }
    assert_eq!(aggregate_status(&json!("x"), &members), None);
}

#[test]
fn cron_job_merges_active_jobs_and_latest_times() {
    let template = object(
        "batch/v1",
        "CronJob",
        1,
        json!({}),
        json!({"lastScheduleTime": "2023-01-01T00:00:00Z"}),
    );
    let members = items(&[
        (
            "m1",
            json!({"active": [{"name": "j1"}], "lastScheduleTime": "2024-01-01T01:00:00Z", "lastSuccessfulTime": "2024-01-01T00:30:00Z"}),
        ),
        (
            "m2",
            json!({"active": [{"name": "j2"}], "lastScheduleTime": "2024-01-01T02:00:00Z"}),
        ),
        ("m3", Value::Null),
    ]);
    assert_eq!(
        aggregate_status(&template, &members),
        Some(
            json!({"active": [{"name": "j1"}, {"name": "j2"}], "lastScheduleTime": "2024-01-01T02:00:00Z", "lastSuccessfulTime": "2024-01-01T00:30:00Z"})
        )
    );
}

#[test]
fn load_balancer_ingresses_are_merged_and_sorted() {
    let service = object("v1", "Service", 1, json!({"type": "LoadBalancer"}), json!({}));
    let members = items(&[
        (
            "m1",
            json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.2", "ports": [{"port": 443, "protocol": "TCP"}]}]}}),
        ),
        (
            "m2",
            json!({"loadBalancer": {"ingress": [
                {"ip": "10.0.0.1"},
                {"ip": "10.0.0.2", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]},
            ]}}),
        ),
        ("m3", Value::Null),
    ]);
    let expected = json!({"loadBalancer": {"ingress": [
        {"ip": "10.0.0.1"},
        {"ip": "10.0.0.2", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]},
    ]}});
    assert_eq!(aggregate_status(&service, &members), Some(expected.clone()));
    let ingress = object("networking.k8s.io/v1", "Ingress", 1, json!({}), json!({}));
    assert_eq!(aggregate_status(&ingress, &members), Some(expected));
    // Other Service types keep their status; nothing is collected for them.
    let cluster_ip = object(
        "v1",
        "Service",
        1,
        json!({"type": "ClusterIP"}),
        json!({"conditions": []}),
    );
    assert_eq!(
        aggregate_status(&cluster_ip, &members),
        Some(json!({"conditions": []}))
    );
    let mut no_status = cluster_ip.clone();
    no_status.as_object_mut().unwrap().remove("status");
    assert_eq!(aggregate_status(&no_status, &members), None);
}

#[test]
fn volume_and_claim_phases() {
    let pv = object("v1", "PersistentVolume", 1, json!({}), json!({}));
    let phase =
        |template: &Value, members: &[(&str, Value)]| aggregate_status(template, &items(members)).unwrap();
    assert_eq!(
        phase(
            &pv,
            &[
                ("m1", json!({"phase": "Bound"})),
                ("m2", json!({"phase": "Available"}))
            ]
        ),
        json!({"phase": "Available"})
    );
    assert_eq!(
        phase(&pv, &[("m1", json!({"phase": "Bound"})), ("m2", Value::Null)]),
        json!({"phase": "Pending"})
    );
    assert_eq!(
        phase(
            &pv,
            &[
                ("m1", json!({"phase": "Released"})),
                ("m2", json!({"phase": "Failed"}))
            ]
        ),
        json!({"phase": "Failed"})
    );
    let pvc = object("v1", "PersistentVolumeClaim", 1, json!({}), json!({}));
    assert_eq!(
        phase(
            &pvc,
            &[
                ("m1", json!({"phase": "Bound"})),
                ("m2", json!({"phase": "Bound"}))
            ]
        ),
        json!({"phase": "Bound"})
    );
    assert_eq!(
        phase(
            &pvc,
            &[
                ("m1", json!({"phase": "Pending"})),
                ("m2", json!({"phase": "Bound"}))
            ]
        ),
        json!({"phase": "Pending"})
    );
    assert_eq!(
        phase(
            &pvc,
            &[
                ("m1", json!({"phase": "Pending"})),
                ("m2", json!({"phase": "Lost"}))
            ]
        ),
        json!({"phase": "Lost"})
    );
    assert_eq!(phase(&pvc, &[("m1", Value::Null)]), json!({"phase": "Bound"}));
}

#[test]
fn budgets_and_autoscalers_are_summed() {
    let pdb = object("policy/v1", "PodDisruptionBudget", 1, json!({}), json!({}));
    let members = items(&[
        (
            "m1",
            json!({"currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2, "disruptionsAllowed": 1, "disruptedPods": {"p1": "2024-01-01T00:00:00Z"}}),
        ),
        (
            "m2",
            json!({"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1, "disruptionsAllowed": 0}),
        ),
    ]);
    assert_eq!(
        aggregate_status(&pdb, &members),
        Some(
            json!({"currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 1, "disruptedPods": {"m1/p1": "2024-01-01T00:00:00Z"}})
        )
    );
    let hpa = object(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        1,
        json!({}),
        json!({}),
    );
    let members = items(&[
        ("m1", json!({"currentReplicas": 2, "desiredReplicas": 3})),
        ("m2", json!({"currentReplicas": 1, "desiredReplicas": 1})),
    ]);
    assert_eq!(
        aggregate_status(&hpa, &members),
        Some(json!({"currentReplicas": 3, "desiredReplicas": 4}))
    );
}

#[test]
fn malformed_member_statuses_count_as_not_collected() {
    let template = object("apps/v1", "Deployment", 1, json!({}), json!({}));
    let members = items(&[
        ("m1", json!("garbage")),
        ("m2", json!({"replicas": "2", "readyReplicas": 1})),
    ]);
    let got = aggregate_status(&template, &members).unwrap();
    assert_eq!(got, json!({"readyReplicas": 1}));
}
