//! Watchers: pull-based readers of the event window.
//!
//! A watcher remembers the last revision it has seen and, when woken by a new revision, copies
//! the matching events after it out of the window. Nothing is pushed into per-watcher buffers,
//! so a slow watcher costs no memory; if it falls so far behind that its position is compacted,
//! it gets [`WatchError::Compacted`] (the caller re-lists, like a Kubernetes client on 410).

use std::sync::Arc;

use crate::{Event, Shared, WatchError};

/// Events delivered by one [`Watcher::next_batch`] call.
#[derive(Clone, Debug)]
pub struct WatchBatch {
    /// Matching events, in revision order (may be empty when only other keys changed).
    pub events: Vec<Arc<Event>>,
    /// The watcher has now seen everything up to this revision (usable for progress
    /// notifications / bookmarks).
    pub revision: u64,
}

/// A stream of the events under one key prefix.
pub struct Watcher {
    shared: Arc<Shared>,
    prefix: String,
    seen: u64,
    rx: tokio::sync::watch::Receiver<u64>,
}

impl Watcher {
    pub(crate) fn new(shared: Arc<Shared>, prefix: String, after: u64) -> Self {
        let rx = shared.revision_tx.subscribe();
        Self {
            shared,
            prefix,
            seen: after,
            rx,
        }
    }

    /// The last revision this watcher has delivered (or skipped as not matching).
    pub fn revision(&self) -> u64 {
        self.seen
    }

    /// Waits until the store moves past [`Watcher::revision`], then returns every matching
    /// event since. The batch can be empty (only other prefixes changed); its `revision` then
    /// still advances.
    pub async fn next_batch(&mut self) -> Result<WatchBatch, WatchError> {
        loop {
            self.rx.borrow_and_update();
            if let Some(batch) = self.poll()? {
                return Ok(batch);
            }
            if self.shared.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(WatchError::Closed);
            }
            if self.rx.changed().await.is_err() {
                return Err(WatchError::Closed);
            }
        }
    }

    /// Returns what is available now without waiting (`None` if nothing happened).
    pub fn poll(&mut self) -> Result<Option<WatchBatch>, WatchError> {
        let state = self.shared.state.read();
        if self.seen < state.window.compacted {
            return Err(WatchError::Compacted {
                requested: self.seen,
                compacted: state.window.compacted,
            });
        }
        if state.revision <= self.seen {
            return Ok(None);
        }
        let events = state.window.events_after(self.seen, &self.prefix);
        self.seen = state.revision;
        Ok(Some(WatchBatch {
            events,
            revision: self.seen,
        }))
    }
}
