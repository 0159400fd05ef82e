//! The whole pipeline once: a Deployment and a PropagationPolicy on the control plane reach the
//! chosen members through detector -> scheduler -> execution; and a burst of them, with the
//! `Dispatch` calls beyond execution's limit queued.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::time::Duration;

use flotilla_api::{ResourceBinding, Work};
use flotilla_e2e::fixtures::{self, deployment_yaml, wait_member_deployment};
use flotilla_e2e::wait::wait_until;
use flotilla_e2e::{Env, EnvOptions, Service};
use flotilla_proto::v1::execution_client::ExecutionClient;
use flotilla_proto::v1::{BindingRef, DispatchRequest, Outcome};
use kube::Api;
use kube::api::{ListParams, ObjectMeta};

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

    // Writes that name no field manager (status writes) are recorded under the service that
    // made them, from its User-Agent, as kube-apiserver records Karmada's components: the
    // Work's report is execution's, the binding's scheduling result the scheduler's.
    let works: Api<Work> = Api::namespaced(cp.clone(), "karmada-es-member1");
    let work = wait_until(
        "member1's Work reported by execution",
        Duration::from_secs(60),
        || async {
            works
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|work| status_writer(&work.metadata).is_some())
        },
    )
    .await;
    assert_eq!(status_writer(&work.metadata), Some("flotilla-execution"));
    // The scheduler's status write (`Scheduled`) need not have landed before execution's report.
    let bindings: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let binding = wait_until(
        "the binding's status written by the scheduler",
        Duration::from_secs(60),
        || async {
            let binding = bindings.get("nginx-deployment").await.ok()?;
            managers(&binding.metadata)
                .contains(&("flotilla-scheduler", "status"))
                .then_some(binding)
        },
    )
    .await;
    let managers = managers(&binding.metadata);
    assert!(
        managers.iter().all(|(manager, _)| !manager.is_empty()),
        "a write recorded under no manager: {managers:?}"
    );
}

/// The (manager, subresource) of each of `meta`'s managedFields entries.
fn managers(meta: &ObjectMeta) -> Vec<(&str, &str)> {
    meta.managed_fields
        .iter()
        .flatten()
        .map(|entry| {
            (
                entry.manager.as_deref().unwrap_or_default(),
                entry.subresource.as_deref().unwrap_or_default(),
            )
        })
        .collect()
}

/// The manager recorded for `meta`'s status, if the status was written.
fn status_writer(meta: &ObjectMeta) -> Option<&str> {
    managers(meta)
        .into_iter()
        .find(|(_, subresource)| *subresource == "status")
        .map(|(manager, _)| manager)
}

/// Execution reconciles at most `--dispatch-concurrency` `Dispatch` calls at once: a call beyond
/// is answered `OUTCOME_QUEUED` at once, its binding goes to the binding workers' queue, and
/// everything still converges (ADR 0021). Here the limit is 1; the templates (Deployments with a
/// ConfigMap each) arrive back to back, as the scheduler's calls do, then concurrent calls are
/// made directly.
#[tokio::test]
async fn dispatch_calls_beyond_the_limit_are_queued_and_converge() {
    const TEMPLATES: usize = 16;
    let env = Env::start(EnvOptions {
        members: 2,
        service_args: [(
            Service::Execution,
            vec!["--dispatch-concurrency".to_owned(), "1".to_owned()],
        )]
        .into(),
        ..Default::default()
    })
    .await;
    let cp = env.control_plane_client().await;
    fixtures::apply(
        &cp,
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: burst
  namespace: default
spec:
  propagateDeps: true
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
"#,
    )
    .await;
    let names: Vec<String> = (0..TEMPLATES).map(|i| format!("burst-{i:02}")).collect();
    futures::future::join_all(names.iter().map(|name| {
        let cp = cp.clone();
        let yaml = format!(
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-config
  namespace: default
data:
  key: value
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        envFrom:
        - configMapRef:
            name: {name}-config
"#
        );
        async move {
            fixtures::apply(&cp, &yaml).await;
        }
    }))
    .await;
    let all_present = |member: kube::Client| {
        let names = names.clone();
        async move {
            for name in &names {
                fixtures::member_deployment(&member, "default", name).await?;
                fixtures::get(
                    &member,
                    "v1",
                    "ConfigMap",
                    Some("default"),
                    &format!("{name}-config"),
                )
                .await?;
            }
            Some(())
        }
    };
    for i in [1, 2] {
        let member = env.member_client(i).await;
        wait_until(
            "every burst Deployment and ConfigMap in the member",
            Duration::from_secs(90),
            || all_present(member.clone()),
        )
        .await;
    }

    // Concurrent calls for the bindings: one reconciles, the ones arriving meanwhile are
    // queued. Rounds until one was queued (each round's calls are concurrent).
    let client = ExecutionClient::connect(env.grpc_address(Service::Execution))
        .await
        .unwrap();
    let queued = wait_until(
        "a Dispatch call answered OUTCOME_QUEUED",
        Duration::from_secs(60),
        || {
            let calls = names.iter().map(|name| {
                let mut client = client.clone();
                let request = DispatchRequest {
                    binding: Some(BindingRef::resource_binding(
                        "default",
                        &format!("{name}-deployment"),
                        0,
                        "",
                    )),
                };
                async move { client.dispatch(request).await.unwrap().into_inner() }
            });
            async move {
                let answers = futures::future::join_all(calls).await;
                for answer in &answers {
                    match answer.outcome() {
                        // Nothing done yet, so nothing reported.
                        Outcome::Queued => assert!(answer.works.is_empty(), "{answer:?}"),
                        Outcome::Done | Outcome::Unchanged => assert_eq!(answer.works.len(), 2, "{answer:?}"),
                        _ => panic!("unexpected answer {answer:?}"),
                    }
                }
                let queued = answers.iter().filter(|a| a.outcome() == Outcome::Queued).count();
                (queued > 0).then_some(queued)
            }
        },
    )
    .await;
    let counted = env
        .metric_sample(Service::Execution, "flotilla_execution_dispatch_queued_total")
        .await
        .unwrap_or_default();
    assert!(
        counted >= queued as f64,
        "the metric counts every queued call: {counted} < {queued}"
    );

    // Nothing was lost or disturbed: every binding is still fully applied, every copy present.
    for name in names
        .iter()
        .flat_map(|name| [format!("{name}-deployment"), format!("{name}-config-configmap")])
    {
        fixtures::wait_fully_applied(
            &cp,
            "default",
            &name,
            &format!("{name} FullyApplied"),
            Duration::from_secs(30),
        )
        .await;
    }
    for i in [1, 2] {
        assert!(all_present(env.member_client(i).await).await.is_some());
    }
}
