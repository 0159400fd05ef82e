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

pub use flotilla_runtime::feature_gates::FeatureGateError;

impl FromStr for FeatureGates {
    type Err = FeatureGateError;

    /// Parses `Name=bool[,Name=bool...]` ([`flotilla_runtime::feature_gates::parse`]). Gates
    /// not named keep their defaults.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let defaults = FeatureGates::default();
        let gates =
            flotilla_runtime::feature_gates::parse(spec, &[(PROPAGATE_DEPS, defaults.propagate_deps)])?;
        Ok(FeatureGates {
            propagate_deps: gates
                .get(PROPAGATE_DEPS)
                .copied()
                .unwrap_or(defaults.propagate_deps),
        })
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
                entry: "=true".into(),
                example: PROPAGATE_DEPS.into(),
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
