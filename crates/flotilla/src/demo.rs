//! `flotilla up --demo`: an nginx Deployment that mounts a ConfigMap, and a PropagationPolicy
//! sending it to every member with `propagateDeps` (so the ConfigMap follows), then the member
//! objects printed as they arrive.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use flotilla_api::policy::{ClusterAffinity, ReplicaSchedulingStrategy, ReplicaSchedulingType};
use flotilla_api::{Placement, PropagationPolicy, PropagationSpec, ResourceSelector};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, PodSpec, PodTemplateSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Client};

/// Namespace of the demo objects.
pub const NAMESPACE: &str = "default";
/// Name of the demo Deployment.
pub const DEPLOYMENT: &str = "nginx";
/// Name of the ConfigMap the Deployment mounts.
pub const CONFIG_MAP: &str = "nginx-config";
/// Name of the demo PropagationPolicy.
pub const POLICY: &str = "nginx-propagation";
/// Field manager of the demo's writes.
const MANAGER: &str = "flotilla-demo";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(NAMESPACE.to_owned()),
        labels: Some([("app".to_owned(), DEPLOYMENT.to_owned())].into()),
        ..Default::default()
    }
}

/// The demo ConfigMap.
pub fn config_map() -> ConfigMap {
    ConfigMap {
        metadata: meta(CONFIG_MAP),
        data: Some(
            [(
                "index.html".to_owned(),
                "<h1>Hello from flotilla</h1>\n".to_owned(),
            )]
            .into(),
        ),
        ..Default::default()
    }
}

/// The demo Deployment: 2 nginx replicas serving the ConfigMap's page.
pub fn deployment() -> Deployment {
    let labels = [("app".to_owned(), DEPLOYMENT.to_owned())];
    Deployment {
        metadata: meta(DEPLOYMENT),
        spec: Some(DeploymentSpec {
            replicas: Some(2),
            selector: LabelSelector {
                match_labels: Some(labels.clone().into()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.into()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".to_owned(),
                        image: Some("nginx:1.27".to_owned()),
                        volume_mounts: Some(vec![VolumeMount {
                            name: "html".to_owned(),
                            mount_path: "/usr/share/nginx/html".to_owned(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }],
                    volumes: Some(vec![Volume {
                        name: "html".to_owned(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: CONFIG_MAP.to_owned(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The demo PropagationPolicy: the Deployment to `members`, duplicated, dependencies along.
pub fn policy(members: &[String]) -> PropagationPolicy {
    let mut policy = PropagationPolicy::new(
        POLICY,
        PropagationSpec {
            resource_selectors: vec![ResourceSelector {
                api_version: "apps/v1".to_owned(),
                kind: "Deployment".to_owned(),
                name: Some(DEPLOYMENT.to_owned()),
                ..Default::default()
            }],
            propagate_deps: true,
            placement: Placement {
                cluster_affinity: Some(ClusterAffinity {
                    cluster_names: members.to_vec(),
                    ..Default::default()
                }),
                replica_scheduling: Some(ReplicaSchedulingStrategy {
                    replica_scheduling_type: Some(ReplicaSchedulingType::Duplicated),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    policy.metadata.namespace = Some(NAMESPACE.to_owned());
    policy
}

/// Applies the demo objects to the control plane (server-side apply, so running it again
/// changes nothing).
pub async fn apply(client: &Client, members: &[String]) -> Result<(), kube::Error> {
    let params = PatchParams::apply(MANAGER).force();
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .patch(CONFIG_MAP, &params, &Patch::Apply(&config_map()))
        .await?;
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .patch(DEPLOYMENT, &params, &Patch::Apply(&deployment()))
        .await?;
    Api::<PropagationPolicy>::namespaced(client.clone(), NAMESPACE)
        .patch(POLICY, &params, &Patch::Apply(&policy(members)))
        .await?;
    Ok(())
}

/// Polls every member until the demo Deployment and ConfigMap are in all of them (or
/// `timeout`), printing each as it arrives. Returns whether everything arrived.
pub async fn show_arrival(members: &[(String, Client)], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut seen: BTreeSet<(String, &'static str)> = BTreeSet::new();
    let wanted = members.len() * 2;
    while seen.len() < wanted {
        for (name, client) in members {
            if !seen.contains(&(name.clone(), "Deployment")) {
                let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
                if let Ok(Some(deployment)) = deployments.get_opt(DEPLOYMENT).await {
                    let ready = deployment
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_replicas)
                        .unwrap_or_default();
                    let desired = deployment
                        .spec
                        .as_ref()
                        .and_then(|s| s.replicas)
                        .unwrap_or_default();
                    println!(
                        "  demo: {name}: Deployment {NAMESPACE}/{DEPLOYMENT} arrived ({ready}/{desired} ready)"
                    );
                    seen.insert((name.clone(), "Deployment"));
                }
            }
            if !seen.contains(&(name.clone(), "ConfigMap")) {
                let config_maps = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
                if let Ok(Some(_)) = config_maps.get_opt(CONFIG_MAP).await {
                    println!(
                        "  demo: {name}: ConfigMap {NAMESPACE}/{CONFIG_MAP} arrived (a dependency of the Deployment)"
                    );
                    seen.insert((name.clone(), "ConfigMap"));
                }
            }
        }
        if seen.len() == wanted {
            break;
        }
        if Instant::now() >= deadline {
            println!(
                "  demo: not everything arrived within {timeout:?}; check `kubectl get rb -n {NAMESPACE}` and the logs"
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "  demo: nginx and its ConfigMap are in every member (try `kubectl --context member1 get deploy,cm`)"
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_selects_the_deployment_and_propagates_its_dependencies() {
        let members = vec!["member1".to_owned(), "member2".to_owned()];
        let policy = policy(&members);
        assert!(policy.spec.propagate_deps);
        assert_eq!(
            policy.spec.resource_selectors[0].name.as_deref(),
            Some(DEPLOYMENT)
        );
        let affinity = policy.spec.placement.cluster_affinity.as_ref();
        assert_eq!(affinity.map(|a| a.cluster_names.clone()), Some(members));
        let volume = deployment()
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.volumes)
            .and_then(|v| v.into_iter().next())
            .and_then(|v| v.config_map)
            .map(|c| c.name);
        assert_eq!(
            volume.as_deref(),
            Some(CONFIG_MAP),
            "the ConfigMap is a dependency"
        );
        assert!(policy.validate().is_ok(), "{:?}", policy.validate());
    }
}
