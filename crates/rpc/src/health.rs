//! Readiness: named checks (API reachable, caches synced, leader or standby, ...) that together
//! say whether the process is ready, served over `grpc.health.v1.Health`.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use flotilla_proto::health::v1::health_check_response::ServingStatus;
use flotilla_proto::health::v1::health_server::{Health, HealthServer};
use flotilla_proto::health::v1::{HealthCheckRequest, HealthCheckResponse};
use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// The name under which overall readiness is reported over gRPC.
pub const READINESS_SERVICE: &str = "readiness";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Check {
    ok: bool,
    message: String,
}

/// Shared, cheaply clonable readiness state.
#[derive(Clone, Debug)]
pub struct Readiness {
    checks: Arc<RwLock<BTreeMap<String, Check>>>,
    changed: watch::Sender<u64>,
    services: Arc<Vec<String>>,
}

impl Readiness {
    /// Readiness for a process serving the named gRPC services (they report as ready when the
    /// process is ready).
    pub fn new(services: &[&str]) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            checks: Arc::default(),
            changed,
            services: Arc::new(services.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    /// Sets a named check.
    pub fn set(&self, name: &str, ok: bool, message: impl Into<String>) {
        let check = Check {
            ok,
            message: message.into(),
        };
        let mut checks = self.checks.write().unwrap_or_else(|p| p.into_inner());
        if checks.get(name) != Some(&check) {
            checks.insert(name.to_owned(), check);
            drop(checks);
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// Whether every check passes (and at least one was registered).
    pub fn is_ready(&self) -> bool {
        let checks = self.checks.read().unwrap_or_else(|p| p.into_inner());
        !checks.is_empty() && checks.values().all(|c| c.ok)
    }

    /// Every check as `(name, ok, message)`, for `/readyz?verbose`.
    pub fn report(&self) -> Vec<(String, bool, String)> {
        let checks = self.checks.read().unwrap_or_else(|p| p.into_inner());
        checks
            .iter()
            .map(|(name, c)| (name.clone(), c.ok, c.message.clone()))
            .collect()
    }

    fn status(&self, service: &str) -> ServingStatus {
        if service.is_empty() {
            ServingStatus::Serving
        } else if service == READINESS_SERVICE || self.services.iter().any(|s| s == service) {
            if self.is_ready() {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            }
        } else {
            ServingStatus::ServiceUnknown
        }
    }

    /// The `grpc.health.v1.Health` service over this state.
    pub fn grpc_service(&self) -> HealthServer<Self> {
        HealthServer::new(self.clone())
    }
}

#[tonic::async_trait]
impl Health for Readiness {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let status = self.status(&request.into_inner().service);
        Ok(Response::new(HealthCheckResponse {
            status: status as i32,
        }))
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let service = request.into_inner().service;
        let this = self.clone();
        let mut changes = self.changed.subscribe();
        let stream = async_stream_like(move |tx| async move {
            let mut last = None;
            loop {
                let status = this.status(&service);
                if last != Some(status) {
                    last = Some(status);
                    if tx
                        .send(Ok(HealthCheckResponse {
                            status: status as i32,
                        }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(stream))
    }
}

/// A stream fed by a task through a channel (keeps the crate free of macro-based stream crates).
fn async_stream_like<F, Fut>(
    producer: F,
) -> Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<HealthCheckResponse, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(producer(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_needs_every_check() {
        let readiness = Readiness::new(&["flotilla.v1.Scheduler"]);
        assert!(!readiness.is_ready(), "no checks registered yet");
        readiness.set("kube-api", true, "reachable");
        readiness.set("caches", false, "syncing");
        assert!(!readiness.is_ready());
        assert_eq!(
            readiness.status("flotilla.v1.Scheduler"),
            ServingStatus::NotServing
        );
        assert_eq!(readiness.status(""), ServingStatus::Serving);
        readiness.set("caches", true, "synced");
        assert!(readiness.is_ready());
        assert_eq!(readiness.status(READINESS_SERVICE), ServingStatus::Serving);
        assert_eq!(readiness.status("other"), ServingStatus::ServiceUnknown);
        assert_eq!(readiness.report().len(), 2);
    }
}
