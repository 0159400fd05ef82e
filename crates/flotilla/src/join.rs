//! Registering member clusters: a credentials Secret in `karmada-cluster` and a `Cluster` object
//! pointing at it, built from the member's kubeconfig.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use flotilla_api::cluster::{ClusterSyncMode, LocalSecretReference, SECRET_CA_DATA_KEY, SECRET_TOKEN_KEY};
use flotilla_api::well_known::CLUSTER_SECRET_NAMESPACE;
use flotilla_api::{Cluster, ClusterSpec};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{Kubeconfig, NamedAuthInfo, NamedCluster};
use kube::{Api, Client};

/// Errors registering a member cluster.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The member kubeconfig cannot be read.
    #[error("cannot read member kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig lacks what a member registration needs.
    #[error("member kubeconfig {path}: {problem}")]
    Incomplete {
        /// The file.
        path: String,
        /// What is missing and how to fix it.
        problem: String,
    },
    /// The registration would be invalid.
    #[error("cluster {name:?} would be invalid: {violations}")]
    Invalid {
        /// The cluster name.
        name: String,
        /// The violations.
        violations: flotilla_api::Violations,
    },
    /// The control-plane API refused a write.
    #[error("cannot {action} on the control plane: {source}")]
    Api {
        /// What was attempted.
        action: String,
        /// Why it failed.
        source: kube::Error,
    },
}

/// What a member registration holds.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberAccess {
    /// API server URL.
    pub endpoint: String,
    /// Bearer token.
    pub token: String,
    /// CA bundle (PEM), if the server's certificate must be verified against one.
    pub ca_pem: Option<Vec<u8>>,
    /// Skip TLS verification.
    pub insecure: bool,
}

/// Reads the access to a member from its kubeconfig (`context`: default the current one). The
/// context's user must authenticate with a bearer token (`token` or `tokenFile`).
pub fn member_access(path: &Path, context: Option<&str>) -> Result<MemberAccess, JoinError> {
    let display = path.display().to_string();
    let config = Kubeconfig::read_from(path).map_err(|source| JoinError::Kubeconfig {
        path: display.clone(),
        source,
    })?;
    let incomplete = |problem: String| JoinError::Incomplete {
        path: display.clone(),
        problem,
    };
    let context_name = context
        .map(str::to_owned)
        .or_else(|| config.current_context.clone())
        .ok_or_else(|| incomplete("has no current context; pass --context".to_owned()))?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| incomplete(format!("has no context {context_name:?}")))?;
    let cluster = config
        .clusters
        .iter()
        .find(|c: &&NamedCluster| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| {
            incomplete(format!(
                "context {context_name:?} names unknown cluster {:?}",
                context.cluster
            ))
        })?;
    let user_name = context.user.clone().unwrap_or_default();
    let user = config
        .auth_infos
        .iter()
        .find(|u: &&NamedAuthInfo| u.name == user_name)
        .and_then(|u| u.auth_info.as_ref())
        .ok_or_else(|| {
            incomplete(format!(
                "context {context_name:?} names unknown user {user_name:?}"
            ))
        })?;
    let token = match (&user.token, &user.token_file) {
        (Some(token), _) => {
            use secrecy::ExposeSecret;
            token.expose_secret().to_owned()
        }
        (None, Some(file)) => std::fs::read_to_string(file)
            .map_err(|e| incomplete(format!("cannot read tokenFile {file}: {e}")))?
            .trim()
            .to_owned(),
        (None, None) => {
            return Err(incomplete(format!(
                "user {user_name:?} has no bearer token; flotilla authenticates to members with tokens (add `token:` to the user)"
            )));
        }
    };
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| incomplete(format!("certificate-authority-data is not base64: {e}")))?,
        ),
        (None, Some(file)) => Some(
            std::fs::read(file)
                .map_err(|e| incomplete(format!("cannot read certificate-authority {file}: {e}")))?,
        ),
        (None, None) => None,
    };
    let endpoint = cluster
        .server
        .clone()
        .ok_or_else(|| incomplete(format!("cluster {:?} has no server", context.cluster)))?;
    Ok(MemberAccess {
        endpoint,
        token,
        ca_pem,
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
    })
}

/// Options of a registration.
#[derive(Clone, Debug, Default)]
pub struct JoinOptions {
    /// Labels on the Cluster object (what `clusterAffinity.labelSelector` matches).
    pub labels: BTreeMap<String, String>,
    /// `spec.region`.
    pub region: Option<String>,
    /// `spec.provider`.
    pub provider: Option<String>,
    /// `spec.zones`.
    pub zones: Vec<String>,
}

/// Creates or updates the credentials Secret and the Cluster `name` on the control plane.
pub async fn join(
    control_plane: &Client,
    name: &str,
    access: &MemberAccess,
    options: &JoinOptions,
) -> Result<Cluster, JoinError> {
    let api_error = |action: &str| {
        let action = action.to_owned();
        move |source| JoinError::Api {
            action: action.clone(),
            source,
        }
    };
    let secret_name = name.to_owned();
    let mut cluster = Cluster::new(
        name,
        ClusterSpec {
            sync_mode: Some(ClusterSyncMode::Push),
            api_endpoint: Some(access.endpoint.clone()),
            secret_ref: Some(LocalSecretReference {
                namespace: CLUSTER_SECRET_NAMESPACE.to_owned(),
                name: secret_name.clone(),
            }),
            insecure_skip_tls_verification: access.insecure,
            region: options.region.clone(),
            provider: options.provider.clone(),
            zones: options.zones.clone(),
            ..Default::default()
        },
    );
    cluster.metadata.labels = Some(options.labels.clone()).filter(|l| !l.is_empty());
    cluster.validate().map_err(|violations| JoinError::Invalid {
        name: name.to_owned(),
        violations,
    })?;

    let namespaces: Api<Namespace> = Api::all(control_plane.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(CLUSTER_SECRET_NAMESPACE.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(api_error(&format!("create namespace {CLUSTER_SECRET_NAMESPACE}"))(e)),
    }

    let mut data = BTreeMap::from([(
        SECRET_TOKEN_KEY.to_owned(),
        ByteString(access.token.clone().into_bytes()),
    )]);
    if let Some(ca) = &access.ca_pem {
        data.insert(SECRET_CA_DATA_KEY.to_owned(), ByteString(ca.clone()));
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.clone()),
            namespace: Some(CLUSTER_SECRET_NAMESPACE.to_owned()),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Default::default()
    };
    let params = PatchParams::apply("flotilla-join").force();
    let secrets: Api<Secret> = Api::namespaced(control_plane.clone(), CLUSTER_SECRET_NAMESPACE);
    secrets
        .patch(&secret_name, &params, &Patch::Apply(&secret))
        .await
        .map_err(api_error(&format!(
            "write Secret {CLUSTER_SECRET_NAMESPACE}/{secret_name}"
        )))?;
    let clusters: Api<Cluster> = Api::all(control_plane.clone());
    clusters
        .patch(name, &params, &Patch::Apply(&cluster))
        .await
        .map_err(api_error(&format!("write Cluster {name}")))
}

/// Deletes the Cluster `name` and its credentials Secret. Missing objects are not an error.
pub async fn unjoin(control_plane: &Client, name: &str) -> Result<(), JoinError> {
    let clusters: Api<Cluster> = Api::all(control_plane.clone());
    match clusters.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(source) => {
            return Err(JoinError::Api {
                action: format!("delete Cluster {name}"),
                source,
            });
        }
    }
    let secrets: Api<Secret> = Api::namespaced(control_plane.clone(), CLUSTER_SECRET_NAMESPACE);
    match secrets.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(JoinError::Api {
            action: format!("delete Secret {CLUSTER_SECRET_NAMESPACE}/{name}"),
            source,
        }),
    }
}
