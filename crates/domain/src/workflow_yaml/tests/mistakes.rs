//! The table of YAML mistakes: (YAML, where the error must point, what it must say).

/// Each mistake, where it must be reported (`line:column`) and a piece of the message.
pub(super) const MISTAKES: &[(&str, &str, &str)] = &[
    // Syntax.
    (
        "name: x\nagents:\n\ta: { backend: mock }\n",
        "3:1",
        "tab character",
    ),
    (
        "agents:\n  a: { backend: mock }\nkickoff: \"hello\n",
        "3:10",
        "quoted scalar",
    ),
    (
        "agents:\n  a:\n    backend: mock\n   model: x\n",
        "4:4",
        "did not find expected key",
    ),
    (
        "agents:\n  a: { backend: mock }\n  a: { backend: sdk }\n",
        "3:3",
        "duplicate key `a` (first at line 2)",
    ),
    (
        "agents:\n  a: { backend: mock }\n---\nname: y\n",
        "3:1",
        "more than one document",
    ),
    ("agents:\n  a: !custom { backend: mock }\n", "2:6", "tags"),
    // Top level.
    (
        "name: x\nagents:\n  a: { backend: mock }\nkickof: hi\n",
        "4:1",
        "unknown key `kickof` in the workflow; did you mean \"kickoff\"?",
    ),
    ("# no agents\nname: x\nkickoff: hi\n", "2:1", "no `agents`"),
    ("name: x\nagents:\n", "2:1", "`agents` has no agents"),
    ("agents: {}\n", "1:1", "`agents` has no agents"),
    (
        "agents:\n  - backend: mock\n",
        "2:3",
        "must be a mapping of agent names",
    ),
    (
        "name: my workflow\nagents:\n  a: { backend: mock }\n",
        "1:7",
        "invalid workflow name",
    ),
    ("", "1:1", "the workflow is empty"),
    // Agents.
    (
        "agents:\n  2bad: { backend: mock }\n",
        "2:3",
        "invalid agent name",
    ),
    ("agents:\n  user: { backend: mock }\n", "2:3", "reserved"),
    (
        "agents:\n  a:\n    backend: mock\n    colour: blue\n",
        "4:5",
        "unknown key `colour` in agent `a`",
    ),
    (
        "name: x\nagents:\n  a:\n    backend: mokc\n",
        "4:14",
        "unknown backend `mokc`; did you mean \"mock\"?",
    ),
    (
        "agents:\n  a:\n    backend: [mock]\n",
        "3:14",
        "expected text, found a list",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    wakeup: 30s\n    schedule: 1m\n",
        "5:5",
        "both wakeup and schedule are given",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    permissions: admin\n",
        "4:18",
        "unknown permission profile \"admin\"",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    permissions: { profile: edit, allow: [teleport] }\n",
        "4:18",
        "unknown tool class \"teleport\"",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    permissions:\n      profile: edit\n      colour: red\n",
        "6:7",
        "unknown key `colour`",
    ),
    (
        "agents:\n  a:\n    backend: codex\n    permissions: { profile: edit, allow: [\"shell:make*\"] }\n",
        "4:5",
        "the codex backend cannot express allow shell:make*",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    permissions: { profile: read, deny: [\"mcp:tracker\"] }\n",
        "4:5",
        "names no server of this agent's mcp_servers",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    mcp_servers: { team: { command: x } }\n",
        "4:20",
        "team",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    mcp_servers:\n      t:\n        url: ftp://x\n",
        "5:7",
        "http",
    ),
    (
        "agents:\n  a:\n    backend: sdk\n    mcp_servers:\n      t:\n        command: x\n        colour: 1\n",
        "7:9",
        "unknown key `colour`",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    mcp_servers: { t: { command: x } }\n",
        "4:5",
        "a mock agent has no backend to give them to",
    ),
    ("agents:\n  a:\n", "2:3", "agent `a` has no settings"),
    (
        "name: x\nagents:\n  a:\n    backend: mock\n    wakeup: often\n",
        "5:13",
        "wakeup \"often\" is neither an interval",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    wakeup: 500ms\n",
        "4:13",
        "shorter than 1s",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    wakeup: \"0 9 * *\"\n",
        "4:13",
        "has 4 fields",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    wakeup_prompt: go\n",
        "4:5",
        "wakeup_prompt needs wakeup",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    system_prompt: prompts/missing.md\n",
        "4:20",
        "cannot read the system prompt file",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    mock:\n      - when: \"(\"\n        send: hi\n",
        "5:15",
        "`when` is not a valid regex",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    mock:\n      - send: hi\n      - sned: hi\n",
        "6:9",
        "unknown key `sned`; did you mean \"send\"?",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    mock:\n      - times: 2\n",
        "5:9",
        "does nothing",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    mock:\n      - send: \"${{ nope }}\"\n",
        "5:16",
        "unknown name `nope`",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    env: { AW_TOKEN: x }\n",
        "4:12",
        "reserved",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    env: { 1X: x }\n",
        "4:12",
        "invalid environment variable name",
    ),
    (
        "agents:\n  a:\n    backend: claude\n    provider: anthropic\n",
        "4:5",
        "`provider` is not supported",
    ),
    (
        "agents:\n  a:\n    ref: ./a.yaml\n",
        "3:5",
        "must be defined inline",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    budget: { max_hops: 0 }\n",
        "4:25",
        "max_hops must be at least 1",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    max_steps: 501\n",
        "4:16",
        "from 1 to 500",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    timeout: soon\n",
        "4:14",
        "cannot read the duration",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    max_tokens: -1\n",
        "4:17",
        "max_tokens",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    cwd: ./${{ nope }}\n",
        "4:12",
        "nope",
    ),
    // Context.
    (
        "agents:\n  a: { backend: mock }\ncontext: false\n",
        "3:10",
        "cannot be disabled",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext: { documents: file, document_owner: bob }\n",
        "3:45",
        "`bob` is not an agent",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext:\n  provider: memory\n  documentOwner: b\n",
        "5:18",
        "not an agent",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext: { documnets: file }\n",
        "3:12",
        "did you mean \"documents\"?",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext: { documents: paper }\n",
        "3:23",
        "unknown document provider",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext:\n  provider: file\n  config: { dir: a, bind: b }\n",
        "5:21",
        "exclusive",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext: { dir: \"./d/${{ params.x }}\" }\n",
        "3:22",
        "cannot be used in the documents folder",
    ),
    (
        "agents:\n  a: { backend: mock }\ncontext: { documents: sqlite, dir: ./d }\n",
        "3:36",
        "needs the file provider",
    ),
    // Params.
    (
        "agents:\n  a: { backend: mock }\nparams:\n  - name: pr\n  - name: pr\n",
        "5:11",
        "duplicate parameter `pr`",
    ),
    (
        "agents:\n  a: { backend: mock }\nparams:\n  - { name: n, type: number, default: abc }\n",
        "4:39",
        "must be a number",
    ),
    (
        "agents:\n  a: { backend: mock }\nparams:\n  - { name: b, type: boolean, default: yes }\n",
        "4:40",
        "must be a boolean",
    ),
    (
        "agents:\n  a: { backend: mock }\nparams:\n  - { name: n, type: int }\n",
        "4:22",
        "unknown parameter type `int`",
    ),
    (
        "agents:\n  a: { backend: mock }\nparams:\n  - { description: x }\n",
        "4:5",
        "has no `name`",
    ),
    // Setup.
    (
        "agents:\n  a: { backend: mock }\nsetup:\n  - shell: echo hi\n    as: env\n",
        "5:9",
        "`as: env` is reserved",
    ),
    (
        "agents:\n  a: { backend: mock }\nsetup:\n  - { shell: a, as: x }\n  - { shell: b, as: x }\n",
        "5:21",
        "duplicate `as: x`",
    ),
    (
        "agents:\n  a: { backend: mock }\nsetup:\n  - shell: echo ${{ later }}\n  - shell: echo hi\n    as: later\n",
        "4:17",
        "unknown name `later`",
    ),
    (
        "agents:\n  a: { backend: mock }\nsetup:\n  - { shell: x, timeout: 0 }\n",
        "4:26",
        "more than zero",
    ),
    (
        "agents:\n  a: { backend: mock }\nsetup:\n  - { as: x }\n",
        "4:5",
        "has no `shell`",
    ),
    // Interpolation in texts.
    (
        "name: x\nagents:\n  a: { backend: mock }\nkickoff: |\n  hi\n  ${{ nope }}\n",
        "6:3",
        "unknown name `nope`",
    ),
    (
        "agents:\n  a: { backend: mock }\nkickoff: \"go ${{ params.x }}\"\n",
        "3:14",
        "params.x",
    ),
    (
        "agents:\n  a: { backend: mock }\nkickoff: first line\n  second ${{ nope }}\n",
        "4:10",
        "unknown name `nope`",
    ),
    (
        "agents:\n  a: { backend: mock }\nsetup: [ { shell: x, as: diff } ]\nkickoff: >-  # ${{ comment }}\n  one ${{ diff }} two\n  ${{ dif }}\n",
        "6:3",
        "unknown name `dif`",
    ),
    (
        "agents:\n  a: { backend: mock }\nkickoff: '${{ a }} and ${{ b c }}'\n",
        "3:24",
        "not a name",
    ),
    (
        "agents:\n  a: { backend: mock, system_prompt: \"You are ${{ workflow.nam }}\" }\n",
        "2:47",
        "did you mean \"workflow.name\"?",
    ),
    (
        "agents:\n  a: { backend: mock, system_prompt: \"${{ env.A B }}\" }\n",
        "2:39",
        "not a name",
    ),
    // Delegation.
    (
        "agents:\n  a:\n    backend: mock\n    delegate: { agents: 0 }\n",
        "4:15",
        "delegate.agents: 0 sub-agents; give 1 to 20",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    delegate: { agents: 1, deph: 2 }\n",
        "4:28",
        "unknown key `deph`",
    ),
    (
        "agents:\n  a:\n    backend: mock\n    budget: { max_tokens: 10 }\n    delegate: { agents: 1, budget: { max_tokens: 99 } }\n",
        "5:15",
        "delegate.budget.max_tokens 99 is over the agent's own budget.max_tokens 10",
    ),
    // Workflow budget.
    (
        "budget: { max_hopz: 3 }\nagents:\n  a: { backend: mock }\n",
        "1:11",
        "unknown key `max_hopz`; did you mean \"max_hops\"?",
    ),
    (
        "budget: { max_cost_usd: -1 }\nagents:\n  a: { backend: mock }\n",
        "1:25",
        "max_cost_usd must be a positive number",
    ),
    (
        "budget: { max_hops: many }\nagents:\n  a: { backend: mock }\n",
        "1:21",
        "invalid type",
    ),
];
