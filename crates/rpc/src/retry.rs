//! Retries with exponential backoff and jitter.
//!
//! flotilla's calls are idempotent (they name objects by key and generation), so any call may
//! be retried. Only transient failures are retried; a lost call is not fatal anyway, because
//! the receiver's own watch repairs it.

use std::future::Future;
use std::time::{Duration, Instant};

use tonic::{Code, Status};

/// How often and how patiently to retry.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Backoff before the second attempt.
    pub initial_backoff: Duration,
    /// Upper bound of one backoff.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The backoff before attempt `attempt` (2 = first retry), with up to 50% jitter subtracted.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(2).min(20);
        let base = self
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.max_backoff);
        let jitter = base.mul_f64(jitter_fraction() * 0.5);
        base.saturating_sub(jitter)
    }
}

/// Whether a failure is transient.
pub fn is_retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted | Code::Unknown
    )
}

/// Calls `op` until it succeeds, fails permanently, or `policy.max_attempts` is reached, and
/// records the call's latency and final code under `method`.
pub async fn call<T, F, Fut>(method: &str, policy: &RetryPolicy, mut op: F) -> Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(value) => {
                crate::metrics::observe_client(method, Code::Ok, started.elapsed());
                return Ok(value);
            }
            Err(status) if attempt < policy.max_attempts && is_retryable(status.code()) => {
                attempt += 1;
                tracing::debug!(method, attempt, code = ?status.code(), message = status.message(), "retrying gRPC call");
                tokio::time::sleep(policy.backoff(attempt)).await;
            }
            Err(status) => {
                crate::metrics::observe_client(method, status.code(), started.elapsed());
                return Err(status);
            }
        }
    }
}

/// A fraction in [0, 1) that differs between calls; good enough for backoff jitter.
fn jitter_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    (hasher.finish() % 10_000) as f64 / 10_000.0
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn retries_transient_failures_then_succeeds() {
        let attempts = AtomicU32::new(0);
        let result = call("test/Transient", &fast(), || async {
            if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(Status::unavailable("down"))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts() {
        let attempts = AtomicU32::new(0);
        let result: Result<(), _> = call("test/Down", &fast(), || async {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err(Status::deadline_exceeded("slow"))
        })
        .await;
        assert_eq!(result.unwrap_err().code(), Code::DeadlineExceeded);
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn permanent_failures_are_not_retried() {
        let attempts = AtomicU32::new(0);
        let result: Result<(), _> = call("test/Bad", &fast(), || async {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err(Status::invalid_argument("binding is required"))
        })
        .await;
        assert_eq!(result.unwrap_err().code(), Code::InvalidArgument);
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
        };
        for attempt in 2..10 {
            let backoff = policy.backoff(attempt);
            let base = Duration::from_millis(100 * (1 << (attempt - 2).min(2)));
            assert!(
                backoff <= base && backoff >= base / 2,
                "attempt {attempt}: {backoff:?} vs {base:?}"
            );
        }
    }
}
