//! The API errors simcluster answers with, each rendered as the apiserver's `Status`.

use serde_json::{Value, json};

/// An API error: its HTTP code and `Status.reason` follow the apiserver's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// 404 NotFound: `<resource> "<name>" not found`.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// `plural.group` (the apiserver's `qualifiedResource`).
        resource: String,
        /// The object's name (empty for a missing resource or path).
        name: String,
    },
    /// 409 AlreadyExists.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// `plural.group`.
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 409 Conflict: a resourceVersion or delete precondition did not hold.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {message}")]
    Conflict {
        /// `plural.group`.
        resource: String,
        /// The object's name.
        name: String,
        /// Why.
        message: String,
    },
    /// 422 Invalid.
    #[error("{0}")]
    Invalid(String),
    /// 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// 415 UnsupportedMediaType (e.g. strategic merge on a custom resource).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 405 MethodNotAllowed.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 410 Gone, reason Expired: a watch or continue token from a resourceVersion older than
    /// the kept history.
    #[error("{0}")]
    Expired(String),
    /// 401 Unauthorized: a bearer token was configured and the request did not carry it.
    #[error("Unauthorized")]
    Unauthorized,
    /// 500 InternalError.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// simcluster could not start as configured (never an API answer).
    #[error("{0}")]
    Config(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Error::NotFound { .. } => 404,
            Error::AlreadyExists { .. } | Error::Conflict { .. } => 409,
            Error::Invalid(_) => 422,
            Error::BadRequest(_) => 400,
            Error::UnsupportedMediaType(_) => 415,
            Error::MethodNotAllowed(_) => 405,
            Error::Expired(_) => 410,
            Error::Unauthorized => 401,
            Error::Internal(_) | Error::Config(_) => 500,
        }
    }

    /// `Status.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "NotFound",
            Error::AlreadyExists { .. } => "AlreadyExists",
            Error::Conflict { .. } => "Conflict",
            Error::Invalid(_) => "Invalid",
            Error::BadRequest(_) => "BadRequest",
            Error::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Error::MethodNotAllowed(_) => "MethodNotAllowed",
            Error::Expired(_) => "Expired",
            Error::Unauthorized => "Unauthorized",
            Error::Internal(_) | Error::Config(_) => "InternalError",
        }
    }

    /// The `Status` object (`kind: Status`, `status: Failure`) the apiserver answers with.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        match self {
            Error::NotFound { resource, name }
            | Error::AlreadyExists { resource, name }
            | Error::Conflict { resource, name, .. } => {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                let mut details = json!({"name": name, "kind": kind});
                if !group.is_empty() {
                    details["group"] = group.into();
                }
                status["details"] = details;
            }
            _ => {}
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_should_carry_code_reason_and_details() {
        let e = Error::NotFound { resource: "deployments.apps".into(), name: "web".into() };
        let s = e.to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["details"], json!({"name": "web", "kind": "deployments", "group": "apps"}));
        assert_eq!(Error::Expired("too old".into()).to_status()["code"], 410);
    }
}
