//! `--worker-threads`: the threads that serve requests. One thread (`flotilla up`'s members)
//! serves writes and watches on the main thread; the default runs a thread per core; a number
//! out of range is refused before anything is created.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use common::Server;

/// The server's runtime threads (named `api-worker` by `main`; the kernel keeps 15 bytes of a
/// thread's name).
fn worker_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == "api-worker")
        .count()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": name}})).unwrap()
}

#[tokio::test]
async fn one_worker_thread_serves_concurrent_writes_and_a_watch_on_the_main_thread() {
    let server = Server::start(&["--worker-threads", "1"]);
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let from = common::list_revision(&api).await;
    let watch = api
        .watch(&WatchParams::default().timeout(30), &from)
        .await
        .unwrap();
    // Concurrent creates: on one thread they interleave with each other, the watch and the
    // store's commits (which have a thread of their own).
    let names: BTreeSet<String> = (0..40).map(|i| format!("one-thread-{i}")).collect();
    let created = futures::future::join_all(names.iter().map(|name| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &cm(name)).await }
    }))
    .await;
    for result in created {
        result.unwrap();
    }
    let events: Vec<(String, u64)> = watch
        .filter_map(|event| async move {
            match event.unwrap() {
                WatchEvent::Added(o) => Some((
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap().parse().unwrap(),
                )),
                _ => None,
            }
        })
        .take(names.len())
        .collect()
        .await;
    let seen: BTreeSet<String> = events.iter().map(|(name, _)| name.clone()).collect();
    assert_eq!(seen, names, "the watch delivers every create once");
    assert!(
        events.windows(2).all(|pair| pair[0].1 < pair[1].1),
        "the watch delivers in resourceVersion order: {events:?}"
    );
    assert_eq!(
        worker_threads(server.pid()),
        0,
        "--worker-threads 1 runs no runtime thread besides the main one"
    );
}

#[tokio::test]
async fn the_default_runs_worker_threads_and_a_number_sets_how_many() {
    for (args, expected) in [(&[][..], None), (&["--worker-threads", "3"][..], Some(3))] {
        let server = Server::start(args);
        // It serves.
        let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
        api.create(&PostParams::default(), &cm("served")).await.unwrap();
        let what = format!("the worker threads of a server started with {args:?}");
        let count = common::eventually(&what, Duration::from_secs(10), || {
            let count = worker_threads(server.pid());
            async move { expected.map_or(count >= 1, |n| count == n).then_some(count) }
        })
        .await;
        assert!(count >= 1, "{what}: {count}");
    }
}

#[test]
fn a_worker_thread_count_out_of_range_is_refused_naming_the_flag_before_anything_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let output = Command::new(common::binary())
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--listen", "127.0.0.1:0", "--worker-threads", "2000"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "clap's usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--worker-threads") && stderr.contains("2000") && stderr.contains("0..=1024"),
        "the error names the flag, the value and the range: {stderr}"
    );
    assert!(
        !data_dir.exists(),
        "nothing was created for a refused command line"
    );
}
