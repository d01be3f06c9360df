//! agent-worker: a multi-agent orchestration kernel that is itself an MCP server.
//!
//! # Map
//!
//! A Cargo workspace whose crates are the layers; arrows point down only, and
//! `tests/tidy.rs` reads `cargo metadata` to keep it so:
//!
//! ```text
//! agent-worker (this crate: src/)    the binary: launch, server wiring, bridge, background
//!   agent-worker-mcp (crates/mcp)    the MCP interface: rmcp handler, tools, resources, HTTP
//!     agent-worker-kernel (crates/kernel)  the rooms: registry .. workflows
//!       agent-worker-store (crates/store)  SQLite and PostgreSQL; the only crate naming one
//!   agent-worker-worker (crates/worker)  one run of one agent on its backend (over MCP)
//!         agent-worker-domain (crates/domain)  names, errors, clock, backends, guards, the
//!                                              worker protocol, contracts, permissions,
//!                                              schedules, workflow YAML: pure
//!         agent-worker-os (crates/os)      subprocess supervision, giving memory back
//!         agent-worker-telemetry (crates/telemetry)  traces over OTLP when an endpoint
//!                                              is set, nothing otherwise
//! ```
//!
//! Below, each crate's files (paths inside its `src/`; `tests/tidy_map.rs` checks
//! that every file and folder at the top of a crate's `src/` is named in its
//! section and every file named is there):
//!
//! ```text
//! --- agent-worker (src/) ---
//! main.rs        launch flags only -> server::run
//! server.rs      process wiring: data dir lock, logging, stdio + HTTP listeners (the data
//!                dir's remembered port, kernel.port), kernel.json
//! background.rs  the kernel a stdio launch starts in the background (it outlives the
//!                client) and its exit when idle with nothing owed
//! bridge/        a stdio launch relays to the data dir's kernel over HTTP, as the lead
//!                or, with `--token-env`, as an agent (requests,
//!                the session's own stream, a heartbeat, a listen's stream closed
//!                when its client cancels it; a new kernel if it died; a
//!                kernel silent while a request waits is probed, then named with
//!                what to do: liveness.rs; the headers a 2026-07-28 message needs:
//!                headers.rs)
//! config.rs      launch options, data dir and admin token resolution
//! --- agent-worker-domain (crates/domain/src/) ---
//! backends.rs    the worker backends an agent may name; guards.rs budgets, an agent's limits
//! protocol.rs    kernel <-> worker control channel: RunConfig in, Report lines out; the
//!                readiness probe's report; the MCP body limit both sides keep
//! clock.rs       time: now, formats, durations (bounded)
//! contracts/     contracts (pure): parsing whose errors name the field, matching an
//!                event, precedence (deny > allow > approvals combine; notify always;
//!                verdict.rs), rates and votes of the members,
//!                one English sentence each (english.rs), what a backend without a
//!                hook holds of them as profile denials
//! names.rs       name rules and targets (alice@review:pr-1), organisation names
//! placement.rs   which node runs an agent: by name or by labels (`node: {labels}`),
//!                labels as stored and matched
//! error.rs       the kernel's typed errors; feedback.rs a member's report about its
//!                tools and skills (kinds, bounds)
//! hooks/         events from outside (pure): HMAC-SHA256 signatures in GitHub's and
//!                a generic form (sign.rs), the replay window, a payload's depth,
//!                what a hook does and the `$.a.b` values it takes (action.rs)
//! fsread.rs      reading a file someone named: regular files only, size first, bounded
//! redact.rs      text we do not control as it leaves for a person or a collector: cut,
//!                credentials masked (the dashboard, a span's status)
//! permissions/   permission profiles (pure): classes, allow/deny, decisions; backends.rs
//!                each backend's terms for a profile (Claude's mode and tool rules,
//!                Codex's sandbox, Gemini's policy, OpenCode's config, Cursor's
//!                rules) and what it cannot hold; governed.rs a profile under
//!                contracts (Claude's asked classes, denials a backend can hold);
//!                requests.rs the request a tool call stands for; shell/ what a
//!                command line runs (read as the shell does, wrappers and `sh -c`
//!                unwrapped) and whether a command pattern covers it
//! trigger.rs     `every` and `cron` triggers (pure: parsing, next fire); an agent's
//!                schedule is runtime/schedules.rs, when runs start runtime/scheduler/
//! states.rs      why a run starts (Wake) and the states things are in, as enums,
//!                each with the one mapping to and from the store's text
//! workflow_yaml/ workflow YAML (pure): parsing with positions, params, `${{ }}`,
//!                `trigger:` and `steps:` (spec/flow.rs), `hooks:` (spec/hooks.rs)
//! result_schema/ results with a shape (pure): a JSON Schema subset (type, properties,
//!                required, enum, items) parsed with bounds, a result's misfits named
//! steps/         step workflows (pure): events (`on`), ids and names resolved, the
//!                graph checked (no loop, every step able to run), the moves a graph's
//!                states call for
//! definition.rs the sizes an agent's definition may carry, each bounded where it is set
//! delegate.rs    what a definition's `delegate` allows (agents of its own) and how a
//!                sub-agent is held within its parent's (pure)
//! skills.rs      an agent's skills (the Agent Skills format): a folder, its SKILL.md
//! workspace.rs   the folder an agent's runs work in: the setting, its parsing, its names
//! sandbox.rs     the OS sandbox a run gets (pure): modes, network, limits, the paths
//!                hidden, readable and writable, and "all but these" as Landlock rules
//! mounts.rs      what a run's mount namespace holds in its writable folder (pure): git's
//!                parts that run code, a contract glob's paths, the folders pinned above
//! --- agent-worker-os (crates/os/src/) ---
//! memory.rs      giving freed memory back to the OS: allocator collections when threads
//!                run out of work or a burst ends (GiveBack, the store's writer), no
//!                transparent huge pages, the code pages only a server's start used
//! bounded.rs     a short command run to its end within bounds (a setup step, git)
//! process.rs     supervising a subprocess: process group, lossy lines, limits, kill + sweep
//! group.rs       where a supervised process stands: a group or a session of its own
//!                (no controlling terminal), or the caller's group
//! sandbox.rs     what this machine offers a sandbox: its Landlock ABI, user namespaces
//!                and the mounts and capability drop a worker makes on itself
//! cgroup.rs      a run's own pids cgroup (a process limit root is held to): make, join,
//!                refused forks, kill all and remove, the sweep of a killed kernel's
//! --- agent-worker-telemetry (crates/telemetry/src/) ---
//! lib.rs         OpenTelemetry spans exported over OTLP/HTTP (init once per process,
//!                Span, a caller's context from `traceparent`, the carrier a
//!                subprocess continues: TRACEPARENT; a run an agent's call set off
//!                is a new trace linked to it); without an endpoint, no span
//! settings.rs    the OTEL_BSP_* batch settings within bounds; the resource (host,
//!                instance)
//! agent_env.rs   an agent's OTEL_* held from its worker's exporter, given back to
//!                what the worker starts for it
//! --- agent-worker-store (crates/store/src/) ---
//!   lib.rs         the store's handle and fixed reader threads, on either engine;
//!                  writer.rs its writers with group commit (SQLite's one; on
//!                  PostgreSQL one for global writes and three shared by the
//!                  instances, each transaction under the global lock and its
//!                  instances' locks), writer_tests.rs theirs; queue.rs their job
//!                  queues (sleep when idle, never spin); sql/ the one vocabulary jobs speak (connection, statements,
//!                  rows, params: rusqlite's shapes), whose PostgreSQL side converts
//!                  SQLite's dynamic values to declared types; sqlite.rs the default
//!                  engine (a WAL file in the data dir), checkpoint.rs its WAL
//!                  checkpoints on their own thread, schema.rs its numbered
//!                  migrations (PRAGMA user_version); postgres/ the other (connecting,
//!                  the write, instance and node locks, fence_tests.rs the node's
//!                  lock over its writers, client.rs its client whose every wait
//!                  is bounded, schema.rs its migrations, functions.rs the
//!                  server-side functions they make, bus.rs LISTEN/NOTIFY
//!                  between the kernels of a database); allocator.rs SQLite on the
//!                  process's allocator
//!   pragmas.rs     the settings of every SQLite connection the store opens
//!   holds.rs       how long the writers' transactions last (a histogram), in all
//!                  and per instance
//!   testing.rs     for other crates' tests too: stores on a real PostgreSQL cluster
//! --- agent-worker-kernel (crates/kernel/src/): the single source of truth (one per
//! data dir). Rooms, each a service built only from those listed before it (and
//! events.rs, timing.rs, the store) ---
//!   lib.rs         who is calling (Caller, Scope); the map of the rooms
//!   facade/        Kernel: the composition root (mod.rs: open builds each room
//!                  from the store, the clock, the events and the rooms below it,
//!                  then recovers; start), the rooms it hands the MCP layer
//!                  (registry(), messaging(), context(), workflows()), and a
//!                  Kernel method only where rooms are composed or a name checked
//!                  first (contracts.rs, orgs.rs, context.rs's vote, feedback.rs;
//!                  runtime.rs); the only `impl Kernel`
//!   timing.rs      the kernel's clock (the system's, or a manual one in tests) and
//!                  Timing: retry delays, pause times, the settle debounce; Setup
//!                  (those, the worker binary, the node's labels) a kernel opens with
//!   sql_states.rs  (tests) the state words SQL spells out, held to `domain::states`
//!   testing.rs     (tests) the rooms below the runtime built from below on one store,
//!                  the events and a manual clock, for each room's own tests.rs
//!   events.rs      post-commit events: wakes for the scheduler, signals upward
//!   feedback.rs    FeedbackRoom: what members report about their tools and skills
//!                  (my_feedback), per instance in its own table, from the store and
//!                  the events; the workflows room reads its summary into a status
//!   feedback/      (tests) report_tests.rs, the room's decisions built from testing.rs
//!   registry/      Registry: workflow instances and agents (rows, views, validation),
//!                  config.rs an agent's stored configuration, orgs.rs organisations
//!                  (members as agents without a worker of `@org.<name>`, the
//!                  instance holding their channel and documents; who may act there),
//!                  delegated.rs the agents an agent made (their count, all below
//!                  it), tokens.rs admin and agent tokens (hash only), authentication
//!                  (revoke.rs the revocations a run's end or an agent's deletion asks)
//!   governance/    contracts.rs Contracts, a service owning the contracts in force
//!                  (rows, the hot-loaded set with each instance's organisation, in
//!                  force lead -> organisation -> instance, set/delete/list) and the decision
//!                  log; approvals.rs approvals
//!                  as rows (votes, deadline, lost with their run; a vote of the
//!                  members refused only once it cannot pass); rates.rs what
//!                  contracts with a rate counted, in the event's transaction
//!   messaging/     Messaging: channel_send and the send guard (mod.rs), decide.rs
//!                  what a send decides from its text and the agents (pure), one.rs
//!                  a job's sends in one statement where the database runs functions
//!                  (PostgreSQL), together.rs single sends queued per instance and
//!                  written by one job (together_tests.rs against one by one),
//!                  read.rs channel_read and the reader's cursor,
//!                  governed.rs message contracts inside the send's transaction,
//!                  mentions.rs the addressed rule (pure), inbox.rs deliveries
//!                  pending -> seen -> acked | deferred (open ones in `deliveries`,
//!                  acked ones moved to `deliveries_done`), broadcast.rs a message
//!                  to every other agent as one row, written per agent on first
//!                  read or change, team.rs member status, runs.rs what a run's
//!                  start and end (and a member's deletion) do to these tables,
//!                  asked by the runtime inside its transaction,
//!                  news.rs the "new for you" line on an agent's team tool results,
//!                  senders.rs what follows from who sends (hops, the sender's
//!                  cursor, urgent, a hook's posts as `hook:<name>`),
//!                  resources.rs content-addressed blobs, results.rs results with a
//!                  shape (the schema an ask or a step's prompt gave, the result
//!                  submitted against it)
//!   context/       Context: departed.rs what a member's deletion changes (its documents'
//!                  ownership), documents/ (rules, path rules, per-instance settings, the file
//!                  and database providers, doc_write contracts), proposals/ (types, stored,
//!                  ops, expiry on time, tally.rs the resolution rules, pure,
//!                  drafts.rs contracts agents draft and the lead approves,
//!                  held.rs the proposal members vote on for an approval)
//!   runtime/       Runtime, agents as things that run, composed of services that own
//!                  their state (a tidy test keeps its modules free of cycles):
//!                  base.rs what they are built on (store, events, clock, a pause),
//!                  agents/ create/update/pause/move/delete (info.rs agent_info),
//!                  own_folder.rs an agent's folder in the data dir (its alone),
//!                  workers/ the process manager (spec.rs what a run reads of its
//!                  agent, and its span; supervise.rs one run from spawn to
//!                  settlement; commits.rs a worktree agent's commit per run;
//!                  records.rs run views; home.rs a sandboxed agent's home of its
//!                  own for its CLI's state, seeded from the user's; home/login.rs one
//!                  login chain with the user's), running.rs the runs in progress
//!                  (Running, whose methods alone lock them), runs.rs run records (an agent's spending with
//!                  what it made), ask.rs agent_ask (the lead's, or an agent's of one it made),
//!                  delegation/ agents making, asking, deleting agents of their own,
//!                  scheduler/ (state and timers, admission and retries as pure
//!                  decisions with table tests, fires.rs schedules' fires, gate.rs admission and the queue,
//!                  its decision a pure function with a table of unit tests,
//!                  outcome.rs retries and pauses, wakes.rs deliveries to wakes in
//!                  bounded batches), schedules.rs, backends.rs
//!                  readiness, requests.rs a run's tool request (profile, then
//!                  contracts), approvals.rs waiting, deadlines, approval_decide,
//!                  voting.rs opening an approval (to its approvers, or as a vote of
//!                  the members) for a tool request or a merge, verdict.rs a
//!                  contract verdict on a held action (a merge, an agent making
//!                  an agent) recorded in one transaction,
//!                  spending.rs spend before a run and run_end contracts,
//!                  nodes/ the kernels of a store (name, heartbeat, takeover;
//!                  placing.rs placement by name or labels and moves by hand;
//!                  bus.rs their events to each other), worktrees/ an
//!                  agent's own git worktree (made, checked,
//!                  recovered at start; diff.rs and merge.rs git's reading and merging,
//!                  branches.rs branch_diff and branch_merge with merge contracts),
//!                  skills.rs the agents' skills, read again only when their folders change;
//!                  tells workflows through events
//!   tasks/         Tasks, the task board of each instance (above the runtime, which
//!                  knows nothing of it): rules.rs what may move where, who may take
//!                  a task, a plan's names and cycles, check_result; rows.rs its
//!                  writes (add, the atomic claim, moves); read.rs the board and
//!                  task_list's filter; wake.rs history lines and the inbox message
//!                  to who may take a task that became claimable; settle.rs claims
//!                  released when their agent or run is gone (on events and at
//!                  start); approval.rs contracts on tasks (deny, an approval that
//!                  holds a move)
//!   workflows/     Workflows, workflow runs: start (run.rs), setup.rs its shell setup steps,
//!                  status, stop, list; settle.rs the watch and when a run is done;
//!                  facts.rs what a status and the idle check read; steps/ step
//!                  workflows in motion (a step's prompt posted in the transaction
//!                  that marks it running, done when the run that read it succeeded;
//!                  start.rs a graph checked and written as the instance starts;
//!                  rows.rs each change names the state it expects)
//!   hooks/         Hooks, events from outside (`POST /hooks/{name}`): hooks the lead
//!                  declared, each request checked (signature, replay window, depth,
//!                  rate) and refused alike whatever is wrong, a delivery kept by the
//!                  sender's id before it starts a workflow or posts (rows.rs);
//!                  governed.rs contracts on `event: hook` (deny, notify, a
//!                  delivery held with its payload until its approval closes);
//!                  owned.rs a workflow's `hooks:`, its instance's: no name another
//!                  holds, removed when the instance is stopped or fails
//!                  recovered.rs a delivery left received by a node that is gone
//!                  (or this node's previous life) claimed and acted on again, once
//! --- agent-worker-worker (crates/worker/src/): the worker mode (`agent-worker
//! __worker`, started by the kernel per run) ---
//!   probe.rs       the readiness probe mode (`__probe`): found, version, logged in
//!   hook.rs        the inbox hook mode (`__hook`) a CLI runs after each tool call
//!                  (Claude Code, Codex, Gemini CLI): what arrived for the agent, as
//!                  the hook's added context
//!   lib.rs         the run, in spans when traces are exported (the worker's, its
//!                  reading, its backend's; client.rs a span per MCP call, its
//!                  context in `_meta`; sdk/ a span per model turn and tool call)
//!   client.rs      its MCP client (the run's token); context.rs, prompt.rs
//!   mock.rs        the scripted backend; sdk/ direct API loops (anthropic, openai)
//!                  with local tools (fs.rs confined to the agent's folder,
//!                  command.rs run_command), its own MCP servers (servers.rs),
//!                  its conversation across runs (conversation.rs) and what
//!                  arrives in its inbox mid-run, before each model call (arrivals.rs)
//!   cli/           one file per CLI backend (claude, codex, gemini, opencode, cursor);
//!                  workspace.rs: config files a CLI reads from a folder runs may share
//!   classify.rs    error classes from the words providers print
//!   sandbox.rs     the run's OS sandbox applied to the worker itself before any thread:
//!                  its own user namespace, rlimits, no_new_privs, the CLI's own
//!                  home (the user's HOME kept for finding the CLI), Landlock
//! --- agent-worker-mcp (crates/mcp/src/): stateless translation onto the kernel ---
//!   lib.rs         the tool table and the handler type; handler.rs the rmcp handler:
//!                  identity per request, tool visibility, dispatch, list pagination,
//!                  each request in a span (traced.rs: the client's `traceparent`
//!                  from `_meta` or the HTTP header continued)
//!   client_configs.rs what agent_join hands out: HTTP and stdio client configs
//!   resources/     resources and templates per identity (channel, status, board,
//!                  documents, agents, inboxes, branches, runs, backends); instance.rs reads an
//!                  instance's; templates.rs the templates
//!   subscriptions/ kernel events as resource updates, list changes and log messages;
//!                  budget.rs what one identity's subscriptions may hold (a listen
//!                  whose client went gives way); listen.rs one 2026-07-28 listen,
//!                  ended when its client cancels or goes
//!   prompts.rs     the lead's prompts (start-team, organise with the instance's
//!                  feedback, one per bundled example)
//!   tasks.rs       agent_ask and workflow_run as MCP tasks
//!   elicit.rs      approvals asked inline while the lead waits: elicitation requests
//!                  (2025-11-25); input_required.rs the same forms as `input_required`
//!                  and the retry that answers them (2026-07-28), its state sealed
//!   era.rs         which era of the protocol a request speaks, and what follows from it
//!   skills.rs      the Skills extension: each identity's skills as `skill://` resources
//!   complete.rs    completion of prompt arguments and template variables
//!   dashboard/     the team dashboard, an MCP App (io.modelcontextprotocol/ui): offered
//!                  only to a lead whose host declares the extension (mod.rs: the
//!                  ui:// page, built from crates/mcp/ui by scripts/ui-build and
//!                  embedded, its CSP, the tools that open it); view.rs what it shows
//!                  of an instance; board.rs its task board's cards, bounded; tool.rs
//!                  dashboard_open, which opens it under its own title, and
//!                  dashboard_watch, the app-only long poll
//!   jsonrpc.rs     framing checks both transports apply (-32700/-32600/-32602)
//!   schemas.rs     tool schemas made portable; unknown arguments refused
//!   stdio.rs       the stdio transport with those checks
//!   http/          axum app: bearer auth (401), Host/Origin checks, /mcp (mod.rs);
//!                  guard.rs per-request checks (and when a response is over),
//!                  sessions.rs ownership, parking,
//!                  expiry and caps, sse.rs priming by version, replay.rs resumable
//!                  events
//!   tools/         one file per tool group (contracts.rs: contracts, approvals and
//!                  a run's permission_request; delegation.rs: team_agent_*, an
//!                  agent's own agents; tasks.rs the task board's tools); shared
//!                  plumbing in tools/mod.rs,
//!                  params.rs arguments whose errors name the field
//! ```
//!
//! # Invariants
//!
//! - No source file is over 600 lines (`tests/tidy.rs`) and no function over 100,
//!   counted from its `fn` to its closing brace (`tests/tidy_functions.rs`, whose
//!   list of the few still over, each with its reason, only shrinks; clippy's
//!   `too_many_lines` counts their code lines). Rust code compares no state, status
//!   or backend word as a string (`==`, `!=`, a `match` arm, `matches!`) outside
//!   `domain::states` and `domain::backends`, whose enums are the one mapping to and
//!   from the store's text (`tests/tidy.rs`). The kernel's SQL still spells states
//!   as literals (`state = 'paused'`): each is held to an enum's words by the
//!   kernel's `sql_states.rs`, not written through the enum.
//! - Crates depend only on crates below them (the map above; `tests/tidy.rs` reads
//!   `cargo metadata`): `mcp -> kernel -> store -> domain`, the worker beside the
//!   kernel and knowing neither it nor the store. rmcp is named only by the MCP crate,
//!   the worker (its client) and the binary. Inside the kernel each room is a
//!   service holding only the rooms below it (registry < governance < messaging <
//!   context < runtime < tasks < workflows < hooks), so a room cannot call one above it: signals go
//!   up as events. No room's code names a room above it (`tests/tidy_rooms.rs`;
//!   `events`, `timing` and the kernel root's own items are shared below them all).
//!   No room names `Kernel`; `impl Kernel` is only in `facade/` (`tests/tidy.rs`).
//!   State is locked only by the methods of the room that owns it. The runtime is
//!   services of its own in the same way, with no cycle between its modules, and
//!   no type of the kernel has over 50 methods (`tests/tidy_runtime.rs`).
//! - One clock: every room reads the kernel's injected `timing::Clock` for what it
//!   decides and what it stamps; no kernel code reads the system's time otherwise
//!   (`tests/tidy_clock.rs`).
//! - Every write goes through a store writer thread; a caller is answered only
//!   after its transaction committed. A failing write changes nothing (savepoints,
//!   or a job that checks before it writes, whose failure after a write rolls its
//!   whole transaction back). On PostgreSQL every write transaction takes the
//!   database's global write lock first (exclusive, or shared for a write of one
//!   workflow instance) and then its instances' locks by ascending key, so the
//!   writes of one instance from every kernel (node) on it are in one order and no
//!   two transactions wait in a circle; the first writer's connection holds its
//!   node's lock: one kernel per node name.
//! - An agent with a worker is leased to one node, and only that node starts its
//!   runs: the write that records a run checks the lease and that no other run of
//!   the agent is in progress, and a run closed as lost by a takeover settles
//!   nothing when its worker ends. A lease moves only in a write transaction: a
//!   takeover that finds its node's heartbeat older than its lease (by the store's
//!   clock), or a workflow_run when no run of the agent is in progress.
//! - The kernel's SQL is written once, in what SQLite and PostgreSQL both accept
//!   (`ON CONFLICT`, `RETURNING`, `IS NOT DISTINCT FROM`, `CAST(sum(..) AS BIGINT)`);
//!   the two functions it borrows from SQLite (`instr`, `group_concat`) are defined
//!   in the PostgreSQL schema. Nothing outside the store crate names an engine
//!   (`tests/tidy.rs`).
//! - Identity is resolved per request (stdio = the lead; HTTP = the bearer token),
//!   never from a session or a handler instance: rmcp makes handlers per session or
//!   per request depending on the protocol version.
//! - A delivery row per recipient is written in the same transaction as its message,
//!   except that a message to every agent but its sender is one `broadcasts` row, and
//!   an agent's own row for it is written before anything reads or changes that
//!   agent's delivery states (`messaging/broadcast.rs`); counts of open deliveries
//!   add the unwritten broadcasts. Acks only move forward; a restart turns `seen`
//!   back into `pending`.
//! - Domain failures are tool results with `isError: true`; JSON-RPC errors are for
//!   protocol faults only.
//! - In a launch that serves MCP on stdio (the bridge's relay or `--foreground`),
//!   nothing writes to stdout except that transport. Launches that serve no stdio
//!   write only their own output there: `--help` and `--version` (decided before
//!   any transport runs; errors go to stderr), the worker's report lines (its
//!   control channel to the kernel), the readiness probe's one JSON line
//!   (`tests/tidy.rs` names the files that may write there).
//! - The kernel's own channel posts (proposal events) are written in the same
//!   transaction as the change they announce, from `system`; their leading @mentions
//!   are who must act.
//! - Document paths are checked by `DocPath` before any provider sees them; the file
//!   provider additionally keeps every access inside its folder (symlinks included).
//! - At most one run per agent. A run's token, its `runs` row and the deliveries it
//!   read are settled in one transaction when it ends: acked only on success. No
//!   process of a run outlives it (its process group is swept), and the kernel never
//!   passes its admin token to a worker. The worker reaches the kernel only over MCP.
//! - A run leaves nothing behind: a stopped worker (SIGTERM) still puts back the
//!   workspace config files it merged into (the last of the runs sharing a folder
//!   restores the original) and removes its scratch folder; the kernel removes the
//!   scratch folder again after a worker it had to kill.
//! - A CLI gets its prompt as one command-line argument: `worker::prompt` keeps it
//!   under Linux's 128 KiB, cutting messages rather than dropping any.
//! - Runs start from events, never from polling: a committed delivery publishes
//!   `Delivered`, the scheduler admits a run (or remembers the wake if the agent is
//!   running). Every start except agent_ask passes the scheduler's gate (paused,
//!   stopped workflow, empty inbox, a poll with nothing waiting, guards) and its
//!   worker limit. What must survive
//!   a restart (schedules, automatic resumes, pending deliveries) is in the store.
//! - Contracts never widen a permission profile: a tool request is asked of the
//!   profile first. Nothing a contract holds for approval happens before it is
//!   granted; an approval whose run ended is `lost`, never granted by default.
//! - A workflow run is done only after a quiet debounce and a fresh read of the
//!   store: no run, queue entry, retry or unread delivery of a live agent, no open
//!   binding proposal, no scheduled run owed (a schedule that only polls, with
//!   nothing waiting, owes none).

pub mod background;
pub mod bridge;
pub mod config;
pub mod server;

pub use domain::{
    clock, contracts, error, fsread, hooks, names, permissions, placement, trigger, workflow_yaml,
};
pub use os::{memory, process};
pub use {kernel, mcp, store, telemetry, worker};
