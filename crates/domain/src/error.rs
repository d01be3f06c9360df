//! The kernel's errors. Typed here, mapped once into MCP tool errors in the MCP
//! crate's `tools`.
//!
//! Every variant's message is written for the caller (often a model): it says what
//! was wrong and what to do next.

/// A domain failure. Nothing was changed when one of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller sent something that cannot be accepted as it is.
    #[error("{0}")]
    Invalid(String),
    /// A named thing (agent, workflow, message) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The thing already exists (duplicate agent, existing document).
    #[error("{0}")]
    Conflict(String),
    /// The caller is not allowed to do this.
    #[error("{0}")]
    Forbidden(String),
    /// A storage fault: not the caller's fault. The store's own error, kept as the
    /// source (the store crate converts its errors into this one).
    #[error("storage error: {0}")]
    Store(Box<dyn std::error::Error + Send + Sync>),
    /// What the kernel is configured to use cannot be reached or used (a store that
    /// refuses or does not answer, a database of a newer schema): neither the
    /// caller's fault nor a fault in the kernel; the message says what to check.
    #[error("{0}")]
    Unavailable(String),
    /// Something inside the kernel broke; the message is for the logs and the caller.
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::Invalid(msg.into())
    }
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self::NotFound(msg.into())
    }
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self::Conflict(msg.into())
    }
    pub fn forbidden(msg: impl Into<String>) -> Self {
        Self::Forbidden(msg.into())
    }
    pub fn unavailable(msg: impl Into<String>) -> Self {
        Self::Unavailable(msg.into())
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::Internal(msg.into())
    }
}
