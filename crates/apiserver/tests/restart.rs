//! Durability across restarts: acknowledged writes survive `kill -9`, watchers resume from their
//! last resourceVersion after a restart without gaps or duplicates, compacted revisions and
//! expired continue tokens answer 410 Gone, and TLS material and tokens are reused.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use common::Server;

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": value}})).unwrap()
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    acknowledged_writes_survive_kill_9_with(&[]).await;
}

/// The same on one thread (`flotilla up`'s members): requests and the store's commits then share
/// no runtime thread, and an acknowledgement must still mean the write is durable.
#[tokio::test]
async fn acknowledged_writes_survive_kill_9_on_one_worker_thread() {
    acknowledged_writes_survive_kill_9_with(&["--worker-threads", "1"]).await;
}

/// The same as `flotilla up` starts its members: one thread and `--unsafe-no-fsync`. A commit
/// is then written but not synced; the kernel holds it, so the server's `kill -9` loses nothing
/// it acknowledged (a crash of the machine could).
#[tokio::test]
async fn acknowledged_writes_survive_kill_9_without_fsync() {
    acknowledged_writes_survive_kill_9_with(&["--worker-threads", "1", "--unsafe-no-fsync"]).await;
}

async fn acknowledged_writes_survive_kill_9_with(args: &[&str]) {
    let mut server = Server::start(args);
    let client = server.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let acked: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let api = api.clone();
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{worker}-{i}");
                match api.create(&PostParams::default(), &cm(&name, &name)).await {
                    Ok(obj) => {
                        acked
                            .lock()
                            .unwrap()
                            .insert(name, obj.metadata.resource_version.unwrap());
                    }
                    Err(_) => return,
                }
            }
        }));
    }
    common::eventually("enough acknowledged writes", Duration::from_secs(60), || {
        let n = acked.lock().unwrap().len();
        async move { (n >= 300).then_some(()) }
    })
    .await;
    // Kill while writes are in flight.
    server.kill9();
    for t in tasks {
        let _ = t.await;
    }
    let acked = acked.lock().unwrap().clone();
    server.spawn();
    let client = server.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let list = api.list(&ListParams::default()).await.unwrap();
    let stored: BTreeMap<String, (String, String)> = list
        .items
        .into_iter()
        .map(|o| {
            let name = o.metadata.name.unwrap();
            (
                name,
                (o.metadata.resource_version.unwrap(), o.data.unwrap()["v"].clone()),
            )
        })
        .collect();
    for (name, rv) in &acked {
        let (stored_rv, value) = stored
            .get(name)
            .unwrap_or_else(|| panic!("acknowledged write {name} lost"));
        assert_eq!(
            stored_rv, rv,
            "{name} has a different resourceVersion after the crash"
        );
        assert_eq!(value, name);
    }
    let max_acked = acked.values().map(|rv| rv.parse::<u64>().unwrap()).max().unwrap();
    let revision: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    assert!(revision >= max_acked);
    // Writing continues at higher revisions.
    let after = api
        .create(&PostParams::default(), &cm("after-crash", "x"))
        .await
        .unwrap();
    assert!(after.metadata.resource_version.unwrap().parse::<u64>().unwrap() > revision);
}

async fn collect_events(api: &Api<ConfigMap>, from: &str, count: usize) -> Vec<(String, String, String)> {
    let stream = api
        .watch(&WatchParams::default().timeout(10), from)
        .await
        .unwrap();
    stream
        .filter_map(|e| async move {
            match e.unwrap() {
                WatchEvent::Added(o) => Some((
                    "ADDED".to_string(),
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap(),
                )),
                WatchEvent::Modified(o) => Some((
                    "MODIFIED".to_string(),
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap(),
                )),
                WatchEvent::Deleted(o) => Some((
                    "DELETED".to_string(),
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap(),
                )),
                _ => None,
            }
        })
        .take(count)
        .collect()
        .await
}

#[tokio::test]
async fn watchers_resume_after_restart_without_gaps_or_duplicates() {
    let mut server = Server::start(&[]);
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let start = common::list_revision(&api).await;
    let mut expected = Vec::new();
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("r{i}"), "0"))
            .await
            .unwrap();
        expected.push(("ADDED".to_string(), format!("r{i}")));
    }
    // The watcher reads the first half before the crash.
    let first = collect_events(&api, &start, 5).await;
    let resume_from = first.last().unwrap().2.clone();
    // More changes, then kill -9 and more changes after the restart.
    for i in 0..5 {
        api.patch(
            &format!("r{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "1"}})),
        )
        .await
        .unwrap();
        expected.push(("MODIFIED".to_string(), format!("r{i}")));
    }
    server.kill9();
    server.spawn();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    api.delete("r9", &Default::default()).await.unwrap();
    expected.push(("DELETED".to_string(), "r9".to_string()));
    let rest = collect_events(&api, &resume_from, expected.len() - 5).await;
    let seen: Vec<(String, String)> = first
        .iter()
        .chain(rest.iter())
        .map(|(t, n, _)| (t.clone(), n.clone()))
        .collect();
    assert_eq!(seen, expected);
    let rvs: Vec<u64> = first
        .iter()
        .chain(rest.iter())
        .map(|(_, _, rv)| rv.parse().unwrap())
        .collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "events out of order: {rvs:?}"
    );

    // A graceful stop (SIGTERM) exits cleanly and keeps everything too.
    server.terminate();
    server.spawn();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    assert_eq!(api.get("r0").await.unwrap().data.unwrap()["v"], "1");
}

#[tokio::test]
async fn compacted_revisions_and_stale_continue_tokens_are_gone() {
    let mut server = Server::start(&["--watch-window", "10"]);
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let old = common::list_revision(&api).await;
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), "0"))
            .await
            .unwrap();
    }
    let page = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = page.metadata.continue_.unwrap();
    for i in 0..20 {
        api.patch(
            "c0",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    // A watch from before the window: one ERROR event, 410 Expired.
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &old)
        .await
        .unwrap()
        .boxed();
    match stream.next().await {
        Some(Err(kube::Error::Api(status))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert!(
                status
                    .message
                    .starts_with(&format!("too old resource version: {old}")),
                "{}",
                status.message
            );
        }
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    // The continue token still works while its snapshot is cached...
    let next = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(next.items.len(), 2);
    // ...but not after a restart, once the revision is compacted.
    server.terminate();
    server.spawn();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let err = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status
                    .message
                    .contains("The provided continue parameter is too old"),
                "{}",
                status.message
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

#[test]
fn restart_reuses_tls_material_and_tokens_and_rewrites_the_kubeconfig() {
    let mut server = Server::start(&[]);
    let ca = std::fs::read(server.dir.join("pki/ca.crt")).unwrap();
    let cert = std::fs::read(server.dir.join("pki/apiserver.crt")).unwrap();
    let token = server.token.clone();
    let url = server.url.clone();
    server.terminate();
    server.spawn();
    assert_eq!(std::fs::read(server.dir.join("pki/ca.crt")).unwrap(), ca);
    assert_eq!(std::fs::read(server.dir.join("pki/apiserver.crt")).unwrap(), cert);
    assert_eq!(server.token, token);
    assert_ne!(
        server.url, url,
        "an ephemeral port is picked again and written to the kubeconfig"
    );
    let tokens = std::fs::read_to_string(server.dir.join("tokens.csv")).unwrap();
    assert!(tokens.starts_with(&format!("{token},admin,")), "{tokens}");
    let (code, _) = server.curl("GET", "/api/v1/namespaces/default", None, None, None);
    assert_eq!(code, 200);
}
