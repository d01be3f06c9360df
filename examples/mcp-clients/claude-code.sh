#!/bin/sh
# Claude Code: stdio (the kernel starts with the client) ...
claude mcp add -s user agent-worker -- /absolute/path/to/agent-worker
# ... or HTTP to a long-running kernel (`agent-worker --http 127.0.0.1:8931`), so schedules fire without a client.
# claude mcp add -s user --transport http agent-worker http://127.0.0.1:8931/mcp \
#   --header "Authorization: Bearer $(cat ~/.local/share/agent-worker/admin.token)"
