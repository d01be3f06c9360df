"""Approvals answered inline: the lead's client (the official Python MCP SDK)
declares elicitation; while it waits in agent_ask, an sdk agent's write needs the
lead's approval, the server asks in the chat window, and the answer decides it.

Over 2025-11-25 (mode "legacy") the server asks by an elicitation request; over
2026-07-28 the call returns input_required with the same form and the SDK retries
it with the answer. Scenarios:
    approve  the person approves: the run succeeds
    decline  the person declines: nothing is decided, the call is not asked again;
             a later waiting call asks again and is approved
    forged   (2026-07-28) the rounds driven by hand: an altered request state, a
             state for another tool and an answer for an approval not asked decide
             nothing; the untouched state with the answer decides it

Usage:
    python elicit_check.py <url> <admin-token> <fake-model-url> <agent-folder> <mode> <scenario>
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitResult, InputRequiredResult

MODERN = "2026-07-28"


def fail(what: str, detail: Any = None) -> None:
    raise SystemExit(f"FAILED: {what}" + (f"\n  got: {detail!r}" if detail is not None else ""))


async def call_ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await client.call_tool(tool, args)
    if r.is_error:
        fail(f"{tool} returned a tool error", [getattr(c, "text", "") for c in r.content])
    return r.structured_content


async def run(url: str, token: str, llm: str, folder: str, mode: str, scenario: str) -> None:
    asked: list[Any] = []
    answers = {"approve": "approve", "decline": "decline", "forged": "approve"}
    answer = [answers[scenario]]

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        if answer[0] == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"decision": "approve", "reason": "fine by me"})

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    with anyio.fail_after(100):
        async with http:
            async with Client(
                streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=on_elicit
            ) as lead:
                if lead.session.protocol_version != (MODERN if mode == MODERN else "2025-11-25"):
                    fail("the protocol version asked for", lead.session.protocol_version)
                await setup(lead, llm, folder)
                if scenario == "approve":
                    await approve(lead, asked)
                elif scenario == "decline":
                    await decline(lead, asked, answer)
                else:
                    await forged(lead)


async def setup(lead: Client, llm: str, folder: str) -> None:
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


async def the_approval(lead: Client) -> dict[str, Any]:
    approvals = (await call_ok(lead, "approval_list", {}))["approvals"]
    if len(approvals) != 1:
        fail("one approval", approvals)
    return approvals[0]


async def approve(lead: Client, asked: list[Any]) -> None:
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
    a = await the_approval(lead)
    if a["state"] != "approved" or not any(v["reason"] == "fine by me" for v in a["votes"]):
        fail("the approval was decided by the inline answer", a)
    print("ok: approval decided by the inline answer", flush=True)


async def decline(lead: Client, asked: list[Any], answer: list[str]) -> None:
    r = await call_ok(lead, "agent_ask", {"target": "writer", "message": "write it", "wait_seconds": 6})
    if r.get("status") != "running":
        fail("the run still waits for its approval", r)
    if len(asked) != 1:
        fail("asked once in the call, not again after the decline", asked)
    a = await the_approval(lead)
    if a["state"] != "pending" or a["votes"]:
        fail("a declined form decides nothing", a)
    print("ok: declined: the approval stays pending, not asked again in the call", flush=True)
    answer[0] = "approve"
    await call_ok(lead, "agent_ask", {"target": "writer", "message": "and now?", "wait_seconds": 10})
    if len(asked) != 2:
        fail("a later waiting call asks again", asked)
    a = await the_approval(lead)
    if a["state"] != "approved":
        fail("the approval was decided in the later call", a)
    print("ok: asked again while waiting in a later agent_ask, and approved", flush=True)


async def forged(lead: Client) -> None:
    args = {"target": "writer", "message": "write it", "wait_seconds": 5}
    first = await lead.session.call_tool("agent_ask", args, allow_input_required=True)
    if not isinstance(first, InputRequiredResult) or not first.request_state:
        fail("agent_ask returns input_required", first)
    keys = list((first.input_requests or {}).keys())
    a = await the_approval(lead)
    if keys != [f"approval-{a['id']}"]:
        fail("one form, keyed by the approval", keys)
    form = first.input_requests[keys[0]]
    if "hello.txt" not in form.params.message or form.params.requested_schema["required"] != ["decision"]:
        fail("the form says what, and asks for a decision", form)
    print(f"ok: input_required: {keys[0]}: {form.params.message}", flush=True)
    yes = {keys[0]: ElicitResult(action="accept", content={"decision": "approve", "reason": "forged"})}
    state = first.request_state
    i = len(state) // 2
    altered = state[:i] + ("A" if state[i] != "A" else "B") + state[i + 1 :]
    for tool, targs, s in [("agent_ask", args, altered), ("workflow_status", {"workflow": "@global:main", "wait_seconds": 5}, state)]:
        r = await lead.session.call_tool(tool, targs, input_responses=yes, request_state=s, allow_input_required=True)
        text = " ".join(getattr(c, "text", "") for c in getattr(r, "content", []))
        if not getattr(r, "is_error", False) or "refused" not in text:
            fail(f"{tool} refuses the state", r)
        if (await the_approval(lead))["state"] != "pending":
            fail("a refused state decides nothing", await the_approval(lead))
    print("ok: an altered state, and a state for another tool, are refused; nothing decided", flush=True)
    other = {f"approval-{a['id'] + 1}": yes[keys[0]]}
    r = await lead.session.call_tool("agent_ask", args, input_responses=other, request_state=state, allow_input_required=True)
    if isinstance(r, InputRequiredResult) or r.is_error or r.structured_content.get("status") != "running":
        fail("an answer for an approval not asked decides nothing, and the call waits on", r)
    if (await the_approval(lead))["state"] != "pending":
        fail("the approval asked about stays pending", await the_approval(lead))
    print("ok: an answer for an approval not asked decides nothing", flush=True)
    args["wait_seconds"] = 40
    r = await lead.session.call_tool("agent_ask", args, input_responses=yes, request_state=state, allow_input_required=True)
    if isinstance(r, InputRequiredResult) or r.structured_content.get("status") != "succeeded":
        fail("the retry with the answer decides and the run succeeds", r)
    a = await the_approval(lead)
    if a["state"] != "approved":
        fail("approved by the retry", a)
    messages = [m for m in (await call_ok(lead, "channel_read", {}))["messages"] if m.get("content") == "write it"]
    if len(messages) != 1:
        fail("the question was posted once, whatever the rounds", messages)
    print("ok: the retry with the answer decides it; the question was posted once", flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    anyio.run(run, *argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
