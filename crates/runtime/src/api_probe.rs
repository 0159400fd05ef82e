//! The `control-plane` readiness check every service reports: whether the control-plane API
//! answers `GET /version`, probed on a timer.
//!
//! Watches cannot tell this on their own: a watch re-established after an outage yields nothing
//! until its kind changes, so a check cleared on a watch error and set again on the next event
//! would keep a healthy service unready for as long as its kinds stay quiet. And a watch in its
//! backoff keeps serving a stale cache without saying so.

use std::time::Duration;

use flotilla_rpc::Readiness;
use tokio_util::sync::CancellationToken;

/// The readiness check's name (in `/readyz?verbose`).
pub const CHECK: &str = "control-plane";

/// How often the API is probed.
pub const PERIOD: Duration = Duration::from_secs(2);

/// How long one probe may take before the API counts as unreachable.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Probes the API once and records the result as [`CHECK`]; returns whether it answered.
pub async fn check(client: &kube::Client, readiness: &Readiness) -> bool {
    match tokio::time::timeout(TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(version)) => {
            readiness.set(CHECK, true, format!("reachable ({})", version.git_version));
            true
        }
        Ok(Err(error)) => {
            readiness.set(CHECK, false, format!("unreachable: {error}"));
            false
        }
        Err(_) => {
            readiness.set(
                CHECK,
                false,
                format!("unreachable: /version took over {TIMEOUT:?}"),
            );
            false
        }
    }
}

/// Keeps [`CHECK`] current every [`PERIOD`] until `shutdown` (not ready until the first answer).
pub async fn run(client: kube::Client, readiness: Readiness, shutdown: CancellationToken) {
    readiness.set(CHECK, false, "not checked yet");
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        check(&client, &readiness).await;
    }
}
