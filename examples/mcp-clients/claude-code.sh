#!/bin/sh
# Claude Code: stdio. The launch relays to the data dir's kernel, which runs in the
# background and outlives the client: workers, schedules and waiting messages carry
# on after Claude Code closes, until the kernel has been idle (no client, nothing
# owed) for --idle-exit (default 10m; `never` keeps it for good).
claude mcp add -s user agent-worker -- /absolute/path/to/agent-worker
# ... or HTTP to a kernel you run as a service (`agent-worker --http 127.0.0.1:8931`,
# e.g. under systemd), if the client should not start one:
# claude mcp add -s user --transport http agent-worker http://127.0.0.1:8931/mcp \
#   --header "Authorization: Bearer $(cat ~/.local/share/agent-worker/admin.token)"
#
# Acting as an agent: agent_join returns the commands to paste (its stdio.configs
# launch agent-worker with the agent's token in the environment, e.g.
# claude mcp add agent-worker-bob --env AGENT_WORKER_AGENT_TOKEN=awagent_... -- \
#   /absolute/path/to/agent-worker --data-dir /home/you/.local/share/agent-worker \
#   --token-env AGENT_WORKER_AGENT_TOKEN
