//! Setting status conditions the Kubernetes way: one entry per type, `lastTransitionTime` moves
//! only when `status` changes, and a write is needed only when something changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// `"True"`, `"False"` or `"Unknown"`.
pub fn status_str(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// The condition of type `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `"True"`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Sets the condition of type `type_`; returns whether anything changed (and so whether the
/// status needs writing). `lastTransitionTime` is `now` when the status changes or the
/// condition is new, and kept otherwise.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Timestamp,
) -> bool {
    let status = status_str(status);
    let message = message.into();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status == status
                && existing.reason == reason
                && existing.message == message
                && existing.observed_generation == observed_generation
            {
                return false;
            }
            if existing.status != status {
                existing.last_transition_time = Time(now);
            }
            existing.status = status.to_owned();
            existing.reason = reason.to_owned();
            existing.message = message;
            existing.observed_generation = observed_generation;
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message,
                observed_generation,
                last_transition_time: Time(now),
            });
            true
        }
    }
}

/// Removes the condition of type `type_`; returns whether it was present.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn new_condition_is_added() {
        let mut conditions = vec![];
        assert!(set(
            &mut conditions,
            "Scheduled",
            true,
            "Success",
            "ok",
            Some(1),
            t(10)
        ));
        assert_eq!(conditions.len(), 1);
        assert!(is_true(&conditions, "Scheduled"));
        assert_eq!(conditions[0].last_transition_time, Time(t(10)));
    }

    #[test]
    fn unchanged_condition_needs_no_write() {
        let mut conditions = vec![];
        set(
            &mut conditions,
            "Scheduled",
            true,
            "Success",
            "ok",
            Some(1),
            t(10),
        );
        assert!(!set(
            &mut conditions,
            "Scheduled",
            true,
            "Success",
            "ok",
            Some(1),
            t(20)
        ));
        assert_eq!(conditions[0].last_transition_time, Time(t(10)));
    }

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut conditions = vec![];
        set(
            &mut conditions,
            "Applied",
            true,
            "AppliedSuccessful",
            "ok",
            None,
            t(10),
        );
        assert!(set(
            &mut conditions,
            "Applied",
            true,
            "AppliedSuccessful",
            "still ok",
            None,
            t(20)
        ));
        assert_eq!(conditions[0].last_transition_time, Time(t(10)));
        assert!(set(
            &mut conditions,
            "Applied",
            false,
            "AppliedFailed",
            "boom",
            None,
            t(30)
        ));
        assert_eq!(conditions[0].last_transition_time, Time(t(30)));
        assert!(!is_true(&conditions, "Applied"));
        assert!(remove(&mut conditions, "Applied"));
        assert!(!remove(&mut conditions, "Applied"));
    }
}
