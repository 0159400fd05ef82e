//! Micro benchmark of the store alone: durable puts per second at several concurrency levels,
//! snapshot range speed and watch delivery latency. Run with
//! `cargo bench -p flotilla-store` (prints a table; not run in CI). The last two lines are the
//! CPU one commit of one write costs the process, the writer thread's fdatasync included.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use flotilla_store::{Store, StoreOptions, Txn};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("bench"), StoreOptions::default()).unwrap();
    let value = vec![b'x'; 1024];
    println!("{:<34} {:>12}", "case", "result");
    for clients in [1usize, 16, 64, 256] {
        let per_client = (8000 / clients).max(20);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let store = store.clone();
            let value = value.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..per_client {
                    store
                        .txn(Txn::new().put(format!("/bench/{clients}/{c}/{i}"), value.clone()))
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let rate = (clients * per_client) as f64 / start.elapsed().as_secs_f64();
        println!(
            "{:<34} {:>10.0}/s",
            format!("durable 1KiB puts, {clients} clients"),
            rate
        );
    }

    let snap = store.snapshot();
    let start = Instant::now();
    let n = snap.range("/bench/", None).count();
    println!(
        "{:<34} {:>10.1}ms",
        format!("snapshot range of {n} keys"),
        start.elapsed().as_secs_f64() * 1e3
    );

    let mut watchers = Vec::new();
    for _ in 0..100 {
        let mut w = store.watch("/lat/", store.revision()).unwrap();
        watchers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while lat.len() < 200 {
                let batch = w.next_batch().await.unwrap();
                for e in batch.events {
                    let sent: u128 = String::from_utf8_lossy(&e.value.as_ref().unwrap().value)
                        .parse()
                        .unwrap();
                    lat.push(now_micros() - sent);
                }
            }
            lat
        }));
    }
    for i in 0..200 {
        store
            .txn(Txn::new().put(format!("/lat/{i}"), now_micros().to_string()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut all = Vec::new();
    for w in watchers {
        all.extend(w.await.unwrap());
    }
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)] as f64 / 1000.0;
    println!(
        "{:<34} {:>10.2}ms",
        "watch delivery p50 (100 watchers)",
        pct(0.50)
    );
    println!(
        "{:<34} {:>10.2}ms",
        "watch delivery p99 (100 watchers)",
        pct(0.99)
    );
    store.close();

    // What one commit costs the process (user + system CPU, the writer thread's fsync
    // included): one client, so every commit holds one write, as on a quiet member cluster.
    for (case, window) in [
        ("4KiB updates, window full", 1_000),
        ("4KiB updates, window filling", 1_000_000),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            window_revisions: window,
            ..StoreOptions::default()
        };
        let store = Store::open(dir.path().join("cpu"), options).unwrap();
        let value = vec![b'y'; 4096];
        for i in 0..2_000 {
            store
                .txn(Txn::new().put(format!("/cpu/{}", i % 500), value.clone()))
                .await
                .unwrap();
        }
        let n = 4_000;
        let (cpu, start) = (process_cpu_seconds(), Instant::now());
        for i in 0..n {
            store
                .txn(Txn::new().put(format!("/cpu/{}", i % 500), value.clone()))
                .await
                .unwrap();
        }
        let per_commit = (process_cpu_seconds() - cpu) / f64::from(n) * 1e6;
        let wall = start.elapsed().as_secs_f64() / f64::from(n) * 1e6;
        println!(
            "{:<34} {:>8.0}us CPU, {:.0}us wall per commit",
            case, per_commit, wall
        );
        store.close();
    }
}

/// User + system CPU of this process so far (Linux `/proc/self/stat`, clock ticks of 10 ms).
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn now_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}
