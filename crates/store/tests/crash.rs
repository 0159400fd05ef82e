//! Crash safety: a child process writes through the store and prints each acknowledged write;
//! the parent kills it with SIGKILL mid-stream, reopens the file and checks that every
//! acknowledged write is there, that revisions are consistent, and that a watcher can replay the
//! log from before the crash.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flotilla_store::{EventKind, Store, StoreOptions, Txn, TxnOutcome};

const DIR_ENV: &str = "FLOTILLA_STORE_CRASH_DIR";
/// Set (to anything) for a child whose log rolls segments and takes checkpoints every few
/// hundred writes, so that the kill lands among them.
const SMALL_ENV: &str = "FLOTILLA_STORE_CRASH_SMALL_LOG";

fn options(small: bool) -> StoreOptions {
    if small {
        StoreOptions {
            window_revisions: 500,
            segment_bytes: 16 << 10,
            checkpoint_bytes: 24 << 10,
            ..StoreOptions::default()
        }
    } else {
        StoreOptions::default()
    }
}

/// The child half: runs only when re-executed by `acknowledged_writes_survive_sigkill`.
#[test]
#[ignore = "child process of acknowledged_writes_survive_sigkill"]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let small = std::env::var_os(SMALL_ENV).is_some();
        let store = Store::open(format!("{dir}/store"), options(small)).unwrap();
        let mut tasks = Vec::new();
        for client in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let key = format!("/crash/{client}/{i:06}");
                    let value = format!("value-{client}-{i}");
                    match store.txn(Txn::new().put(&key, value.clone())).await.unwrap() {
                        TxnOutcome::Committed { revision, .. } => {
                            // One write per line: the parent may kill us between any two.
                            println!("ack {key} {value} {revision}");
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    crash_and_check(false);
}

#[test]
fn acknowledged_writes_survive_sigkill_among_segment_rolls_and_checkpoints() {
    crash_and_check(true);
}

fn crash_and_check(small: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    if small {
        command.env(SMALL_ENV, "1");
    }
    let mut child = command
        .args([
            "--exact",
            "crash_child_writer",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let ["ack", key, value, rev] = parts[..] {
            acked.insert(key.to_string(), (value.to_string(), rev.parse().unwrap()));
        }
        if acked.len() >= 3000 || Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    assert!(
        acked.len() >= 100,
        "the child acknowledged too few writes ({})",
        acked.len()
    );

    let store = Store::open(dir.path().join("store"), options(small)).unwrap();
    let max_acked = acked.values().map(|(_, rev)| *rev).max().unwrap();
    assert!(store.revision() >= max_acked, "revision went backwards");
    for (key, (value, rev)) in &acked {
        let kv = store
            .get(key)
            .unwrap_or_else(|| panic!("acknowledged write {key} lost"));
        assert_eq!(String::from_utf8_lossy(&kv.value), *value);
        assert_eq!(kv.mod_revision, *rev);
    }
    // The log replays every write of the window up to the state we recovered, once, in order
    // (with a small log, the window is the newest revisions, the rest is in a checkpoint).
    let mut watcher = store.watch("/crash/", store.compacted_revision()).unwrap();
    let batch = watcher.poll().unwrap().unwrap();
    assert_eq!(
        batch.events.len() as u64,
        store.revision() - store.compacted_revision()
    );
    assert_eq!(batch.events.last().unwrap().revision, store.revision());
    assert!(batch.events.iter().all(|e| e.kind == EventKind::Put));
    assert!(
        batch
            .events
            .windows(2)
            .all(|w| w[0].revision + 1 == w[1].revision)
    );
    let keys = store.snapshot().range("/crash/", None).count();
    assert_eq!(keys as u64, store.revision());

    // Writing continues after the crash at the next revision.
    let before = store.revision();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime
        .block_on(store.txn(Txn::new().put("/after", "x")))
        .unwrap();
    assert!(matches!(outcome, TxnOutcome::Committed { revision, .. } if revision == before + 1));
}

#[test]
fn watcher_resumes_across_reopen_without_gaps_or_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut delivered = Vec::new();
    let mut position = 0;
    for round in 0..3 {
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        let mut watcher = store.watch("/r/", position).unwrap();
        runtime.block_on(async {
            for i in 0..50 {
                store
                    .txn(Txn::new().put(format!("/r/{round}/{i}"), "v"))
                    .await
                    .unwrap();
                if i % 7 == 0 {
                    store.txn(Txn::new().put("/other", "x")).await.unwrap();
                }
            }
        });
        // Consume only part of the stream before "crashing": the rest must come after reopen.
        let batch = watcher.poll().unwrap().unwrap();
        let take = batch.events.len() / 2;
        for e in &batch.events[..take] {
            delivered.push(e.key.clone());
            position = e.revision;
        }
        store.close();
    }
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    let mut watcher = store.watch("/r/", position).unwrap();
    for e in watcher.poll().unwrap().unwrap().events {
        delivered.push(e.key.clone());
    }
    let mut expected = Vec::new();
    for round in 0..3 {
        for i in 0..50 {
            expected.push(format!("/r/{round}/{i}"));
        }
    }
    assert_eq!(delivered, expected);
}
