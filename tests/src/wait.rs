//! Waiting on conditions with a deadline.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some`, or panics with `what` after `timeout`.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_until_explained(what, timeout, check, || async { String::new() }).await
}

/// [`wait_until`], adding what `explain` reports (e.g. which objects are not there yet) to the
/// panic message on timeout.
pub async fn wait_until_explained<T, F, Fut, E, EFut>(
    what: &str,
    timeout: Duration,
    mut check: F,
    explain: E,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
    E: FnOnce() -> EFut,
    EFut: Future<Output = String>,
{
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if Instant::now() >= deadline {
            let explanation = explain().await;
            let sep = if explanation.is_empty() { "" } else { "; " };
            panic!("timed out after {timeout:?} waiting for {what}{sep}{explanation}");
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// Polls `check` until it returns true, or panics with `what` after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until(what, timeout, || {
        let fut = check();
        async move { fut.await.then_some(()) }
    })
    .await
}

/// Asserts that `check` stays true for `period` (polling); used to prove that something does
/// NOT happen, e.g. a suspended cluster is not updated. Panics with `what` on the first failure.
pub async fn stays<F, Fut>(what: &str, period: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + period;
    while Instant::now() < deadline {
        assert!(check().await, "{what} did not hold");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(check().await, "{what} did not hold");
}
