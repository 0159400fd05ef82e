//! # flotilla-proto
//!
//! The gRPC contracts between flotilla's services, generated from `proto/` at build time with a
//! pure-Rust protobuf compiler (no system `protoc`):
//!
//! - [`v1::scheduler_client`] / [`v1::scheduler_server`]: `Schedule`;
//! - [`v1::execution_client`] / [`v1::execution_server`]: `Dispatch`;
//! - [`v1::dependency_distributor_client`] / [`v1::dependency_distributor_server`]:
//!   `SyncDependencies`;
//! - [`health::v1`]: the standard `grpc.health.v1.Health` service every binary serves.
//!
//! Requests name objects by key and generation ([`v1::BindingRef`]), never carry them, so every
//! call is idempotent.

/// `flotilla.v1`: the services' own contracts.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("flotilla.v1");
}

/// `grpc.health.v1`: the standard health checking protocol.
pub mod health {
    /// Version 1 of the protocol.
    #[allow(missing_docs, clippy::all)]
    pub mod v1 {
        tonic::include_proto!("grpc.health.v1");
    }
}

impl v1::BindingRef {
    /// A reference to a namespaced ResourceBinding.
    pub fn resource_binding(namespace: &str, name: &str, generation: i64, uid: &str) -> Self {
        Self {
            kind: v1::BindingKind::ResourceBinding as i32,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            generation,
            uid: uid.to_owned(),
        }
    }

    /// A reference to a ClusterResourceBinding.
    pub fn cluster_resource_binding(name: &str, generation: i64, uid: &str) -> Self {
        Self {
            kind: v1::BindingKind::ClusterResourceBinding as i32,
            namespace: String::new(),
            name: name.to_owned(),
            generation,
            uid: uid.to_owned(),
        }
    }

    /// `namespace/name` or `name`, for logs and span attributes.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}
