//! Component tests of dispatching: Works per cluster, member objects with flotilla's marks,
//! Divided replicas, placement changes, deletion (and preserveResourcesOnDeletion),
//! conflictResolution, namespace auto-propagation and an unreachable member. Real
//! flotilla-apiserver processes and the real flotilla-execution binary; bindings are created as
//! if the scheduler had scheduled them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use flotilla_api::{Cluster, ConflictResolution, ResourceBinding};
use flotilla_e2e::wait::stays;
use flotilla_e2e::{eventually, wait_until};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test]
async fn works_member_objects_divided_replicas_placement_changes_and_deletion() {
    let env = start(3, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;

    // Duplicated to member1 and member2.
    let web = create_template(&cp, &deployment("apps", "web", 2, "nginx:1.25")).await;
    create_binding(&cp, &web, &[("member1", 2), ("member2", 2)], |_| {}).await;
    for member in [1, 2] {
        let object = wait_image(&env, member, "apps", "web", "nginx:1.25").await;
        assert_eq!(object.spec.as_ref().unwrap().replicas, Some(2));
        let work = work(&cp, &format!("member{member}"), "apps", "web-deployment")
            .await
            .unwrap();
        assert!(
            has_marks(&object, &work),
            "member{member} object lacks marks: {:?}",
            object.metadata
        );
        assert_eq!(
            work.labels().get("resourcebinding.karmada.io/permanent-id"),
            Some(&web_binding(&cp).await.metadata.uid.unwrap())
        );
        assert!(
            work.finalizers()
                .contains(&"karmada.io/execution-controller".to_owned())
        );
    }
    assert!(work(&cp, "member3", "apps", "web-deployment").await.is_none());
    let applied = wait_work(&cp, "member1", "apps", "web-deployment", "Applied", |w| {
        w.and_then(|w| work_condition(w, "Applied"))
            .is_some_and(|c| c.0 == "True")
    })
    .await
    .unwrap();
    assert_eq!(
        work_condition(&applied, "Dispatching").map(|c| (c.0, c.1)),
        Some(("True".into(), "Dispatching".into()))
    );
    // Status flows back: FullyApplied, aggregatedStatus, and the template's status.
    let bindings: Api<ResourceBinding> = Api::namespaced(cp.clone(), "apps");
    let binding = wait_until("FullyApplied on web-deployment", TIMEOUT, || async {
        let b = bindings.get("web-deployment").await.ok()?;
        let status = b.status.clone()?;
        let fully = status
            .conditions
            .iter()
            .any(|c| c.type_ == "FullyApplied" && c.status == "True");
        (fully && status.aggregated_status.len() == 2).then_some(b)
    })
    .await;
    assert!(
        binding
            .finalizers()
            .contains(&"karmada.io/binding-controller".to_owned())
    );
    let templates: Api<Deployment> = Api::namespaced(cp.clone(), "apps");
    eventually("template status aggregates readyReplicas 4", TIMEOUT, || async {
        templates
            .get("web")
            .await
            .ok()
            .and_then(|d| d.status)
            .and_then(|s| s.ready_replicas)
            == Some(4)
    })
    .await;

    // Divided: per-cluster replicas.
    let api = create_template(&cp, &deployment("apps", "api", 5, "api:1")).await;
    create_binding(&cp, &api, &[("member1", 3), ("member3", 2)], |spec| {
        spec.placement = Some(
            serde_json::from_value(json!({"replicaScheduling": {"replicaSchedulingType": "Divided"}}))
                .unwrap(),
        );
    })
    .await;
    let m1 = wait_image(&env, 1, "apps", "api", "api:1").await;
    let m3 = wait_image(&env, 3, "apps", "api", "api:1").await;
    assert_eq!(m1.spec.unwrap().replicas, Some(3));
    assert_eq!(m3.spec.unwrap().replicas, Some(2));

    // member3 leaves the placement: its Work and member object go.
    update_binding(
        &cp,
        "apps",
        "api-deployment",
        json!({"clusters": [{"name": "member1", "replicas": 5}]}),
    )
    .await;
    wait_gone(&env, 3, "apps", "api").await;
    wait_work(&cp, "member3", "apps", "api-deployment", "is deleted", |w| {
        w.is_none()
    })
    .await;
    wait_member(&env, 1, "apps", "api", "has 5 replicas", |d| {
        d.and_then(|d| d.spec.as_ref()?.replicas) == Some(5)
    })
    .await;

    // Deleting the template deletes binding, Works and member objects.
    delete_template(&cp, "apps", "web").await;
    for member in [1, 2] {
        wait_gone(&env, member, "apps", "web").await;
        wait_work(
            &cp,
            &format!("member{member}"),
            "apps",
            "web-deployment",
            "is deleted",
            |w| w.is_none(),
        )
        .await;
    }
    eventually("binding web-deployment is deleted", TIMEOUT, || async {
        bindings.get_opt("web-deployment").await.ok().flatten().is_none()
    })
    .await;

    // preserveResourcesOnDeletion keeps the member objects.
    let kept = create_template(&cp, &deployment("apps", "kept", 1, "kept:1")).await;
    create_binding(&cp, &kept, &[("member2", 1)], |spec| {
        spec.preserve_resources_on_deletion = Some(true);
    })
    .await;
    wait_image(&env, 2, "apps", "kept", "kept:1").await;
    delete_template(&cp, "apps", "kept").await;
    wait_work(&cp, "member2", "apps", "kept-deployment", "is deleted", |w| {
        w.is_none()
    })
    .await;
    stays("preserved member object stays", QUIET, || async {
        member_deployment(&env, 2, "apps", "kept").await.is_some()
    })
    .await;
}

async fn web_binding(cp: &kube::Client) -> ResourceBinding {
    Api::<ResourceBinding>::namespaced(cp.clone(), "apps")
        .get("web-deployment")
        .await
        .unwrap()
}

#[tokio::test]
async fn conflict_resolution_abort_and_overwrite() {
    let env = start(1, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "shop", &[]).await;
    let member = env.member_client(1).await;
    create_namespace(&member, "shop", &[]).await;
    let members: Api<Deployment> = Api::namespaced(member.clone(), "shop");
    for name in ["abort", "overwrite"] {
        members
            .create(&PostParams::default(), &deployment("shop", name, 1, "theirs:1"))
            .await
            .unwrap();
    }

    let abort = create_template(&cp, &deployment("shop", "abort", 1, "ours:1")).await;
    create_binding(&cp, &abort, &[("member1", 1)], |spec| {
        spec.conflict_resolution = Some(ConflictResolution::Abort);
    })
    .await;
    let work = wait_work(
        &cp,
        "member1",
        "shop",
        "abort-deployment",
        "reports a conflict",
        |w| {
            w.and_then(|w| work_condition(w, "Applied"))
                .is_some_and(|c| c.0 == "False" && c.1 == "Conflict")
        },
    )
    .await
    .unwrap();
    let (_, _, message) = work_condition(&work, "Applied").unwrap();
    assert!(message.contains("was not created by flotilla"), "{message}");
    let theirs = member_deployment(&env, 1, "shop", "abort").await.unwrap();
    assert_eq!(image_of(&theirs), "theirs:1");
    assert!(!theirs.labels().contains_key("karmada.io/managed"));

    let overwrite = create_template(&cp, &deployment("shop", "overwrite", 1, "ours:1")).await;
    create_binding(&cp, &overwrite, &[("member1", 1)], |spec| {
        spec.conflict_resolution = Some(ConflictResolution::Overwrite);
    })
    .await;
    let taken = wait_image(&env, 1, "shop", "overwrite", "ours:1").await;
    assert_eq!(
        taken.labels().get("karmada.io/managed").map(String::as_str),
        Some("true")
    );

    // Deleting the Abort template leaves the object flotilla never owned.
    delete_template(&cp, "shop", "abort").await;
    wait_work(&cp, "member1", "shop", "abort-deployment", "is deleted", |w| {
        w.is_none()
    })
    .await;
    assert_eq!(
        image_of(&member_deployment(&env, 1, "shop", "abort").await.unwrap()),
        "theirs:1"
    );
}

#[tokio::test]
async fn namespaces_are_auto_propagated_unless_skipped() {
    let env = start(2, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "team-a", &[("team", "a")]).await;
    create_namespace(
        &cp,
        "private",
        &[("namespace.karmada.io/skip-auto-propagation", "true")],
    )
    .await;
    for member in [1, 2] {
        let namespaces: Api<Namespace> = Api::all(env.member_client(member).await);
        let ns = wait_until(
            &format!("namespace team-a in member{member}"),
            TIMEOUT,
            || async { namespaces.get_opt("team-a").await.ok().flatten() },
        )
        .await;
        assert_eq!(ns.labels().get("team").map(String::as_str), Some("a"));
        assert_eq!(
            ns.labels().get("karmada.io/managed").map(String::as_str),
            Some("true")
        );
    }
    let namespaces: Api<Namespace> = Api::all(env.member_client(1).await);
    stays("namespace private stays off the members", QUIET, || async {
        namespaces.get_opt("private").await.ok().flatten().is_none()
    })
    .await;

    // A template in a brand-new namespace lands without extra steps.
    create_namespace(&cp, "fresh", &[]).await;
    let job = create_template(&cp, &deployment("fresh", "svc", 1, "svc:1")).await;
    create_binding(&cp, &job, &[("member2", 1)], |_| {}).await;
    wait_image(&env, 2, "fresh", "svc", "svc:1").await;
}

#[tokio::test]
async fn unreachable_member_does_not_block_others_and_catches_up() {
    let mut env = start(2, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    // Let the namespace reach member2 before it goes away.
    let namespaces: Api<Namespace> = Api::all(env.member_client(2).await);
    eventually("namespace apps in member2", TIMEOUT, || async {
        namespaces.get_opt("apps").await.ok().flatten().is_some()
    })
    .await;
    env.members[1].stop();

    let web = create_template(&cp, &deployment("apps", "web", 1, "nginx:1")).await;
    create_binding(&cp, &web, &[("member1", 1), ("member2", 1)], |_| {}).await;
    wait_image(&env, 1, "apps", "web", "nginx:1").await;
    let work = wait_work(
        &cp,
        "member2",
        "apps",
        "web-deployment",
        "says the cluster is unreachable",
        |w| {
            w.and_then(|w| work_condition(w, "Applied"))
                .is_some_and(|c| c.0 == "False" && c.1 == "ClusterUnreachable")
        },
    )
    .await
    .unwrap();
    assert!(work_condition(&work, "Applied").unwrap().2.contains("member2"));
    let clusters: Api<Cluster> = Api::all(cp.clone());
    eventually("Cluster member2 Ready=False", TIMEOUT, || async {
        clusters
            .get("member2")
            .await
            .ok()
            .and_then(|c| c.status)
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "False")
            })
    })
    .await;

    env.members[1].start_again().await;
    wait_image(&env, 2, "apps", "web", "nginx:1").await;
    wait_work(&cp, "member2", "apps", "web-deployment", "is applied", |w| {
        w.and_then(|w| work_condition(w, "Applied"))
            .is_some_and(|c| c.0 == "True")
    })
    .await;
    eventually("Cluster member2 Ready=True", Duration::from_secs(30), || async {
        clusters
            .get("member2")
            .await
            .ok()
            .and_then(|c| c.status)
            .is_some_and(|s| {
                s.kubernetes_version.is_some()
                    && s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    })
    .await;
}
