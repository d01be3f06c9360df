//! The worker backends an agent may name, and which of them run no worker.

use crate::states::text_enum;

text_enum! {
    /// A worker backend an agent may name. Running them is the process manager's
    /// job; the text is what tools, YAML and the store say.
    pub enum Backend("backend") {
        Claude = "claude",
        Codex = "codex",
        Cursor = "cursor",
        Gemini = "gemini",
        OpenCode = "opencode",
        Sdk = "sdk",
        Mock = "mock",
        /// An agent that a client connected with agent_join acts as: the kernel
        /// never starts a worker for it (two of the same agent would answer).
        External = "external",
        /// A person on the team: like `external`, the kernel never runs a worker
        /// for it; they answer through an MCP client of their own (agent_join), and
        /// contracts may name them as approvers or as the member a message is
        /// routed to.
        Human = "human",
    }
}

impl Backend {
    /// Whether the kernel never starts a worker for agents of this backend.
    pub fn has_no_worker(self) -> bool {
        matches!(self, Self::External | Self::Human)
    }

    /// Whether it needs nothing installed or logged in here (no CLI, no API key).
    pub fn needs_nothing_here(self) -> bool {
        matches!(self, Self::Mock | Self::External | Self::Human)
    }
}

/// The worker backends an agent may name, as text (for messages and suggestions).
pub const BACKENDS: &[&str] = &[
    Backend::Claude.as_str(),
    Backend::Codex.as_str(),
    Backend::Cursor.as_str(),
    Backend::Gemini.as_str(),
    Backend::OpenCode.as_str(),
    Backend::Sdk.as_str(),
    Backend::Mock.as_str(),
    EXTERNAL,
    HUMAN,
];
/// [`Backend::External`]'s text.
pub const EXTERNAL: &str = Backend::External.as_str();
/// [`Backend::Human`]'s text.
pub const HUMAN: &str = Backend::Human.as_str();

/// Whether the kernel never starts a worker for agents of this backend (named by
/// its text; an unknown name is a backend that would have one).
pub fn has_no_worker(backend: &str) -> bool {
    backend.parse().is_ok_and(Backend::has_no_worker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_enum_in_order() {
        let texts: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
        assert_eq!(texts, BACKENDS);
        for b in Backend::ALL {
            assert_eq!(b.as_str().parse::<Backend>(), Ok(*b));
        }
        assert!(has_no_worker("human") && has_no_worker("external"));
        assert!(!has_no_worker("mock") && !has_no_worker("nonesuch"));
    }
}
