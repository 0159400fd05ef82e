//! One scheduling attempt per binding at a time in this process, and the newest version of each
//! binding this process has read from the API or written.
//!
//! A binding is scheduled from two sides: its watch events (through the work queue, which never
//! hands one key to two workers) and gRPC `Schedule` calls (the detector's, after each binding
//! write). Without coordination the two run at once on the same binding, both write, and one of
//! them loses with 409 Conflict, reads the binding again and finds nothing left to do; and a
//! watch event of an older version, arriving after this process already wrote a newer one,
//! makes it decide on a stale copy and write against it, losing again. In the throughput
//! benchmark that was one failed write per member object.
//!
//! So attempts on one binding take turns ([`Attempts::lock`]), and each records the newest
//! resourceVersion it saw ([`Seen::observe`]). A watch-triggered attempt whose cached copy is
//! older than that ([`Seen::is_older`]) is skipped: the event of the newer version is on its way
//! and queues the binding again. This is an optimisation, never an input of a decision: a
//! restarted process knows nothing, skips nothing and converges as before (every write still
//! carries the resourceVersion it was decided on). resourceVersions are compared as integers,
//! as the API orders them (`flotilla_api::revision`); one that is not an integer is never
//! called older.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

use crate::binding::BindingKey;

/// The newest resourceVersion of one binding this process has read or written.
#[derive(Debug, Default)]
pub struct Seen {
    resource_version: Option<u64>,
}

impl Seen {
    /// Records a version read from the API or returned by a write.
    pub fn observe(&mut self, resource_version: Option<&str>) {
        if let Some(version) = parse(resource_version) {
            self.resource_version = Some(self.resource_version.map_or(version, |seen| seen.max(version)));
        }
    }

    /// Whether a copy at `resource_version` is older than a version this process has seen.
    pub fn is_older(&self, resource_version: Option<&str>) -> bool {
        matches!((parse(resource_version), self.resource_version), (Some(copy), Some(seen)) if copy < seen)
    }
}

fn parse(resource_version: Option<&str>) -> Option<u64> {
    resource_version?.parse().ok()
}

/// The per-binding turns and versions of one process.
#[derive(Debug, Default)]
pub struct Attempts {
    by_key: Mutex<HashMap<BindingKey, Arc<tokio::sync::Mutex<Seen>>>>,
}

impl Attempts {
    /// Waits for `key`'s turn; the guard holds what was seen of it.
    pub async fn lock(&self, key: &BindingKey) -> OwnedMutexGuard<Seen> {
        let entry = Arc::clone(
            self.by_key
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key.clone())
                .or_default(),
        );
        entry.lock_owned().await
    }

    /// Forgets a deleted binding (a binding created again under its name starts afresh: its
    /// versions are newer anyway).
    pub fn forget(&self, key: &BindingKey) {
        self.by_key.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }

    /// How many bindings are remembered.
    pub fn len(&self) -> usize {
        self.by_key.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no binding is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use flotilla_proto::v1::BindingKind;

    use super::*;

    fn key(name: &str) -> BindingKey {
        BindingKey {
            kind: BindingKind::ResourceBinding,
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    #[test]
    fn a_copy_is_older_only_than_a_newer_version_seen() {
        let mut seen = Seen::default();
        assert!(!seen.is_older(Some("5")), "nothing seen yet");
        seen.observe(Some("10"));
        seen.observe(Some("7"));
        assert!(seen.is_older(Some("9")));
        assert!(!seen.is_older(Some("10")));
        assert!(!seen.is_older(Some("11")));
        // Versions that are not integers are never called older, nor remembered.
        assert!(!seen.is_older(Some("abc")));
        assert!(!seen.is_older(None));
        seen.observe(Some("xyz"));
        assert!(seen.is_older(Some("9")));
    }

    #[tokio::test]
    async fn attempts_on_one_binding_take_turns_and_others_do_not_wait() {
        let attempts = Arc::new(Attempts::default());
        let mut first = attempts.lock(&key("a")).await;
        first.observe(Some("3"));
        // Another binding goes ahead.
        let other = tokio::time::timeout(Duration::from_secs(5), attempts.lock(&key("b"))).await;
        assert!(other.is_ok());
        drop(other);
        // The same binding waits for the first attempt, then sees what it saw.
        let waiting = {
            let attempts = Arc::clone(&attempts);
            tokio::spawn(async move { attempts.lock(&key("a")).await.is_older(Some("2")) })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        assert!(waiting.await.unwrap_or(false));
        assert_eq!(attempts.len(), 2);
        attempts.forget(&key("a"));
        assert!(!attempts.lock(&key("a")).await.is_older(Some("2")));
        attempts.forget(&key("a"));
        attempts.forget(&key("b"));
        assert!(attempts.is_empty());
    }
}
