//! Why scheduling failed, in the words Karmada uses for the binding's `Scheduled` condition.

/// The `Scheduled=False` condition reason a failure maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScheduleErrorReason {
    /// No cluster passed the filters (Karmada's `FitError`): the message lists why each cluster
    /// was rejected. Karmada writes an empty result to the binding in this case.
    NoClusterFit,
    /// Clusters passed the filters but the placement cannot be satisfied with them (spread
    /// constraints, replica strategy, invalid input). The previous result stays in place.
    Unschedulable,
}

impl ScheduleErrorReason {
    /// The condition reason as written to the binding: `NoClusterFit` or `Unschedulable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoClusterFit => "NoClusterFit",
            Self::Unschedulable => "Unschedulable",
        }
    }
}

impl std::fmt::Display for ScheduleErrorReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scheduling failure: a condition reason and a message for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScheduleError {
    /// The condition reason.
    pub reason: ScheduleErrorReason,
    /// What went wrong, e.g. `0/3 clusters are available: 1 cluster(s) did not match the
    /// placement cluster affinity constraint, 2 cluster(s) had untolerated taint
    /// {cluster.karmada.io/not-ready:NoSchedule}.`
    pub message: String,
}

impl ScheduleError {
    /// A failure with reason [`ScheduleErrorReason::NoClusterFit`].
    pub fn no_cluster_fit(message: impl Into<String>) -> Self {
        Self {
            reason: ScheduleErrorReason::NoClusterFit,
            message: message.into(),
        }
    }

    /// A failure with reason [`ScheduleErrorReason::Unschedulable`].
    pub fn unschedulable(message: impl Into<String>) -> Self {
        Self {
            reason: ScheduleErrorReason::Unschedulable,
            message: message.into(),
        }
    }

    /// Whether the caller should replace the binding's clusters with an empty list, as Karmada
    /// does when no cluster fits; on any other failure the previous result is kept.
    pub fn clears_result(&self) -> bool {
        self.reason == ScheduleErrorReason::NoClusterFit
    }
}
