//! `--feature-gates`: Karmada's (and Kubernetes') syntax, a comma-separated list of
//! `Name=bool`, for every service. Each service names the gates it knows and their defaults
//! ([`parse`]); a gate it does not know is an error that lists the known ones.

use std::collections::BTreeMap;

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
    #[error("--feature-gates: {entry:?} has no gate name; write Name=true, e.g. {example}=true")]
    MissingName {
        /// The entry as written.
        entry: String,
        /// A gate this binary knows.
        example: String,
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

/// Parses `Name=bool[,Name=bool...]` against `known` (every gate with its default) into the
/// value of every known gate. Whitespace around entries, names and values is ignored, empty
/// entries are skipped, a gate named twice takes its last value, and names are case-sensitive
/// (as in Kubernetes). Gates not named keep their defaults.
pub fn parse(
    spec: &str,
    known: &[(&'static str, bool)],
) -> Result<BTreeMap<&'static str, bool>, FeatureGateError> {
    let mut gates: BTreeMap<&'static str, bool> = known.iter().copied().collect();
    let names = || known.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
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
                example: known.first().map(|(n, _)| (*n).to_owned()).unwrap_or_default(),
            });
        }
        let Some((gate, _)) = known.iter().find(|(n, _)| *n == name) else {
            return Err(FeatureGateError::Unknown {
                gate: name.to_owned(),
                known: names(),
            });
        };
        let enabled = parse_bool(value).ok_or_else(|| FeatureGateError::InvalidValue {
            gate: name.to_owned(),
            value: value.to_owned(),
        })?;
        gates.insert(gate, enabled);
    }
    Ok(gates)
}

/// `Name=bool,...` for `gates`, which [`parse`] reads back.
pub fn format(gates: &BTreeMap<&'static str, bool>) -> String {
    gates
        .iter()
        .map(|(name, enabled)| format!("{name}={enabled}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const KNOWN: &[(&str, bool)] = &[("Failover", true), ("GracefulEviction", false)];

    #[test]
    fn defaults_and_overrides() {
        let gates = parse("", KNOWN).unwrap();
        assert!(gates["Failover"]);
        assert!(!gates["GracefulEviction"]);
        let gates = parse(" Failover = false , GracefulEviction=1,Failover=F", KNOWN).unwrap();
        assert!(!gates["Failover"]);
        assert!(gates["GracefulEviction"]);
        assert_eq!(format(&gates), "Failover=false,GracefulEviction=true");
        assert_eq!(parse(&format(&gates), KNOWN).unwrap(), gates);
    }

    #[test]
    fn errors_name_the_fix() {
        assert_eq!(
            parse("Failover", KNOWN).unwrap_err().to_string(),
            "--feature-gates: \"Failover\" has no value; write it as Failover=true or Failover=false"
        );
        assert_eq!(
            parse("=true", KNOWN).unwrap_err().to_string(),
            "--feature-gates: \"=true\" has no gate name; write Name=true, e.g. Failover=true"
        );
        assert_eq!(
            parse("failover=true", KNOWN).unwrap_err().to_string(),
            "--feature-gates: unknown feature gate \"failover\"; known gates: Failover, GracefulEviction"
        );
        assert_eq!(
            parse("Failover=yes", KNOWN).unwrap_err().to_string(),
            "--feature-gates: invalid value \"yes\" for Failover; use true or false"
        );
    }
}
