//! The cluster inventory: the registered Clusters as the algorithm sees them
//! ([`ClusterView`]), kept current by a watch, with a signal whenever what scheduling reads
//! changes (so every binding is recomputed then, and only then).
//!
//! Cluster status updates that do not change a view (a new heartbeat, a version string) do not
//! signal: the views are compared, not the objects.

use std::sync::{Arc, RwLock};

use flotilla_api::Cluster;
use flotilla_runtime::Shutdown as CancellationToken;
use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::reflector::{self, Store};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

use crate::ClusterView;

/// The current cluster views and a change signal.
#[derive(Debug)]
pub struct Inventory {
    views: RwLock<Arc<Vec<ClusterView>>>,
    version: watch::Sender<u64>,
    synced: watch::Sender<bool>,
}

impl Default for Inventory {
    fn default() -> Self {
        Self {
            views: RwLock::default(),
            version: watch::channel(0).0,
            synced: watch::channel(false).0,
        }
    }
}

impl Inventory {
    /// An empty inventory, not yet synced.
    pub fn new() -> Self {
        Self::default()
    }

    /// The clusters as of now, sorted by name.
    pub fn snapshot(&self) -> Arc<Vec<ClusterView>> {
        self.views.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the views with `clusters` and marks the inventory synced; signals a change and
    /// returns `true` when the views differ from the previous ones.
    pub fn replace(&self, clusters: &[Arc<Cluster>]) -> bool {
        let mut views: Vec<ClusterView> = clusters.iter().map(|c| ClusterView::from(c.as_ref())).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        let changed = {
            let mut current = self.views.write().unwrap_or_else(|p| p.into_inner());
            if **current == views {
                false
            } else {
                *current = Arc::new(views);
                true
            }
        };
        self.synced.send_replace(true);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
        changed
    }

    /// Whether the first complete list of Clusters has been seen.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first complete list of Clusters has been seen.
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we borrow it.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// A stream that yields once now and then whenever the views change.
    pub fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        WatchStream::new(self.version.subscribe()).map(|_| ())
    }
}

/// Watches Clusters (with [`flotilla_runtime::watch`]'s shared rules) and keeps `inventory`
/// current until `shutdown`. Watch failures are retried with backoff; the inventory keeps its
/// last views meanwhile.
pub async fn run(api: Api<Cluster>, inventory: Arc<Inventory>, shutdown: CancellationToken) {
    let (reader, writer) = reflector::store();
    // Every change is reported after the store applied it, a list's only once it completed, so
    // each refresh reads a complete inventory.
    let watch = flotilla_runtime::watch::run(api, writer, |_| refresh(&reader, &inventory));
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = watch => {}
    }
}

fn refresh(reader: &Store<Cluster>, inventory: &Inventory) {
    let changed = inventory.replace(&reader.state());
    let views = inventory.snapshot();
    let ready = views.iter().filter(|c| c.ready).count();
    crate::metrics::metrics().set_clusters(ready, views.len() - ready);
    if changed {
        let names: Vec<String> = views
            .iter()
            .map(|c| format!("{}{}", c.name, if c.ready { "" } else { "(not ready)" }))
            .collect();
        tracing::info!(clusters = %names.join(","), "cluster inventory changed");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use flotilla_api::ClusterSpec;

    use super::*;

    fn cluster(name: &str, label: Option<&str>) -> Arc<Cluster> {
        let mut cluster = Cluster::new(name, ClusterSpec::default());
        cluster.metadata.labels = label.map(|l| [("env".to_owned(), l.to_owned())].into());
        Arc::new(cluster)
    }

    #[tokio::test]
    async fn signals_only_when_views_change() {
        let inventory = Inventory::new();
        assert!(!inventory.is_synced());
        let mut changes = Box::pin(inventory.changes());
        assert_eq!(changes.next().await, Some(()), "yields once at the start");

        assert!(inventory.replace(&[cluster("m2", None), cluster("m1", None)]));
        assert!(inventory.is_synced());
        inventory.wait_synced().await;
        let names: Vec<String> = inventory.snapshot().iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, vec!["m1", "m2"], "sorted by name");
        assert_eq!(changes.next().await, Some(()));

        // The same clusters in another order, or with fields scheduling does not read changed.
        let mut m1 = (*cluster("m1", None)).clone();
        m1.metadata.resource_version = Some("42".into());
        m1.metadata.annotations = Some([("note".to_owned(), "x".to_owned())].into());
        assert!(!inventory.replace(&[cluster("m2", None), Arc::new(m1)]));

        assert!(inventory.replace(&[cluster("m1", Some("prod")), cluster("m2", None)]));
        assert_eq!(changes.next().await, Some(()));
        assert!(inventory.replace(&[cluster("m1", Some("prod"))]));
        assert_eq!(inventory.snapshot().len(), 1);
        assert!(inventory.replace(&[]));
        assert!(inventory.snapshot().is_empty());
    }
}
