//! Errors of the patch functions and of field tracking, classified the way kube-apiserver
//! answers them so the server can pick the same HTTP status and reason.

use thiserror::Error;

/// Why a patch (or managedFields data) could not be applied.
///
/// The message texts follow kube-apiserver's (evanphx/json-patch, k8s.io/apimachinery
/// strategicpatch and mergepatch), with the field path added where kube-apiserver leaves it out.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatchError {
    /// The patch document itself is malformed (kube-apiserver: 400 BadRequest).
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well formed but cannot be applied to this object, e.g. a JSON patch `test`
    /// failed or a path is missing (kube-apiserver: 422 Invalid; it puts this text in the
    /// status details' causes).
    #[error("{0}")]
    Unprocessable(String),
    /// A strategic merge patch does not fit the object's schema, e.g. a list item without its
    /// merge key. kube-apiserver returns these as 500 InternalError with this message.
    #[error("{0}")]
    Internal(String),
    /// The patch would exceed a size limit (kube-apiserver: 413 RequestEntityTooLarge).
    #[error("{0}")]
    TooLarge(String),
    /// `metadata.managedFields` (or a fieldsV1 document) cannot be decoded (400 BadRequest).
    #[error("{0}")]
    InvalidManagedFields(String),
}

impl PatchError {
    /// The HTTP status kube-apiserver answers this error with.
    pub fn http_status(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) | PatchError::InvalidManagedFields(_) => 400,
            PatchError::Unprocessable(_) => 422,
            PatchError::Internal(_) => 500,
            PatchError::TooLarge(_) => 413,
        }
    }

    /// The message text.
    pub fn message(&self) -> &str {
        match self {
            PatchError::BadRequest(m)
            | PatchError::Unprocessable(m)
            | PatchError::Internal(m)
            | PatchError::TooLarge(m)
            | PatchError::InvalidManagedFields(m) => m,
        }
    }
}
