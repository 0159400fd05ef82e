//! The gRPC `flotilla.v1.Scheduler/Schedule` handler: schedules the named binding right away,
//! the same way the watch does, and answers with the result.

use std::sync::Arc;

use flotilla_api::{ClusterResourceBinding, ResourceBinding};
use flotilla_proto::v1::scheduler_server::{Scheduler, SchedulerServer};
use flotilla_proto::v1::{self, BindingKind, ScheduleRequest, ScheduleResponse};
use tonic::{Request, Response, Status};

use crate::binding::BindingKey;
use crate::reconcile::{Context, Outcome, ReconcileError, Report, Trigger, schedule_binding};

/// The gRPC service name, as health checks know it.
pub const SERVICE_NAME: &str = "flotilla.v1.Scheduler";

/// Serves `Schedule` over a shared [`Context`].
#[derive(Clone)]
pub struct ScheduleService {
    ctx: Arc<Context>,
}

impl ScheduleService {
    /// A service scheduling with `ctx`.
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// The tonic server for this service.
    pub fn into_server(self) -> SchedulerServer<Self> {
        SchedulerServer::new(self)
    }
}

/// The response for a scheduling report.
pub fn response(report: &Report) -> ScheduleResponse {
    let outcome = match report.outcome {
        Outcome::Scheduled => v1::Outcome::Done,
        Outcome::Unchanged | Outcome::Skipped | Outcome::Stale => v1::Outcome::Unchanged,
        Outcome::NotFound => v1::Outcome::NotFound,
    };
    ScheduleResponse {
        outcome: outcome as i32,
        clusters: report
            .clusters
            .iter()
            .map(|t| v1::TargetCluster {
                name: t.name.clone(),
                replicas: t.replicas,
            })
            .collect(),
        observed_generation: report.observed_generation.unwrap_or_default(),
        message: report.unschedulable.clone().unwrap_or_default(),
    }
}

fn status_of(error: &ReconcileError) -> Status {
    match error {
        ReconcileError::NotSynced => Status::unavailable(error.to_string()),
        ReconcileError::Conflicts { .. } => Status::aborted(error.to_string()),
        ReconcileError::Api { .. } => Status::unavailable(error.to_string()),
    }
}

#[tonic::async_trait]
impl Scheduler for ScheduleService {
    async fn schedule(
        &self,
        request: Request<ScheduleRequest>,
    ) -> Result<Response<ScheduleResponse>, Status> {
        let reference = request
            .into_inner()
            .binding
            .ok_or_else(|| Status::invalid_argument("binding is required: name the binding to schedule"))?;
        let key = BindingKey::from_reference(&reference)
            .map_err(|error| Status::invalid_argument(error.to_string()))?;
        let report = match key.kind {
            BindingKind::ClusterResourceBinding => {
                schedule_binding::<ClusterResourceBinding>(&self.ctx, &key, None, Trigger::Grpc).await
            }
            _ => schedule_binding::<ResourceBinding>(&self.ctx, &key, None, Trigger::Grpc).await,
        }
        .map_err(|error| status_of(&error))?;
        Ok(Response::new(response(&report)))
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::TargetCluster;

    use super::*;

    #[test]
    fn reports_become_responses() {
        let report = Report {
            outcome: Outcome::Scheduled,
            clusters: vec![TargetCluster {
                name: "member1".into(),
                replicas: 2,
            }],
            observed_generation: Some(2),
            generation: 2,
            unschedulable: None,
            next_check: None,
        };
        let answer = response(&report);
        assert_eq!(answer.outcome, v1::Outcome::Done as i32);
        assert_eq!(answer.clusters.len(), 1);
        assert_eq!(answer.clusters[0].name, "member1");
        assert_eq!(answer.clusters[0].replicas, 2);
        assert_eq!(answer.observed_generation, 2);
        assert!(answer.message.is_empty());

        let report = Report {
            outcome: Outcome::Unchanged,
            unschedulable: Some("0/3 clusters are available".into()),
            observed_generation: None,
            ..report
        };
        let answer = response(&report);
        assert_eq!(answer.outcome, v1::Outcome::Unchanged as i32);
        assert_eq!(answer.observed_generation, 0);
        assert_eq!(answer.message, "0/3 clusters are available");

        for (outcome, expected) in [
            (Outcome::NotFound, v1::Outcome::NotFound),
            (Outcome::Skipped, v1::Outcome::Unchanged),
        ] {
            let report = Report {
                outcome,
                clusters: vec![],
                observed_generation: None,
                generation: 0,
                unschedulable: None,
                next_check: None,
            };
            assert_eq!(response(&report).outcome, expected as i32);
        }
    }

    #[test]
    fn errors_map_to_retryable_codes() {
        assert_eq!(
            status_of(&ReconcileError::NotSynced).code(),
            tonic::Code::Unavailable
        );
        assert_eq!(
            status_of(&ReconcileError::Conflicts { key: "x".into() }).code(),
            tonic::Code::Aborted
        );
    }
}
