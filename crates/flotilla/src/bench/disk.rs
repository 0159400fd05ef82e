//! Bytes the block device under the installation's data directory wrote during a run, from
//! the kernel's I/O counters (`/sys/dev/block/<major>:<minor>/stat`).
//!
//! The device's counter, not the processes': `/proc/<pid>/io`'s `write_bytes` counts page-cache
//! pages dirtied, which for the store's overwrites of pre-zeroed log blocks is hundreds of times
//! what reaches the disk (docs/benchmarks.md, round 30). The device counts every writer on it,
//! so the figure is the run's only on an otherwise quiet machine.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The kernel counts sectors of 512 bytes in `stat`, whatever the device's own block size.
const SECTOR_BYTES: u64 = 512;

/// The block device a directory lives on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// `<major>:<minor>`, as `lsblk` and `/proc/diskstats` name it.
    pub name: String,
    stat: PathBuf,
}

impl Device {
    /// The device holding `dir`, if it is a block device the kernel keeps counters for (a
    /// directory on tmpfs or overlayfs has none).
    pub fn of(dir: &Path) -> Option<Device> {
        let (major, minor) = split_dev(std::fs::metadata(dir).ok()?.dev());
        let name = format!("{major}:{minor}");
        let stat = PathBuf::from(format!("/sys/dev/block/{name}/stat"));
        stat.exists().then_some(Device { name, stat })
    }

    /// Bytes written to the device since it appeared.
    pub fn written_bytes(&self) -> Option<u64> {
        parse_sectors_written(&std::fs::read_to_string(&self.stat).ok()?).map(|s| s * SECTOR_BYTES)
    }
}

/// Major and minor numbers of a `dev_t` (rustix's `major` and `minor`, as glibc's).
fn split_dev(dev: u64) -> (u32, u32) {
    (rustix::fs::major(dev), rustix::fs::minor(dev))
}

/// The seventh field of a block device's `stat` line: sectors written.
fn parse_sectors_written(stat: &str) -> Option<u64> {
    stat.split_whitespace().nth(6)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn splits_device_numbers_as_glibc_does() {
        assert_eq!(split_dev(0xfe00), (254, 0));
        assert_eq!(split_dev(0x0801), (8, 1));
        assert_eq!(split_dev(0xfd05), (253, 5));
        // Minors above 255 (the 20-bit encoding): 259:300 (an NVMe partition).
        let dev = ((300u64 & 0xfff00) << 12) | ((259u64 & 0xfff) << 8) | (300 & 0xff);
        assert_eq!(split_dev(dev), (259, 300));
        // Majors above 4095 live in the high word.
        let dev =
            ((5000u64 & !0xfff) << 32) | ((5000u64 & 0xfff) << 8) | ((300 & !0xff) << 12) | (300 & 0xff);
        assert_eq!(split_dev(dev), (5000, 300));
    }

    #[test]
    fn reads_sectors_written_from_a_stat_line() {
        let line = "  690159    19647 30529818  2822501 22074113   187269 291944672  4501159        0   779768  7538563    89629       12 83750064    17378  3600935   197523\n";
        assert_eq!(parse_sectors_written(line), Some(291_944_672));
        assert_eq!(parse_sectors_written("1 2 3 4 5 6"), None);
        assert_eq!(parse_sectors_written("1 2 3 4 5 6 x"), None);
        assert_eq!(parse_sectors_written(""), None);
    }

    #[test]
    fn a_directory_on_a_block_device_has_counters_that_read() {
        let dir = tempfile::tempdir().unwrap();
        // Where the temporary directory is on tmpfs or overlayfs there is nothing to read; the
        // answer must then be None, never a made-up zero.
        match Device::of(dir.path()) {
            Some(device) => {
                assert!(device.name.contains(':'), "{device:?}");
                assert!(device.written_bytes().is_some(), "{device:?}");
            }
            None => {
                let (major, minor) = split_dev(std::fs::metadata(dir.path()).unwrap().dev());
                assert!(!Path::new(&format!("/sys/dev/block/{major}:{minor}/stat")).exists());
            }
        }
        assert_eq!(Device::of(&dir.path().join("missing")), None);
    }
}
