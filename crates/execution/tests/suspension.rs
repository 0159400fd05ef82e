//! Component tests of dispatch suspension (seed `dispatch-suspension.md`): all clusters, named
//! clusters, resume, ordered rollout (Story 2), rollback before resume, the desired state kept
//! visible in Works (Story 4), deletion while suspended (corner case), Divided scale-down,
//! placement changes while suspended, and a kill -9 of execution while suspended.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use flotilla_e2e::Service;
use flotilla_e2e::wait::stays;
use serde_json::json;

fn suspended_on(clusters: &[&str]) -> serde_json::Value {
    json!({"suspension": {"dispatchingOnClusters": {"clusterNames": clusters}}})
}

#[tokio::test]
async fn suspend_all_then_resume() {
    let env = start(2, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    let web = create_template(&cp, &deployment("apps", "web", 1, "nginx:1")).await;
    create_binding(&cp, &web, &[("member1", 1), ("member2", 1)], |spec| {
        spec.suspension = Some(serde_json::from_value(json!({"dispatching": true})).unwrap());
    })
    .await;
    for cluster in ["member1", "member2"] {
        let work = wait_work(&cp, cluster, "apps", "web-deployment", "is suspended", |w| {
            w.and_then(|w| work_condition(w, "Dispatching"))
                .is_some_and(|c| c.0 == "False")
        })
        .await
        .unwrap();
        assert_eq!(work.spec.suspend_dispatching, Some(true));
        assert_eq!(
            work_condition(&work, "Dispatching"),
            Some((
                "False".into(),
                "SuspendDispatching".into(),
                "Work dispatching is in a suspended state.".into()
            ))
        );
        // Story 4: the desired state is there to inspect.
        assert_eq!(
            work.spec.workload.manifests[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1"
        );
    }
    stays("nothing is dispatched while suspended", QUIET, || async {
        member_deployment(&env, 1, "apps", "web").await.is_none()
            && member_deployment(&env, 2, "apps", "web").await.is_none()
    })
    .await;

    update_binding(&cp, "apps", "web-deployment", json!({"suspension": null})).await;
    wait_image(&env, 1, "apps", "web", "nginx:1").await;
    wait_image(&env, 2, "apps", "web", "nginx:1").await;
    wait_work(&cp, "member1", "apps", "web-deployment", "dispatches", |w| {
        w.and_then(|w| work_condition(w, "Dispatching"))
            .is_some_and(|c| c.0 == "True")
    })
    .await;
}

#[tokio::test]
async fn ordered_rollout_resume_one_by_one_and_rollback_before_resume() {
    let env = start(3, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    let web = create_template(&cp, &deployment("apps", "web", 1, "app:v1")).await;
    create_binding(
        &cp,
        &web,
        &[("member1", 1), ("member2", 1), ("member3", 1)],
        |_| {},
    )
    .await;
    for member in 1..=3 {
        wait_image(&env, member, "apps", "web", "app:v1").await;
    }

    // Story 2: release v2 to member1 only.
    update_binding(
        &cp,
        "apps",
        "web-deployment",
        suspended_on(&["member2", "member3"]),
    )
    .await;
    wait_work(&cp, "member3", "apps", "web-deployment", "is suspended", |w| {
        w.is_some_and(|w| w.spec.suspend_dispatching == Some(true))
    })
    .await;
    set_template_image(&cp, "apps", "web", "app:v2").await;
    wait_image(&env, 1, "apps", "web", "app:v2").await;
    // The suspended clusters' Works already hold v2 (Story 4) but their members keep v1.
    wait_work(&cp, "member2", "apps", "web-deployment", "holds v2", |w| {
        w.is_some_and(|w| {
            w.spec.workload.manifests[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "app:v2"
        })
    })
    .await;
    stays("member2 and member3 keep v1", QUIET, || async {
        image_of(&member_deployment(&env, 2, "apps", "web").await.unwrap()) == "app:v1"
            && image_of(&member_deployment(&env, 3, "apps", "web").await.unwrap()) == "app:v1"
    })
    .await;

    // Resume member2: it gets the latest desired state at once.
    update_binding(&cp, "apps", "web-deployment", suspended_on(&["member3"])).await;
    wait_image(&env, 2, "apps", "web", "app:v2").await;

    // v2 is bad: roll back before resuming member3, which never sees v2.
    set_template_image(&cp, "apps", "web", "app:v1").await;
    wait_image(&env, 1, "apps", "web", "app:v1").await;
    wait_image(&env, 2, "apps", "web", "app:v1").await;
    assert_eq!(
        image_of(&member_deployment(&env, 3, "apps", "web").await.unwrap()),
        "app:v1"
    );
    let before = member_deployment(&env, 3, "apps", "web").await.unwrap();
    update_binding(&cp, "apps", "web-deployment", json!({"suspension": null})).await;
    wait_work(&cp, "member3", "apps", "web-deployment", "dispatches", |w| {
        w.and_then(|w| work_condition(w, "Dispatching"))
            .is_some_and(|c| c.0 == "True")
            && w.and_then(|w| work_condition(w, "Applied"))
                .is_some_and(|c| c.0 == "True")
    })
    .await;
    let after = member_deployment(&env, 3, "apps", "web").await.unwrap();
    assert_eq!(image_of(&after), "app:v1");
    assert_eq!(
        before.metadata.generation, after.metadata.generation,
        "member3's spec was never changed"
    );
}

#[tokio::test]
async fn deleting_a_suspended_template_removes_its_member_objects() {
    let env = start(1, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    let web = create_template(&cp, &deployment("apps", "web", 1, "nginx:1")).await;
    create_binding(&cp, &web, &[("member1", 1)], |_| {}).await;
    wait_image(&env, 1, "apps", "web", "nginx:1").await;
    update_binding(
        &cp,
        "apps",
        "web-deployment",
        json!({"suspension": {"dispatching": true}}),
    )
    .await;
    wait_work(&cp, "member1", "apps", "web-deployment", "is suspended", |w| {
        w.and_then(|w| work_condition(w, "Dispatching"))
            .is_some_and(|c| c.0 == "False")
    })
    .await;
    delete_template(&cp, "apps", "web").await;
    wait_gone(&env, 1, "apps", "web").await;
    wait_work(&cp, "member1", "apps", "web-deployment", "is deleted", |w| {
        w.is_none()
    })
    .await;
}

#[tokio::test]
async fn divided_scale_down_and_placement_change_leave_a_suspended_cluster_alone() {
    let env = start(3, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    let web = create_template(&cp, &deployment("apps", "web", 6, "nginx:1")).await;
    create_binding(
        &cp,
        &web,
        &[("member1", 2), ("member2", 2), ("member3", 2)],
        |spec| {
            spec.placement = Some(
                serde_json::from_value(json!({"replicaScheduling": {"replicaSchedulingType": "Divided"}}))
                    .unwrap(),
            );
        },
    )
    .await;
    for member in 1..=3 {
        wait_member(&env, member, "apps", "web", "has 2 replicas", |d| {
            d.and_then(|d| d.spec.as_ref()?.replicas) == Some(2)
        })
        .await;
    }
    // member2 suspended; scale down to 3 replicas, and member3 leaves the placement while it
    // is suspended too.
    update_binding(
        &cp,
        "apps",
        "web-deployment",
        suspended_on(&["member2", "member3"]),
    )
    .await;
    update_binding(
        &cp,
        "apps",
        "web-deployment",
        json!({"replicas": 3, "clusters": [{"name": "member1", "replicas": 2}, {"name": "member2", "replicas": 1}]}),
    )
    .await;
    wait_member(&env, 1, "apps", "web", "scaled to 2 (unchanged share)", |d| {
        d.and_then(|d| d.spec.as_ref()?.replicas) == Some(2)
    })
    .await;
    wait_work(
        &cp,
        "member2",
        "apps",
        "web-deployment",
        "holds the new share",
        |w| w.is_some_and(|w| w.spec.workload.manifests[0]["spec"]["replicas"] == 1),
    )
    .await;
    stays("suspended clusters keep their objects", QUIET, || async {
        member_deployment(&env, 2, "apps", "web")
            .await
            .and_then(|d| d.spec?.replicas)
            == Some(2)
            && member_deployment(&env, 3, "apps", "web").await.is_some()
    })
    .await;
    assert!(
        work(&cp, "member3", "apps", "web-deployment").await.is_some(),
        "member3's Work is kept while suspended"
    );

    // Resume: member2 gets its new share, member3's Work and object go.
    update_binding(&cp, "apps", "web-deployment", json!({"suspension": null})).await;
    wait_member(&env, 2, "apps", "web", "has 1 replica", |d| {
        d.and_then(|d| d.spec.as_ref()?.replicas) == Some(1)
    })
    .await;
    wait_gone(&env, 3, "apps", "web").await;
    wait_work(&cp, "member3", "apps", "web-deployment", "is deleted", |w| {
        w.is_none()
    })
    .await;
}

#[tokio::test]
async fn suspension_survives_kill_9_of_execution() {
    let mut env = start(2, &[]).await;
    let cp = env.control_plane_client().await;
    create_namespace(&cp, "apps", &[]).await;
    let web = create_template(&cp, &deployment("apps", "web", 1, "app:v1")).await;
    create_binding(&cp, &web, &[("member1", 1), ("member2", 1)], |_| {}).await;
    wait_image(&env, 2, "apps", "web", "app:v1").await;
    update_binding(&cp, "apps", "web-deployment", suspended_on(&["member2"])).await;
    wait_work(&cp, "member2", "apps", "web-deployment", "is suspended", |w| {
        w.and_then(|w| work_condition(w, "Dispatching"))
            .is_some_and(|c| c.0 == "False")
    })
    .await;

    env.kill(Service::Execution);
    set_template_image(&cp, "apps", "web", "app:v2").await;
    env.start_again(Service::Execution).await;

    wait_image(&env, 1, "apps", "web", "app:v2").await;
    stays("member2 stays on v1 after the restart", QUIET, || async {
        image_of(&member_deployment(&env, 2, "apps", "web").await.unwrap()) == "app:v1"
    })
    .await;
    update_binding(&cp, "apps", "web-deployment", json!({"suspension": null})).await;
    wait_image(&env, 2, "apps", "web", "app:v2").await;
}
