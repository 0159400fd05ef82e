//! The harness itself: a control plane and members start, the CRDs are served, members are
//! registered with working credentials, and a restarted apiserver keeps its data and address.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use flotilla_api::Cluster;
use flotilla_e2e::{Env, EnvOptions};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};

#[tokio::test]
async fn control_plane_and_members_start_and_members_are_registered() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        services: vec![],
        ..Default::default()
    })
    .await;
    let control_plane = env.control_plane_client().await;

    let clusters: Api<Cluster> = Api::all(control_plane.clone());
    let names: Vec<String> = clusters
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["member1", "member2"]);

    // The registered credentials reach the member.
    let member1 = env.member_client(1).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(member1, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("probe".into());
    configmaps.create(&PostParams::default(), &cm).await.unwrap();

    // A restarted member keeps its data and its address.
    env.members[0].restart().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.member_client(1).await, "default");
    assert!(configmaps.get("probe").await.is_ok());
}
