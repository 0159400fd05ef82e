//! The pure parts of Lease-based coordination, shared by [`crate::leader`] (active/standby) and
//! [`crate::membership`] (execution's sharding): durations on the command line, process
//! identities, the "may I take this Lease" decision, liveness by local observation, and
//! rendezvous ownership.
//!
//! Expiry is judged the way client-go judges it: not from the `renewTime` written by another
//! machine (whose clock may be skewed) but from how long *this* process has seen the same Lease
//! record (same `resourceVersion`) unchanged. A holder that renews changes the record; a record
//! unchanged for a whole `leaseDurationSeconds` belongs to a holder that is gone.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The namespace coordination Leases live in unless a flag says otherwise.
pub const DEFAULT_NAMESPACE: &str = "flotilla-system";

/// Parses `500ms`, `30s`, `5m`, `1h` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let invalid = || format!("invalid duration {text:?}: use e.g. 500ms, 15s, 5m or 1h");
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| text.split_at(i))
        .unwrap_or((text, "s"));
    let value: u64 = number.parse().map_err(|_| invalid())?;
    match unit {
        "ms" => Ok(Duration::from_millis(value)),
        "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(value.saturating_mul(3600))),
        _ => Err(invalid()),
    }
}

/// How long a Lease is valid, how long a holder keeps trying to renew, and how often it tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a Lease record unchanged means its holder is gone.
    pub lease_duration: Duration,
    /// How long a holder keeps trying to renew before it gives up (and stops writing).
    pub renew_deadline: Duration,
    /// How often a holder renews and a candidate retries.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTimings {
    /// Checks `retry_period < renew_deadline < lease_duration`, which is what makes the holder
    /// stop before anyone else may start. `flag` prefixes the flag names in the message.
    pub fn validate(&self, flag: &str) -> Result<(), String> {
        if self.retry_period.is_zero() {
            return Err(format!("--{flag}-retry-period must be positive"));
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "--{flag}-renew-deadline ({:?}) must be shorter than --{flag}-lease-duration ({:?}): a holder must give up before others may take over",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(format!(
                "--{flag}-retry-period ({:?}) must be shorter than --{flag}-renew-deadline ({:?})",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written into a Lease (at least 1).
    pub fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// The lease duration a record states, in seconds; ours when it states none.
    pub fn record_duration(&self, seconds: Option<i32>) -> Duration {
        match seconds {
            Some(s) if s > 0 => Duration::from_secs(u64::try_from(s).unwrap_or(0)),
            _ => self.lease_duration,
        }
    }
}

/// This process's identity: `$POD_NAME` when set (stable across container restarts, as in
/// Kubernetes), otherwise `<hostname>-<port>`. A port is bound by one live process at a time, so
/// the identity is unique among live processes and a restarted process on the same port takes
/// its own Lease back at once instead of waiting for it to expire.
pub fn identity(port: u16) -> String {
    match std::env::var("POD_NAME") {
        Ok(pod) if !pod.trim().is_empty() => pod.trim().to_owned(),
        _ => format!("{}-{port}", hostname()),
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// `text` as a DNS-1123 subdomain fragment usable in an object name: lower case, `[a-z0-9-.]`,
/// starting and ending with an alphanumeric, at most `max` characters.
pub fn name_fragment(text: &str, max: usize) -> String {
    let mapped: String = text
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(max)
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() {
        "x".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// What a candidate may do with a Lease it has just read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// It holds the Lease: renew it.
    Renew,
    /// The Lease is free (released, or its holder is gone): take it.
    Acquire,
    /// Another holder is live; it may be gone after this long at the earliest.
    Wait(Duration),
}

/// May `me` take a Lease held by `holder` (empty or `None`: released), whose record states
/// `duration` and has been seen unchanged for `unchanged_for`?
pub fn claim(holder: Option<&str>, me: &str, duration: Duration, unchanged_for: Duration) -> Claim {
    match holder.map(str::trim).filter(|h| !h.is_empty()) {
        None => Claim::Acquire,
        Some(holder) if holder == me => Claim::Renew,
        Some(_) if unchanged_for >= duration => Claim::Acquire,
        Some(_) => Claim::Wait(duration - unchanged_for),
    }
}

/// When this process first saw each Lease record (by `resourceVersion`), on its own clock.
#[derive(Debug, Default)]
pub struct Observations {
    seen: HashMap<String, (String, Instant)>,
}

impl Observations {
    /// Records that Lease `name` has `resource_version` at `now`; returns how long that record
    /// has been seen unchanged.
    pub fn observe(&mut self, name: &str, resource_version: &str, now: Instant) -> Duration {
        let entry = self
            .seen
            .entry(name.to_owned())
            .or_insert_with(|| (resource_version.to_owned(), now));
        if entry.0 != resource_version {
            *entry = (resource_version.to_owned(), now);
        }
        now.saturating_duration_since(entry.1)
    }

    /// Forgets Leases not in `names` (deleted ones).
    pub fn retain(&mut self, names: &[String]) {
        self.seen.retain(|name, _| names.contains(name));
    }
}

/// The owner of `key` among `members` by rendezvous (highest random weight) hashing: every
/// replica that agrees on the members agrees on the owner, and a member joining or leaving moves
/// only the keys it gains or held.
pub fn owner<'a>(key: &str, members: &'a [String]) -> Option<&'a str> {
    members
        .iter()
        .max_by_key(|member| (weight(member, key), member.as_str()))
        .map(String::as_str)
}

/// A stable 64-bit weight of (`member`, `key`): FNV-1a over both, then a 64-bit finaliser so
/// nearby strings spread. Fixed here (not `std`'s hasher) so replicas built by different
/// compiler versions agree.
fn weight(member: &str, key: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in member.bytes().chain([0u8]).chain(key.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

/// May a member act on the keys it owns? A member that found others live when it joined waits
/// `grace` (one lease duration) first: the previous owners of its keys stop at their next
/// membership refresh (one retry period) and finish what they were doing within the grace.
/// Keys that move because a member *left* need no wait: a member stops writing before its Lease
/// can expire (renew deadline < lease duration), and a released Lease is deleted only after its
/// holder stopped.
pub fn settled(alone_when_joined: bool, member_for: Duration, grace: Duration) -> bool {
    alone_when_joined || member_for >= grace
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 7 "), Ok(Duration::from_secs(7)));
        for bad in ["", "s", "fast", "5 weeks", "-1s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_duration("x").unwrap_err().contains("15s"));
    }

    #[test]
    fn timings_must_let_the_holder_stop_first() {
        assert_eq!(LeaseTimings::default().validate("leader-elect"), Ok(()));
        let t = |lease, renew, retry| LeaseTimings {
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        };
        let err = t(10, 10, 2).validate("leader-elect").unwrap_err();
        assert!(err.contains("--leader-elect-renew-deadline"), "{err}");
        let err = t(10, 5, 5).validate("membership").unwrap_err();
        assert!(err.contains("--membership-retry-period"), "{err}");
        assert!(t(10, 5, 0).validate("x").is_err());
        assert_eq!(t(3, 2, 1).validate("x"), Ok(()));
    }

    #[test]
    fn record_durations() {
        let timings = LeaseTimings::default();
        assert_eq!(timings.lease_duration_seconds(), 15);
        assert_eq!(timings.record_duration(Some(4)), Duration::from_secs(4));
        assert_eq!(timings.record_duration(Some(0)), Duration::from_secs(15));
        assert_eq!(timings.record_duration(Some(-3)), Duration::from_secs(15));
        assert_eq!(timings.record_duration(None), Duration::from_secs(15));
        let short = LeaseTimings {
            lease_duration: Duration::from_millis(300),
            ..timings
        };
        assert_eq!(short.lease_duration_seconds(), 1);
    }

    #[test]
    fn name_fragments_are_dns_safe() {
        assert_eq!(name_fragment("Host_A-7104", 63), "host-a-7104");
        assert_eq!(name_fragment("-pod.1-", 63), "pod.1");
        assert_eq!(name_fragment("___", 63), "x");
        assert_eq!(name_fragment("abcdef", 3), "abc");
    }

    #[test]
    fn identity_prefers_the_pod_name_and_embeds_the_port() {
        // Environment reads only: POD_NAME is normally unset in tests.
        let id = identity(7104);
        match std::env::var("POD_NAME") {
            Ok(pod) if !pod.trim().is_empty() => assert_eq!(id, pod.trim()),
            _ => {
                assert!(id.ends_with("-7104"), "{id}");
                assert_ne!(identity(1), identity(2));
            }
        }
    }

    #[test]
    fn claims() {
        let d = 15 * SECOND;
        // Free leases.
        assert_eq!(claim(None, "a", d, Duration::ZERO), Claim::Acquire);
        assert_eq!(claim(Some(""), "a", d, Duration::ZERO), Claim::Acquire);
        assert_eq!(claim(Some("  "), "a", d, Duration::ZERO), Claim::Acquire);
        // Our own lease, however old (a restarted process with the same identity).
        assert_eq!(claim(Some("a"), "a", d, Duration::ZERO), Claim::Renew);
        assert_eq!(claim(Some("a"), "a", d, 100 * SECOND), Claim::Renew);
        // Someone else's, live then expired.
        assert_eq!(claim(Some("b"), "a", d, Duration::ZERO), Claim::Wait(d));
        assert_eq!(claim(Some("b"), "a", d, 10 * SECOND), Claim::Wait(5 * SECOND));
        assert_eq!(
            claim(Some("b"), "a", d, d - Duration::from_millis(1)),
            Claim::Wait(Duration::from_millis(1))
        );
        assert_eq!(claim(Some("b"), "a", d, d), Claim::Acquire);
        assert_eq!(claim(Some("b"), "a", d, 2 * d), Claim::Acquire);
    }

    #[test]
    fn observations_measure_unchanged_records() {
        let start = Instant::now();
        let mut seen = Observations::default();
        assert_eq!(seen.observe("l", "1", start), Duration::ZERO);
        assert_eq!(seen.observe("l", "1", start + 3 * SECOND), 3 * SECOND);
        // A renewal (new resourceVersion) restarts the clock.
        assert_eq!(seen.observe("l", "2", start + 4 * SECOND), Duration::ZERO);
        assert_eq!(seen.observe("l", "2", start + 6 * SECOND), 2 * SECOND);
        // Independent per Lease.
        assert_eq!(seen.observe("m", "2", start + 6 * SECOND), Duration::ZERO);
        seen.retain(&["m".to_owned()]);
        assert_eq!(seen.observe("l", "2", start + 9 * SECOND), Duration::ZERO);
        assert_eq!(seen.observe("m", "2", start + 9 * SECOND), 3 * SECOND);
    }

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn owners_exist_and_are_members() {
        assert_eq!(owner("cluster/member1", &[]), None);
        let one = members(&["a"]);
        assert_eq!(owner("cluster/member1", &one), Some("a"));
        let three = members(&["a", "b", "c"]);
        for i in 0..100 {
            let key = format!("cluster/member{i}");
            let o = owner(&key, &three).unwrap();
            assert!(three.iter().any(|m| m == o));
            // Deterministic and independent of member order.
            let reversed = members(&["c", "b", "a"]);
            assert_eq!(owner(&key, &reversed), Some(o));
        }
    }

    #[test]
    fn ownership_spreads_over_members() {
        let three = members(&["host-7104", "host-7204", "host-7304"]);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for i in 0..3000 {
            *counts
                .entry(owner(&format!("binding/ns/app-{i}"), &three).unwrap())
                .or_default() += 1;
        }
        assert_eq!(counts.len(), 3, "{counts:?}");
        for (member, count) in counts {
            assert!((800..=1200).contains(&count), "{member} owns {count} of 3000");
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_keys() {
        let before = members(&["a", "b", "c", "d"]);
        let after = members(&["a", "b", "d"]);
        let mut moved = 0;
        for i in 0..1000 {
            let key = format!("k{i}");
            let old = owner(&key, &before).unwrap();
            let new = owner(&key, &after).unwrap();
            if old == "c" {
                moved += 1;
                assert_ne!(new, "c");
            } else {
                assert_eq!(old, new, "{key} moved from {old} to {new} though {old} stayed");
            }
        }
        assert!(moved > 0);
    }

    #[test]
    fn a_member_joining_takes_keys_only_for_itself() {
        let before = members(&["a", "b"]);
        let after = members(&["a", "b", "c"]);
        let mut gained = 0;
        for i in 0..1000 {
            let key = format!("k{i}");
            let old = owner(&key, &before).unwrap();
            let new = owner(&key, &after).unwrap();
            if new == "c" {
                gained += 1;
            } else {
                assert_eq!(old, new);
            }
        }
        assert!((200..=470).contains(&gained), "c gained {gained} of 1000");
    }

    #[test]
    fn four_clusters_over_two_replicas_have_exactly_one_owner_each() {
        let replicas = members(&["host-41001", "host-41002"]);
        for i in 1..=4 {
            let key = format!("cluster/member{i}");
            let owners: Vec<&String> = replicas
                .iter()
                .filter(|r| owner(&key, &replicas) == Some(r.as_str()))
                .collect();
            assert_eq!(owners.len(), 1, "{key}");
        }
    }

    #[test]
    fn settling() {
        let grace = 15 * SECOND;
        assert!(settled(true, Duration::ZERO, grace));
        assert!(!settled(false, Duration::ZERO, grace));
        assert!(!settled(false, grace - Duration::from_millis(1), grace));
        assert!(settled(false, grace, grace));
        assert!(settled(false, 2 * grace, grace));
    }
}
