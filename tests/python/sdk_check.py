"""Interop check: drive agent-worker with the official Python MCP SDK.

Usage:
    python sdk_check.py stdio <legacy|auto> <binary> <data-dir>
    python sdk_check.py http  <legacy|auto> <url> <admin-token>

Exits non-zero with a clear message on the first failed check; prints each
check as it passes. Agent names carry the mode so both modes can share one
server and data dir.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}

# Who sees which tools: the test harness's lists (tests/common/mod.rs, CONTEXT_TOOLS
# and MANAGEMENT_TOOLS), handed over by tests/python_sdk.rs, so a new tool is named once.
CONTEXT_TOOLS = sorted(os.environ["AW_CONTEXT_TOOLS"].split(","))
LEAD_TOOLS = sorted(os.environ["AW_LEAD_TOOLS"].split(","))


class CheckFailed(Exception):
    pass


def check(cond: bool, what: str, detail: Any = None) -> None:
    if not cond:
        msg = f"FAILED: {what}"
        if detail is not None:
            msg += f"\n  got: {detail!r}"
        raise CheckFailed(msg)
    print(f"ok: {what}", flush=True)


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def call_ok(client: Client, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    r = await client.call_tool(tool, args, **kw)
    if r.is_error:
        raise CheckFailed(f"FAILED: {tool}({args}) returned a tool error: {text_of(r)}")
    sc = r.structured_content
    if not isinstance(sc, dict):
        raise CheckFailed(f"FAILED: {tool}({args}) has no structured content object\n  got: {r!r}")
    return sc


def http_client_for(url: str, token: str, mode: str) -> _OwnedHttpClient:
    """An async context manager yielding a streamable-HTTP `Client` sending `Authorization: Bearer <token>`."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    # streamable_http_client does not close a caller-provided httpx2 client: own it.
    return _OwnedHttpClient(url, http, mode)


class _OwnedHttpClient:
    """`Client` over streamable HTTP that also closes its httpx2 client."""

    def __init__(self, url: str, http: httpx2.AsyncClient, mode: str) -> None:
        self._mode = mode
        self._http = http
        self._url = url
        self._client: Client | None = None

    async def __aenter__(self) -> Client:
        await self._http.__aenter__()
        try:
            self._client = Client(streamable_http_client(self._url, http_client=self._http), mode=self._mode)
            return await self._client.__aenter__()
        except BaseException:
            await self._http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> None:
        try:
            if self._client is not None:
                await self._client.__aexit__(*exc)
        finally:
            await self._http.__aexit__(None, None, None)



async def tool_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        names.extend(t.name for t in page.tools)
        for t in page.tools:
            if t.name == "permission_request":
                # Its answer is one text block of JSON, the shape Claude Code's
                # permission prompt tool requires: no structured content.
                check(t.output_schema is None, "permission_request declares no outputSchema")
                continue
            schema = t.output_schema
            check(
                isinstance(schema, dict) and schema.get("type") == "object",
                f"tool {t.name} has an outputSchema of type object",
                schema,
            )
        cursor = page.next_cursor
        if cursor is None:
            return sorted(names)


async def check_unauthenticated(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "sdk_check", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=10) as h:
        r = await h.post(url, json=body, headers=headers)
        check(r.status_code == 401, f"POST {url} without a token is rejected with 401", r.status_code)
        r = await h.post(url, json=body, headers={**headers, "Authorization": "Bearer not-a-real-token"})
        check(r.status_code == 401, f"POST {url} with a bogus token is rejected with 401", r.status_code)


CHANNEL = "agent-worker://workflows/global/main/channel"


async def check_subscription(url: str, token: str, lead: Client) -> None:
    """A 2025-11-25 session subscribes to the channel; a channel_send must reach it as
    notifications/resources/updated within 100 ms (measured and printed)."""
    arrived: dict[str, float] = {}
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        params = getattr(root, "params", None)
        if getattr(root, "method", "") == "notifications/resources/updated" and str(getattr(params, "uri", "")) == CHANNEL:
            arrived.setdefault("at", time.perf_counter())
            got.set()

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message) as w:
            await w.subscribe_resource(CHANNEL)
            await anyio.sleep(0.5)  # the session's stream opens
            sent = time.perf_counter()
            await call_ok(lead, "channel_send", {"message": "for the python watcher"})
            returned = time.perf_counter()
            with anyio.fail_after(5):
                await got.wait()
            after_send = (arrived["at"] - sent) * 1000
            print(
                f"resources/updated arrived {after_send:.1f} ms after channel_send was sent "
                f"({(arrived['at'] - returned) * 1000:.1f} ms after it returned)",
                flush=True,
            )
            # From the send's return (the message is committed then); the send itself
            # is a full round trip of this client on a shared machine.
            after_return = (arrived["at"] - returned) * 1000
            check(after_return < 100, "the subscribed channel's update arrives within 100 ms of channel_send", after_return)


async def run(transport: str, mode: str, target: str, secret: str) -> None:
    alice = f"pyalice-{mode}"
    bob = f"pybob-{mode}"

    if transport == "stdio":
        lead_cm: Any = Client(StdioServerParameters(command=target, args=["--data-dir", secret, "--foreground"]), mode=mode)
    else:
        lead_cm = http_client_for(target, secret, mode)

    async with lead_cm as lead:
        print(f"negotiated protocol version: {lead.protocol_version}", flush=True)
        check(
            lead.protocol_version == EXPECTED_VERSION[mode],
            f"mode={mode} negotiates {EXPECTED_VERSION[mode]}",
            lead.protocol_version,
        )
        info = lead.server_info
        print(f"server info: {info.name if info else None} {info.version if info else None}", flush=True)

        names = await tool_names(lead)
        check(names == LEAD_TOOLS, f"lead sees exactly the {len(LEAD_TOOLS)} lead tools", names)

        prompts = [p.name for p in (await lead.list_prompts()).prompts]
        check("start-team" in prompts and "coding-team" in prompts, "the lead lists its prompts", prompts)
        got = await lead.get_prompt("start-team", {"goal": "triage the open bugs"})
        text = got.messages[0].content.text
        check("triage the open bugs" in text and "agent_new" in text, "start-team expands with its goal", text)
        if transport == "http" and mode == "legacy":
            await check_subscription(target, secret, lead)

        for name in (alice, bob):
            # external: driven by the joined session below, never by a kernel worker
            sc = await call_ok(lead, "agent_new", {"name": name, "backend": "external"})
            agent = sc.get("agent")
            check(
                isinstance(agent, dict) and agent.get("name") == name,
                f"agent_new creates {name}",
                sc,
            )

        # agent_ask runs a real worker subprocess (mock backend) and returns its reply.
        asker = f"pyask@pyask:{mode}"
        await call_ok(
            lead,
            "agent_new",
            {
                "name": "pyask",
                "backend": "mock",
                "workflow": f"@pyask:{mode}",
                "mock": [{"send": "@user 42", "reply": "answered {from}"}],
            },
        )
        said: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            said.append(message or "")

        sc = await call_ok(
            lead,
            "agent_ask",
            {"target": asker, "message": "the answer?", "wait_seconds": 30},
            progress_callback=on_progress,
        )
        check(sc.get("status") == "succeeded", "agent_ask's run succeeded", sc)
        check(
            any("read 1 inbox message" in m for m in said),
            "agent_ask sends the worker's progress as notifications",
            said,
        )
        reply = sc.get("reply") or {}
        check(reply.get("messages") == ["@user 42"], "agent_ask returns what the agent sent the lead", sc)
        check(reply.get("final_text") == "answered user", "agent_ask returns the run's final text", sc)

        # workflow_run: an inline YAML workflow of two mocks runs to completion.
        yaml = (
            "name: pyflow\n"
            "agents:\n"
            "  a: { backend: mock, mock: [ { send: '@b over to you' } ] }\n"
            "  b: { backend: mock, mock: [ { doc_append: { content: 'b was here' } } ] }\n"
            "kickoff: '@a start'\n"
        )
        sc = await call_ok(lead, "workflow_run", {"yaml": yaml, "tag": mode, "wait_seconds": 30})
        check(sc.get("status") == "completed", "workflow_run completes an inline workflow", sc)
        doc = (sc.get("document") or {}).get("content", "")
        check("b was here" in doc, "workflow_run returns the main document", sc)
        r = await lead.call_tool("workflow_run", {"yaml": "name: bad\nagents:\n  a: { backend: nope }\n"})
        check(r.is_error and "<inline>:3:" in text_of(r), "a YAML mistake is a tool error with its line", text_of(r))

        sc = await call_ok(lead, "channel_send", {"message": f"@{alice} hello from python"})
        check("id" in sc, "channel_send returns a message id", sc)
        check(sc.get("recipients") == [alice], f"channel_send recipients == [{alice}]", sc)
        sent_id = sc["id"]

        r = await lead.call_tool("agent_new", {"name": f"pybad-{mode}", "backend": "nope"})
        check(r.is_error, "agent_new with backend 'nope' is a tool error (isError true)", r)
        check("unknown backend" in text_of(r), "the error text mentions 'unknown backend'", text_of(r))

        join = await call_ok(lead, "agent_join", {"target": alice})
        url, token = join.get("url"), join.get("token")
        check(isinstance(url, str) and url.startswith("http"), "agent_join returns an http url", join)
        check(isinstance(token, str) and len(token) > 0, "agent_join returns a token", join)
        if transport == "http":
            check(url == target, "agent_join's url is the server's url", (url, target))
        else:
            # The stdio server also serves HTTP on loopback and records it in kernel.json.
            kernel = json.loads((Path(secret) / "kernel.json").read_text())
            check(kernel.get("url") == url, "agent_join's url is the one in <data-dir>/kernel.json", (url, kernel))
        print(f"agent url: {url}", flush=True)

        async with http_client_for(url, token, mode) as agent:
            check(
                agent.protocol_version == EXPECTED_VERSION[mode],
                f"agent session negotiates {EXPECTED_VERSION[mode]}",
                agent.protocol_version,
            )
            names = await tool_names(agent)
            check(names == CONTEXT_TOOLS, f"agent session sees only the {len(CONTEXT_TOOLS)} context tools", names)
            agent_prompts = (await agent.list_prompts()).prompts
            check(agent_prompts == [], "an agent session lists no prompts", agent_prompts)

            inbox = await call_ok(agent, "my_inbox", {})
            msgs = inbox.get("messages")
            check(isinstance(msgs, list), "my_inbox returns a messages list", inbox)
            hello = [m for m in msgs if "hello from python" in str(m.get("content", ""))]
            check(len(hello) == 1, f"{alice}'s inbox holds the 'hello from python' message", msgs)
            check(hello[0].get("from") == "user", "the message is from 'user'", hello[0])
            check(hello[0].get("id") == sent_id, "the inbox message id matches channel_send's id", hello[0])

            ack = await call_ok(agent, "my_inbox_ack", {"message_id": sent_id})
            check(ack.get("acked") == 1, "my_inbox_ack acks exactly 1 message", ack)

            inbox = await call_ok(agent, "my_inbox", {})
            left = [m for m in inbox.get("messages", []) if m.get("id") == sent_id]
            check(left == [], "the acked message is gone from my_inbox", inbox)

            doc = f"py-{mode}.md"
            w = await call_ok(agent, "team_doc_create", {"file": doc, "content": "from python"})
            check(w.get("created") is True and w.get("file") == doc, f"team_doc_create creates {doc}", w)
            r = await agent.call_tool(
                "team_doc_write", {"file": doc, "content": "stale", "expected_version": "absent"}
            )
            check(r.is_error and "changed since" in text_of(r), "a stale expected_version is refused", r)
            r = await agent.call_tool("team_doc_read", {"file": "../escape.md"})
            check(r.is_error and "'..'" in text_of(r), "a path with '..' is refused", r)

            p = await call_ok(
                agent,
                "team_proposal_create",
                {
                    "type": "decision",
                    "title": f"python {mode}",
                    "options": [{"id": "a", "label": "Option A"}, "b"],
                    "quorum": 1,
                },
            )
            pid = p["proposal"]["id"]
            v = await call_ok(agent, "team_vote", {"proposal": pid, "choice": "Option A", "reason": "py"})
            check(
                v.get("resolved") is True and v.get("winner", {}).get("id") == "a",
                f"{alice}'s vote resolves {pid} for option a",
                v,
            )
            fb = await call_ok(
                agent,
                "my_feedback",
                {"kind": "missing", "about": "run_tests", "text": f"python {mode}: no way to run the tests"},
            )
            check((fb.get("feedback") or {}).get("member") == alice, "my_feedback records who reported it", fb)

        sc = await call_ok(lead, "team_doc_read", {"file": f"py-{mode}.md"})
        check(sc.get("content") == "from python", "the lead reads the agent's document", sc)
        st = await call_ok(lead, "workflow_status", {"workflow": "@global:main"})
        newest = (st.get("feedback") or {}).get("newest", [])
        check(
            any(f.get("text") == f"python {mode}: no way to run the tests" for f in newest),
            "the lead reads the agent's feedback in workflow_status",
            st,
        )

        await check_unauthenticated(url)


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[1] not in ("stdio", "http") or argv[2] not in ("legacy", "auto"):
        print(__doc__, file=sys.stderr)
        return 2
    transport, mode, target, secret = argv[1:]
    print(f"== python mcp SDK check: transport={transport} mode={mode}", flush=True)
    try:
        anyio.run(_with_timeout, transport, mode, target, secret)
    except BaseException as e:
        failed = _find_check_failed(e)
        if failed is not None:
            print(str(failed), file=sys.stderr, flush=True)
        else:  # an SDK/protocol error (or the timeout) is a failure too
            traceback.print_exc()
            print(f"FAILED: unexpected exception {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"== all checks passed: transport={transport} mode={mode}", flush=True)
    return 0


def _find_check_failed(e: BaseException) -> CheckFailed | None:
    """The CheckFailed inside `e`, which a task group may have wrapped in an exception group."""
    if isinstance(e, CheckFailed):
        return e
    if isinstance(getattr(e, "exceptions", None), (list, tuple)):  # (Base)ExceptionGroup
        for sub in e.exceptions:  # type: ignore[attr-defined]
            if (found := _find_check_failed(sub)) is not None:
                return found
    return None


async def _with_timeout(transport: str, mode: str, target: str, secret: str) -> None:
    with anyio.fail_after(120):
        await run(transport, mode, target, secret)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
