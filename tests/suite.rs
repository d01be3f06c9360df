//! The integration suite, one test binary: every file beside this one is a module
//! of it (`cargo test --test suite NAME` runs one file's tests, or nextest's
//! `-E 'test(/^NAME::/)'`). One binary instead of one per file: each links the
//! whole kernel, and sixty of them took 4 GB of disk, more than a CI machine had.
//! The one other, `sqlite_allocator`, must own its process (see there).

mod common;

mod agent_config;
mod asks;
mod background;
mod board;
mod branches;
mod bridge;
mod broadcasts;
mod cli;
mod command_rules;
mod conformance;
mod contract_rules;
mod contracts;
mod dashboard;
mod dashboard_board;
mod documents;
mod fanout_memory;
mod feedback;
mod fuzz;
mod hostile_input;
mod http_auth;
mod http_protocol;
mod http_sessions;
mod inspector;
mod inspector_calls;
mod inspector_listens;
mod inspector_web;
mod interop;
mod interop_board;
mod interop_contracts;
mod interop_permissions;
mod interop_skills;
mod interop_worktrees;
mod lead_stdio;
mod listens;
mod messaging;
mod node_labels;
mod nodes;
mod organisations;
mod partition;
mod polls;
mod process;
mod proposals;
mod python_elicit;
mod python_sdk;
mod resources;
mod restart;
mod scheduling;
mod sdk;
mod seeds;
mod send_guard;
mod skills;
mod step_workflows;
mod subscriptions;
mod tasks;
mod tidy;
mod tidy_clock;
mod tidy_functions;
mod tidy_map;
mod tidy_rooms;
mod tidy_runtime;
mod tidy_sleeps;
mod tidy_tables;
mod tool_args;
mod tool_lists;
mod tool_schemas;
mod traces;
mod waiting;
mod workers;
mod workflows;
mod worktrees;
