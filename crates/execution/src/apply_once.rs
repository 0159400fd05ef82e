//! Apply-once-only (design seed `apply-once-only.md`): whether a manifest is applied to its
//! member object now, decided from what is recorded in objects only, so the decision is the
//! same before and after a restart.
//!
//! | mode | member object | recorded revision | decision |
//! |---|---|---|---|
//! | any | any | any | `Skip(Suspended)` while dispatching to the cluster is suspended |
//! | `off` | any | any | `Apply` (drift is reverted; the write is skipped when nothing differs) |
//! | `on`, `force` | exists | = desired | `Skip(AlreadyApplied)`: drift made by others stays |
//! | `on`, `force` | exists | ≠ desired or none | `Apply` |
//! | `on` | missing | any | `Apply` (re-created) |
//! | `force` | missing | = desired | `Skip(DeletedByOthers)`: stays deleted until the revision changes |
//! | `force` | missing | ≠ desired or none | `Apply` |
//!
//! "Recorded" is the `flotilla.io/desired-revision` annotation of the member object when it
//! exists (and flotilla owns it), otherwise the revision execution last applied, which it keeps
//! in the Work's status (`status.manifestStatuses[].appliedRevision`), so `force` remembers a deleted object's
//! revision across restarts.

use std::fmt;
use std::str::FromStr;

/// The `--apply-once-only` mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Mode {
    /// Re-apply whenever the member object drifts from the Work.
    #[default]
    Off,
    /// Apply once per desired revision; re-create a member object deleted by others.
    On,
    /// Apply once per desired revision; leave a member object deleted by others deleted.
    Force,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Off => "off",
            Mode::On => "on",
            Mode::Force => "force",
        })
    }
}

/// An `--apply-once-only` or `flotilla.io/apply-once-only` value that is not `off`, `on` or
/// `force`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid apply-once-only mode {0:?}: use off, on or force")]
pub struct InvalidMode(pub String);

impl FromStr for Mode {
    type Err = InvalidMode;
    fn from_str(text: &str) -> Result<Self, InvalidMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Mode::Off),
            "on" => Ok(Mode::On),
            "force" => Ok(Mode::Force),
            _ => Err(InvalidMode(text.to_owned())),
        }
    }
}

/// The mode for one manifest: its `flotilla.io/apply-once-only` annotation (copied from the
/// template) wins over the global `--apply-once-only`; an invalid annotation falls back to the
/// global mode and is reported.
pub fn effective_mode(global: Mode, annotation: Option<&str>) -> (Mode, Option<InvalidMode>) {
    match annotation.map(str::parse::<Mode>) {
        None => (global, None),
        Some(Ok(mode)) => (mode, None),
        Some(Err(invalid)) => (global, Some(invalid)),
    }
}

/// Why a manifest is not applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Dispatching to the cluster is suspended.
    Suspended,
    /// The member object was applied at the desired revision; drift is left alone.
    AlreadyApplied,
    /// The desired revision was applied and someone deleted the object since (`force`).
    DeletedByOthers,
}

impl SkipReason {
    /// A short, stable word for logs, span attributes and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Suspended => "suspended",
            SkipReason::AlreadyApplied => "already-applied",
            SkipReason::DeletedByOthers => "deleted-by-others",
        }
    }
}

/// The decision for one manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Apply the manifest (the write itself is skipped when the member already matches).
    Apply,
    /// Leave the member alone.
    Skip(SkipReason),
}

/// Whether to apply a manifest to its member object; see the module table.
pub fn decide(
    mode: Mode,
    recorded_revision: Option<&str>,
    desired_revision: &str,
    member_exists: bool,
    suspended: bool,
) -> Decision {
    if suspended {
        return Decision::Skip(SkipReason::Suspended);
    }
    let recorded_is_desired = recorded_revision == Some(desired_revision);
    match (mode, member_exists, recorded_is_desired) {
        (Mode::Off, _, _) => Decision::Apply,
        (Mode::On | Mode::Force, true, true) => Decision::Skip(SkipReason::AlreadyApplied),
        (Mode::On | Mode::Force, true, false) => Decision::Apply,
        (Mode::On, false, _) => Decision::Apply,
        (Mode::Force, false, true) => Decision::Skip(SkipReason::DeletedByOthers),
        (Mode::Force, false, false) => Decision::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESIRED: &str = "2/abcdef0123456789";
    const OLDER: &str = "1/abcdef0123456789";

    /// Every combination of mode x recorded (none, older, desired) x exists x suspended.
    #[test]
    fn decision_table() {
        use Decision::{Apply, Skip};
        use SkipReason::{AlreadyApplied, DeletedByOthers, Suspended};
        let recorded_cases: [(&str, Option<&str>); 3] =
            [("none", None), ("older", Some(OLDER)), ("desired", Some(DESIRED))];
        #[rustfmt::skip]
        let expected = |mode: Mode, recorded: &str, exists: bool, suspended: bool| -> Decision {
            match (mode, recorded, exists, suspended) {
                (_, _, _, true) => Skip(Suspended),
                (Mode::Off, _, _, false) => Apply,
                (Mode::On, "desired", true, false) => Skip(AlreadyApplied),
                (Mode::On, _, true, false) => Apply,
                (Mode::On, _, false, false) => Apply,
                (Mode::Force, "desired", true, false) => Skip(AlreadyApplied),
                (Mode::Force, _, true, false) => Apply,
                (Mode::Force, "desired", false, false) => Skip(DeletedByOthers),
                (Mode::Force, _, false, false) => Apply,
            }
        };
        let mut rows = 0;
        for mode in [Mode::Off, Mode::On, Mode::Force] {
            for (recorded_name, recorded) in recorded_cases {
                for exists in [false, true] {
                    for suspended in [false, true] {
                        let got = decide(mode, recorded, DESIRED, exists, suspended);
                        assert_eq!(
                            got,
                            expected(mode, recorded_name, exists, suspended),
                            "mode={mode} recorded={recorded_name} exists={exists} suspended={suspended}"
                        );
                        rows += 1;
                    }
                }
            }
        }
        assert_eq!(rows, 36);
    }

    /// The seed's stories, spelled out.
    #[test]
    fn seed_scenarios() {
        // Off: a member-side image patch keeps the recorded revision; still applied (reverted).
        assert_eq!(
            decide(Mode::Off, Some(DESIRED), DESIRED, true, false),
            Decision::Apply
        );
        // On: the same patch is left alone.
        assert_eq!(
            decide(Mode::On, Some(DESIRED), DESIRED, true, false),
            Decision::Skip(SkipReason::AlreadyApplied)
        );
        // Template update: a new revision is applied in every mode.
        for mode in [Mode::Off, Mode::On, Mode::Force] {
            assert_eq!(decide(mode, Some(OLDER), DESIRED, true, false), Decision::Apply);
        }
        // Deleted by someone else: on re-creates, force does not until the revision changes.
        assert_eq!(
            decide(Mode::On, Some(DESIRED), DESIRED, false, false),
            Decision::Apply
        );
        assert_eq!(
            decide(Mode::Force, Some(DESIRED), DESIRED, false, false),
            Decision::Skip(SkipReason::DeletedByOthers)
        );
        assert_eq!(
            decide(Mode::Force, Some(OLDER), DESIRED, false, false),
            Decision::Apply
        );
        // First dispatch: nothing recorded, nothing in the member.
        for mode in [Mode::Off, Mode::On, Mode::Force] {
            assert_eq!(decide(mode, None, DESIRED, false, false), Decision::Apply);
        }
    }

    #[test]
    fn modes_parse_case_insensitively() {
        assert_eq!("off".parse::<Mode>(), Ok(Mode::Off));
        assert_eq!("ON".parse::<Mode>(), Ok(Mode::On));
        assert_eq!(" Force ".parse::<Mode>(), Ok(Mode::Force));
        let err = "sometimes".parse::<Mode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid apply-once-only mode \"sometimes\": use off, on or force"
        );
    }

    #[test]
    fn template_annotation_overrides_the_global_mode() {
        assert_eq!(effective_mode(Mode::Off, None), (Mode::Off, None));
        assert_eq!(effective_mode(Mode::Off, Some("force")), (Mode::Force, None));
        assert_eq!(effective_mode(Mode::Force, Some("off")), (Mode::Off, None));
        let (mode, invalid) = effective_mode(Mode::On, Some("bogus"));
        assert_eq!(mode, Mode::On);
        assert_eq!(invalid, Some(InvalidMode("bogus".into())));
    }
}
