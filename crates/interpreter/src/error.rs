//! The crate's error types: [`InterpretError`] for malformed resource templates and
//! [`RulesError`] for malformed declarative dependency rules.

use std::fmt;

/// A resource template could not be interpreted.
///
/// The message names the object, the field (as a JSON path such as
/// `spec.template.spec.volumes`) and what was expected, so a user can fix the template from the
/// message alone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpretError {
    /// A field holds a value of the wrong JSON type.
    #[error("{object}: {path}: expected {expected}, got {got}; fix the field's type in the template")]
    WrongType {
        /// The object, e.g. `apps/v1 Deployment default/web`.
        object: String,
        /// JSON path of the field, e.g. `spec.template.spec.volumes`.
        path: String,
        /// What the field must hold, e.g. `a list`.
        expected: &'static str,
        /// What it holds, e.g. `a string`.
        got: &'static str,
    },
    /// A field has the right type but an unusable value.
    #[error("{object}: {path}: {message}")]
    InvalidValue {
        /// The object, e.g. `apps/v1 Deployment default/web`.
        object: String,
        /// JSON path of the field.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl InterpretError {
    /// JSON path of the offending field.
    pub fn path(&self) -> &str {
        match self {
            Self::WrongType { path, .. } | Self::InvalidValue { path, .. } => path,
        }
    }
}

/// Declarative dependency rules could not be loaded.
///
/// Every problem is reported at once; each names the rule (by index), the field, and how to fix
/// it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct RulesError {
    /// Every problem found, in document order.
    pub problems: Vec<RuleProblem>,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid DependencyRules: ")?;
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// One problem in a DependencyRules document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleProblem {
    /// Path of the field, e.g. `rules[2].references[0].namePaths[1]`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl RulesError {
    pub(crate) fn single(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            problems: vec![RuleProblem {
                field: field.into(),
                message: message.into(),
            }],
        }
    }
}
