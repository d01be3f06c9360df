//! The MCP Inspector's web UI (`@modelcontextprotocol/inspector` 2.12 without
//! `--cli`) in headless Chromium: launched for our HTTP server with the admin
//! token as its Authorization header, it connects, and its Tools page runs
//! `workflow_run` on the bundled review loop (mock agents) to a successful
//! result with the structured content, not "Tool Call Failed – Invalid
//! Parameters" (what a task answer to a session that never asked for one
//! showed). The page is driven by tests/browser/inspector_web.mjs
//! (playwright-core, on the Inspector's Node).
//!
//! Needs scripts/inspector-setup and scripts/browser-setup (Debian's chromium,
//! playwright-core in .interop/browser). With AGENT_WORKER_HEAVY=1 (scripts/test)
//! anything missing fails the test. AW_TEST_SCREENSHOT=/some/file.png keeps the
//! screenshot of the page at the end. The dashboard's test also watches a task
//! board move (a plan added, a claim, a done) and keeps board.png.

use crate::common;
use common::*;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

const TOKEN: &str = "inspector-web-admin-token";
const CHROMIUM: &str = "/usr/bin/chromium";

/// What the test runs: the Inspector's Node and launcher, Chromium, playwright-core.
struct Tools {
    node: PathBuf,
    launcher: PathBuf,
    chromium: PathBuf,
    playwright: PathBuf,
}

/// The tools, or None (skip) when one is missing and they are not required.
fn tools() -> Option<Tools> {
    let (node, launcher) = common::inspector::inspector()?;
    let t = Tools {
        node: node.into(),
        launcher: launcher.into(),
        chromium: PathBuf::from(CHROMIUM),
        playwright: Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(".interop/browser/node_modules/playwright-core"),
    };
    let missing: Vec<String> = [&t.chromium, &t.playwright.join("package.json")]
        .iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return Some(t);
    }
    common::heavy::missing(&missing.join(", "), "scripts/browser-setup");
    None
}

/// A free loopback port (the Inspector's web server needs a fixed one).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child in a process group of its own, so that everything it starts goes with it.
struct Group(Child);

impl Group {
    fn spawn(cmd: &mut Command) -> Self {
        Self(
            cmd.process_group(0)
                .kill_on_drop(true)
                .spawn()
                .expect("spawn"),
        )
    }

    /// SIGTERM to the group, then SIGKILL if it has not exited within 5 s.
    async fn stop(mut self) {
        let Some(pid) = self.0.id() else { return };
        let group = Pid::from_raw(pid as i32);
        let _ = killpg(group, Signal::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(5), self.0.wait())
            .await
            .is_err()
        {
            let _ = killpg(group, Signal::SIGKILL);
            let _ = self.0.wait().await;
        }
        // Whatever of the group outlived its leader.
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// Pids of the live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// The browser script `script` (in tests/browser/) on the Inspector's Node, for
/// the web UI at `ui_url`, with its HOME and a fresh Chromium profile, and `env`.
fn driver(
    t: &Tools,
    script: &str,
    ui_url: &str,
    (home, profile): (&Path, &Path),
    env: &[(&str, &Path)],
    stdin: Stdio,
) -> Group {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(script);
    Group::spawn(
        Command::new(&t.node)
            .arg(&script)
            .env("HOME", home)
            .env("PLAYWRIGHT_CORE", &t.playwright)
            .env("CHROMIUM", &t.chromium)
            .env("INSPECTOR_URL", ui_url)
            .env("USER_DATA_DIR", profile)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
}

/// What of Chromium outlived its script (its profile is in its command line),
/// killed; the pids there were.
fn chromium_left(profile: &Path) -> Vec<i32> {
    let left = processes_with(&profile.display().to_string());
    for pid in &left {
        let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    left
}

/// Starts the Inspector's web UI for the server at `url`; returns its process group and its URL.
async fn start_web_ui(t: &Tools, dir: &Path, home: &Path, url: &str) -> (Group, String) {
    let ui_token = uuid::Uuid::now_v7().simple().to_string();
    let mut inspector = Group::spawn(
        Command::new(&t.node)
            .arg(&t.launcher)
            .args(["--web", "--transport", "http", "--server-url", url])
            .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
            .current_dir(dir)
            .env("HOME", home)
            .env("HOST", "127.0.0.1")
            .env("CLIENT_PORT", free_port().to_string())
            .env("MCP_SANDBOX_PORT", "0")
            .env("MCP_APP_ORIGIN_PORT", "0")
            .env("MCP_AUTO_OPEN_ENABLED", "false")
            .env("MCP_INSPECTOR_API_TOKEN", &ui_token)
            .env("MCP_INSPECTOR_SECRET_STORE", "memory")
            .env("MCP_STORAGE_DIR", home.join("storage"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut lines = BufReader::new(inspector.0.stdout.take().unwrap()).lines();
    let ui_url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            let l = l.trim();
            if l.starts_with("http://127.0.0.1:") && l.contains(&ui_token) {
                return l.to_owned();
            }
        }
        panic!("the Inspector exited before printing its URL");
    })
    .await
    .expect("the Inspector's web UI did not start in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (inspector, ui_url)
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: Chromium, playwright-core and the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/browser-setup)"
)]
async fn the_web_ui_runs_workflow_run_to_a_structured_result_in_a_headless_browser() {
    let Some(t) = tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(&dir.path().join("data"), &["--token", TOKEN], &[]).await;

    // The web UI on a loopback port, prefilled with our server and its header;
    // no browser of its own, secrets in memory, its files in the temp dir.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (inspector, ui_url) = start_web_ui(&t, dir.path(), &home, &s.url).await;

    // The browser, driven by the Node script.
    let profile = dir.path().join("chromium-profile");
    std::fs::create_dir_all(&profile).unwrap();
    let screenshot = std::env::var_os("AW_TEST_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("inspector-web.png"));
    let workflow =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows/review-loop.yaml");
    let env = [
        ("WORKFLOW_FILE", workflow.as_path()),
        ("SCREENSHOT", &screenshot),
    ];
    let mut driver = driver(
        &t,
        "inspector_web.mjs",
        &ui_url,
        (&home, &profile),
        &env,
        Stdio::null(),
    );
    let (mut out, mut err) = (String::new(), String::new());
    let mut stdout = driver.0.stdout.take().unwrap();
    let mut stderr = driver.0.stderr.take().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(50), async {
        let (a, b) = tokio::join!(
            stdout.read_to_string(&mut out),
            stderr.read_to_string(&mut err)
        );
        a.unwrap();
        b.unwrap();
        driver.0.wait().await.unwrap()
    })
    .await;
    driver.stop().await;
    inspector.stop().await;
    // Chromium runs in a group of its own: nothing may outlive the script.
    let left = chromium_left(&profile);
    s.stop().await;
    eprintln!("screenshot: {}", screenshot.display());

    let status = status.expect("the browser script did not finish within 50 s");
    assert!(status.success(), "the browser script failed:\n{err}\n{out}");
    assert!(left.is_empty(), "Chromium outlived the script: {left:?}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line:\n{out}\n{err}"));
    let r: serde_json::Value = serde_json::from_str(line).unwrap();
    eprintln!(
        "the web UI negotiated MCP {}, declared the tasks extension: {}, the tasks capability: {}",
        r["era"], r["tasks_extension"], r["tasks_capability"]
    );
    // The case of the old failure: a 2025-11-25 session that declared tasks and
    // asked for none.
    assert_eq!(r["era"], "2025-11-25", "{r}");
    assert_eq!(r["tasks_extension"], true, "{r}");
    let run = &r["structured"];
    assert_eq!(run["workflow"], "@review-loop:main", "{run}");
    assert_eq!(run["status"], "completed", "{run}");
    let agents: Vec<&str> = run["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents: {run}"))
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(agents, ["coder", "reviewer"], "{run}");
    let doc = run["document"]["content"].as_str().unwrap_or_default();
    assert!(doc.contains("## Review 2\n- approved"), "{run}");
}

/// A document in Markdown, with raw HTML and a link that is not http(s).
const PLAN: &str = "# Plan\n\n- Ship the dashboard\n- Show **waiting** agents\n\n\
                    Run `scripts/ui-build`; see [the spec](https://modelcontextprotocol.io/) \
                    or [this](javascript:void).\n\n<img src=x onerror=alert(1)>\n";

/// The team `@dash-review:main` (a name long enough to test the picker): a mock
/// coder whose write waits for the lead's approval, a mock reviewer whose run
/// ends at once with a message of a few lines, a document to view; and
/// `@global:main` with bob, for the switcher.
async fn dashboard_team(lead: &Client) {
    let yaml = "name: dash-review\nagents:\n  coder:\n    backend: mock\n    permissions: edit\n    \
                mock:\n      - write: {path: out.txt, content: hi}\n  reviewer:\n    backend: mock\n    \
                mock:\n      - send: \"Read `plan.md`, **all** of it:\\n- the tests come first\\n- then the fixes\\n\
                - then the screenshots\\nLooks right to me.\"\nkickoff: \"@coder @reviewer go\"\n";
    call(
        lead,
        "contract_set",
        serde_json::json!({"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "require_approval", "timeout": "5m"}}),
    )
    .await
    .ok();
    call(lead, "workflow_run", serde_json::json!({"yaml": yaml}))
        .await
        .ok();
    call(
        lead,
        "team_doc_write",
        serde_json::json!({"workflow": "@dash-review:main", "file": "plan.md", "content": PLAN}),
    )
    .await
    .ok();
    call(
        lead,
        "channel_send",
        serde_json::json!({"workflow": "@dash-review:main",
               "message": "The plan is in plan.md; the review follows."}),
    )
    .await
    .ok();
    new_agents(lead, "@global:main", &["bob"]).await;
}

/// Reads the driver's stdout up to a line starting with `word`.
async fn line_from(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    word: &str,
) -> Result<String, String> {
    while let Ok(Some(l)) = lines.next_line().await {
        if let Some(rest) = l.strip_prefix(word) {
            return Ok(rest.trim().to_owned());
        }
    }
    Err(format!("the driver ended before {word}"))
}

fn epoch_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: Chromium, playwright-core and the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/browser-setup)"
)]
async fn the_dashboard_shows_the_team_live_and_its_approve_decides_as_the_lead() {
    let Some(t) = tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(&dir.path().join("data"), &["--token", TOKEN], &[]).await;
    let lead = s.lead(Proto::Legacy).await;
    dashboard_team(&lead).await;

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (inspector, ui_url) = start_web_ui(&t, dir.path(), &home, &s.url).await;
    let profile = dir.path().join("chromium-profile");
    std::fs::create_dir_all(&profile).unwrap();
    // AW_DASHBOARD_SHOTS=docs/src/images keeps the screenshots (the README's).
    let shots = std::env::var_os("AW_DASHBOARD_SHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().to_owned());
    std::fs::create_dir_all(&shots).unwrap();
    let env = [("SHOTS", shots.as_path())];
    let mut driver = driver(
        &t,
        "dashboard.mjs",
        &ui_url,
        (&home, &profile),
        &env,
        Stdio::piped(),
    );
    let mut stdin = driver.0.stdin.take().unwrap();
    let mut lines = BufReader::new(driver.0.stdout.take().unwrap()).lines();
    let mut stderr = driver.0.stderr.take().unwrap();
    let err = tokio::spawn(async move {
        let mut e = String::new();
        let _ = stderr.read_to_string(&mut e).await;
        e
    });
    let run = tokio::time::timeout(Duration::from_secs(110), async {
        line_from(&mut lines, "READY").await?;
        let sent = epoch_ms();
        call(
            &lead,
            "channel_send",
            serde_json::json!({"workflow": "@dash-review:main", "message": "status please"}),
        )
        .await
        .ok();
        use tokio::io::AsyncWriteExt;
        stdin.write_all(b"SENT\n").await.unwrap();
        let seen: u128 = line_from(&mut lines, "SEEN").await?.parse().unwrap();
        line_from(&mut lines, "APPROVED").await?;
        board_moves(&s, &lead, &mut stdin, &mut lines).await?;
        let result = line_from(&mut lines, "RESULT").await?;
        Ok::<_, String>((seen.saturating_sub(sent), result))
    })
    .await;
    driver.stop().await;
    inspector.stop().await;
    let left = chromium_left(&profile);
    let err = err.await.unwrap();
    let (latency, result) = match run {
        Ok(Ok(r)) => r,
        Ok(Err(why)) => panic!("{why}:\n{err}"),
        Err(_) => panic!("the driver did not finish in 110 s:\n{err}"),
    };
    assert!(left.is_empty(), "Chromium outlived the script: {left:?}");
    eprintln!(
        "screenshots in {}; the message showed {latency} ms after its send",
        shots.display()
    );
    assert!(latency < 1000, "the message took {latency} ms to show");

    // Approve in the page decided it as the lead.
    let approvals = call(
        &lead,
        "approval_list",
        serde_json::json!({"workflow": "@dash-review:main"}),
    )
    .await
    .ok();
    let a = &approvals["approvals"][0];
    assert_eq!(a["state"], "approved", "{approvals}");
    assert_eq!(a["votes"][0]["who"], "user", "decided by the lead: {a}");

    let r: serde_json::Value = serde_json::from_str(&result).unwrap();
    eprintln!("the dashboard in the browser: {r}");
    shown_as_a_person_reads_it(&r);
    assert!(
        r["width"].as_u64().unwrap() <= 420,
        "shown at about 400 px: {r}"
    );
    assert_eq!(r["overflows"], false, "nothing wider than the panel: {r}");
    assert_eq!(r["viewer_focus"], "viewer-title", "{r}");
    assert_eq!(r["focus_back"], "plan.md", "{r}");
    assert_ne!(r["bg_light"], r["bg_dark"], "{r}");
    assert_eq!(r["switched"], serde_json::json!(["bob"]), "{r}");
    board_shown(&r);
    s.stop().await;
}

/// The board's moves in `@global:main`, each when the driver shows the one
/// before: the lead adds a plan; bob claims its first task; bob finishes it
/// with a result and claims the next.
async fn board_moves(
    s: &HttpServer,
    lead: &Client,
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    line_from(lines, "BOARD").await?;
    let plan = serde_json::json!({"workflow": "@global:main", "plan": [
        {"name": "api", "title": "Design the API"},
        {"name": "client", "title": "Build the client", "deps": ["api"]},
        {"name": "docs", "title": "Write the docs", "deps": ["api"]},
        {"title": "Ship it", "deps": ["client", "docs"]},
    ]});
    let added = call(lead, "task_add", plan).await.ok();
    let id = |i: usize| added["tasks"][i]["id"].clone();
    let bob = join(s, lead, "bob@global:main", Proto::Legacy).await;
    stdin.write_all(b"ADDED\n").await.unwrap();
    line_from(lines, "OPEN").await?;
    call(&bob, "task_claim", serde_json::json!({"id": id(0)}))
        .await
        .ok();
    stdin.write_all(b"CLAIMED\n").await.unwrap();
    line_from(lines, "HELD").await?;
    let done = serde_json::json!({"id": id(0), "state": "done", "result": {"api": "v1"}});
    call(&bob, "task_update", done).await.ok();
    call(&bob, "task_claim", serde_json::json!({"id": id(1)}))
        .await
        .ok();
    stdin.write_all(b"DONE\n").await.unwrap();
    Ok(())
}

/// The board as the browser showed it at each move (columns of "#id title |
/// meta | result" cards).
fn board_shown(r: &serde_json::Value) {
    let col = |at: &str, c: &str| -> Vec<String> {
        r[at][c]
            .as_array()
            .unwrap_or_else(|| panic!("no {at}.{c}: {r}"))
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(col("board_added", "open"), ["#1 Design the API"], "{r}");
    assert_eq!(
        col("board_added", "blocked"),
        [
            "#2 Build the client | blocked by #1",
            "#3 Write the docs | blocked by #1",
            "#4 Ship it | blocked by #2, #3"
        ],
        "{r}"
    );
    assert_eq!(
        col("board_claimed", "claimed"),
        ["#1 Design the API | owner bob"],
        "{r}"
    );
    assert!(col("board_claimed", "open").is_empty(), "{r}");
    assert_eq!(
        col("board_done", "done"),
        ["#1 Design the API | owner bob | result attached"],
        "{r}"
    );
    assert_eq!(
        col("board_done", "claimed"),
        ["#2 Build the client | owner bob"],
        "{r}"
    );
    assert_eq!(col("board_done", "open"), ["#3 Write the docs"], "{r}");
    assert_eq!(
        r["board_labels"],
        serde_json::json!([
            "Open 1",
            "Blocked 1",
            "Claimed 1",
            "Done 1",
            "Failed · cancelled 0"
        ]),
        "{r}"
    );
    assert_eq!(r["board_overflows"], false, "the board fits the panel: {r}");
}

/// What the walk of a new user found wrong, as the browser measured it.
fn shown_as_a_person_reads_it(r: &serde_json::Value) {
    assert_eq!(r["title"], "Team dashboard", "the panel's title: {r}");
    let coder = r["coder"].as_str().unwrap();
    assert!(
        coder.contains("waiting for approval #1") && !coder.contains("running"),
        "{coder}"
    );
    let texts: Vec<&str> = r["texts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    for t in &texts {
        assert!(!t.contains("1 runs") && !t.contains("1 agents"), "{t}");
    }
    assert!(texts.iter().any(|t| t.starts_with("1 run ·")), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("(active, 1 agent)")),
        "{texts:?}"
    );
    let headings = &r["headings"];
    assert_eq!(
        headings,
        &serde_json::json!(["started", "trigger", "status", "took", "tokens", "cost"])
    );
    let tables = r["columns"].as_array().unwrap();
    assert_eq!(tables.len(), 2, "a table per agent: {r}");
    assert_eq!(tables[0], tables[1], "columns line up across agents: {r}");
    let picker = &r["picker"];
    assert!(
        picker["text"].as_i64() <= picker["room"].as_i64(),
        "the picker shows its whole text: {picker}"
    );
    let channel = &r["channel"];
    assert_eq!(channel["scrolls"], true, "{channel}");
    assert_eq!(
        channel["first_cut"], 0,
        "starts with a whole message: {channel}"
    );
    assert!(channel["last_cut"].as_i64() <= Some(0), "{channel}");
    markdown_rendered(&r["markdown"]);
    assert_eq!(
        r["message_marks"],
        serde_json::json!(["plan.md", "all"]),
        "a message's inline Markdown: {r}"
    );
    assert_eq!(r["link_opened"], "https://modelcontextprotocol.io/", "{r}");
    assert_eq!(
        r["app_stays"], true,
        "opened by the host, not in the app: {r}"
    );
}

fn markdown_rendered(md: &serde_json::Value) {
    assert_eq!(md["heading"], serde_json::json!(["Plan"]), "{md}");
    assert_eq!(
        md["items"],
        serde_json::json!(["Ship the dashboard", "Show waiting agents"]),
        "{md}"
    );
    assert_eq!(md["strong"], serde_json::json!(["waiting"]), "{md}");
    assert_eq!(md["code"], serde_json::json!(["scripts/ui-build"]), "{md}");
    assert_eq!(
        md["links"],
        serde_json::json!(["https://modelcontextprotocol.io/"]),
        "only http(s) links: {md}"
    );
    assert_eq!(md["raw"], true, "raw HTML shows as text: {md}");
    let allowed = ["a", "code", "h4", "li", "p", "span", "strong", "ul"];
    for e in md["elements"].as_array().unwrap() {
        assert!(
            allowed.contains(&e.as_str().unwrap()),
            "element {e} in {md}"
        );
    }
}
