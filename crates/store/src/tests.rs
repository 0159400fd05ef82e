#![allow(clippy::unwrap_used)]
//! Unit tests of the store's transactional, snapshot and watch semantics.

use super::*;
use std::path::{Path, PathBuf};

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path().join("store"), StoreOptions::default()).unwrap()
}

fn committed(outcome: TxnOutcome) -> (u64, Vec<Option<Arc<KeyValue>>>) {
    match outcome {
        TxnOutcome::Committed { revision, results } => (revision, results),
        other => panic!("expected commit, got {other:?}"),
    }
}

#[tokio::test]
async fn revisions_increase_by_one_per_changing_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    assert_eq!(store.revision(), 0);
    let (r1, res) = committed(store.txn(Txn::new().put("/a", "1")).await.unwrap());
    assert_eq!(r1, 1);
    let a = res[0].clone().unwrap();
    assert_eq!((a.create_revision, a.mod_revision), (1, 1));
    let (r2, res) = committed(store.txn(Txn::new().put("/a", "2").put("/b", "x")).await.unwrap());
    assert_eq!(r2, 2);
    assert_eq!(
        res[0].as_ref().unwrap().create_revision,
        1,
        "update keeps create revision"
    );
    assert_eq!(res[0].as_ref().unwrap().mod_revision, 2);
    // Deleting a missing key changes nothing and consumes no revision.
    let (r3, res) = committed(store.txn(Txn::new().delete("/missing")).await.unwrap());
    assert_eq!(r3, 2);
    assert!(res[0].is_none());
    let (r4, res) = committed(store.txn(Txn::new().delete("/b")).await.unwrap());
    assert_eq!(r4, 3);
    assert_eq!(res[0].as_ref().unwrap().value, b"x");
    assert!(store.get("/b").is_none());
}

#[tokio::test]
async fn conditions_gate_the_whole_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    committed(
        store
            .txn(Txn::new().when("/a", Compare::Absent).put("/a", "1"))
            .await
            .unwrap(),
    );
    let outcome = store
        .txn(
            Txn::new()
                .when("/a", Compare::Absent)
                .put("/a", "2")
                .put("/other", "z"),
        )
        .await
        .unwrap();
    match outcome {
        TxnOutcome::ConditionFailed { index, current } => {
            assert_eq!(index, 0);
            assert_eq!(current.unwrap().value, b"1");
        }
        other => panic!("expected failure, got {other:?}"),
    }
    assert!(
        store.get("/other").is_none(),
        "a failed transaction writes nothing"
    );
    assert_eq!(store.revision(), 1);

    let stale = store
        .txn(Txn::new().when("/a", Compare::ModRevision(7)).put("/a", "3"))
        .await
        .unwrap();
    assert!(matches!(stale, TxnOutcome::ConditionFailed { .. }));
    let (rev, _) = committed(
        store
            .txn(Txn::new().when("/a", Compare::ModRevision(1)).put("/a", "3"))
            .await
            .unwrap(),
    );
    assert_eq!(rev, 2);
    let missing = store
        .txn(Txn::new().when("/nope", Compare::Present).delete("/nope"))
        .await
        .unwrap();
    assert!(matches!(
        missing,
        TxnOutcome::ConditionFailed { current: None, .. }
    ));
}

#[tokio::test]
async fn concurrent_creates_of_one_key_have_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .txn(
                    Txn::new()
                        .when("/race", Compare::Absent)
                        .put("/race", format!("{i}")),
                )
                .await
                .unwrap()
        }));
    }
    let mut winners = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), TxnOutcome::Committed { .. }) {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(store.revision(), 1);
}

#[tokio::test]
async fn snapshots_are_isolated_from_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for key in ["/p/a", "/p/b", "/p/c", "/q/a", "/pz"] {
        store.txn(Txn::new().put(key, key)).await.unwrap();
    }
    let snap = store.snapshot();
    store
        .txn(Txn::new().delete("/p/b").put("/p/d", "d"))
        .await
        .unwrap();
    let keys: Vec<&str> = snap.range("/p/", None).map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, vec!["/p/a", "/p/b", "/p/c"]);
    let after: Vec<&str> = snap
        .range("/p/", Some("/p/a"))
        .map(|kv| kv.key.as_str())
        .collect();
    assert_eq!(after, vec!["/p/b", "/p/c"]);
    assert_eq!(snap.revision(), 5);
    let now: Vec<String> = store
        .snapshot()
        .range("/p/", None)
        .map(|kv| kv.key.clone())
        .collect();
    assert_eq!(now, vec!["/p/a", "/p/c", "/p/d"]);
}

#[tokio::test]
async fn watch_delivers_every_event_once_in_order_with_prefix_filter() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store.txn(Txn::new().put("/w/a", "0")).await.unwrap();
    let mut watcher = store.watch("/w/", 1).unwrap();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                let key = if i % 3 == 0 {
                    "/x/other".to_string()
                } else {
                    format!("/w/{}", i % 5)
                };
                store.txn(Txn::new().put(key, format!("{i}"))).await.unwrap();
            }
            store.txn(Txn::new().delete("/w/a")).await.unwrap();
        })
    };
    let mut seen = Vec::new();
    while seen.last().map(|e: &Arc<Event>| e.kind) != Some(EventKind::Delete) {
        let batch = tokio::time::timeout(std::time::Duration::from_secs(10), watcher.next_batch())
            .await
            .unwrap()
            .unwrap();
        seen.extend(batch.events);
    }
    writer.await.unwrap();
    let expected = (0..200).filter(|i| i % 3 != 0).count() + 1;
    assert_eq!(seen.len(), expected);
    assert!(seen.windows(2).all(|w| w[0].revision < w[1].revision));
    assert!(seen.iter().all(|e| e.key.starts_with("/w/")));
    let last = seen.last().unwrap();
    assert_eq!(last.prev.as_ref().unwrap().value, b"0");
    // Updates carry the previous value (needed for selector transitions).
    let update = seen
        .iter()
        .find(|e| e.prev.is_some() && e.kind == EventKind::Put)
        .unwrap();
    assert!(update.prev.as_ref().unwrap().mod_revision < update.revision);
}

#[tokio::test]
async fn watch_from_compacted_revision_fails_with_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        window_revisions: 5,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path().join("store"), options).unwrap();
    let mut early = store.watch("/", 0).unwrap();
    for i in 0..20 {
        store.txn(Txn::new().put(format!("/k{i}"), "v")).await.unwrap();
    }
    assert_eq!(store.compacted_revision(), 15);
    let err = store.watch("/", 3).err().unwrap();
    assert_eq!(
        err,
        WatchError::Compacted {
            requested: 3,
            compacted: 15
        }
    );
    assert_eq!(err.to_string(), "too old resource version: 3 (15)");
    assert!(matches!(
        early.next_batch().await,
        Err(WatchError::Compacted { .. })
    ));
    let mut ok = store.watch("/", 15).unwrap();
    assert_eq!(ok.next_batch().await.unwrap().events.len(), 5);
}

#[tokio::test]
async fn reopen_resumes_state_revision_and_watch_window() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        store.txn(Txn::new().put("/a", "1")).await.unwrap();
        store.txn(Txn::new().put("/a", "2").put("/b", "1")).await.unwrap();
        store.txn(Txn::new().delete("/b")).await.unwrap();
        store.close();
    }
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(store.revision(), 3);
    let a = store.get("/a").unwrap();
    assert_eq!(
        (a.value.as_slice(), a.create_revision, a.mod_revision),
        (&b"2"[..], 1, 2)
    );
    assert!(store.get("/b").is_none());
    let mut watcher = store.watch("/", 1).unwrap();
    let batch = watcher.poll().unwrap().unwrap();
    let summary: Vec<(u64, EventKind, &str)> = batch
        .events
        .iter()
        .map(|e| (e.revision, e.kind, e.key.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (2, EventKind::Put, "/a"),
            (2, EventKind::Put, "/b"),
            (3, EventKind::Delete, "/b")
        ]
    );
    assert_eq!(batch.events[0].prev.as_ref().unwrap().value, b"1");
    let (rev, _) = committed(store.txn(Txn::new().put("/c", "1")).await.unwrap());
    assert_eq!(rev, 4, "revisions continue after a restart");
}

/// Every group commit waits for `fdatasync` by default; with `fsync` off none does, and what was
/// acknowledged is still in the log when the store opens again (the kernel wrote it; `kill -9`
/// of a server is covered in flotilla-apiserver's `restart` tests).
#[tokio::test]
async fn commits_are_synced_unless_fsync_is_off() {
    for fsync in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let options = StoreOptions {
            fsync,
            ..StoreOptions::default()
        };
        {
            let store = Store::open(&path, options.clone()).unwrap();
            for i in 0..10 {
                store.txn(Txn::new().put(format!("/k{i}"), "v")).await.unwrap();
            }
            // A transaction that changes nothing writes nothing.
            store
                .txn(Txn::new().when("/k0", Compare::Absent).put("/k0", "x"))
                .await
                .unwrap();
            let synced = store.stats().synced_commits;
            if fsync {
                // Sequential transactions are a group commit each.
                assert_eq!(synced, 10, "fsync on");
            } else {
                assert_eq!(synced, 0, "fsync off");
            }
            store.close();
        }
        let store = Store::open(&path, options).unwrap();
        assert_eq!(store.revision(), 10, "fsync {fsync}");
        assert_eq!(store.get("/k9").unwrap().value, b"v");
        assert_eq!(store.get("/k0").unwrap().value, b"v");
        assert_eq!(
            store.stats().synced_commits,
            0,
            "a new store counts from its opening"
        );
    }
}

#[tokio::test]
async fn compaction_is_persisted_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let options = StoreOptions {
        window_revisions: 3,
        ..StoreOptions::default()
    };
    {
        let store = Store::open(&path, options.clone()).unwrap();
        for i in 0..10 {
            store.txn(Txn::new().put("/k", format!("{i}"))).await.unwrap();
        }
        store.close();
    }
    let store = Store::open(&path, options).unwrap();
    assert_eq!(store.revision(), 10);
    assert!(store.compacted_revision() >= 7);
    assert!(store.watch("/", 2).is_err());
    let stats = store.stats();
    assert!(stats.window_events <= 3);
    assert_eq!(stats.keys, 1);
}

#[tokio::test]
async fn closed_store_rejects_writes_and_ends_watchers() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut watcher = store.watch("/", 0).unwrap();
    store.close();
    assert!(matches!(
        store.txn(Txn::new().put("/a", "1")).await,
        Err(StoreError::Closed)
    ));
    assert_eq!(watcher.next_batch().await.err(), Some(WatchError::Closed));
}

#[tokio::test]
async fn multiple_ops_on_one_key_in_one_transaction_make_one_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store.txn(Txn::new().put("/a", "orig")).await.unwrap();
    let mut watcher = store.watch("/", 1).unwrap();
    store.txn(Txn::new().put("/a", "x").put("/a", "y")).await.unwrap();
    store.txn(Txn::new().put("/n", "1").delete("/n")).await.unwrap();
    store.txn(Txn::new().put("/a", "z").delete("/a")).await.unwrap();
    let events = watcher.poll().unwrap().unwrap().events;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].value.as_ref().unwrap().value, b"y");
    assert_eq!(events[0].prev.as_ref().unwrap().value, b"orig");
    assert_eq!(events[1].kind, EventKind::Delete);
    assert_eq!(events[1].prev.as_ref().unwrap().value, b"y");
}

#[tokio::test]
async fn snapshot_at_rebuilds_past_revisions_from_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store.txn(Txn::new().put("/a", "1")).await.unwrap(); // 1
    store.txn(Txn::new().put("/b", "1")).await.unwrap(); // 2
    store.txn(Txn::new().put("/a", "2").delete("/b")).await.unwrap(); // 3
    store.txn(Txn::new().put("/c", "1")).await.unwrap(); // 4
    let at2 = store.snapshot_at(2).unwrap();
    assert_eq!(at2.revision(), 2);
    let view: Vec<(String, Vec<u8>, u64)> = at2
        .range("/", None)
        .map(|kv| (kv.key.clone(), kv.value.clone(), kv.mod_revision))
        .collect();
    assert_eq!(
        view,
        vec![("/a".into(), b"1".to_vec(), 1), ("/b".into(), b"1".to_vec(), 2)]
    );
    assert_eq!(store.snapshot_at(0).unwrap().len(), 0);
    assert_eq!(store.snapshot_at(4).unwrap().len(), 2);
    assert!(store.snapshot_at(5).is_err(), "future revisions are refused");
}

/// Every event in the window, values and previous states included, as a watcher from the
/// compacted revision sees them.
fn window(store: &Store) -> Vec<Event> {
    let mut watcher = store.watch("/", store.compacted_revision()).unwrap();
    watcher
        .poll()
        .unwrap()
        .map(|batch| batch.events.iter().map(|e| (**e).clone()).collect())
        .unwrap_or_default()
}

/// Every key-value of `snapshot`, in key order.
fn contents(snapshot: &Snapshot) -> Vec<KeyValue> {
    snapshot.range("/", None).map(|kv| (**kv).clone()).collect()
}

/// A mix of creates, updates, deletes, re-creates and several keys per transaction, `rounds`
/// times over; the values carry their round so that no two are alike.
async fn churn(store: &Store, rounds: usize) {
    for round in 0..rounds {
        let v = |what: &str| format!("{what}-{round}");
        store.txn(Txn::new().put("/a", v("a"))).await.unwrap();
        store
            .txn(Txn::new().put("/b", v("b")).put("/a", v("a2")))
            .await
            .unwrap();
        store.txn(Txn::new().delete("/b")).await.unwrap();
        store
            .txn(Txn::new().put("/b", v("b-again")).put("/c", v("c")))
            .await
            .unwrap();
        store
            .txn(Txn::new().put("/c", v("c2")).put("/c", v("c3")))
            .await
            .unwrap();
        store
            .txn(Txn::new().delete("/c").put("/d", v("d")))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn reopen_finds_each_events_value_from_the_next_previous_state() {
    for window_revisions in [1_000, 7, 1] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let options = StoreOptions {
            window_revisions,
            ..StoreOptions::default()
        };
        let before = {
            let store = Store::open(&path, options.clone()).unwrap();
            churn(&store, 5).await;
            let before = (window(&store), store.compacted_revision(), store.snapshot());
            store.close();
            before
        };
        let store = Store::open(&path, options.clone()).unwrap();
        let after = window(&store);
        assert!(
            !after.is_empty(),
            "window {window_revisions}: the window survives a reopen"
        );
        // The window may have been compacted further on disk than in memory, never less.
        assert!(store.compacted_revision() >= before.1);
        let kept = &before.0[before.0.len() - after.len()..];
        assert_eq!(
            after, kept,
            "window {window_revisions}: every event as it was, values included"
        );
        assert_eq!(
            contents(&store.snapshot()),
            contents(&before.2),
            "window {window_revisions}"
        );
        // And it goes on the same way: a second life, then a third open.
        churn(&store, 2).await;
        let again = window(&store);
        store.close();
        let store = Store::open(&path, options).unwrap();
        let reopened = window(&store);
        assert_eq!(reopened, again[again.len() - reopened.len()..]);
    }
}

/// Writes `state` and `events` as a redb store file of the format before the write-ahead log:
/// the `kv` and `meta` tables, and each revision's record in the `history` table or, with
/// `first_format`, in the first format's `log` table (new values too).
fn write_redb_store(path: &Path, state: &[KeyValue], events: &[Event], revision: u64, first_format: bool) {
    let db = redb::Database::create(path).unwrap();
    let wtx = db.begin_write().unwrap();
    {
        let mut kv = wtx.open_table(legacy::KV).unwrap();
        for item in state {
            kv.insert(item.key.as_str(), codec::encode_kv(item).as_slice())
                .unwrap();
        }
        let table = if first_format {
            legacy::LOG_V1
        } else {
            legacy::HISTORY
        };
        let mut log = wtx.open_table(table).unwrap();
        let mut by_revision: std::collections::BTreeMap<u64, Vec<Arc<Event>>> = Default::default();
        for event in events {
            by_revision
                .entry(event.revision)
                .or_default()
                .push(Arc::new(event.clone()));
        }
        for (rev, events) in &by_revision {
            let record = if first_format {
                codec::encode_log_v1(events)
            } else {
                codec::encode_history(events)
            };
            log.insert(*rev, record.as_slice()).unwrap();
        }
        let mut meta = wtx.open_table(legacy::META).unwrap();
        meta.insert(legacy::META_REVISION, revision).unwrap();
    }
    wtx.commit().unwrap();
}

/// The window, state and revision of a store after `churn`.
async fn churned(rounds: usize) -> (Vec<Event>, Vec<KeyValue>, u64) {
    let source = tempfile::tempdir().unwrap();
    let store = open(&source);
    churn(&store, rounds).await;
    let found = (window(&store), contents(&store.snapshot()), store.revision());
    store.close();
    found
}

#[tokio::test]
async fn a_redb_store_of_either_log_format_is_imported_with_its_history() {
    let (events, state, revision) = churned(3).await;
    for first_format in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("store.redb");
        write_redb_store(&file, &state, &events, revision, first_format);
        let options = StoreOptions {
            import_from: Some(file.clone()),
            ..StoreOptions::default()
        };
        let store = Store::open(dir.path().join("store"), options.clone()).unwrap();
        assert_eq!(store.revision(), revision);
        assert_eq!(
            window(&store),
            events,
            "first format {first_format}: the old log's events, values and previous states"
        );
        assert_eq!(contents(&store.snapshot()), state);
        assert!(!file.exists(), "the imported file is renamed");
        assert!(dir.path().join("store.redb.imported").is_file());
        // The store goes on from there, and a second open reads the new format alone.
        let (next, _) = committed(store.txn(Txn::new().put("/e", "1")).await.unwrap());
        assert_eq!(next, revision + 1);
        let expected = window(&store);
        store.close();
        let store = Store::open(dir.path().join("store"), options).unwrap();
        assert_eq!(window(&store), expected);
        assert_eq!(store.revision(), revision + 1);
    }
}

#[tokio::test]
async fn an_import_cut_short_runs_again_and_a_finished_one_is_not_repeated() {
    let (events, state, revision) = churned(2).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.redb");
    write_redb_store(&file, &state, &events, revision, false);
    // An import that stopped before its rename left its staging directory behind.
    std::fs::create_dir_all(dir.path().join("store.importing")).unwrap();
    std::fs::write(
        dir.path().join("store.importing/wal-00000000000000000001.log"),
        b"junk",
    )
    .unwrap();
    let options = StoreOptions {
        import_from: Some(file.clone()),
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path().join("store"), options.clone()).unwrap();
    assert_eq!(contents(&store.snapshot()), state);
    store.txn(Txn::new().put("/after", "1")).await.unwrap();
    store.close();
    assert!(!dir.path().join("store.importing").exists());
    // A file at the old path once the store exists (an import that stopped before renaming
    // it) is renamed, not imported again over newer writes.
    std::fs::rename(dir.path().join("store.redb.imported"), &file).unwrap();
    let store = Store::open(dir.path().join("store"), options).unwrap();
    assert_eq!(store.revision(), revision + 1);
    assert!(store.get("/after").is_some());
    assert!(!file.exists());
}

#[tokio::test]
async fn a_redb_log_that_disagrees_with_its_state_is_reported_corrupt() {
    let (events, mut state, revision) = churned(1).await;
    // Drop the newest value of /a from the kv table: the log's last put of it has no value left.
    state.retain(|kv| kv.key != "/a");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.redb");
    write_redb_store(&file, &state, &events, revision, false);
    let options = StoreOptions {
        import_from: Some(file.clone()),
        ..StoreOptions::default()
    };
    let err = Store::open(dir.path().join("store"), options).err().unwrap();
    let message = err.to_string();
    assert!(
        matches!(err, StoreError::Corrupt(_))
            && message.contains("\"/a\"")
            && message.contains("absent")
            && message.contains("restore the data directory"),
        "{message}"
    );
    assert!(file.is_file(), "a failed import leaves the file as it was");
    assert!(!dir.path().join("store").exists(), "and creates no store");
}

/// Options that roll segments and take checkpoints after a few records.
fn small_log() -> StoreOptions {
    StoreOptions {
        window_revisions: 20,
        segment_bytes: 2_000,
        checkpoint_bytes: 3_000,
        ..StoreOptions::default()
    }
}

/// The files in a store directory whose names start with `prefix`, sorted.
fn files(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// Waits until a checkpoint exists and the log before it is gone (the checkpoint thread's
/// work), with a deadline.
fn wait_for_pruned_log(dir: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while files(dir, "checkpoint-").is_empty()
        || files(dir, "wal-").first().is_some_and(|f| f.ends_with("01.log"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint pruned the log: {:?}",
            files(dir, "")
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[tokio::test]
async fn checkpoints_replace_the_log_they_cover_and_a_reopen_rebuilds_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = Store::open(&path, small_log()).unwrap();
    for i in 0..200 {
        let value = format!("{i:0>100}");
        store
            .txn(Txn::new().put(format!("/k/{}", i % 13), value))
            .await
            .unwrap();
        if i % 17 == 0 {
            store
                .txn(Txn::new().delete(format!("/k/{}", i % 13)))
                .await
                .unwrap();
        }
    }
    wait_for_pruned_log(&path);
    let before = (
        window(&store),
        contents(&store.snapshot()),
        store.revision(),
        store.compacted_revision(),
    );
    store.close();
    let checkpoints = files(&path, "checkpoint-");
    assert_eq!(
        checkpoints.len(),
        1,
        "older checkpoints are deleted: {checkpoints:?}"
    );
    let segments = files(&path, "wal-");
    assert!(
        segments.len() < 10,
        "the log the checkpoints cover is deleted: {segments:?}"
    );

    let store = Store::open(&path, small_log()).unwrap();
    assert_eq!(store.revision(), before.2);
    assert_eq!(contents(&store.snapshot()), before.1);
    assert_eq!(
        store.compacted_revision(),
        before.3,
        "the same window as before the restart"
    );
    assert_eq!(
        window(&store),
        before.0,
        "every event, values and previous states included"
    );
    let (next, _) = committed(store.txn(Txn::new().put("/k/x", "1")).await.unwrap());
    assert_eq!(next, before.2 + 1);
}

/// The newest segment and the byte where its last record ends, found by reading its frames.
fn newest_segment(dir: &Path) -> (PathBuf, usize) {
    let name = files(dir, "wal-").pop().unwrap();
    let path = dir.join(name);
    let bytes = std::fs::read(&path).unwrap();
    let mut pos = 16;
    while let codec::Frame::Whole(_, next) = codec::next_frame(&bytes, pos) {
        pos = next;
    }
    (path, pos)
}

#[tokio::test]
async fn a_write_cut_short_at_the_end_of_the_log_is_dropped_and_zeroed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        store.txn(Txn::new().put("/a", "1")).await.unwrap();
        store.txn(Txn::new().put("/b", "2")).await.unwrap();
        store.close();
    }
    // A third record whose write the crash cut short: its header and half of its payload.
    let (segment, end) = newest_segment(&path);
    let mut record = Vec::new();
    let event = Arc::new(Event {
        revision: 3,
        kind: EventKind::Put,
        key: "/c".into(),
        value: Some(Arc::new(KeyValue {
            key: "/c".into(),
            value: b"never acknowledged".to_vec(),
            create_revision: 3,
            mod_revision: 3,
        })),
        prev: None,
    });
    codec::put_logged(&mut record, 3, &[event]);
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
        file.write_all_at(&record[..record.len() / 2], end as u64)
            .unwrap();
    }
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(store.revision(), 2);
    assert!(store.get("/c").is_none());
    let bytes = std::fs::read(&segment).unwrap();
    assert!(
        bytes[end..].iter().all(|b| *b == 0),
        "what followed the last whole record is zeroed"
    );
    // The next write takes the cut-short record's place, and both survive a reopen.
    store.txn(Txn::new().put("/d", "4")).await.unwrap();
    store.close();
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(store.revision(), 3);
    assert_eq!(store.get("/d").unwrap().mod_revision, 3);
    assert_eq!(store.get("/a").unwrap().value, b"1");
}

/// A closed store of `count` puts of 100 bytes (revisions 1 to `count`) in segments of 200
/// bytes, one or two records each; its directory (held for the test), path and options.
async fn small_segments(count: usize) -> (tempfile::TempDir, PathBuf, StoreOptions) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let options = StoreOptions {
        segment_bytes: 200,
        ..StoreOptions::default()
    };
    let store = Store::open(&path, options.clone()).unwrap();
    for i in 0..count {
        store
            .txn(Txn::new().put(format!("/k/{i}"), "x".repeat(100)))
            .await
            .unwrap();
    }
    store.close();
    (dir, path, options)
}

#[tokio::test]
async fn damage_before_the_end_of_the_log_is_reported_corrupt_naming_the_file() {
    let (_dir, path, options) = small_segments(10).await;
    let segments = files(&path, "wal-");
    assert!(segments.len() > 2, "{segments:?}");
    // Flip a byte inside the first segment's first record: newer segments follow it.
    let first = path.join(&segments[0]);
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[40] ^= 0xff;
    std::fs::write(&first, &bytes).unwrap();
    let err = Store::open(&path, options.clone()).err().unwrap();
    let message = err.to_string();
    assert!(
        matches!(err, StoreError::Corrupt(_))
            && message.contains(&segments[0])
            && message.contains("checksum")
            && message.contains("restore the data directory"),
        "{message}"
    );
    // A missing segment in the middle is a gap in the revisions.
    bytes[40] ^= 0xff;
    std::fs::write(&first, &bytes).unwrap();
    std::fs::remove_file(path.join(&segments[1])).unwrap();
    let message = Store::open(&path, options).err().unwrap().to_string();
    assert!(
        message.contains(&segments[2]) && message.contains("starts at revision"),
        "{message}"
    );
}

#[tokio::test]
async fn a_segment_whose_creation_did_not_finish_is_removed_and_a_damaged_header_is_corrupt() {
    let (_dir, path, options) = small_segments(4).await;
    assert!(files(&path, "wal-").len() > 1);
    // The next segment, created when the power went: its name is there, its header and zeros
    // were not written yet.
    let unfinished = path.join("wal-00000000000000000005.log");
    std::fs::write(&unfinished, [0u8; 10]).unwrap();
    let store = Store::open(&path, options.clone()).unwrap();
    assert_eq!(store.revision(), 4);
    assert!(!unfinished.exists());
    store.txn(Txn::new().put("/k/4", "y")).await.unwrap();
    store.close();
    let store = Store::open(&path, options.clone()).unwrap();
    assert_eq!(store.get("/k/4").unwrap().mod_revision, 5);
    store.close();
    // The same damage to the header of a segment that holds records is corruption.
    let newest = path.join(files(&path, "wal-").pop().unwrap());
    let mut bytes = std::fs::read(&newest).unwrap();
    bytes[..16].fill(0);
    std::fs::write(&newest, &bytes).unwrap();
    let message = Store::open(&path, options).err().unwrap().to_string();
    assert!(
        message.contains("header is damaged") && message.contains("holds records"),
        "{message}"
    );
}

#[tokio::test]
async fn a_damaged_checkpoint_is_reported_corrupt_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = Store::open(&path, small_log()).unwrap();
        for i in 0..200 {
            store
                .txn(Txn::new().put(format!("/k/{}", i % 7), format!("{i:0>100}")))
                .await
                .unwrap();
        }
        wait_for_pruned_log(&path);
        store.close();
    }
    let checkpoint = path.join(files(&path, "checkpoint-").pop().unwrap());
    let mut bytes = std::fs::read(&checkpoint).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&checkpoint, &bytes).unwrap();
    let message = Store::open(&path, small_log()).err().unwrap().to_string();
    assert!(
        message.contains(&checkpoint.display().to_string()) && message.contains("checksum"),
        "{message}"
    );
    // An unfinished checkpoint (`.tmp`) is not read, and is removed.
    bytes[middle] ^= 0xff;
    std::fs::write(&checkpoint, &bytes).unwrap();
    std::fs::write(path.join("checkpoint-99999999999999999999.tmp"), b"half").unwrap();
    let store = Store::open(&path, small_log()).unwrap();
    assert_eq!(store.snapshot().len(), 7);
    assert!(files(&path, "checkpoint-").iter().all(|f| f.ends_with(".ckpt")));
}

#[tokio::test]
async fn a_store_open_in_one_process_cannot_be_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let message = Store::open(dir.path().join("store"), StoreOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.contains("open in another process") && message.contains("--data-dir"),
        "{message}"
    );
    store.close();
    drop(store);
    let store = open(&dir);
    assert_eq!(store.revision(), 0);
}

#[tokio::test]
async fn a_batch_larger_than_a_segment_starts_a_segment_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let options = StoreOptions {
        segment_bytes: 1_000,
        ..StoreOptions::default()
    };
    let store = Store::open(&path, options.clone()).unwrap();
    store.txn(Txn::new().put("/small", "1")).await.unwrap();
    let big = vec![7u8; 300_000];
    store.txn(Txn::new().put("/big", big.clone())).await.unwrap();
    store.txn(Txn::new().put("/small", "2")).await.unwrap();
    store.close();
    assert_eq!(files(&path, "wal-").len(), 3);
    let store = Store::open(&path, options).unwrap();
    assert_eq!(store.get("/big").unwrap().value, big);
    assert_eq!(store.get("/small").unwrap().value, b"2");
    assert_eq!(store.revision(), 3);
}

#[test]
fn checkpoints_of_an_empty_map_and_of_several_frames_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    assert!(checkpoint::write(dir.path(), 3, &OrdMap::new()).unwrap() > 0);
    let empty = checkpoint::read_newest(dir.path()).unwrap().unwrap();
    assert_eq!((empty.revision, empty.map.len()), (3, 0));
    // About 3 MiB of key-values: three or four frames of about a block each.
    let mut map = OrdMap::new();
    for i in 0..300u64 {
        let key = format!("/k/{i:03}");
        let kv = KeyValue {
            key: key.clone(),
            value: vec![(i % 251) as u8; 10_000],
            create_revision: i + 1,
            mod_revision: i + 4,
        };
        map.insert(key, Arc::new(kv));
    }
    let bytes = checkpoint::write(dir.path(), 7, &map).unwrap();
    assert!(bytes > 3_000_000, "{bytes}");
    let read = checkpoint::read_newest(dir.path()).unwrap().unwrap();
    assert_eq!((read.revision, read.bytes), (7, bytes));
    assert_eq!(read.map, map);
}
