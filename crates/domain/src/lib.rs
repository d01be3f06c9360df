//! The domain of agent-worker: what the kernel, its workers and its MCP interface
//! all speak, and nothing that runs. Pure: no store, no subprocess, no MCP, no
//! network; reading a file someone named (`fsread`) and the system clock (`clock`)
//! are the only contact with the world.
//!
//! - `names`: name rules and targets (`alice@review:pr-1`)
//! - `error`: the kernel's typed errors, each written for the caller
//! - `feedback`: what a member reports about its tools and skills, checked
//! - `clock`: time (now, formats, bounded durations)
//! - `backends`: the worker backends an agent may name
//! - `guards`: budgets and an agent's limits
//! - `definition`: the sizes an agent's definition may carry (env, mock rules, its
//!   MCP servers), bounded where it is set so that every agent accepted can start
//! - `delegate`: what an agent's definition may allow it (agents of its own), and
//!   a sub-agent's definition held within its parent's
//! - `protocol`: the kernel <-> worker control channel (RunConfig in, Report lines
//!   out) and the readiness probe's report
//! - `contracts`: parsing whose errors name the field, matching an event,
//!   precedence, one English sentence each
//! - `permissions`: permission profiles, each backend's terms for them, and what a
//!   command line runs (`permissions::shell`)
//! - `trigger`: `every` and `cron` triggers: parsing, the next fire
//! - `states`: the states things are in and why a run starts, as enums, each with
//!   the one mapping to and from the store's text
//! - `result_schema`: results with a shape: a JSON Schema subset, parsed with errors
//!   naming the keyword and the place, and the check of a result naming each misfit
//! - `workflow_yaml`: workflow YAML: parsing with positions, params, `${{ }}`
//! - `hooks`: events from outside: signatures (HMAC-SHA256), the replay window,
//!   a payload's depth, what a hook does and the values it picks by `$.` paths
//! - `fsread`: reading a file someone named: regular files only, size first, bounded
//! - `placement`: which node runs an agent: by name or by labels
//! - `workspace`: where an agent's runs work: a shared folder or a git worktree of
//!   its own, and the branch names that go with it

pub mod backends;
pub mod clock;
pub mod contracts;
pub mod definition;
pub mod delegate;
pub mod error;
pub mod feedback;
pub mod fsread;
pub mod guards;
pub mod hooks;
pub mod mounts;
pub mod names;
pub mod permissions;
pub mod placement;
pub mod protocol;
pub mod redact;
pub mod result_schema;
pub mod sandbox;
pub mod skills;
pub mod states;
pub mod steps;
pub mod trigger;
pub mod workflow_yaml;
pub mod workspace;
