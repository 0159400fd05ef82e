//! The services' process-wide memory setting: no transparent huge pages (ADR 0030).
//!
//! mimalloc asks the kernel for transparent huge pages on the arenas it reserves
//! (`madvise(MADV_HUGEPAGE)`) unless `MIMALLOC_ALLOW_THP=0` is in its environment when the
//! process starts; it reads its options before `main` runs. With THP in `madvise` mode, as on
//! most distributions, a service then holds 2 MiB pages it fills only in part: 10 to 14 MiB
//! more per service. flotilla-apiserver keeps them: its heap is hundreds of MiB and dense.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// The allocator [`service_allocator!`] declares.
pub use mimalloc::MiMalloc;

/// Declares mimalloc as the binary's allocator, in each service's `main.rs`, whose `main` then
/// calls [`start_without_huge_pages`] first. The services' allocation-heavy paths (JSON, watch
/// events, request bodies) cost a fifth less CPU than with glibc's allocator; without huge
/// pages each service stays 10 to 14 MiB smaller (ADR 0030).
#[macro_export]
macro_rules! service_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::memory::MiMalloc = $crate::memory::MiMalloc;
    };
}

/// mimalloc's switch for transparent huge pages; `0` also makes it turn THP off for the whole
/// process (`prctl(PR_SET_THP_DISABLE)`), on hosts whose THP mode is `always` as well.
pub const ALLOW_THP: &str = "MIMALLOC_ALLOW_THP";

/// Makes this process run without transparent huge pages, from its first allocation on. The
/// first thing a service's `main` calls.
///
/// Unless [`ALLOW_THP`] is already set (by the operator, who may set it to `1`, or by this
/// function), the process executes its own binary again (the same arguments, the same pid and
/// process name) with `MIMALLOC_ALLOW_THP=0`: only the environment reaches mimalloc before the
/// memory it maps at start-up. Should that fail (no `/proc`, the binary replaced on disk since
/// it started), the process turns THP off for what it maps from here on and carries on; the
/// arena mapped before `main` keeps its huge pages (4 MiB per service, measured).
pub fn start_without_huge_pages() {
    if std::env::var_os(ALLOW_THP).is_some() {
        return;
    }
    // The binary's own path, not `/proc/self/exe`: the kernel names the process after the
    // file it executes, and `ps` would show `exe`.
    if let Ok(binary) = std::env::current_exe() {
        let mut args = std::env::args_os();
        let program = args.next().unwrap_or_default();
        // `exec` returns only when it failed.
        let _failed = Command::new(binary)
            .arg0(program)
            .args(args)
            .env(ALLOW_THP, "0")
            .exec();
    }
    disable_transparent_huge_pages();
}

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`), for
/// memory faulted in after the call. Returns whether the kernel took the setting; where it does
/// not (Linux before 3.15, a sandbox refusing `prctl`) the process only uses more memory.
pub fn disable_transparent_huge_pages() -> bool {
    rustix::thread::disable_transparent_huge_pages(true).is_ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_kernel_reports_huge_pages_off_for_the_process() {
        assert!(disable_transparent_huge_pages());
        assert!(rustix::thread::transparent_huge_pages_are_disabled().unwrap());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        // The line exists from Linux 5.0 on; older kernels only answer the prctl.
        if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
        }
    }
}
