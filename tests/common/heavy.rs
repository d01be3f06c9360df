//! Heavy tests: those that need a tool from outside the repository. They run with
//! `AGENT_WORKER_HEAVY=1` (scripts/test, so CI, sets it; build.rs turns it into
//! `cfg(heavy)`), and then a missing tool fails them. Without it each is marked
//! `#[cfg_attr(not(heavy), ignore = "heavy: <group> ...")]`, so `cargo test` and
//! nextest list it as ignored (skipped) under its group, and a local `cargo test`
//! passes with none of the tools installed.
//!
//! The groups and what installs each: the worker CLIs (scripts/interop-setup), the
//! MCP Inspector (scripts/inspector-setup), the MCP conformance suite
//! (scripts/conformance-setup), Chromium and playwright-core (scripts/browser-setup),
//! the Python SDK's virtualenv (scripts/py-env). PostgreSQL is the other heavy piece:
//! its tests run when `AGENT_WORKER_TEST_PG` names a cluster (common/store.rs).

/// The variable, as the documentation and the messages name it.
pub const VAR: &str = "AGENT_WORKER_HEAVY";

/// Whether the heavy tests were asked for (`AGENT_WORKER_HEAVY=1` at build time).
pub fn on() -> bool {
    cfg!(heavy)
}

/// A tool a test needs is missing (`what`; `setup` installs it): with the heavy
/// tests asked for, the test fails; otherwise (an ignored test run by hand with
/// `--include-ignored`) it says so and the caller skips.
pub fn missing(what: &str, setup: &str) {
    if on() {
        panic!("{VAR}=1 but not installed: {what} (run {setup})");
    }
    eprintln!("skipping, not installed: {what} (run {setup})");
}
