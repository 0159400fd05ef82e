//! gRPC abuse: the services' endpoints called with the generated clients of `flotilla-proto`
//! with missing fields, unknown enum values, unknown object keys and oversized messages, and
//! held open by peers that connect and then hang. Every call must be answered within its
//! deadline with a sensible status, and the service must stay healthy.

use std::time::{Duration, Instant};

use flotilla_proto::health::v1::HealthCheckRequest;
use flotilla_proto::health::v1::health_check_response::ServingStatus;
use flotilla_proto::health::v1::health_client::HealthClient;
use flotilla_proto::v1::dependency_distributor_client::DependencyDistributorClient;
use flotilla_proto::v1::execution_client::ExecutionClient;
use flotilla_proto::v1::scheduler_client::SchedulerClient;
use flotilla_proto::v1::{BindingRef, DispatchRequest, ScheduleRequest, SyncDependenciesRequest};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::binaries;

/// The deadline of one abusive call: a service must answer well within it.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// Size of the oversized messages (above tonic's default 4 MiB decoding limit).
const OVERSIZED: usize = 5 * 1024 * 1024;
/// Idle connections held open against each service during the hanging-peer probe.
const HANGING_PEERS: usize = 24;

/// One abusive call and how the service answered.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    /// The service.
    pub service: String,
    /// What was sent.
    pub call: String,
    /// Whether the answer was acceptable.
    pub passed: bool,
    /// The answer (status code and message, or the outcome).
    pub answer: String,
    /// How long it took, ms.
    pub millis: u64,
}

/// Whether `code` is a sensible answer to an abusive request: an explicit refusal or a normal
/// answer, not a hang (`DeadlineExceeded`), a dead peer (`Unavailable`) or a server bug.
pub fn acceptable(code: Code) -> bool {
    !matches!(
        code,
        Code::DeadlineExceeded | Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
    )
}

fn channel(address: &str) -> Result<Channel, String> {
    Endpoint::from_shared(address.to_owned())
        .map(|e| {
            e.timeout(DEADLINE)
                .connect_timeout(Duration::from_secs(2))
                .connect_lazy()
        })
        .map_err(|e| format!("invalid address {address}: {e}"))
}

fn judge<T: std::fmt::Debug>(
    service: &str,
    call: &str,
    started: Instant,
    result: Result<T, Status>,
) -> Probe {
    let millis = started.elapsed().as_millis() as u64;
    let (passed, answer) = match result {
        Ok(response) => (true, format!("OK {response:?}")),
        Err(status) => {
            let message: String = status.message().chars().take(160).collect();
            (
                acceptable(status.code()),
                format!("{:?}: {message}", status.code()),
            )
        }
    };
    Probe {
        service: service.to_owned(),
        call: call.to_owned(),
        passed: passed && started.elapsed() < DEADLINE,
        answer,
        millis,
    }
}

/// The abusive binding references: (description, reference or none).
fn bad_refs() -> Vec<(&'static str, Option<BindingRef>)> {
    let unknown = BindingRef::resource_binding(
        "soak-nowhere",
        "does-not-exist-deployment",
        1,
        "00000000-0000-0000-0000-000000000000",
    );
    let mut bad_kind = unknown.clone();
    bad_kind.kind = 77;
    let mut no_name = unknown.clone();
    no_name.name.clear();
    let mut oversized = unknown.clone();
    oversized.name = "x".repeat(OVERSIZED);
    let mut negative = unknown.clone();
    negative.generation = -5;
    vec![
        ("missing binding", None),
        ("binding without a name", Some(no_name)),
        ("unknown enum value kind=77", Some(bad_kind)),
        ("unknown object key", Some(unknown)),
        ("negative generation", Some(negative)),
        ("oversized message (5 MiB name)", Some(oversized)),
    ]
}

/// Sends every abusive request to the scheduler, execution and dependency-distributor at
/// `address_of(binary)`.
pub async fn abuse(address_of: &dyn Fn(&str) -> Option<String>) -> Vec<Probe> {
    let mut probes = Vec::new();
    for service in [
        binaries::SCHEDULER,
        binaries::EXECUTION,
        binaries::DEPENDENCY_DISTRIBUTOR,
    ] {
        let Some(address) = address_of(service) else {
            continue;
        };
        let channel = match channel(&address) {
            Ok(channel) => channel,
            Err(error) => {
                probes.push(Probe {
                    service: service.to_owned(),
                    call: "connect".to_owned(),
                    passed: false,
                    answer: error,
                    millis: 0,
                });
                continue;
            }
        };
        for (call, binding) in bad_refs() {
            let started = Instant::now();
            let probe = match service {
                binaries::SCHEDULER => {
                    let mut client = SchedulerClient::new(channel.clone());
                    judge(
                        service,
                        call,
                        started,
                        client
                            .schedule(ScheduleRequest { binding })
                            .await
                            .map(|r| r.into_inner()),
                    )
                }
                binaries::EXECUTION => {
                    let mut client = ExecutionClient::new(channel.clone());
                    judge(
                        service,
                        call,
                        started,
                        client
                            .dispatch(DispatchRequest { binding })
                            .await
                            .map(|r| r.into_inner()),
                    )
                }
                _ => {
                    let mut client = DependencyDistributorClient::new(channel.clone());
                    judge(
                        service,
                        call,
                        started,
                        client
                            .sync_dependencies(SyncDependenciesRequest { binding })
                            .await
                            .map(|r| r.into_inner()),
                    )
                }
            };
            probes.push(probe);
        }
    }
    probes
}

/// Asks `address`'s standard health service whether the process is serving.
pub async fn serving(address: &str) -> Result<(), String> {
    let channel = channel(address)?;
    let mut client = HealthClient::new(channel);
    let response = client
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?
        .into_inner();
    if response.status == ServingStatus::Serving as i32 {
        Ok(())
    } else {
        Err(format!("health status {}", response.status))
    }
}

/// Holds [`HANGING_PEERS`] connections to `address` (`http://host:port`) that send nothing or
/// half an HTTP/2 preface and then hang, and checks that the service still answers health
/// checks meanwhile.
pub async fn hanging_peers(service: &str, address: &str) -> Probe {
    let started = Instant::now();
    let host = address.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    for i in 0..HANGING_PEERS {
        if let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(&host)).await
        {
            if i % 2 == 1 {
                // Half a connection preface: the server waits for the rest that never comes.
                let _ = stream.write_all(b"PRI * HTTP/2.0\r\n").await;
            }
            held.push(stream);
        }
    }
    let result = tokio::time::timeout(DEADLINE, serving(address)).await;
    let connected = held.len();
    drop(held);
    let (passed, answer) = match result {
        Ok(Ok(())) => (
            true,
            format!("SERVING while {connected} hanging peers were connected"),
        ),
        Ok(Err(error)) => (
            false,
            format!("health check failed with {connected} hanging peers: {error}"),
        ),
        Err(_) => (
            false,
            format!("no health answer within {DEADLINE:?} with {connected} hanging peers"),
        ),
    };
    Probe {
        service: service.to_owned(),
        call: format!("{HANGING_PEERS} hanging peers"),
        passed,
        answer,
        millis: started.elapsed().as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hangs_and_crashes_are_not_acceptable_answers() {
        assert!(acceptable(Code::InvalidArgument));
        assert!(acceptable(Code::ResourceExhausted));
        assert!(acceptable(Code::NotFound));
        assert!(acceptable(Code::Ok));
        assert!(!acceptable(Code::DeadlineExceeded));
        assert!(!acceptable(Code::Unavailable));
        assert!(!acceptable(Code::Internal));
    }

    #[test]
    fn the_abusive_references_cover_every_kind_of_abuse() {
        let refs = bad_refs();
        assert!(refs.iter().any(|(_, r)| r.is_none()));
        assert!(
            refs.iter()
                .any(|(_, r)| r.as_ref().is_some_and(|r| r.name.len() >= OVERSIZED))
        );
        assert!(refs.iter().any(|(_, r)| r.as_ref().is_some_and(|r| r.kind == 77)));
    }
}
