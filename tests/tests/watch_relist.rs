//! The controllers' shared watch (`flotilla_runtime::watch::run`) against a real
//! flotilla-apiserver: a handler never hears of an object before the cache holds it, and a
//! relist after the watch was cut for longer than the server's watch window reports the objects
//! deleted meanwhile as deletions (also one created again under its name) and the ones created
//! meanwhile as changes.
//!
//! The watch goes through a TCP proxy in this test that can cut every connection and refuse new
//! ones, so the outage is deterministic.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_e2e::apiserver::{ApiServer, ApiServerOptions};
use flotilla_runtime::watch::{Change, run};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A TCP proxy that can cut its connections and refuse new ones.
struct Proxy {
    address: SocketAddr,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let open = Arc::new(AtomicBool::new(true));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (accepting, tracked) = (open.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !accepting.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection closed
                }
                tracked.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        });
        Self {
            address,
            open,
            connections,
        }
    }

    /// Closes every open connection and refuses new ones until [`Proxy::restore`].
    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// What the handler saw, with whether the cache held the object at that moment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Applied { name: String, cached: bool },
    Deleted { name: String, cached: bool },
    Synced,
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"v": "0"},
    }))
    .unwrap()
}

/// Receives until (and including) the next `Synced`, within a deadline.
async fn until_synced(events: &mut mpsc::UnboundedReceiver<Seen>, what: &str) -> Vec<Seen> {
    let mut seen = Vec::new();
    let result = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some(event) = events.recv().await {
            let done = event == Seen::Synced;
            seen.push(event);
            if done {
                return;
            }
        }
    })
    .await;
    assert!(result.is_ok(), "{what}: no Synced within 90 s; saw {seen:?}");
    seen
}

fn names(seen: &[Seen], deleted: bool) -> BTreeSet<String> {
    seen.iter()
        .filter_map(|event| match event {
            Seen::Applied { name, .. } if !deleted => Some(name.clone()),
            Seen::Deleted { name, .. } if deleted => Some(name.clone()),
            _ => None,
        })
        .filter(|name| name.starts_with("cm-"))
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[tokio::test]
async fn handlers_see_only_cached_objects_and_a_relist_reports_what_changed_meanwhile() {
    let root = tempfile::tempdir().unwrap();
    let server = ApiServer::start(
        "watched",
        root.path(),
        &ApiServerOptions {
            extra_args: vec!["--watch-window".to_owned(), "5".to_owned()],
            ..Default::default()
        },
    )
    .await;
    let direct: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let initial = ["cm-a0", "cm-a1", "cm-a2", "cm-a3", "cm-a4", "cm-a5"];
    for name in initial {
        direct
            .create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }

    // The watch's client reaches the server only through the proxy.
    let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], server.port()))).await;
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.cluster_url = format!("https://{}", proxy.address).parse().unwrap();
    let watched: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");

    let (reader, writer) = reflector::store::<ConfigMap>();
    let (sender, mut events) = mpsc::unbounded_channel();
    let watch = tokio::spawn(run(watched, writer, move |change| {
        // The cache holds this very object (same uid), not just one of its name.
        let cached = |object: &ConfigMap| {
            reader
                .get(&ObjectRef::from_obj(object))
                .is_some_and(|c| c.metadata.uid == object.metadata.uid)
        };
        let seen = match change {
            Change::Applied(object) => Seen::Applied {
                name: object.name_any(),
                cached: cached(object),
            },
            Change::Deleted(object) => Seen::Deleted {
                name: object.name_any(),
                cached: cached(object),
            },
            Change::Synced => Seen::Synced,
        };
        let _ = sender.send(seen);
    }));

    // The initial list: each object reported once, already cached, then Synced.
    let listed = until_synced(&mut events, "initial list").await;
    assert_eq!(names(&listed, false), set(&initial), "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|e| !matches!(e, Seen::Applied { cached: false, .. })),
        "an object was reported before the cache held it: {listed:?}"
    );

    // Live events while connected.
    direct
        .create(&PostParams::default(), &config_map("cm-live"))
        .await
        .unwrap();
    let live = tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        live,
        Seen::Applied {
            name: "cm-live".to_owned(),
            cached: true
        }
    );

    // Cut the watch; meanwhile delete three, create two and move the server's revision far
    // past its watch window, so the watch cannot resume and must list again.
    proxy.cut();
    for name in ["cm-a0", "cm-a1", "cm-a2"] {
        direct.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for name in ["cm-b0", "cm-b1"] {
        direct
            .create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    // Deleted and created again under its name: another object.
    direct.delete("cm-a3", &DeleteParams::default()).await.unwrap();
    direct
        .create(&PostParams::default(), &config_map("cm-a3"))
        .await
        .unwrap();
    for i in 0..12 {
        direct
            .patch(
                "cm-a5",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": i.to_string()}})),
            )
            .await
            .unwrap();
    }
    proxy.restore();

    let relisted = until_synced(&mut events, "relist after the outage").await;
    assert_eq!(
        names(&relisted, true),
        set(&["cm-a0", "cm-a1", "cm-a2", "cm-a3"]),
        "objects deleted during the outage must be reported deleted: {relisted:?}"
    );
    assert_eq!(
        names(&relisted, false),
        set(&["cm-a3", "cm-a4", "cm-a5", "cm-b0", "cm-b1", "cm-live"]),
        "the relist reports what the cache now holds: {relisted:?}"
    );
    let position = |wanted: Seen| {
        relisted
            .iter()
            .position(|e| *e == wanted)
            .unwrap_or_else(|| panic!("{wanted:?} missing from the relist: {relisted:?}"))
    };
    assert!(
        position(Seen::Deleted {
            name: "cm-a3".to_owned(),
            cached: false
        }) < position(Seen::Applied {
            name: "cm-a3".to_owned(),
            cached: true
        }),
        "the re-created object is reported deleted, then applied: {relisted:?}"
    );
    for event in &relisted {
        match event {
            Seen::Applied { cached: false, .. } => panic!("reported before cached: {relisted:?}"),
            Seen::Deleted { cached: true, .. } => panic!("deletion reported while cached: {relisted:?}"),
            _ => {}
        }
    }
    watch.abort();
}
