//! `cfg(heavy)` when `AGENT_WORKER_HEAVY=1`: the tests that need a tool from outside
//! the repository (the worker CLIs from npm, the MCP Inspector, the conformance suite,
//! Chromium, the Python SDK's virtualenv) run only then, and a missing tool fails them;
//! without it a local `cargo test` lists them as ignored, each with the group it
//! belongs to. scripts/test (CI) sets it. See docs/src/tests.md.

fn main() {
    println!("cargo::rerun-if-env-changed=AGENT_WORKER_HEAVY");
    println!("cargo::rustc-check-cfg=cfg(heavy)");
    if std::env::var("AGENT_WORKER_HEAVY").is_ok_and(|v| v == "1") {
        println!("cargo::rustc-cfg=heavy");
    }
}
