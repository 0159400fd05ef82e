//! Process footprint from `/proc`: resident memory (`/proc/<pid>/status` `VmRSS`) and CPU time
//! (`/proc/<pid>/stat` utime + stime), sampled while a scenario runs; and the whole machine's
//! CPU time (`/proc/stat`), which also counts the kernel's own threads (block writeback,
//! network soft interrupts) that no process is charged for.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use super::stats::round;

/// Clock ticks per second of `/proc/<pid>/stat` times. Linux reports them in USER_HZ, which is
/// 100 on every architecture flotilla runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of one process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// User + system CPU time, seconds.
    pub cpu_seconds: f64,
}

/// `VmRSS` in KiB from the text of `/proc/<pid>/status`.
pub fn parse_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// utime + stime in seconds from the text of `/proc/<pid>/stat`. The command name (field 2)
/// may contain spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
}

/// Reads process `pid` now; `None` when it does not run.
pub fn read(pid: u32) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(Reading {
        rss_kib: parse_rss_kib(&status)?,
        cpu_seconds: parse_cpu_seconds(&stat)?,
    })
}

/// The whole machine's CPU time since boot, all cores together, seconds (`/proc/stat`'s `cpu`
/// line, in USER_HZ).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MachineTimes {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: f64,
    /// idle + iowait.
    pub idle: f64,
    /// Time the hypervisor gave another guest while this one had work.
    pub steal: f64,
}

impl MachineTimes {
    /// What passed from `earlier` to `self`.
    pub fn since(&self, earlier: &MachineTimes) -> MachineTimes {
        MachineTimes {
            busy: self.busy - earlier.busy,
            idle: self.idle - earlier.idle,
            steal: self.steal - earlier.steal,
        }
    }
}

/// [`MachineTimes`] from the text of `/proc/stat`.
pub fn parse_machine_times(stat: &str) -> Option<MachineTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let field = |i: usize| ticks.get(i).copied();
    let seconds = |t: u64| t as f64 / TICKS_PER_SECOND;
    Some(MachineTimes {
        busy: seconds(field(0)? + field(1)? + field(2)? + field(5)? + field(6)?),
        idle: seconds(field(3)? + field(4)?),
        steal: seconds(field(7)?),
    })
}

/// This machine's [`MachineTimes`] now; `None` where `/proc/stat` cannot be read.
pub fn machine_times() -> Option<MachineTimes> {
    parse_machine_times(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Processes on this machine whose executable is one of `names` (by file name): `(name, pid)`.
/// Used for an external control plane running on the same machine (`flotilla up`).
pub fn find_processes(names: &[&str]) -> Vec<(String, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        let file = exe
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(" (deleted)").to_owned())
            .unwrap_or_default();
        if names.contains(&file.as_str()) {
            found.push((file, pid));
        }
    }
    found.sort();
    found
}

/// What was seen of one named process during a run and after it settled.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessFootprint {
    /// The process (service binary or API server name).
    pub name: String,
    /// Largest RSS seen from the run's start until it settled and in the window after, MiB.
    pub rss_peak_mib: f64,
    /// RSS after the run settled, MiB.
    pub rss_after_mib: f64,
    /// CPU seconds spent during the run (every incarnation, if it was restarted).
    pub cpu_seconds: f64,
}

#[derive(Clone, Copy, Default)]
struct Track {
    peak_kib: u64,
    last_kib: u64,
    /// CPU seconds of incarnations that ended.
    cpu_done: f64,
    /// pid, CPU seconds at first sight, CPU seconds last seen.
    current: Option<(u32, f64, f64)>,
}

impl Track {
    fn observe(&mut self, pid: u32, reading: Reading) {
        self.peak_kib = self.peak_kib.max(reading.rss_kib);
        self.last_kib = reading.rss_kib;
        match &mut self.current {
            Some((known, _, last)) if *known == pid => *last = reading.cpu_seconds,
            _ => {
                if let Some((_, first, last)) = self.current.take() {
                    self.cpu_done += last - first;
                }
                self.current = Some((pid, reading.cpu_seconds, reading.cpu_seconds));
            }
        }
    }

    fn cpu(&self) -> f64 {
        self.cpu_done + self.current.map(|(_, first, last)| last - first).unwrap_or(0.0)
    }
}

/// Periodic readings of named processes over one window.
#[derive(Default)]
pub struct Window {
    tracks: BTreeMap<String, Track>,
}

impl Window {
    /// Reads every process in `pids` now.
    pub fn sample(&mut self, pids: &[(String, u32)]) {
        for (name, pid) in pids {
            if let Some(reading) = read(*pid) {
                self.tracks
                    .entry(name.clone())
                    .or_default()
                    .observe(*pid, reading);
            }
        }
    }

    /// Runs `work`, sampling `pids()` every `period` (and at both ends) while it runs.
    pub async fn during<F: Future>(
        &mut self,
        period: Duration,
        pids: &(dyn Fn() -> Vec<(String, u32)> + Sync),
        work: F,
    ) -> F::Output {
        self.sample(&pids());
        tokio::pin!(work);
        let mut ticker = tokio::time::interval(period);
        loop {
            tokio::select! {
                output = &mut work => {
                    self.sample(&pids());
                    return output;
                }
                _ = ticker.tick() => self.sample(&pids()),
            }
        }
    }

    /// Per process: CPU of this window; peak RSS of this window and `after` together, RSS at
    /// the end of `after`.
    pub fn report(&self, after: &Window) -> Vec<ProcessFootprint> {
        let mib = |kib: u64| round(kib as f64 / 1024.0, 1);
        self.tracks
            .iter()
            .map(|(name, track)| {
                let later = after.tracks.get(name);
                ProcessFootprint {
                    name: name.clone(),
                    rss_peak_mib: mib(track.peak_kib.max(later.map_or(0, |t| t.peak_kib))),
                    rss_after_mib: mib(later.map_or(track.last_kib, |t| t.last_kib)),
                    cpu_seconds: round(track.cpu(), 2),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn parses_status_and_stat() {
        let status = "Name:\tflotilla-detect\nVmPeak:\t  100 kB\nVmRSS:\t   23456 kB\nThreads:\t4\n";
        assert_eq!(parse_rss_kib(status), Some(23456));
        assert_eq!(parse_rss_kib("Name: x\n"), None);
        // A command name with spaces and a parenthesis must not shift the fields.
        let stat =
            "4242 (weird (name) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 4 0 100 1000 200";
        assert_eq!(parse_cpu_seconds(stat), Some(3.0));
        assert_eq!(parse_cpu_seconds("garbage"), None);
    }

    #[test]
    fn parses_the_machine_line_of_proc_stat() {
        let stat = "cpu  1000 20 300 5000 40 6 7 80 0 0\ncpu0 500 10 150 2500 20 3 3 40 0 0\nintr 1 2\n";
        let times = parse_machine_times(stat).unwrap();
        assert_eq!(
            times,
            MachineTimes {
                busy: 13.33,
                idle: 50.4,
                steal: 0.8,
            }
        );
        let later = MachineTimes {
            busy: 20.33,
            idle: 51.4,
            steal: 1.8,
        };
        let passed = later.since(&times);
        assert!((passed.busy - 7.0).abs() < 1e-9 && (passed.idle - 1.0).abs() < 1e-9);
        assert!((passed.steal - 1.0).abs() < 1e-9);
        // Without the summary line, or with a field missing or garbled: nothing.
        assert_eq!(parse_machine_times("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_machine_times("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_machine_times("cpu  1 2 x 4 5 6 7 8\n"), None);
        // This machine's: busy and idle time both advance from boot.
        let now = machine_times().unwrap();
        assert!(now.busy > 0.0 && now.idle > 0.0 && now.steal >= 0.0);
    }

    #[test]
    fn reads_this_process() {
        let me = read(std::process::id()).unwrap();
        assert!(me.rss_kib > 0);
        assert!(me.cpu_seconds >= 0.0);
        assert!(read(u32::MAX).is_none());
    }

    #[test]
    fn cpu_of_a_restarted_process_adds_up_both_lives() {
        let mut track = Track::default();
        let at = |rss, cpu| Reading {
            rss_kib: rss,
            cpu_seconds: cpu,
        };
        track.observe(1, at(100, 10.0));
        track.observe(1, at(300, 12.0));
        // Restarted: a new pid starting from its own CPU clock.
        track.observe(2, at(50, 0.5));
        track.observe(2, at(80, 1.5));
        assert_eq!(track.cpu(), 3.0);
        assert_eq!(track.peak_kib, 300);
        assert_eq!(track.last_kib, 80);
    }

    #[test]
    fn the_peak_is_the_largest_rss_of_both_windows() {
        let at = |rss| Reading {
            rss_kib: rss,
            cpu_seconds: 1.0,
        };
        let window = |readings: &[u64]| {
            let mut track = Track::default();
            for rss in readings {
                track.observe(7, at(*rss));
            }
            Window {
                tracks: BTreeMap::from([("svc".to_owned(), track)]),
            }
        };
        // Still growing after the run: the peak is the after window's.
        let report = window(&[1024, 2048]).report(&window(&[3072, 2560]));
        assert_eq!((report[0].rss_peak_mib, report[0].rss_after_mib), (3.0, 2.5));
        // Shrinking after it: the run's.
        let report = window(&[1024, 4096]).report(&window(&[2048]));
        assert_eq!((report[0].rss_peak_mib, report[0].rss_after_mib), (4.0, 2.0));
        // Not seen after it: the run's last reading stands for after.
        let report = window(&[1024, 4096, 3072]).report(&Window::default());
        assert_eq!((report[0].rss_peak_mib, report[0].rss_after_mib), (4.0, 3.0));
    }

    #[tokio::test]
    async fn a_window_samples_while_work_runs() {
        let me = vec![("me".to_owned(), std::process::id())];
        let pids = move || me.clone();
        let mut during = Window::default();
        let answer = during
            .during(Duration::from_millis(5), &pids, async {
                tokio::time::sleep(Duration::from_millis(30)).await;
                42
            })
            .await;
        assert_eq!(answer, 42);
        let mut after = Window::default();
        after.sample(&pids());
        let report = during.report(&after);
        assert_eq!(report.len(), 1);
        assert_eq!(report[0].name, "me");
        assert!(report[0].rss_peak_mib > 0.0 && report[0].rss_after_mib > 0.0);
    }
}
