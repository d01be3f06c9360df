//! The schema as numbered migrations, applied in order and recorded in
//! `PRAGMA user_version`. Columns may be added by later migrations; the meaning of an
//! existing column never changes.

/// Migration `i` brings the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: the foundation.
    r#"
CREATE TABLE kernel_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- A workflow instance is (name, tag). `@global:main` always exists.
CREATE TABLE workflows (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    tag        TEXT NOT NULL,
    yaml       TEXT,
    params     TEXT NOT NULL DEFAULT '{}',
    state      TEXT NOT NULL DEFAULT 'active',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (name, tag)
);
INSERT INTO workflows (name, tag, state, created_at, updated_at) VALUES ('global', 'main', 'active', 0, 0);

CREATE TABLE agents (
    id          INTEGER PRIMARY KEY,
    workflow_id INTEGER NOT NULL REFERENCES workflows(id),
    -- NOCASE: @Alice and @alice must mean one agent, so names are unique ignoring case.
    name        TEXT NOT NULL COLLATE NOCASE,
    backend     TEXT NOT NULL,
    model       TEXT,
    system      TEXT,
    cwd         TEXT,
    env         TEXT NOT NULL DEFAULT '{}',
    config      TEXT NOT NULL DEFAULT '{}',
    state       TEXT NOT NULL DEFAULT 'idle',
    created_at  INTEGER NOT NULL,
    UNIQUE (workflow_id, name)
);

-- Self-reported status of a member (an agent or the lead) in a workflow instance.
CREATE TABLE member_status (
    workflow_id INTEGER NOT NULL,
    member      TEXT NOT NULL COLLATE NOCASE,
    state       TEXT NOT NULL DEFAULT 'idle',
    task        TEXT,
    note        TEXT,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, member)
) WITHOUT ROWID;

-- id is a UUIDv7: sorts by time, created by the single writer so never out of order.
CREATE TABLE messages (
    workflow_id INTEGER NOT NULL,
    id          TEXT NOT NULL,
    sender      TEXT NOT NULL,
    content     TEXT NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'message',
    to_member   TEXT,
    mentions    TEXT NOT NULL DEFAULT '[]',
    priority    TEXT NOT NULL DEFAULT 'normal',
    created_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX messages_by_workflow ON messages (workflow_id, id);

-- One row per recipient, written at send time. state: pending | seen | acked | deferred.
CREATE TABLE deliveries (
    workflow_id INTEGER NOT NULL,
    recipient   TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    defer_until INTEGER,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, recipient, message_id)
) WITHOUT ROWID;
-- The inbox is a range scan over this partial index: acked rows drop out of it, so
-- inbox cost does not grow with the channel's history. It covers state and
-- defer_until so inbox counts never touch the table.
CREATE INDEX deliveries_open ON deliveries (workflow_id, recipient, message_id, state, defer_until) WHERE state <> 'acked';

-- Where each reader last read the channel (the send guard compares against it).
CREATE TABLE read_cursors (
    workflow_id INTEGER NOT NULL,
    reader      TEXT NOT NULL,
    last_read   TEXT NOT NULL,
    PRIMARY KEY (workflow_id, reader)
) WITHOUT ROWID;

-- Content-addressed blobs (id = content hash). The lead's long messages live here.
CREATE TABLE resources (
    id         TEXT PRIMARY KEY,
    type       TEXT NOT NULL,
    content    TEXT NOT NULL,
    size       INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- Agent tokens: only a SHA-256 of the secret is stored.
CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    agent_id   INTEGER NOT NULL,
    purpose    TEXT NOT NULL,
    run_id     TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX tokens_by_agent ON tokens (agent_id);
"#,
    // 2: team context: document settings per instance, the sqlite document provider,
    // proposals and votes.
    r#"
ALTER TABLE workflows ADD COLUMN doc_provider TEXT NOT NULL DEFAULT 'file';
-- A directory the instance binds for its documents (file provider); NULL = the default
-- `<data-dir>/workflows/<name>/<tag>/documents`.
ALTER TABLE workflows ADD COLUMN doc_dir TEXT;
ALTER TABLE workflows ADD COLUMN document_owner TEXT;

-- Documents of instances that use the sqlite provider. version = content hash.
CREATE TABLE documents (
    workflow_id INTEGER NOT NULL,
    path        TEXT NOT NULL,
    content     TEXT NOT NULL,
    version     TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT NOT NULL,
    PRIMARY KEY (workflow_id, path)
) WITHOUT ROWID;

-- Proposals are numbered per instance (prop-1, prop-2, ...). options: JSON [{id, label}].
-- status: open | resolved | expired | cancelled.
CREATE TABLE proposals (
    workflow_id INTEGER NOT NULL,
    num         INTEGER NOT NULL,
    type        TEXT NOT NULL,
    title       TEXT NOT NULL,
    description TEXT,
    options     TEXT NOT NULL,
    resolution  TEXT NOT NULL,
    quorum      INTEGER NOT NULL,
    tie_breaker TEXT NOT NULL,
    binding     INTEGER NOT NULL,
    creator     TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'open',
    winner      TEXT,
    closed_by   TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    closed_at   INTEGER,
    PRIMARY KEY (workflow_id, num)
);
-- The expiry timer looks only at open proposals.
CREATE INDEX proposals_open ON proposals (expires_at) WHERE status = 'open';

-- One vote per member per proposal; a revote replaces it.
CREATE TABLE votes (
    workflow_id INTEGER NOT NULL,
    num         INTEGER NOT NULL,
    voter       TEXT NOT NULL COLLATE NOCASE,
    choice      TEXT NOT NULL,
    reason      TEXT,
    voted_at    INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, num, voter)
) WITHOUT ROWID;
"#,
    // 3: workers: one row per worker run, and the backend conversation to resume.
    r#"
-- status: running | succeeded | failed | stopped | lost. error_class: see
-- worker::protocol::ErrorClass. pid + pid_start identify the process across restarts.
CREATE TABLE runs (
    id            TEXT PRIMARY KEY,
    agent_id      INTEGER NOT NULL,
    workflow_id   INTEGER NOT NULL,
    agent         TEXT NOT NULL,
    backend       TEXT NOT NULL,
    trigger       TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'running',
    pid           INTEGER,
    pid_start     INTEGER,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    exit_code     INTEGER,
    signal        INTEGER,
    error_class   TEXT,
    error         TEXT,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL,
    final_text    TEXT,
    stderr_tail   TEXT
);
CREATE INDEX runs_by_agent ON runs (agent_id, started_at);
CREATE INDEX runs_running ON runs (status) WHERE status = 'running';
ALTER TABLE agents ADD COLUMN session_id TEXT;
"#,
    // 4: scheduling: schedules, pauses with a reason and an automatic resume, the hop
    // counter, workflow runs (status, reason, budget, where the YAML came from).
    r#"
-- One schedule per agent. kind: every | cron. seen_upto: the newest channel message
-- when it last fired (a fire is still owed while others posted after it).
CREATE TABLE schedules (
    agent_id   INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    spec       TEXT NOT NULL,
    prompt     TEXT,
    next_at    INTEGER,
    seen_upto  TEXT,
    created_at INTEGER NOT NULL
);
-- Why an agent is paused or failed, when it resumes by itself (auth and quota
-- pauses), and how many automatic pauses in a row (the resume backoff).
ALTER TABLE agents ADD COLUMN state_reason TEXT;
ALTER TABLE agents ADD COLUMN resume_at INTEGER;
ALTER TABLE agents ADD COLUMN pauses INTEGER NOT NULL DEFAULT 0;
-- Agent-to-agent messages since the lead last posted (the hop guard).
ALTER TABLE workflows ADD COLUMN hops INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN budget TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workflows ADD COLUMN reason TEXT;
ALTER TABLE workflows ADD COLUMN source TEXT;
ALTER TABLE workflows ADD COLUMN started_at INTEGER;
ALTER TABLE workflows ADD COLUMN ended_at INTEGER;
-- Workflow-wide budgets and status sum a workflow's runs.
CREATE INDEX runs_by_workflow ON runs (workflow_id);
"#,
    // 5: the usage a CLI counts for its whole conversation (Codex) at the end of the
    // agent's last run, so a resumed run records only its own.
    r#"
ALTER TABLE agents ADD COLUMN session_usage TEXT;
"#,
    // 6: agent ids are never reused. Without AUTOINCREMENT SQLite hands a deleted
    // agent's id (the largest) to the next agent, which then inherited its runs,
    // tokens and budget counts (runs, tokens and schedules are keyed by agent_id and
    // outlive the agent). The sequence starts past every id any table still names.
    // Workflow instances are never deleted, so their ids need no such care.
    r#"
CREATE TABLE agents_v6 (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_id   INTEGER NOT NULL REFERENCES workflows(id),
    name          TEXT NOT NULL COLLATE NOCASE,
    backend       TEXT NOT NULL,
    model         TEXT,
    system        TEXT,
    cwd           TEXT,
    env           TEXT NOT NULL DEFAULT '{}',
    config        TEXT NOT NULL DEFAULT '{}',
    state         TEXT NOT NULL DEFAULT 'idle',
    created_at    INTEGER NOT NULL,
    session_id    TEXT,
    state_reason  TEXT,
    resume_at     INTEGER,
    pauses        INTEGER NOT NULL DEFAULT 0,
    session_usage TEXT,
    UNIQUE (workflow_id, name)
);
INSERT INTO agents_v6 (id, workflow_id, name, backend, model, system, cwd, env, config, state, created_at,
                       session_id, state_reason, resume_at, pauses, session_usage)
    SELECT id, workflow_id, name, backend, model, system, cwd, env, config, state, created_at,
           session_id, state_reason, resume_at, pauses, session_usage FROM agents;
DROP TABLE agents;
ALTER TABLE agents_v6 RENAME TO agents;
DELETE FROM sqlite_sequence WHERE name IN ('agents', 'agents_v6');
INSERT INTO sqlite_sequence (name, seq) VALUES ('agents', (SELECT MAX(m) FROM (
    SELECT COALESCE(MAX(id), 0) AS m FROM agents
    UNION ALL SELECT COALESCE(MAX(agent_id), 0) FROM runs
    UNION ALL SELECT COALESCE(MAX(agent_id), 0) FROM tokens
    UNION ALL SELECT COALESCE(MAX(agent_id), 0) FROM schedules)));
"#,
    // 7: which worker run last read a delivery, so agent_ask knows which run answers
    // its question (a run that starts before the question may still read it).
    r#"
ALTER TABLE deliveries ADD COLUMN read_by TEXT;
"#,
    // 8: what a run's permissions refused (JSON [{tool, detail, reason}]).
    r#"
ALTER TABLE runs ADD COLUMN denials TEXT;
"#,
    // 9: deferred deliveries by agent, so re-arming their timers at start (or after
    // missed events) reads only them, not every open delivery.
    r#"
CREATE INDEX deliveries_deferred ON deliveries (workflow_id, recipient, defer_until) WHERE state = 'deferred';
"#,
    // 10: what a run was started with, in a line (its prompt, or the messages waiting).
    r#"
ALTER TABLE runs ADD COLUMN prompt_summary TEXT;
"#,
    // 11: contracts (rules the kernel applies), what they decided, and approvals.
    r#"
CREATE TABLE contracts (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    name              TEXT NOT NULL,
    -- NULL: the lead's (its `workflow` field says where it applies); else the
    -- instance whose workflow YAML declared it.
    owner_workflow_id INTEGER REFERENCES workflows(id),
    spec              TEXT NOT NULL,
    source            TEXT NOT NULL,
    created_at        INTEGER NOT NULL
);
CREATE UNIQUE INDEX contracts_by_name ON contracts (COALESCE(owner_workflow_id, 0), name);

CREATE TABLE contract_decisions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    workflow_id INTEGER NOT NULL,
    agent       TEXT NOT NULL,
    event       TEXT NOT NULL,
    detail      TEXT NOT NULL,
    contracts   TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    approval_id INTEGER,
    decided_by  TEXT,
    reason      TEXT
);
CREATE INDEX decisions_by_workflow ON contract_decisions (workflow_id, id);

CREATE TABLE approvals (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_id INTEGER NOT NULL,
    agent_id    INTEGER NOT NULL,
    agent       TEXT NOT NULL,
    run_id      TEXT,
    event       TEXT NOT NULL,
    detail      TEXT NOT NULL,
    contracts   TEXT NOT NULL,
    approvers   TEXT NOT NULL,
    needed      INTEGER NOT NULL,
    votes       TEXT NOT NULL DEFAULT '[]',
    on_timeout  TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    reason      TEXT,
    decided_by  TEXT,
    created_at  INTEGER NOT NULL,
    deadline    INTEGER NOT NULL,
    decided_at  INTEGER
);
CREATE INDEX approvals_open ON approvals (deadline) WHERE state = 'pending';
CREATE INDEX approvals_by_workflow ON approvals (workflow_id, id);

-- A contract an agent drafted: an approval proposal the lead's approve installs.
ALTER TABLE proposals ADD COLUMN contract TEXT;
"#,
    // 12: acked deliveries move to their own table. `deliveries` then holds only open
    // ones (pending, seen, deferred), so its primary key serves the inbox and the
    // partial index that duplicated every open row (deliveries_open) goes: a
    // delivery costs one b-tree entry at send time instead of two, which is what an
    // `@all` to hundreds of agents is made of.
    r#"
CREATE TABLE deliveries_done (
    workflow_id INTEGER NOT NULL,
    recipient   TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    read_by     TEXT,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, recipient, message_id)
) WITHOUT ROWID;
INSERT INTO deliveries_done (workflow_id, recipient, message_id, read_by, updated_at)
    SELECT workflow_id, recipient, message_id, read_by, updated_at FROM deliveries WHERE state = 'acked';
DELETE FROM deliveries WHERE state = 'acked';
DROP INDEX deliveries_open;
"#,
    // 13: broadcasts. A message to every agent of an instance but its sender is one
    // row here instead of a delivery row per agent (see messaging/broadcast.rs); an
    // agent's own row is written when its inbox changes state. `broadcast_mark` is
    // the newest broadcast an agent has as a row, or that came before it joined: the
    // trigger sets it when an agent is created, so broadcasts sent before an agent
    // existed are never its.
    r#"
CREATE TABLE broadcasts (
    workflow_id INTEGER NOT NULL,
    message_id  TEXT NOT NULL,
    sender      TEXT NOT NULL,
    PRIMARY KEY (workflow_id, message_id)
) WITHOUT ROWID;
ALTER TABLE agents ADD COLUMN broadcast_mark TEXT NOT NULL DEFAULT '';
CREATE TRIGGER agents_broadcast_mark AFTER INSERT ON agents BEGIN
    UPDATE agents SET broadcast_mark =
        COALESCE((SELECT max(message_id) FROM broadcasts WHERE workflow_id = NEW.workflow_id), '')
     WHERE id = NEW.id;
END;
"#,
    // 14: nodes (see runtime/nodes/). Each kernel registers under its name with a
    // heartbeat (by the database's clock) and its lease; an agent's `node` is the one
    // that runs it (NULL for agents without a worker, and until a kernel takes it
    // over).
    r#"
CREATE TABLE nodes (
    name         TEXT PRIMARY KEY,
    url          TEXT,
    pid          INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    lease_ms     INTEGER NOT NULL
);
ALTER TABLE agents ADD COLUMN node TEXT;
CREATE INDEX agents_by_node ON agents (node);
"#,
    // 15: the commit of what a run left in its agent's worktree (workspace: worktree).
    r#"
ALTER TABLE runs ADD COLUMN commit_sha TEXT;
"#,
    // 16: what an approval without a run holds, done once it is approved (a merge, as JSON).
    r#"
ALTER TABLE approvals ADD COLUMN held TEXT;
"#,
    // 17: the trace a run's spans are in, when traces are exported.
    r#"
ALTER TABLE runs ADD COLUMN trace_id TEXT;
"#,
    // 18: placement by labels: what a node offers (`--labels`) and what an agent
    // needs, each as ",a,b," (sorted, no duplicates; "" for none).
    r#"
ALTER TABLE nodes ADD COLUMN labels TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN labels TEXT NOT NULL DEFAULT '';
"#,
    // 19: what each contract with a rate let through, per agent (`at` in ms);
    // rows older than the contract's window are deleted as new ones come.
    r#"
CREATE TABLE contract_hits (
    workflow_id INTEGER NOT NULL,
    contract    TEXT NOT NULL,
    agent       TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX contract_hits_by_agent ON contract_hits (workflow_id, contract, agent, at);
"#,
    // 20: a vote of the members (require_votes): the share an approval needs ("2/3"),
    // and the proposal they vote on, which names its approval.
    r#"
ALTER TABLE approvals ADD COLUMN vote TEXT;
ALTER TABLE proposals ADD COLUMN approval_id INTEGER;
"#,
    // 21: step workflows: the text an instance's steps start from, the values its
    // prompts are filled in with when they run (params, setup outputs), and each step's
    // state (its definition is its contract); `seen` lists the indexes of its
    // message and document events that happened (",0,2,").
    r#"
ALTER TABLE workflows ADD COLUMN trigger_text TEXT;
ALTER TABLE workflows ADD COLUMN step_vars TEXT;
CREATE TABLE steps (
    workflow_id INTEGER NOT NULL,
    step        TEXT NOT NULL,
    position    INTEGER NOT NULL,
    state       TEXT NOT NULL DEFAULT 'waiting',
    seen        TEXT NOT NULL DEFAULT ',',
    message_id  TEXT,
    run_id      TEXT,
    reason      TEXT,
    started_at  INTEGER,
    ended_at    INTEGER,
    PRIMARY KEY (workflow_id, step)
);
"#,
    // 22: organisations: a name, members with a role, the instance that holds its
    // channel and documents (`workflow_id`); the organisation an instance runs
    // within (NULL: @global). A lead contract bound to one says so in its spec.
    r#"
CREATE TABLE orgs (
    name        TEXT PRIMARY KEY COLLATE NOCASE,
    description TEXT,
    workflow_id INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE TABLE org_members (
    org     TEXT NOT NULL COLLATE NOCASE,
    member  TEXT NOT NULL COLLATE NOCASE,
    role    TEXT,
    kind    TEXT NOT NULL,
    PRIMARY KEY (org, member)
);
ALTER TABLE workflows ADD COLUMN org TEXT COLLATE NOCASE;
"#,
    // 23: feedback, what an agent (or the lead) told about its tools and skills
    // (seed 000's feedback tool), per instance: `kind` is missing, friction or
    // suggestion, `about` the tool or skill; an instance keeps its newest 500.
    r#"
CREATE TABLE feedback (
    id          INTEGER PRIMARY KEY,
    workflow_id INTEGER NOT NULL,
    member      TEXT NOT NULL COLLATE NOCASE,
    kind        TEXT NOT NULL,
    about       TEXT NOT NULL,
    text        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX feedback_by_instance ON feedback (workflow_id, id);
"#,
    // 24: results with a shape: the schema an ask or a step's prompt (`message_id`)
    // gave its agent, and the result the agent submitted that fits it (JSON; NULL
    // while none was), with the run that submitted it.
    r#"
CREATE TABLE results (
    workflow_id  INTEGER NOT NULL,
    message_id   TEXT NOT NULL,
    agent        TEXT NOT NULL COLLATE NOCASE,
    step         TEXT,
    schema       TEXT NOT NULL,
    result       TEXT,
    run_id       TEXT,
    created_at   INTEGER NOT NULL,
    submitted_at INTEGER,
    PRIMARY KEY (workflow_id, message_id)
);
CREATE INDEX results_open ON results (workflow_id, agent) WHERE result IS NULL;
"#,
    // 25: delegation: the agent that made an agent (NULL: the lead or a workflow);
    // a sub-agent belongs to it (paused and deleted with it, spending from its budget).
    // What its deleted sub-agents (and theirs) spent stays counted in `gone_*`.
    r#"
ALTER TABLE agents ADD COLUMN parent_id INTEGER;
CREATE INDEX agents_by_parent ON agents (parent_id);
ALTER TABLE agents ADD COLUMN gone_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN gone_usd REAL NOT NULL DEFAULT 0;
"#,
    // 26: the task board: tasks of an instance with their state, owner (and the
    // run that claimed it, `run_id`), who may take them (`assign`: NULL any, a
    // name, or `role:<role>`), labels and links (JSON lists), an optional result
    // schema and the result (JSON text), and the approval a held transition waits
    // for (`approval_id`, what it would do in `held`); their dependencies
    // (`task_deps`: `task_id` waits for `dep_id` to be done) and their history.
    r#"
CREATE TABLE tasks (
    id            INTEGER PRIMARY KEY,
    workflow_id   INTEGER NOT NULL,
    title         TEXT NOT NULL,
    body          TEXT,
    state         TEXT NOT NULL DEFAULT 'open',
    owner         TEXT COLLATE NOCASE,
    run_id        TEXT,
    labels        TEXT NOT NULL DEFAULT '[]',
    priority      INTEGER NOT NULL DEFAULT 0,
    assign        TEXT COLLATE NOCASE,
    result_schema TEXT,
    result        TEXT,
    links         TEXT NOT NULL DEFAULT '[]',
    approval_id   INTEGER,
    held          TEXT,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX tasks_by_instance ON tasks (workflow_id, state);
CREATE TABLE task_deps (
    task_id INTEGER NOT NULL,
    dep_id  INTEGER NOT NULL,
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX task_deps_by_dep ON task_deps (dep_id);
CREATE TABLE task_history (
    id      INTEGER PRIMARY KEY,
    task_id INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    who     TEXT NOT NULL,
    what    TEXT NOT NULL,
    why     TEXT
);
CREATE INDEX task_history_by_task ON task_history (task_id, id);
"#,
    // 27: hooks, the events from outside a lead declared (`POST /hooks/{name}`):
    // the secret their senders sign with (never shown), what a delivery does
    // (`action`, JSON) and a per-minute rate; their deliveries, one per sender's
    // delivery id (a retry finds its row and starts nothing), with what came of it;
    // one a contract holds keeps its payload until its approval closes.
    r#"
CREATE TABLE hooks (
    name       TEXT PRIMARY KEY COLLATE NOCASE,
    secret     TEXT NOT NULL,
    action     TEXT NOT NULL,
    rate       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE hook_deliveries (
    id          INTEGER PRIMARY KEY,
    hook        TEXT NOT NULL COLLATE NOCASE,
    delivery    TEXT NOT NULL,
    event       TEXT,
    received_at INTEGER NOT NULL,
    outcome     TEXT NOT NULL,
    detail      TEXT,
    payload     TEXT,
    approval_id INTEGER,
    UNIQUE (hook, delivery)
);
CREATE INDEX hook_deliveries_by_time ON hook_deliveries (received_at);
"#,
    // 28: every signature a hook took (the MAC, hex), kept for good: a signed request sent again
    // under a new delivery id is a replay (GitHub's form signs no time: no horizon to prune below).
    r#"
CREATE TABLE hook_macs (
    mac         TEXT PRIMARY KEY,
    hook        TEXT NOT NULL,
    received_at INTEGER NOT NULL
);
"#,
    "ALTER TABLE hooks ADD COLUMN owner INTEGER;", // 29: the declaring instance; NULL: the lead
    "ALTER TABLE hook_deliveries ADD COLUMN node TEXT;", // 30: the node acting on a delivery
];
