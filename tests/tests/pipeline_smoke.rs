//! The whole pipeline once: a Deployment and a PropagationPolicy on the control plane reach the
//! chosen members through detector -> scheduler -> execution.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use flotilla_e2e::fixtures::{self, deployment_yaml, wait_member_deployment};
use flotilla_e2e::{Env, EnvOptions};

#[tokio::test]
async fn deployment_reaches_two_of_three_members() {
    let env = Env::start(EnvOptions::default()).await;
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "nginx", 2, "nginx:1.25")).await;
    fixtures::apply(
        &cp,
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
"#,
    )
    .await;
    for i in [1, 2] {
        let member = env.member_client(i).await;
        wait_member_deployment(&member, "default", "nginx", "nginx in member", |d| {
            fixtures::replicas_of(d) == Some(2)
        })
        .await;
    }
    let member3 = env.member_client(3).await;
    assert!(
        fixtures::member_deployment(&member3, "default", "nginx")
            .await
            .is_none()
    );
}
