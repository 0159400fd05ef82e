//! What the bench measures: clients of a control plane and its members, either of the embedded
//! installation it started or of an existing one (`--kubeconfig`, `--control-plane-context`,
//! `--member-contexts`), and the service processes whose footprint it reads.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::BenchError;
use super::install::{InstallOptions, Installation, SERVICES};

/// An existing control plane and its members.
#[derive(Clone, Debug)]
pub struct External {
    /// The kubeconfig holding every context.
    pub kubeconfig: PathBuf,
    /// The control plane's context.
    pub control_plane_context: String,
    /// The members' contexts; each member's Cluster name is its context name.
    pub member_contexts: Vec<String>,
}

/// The clusters under test.
pub struct Target {
    /// The control plane.
    pub control_plane: Client,
    /// The members: (Cluster name, client).
    pub members: Vec<(String, Client)>,
    /// The embedded installation, if the bench started it.
    pub installation: Option<Installation>,
    description: String,
}

/// A client for `context` of the kubeconfig at `path`.
pub async fn client_for(path: &Path, context: &str) -> Result<Client, BenchError> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| BenchError::Invalid(format!("cannot read kubeconfig {}: {e}", path.display())))?;
    let options = KubeConfigOptions {
        context: Some(context.to_owned()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| {
            BenchError::Invalid(format!(
                "context {context} of {}: {e}; check --control-plane-context/--member-contexts",
                path.display()
            ))
        })?;
    Client::try_from(config)
        .map_err(|e| BenchError::Invalid(format!("cannot build a client for context {context}: {e}")))
}

impl Target {
    /// Connects to `external`, or starts the embedded installation with `install`.
    pub async fn connect(
        external: Option<&External>,
        install: &InstallOptions,
    ) -> Result<Target, BenchError> {
        match external {
            Some(external) => {
                if external.member_contexts.is_empty() {
                    return Err(BenchError::Invalid(
                        "--member-contexts is empty; name the member contexts, e.g. --member-contexts member1,member2".to_owned(),
                    ));
                }
                let control_plane = client_for(&external.kubeconfig, &external.control_plane_context).await?;
                let mut members = Vec::new();
                for context in &external.member_contexts {
                    members.push((context.clone(), client_for(&external.kubeconfig, context).await?));
                }
                Ok(Target {
                    control_plane,
                    members,
                    installation: None,
                    description: format!("context {}", external.control_plane_context),
                })
            }
            None => {
                super::progress(&format!(
                    "starting the embedded installation ({} members) ...",
                    install.members
                ));
                let installation = Installation::start(install).await?;
                let kubeconfig = installation.kubeconfig();
                let control_plane = client_for(&kubeconfig, crate::up::CONTROL_PLANE).await;
                let mut members = Vec::new();
                let mut failure = control_plane.as_ref().err().map(ToString::to_string);
                for name in &installation.members {
                    match client_for(&kubeconfig, name).await {
                        Ok(client) => members.push((name.clone(), client)),
                        Err(error) => failure = Some(error.to_string()),
                    }
                }
                match (control_plane, failure) {
                    (Ok(control_plane), None) => Ok(Target {
                        control_plane,
                        members,
                        installation: Some(installation),
                        description: "embedded".to_owned(),
                    }),
                    (_, failure) => {
                        installation.shutdown().await;
                        Err(BenchError::Invalid(failure.unwrap_or_default()))
                    }
                }
            }
        }
    }

    /// `embedded` or `context <control plane context>`.
    pub fn description(&self) -> String {
        self.description.clone()
    }

    /// The members' Cluster names.
    pub fn member_names(&self) -> Vec<String> {
        self.members.iter().map(|(name, _)| name.clone()).collect()
    }

    /// The first `count` members' clients.
    pub fn member_clients(&self, count: usize) -> Vec<Client> {
        self.members.iter().take(count).map(|(_, c)| c.clone()).collect()
    }

    /// `(name, pid)` of the four service processes: the embedded installation's children, or
    /// processes of these binaries running on this machine.
    pub fn service_pids(&self) -> Vec<(String, u32)> {
        match &self.installation {
            Some(installation) => SERVICES
                .iter()
                .filter_map(|name| installation.pid(name).map(|pid| ((*name).to_owned(), pid)))
                .collect(),
            None => super::footprint::find_processes(&SERVICES),
        }
    }

    /// `(name, pid)` of the API servers of the embedded installation (none for an external one).
    pub fn apiserver_pids(&self) -> Vec<(String, u32)> {
        match &self.installation {
            Some(installation) => installation
                .pids()
                .into_iter()
                .filter(|(name, _)| !SERVICES.contains(&name.as_str()))
                .collect(),
            None => Vec::new(),
        }
    }

    /// The embedded installation's data directory (none for an external control plane).
    pub fn data_dir(&self) -> Option<&Path> {
        self.installation.as_ref().map(|i| i.layout.root.as_path())
    }

    /// Stops the embedded installation, if any.
    pub async fn close(self) {
        if let Some(installation) = self.installation {
            installation.shutdown().await;
        }
    }
}
