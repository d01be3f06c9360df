//! agent-worker: a multi-agent orchestration kernel that is itself an MCP server.
//!
//! # Map
//!
//! ```text
//! main.rs        launch flags only -> server::run
//! server.rs      process wiring: data dir lock, logging, stdio + HTTP listeners, kernel.json
//! bridge.rs      a second stdio launch relays to the running kernel over HTTP
//! config.rs      launch options, data dir and admin token resolution
//! names.rs       name rules and targets (alice@review:pr-1)
//! error.rs       the kernel's typed errors
//! fsread.rs      reading a file someone named: regular files only, size first, bounded
//! permissions/   permission profiles (pure): classes, allow/deny, decisions; backends.rs
//!                what each backend can express
//! process.rs     supervising a subprocess: process group, lossy lines, limits, kill + sweep
//! schedule.rs    `every` and `cron` triggers (pure: parsing, next fire)
//! workflow/      workflow YAML (pure): parsing with positions, params, `${{ }}`, setup steps
//! kernel/        the single source of truth (one per data dir)
//!   store.rs       SQLite: one writer thread with group commit, fixed reader threads
//!   schema.rs      numbered migrations (PRAGMA user_version)
//!   registry.rs    workflow instances and agents
//!   tokens.rs      admin and agent tokens (hash only), authentication
//!   mentions.rs    mention parsing, the addressed rule, priority (pure)
//!   messaging.rs   channel_send / channel_read, the send guard, long lead messages
//!   inbox.rs       deliveries: pending -> seen -> acked | deferred
//!   resources.rs   content-addressed blobs (resource_create / resource_read)
//!   documents/     shared documents: the rules (mod.rs), path rules (path.rs),
//!                  per-instance settings (settings.rs), providers file.rs / sqlite.rs
//!   proposals/     proposals and votes (mod.rs), resolution rules (tally.rs, pure),
//!                  the expiry timer
//!   team.rs        member status and the member list
//!   events.rs      post-commit events (wakes) for subscribers
//!   workers.rs     the process manager: one worker subprocess per run, wake-while-running
//!   runs.rs        run records; `finish_tx` settles a run (token, deliveries, state)
//!   ask.rs         agent_ask: the DM, the run, the reply
//!   scheduler.rs   when agents run: wakes on delivery, the queue and worker limit,
//!                  retries, automatic pauses, the timers
//!   schedules.rs   per-agent `every`/`cron` schedules (schedule_set / schedule_clear)
//!   guards.rs      budgets: runs per hour, hops, tokens, cost
//!   workflows/     workflow runs: start (run.rs), status, completion, stop, list
//! worker/        the worker mode (`agent-worker __worker`, started by the kernel per run)
//!   protocol.rs    kernel <-> worker control channel: RunConfig in, Report lines out
//!   client.rs      its MCP client (the run's token); context.rs, prompt.rs
//!   mock.rs        the scripted backend; sdk/ direct API loops (anthropic, openai)
//!   cli/           one file per CLI backend (claude, codex, gemini, opencode, cursor);
//!                  workspace.rs: config files a CLI reads from a folder runs may share
//!   classify.rs    error classes from the words providers print
//! mcp/           the MCP interface: stateless translation onto the kernel
//!   mod.rs         the rmcp handler: identity per request, tool visibility, dispatch
//!   http.rs        axum app: bearer auth (401), Host/Origin checks, /mcp
//!   tools/         one file per tool group; shared plumbing in tools/mod.rs
//! ```
//!
//! # Invariants
//!
//! - Dependencies flow one way: `mcp -> kernel -> store`. Nothing in `kernel` knows MCP.
//! - Every write goes through the store's writer thread; a caller is answered only
//!   after its transaction committed. A failing write changes nothing (savepoints).
//! - Identity is resolved per request (stdio = the lead; HTTP = the bearer token),
//!   never from a session or a handler instance: rmcp makes handlers per session or
//!   per request depending on the protocol version.
//! - A delivery row per recipient is written in the same transaction as its message;
//!   acks only move forward; a restart turns `seen` back into `pending`.
//! - Domain failures are tool results with `isError: true`; JSON-RPC errors are for
//!   protocol faults only.
//! - Nothing writes to stdout except the stdio transport.
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
//!   stopped workflow, empty inbox, guards) and its worker limit. What must survive
//!   a restart (schedules, automatic resumes, pending deliveries) is in the store.
//! - A workflow run is done only after a quiet debounce and a fresh read of the
//!   store: no run, queue entry, retry or unread delivery of a live agent, no open
//!   binding proposal, no scheduled run owed.

pub mod bridge;
pub mod config;
pub mod error;
pub mod fsread;
pub mod kernel;
pub mod mcp;
pub mod names;
pub mod permissions;
pub mod process;
pub mod schedule;
pub mod server;
pub mod worker;
pub mod workflow;
