//! Component tests of `flotilla-dependency-distributor`: a real control-plane apiserver and the
//! real distributor binary. The tests play the detector and the scheduler (they create the
//! independent bindings with `spec.clusters`) and check the distributor's contract: the
//! recorded dependencies, the attached bindings' `requiredBy`, ownership, deletion, events and
//! metrics. Named after the seed's stories where there is one.
//!
//! The scheduler service is not started yet (it lands on main separately); once it does, add
//! `Service::Scheduler` in `support::start` and assert on the attached bindings' `spec.clusters`
//! as well.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use flotilla_api::policy::ConflictResolution;
use flotilla_api::{ClusterResourceBinding, ResourceBinding};
use flotilla_e2e::wait::stays;
use flotilla_e2e::{Service, eventually, wait_until};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::*;

/// Story 1: a Deployment references a ConfigMap and a Secret that do not exist yet; when they
/// are created they get attached bindings that require them on the Deployment's clusters.
#[tokio::test]
async fn story_1_configmap_and_secret_created_after_the_deployment() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    let web = create(
        &client,
        deployment(
            "web",
            json!({
                "containers": [{"name": "app", "image": "nginx", "envFrom": [{"secretRef": {"name": "web-secret"}}]}],
                "volumes": [{"name": "config", "configMap": {"name": "web-config"}}],
            }),
        ),
    )
    .await;
    bind(&client, &web, true, &["member1", "member2"]).await;
    wait_recorded(
        &client,
        "web-deployment",
        &["ConfigMap/web-config", "Secret/web-secret"],
    )
    .await;
    // The objects do not exist: no attached bindings yet.
    stays(
        "no attached binding before the objects exist",
        Duration::from_secs(1),
        || async {
            get_binding(&client, "default", "web-config-configmap")
                .await
                .is_none()
        },
    )
    .await;

    let config = create(&client, config_map("web-config", "v1")).await;
    create(&client, secret("default", "web-secret")).await;
    let want = vec![snap("web-deployment", &["member1", "member2"])];
    let attached = wait_required_by(&client, "default", "web-config-configmap", want.clone()).await;
    wait_required_by(&client, "default", "web-secret-secret", want).await;

    assert_eq!(attached.spec.resource.kind, "ConfigMap");
    assert_eq!(attached.spec.resource.name, "web-config");
    assert_eq!(attached.spec.resource.uid, config.metadata.uid);
    assert!(!attached.spec.propagate_deps);
    assert_eq!(attached.spec.conflict_resolution, Some(ConflictResolution::Abort));
    let owner = &attached.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "ConfigMap");
    assert_eq!(Some(owner.uid.clone()), config.metadata.uid);
    assert_eq!(owner.controller, Some(true));

    // A content change moves spec.resource.resourceVersion (execution re-applies).
    let before = attached.spec.resource.resource_version.clone();
    update(&client, config_map("web-config", "v2")).await;
    wait_until(
        "the attached binding to follow the new content",
        CONVERGE,
        || async {
            let b = get_binding(&client, "default", "web-config-configmap").await?;
            (b.spec.resource.resource_version != before).then_some(())
        },
    )
    .await;
}

/// PVCs, ServiceAccounts and imagePullSecrets are dependencies too.
#[tokio::test]
async fn pvc_service_account_and_image_pull_secret() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    for object in [
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "default"}}),
        secret("default", "registry"),
    ] {
        create(&client, object).await;
    }
    let db = create(
        &client,
        deployment(
            "db",
            json!({
                "serviceAccountName": "runner",
                "imagePullSecrets": [{"name": "registry"}],
                "containers": [{"name": "db", "image": "postgres"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            }),
        ),
    )
    .await;
    bind(&client, &db, true, &["member3"]).await;
    let want = vec![snap("db-deployment", &["member3"])];
    for name in [
        "data-persistentvolumeclaim",
        "runner-serviceaccount",
        "registry-secret",
    ] {
        wait_required_by(&client, "default", name, want.clone()).await;
    }
}

/// Two workloads share a ConfigMap on different clusters: it is required on the union; deleting
/// one keeps it where the other still runs; deleting both deletes the attached binding.
#[tokio::test]
async fn shared_configmap_goes_to_the_union_and_stays_where_still_needed() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(&client, config_map("shared", "x")).await;
    let volume = json!({"volumes": [{"name": "c", "configMap": {"name": "shared"}}]});
    let web = create(&client, deployment("web", volume.clone())).await;
    let api = create(&client, deployment("api", volume)).await;
    bind(&client, &web, true, &["member1"]).await;
    bind(&client, &api, true, &["member2", "member3"]).await;
    wait_required_by(
        &client,
        "default",
        "shared-configmap",
        vec![
            snap("api-deployment", &["member2", "member3"]),
            snap("web-deployment", &["member1"]),
        ],
    )
    .await;

    unbind(&client, "api-deployment").await;
    wait_required_by(
        &client,
        "default",
        "shared-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;
    unbind(&client, "web-deployment").await;
    wait_gone(&client, "default", "shared-configmap").await;
}

/// Rescheduling the workload moves its dependencies.
#[tokio::test]
async fn rescheduling_the_workload_moves_its_dependencies() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(&client, config_map("cfg", "x")).await;
    let web = create(
        &client,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    bind(&client, &web, true, &["member1"]).await;
    wait_required_by(
        &client,
        "default",
        "cfg-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;
    patch_binding_spec(
        &client,
        "web-deployment",
        json!({"clusters": [{"name": "member2", "replicas": 2}]}),
    )
    .await;
    let attached = wait_required_by(
        &client,
        "default",
        "cfg-configmap",
        vec![snap("web-deployment", &["member2"])],
    )
    .await;
    assert_eq!(attached.spec.required_by[0].clusters[0].replicas, 2);
    // Unscheduled (no cluster fits): nothing requires the dependency any more.
    patch_binding_spec(&client, "web-deployment", json!({"clusters": null})).await;
    wait_gone(&client, "default", "cfg-configmap").await;
}

/// A reference removed from the template: the snapshot goes, then the attached binding.
#[tokio::test]
async fn a_reference_removed_from_the_template_is_cleaned_up() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(&client, config_map("old", "x")).await;
    create(&client, config_map("kept", "x")).await;
    let web = create(
        &client,
        deployment(
            "web",
            json!({"volumes": [{"name": "a", "configMap": {"name": "old"}}, {"name": "b", "configMap": {"name": "kept"}}]}),
        ),
    )
    .await;
    bind(&client, &web, true, &["member1"]).await;
    wait_required_by(
        &client,
        "default",
        "old-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;

    let updated = update(
        &client,
        deployment(
            "web",
            json!({"volumes": [{"name": "b", "configMap": {"name": "kept"}}]}),
        ),
    )
    .await;
    // The detector refreshes the binding on a content change.
    patch_binding_spec(
        &client,
        "web-deployment",
        json!({"resource": {"resourceVersion": updated.metadata.resource_version}}),
    )
    .await;
    wait_gone(&client, "default", "old-configmap").await;
    wait_recorded(&client, "web-deployment", &["ConfigMap/kept"]).await;
    wait_required_by(
        &client,
        "default",
        "kept-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;

    // propagateDeps turned off: everything goes, the annotation too.
    patch_binding_spec(&client, "web-deployment", json!({"propagateDeps": null})).await;
    wait_gone(&client, "default", "kept-configmap").await;
    wait_recorded(&client, "web-deployment", &[]).await;
}

/// A dependency that a policy of its own claims keeps its binding: the distributor writes
/// `requiredBy` only and never deletes it.
#[tokio::test]
async fn a_dependency_with_its_own_policy_keeps_its_binding() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    let cfg = create(&client, config_map("cfg", "x")).await;
    // The detector's binding of the ConfigMap, scheduled by its own policy to member3.
    let own = bind(&client, &cfg, false, &["member3"]).await;
    assert_eq!(own.metadata.name.as_deref(), Some("cfg-configmap"));
    let web = create(
        &client,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    bind(&client, &web, true, &["member1"]).await;
    let attached = wait_required_by(
        &client,
        "default",
        "cfg-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;
    // Its own fields are untouched.
    assert_eq!(attached.spec.clusters, clusters(&["member3"], 1));
    assert_eq!(attached.spec.conflict_resolution, None);
    assert_eq!(attached.metadata.uid, own.metadata.uid);

    unbind(&client, "web-deployment").await;
    wait_required_by(&client, "default", "cfg-configmap", vec![]).await;
    stays(
        "the claimed binding is never deleted",
        Duration::from_secs(1),
        || async { get_binding(&client, "default", "cfg-configmap").await.is_some() },
    )
    .await;
}

/// Beyond Karmada: a ClusterResourceBinding (a PersistentVolume whose CSI spec names Secrets)
/// distributes its namespaced dependencies.
#[tokio::test]
async fn cluster_resource_binding_owner_pv_with_csi_secrets() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "storage"}}),
    )
    .await;
    create(&client, secret("storage", "csi-publish")).await;
    create(&client, secret("storage", "csi-expand")).await;
    let pv = create(
        &client,
        json!({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data"},
            "spec": {
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "csi": {
                    "driver": "csi.example.io", "volumeHandle": "vol-1",
                    "nodePublishSecretRef": {"name": "csi-publish", "namespace": "storage"},
                    "controllerExpandSecretRef": {"name": "csi-expand", "namespace": "storage"},
                },
            },
        }),
    )
    .await;
    bind_cluster(&client, &pv, &["member2"]).await;
    let want = vec![(
        None,
        "data-persistentvolume".to_owned(),
        vec!["member2".to_owned()],
    )];
    wait_required_by(&client, "storage", "csi-publish-secret", want.clone()).await;
    wait_required_by(&client, "storage", "csi-expand-secret", want).await;
    let crb = Api::<ClusterResourceBinding>::all(client.clone())
        .get("data-persistentvolume")
        .await
        .unwrap();
    assert_eq!(recorded_cluster(&crb).len(), 2);
}

fn recorded_cluster(binding: &ClusterResourceBinding) -> Vec<String> {
    let rb = ResourceBinding {
        metadata: binding.metadata.clone(),
        spec: binding.spec.0.clone(),
        status: None,
    };
    recorded(&rb)
}

const WORKFLOW_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "workflows.example.io"},
  "spec": {
    "group": "example.io", "scope": "Namespaced",
    "names": {"plural": "workflows", "singular": "workflow", "kind": "Workflow"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
  }
}"#;

fn rules_config_map(rules: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "flotilla-dependency-rules", "namespace": "flotilla-system"},
        "data": {"rules.yaml": rules},
    })
}

const WORKFLOW_RULES: &str = "apiVersion: flotilla.io/v1alpha1
kind: DependencyRules
rules:
  - apiVersion: example.io/v1
    kind: Workflow
    references:
      - apiVersion: v1
        kind: ConfigMap
        namePaths: [\".spec.steps[*].configMap\"]
";

/// Beyond Karmada: a declarative rule makes a CRD kind's references dependencies; invalid rules
/// keep the last good ones and are reported.
#[tokio::test]
async fn a_crd_kind_via_a_declarative_rule_and_invalid_rules() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(&client, serde_json::from_str(WORKFLOW_CRD).unwrap()).await;
    // The distributor may have created it already for its leader Lease.
    flotilla_e2e::fixtures::apply_value(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flotilla-system"}}),
    )
    .await;
    create(&client, rules_config_map(WORKFLOW_RULES)).await;
    eventually("the rules to be valid", CONVERGE, || async {
        metric(&env, "flotilla_dependency_rules_valid{source=\"configmap\"}").await == Some(1.0)
    })
    .await;
    create(&client, config_map("step-1", "x")).await;
    let workflow = wait_until("the Workflow CRD to be served", CONVERGE, || {
        let client = client.clone();
        async move {
            let object = json!({"apiVersion": "example.io/v1", "kind": "Workflow",
                "metadata": {"name": "nightly", "namespace": "default"},
                "spec": {"steps": [{"configMap": "step-1"}]}});
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
                client,
                "default",
                &kube::discovery::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
                    "example.io",
                    "v1",
                    "Workflow",
                )),
            );
            api.create(&PostParams::default(), &serde_json::from_value(object).unwrap())
                .await
                .ok()
        }
    })
    .await;
    bind(&client, &workflow, true, &["member1"]).await;
    wait_required_by(
        &client,
        "default",
        "step-1-configmap",
        vec![snap("nightly-workflow", &["member1"])],
    )
    .await;

    // Invalid rules: rejected with a Warning event on the ConfigMap, last good rules kept.
    let bad = WORKFLOW_RULES.replace("\".spec.steps[*].configMap\"", "\"spec.steps\"");
    update(&client, rules_config_map(&bad)).await;
    eventually("the rules to be rejected", CONVERGE, || async {
        metric(&env, "flotilla_dependency_rules_valid{source=\"configmap\"}").await == Some(0.0)
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), "flotilla-system");
    wait_until("a Warning event on the rules ConfigMap", CONVERGE, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidDependencyRules"))
            .filter(|e| e.note.as_deref().is_some_and(|n| n.contains("namePaths[0]")))
            .map(|_| ())
    })
    .await;
    let (_, readyz) = env
        .http_get(Service::DependencyDistributor, "/readyz?verbose")
        .await
        .unwrap();
    assert!(readyz.contains("rejected"), "{readyz}");
    stays(
        "the last good rules stay in force",
        Duration::from_secs(1),
        || async {
            get_binding(&client, "default", "step-1-configmap")
                .await
                .is_some()
        },
    )
    .await;

    // Removing the rules removes the Workflow's dependencies.
    let rules: Api<ConfigMap> = Api::namespaced(client.clone(), "flotilla-system");
    rules
        .delete("flotilla-dependency-rules", &Default::default())
        .await
        .unwrap();
    wait_gone(&client, "default", "step-1-configmap").await;
}

/// Disagreeing referencing bindings: Abort wins, a condition and an event say so.
#[tokio::test]
async fn disagreements_are_resolved_and_surfaced() {
    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(&client, config_map("shared", "x")).await;
    let volume = json!({"volumes": [{"name": "c", "configMap": {"name": "shared"}}]});
    let web = create(&client, deployment("web", volume.clone())).await;
    let api = create(&client, deployment("api", volume)).await;
    bind(&client, &web, true, &["member1"]).await;
    bind(&client, &api, true, &["member1", "member2"]).await;
    patch_binding_spec(
        &client,
        "web-deployment",
        json!({"conflictResolution": "Overwrite", "suspension": {"dispatching": true}}),
    )
    .await;
    wait_until("the DependencyConflict condition", CONVERGE, || async {
        let b = get_binding(&client, "default", "shared-configmap").await?;
        let condition = b
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "DependencyConflict" && c.status == "True")?;
        assert!(
            condition.message.contains("conflictResolution"),
            "{}",
            condition.message
        );
        assert_eq!(b.spec.conflict_resolution, Some(ConflictResolution::Abort));
        // member1 is suspended by web but not by api; member2 only by... nobody.
        assert_eq!(b.spec.suspension, None);
        Some(())
    })
    .await;
    // Both suspend member1 now: the dependency is suspended there, not on member2.
    patch_binding_spec(
        &client,
        "api-deployment",
        json!({"conflictResolution": "Overwrite", "suspension": {"dispatchingOnClusters": {"clusterNames": ["member1"]}}}),
    )
    .await;
    wait_until("the disagreement to clear", CONVERGE, || async {
        let b = get_binding(&client, "default", "shared-configmap").await?;
        let cleared = b
            .status
            .as_ref()?
            .conditions
            .iter()
            .any(|c| c.type_ == "DependencyConflict" && c.status == "False");
        let suspended = b
            .spec
            .suspension
            .as_ref()
            .and_then(|s| s.dispatching_on_clusters.as_ref())
            .map(|c| c.cluster_names.clone());
        (cleared
            && b.spec.conflict_resolution == Some(ConflictResolution::Overwrite)
            && suspended == Some(vec!["member1".to_owned()]))
        .then_some(())
    })
    .await;
}

/// `--feature-gates=PropagateDeps=false`: the distributor is ready and does nothing.
#[tokio::test]
async fn feature_gate_off_distributes_nothing() {
    let mut env = start(&["--feature-gates", "PropagateDeps=false"]).await;
    let client = env.control_plane_client().await;
    create(&client, config_map("cfg", "x")).await;
    let web = create(
        &client,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    bind(&client, &web, true, &["member1"]).await;
    stays("nothing is distributed", Duration::from_secs(2), || async {
        get_binding(&client, "default", "cfg-configmap").await.is_none()
            && get_binding(&client, "default", "web-deployment")
                .await
                .is_some_and(|b| recorded(&b).is_empty())
    })
    .await;
    assert!(
        env.service(Service::DependencyDistributor)
            .log()
            .contains("PropagateDeps=false"),
        "the log says the feature is off"
    );
}

/// kill -9 in the middle, changes while it is down, restart: everything converges.
#[tokio::test]
async fn kill_and_restart_converges() {
    let mut env = start(&[]).await;
    let client = env.control_plane_client().await;
    for name in ["a", "b", "c"] {
        create(&client, config_map(name, "x")).await;
    }
    let web = create(
        &client,
        deployment("web", json!({"volumes": [{"name": "a", "configMap": {"name": "a"}}, {"name": "b", "configMap": {"name": "b"}}]})),
    )
    .await;
    let api = create(
        &client,
        deployment(
            "api",
            json!({"volumes": [{"name": "b", "configMap": {"name": "b"}}]}),
        ),
    )
    .await;
    bind(&client, &web, true, &["member1"]).await;
    bind(&client, &api, true, &["member2"]).await;
    wait_required_by(
        &client,
        "default",
        "a-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;

    env.kill(Service::DependencyDistributor);
    // While it is down: web is rescheduled, api goes away, a new workload references c.
    patch_binding_spec(
        &client,
        "web-deployment",
        json!({"clusters": [{"name": "member3", "replicas": 1}]}),
    )
    .await;
    unbind(&client, "api-deployment").await;
    let job = create(
        &client,
        deployment(
            "job",
            json!({"volumes": [{"name": "c", "configMap": {"name": "c"}}]}),
        ),
    )
    .await;
    bind(&client, &job, true, &["member2"]).await;
    env.start_again(Service::DependencyDistributor).await;

    wait_required_by(
        &client,
        "default",
        "a-configmap",
        vec![snap("web-deployment", &["member3"])],
    )
    .await;
    wait_required_by(
        &client,
        "default",
        "b-configmap",
        vec![snap("web-deployment", &["member3"])],
    )
    .await;
    wait_required_by(
        &client,
        "default",
        "c-configmap",
        vec![snap("job-deployment", &["member2"])],
    )
    .await;
    // Restarting again with nothing changed writes nothing.
    let before = get_binding(&client, "default", "a-configmap").await.unwrap();
    env.restart(Service::DependencyDistributor).await;
    stays(
        "a converged attached binding is not rewritten",
        Duration::from_secs(2),
        || async {
            get_binding(&client, "default", "a-configmap")
                .await
                .unwrap()
                .metadata
                .resource_version
                == before.metadata.resource_version
        },
    )
    .await;
}

/// The scheduler's fast path: SyncDependencies reconciles inline and names the attached
/// bindings.
#[tokio::test]
async fn sync_dependencies_over_grpc() {
    use flotilla_proto::v1::dependency_distributor_client::DependencyDistributorClient;
    use flotilla_proto::v1::{BindingRef, Outcome, SyncDependenciesRequest};

    let env = start(&[]).await;
    let client = env.control_plane_client().await;
    create(&client, config_map("cfg", "x")).await;
    let web = create(
        &client,
        deployment(
            "web",
            json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
        ),
    )
    .await;
    let binding = bind(&client, &web, true, &["member1"]).await;
    let address = env.grpc_address(Service::DependencyDistributor);
    let mut grpc = DependencyDistributorClient::connect(address).await.unwrap();
    let request = SyncDependenciesRequest {
        binding: Some(BindingRef::resource_binding(
            "default",
            "web-deployment",
            binding.metadata.generation.unwrap_or_default(),
            binding.metadata.uid.as_deref().unwrap_or_default(),
        )),
    };
    // Ready includes standby: the first call may meet the replica before it holds the Lease.
    let response = wait_until("the distributor to lead and answer", CONVERGE, || {
        let mut grpc = grpc.clone();
        let request = request.clone();
        async move {
            match grpc.sync_dependencies(request).await {
                Ok(response) => Some(response.into_inner()),
                Err(status) if status.code() == tonic::Code::Unavailable => None,
                Err(status) => panic!("SyncDependencies: {status}"),
            }
        }
    })
    .await;
    assert!(
        response.outcome == Outcome::Done as i32 || response.outcome == Outcome::Unchanged as i32,
        "{response:?}"
    );
    assert_eq!(response.attached.len(), 1);
    assert_eq!(response.attached[0].name, "cfg-configmap");
    wait_required_by(
        &client,
        "default",
        "cfg-configmap",
        vec![snap("web-deployment", &["member1"])],
    )
    .await;
    let again = grpc.sync_dependencies(request).await.unwrap().into_inner();
    assert_eq!(again.outcome, Outcome::Unchanged as i32);
    let missing = grpc
        .sync_dependencies(SyncDependenciesRequest {
            binding: Some(BindingRef::resource_binding("default", "nope", 1, "u")),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(missing.outcome, Outcome::NotFound as i32);
}
