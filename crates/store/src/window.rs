//! The in-memory event window over the revision log: what watchers read from.
//!
//! Events are kept flat and in revision order; a revision's events are always added and removed
//! together, so the window holds exactly the revisions `(compacted, current]`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::Event;

/// Bounded, revision-ordered list of recent events.
pub(crate) struct Window {
    events: VecDeque<Arc<Event>>,
    bytes: usize,
    /// Every revision `<=` this is gone from the window.
    pub(crate) compacted: u64,
    max_revisions: usize,
    max_bytes: usize,
    revisions: usize,
}

impl Window {
    pub(crate) fn new(compacted: u64, max_revisions: usize, max_bytes: usize) -> Self {
        Self {
            events: VecDeque::new(),
            bytes: 0,
            compacted,
            max_revisions: max_revisions.max(1),
            max_bytes,
            revisions: 0,
        }
    }

    /// Appends the events of one new revision.
    pub(crate) fn push_revision(&mut self, events: impl IntoIterator<Item = Arc<Event>>) {
        let mut any = false;
        for event in events {
            self.bytes += event.weight();
            self.events.push_back(event);
            any = true;
        }
        if any {
            self.revisions += 1;
        }
    }

    /// Drops the oldest revisions until the window is within its limits; returns the new
    /// compacted revision if anything was dropped.
    pub(crate) fn trim(&mut self) -> Option<u64> {
        let mut trimmed = None;
        while self.revisions > self.max_revisions || (self.bytes > self.max_bytes && self.revisions > 1) {
            let Some(first) = self.events.front().map(|e| e.revision) else {
                break;
            };
            while let Some(event) = self.events.front() {
                if event.revision != first {
                    break;
                }
                self.bytes -= event.weight();
                self.events.pop_front();
            }
            self.revisions -= 1;
            self.compacted = first;
            trimmed = Some(first);
        }
        trimmed
    }

    /// Every event with a revision greater than `after` whose key starts with `prefix`.
    pub(crate) fn events_after(&self, after: u64, prefix: &str) -> Vec<Arc<Event>> {
        let start = self.events.partition_point(|e| e.revision <= after);
        self.events
            .range(start..)
            .filter(|e| e.key.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Number of events held.
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    /// Approximate bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, KeyValue};

    fn event(revision: u64, key: &str, size: usize) -> Arc<Event> {
        Arc::new(Event {
            revision,
            kind: EventKind::Put,
            key: key.into(),
            value: Some(Arc::new(KeyValue {
                key: key.into(),
                value: vec![0; size],
                create_revision: revision,
                mod_revision: revision,
            })),
            prev: None,
        })
    }

    #[test]
    fn trims_whole_revisions_by_count() {
        let mut w = Window::new(0, 2, usize::MAX);
        w.push_revision([event(1, "/a", 1), event(1, "/b", 1)]);
        w.push_revision([event(2, "/a", 1)]);
        assert_eq!(w.trim(), None);
        w.push_revision([event(3, "/c", 1)]);
        assert_eq!(w.trim(), Some(1));
        assert_eq!(w.compacted, 1);
        assert_eq!(w.len(), 2);
        let revs: Vec<u64> = w.events_after(0, "/").iter().map(|e| e.revision).collect();
        assert_eq!(revs, vec![2, 3]);
    }

    #[test]
    fn trims_by_bytes_but_keeps_the_newest_revision() {
        let mut w = Window::new(0, 100, 500);
        w.push_revision([event(1, "/a", 400)]);
        w.push_revision([event(2, "/a", 400)]);
        assert_eq!(w.trim(), Some(1));
        w.push_revision([event(3, "/a", 4000)]);
        assert_eq!(w.trim(), Some(2));
        assert_eq!(
            w.len(),
            1,
            "the newest revision stays even when it alone is over budget"
        );
    }

    #[test]
    fn events_after_filters_by_prefix_and_revision() {
        let mut w = Window::new(0, 100, usize::MAX);
        w.push_revision([event(1, "/pods/a", 1)]);
        w.push_revision([event(2, "/cms/a", 1)]);
        w.push_revision([event(3, "/pods/b", 1)]);
        let got: Vec<(u64, String)> = w
            .events_after(1, "/pods/")
            .iter()
            .map(|e| (e.revision, e.key.clone()))
            .collect();
        assert_eq!(got, vec![(3, "/pods/b".to_string())]);
        assert!(w.events_after(3, "/").is_empty());
    }
}
