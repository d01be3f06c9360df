"""A tiny stdio MCP server for the agents' own-server tests: one tool, file_issue,
that records the issue (and the secret it was started with) in the file named by
TRACKER_MARK, so a test can see the call arrived with the agent's env."""

import os

from mcp.server.mcpserver import MCPServer

app = MCPServer("tracker")


@app.tool()
def file_issue(title: str) -> str:
    """File an issue in the tracker."""
    with open(os.environ["TRACKER_MARK"], "a") as f:
        f.write(f"{title}|{os.environ.get('TRACKER_KEY', '')}\n")
    return f"filed: {title}"


if __name__ == "__main__":
    app.run()
