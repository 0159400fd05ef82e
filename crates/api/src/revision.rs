//! Ordering writes by `resourceVersion`.
//!
//! Kubernetes' resourceVersion is the storage revision of an object's last write. Since
//! Kubernetes 1.35 (KEP-5504, "Comparable Resource Versions") clients may compare two of them as
//! integers: a valid resourceVersion is a positive decimal integer without leading zeros, and a
//! larger one was written later. kube-apiserver takes it from etcd's single revision counter,
//! which every resource of one etcd shares; flotilla-apiserver keeps one global revision the same
//! way. flotilla therefore orders writes of *different* resources (a template and a policy) by
//! comparing their resourceVersions, which is what lets lazy activation follow the API's order
//! instead of the order in which a watch happened to deliver events
//! (`docs/adr/0008-api-order-by-resource-version.md`).
//!
//! A resourceVersion that does not parse is not comparable: every caller treats "unknown" as
//! "not later" (the conservative side).

use std::cmp::Ordering;
use std::fmt;

/// A parsed resourceVersion: the storage revision of one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision(u64);

impl Revision {
    /// The revision older than every write (used for "older than anything we can name").
    pub const ORIGIN: Revision = Revision(0);

    /// Parses a resourceVersion per KEP-5504: a positive decimal integer without leading
    /// zeros. `None` for anything else (empty, `0`, signs, leading zeros, overflow).
    pub fn parse(resource_version: &str) -> Option<Self> {
        let bytes = resource_version.as_bytes();
        if bytes.is_empty() || bytes[0] == b'0' || !bytes.iter().all(u8::is_ascii_digit) {
            return None;
        }
        resource_version.parse().ok().map(Revision)
    }

    /// Parses an optional resourceVersion.
    pub fn parse_opt(resource_version: Option<&str>) -> Option<Self> {
        resource_version.and_then(Self::parse)
    }

    /// The revision as a number.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The next revision: "some write after this one".
    pub fn next(self) -> Self {
        Revision(self.0.saturating_add(1))
    }
}

/// The latest of the known revisions; `None` when none is known.
pub fn latest(revisions: impl IntoIterator<Item = Option<Revision>>) -> Option<Revision> {
    revisions.into_iter().flatten().max()
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<u64> for Revision {
    fn from(value: u64) -> Self {
        Revision(value)
    }
}

/// Whether `a` was written strictly after `b`; `false` when either is unknown.
pub fn written_after(a: Option<Revision>, b: Option<Revision>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a.cmp(&b) == Ordering::Greater)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_kep_5504_resource_versions() {
        assert_eq!(Revision::parse("1"), Some(Revision(1)));
        assert_eq!(Revision::parse("18446744073709551615"), Some(Revision(u64::MAX)));
        for bad in [
            "",
            "0",
            "01",
            "-1",
            "+1",
            "1.0",
            " 1",
            "1 ",
            "abc",
            "18446744073709551616",
        ] {
            assert_eq!(Revision::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Revision::parse_opt(None), None);
        assert_eq!(Revision::parse_opt(Some("42")), Some(Revision(42)));
    }

    #[test]
    fn compares_as_integers_not_strings() {
        assert!(Revision::parse("10") > Revision::parse("9"));
        assert!(written_after(
            Revision::parse_opt(Some("100")),
            Revision::parse_opt(Some("99"))
        ));
        assert!(!written_after(
            Revision::parse_opt(Some("99")),
            Revision::parse_opt(Some("100"))
        ));
        assert!(!written_after(Some(Revision(5)), Some(Revision(5))));
        assert!(!written_after(None, Some(Revision(1))));
        assert!(!written_after(Some(Revision(1)), None));
        assert!(Revision::ORIGIN < Revision(1));
        assert_eq!(Revision(7).to_string(), "7");
        assert_eq!(Revision(7).next(), Revision(8));
        assert_eq!(Revision(u64::MAX).next(), Revision(u64::MAX));
        assert_eq!(
            latest([None, Some(Revision(3)), Some(Revision(9)), None]),
            Some(Revision(9))
        );
        assert_eq!(latest([None, None]), None);
    }
}
