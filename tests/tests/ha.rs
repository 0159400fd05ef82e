//! High availability and scale-out (issue 9): execution replicas split member clusters and hand
//! a killed replica's clusters over; a standby detector takes over from a killed leader within
//! the lease duration; two scheduler replicas on the same bindings converge on one decision.
//!
//! Lease timings are shortened (3 s lease, 2 s renew deadline, 500 ms retry) so failovers take
//! seconds; `docs/ha.md` gives the production defaults and the resulting failover times.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flotilla_e2e::env::{http_get, metric_sample as sample};
use flotilla_e2e::fixtures::{self, TIMEOUT, deployment_yaml, image_of, wait_member_deployment};
use flotilla_e2e::wait::{stays, wait_until_explained};
use flotilla_e2e::{Env, EnvOptions, Service, eventually, wait_until};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use serde_json::Value;

const LEASE: Duration = Duration::from_secs(3);
/// The retry period of `lease_flags`.
const RETRY: Duration = Duration::from_millis(500);

fn lease_flags(prefix: &str) -> Vec<String> {
    [
        (format!("--{prefix}-lease-duration"), "3s"),
        (format!("--{prefix}-renew-deadline"), "2s"),
        (format!("--{prefix}-retry-period"), "500ms"),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag, value.to_owned()])
    .collect()
}

fn policy_for_all(name: &str, selector: &str, members: usize) -> String {
    let clusters: Vec<String> = (1..=members).map(|i| format!("member{i}")).collect();
    format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: {name}
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    {selector}
  placement:
    clusterAffinity:
      clusterNames: [{}]
"#,
        clusters.join(", ")
    )
}

/// Every Work of the binding `default/<name>-deployment` in `karmada-es-member<i>` reports
/// `Applied=True`, for each of `members`.
async fn works_applied(env: &Env, name: &str, members: usize) -> bool {
    let cp = env.control_plane_client().await;
    for i in 1..=members {
        let api: Api<DynamicObject> = Api::namespaced_with(
            cp.clone(),
            &format!("karmada-es-member{i}"),
            &kube::api::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
                "work.karmada.io",
                "v1alpha1",
                "Work",
            )),
        );
        let Ok(works) = api.list(&ListParams::default()).await else {
            return false;
        };
        let applied = works.items.iter().any(|work| {
            let value = serde_json::to_value(work).unwrap_or(Value::Null);
            value["metadata"]["annotations"]["resourcebinding.karmada.io/name"]
                == format!("{name}-deployment")
                && fixtures::condition(&value, "Applied").is_some_and(|c| c["status"] == "True")
        });
        if !applied {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn execution_replicas_split_members_and_survive_a_replica_kill() {
    let members = 4;
    let mut env = Env::start(EnvOptions {
        members,
        service_args: BTreeMap::from([(Service::Execution, lease_flags("membership"))]),
        ..Default::default()
    })
    .await;
    let mut replica = env.start_replica(Service::Execution, "execution-2").await;
    let first = env.metrics_address(Service::Execution);
    let second = replica.metrics_address.clone();

    // Both replicas see each other and, once the newcomer has waited its grace, every cluster
    // has exactly one owner.
    let owned = wait_until(
        "both execution replicas to agree on 2 members owning 4 clusters",
        TIMEOUT,
        || {
            let (first, second) = (first.clone(), second.clone());
            async move {
                let members_first = sample(
                    &first,
                    "flotilla_membership_members{service=\"flotilla-execution\"}",
                )
                .await?;
                let members_second = sample(
                    &second,
                    "flotilla_membership_members{service=\"flotilla-execution\"}",
                )
                .await?;
                let a = sample(&first, "flotilla_execution_owned_clusters").await?;
                let b = sample(&second, "flotilla_execution_owned_clusters").await?;
                (members_first == 2.0 && members_second == 2.0 && a + b == 4.0).then_some((a, b))
            }
        },
    )
    .await;
    eprintln!("clusters owned: execution {} / execution-2 {}", owned.0, owned.1);

    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "web", 2, "nginx:1.25")).await;
    fixtures::apply(&cp, &policy_for_all("web", "name: web", members)).await;
    for i in 1..=members {
        let member = env.member_client(i).await;
        wait_member_deployment(&member, "default", "web", &format!("web in member{i}"), |d| {
            image_of(d).as_deref() == Some("nginx:1.25")
        })
        .await;
    }
    eventually("every Work of web to be Applied", TIMEOUT, || {
        works_applied(&env, "web", members)
    })
    .await;

    // Kill the replica that owns more clusters, so a real handover is needed.
    let killed_at = Instant::now();
    if owned.1 > owned.0 {
        replica.process.kill();
        eprintln!("killed execution-2 (owned {} clusters)", owned.1);
    } else {
        env.kill(Service::Execution);
        eprintln!("killed execution (owned {} clusters)", owned.0);
    }
    let survivor = if owned.1 > owned.0 { first } else { second };

    // A template update after the kill reaches all four members.
    fixtures::apply(&cp, &deployment_yaml("default", "web", 2, "nginx:1.26")).await;
    for i in 1..=members {
        let member = env.member_client(i).await;
        wait_member_deployment(
            &member,
            "default",
            "web",
            &format!("updated web in member{i}"),
            |d| image_of(d).as_deref() == Some("nginx:1.26"),
        )
        .await;
    }
    let updated_after = killed_at.elapsed();
    eventually("every Work of web to be Applied after the kill", TIMEOUT, || {
        works_applied(&env, "web", members)
    })
    .await;
    eprintln!("update reached all {members} members {updated_after:?} after the kill");
    // The survivor's gauge (refreshed every 2 s) ends up counting all four clusters.
    eventually("the survivor to own all 4 clusters", TIMEOUT, || {
        let survivor = survivor.clone();
        async move { sample(&survivor, "flotilla_execution_owned_clusters").await == Some(4.0) }
    })
    .await;
    // The killed replica never left: the survivor deletes its Lease once it has been unchanged
    // for four lease durations, so replaced Pods leave no Leases behind.
    let leases: Api<Lease> = Api::namespaced(cp.clone(), "flotilla-system");
    let names = || async {
        let membership = ListParams::default().labels("flotilla.io/membership=flotilla-execution");
        leases
            .list(&membership)
            .await
            .map(|list| list.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    wait_until_explained(
        "only the survivor's membership Lease to remain",
        TIMEOUT,
        || async { (names().await.len() == 1).then_some(()) },
        || async { format!("membership Leases: {:?}", names().await) },
    )
    .await;
}

#[tokio::test]
async fn detector_standby_takes_over_within_the_lease_duration_after_the_leader_is_killed() {
    let mut env = Env::start(EnvOptions {
        members: 2,
        service_args: BTreeMap::from([(Service::Detector, lease_flags("leader-elect"))]),
        ..Default::default()
    })
    .await;
    let leader = env.metrics_address(Service::Detector);
    let standby = env.start_replica(Service::Detector, "detector-2").await;
    let gauge = "flotilla_leader{service=\"flotilla-detector\"}";
    assert_eq!(
        sample(&leader, gauge).await,
        Some(1.0),
        "the first detector leads"
    );
    assert_eq!(
        sample(&standby.metrics_address, gauge).await,
        Some(0.0),
        "the second is a standby"
    );
    let (_, readyz) = http_get(&standby.metrics_address, "/readyz?verbose")
        .await
        .unwrap();
    assert!(readyz.contains("standby"), "{readyz}");

    // While the leader lives, only it writes: the standby reconciles nothing.
    let cp = env.control_plane_client().await;
    fixtures::apply(&cp, &deployment_yaml("default", "before", 1, "nginx:1.25")).await;
    fixtures::apply(&cp, &policy_for_all("before", "name: before", 2)).await;
    let member1 = env.member_client(1).await;
    wait_member_deployment(&member1, "default", "before", "before in member1", |_| true).await;
    let (_, metrics) = http_get(&standby.metrics_address, "/metrics").await.unwrap();
    assert!(
        !metrics.contains("flotilla_detector_reconciles_total{"),
        "a standby must not reconcile:\n{metrics}"
    );

    env.kill(Service::Detector);
    let killed_at = Instant::now();
    // The killed leader's last renewal, as it recorded it on the Lease.
    let leases: Api<Lease> = Api::namespaced(cp.clone(), "flotilla-system");
    let before = leases.get(DETECTOR_LEASE).await.unwrap();
    let (old_holder, last_renewal) = (holder(&before), renew_time(&before));
    fixtures::apply(&cp, &deployment_yaml("default", "after", 1, "nginx:1.25")).await;
    fixtures::apply(&cp, &policy_for_all("after", "name: after", 2)).await;
    let address = standby.metrics_address.clone();
    eventually("the standby detector to lead", TIMEOUT, || {
        let address = address.clone();
        async move { sample(&address, gauge).await == Some(1.0) }
    })
    .await;
    let took_over = killed_at.elapsed();
    wait_member_deployment(&member1, "default", "after", "after in member1", |_| true).await;
    let propagated = killed_at.elapsed();
    eprintln!("standby led {took_over:?} and propagated {propagated:?} after the leader was killed");
    // Within the lease duration, measured on the Lease's own records (not on this test's
    // clock, which also counts its polling): the standby acquired it one lease duration after
    // the dead leader's last renewal, plus at most its retry period (it checks that often) and
    // one more for its own first observation and the API round trip.
    let after = leases.get(DETECTOR_LEASE).await.unwrap();
    assert_ne!(holder(&after), old_holder, "the standby holds the Lease");
    let acquired = after
        .spec
        .as_ref()
        .and_then(|s| s.acquire_time.as_ref())
        .map(|t| t.0)
        .expect("an acquired Lease has spec.acquireTime");
    let gap = Duration::from_secs_f64(acquired.duration_since(last_renewal).as_secs_f64().max(0.0));
    eprintln!("Lease acquired {gap:?} after the killed leader's last renewal (lease {LEASE:?})");
    assert!(
        gap <= LEASE + 2 * RETRY + Duration::from_secs(1),
        "the standby acquired the Lease {gap:?} after the leader's last renewal (lease {LEASE:?}, retry {RETRY:?})"
    );
}

const DETECTOR_LEASE: &str = "flotilla-detector";

fn holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

fn renew_time(lease: &Lease) -> k8s_openapi::jiff::Timestamp {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0)
        .expect("a held Lease has spec.renewTime")
}

#[tokio::test]
async fn dependency_distributor_leader_releases_its_lease_on_sigterm() {
    let mut env = Env::start(EnvOptions {
        members: 1,
        services: vec![Service::DependencyDistributor],
        service_args: BTreeMap::from([(
            Service::DependencyDistributor,
            // A long lease: only the release can explain a fast takeover.
            vec![
                "--leader-elect-lease-duration".to_owned(),
                "30s".to_owned(),
                "--leader-elect-retry-period".to_owned(),
                "500ms".to_owned(),
            ],
        )]),
        ..Default::default()
    })
    .await;
    let gauge = "flotilla_leader{service=\"flotilla-dependency-distributor\"}";
    let first = env.metrics_address(Service::DependencyDistributor);
    let mut second = env
        .start_replica(Service::DependencyDistributor, "distributor-2")
        .await;
    // Exactly one of the two leads.
    let first_leads = wait_until("exactly one distributor to lead", TIMEOUT, || {
        let (first, second) = (first.clone(), second.metrics_address.clone());
        async move {
            match (sample(&first, gauge).await, sample(&second, gauge).await) {
                (Some(1.0), Some(0.0)) => Some(true),
                (Some(0.0), Some(1.0)) => Some(false),
                _ => None,
            }
        }
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(env.control_plane_client().await, "flotilla-system");
    let leader_identity = holder(&leases.get(DISTRIBUTOR_LEASE).await.unwrap());
    assert!(leader_identity.is_some(), "the leader holds the Lease");
    let standby = if first_leads {
        assert!(
            env.service(Service::DependencyDistributor)
                .terminate(Duration::from_secs(10)),
            "the leader did not stop on SIGTERM"
        );
        second.metrics_address.clone()
    } else {
        assert!(
            second.process.terminate(Duration::from_secs(10)),
            "the leader did not stop on SIGTERM"
        );
        first
    };
    // The leader released the Lease before it exited: it no longer holds it (with a 30 s lease,
    // nothing else could have taken it from it by now).
    let after_exit = leases.get(DISTRIBUTOR_LEASE).await.unwrap();
    assert_ne!(
        holder(&after_exit),
        leader_identity,
        "the Lease was not released on SIGTERM: {:?}",
        after_exit.spec
    );
    let address = standby.clone();
    eventually("the standby distributor to lead", TIMEOUT, || {
        let address = address.clone();
        async move { sample(&address, gauge).await == Some(1.0) }
    })
    .await;
}

const DISTRIBUTOR_LEASE: &str = "flotilla-dependency-distributor";

#[tokio::test]
async fn two_scheduler_replicas_never_produce_conflicting_decisions() {
    let env = Env::start(EnvOptions::default()).await;
    let _second = env.start_replica(Service::Scheduler, "scheduler-2").await;
    let cp = env.control_plane_client().await;
    let count = 50;
    let mut yaml = String::new();
    for i in 0..count {
        yaml.push_str(
            &deployment_yaml("default", &format!("app-{i}"), 3 + (i % 5), "nginx:1.25")
                .replace("  labels:\n    app:", "  labels:\n    group: fifty\n    app:"),
        );
        yaml.push_str("---\n");
    }
    fixtures::apply(&cp, &yaml).await;
    fixtures::apply(
        &cp,
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: fifty
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    labelSelector:
      matchLabels:
        group: fifty
  placement:
    clusterAffinity:
      clusterNames: [member1, member2, member3]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster: {clusterNames: [member1]}
          weight: 1
        - targetCluster: {clusterNames: [member2]}
          weight: 2
        - targetCluster: {clusterNames: [member3]}
          weight: 3
"#,
    )
    .await;

    let bindings: Api<DynamicObject> = Api::namespaced_with(
        cp.clone(),
        "default",
        &kube::api::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "work.karmada.io",
            "v1alpha2",
            "ResourceBinding",
        )),
    );
    // (generation, spec.clusters) of every binding of the fifty, once all are scheduled.
    let snapshot = || async {
        let list = bindings.list(&ListParams::default()).await.ok()?;
        let mut out = BTreeMap::new();
        for binding in list.items {
            let value = serde_json::to_value(&binding).ok()?;
            let name = value["metadata"]["name"].as_str()?.to_owned();
            if !name.starts_with("app-") {
                continue;
            }
            let generation = value["metadata"]["generation"].as_i64()?;
            let scheduled = fixtures::condition(&value, "Scheduled")?;
            if scheduled["status"] != "True"
                || value["status"]["schedulerObservedGeneration"].as_i64() != Some(generation)
            {
                return None;
            }
            let replicas: i64 = value["spec"]["clusters"]
                .as_array()?
                .iter()
                .filter_map(|c| c["replicas"].as_i64())
                .sum();
            let wanted = value["spec"]["replicas"].as_i64()?;
            assert_eq!(
                replicas, wanted,
                "{name}: clusters {} do not add up",
                value["spec"]["clusters"]
            );
            out.insert(name, (generation, value["spec"]["clusters"].clone()));
        }
        (out.len() == count as usize).then_some(out)
    };
    // On a timeout, say which bindings are missing or did not settle, and how.
    let explain = || async {
        let list = bindings.list(&ListParams::default()).await.unwrap();
        let unsettled: Vec<String> = list
            .items
            .iter()
            .filter_map(|b| {
                let value = serde_json::to_value(b).ok()?;
                let generation = value["metadata"]["generation"].as_i64();
                let observed = value["status"]["schedulerObservedGeneration"].as_i64();
                let scheduled = fixtures::condition(&value, "Scheduled").cloned();
                let ok = observed == generation
                    && scheduled.as_ref().is_some_and(|c| c["status"] == "True");
                (!ok).then(|| {
                    format!(
                        "{}: generation {generation:?}, schedulerObservedGeneration {observed:?}, Scheduled {}, clusters {}",
                        value["metadata"]["name"],
                        scheduled.map_or("absent".to_owned(), |c| c.to_string()),
                        value["spec"]["clusters"]
                    )
                })
            })
            .collect();
        let names: std::collections::BTreeSet<String> = list
            .items
            .iter()
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        let missing: Vec<String> = (0..count)
            .map(|i| format!("app-{i}-deployment"))
            .filter(|n| !names.contains(n))
            .collect();
        format!(
            "missing bindings: {missing:?}; not settled:\n{}",
            unsettled.join("\n")
        )
    };
    let settled = wait_until_explained(
        "all 50 bindings to be scheduled at their generation",
        TIMEOUT,
        snapshot,
        explain,
    )
    .await;
    // Two replicas racing on the same bindings would flap spec.clusters (each change bumps the
    // generation); optimistic concurrency makes them agree, so nothing moves any more.
    stays(
        "every binding's decision to stay put",
        Duration::from_secs(3),
        || async { snapshot().await.as_ref() == Some(&settled) },
    )
    .await;
    let first = sample(
        &env.metrics_address(Service::Scheduler),
        "flotilla_scheduler_write_conflicts_total",
    )
    .await;
    let second = sample(
        &_second.metrics_address,
        "flotilla_scheduler_write_conflicts_total",
    )
    .await;
    eprintln!("scheduler write conflicts: {first:?} / {second:?}");
}
