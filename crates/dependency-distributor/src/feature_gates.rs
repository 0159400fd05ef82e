//! `--feature-gates`: Karmada's (and Kubernetes') syntax, a comma-separated list of
//! `Name=bool`. This module owns the gates the distributor knows and their defaults.
//!
//! The only gate is `PropagateDeps` (default `true`, as in Karmada since v1.4). When it is off
//! the distributor serves health and nothing else, so turning the feature off is a flag change,
//! not a redeployment without the binary.

use std::fmt;
use std::str::FromStr;

/// Name of the gate that turns dependency distribution on and off.
pub const PROPAGATE_DEPS: &str = "PropagateDeps";

/// Every gate this binary knows, for error messages.
const KNOWN: &[&str] = &[PROPAGATE_DEPS];

/// The state of every feature gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// `PropagateDeps`: distribute dependencies of bindings with `propagateDeps: true`.
    pub propagate_deps: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self { propagate_deps: true }
    }
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PROPAGATE_DEPS}={}", self.propagate_deps)
    }
}

/// A `--feature-gates` value that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// An entry has no `=`.
    #[error("--feature-gates: {entry:?} has no value; write it as {entry}=true or {entry}=false")]
    MissingValue {
        /// The entry as written.
        entry: String,
    },
    /// An entry has `=` but no gate name.
    #[error("--feature-gates: {entry:?} has no gate name; write Name=true, e.g. {PROPAGATE_DEPS}=true")]
    MissingName {
        /// The entry as written.
        entry: String,
    },
    /// The gate is not one this binary knows.
    #[error("--feature-gates: unknown feature gate {gate:?}; known gates: {known}")]
    Unknown {
        /// The gate as written.
        gate: String,
        /// The known gates, comma-separated.
        known: String,
    },
    /// The value is not a boolean.
    #[error("--feature-gates: invalid value {value:?} for {gate}; use true or false")]
    InvalidValue {
        /// The gate.
        gate: String,
        /// The value as written.
        value: String,
    },
}

/// Go's `strconv.ParseBool`, which Kubernetes' feature gates use.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

impl FromStr for FeatureGates {
    type Err = FeatureGateError;

    /// Parses `Name=bool[,Name=bool...]`. Whitespace around entries, names and values is
    /// ignored, empty entries are skipped, and a gate named twice takes its last value (as in
    /// Kubernetes). Gates not named keep their defaults.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let mut gates = FeatureGates::default();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(FeatureGateError::MissingValue {
                    entry: entry.to_owned(),
                });
            };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() {
                return Err(FeatureGateError::MissingName {
                    entry: entry.to_owned(),
                });
            }
            if !KNOWN.contains(&name) {
                return Err(FeatureGateError::Unknown {
                    gate: name.to_owned(),
                    known: KNOWN.join(", "),
                });
            }
            let enabled = parse_bool(value).ok_or_else(|| FeatureGateError::InvalidValue {
                gate: name.to_owned(),
                value: value.to_owned(),
            })?;
            if name == PROPAGATE_DEPS {
                gates.propagate_deps = enabled;
            }
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Result<FeatureGates, FeatureGateError> {
        spec.parse()
    }

    #[test]
    fn propagate_deps_defaults_to_true() {
        assert!(FeatureGates::default().propagate_deps);
        assert!(parse("").unwrap().propagate_deps);
        assert!(parse(" , ,").unwrap().propagate_deps);
    }

    #[test]
    fn accepts_go_booleans() {
        for (value, want) in [
            ("true", true),
            ("True", true),
            ("TRUE", true),
            ("t", true),
            ("1", true),
            ("false", false),
            ("False", false),
            ("FALSE", false),
            ("f", false),
            ("0", false),
        ] {
            assert_eq!(
                parse(&format!("PropagateDeps={value}")).unwrap().propagate_deps,
                want,
                "{value}"
            );
        }
    }

    #[test]
    fn whitespace_and_repeats() {
        assert!(!parse(" PropagateDeps = false ").unwrap().propagate_deps);
        assert!(
            parse("PropagateDeps=false,PropagateDeps=true")
                .unwrap()
                .propagate_deps
        );
        assert!(
            !parse("PropagateDeps=true,,PropagateDeps=false,")
                .unwrap()
                .propagate_deps
        );
    }

    #[test]
    fn unknown_gates_are_named() {
        let err = parse("PropagateDeps=true,Failover=true").unwrap_err();
        assert_eq!(
            err,
            FeatureGateError::Unknown {
                gate: "Failover".into(),
                known: "PropagateDeps".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "--feature-gates: unknown feature gate \"Failover\"; known gates: PropagateDeps"
        );
        // Gate names are case-sensitive, as in Kubernetes.
        assert!(matches!(
            parse("propagatedeps=true"),
            Err(FeatureGateError::Unknown { .. })
        ));
    }

    #[test]
    fn malformed_entries() {
        assert_eq!(
            parse("PropagateDeps").unwrap_err(),
            FeatureGateError::MissingValue {
                entry: "PropagateDeps".into()
            }
        );
        assert_eq!(
            parse("=true").unwrap_err(),
            FeatureGateError::MissingName {
                entry: "=true".into()
            }
        );
        let err = parse("PropagateDeps=yes").unwrap_err();
        assert_eq!(
            err.to_string(),
            "--feature-gates: invalid value \"yes\" for PropagateDeps; use true or false"
        );
        assert!(matches!(
            parse("PropagateDeps="),
            Err(FeatureGateError::InvalidValue { .. })
        ));
    }

    #[test]
    fn display_round_trips() {
        for gates in [
            FeatureGates { propagate_deps: true },
            FeatureGates {
                propagate_deps: false,
            },
        ] {
            assert_eq!(parse(&gates.to_string()).unwrap(), gates);
        }
    }
}
