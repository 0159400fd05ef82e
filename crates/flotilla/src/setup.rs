//! Preparing a control plane: installing flotilla's CRDs and registering member clusters.
//! `flotilla up` and the end-to-end harness both use these steps, so there is one way to set a
//! control plane up.

use std::path::Path;
use std::time::{Duration, Instant};

use flotilla_api::{Cluster, ClusterPropagationPolicy, ClusterResourceBinding, ResourceBinding, Work};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

use crate::join::{JoinError, JoinOptions, join, member_access};

/// Errors setting a control plane up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A CRD could not be created.
    #[error("cannot create CRD {name}: {source}")]
    CreateCrd {
        /// The CRD's name.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// The API did not start serving the CRDs in time.
    #[error("the control plane did not serve the flotilla CRDs within {timeout:?}: {last_error}")]
    NotServed {
        /// How long we waited.
        timeout: Duration,
        /// The last error listing them.
        last_error: String,
    },
    /// A member could not be registered.
    #[error("cannot register member {name}: {source}")]
    Join {
        /// The member.
        name: String,
        /// Why.
        source: JoinError,
    },
}

/// Creates every flotilla CRD (existing ones are left as they are) and waits up to `timeout`
/// until the API serves each of them.
pub async fn install_crds(client: &Client, timeout: Duration) -> Result<(), SetupError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in flotilla_api::crds::all() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(source) => {
                return Err(SetupError::CreateCrd {
                    name: crd.metadata.name.clone().unwrap_or_default(),
                    source,
                });
            }
        }
    }
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(10);
    loop {
        match crds_served(client).await {
            Ok(()) => return Ok(()),
            Err(error) if Instant::now() >= deadline => {
                return Err(SetupError::NotServed {
                    timeout,
                    last_error: error.to_string(),
                });
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(200));
            }
        }
    }
}

async fn crds_served(client: &Client) -> Result<(), kube::Error> {
    let one = ListParams::default().limit(1);
    Api::<ClusterPropagationPolicy>::all(client.clone())
        .list(&one)
        .await?;
    Api::<flotilla_api::PropagationPolicy>::all(client.clone())
        .list(&one)
        .await?;
    Api::<flotilla_api::OverridePolicy>::all(client.clone())
        .list(&one)
        .await?;
    Api::<flotilla_api::ClusterOverridePolicy>::all(client.clone())
        .list(&one)
        .await?;
    Api::<ResourceBinding>::all(client.clone()).list(&one).await?;
    Api::<ClusterResourceBinding>::all(client.clone())
        .list(&one)
        .await?;
    Api::<Work>::all(client.clone()).list(&one).await?;
    Api::<Cluster>::all(client.clone()).list(&one).await?;
    Ok(())
}

/// Registers the cluster whose kubeconfig is `kubeconfig` (its current context) as member
/// `name`: a credentials Secret and a Cluster object. Idempotent.
pub async fn register_member(
    client: &Client,
    name: &str,
    kubeconfig: &Path,
    options: &JoinOptions,
) -> Result<Cluster, SetupError> {
    let wrap = |source| SetupError::Join {
        name: name.to_owned(),
        source,
    };
    let access = member_access(kubeconfig, None).map_err(wrap)?;
    join(client, name, &access, options).await.map_err(wrap)
}
