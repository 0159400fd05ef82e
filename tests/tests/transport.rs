//! The services' control-plane client (`flotilla_runtime::kube_client`, ADR 0020) against a real
//! flotilla-apiserver: it speaks HTTP/2, so concurrent requests and an open watch share one
//! connection, where kube's default HTTP/1.1 client opens one per concurrent request. And
//! execution's member client (ADR 0031): the same transport with a deadline per request, which
//! fails a request to a stalled server without failing the connection for the next.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use flotilla_e2e::apiserver::ApiServerOptions;
use flotilla_e2e::{ApiServer, wait_until};
use flotilla_runtime::KubeArgs;
use flotilla_runtime::transport::{DeadlineExceeded, DeadlineLayer, client_builder};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};

const CONCURRENT: usize = 48;

/// Inodes of this process's sockets.
fn own_sockets() -> HashSet<u64> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?.to_owned();
            target.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// How many established TCP connections this process holds to `port`.
fn connections_to(port: u16) -> usize {
    let own = own_sockets();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields
                .get(2)
                .and_then(|remote| remote.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            let established = fields.get(3) == Some(&"01");
            let inode = fields.get(9).and_then(|inode| inode.parse::<u64>().ok());
            established && remote_port == Some(port) && inode.is_some_and(|inode| own.contains(&inode))
        })
        .count()
}

fn config_map(name: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Creates `CONCURRENT` ConfigMaps named `<prefix>-<i>` at once.
async fn create_at_once(api: &Api<ConfigMap>, prefix: &str) {
    let creates = (0..CONCURRENT).map(|i| {
        let api = api.clone();
        let object = config_map(format!("{prefix}-{i}"));
        async move { api.create(&PostParams::default(), &object).await }
    });
    for result in futures::future::join_all(creates).await {
        result.unwrap();
    }
}

/// A flotilla-apiserver named `name` in `root`, once its readiness probes' connections are gone
/// (so this process's connections to it are the test's own), and the flags to reach it.
async fn start_server(name: &str, root: &std::path::Path) -> (ApiServer, KubeArgs) {
    let server = ApiServer::start(name, root, &ApiServerOptions::default()).await;
    let port = server.port();
    wait_until(
        "the readiness probes' connections to close",
        Duration::from_secs(30),
        || async { (connections_to(port) == 0).then_some(()) },
    )
    .await;
    let args = KubeArgs {
        kubeconfig: Some(server.kubeconfig().to_owned()),
        context: None,
    };
    (server, args)
}

#[tokio::test]
async fn concurrent_requests_and_a_watch_share_one_http2_connection() {
    let root = tempfile::tempdir().unwrap();
    let (server, args) = start_server("control-plane", root.path()).await;
    let port = server.port();
    let client = flotilla_runtime::kube_client(&args).await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let listed = api.list(&Default::default()).await.unwrap();
    let version = listed.metadata.resource_version.unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();
    create_at_once(&api, "h2").await;
    let mut added = HashSet::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while added.len() < CONCURRENT {
            if let Some(WatchEvent::Added(object)) = watch.try_next().await.unwrap() {
                added.insert(object.metadata.name.unwrap());
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the watch delivered {} of {CONCURRENT} creations", added.len()));
    assert_eq!(
        connections_to(port),
        1,
        "{CONCURRENT} concurrent creates and a watch over one HTTP/2 connection"
    );

    // kube's default client, for contrast: one HTTP/1.1 connection per concurrent request. This
    // is what the count above would have shown without HTTP/2.
    let plain: Api<ConfigMap> = Api::default_namespaced(server.client().await);
    create_at_once(&plain, "h1").await;
    let after = connections_to(port);
    assert!(
        after > 2,
        "kube's HTTP/1.1 client opened {} connection(s) for {CONCURRENT} concurrent creates",
        after - 1
    );
    drop(watch);
}

#[tokio::test]
async fn a_request_to_a_stalled_server_fails_at_its_deadline_and_the_connection_serves_again() {
    const DEADLINE: Duration = Duration::from_secs(2);
    let root = tempfile::tempdir().unwrap();
    let (mut server, args) = start_server("member1", root.path()).await;
    let port = server.port();
    let config = flotilla_runtime::kube_config(&args).await.unwrap();
    // As execution builds its member clients (`clusters::member_client`).
    let client = client_builder(&config)
        .unwrap()
        .with_layer(&DeadlineLayer::new(DEADLINE))
        .build();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    create_at_once(&api, "deadline").await;
    assert_eq!(
        connections_to(port),
        1,
        "the member client's requests share one HTTP/2 connection"
    );

    server.process().pause();
    let started = Instant::now();
    let error = api
        .get("deadline-0")
        .await
        .expect_err("a stalled server does not answer");
    let waited = started.elapsed();
    server.process().resume();
    let kube::Error::Service(source) = &error else {
        panic!("the deadline fails the request as a transport error (execution: unreachable), got {error:?}");
    };
    let exceeded = source
        .downcast_ref::<DeadlineExceeded>()
        .unwrap_or_else(|| panic!("a DeadlineExceeded, got {source}"));
    assert_eq!(exceeded.deadline, DEADLINE);
    assert!(
        waited >= DEADLINE && waited < DEADLINE + Duration::from_secs(3),
        "failed after {waited:?}, the deadline is {DEADLINE:?}"
    );

    // The server answers again, on the connection the stalled request left open.
    let object = api.get("deadline-0").await.unwrap();
    assert_eq!(object.metadata.name.as_deref(), Some("deadline-0"));
    assert_eq!(
        api.list(&Default::default()).await.unwrap().items.len(),
        CONCURRENT
    );
    assert_eq!(
        connections_to(port),
        1,
        "a request past its deadline does not cost the connection"
    );
}
