"""Approvals answered inline: the lead's client (the official Python MCP SDK)
declares elicitation; while it waits in agent_ask, an sdk agent's write needs the
lead's approval, the server asks in the chat window, and the answer decides it.

Usage:
    python elicit_check.py <url> <admin-token> <fake-model-url> <agent-folder>
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitResult


def fail(what: str, detail: Any = None) -> None:
    raise SystemExit(f"FAILED: {what}" + (f"\n  got: {detail!r}" if detail is not None else ""))


async def call_ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await client.call_tool(tool, args)
    if r.is_error:
        fail(f"{tool} returned a tool error", [getattr(c, "text", "") for c in r.content])
    return r.structured_content


async def run(url: str, token: str, llm: str, folder: str) -> None:
    asked: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"decision": "approve", "reason": "fine by me"})

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    with anyio.fail_after(90):
        await session(url, http, llm, folder, on_elicit, asked)


async def session(url: str, http: Any, llm: str, folder: str, on_elicit: Any, asked: list[Any]) -> None:
    async with http:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=on_elicit
        ) as lead:
            await call_ok(
                lead,
                "agent_new",
                {
                    "name": "writer",
                    "backend": "sdk",
                    "model": "claude-sonnet-4-5",
                    "env": {"ANTHROPIC_BASE_URL": llm, "ANTHROPIC_API_KEY": "sk-test"},
                    "cwd": folder,
                    "permissions": "edit",
                },
            )
            await call_ok(
                lead,
                "contract_set",
                {
                    "name": "edits-need-me",
                    "when": {"event": "tool_request", "tool": "edit"},
                    "then": {"action": "require_approval", "timeout": "2m"},
                },
            )
            answer = await call_ok(lead, "agent_ask", {"target": "writer", "message": "write it", "wait_seconds": 40})
            if answer.get("status") != "succeeded":
                fail("the run succeeded after the inline approval", answer)
            print("ok: agent_ask returned after the inline approval", flush=True)
            if len(asked) != 1:
                fail("exactly one elicitation", asked)
            message = asked[0].message
            if "hello.txt" not in message or "edits-need-me" not in message:
                fail("the elicitation says what and which contract", message)
            print(f"ok: asked inline: {message}", flush=True)
            approvals = (await call_ok(lead, "approval_list", {}))["approvals"]
            a = approvals[0]
            if a["state"] != "approved" or not any(v["reason"] == "fine by me" for v in a["votes"]):
                fail("the approval was decided by the inline answer", a)
            print("ok: approval decided by the inline answer", flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    anyio.run(run, *argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
