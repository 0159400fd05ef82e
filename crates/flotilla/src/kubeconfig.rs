//! One kubeconfig for a whole installation: a context per API server (`control-plane`,
//! `member1`..), built from the kubeconfig each server wrote, with clusters and users renamed
//! after the context so entries from different servers never collide.

use std::path::{Path, PathBuf};

use kube::config::{Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};

/// Errors building the merged kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// A server's kubeconfig cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// A server's kubeconfig lacks an entry.
    #[error("{path}: {problem}")]
    Incomplete {
        /// The file.
        path: String,
        /// What is missing.
        problem: String,
    },
    /// The merged kubeconfig cannot be written.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// Reads the kubeconfig at `path` and returns its context named `name` (else its current
/// context) as a kubeconfig holding only that context, with context, cluster and user all
/// called `name`. Relative file references are made absolute.
pub fn single_context(name: &str, path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let display = path.display().to_string();
    let incomplete = |problem: String| KubeconfigError::Incomplete {
        path: display.clone(),
        problem,
    };
    let config = Kubeconfig::read_from(path).map_err(|source| KubeconfigError::Read {
        path: display.clone(),
        source,
    })?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == name)
        .or_else(|| {
            let current = config.current_context.as_deref()?;
            config.contexts.iter().find(|c| c.name == current)
        })
        .and_then(|c| c.context.clone())
        .ok_or_else(|| incomplete(format!("has neither a context {name:?} nor a current context")))?;
    let mut cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| {
            incomplete(format!(
                "names cluster {:?} but does not define it",
                context.cluster
            ))
        })?;
    let user_name = context.user.clone().unwrap_or_default();
    let mut user = config
        .auth_infos
        .iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.auth_info.clone())
        .ok_or_else(|| incomplete(format!("names user {user_name:?} but does not define it")))?;

    let base = path.parent().unwrap_or(Path::new("."));
    let absolute = |file: &mut Option<String>| {
        if let Some(f) = file.as_mut() {
            let p = PathBuf::from(&*f);
            if p.is_relative() {
                *f = base.join(p).display().to_string();
            }
        }
    };
    absolute(&mut cluster.certificate_authority);
    absolute(&mut user.token_file);
    absolute(&mut user.client_certificate);
    absolute(&mut user.client_key);

    let mut context = context;
    context.cluster = name.to_owned();
    context.user = Some(name.to_owned());
    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.to_owned(),
            cluster: Some(cluster),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.to_owned(),
            auth_info: Some(user),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: name.to_owned(),
            context: Some(context),
            ..Default::default()
        }],
        current_context: Some(name.to_owned()),
        ..Default::default()
    })
}

/// Merges single-context kubeconfigs (see [`single_context`]) into one whose current context
/// is `current`.
pub fn merge(parts: Vec<Kubeconfig>, current: &str) -> Kubeconfig {
    let mut merged = Kubeconfig {
        api_version: Some("v1".to_owned()),
        kind: Some("Config".to_owned()),
        current_context: Some(current.to_owned()),
        ..Default::default()
    };
    for part in parts {
        merged.clusters.extend(part.clusters);
        merged.auth_infos.extend(part.auth_infos);
        merged.contexts.extend(part.contexts);
    }
    merged
}

/// Builds the merged kubeconfig of `servers` (`(context name, kubeconfig path)`, the current
/// context first) and writes it to `out` (mode 0600: it holds tokens).
pub fn write_merged(servers: &[(String, PathBuf)], out: &Path) -> Result<(), KubeconfigError> {
    let parts = servers
        .iter()
        .map(|(name, path)| single_context(name, path))
        .collect::<Result<Vec<_>, _>>()?;
    let current = servers.first().map(|(name, _)| name.as_str()).unwrap_or_default();
    let merged = merge(parts, current);
    let write_error = |message: String| KubeconfigError::Write {
        path: out.display().to_string(),
        message,
    };
    let yaml = serde_yaml::to_string(&merged).map_err(|e| write_error(e.to_string()))?;
    let temporary = out.with_extension("tmp");
    std::fs::write(&temporary, yaml).map_err(|e| write_error(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| write_error(e.to_string()))?;
    }
    std::fs::rename(&temporary, out).map_err(|e| write_error(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn server_kubeconfig(dir: &Path, name: &str, port: u16) -> PathBuf {
        let path = dir.join(format!("{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: {name}\nclusters:\n- name: flotilla\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: ca.crt\ncontexts:\n- name: {name}\n  context:\n    cluster: flotilla\n    user: admin\nusers:\n- name: admin\n  user:\n    token: secret-{name}\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn merges_contexts_without_collisions() {
        let dir = std::env::temp_dir().join(format!("flotilla-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let servers = vec![
            (
                "control-plane".to_owned(),
                server_kubeconfig(&dir, "control-plane", 7000),
            ),
            ("member1".to_owned(), server_kubeconfig(&dir, "member1", 7001)),
            ("member2".to_owned(), server_kubeconfig(&dir, "member2", 7002)),
        ];
        let out = dir.join("kubeconfig");
        write_merged(&servers, &out).unwrap();
        let merged = Kubeconfig::read_from(&out).unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("control-plane"));
        let names: Vec<&str> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["control-plane", "member1", "member2"]);
        for (name, port) in [("control-plane", 7000), ("member1", 7001), ("member2", 7002)] {
            let context = merged.contexts.iter().find(|c| c.name == name).unwrap();
            let context = context.context.as_ref().unwrap();
            assert_eq!(context.cluster, name);
            assert_eq!(context.user.as_deref(), Some(name));
            let cluster = merged.clusters.iter().find(|c| c.name == name).unwrap();
            let cluster = cluster.cluster.as_ref().unwrap();
            assert_eq!(
                cluster.server.as_deref(),
                Some(format!("https://127.0.0.1:{port}").as_str())
            );
            assert_eq!(
                cluster.certificate_authority.as_deref(),
                Some(dir.join("ca.crt").display().to_string().as_str()),
                "relative paths become absolute"
            );
            let user = merged.auth_infos.iter().find(|u| u.name == name).unwrap();
            use secrecy::ExposeSecret;
            let token = user.auth_info.as_ref().unwrap().token.as_ref().unwrap();
            assert_eq!(token.expose_secret(), format!("secret-{name}"));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&out).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_entries_are_named() {
        let dir = std::env::temp_dir().join(format!("flotilla-kubeconfig-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context:\n    cluster: nowhere\n    user: u\n",
        )
        .unwrap();
        let error = single_context("member1", &path).unwrap_err().to_string();
        assert!(error.contains("cluster \"nowhere\""), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
