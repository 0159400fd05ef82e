//! Each service's identity on the control plane: its ServiceAccount in `flotilla-system`, bound
//! to the ClusterRole and Role that `deploy/manifests/<service>.yaml` defines, and a kubeconfig
//! holding a token of that ServiceAccount. The manifests are embedded here as they are, so
//! `flotilla up`, the end-to-end harness, the plain manifests and the kustomize base grant each
//! service exactly the same rights (the Helm chart's copy is checked against them by
//! `tests/tests/deploy_manifests.rs`), and every end-to-end test proves those rights suffice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::Value;

use crate::binaries;

/// The namespace the services' ServiceAccounts (and leader-election Leases) live in.
pub const NAMESPACE: &str = flotilla_api::well_known::SYSTEM_NAMESPACE;
/// Lifetime of the tokens in the services' kubeconfigs (`flotilla up` issues new ones on every
/// start).
pub const TOKEN_SECONDS: i64 = 365 * 24 * 3600;
/// The field manager of what this module applies.
const MANAGER: &str = "flotilla";

const NAMESPACE_MANIFEST: &str = include_str!("../../../deploy/manifests/namespace.yaml");
const MANIFESTS: [(&str, &str); 4] = [
    (
        binaries::DETECTOR,
        include_str!("../../../deploy/manifests/detector.yaml"),
    ),
    (
        binaries::SCHEDULER,
        include_str!("../../../deploy/manifests/scheduler.yaml"),
    ),
    (
        binaries::DEPENDENCY_DISTRIBUTOR,
        include_str!("../../../deploy/manifests/dependency-distributor.yaml"),
    ),
    (
        binaries::EXECUTION,
        include_str!("../../../deploy/manifests/execution.yaml"),
    ),
];
/// The kinds of a manifest that make up a service's identity (the rest deploys it).
const IDENTITY_KINDS: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// Errors setting identities up.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// No manifest for the service.
    #[error("{0} is not a flotilla service with a manifest in deploy/manifests")]
    UnknownService(String),
    /// An object could not be applied.
    #[error("cannot apply {kind} {name} for {service}: {source}")]
    Apply {
        /// The service.
        service: String,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why.
        source: Box<kube::Error>,
    },
    /// No token could be issued.
    #[error("cannot issue a token for ServiceAccount {namespace}/{service}: {source}")]
    Token {
        /// The namespace.
        namespace: String,
        /// The service (and ServiceAccount).
        service: String,
        /// Why.
        source: Box<kube::Error>,
    },
    /// The admin kubeconfig cannot be read or the service's written.
    #[error("{path}: {message}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|doc| Value::deserialize(doc).ok())
        .filter(Value::is_object)
        .collect()
}

/// The manifest of `service` (a binary name such as `flotilla-detector`).
pub fn manifest(service: &str) -> Option<&'static str> {
    MANIFESTS.iter().find(|(s, _)| *s == service).map(|(_, m)| *m)
}

/// The services that have a manifest.
pub fn services() -> impl Iterator<Item = &'static str> {
    MANIFESTS.iter().map(|(s, _)| *s)
}

/// The ServiceAccount, ClusterRole(s), Role(s) and their bindings of `service`, in manifest
/// order.
pub fn objects(service: &str) -> Result<Vec<Value>, IdentityError> {
    let manifest = manifest(service).ok_or_else(|| IdentityError::UnknownService(service.to_owned()))?;
    Ok(documents(manifest)
        .into_iter()
        .filter(|d| d["kind"].as_str().is_some_and(|k| IDENTITY_KINDS.contains(&k)))
        .collect())
}

/// The ClusterRole(s) and Role(s) of `service`.
pub fn roles(service: &str) -> Result<Vec<Value>, IdentityError> {
    Ok(objects(service)?
        .into_iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .collect())
}

fn api_resource(obj: &Value) -> ApiResource {
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = obj["kind"].as_str().unwrap_or_default();
    let plural = format!("{}s", kind.to_lowercase());
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

/// Applies `obj` (server-side apply, forced) with `client`.
pub async fn apply(client: &Client, obj: &Value) -> Result<(), kube::Error> {
    let resource = api_resource(obj);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(obj))
        .await
        .map(|_| ())
}

/// Creates the `flotilla-system` namespace and the identity of `service` (ServiceAccount,
/// roles, bindings), as its manifest has them.
pub async fn install(client: &Client, service: &str) -> Result<(), IdentityError> {
    let objects = documents(NAMESPACE_MANIFEST).into_iter().chain(objects(service)?);
    for obj in objects {
        apply(client, &obj).await.map_err(|source| IdentityError::Apply {
            service: service.to_owned(),
            kind: obj["kind"].as_str().unwrap_or_default().to_owned(),
            name: obj["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            source: Box::new(source),
        })?;
    }
    Ok(())
}

/// A token of ServiceAccount `flotilla-system/<service>` from the TokenRequest API.
pub async fn token(client: &Client, service: &str, seconds: i64) -> Result<String, IdentityError> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(seconds),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(service, &PostParams::default(), &request)
        .await
        .map_err(|source| IdentityError::Token {
            namespace: NAMESPACE.to_owned(),
            service: service.to_owned(),
            source: Box::new(source),
        })?;
    Ok(answer.status.map(|s| s.token).unwrap_or_default())
}

/// Writes `out` (mode 0600): the admin kubeconfig `admin` with its user's credentials replaced
/// by `token` and the namespace set to `flotilla-system`.
pub fn write_kubeconfig(admin: &Path, token: &str, out: &Path) -> Result<(), IdentityError> {
    let error = |path: &Path, message: String| IdentityError::Kubeconfig {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(admin).map_err(|e| error(admin, e.to_string()))?;
    let mut config: Value = serde_yaml::from_str(&text).map_err(|e| error(admin, e.to_string()))?;
    let Some(users) = config["users"].as_array_mut() else {
        return Err(error(admin, "has no users".to_owned()));
    };
    for user in users.iter_mut() {
        user["user"] = serde_json::json!({ "token": token });
    }
    if let Some(contexts) = config["contexts"].as_array_mut() {
        for context in contexts.iter_mut() {
            context["context"]["namespace"] = Value::from(NAMESPACE);
        }
    }
    let yaml = serde_yaml::to_string(&config).map_err(|e| error(out, e.to_string()))?;
    let temporary = out.with_extension("tmp");
    std::fs::write(&temporary, yaml).map_err(|e| error(&temporary, e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| error(&temporary, e.to_string()))?;
    }
    std::fs::rename(&temporary, out).map_err(|e| error(out, e.to_string()))
}

/// Where the kubeconfig of `service` is kept under `dir`.
pub fn kubeconfig_path(dir: &Path, service: &str) -> PathBuf {
    dir.join(format!("{service}.kubeconfig"))
}

/// Installs the identity of every service in `services`, issues each a token and writes its
/// kubeconfig under `dir` (see [`kubeconfig_path`]), based on the admin kubeconfig `admin`.
pub async fn install_all(
    client: &Client,
    admin: &Path,
    services: &[&str],
    dir: &Path,
) -> Result<BTreeMap<String, PathBuf>, IdentityError> {
    let mut written = BTreeMap::new();
    for service in services {
        install(client, service).await?;
        let token = token(client, service, TOKEN_SECONDS).await?;
        let path = kubeconfig_path(dir, service);
        write_kubeconfig(admin, &token, &path)?;
        written.insert((*service).to_owned(), path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_service_has_an_account_bound_to_its_roles() {
        for service in services() {
            let objects = objects(service).unwrap();
            let account = objects.iter().find(|o| o["kind"] == "ServiceAccount").unwrap();
            assert_eq!(account["metadata"]["name"], service);
            assert_eq!(account["metadata"]["namespace"], NAMESPACE);
            let roles = roles(service).unwrap();
            assert!(roles.iter().any(|r| r["kind"] == "ClusterRole"), "{service}");
            for role in &roles {
                let kind = role["kind"].as_str().unwrap();
                let binding = objects
                    .iter()
                    .find(|o| {
                        o["kind"] == format!("{kind}Binding")
                            && o["roleRef"]["name"] == role["metadata"]["name"]
                    })
                    .unwrap_or_else(|| panic!("{service}: {kind} is not bound"));
                assert_eq!(
                    binding["subjects"],
                    serde_json::json!([{"kind": "ServiceAccount", "name": service, "namespace": NAMESPACE}])
                );
                assert!(
                    role["rules"].as_array().is_some_and(|r| !r.is_empty()),
                    "{service}: {kind} has no rules"
                );
            }
            assert!(objects.iter().all(|o| o["kind"] != "Deployment"));
        }
        assert!(matches!(
            objects("flotilla-nope"),
            Err(IdentityError::UnknownService(_))
        ));
    }

    #[test]
    fn service_kubeconfigs_carry_the_token_and_nothing_of_the_admin() {
        let dir = tempfile::tempdir().unwrap();
        let admin = dir.path().join("admin");
        std::fs::write(
            &admin,
            "apiVersion: v1\nkind: Config\ncurrent-context: cp\nclusters:\n- name: cp\n  cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: Q0E=}\ncontexts:\n- name: cp\n  context: {cluster: cp, user: cp, namespace: default}\nusers:\n- name: cp\n  user: {token: admin-secret}\n",
        )
        .unwrap();
        let out = kubeconfig_path(dir.path(), "flotilla-detector");
        write_kubeconfig(&admin, "sa-token", &out).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(!text.contains("admin-secret"));
        let config: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            config["users"][0]["user"],
            serde_json::json!({"token": "sa-token"})
        );
        assert_eq!(config["contexts"][0]["context"]["namespace"], NAMESPACE);
        assert_eq!(
            config["clusters"][0]["cluster"]["certificate-authority-data"],
            "Q0E="
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
