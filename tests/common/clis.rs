//! The real worker CLIs (installed into `.interop/` by scripts/interop-setup) as an
//! agent's backend: where they are, and the environment that keeps them offline and
//! away from the machine's own configuration and credentials.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The folder holding the CLIs, or None (skip) when they are not installed and
/// the heavy tests were not asked for (see heavy.rs).
pub fn cli_bin() -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop/node_modules/.bin");
    let ready = ["claude", "codex", "gemini", "opencode"]
        .iter()
        .all(|c| bin.join(c).exists());
    if ready {
        return Some(bin);
    }
    super::heavy::missing("the worker CLIs (in .interop/)", "scripts/interop-setup");
    None
}

/// The environment every CLI run gets: the CLIs on the PATH and a private HOME, so
/// nothing of the machine's own configuration or credentials is used.
pub fn base_env(bin: &Path, home: &Path) -> serde_json::Map<String, Value> {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut m = serde_json::Map::new();
    m.insert("PATH".into(), json!(path));
    m.insert("HOME".into(), json!(home.display().to_string()));
    m.insert(
        "XDG_CONFIG_HOME".into(),
        json!(home.join(".config").display().to_string()),
    );
    m.insert(
        "XDG_DATA_HOME".into(),
        json!(home.join(".local/share").display().to_string()),
    );
    m.insert(
        "XDG_CACHE_HOME".into(),
        json!(home.join(".cache").display().to_string()),
    );
    m.insert(
        "XDG_STATE_HOME".into(),
        json!(home.join(".local/state").display().to_string()),
    );
    m
}

/// Per-CLI settings that point it at the fake LLM.
pub fn provider_env(backend: &str, llm: &str, home: &Path) -> Vec<(&'static str, String)> {
    match backend {
        "claude" => vec![
            ("ANTHROPIC_BASE_URL", llm.to_owned()),
            ("ANTHROPIC_API_KEY", "sk-ant-test".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("IS_SANDBOX", "1".into()),
        ],
        "codex" => vec![
            ("CODEX_API_KEY", "sk-test".into()),
            ("CODEX_HOME", home.join(".codex").display().to_string()),
            ("OPENAI_BASE_URL", format!("{llm}/v1")),
        ],
        "gemini" => vec![
            ("GEMINI_API_KEY", "test-key".into()),
            ("GOOGLE_GEMINI_BASE_URL", llm.to_owned()),
        ],
        "opencode" => vec![
            ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
            (
                "OPENCODE_CONFIG_CONTENT",
                json!({
                    "provider": {"fake": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "fake",
                        "options": {"baseURL": format!("{llm}/v1"), "apiKey": "sk-test"},
                        "models": {"fake-model": {"name": "fake-model", "tool_call": true}},
                    }},
                })
                .to_string(),
            ),
        ],
        _ => vec![],
    }
}

pub fn model_for(backend: &str) -> Option<&'static str> {
    match backend {
        "opencode" => Some("fake/fake-model"),
        "gemini" => Some("gemini-2.5-flash"),
        "codex" => Some("gpt-5.5"),
        "claude" => Some("claude-sonnet-4-5"),
        _ => None,
    }
}

/// An agent's env for `backend` against the fake LLM at `llm`: the CLIs on the
/// PATH, a private HOME with what a user of each CLI has set up once (Codex's home
/// folder, Gemini's choice of API-key auth, needed for a custom base URL), and the
/// provider settings.
pub fn cli_env(
    backend: &str,
    bin: &Path,
    home: &Path,
    llm: &str,
) -> serde_json::Map<String, Value> {
    let mut env = base_env(bin, home);
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    )
    .unwrap();
    for (k, v) in provider_env(backend, llm, home) {
        env.insert(k.into(), json!(v));
    }
    env
}
