//! Typed errors of the execution library.

/// A template cannot be turned into a Work manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The template is not a JSON object.
    #[error("the resource template is not an object")]
    NotAnObject,
    /// `apiVersion` or `kind` is missing.
    #[error("the resource template has no apiVersion or kind; set both")]
    MissingTypeMeta,
    /// `metadata.name` is missing.
    #[error("the resource template has no metadata.name")]
    MissingName,
    /// `metadata` is not an object.
    #[error("the resource template's metadata is not an object")]
    MetadataNotAnObject,
    /// Replicas or completions could not be revised.
    #[error(transparent)]
    Interpret(#[from] flotilla_interpreter::InterpretError),
}

/// A failure talking to the control plane or a member cluster.
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    /// The control-plane API refused or failed a request.
    #[error("control plane: cannot {action}: {source}")]
    ControlPlane {
        /// What was attempted, naming the object.
        action: String,
        /// Why it failed.
        source: kube::Error,
    },
    /// A member cluster could not be reached (connection refused, timeout, TLS).
    #[error("cluster {cluster} is unreachable: {message}")]
    Unreachable {
        /// The member cluster.
        cluster: String,
        /// Why.
        message: String,
    },
    /// A member cluster answered with an error.
    #[error("cluster {cluster}: cannot {action}: {source}")]
    Member {
        /// The member cluster.
        cluster: String,
        /// What was attempted, naming the object.
        action: String,
        /// Why it failed.
        source: kube::Error,
    },
    /// A member cluster's access is not configured correctly.
    #[error("cluster {cluster}: {problem}")]
    Access {
        /// The member cluster.
        cluster: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A manifest cannot be prepared or applied.
    #[error("{object}: {source}")]
    Manifest {
        /// The object, e.g. `Deployment default/nginx`.
        object: String,
        /// Why.
        source: ManifestError,
    },
    /// An object the service depends on is not (yet) there; retried later.
    #[error("{0}")]
    NotReady(String),
}

impl ExecutionError {
    /// A control-plane error for `action`.
    pub fn control_plane(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::ControlPlane { action, source }
    }

    /// Whether the error says the member cluster cannot be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }
}

/// Whether a kube error means the server could not be reached (as opposed to an answer).
pub fn is_connection_error(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(_) => false,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        kube::Error::HttpError(_) => true,
        other => {
            let text = other.to_string().to_lowercase();
            text.contains("connect") || text.contains("timed out") || text.contains("tls")
        }
    }
}

/// Whether a kube error is an API answer with `code`.
pub fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}
