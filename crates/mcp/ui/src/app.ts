// The team dashboard: an MCP App the host renders beside workflow_run,
// workflow_status, workflow_list and agent_ask. It shows one workflow instance
// live by calling the app-only tool dashboard_watch (a long poll); the person's
// clicks are the host's tool calls (approval_decide, team_doc_read), so the
// rules that govern the lead govern it. Everything shown is text: nothing an
// agent wrote is ever parsed as HTML (Markdown, a document's and a message's
// inline marks, is rendered by markdown.ts, which makes its elements itself).
import {
  App,
  applyDocumentTheme,
  applyHostFonts,
  applyHostStyleVariables,
  type McpUiHostContext,
} from "@modelcontextprotocol/ext-apps/app-with-deps";
import { blocks, inline } from "./markdown";

type Usage = { input_tokens: number; output_tokens: number; cost_usd?: number };
type Run = {
  id: string;
  trigger: string;
  status: string;
  started_at: string;
  duration_ms?: number;
  usage: Usage;
  error_class?: string;
  error?: string;
};
type Agent = {
  name: string;
  backend: string;
  model?: string;
  node?: string;
  workspace: string;
  branch?: string;
  state: string;
  reason?: string;
  resume_at?: string;
  running?: Run;
  waiting_for?: { approval: number; since: string };
  runs: Run[];
  total_runs: number;
  failed_runs: number;
  usage: Usage;
};
type Approval = {
  id: number;
  agent: string;
  event: string;
  what: string;
  contracts: string[];
  state: string;
  reason?: string;
  deadline: string;
};
type Message = {
  id: string;
  from: string;
  content: string;
  created_at: string;
  kind: string;
  to?: string;
};
type Task = {
  id: number;
  title: string;
  column: string;
  owner?: string;
  blocked_by?: number[];
  assign?: string;
  result: boolean;
  approval?: number;
};
type Snapshot = {
  version: string;
  now_ms: number;
  workflow?: string;
  instances: { workflow: string; status: string; agents: number }[];
  status?: { status: string; reason?: string; runs: number; usage: Usage };
  approvals_more: number;
  agents: Agent[];
  agents_more: number;
  approvals: Approval[];
  documents: string[];
  board: Task[];
  board_more: number;
  messages: Message[];
  messages_more: boolean;
  hooks: Delivery[];
};
/** A delivery to a hook (events from outside), as workflow_list shows it. */
type Delivery = { hook: string; delivery: string; event?: string; at: string; outcome: string };

/** The board's columns: each takes the tasks of these columns of the snapshot. */
const COLUMNS: { key: string; label: string; takes: string[] }[] = [
  { key: "open", label: "Open", takes: ["open"] },
  { key: "blocked", label: "Blocked", takes: ["blocked"] },
  { key: "claimed", label: "Claimed", takes: ["claimed"] },
  { key: "done", label: "Done", takes: ["done"] },
  { key: "ended", label: "Failed · cancelled", takes: ["failed", "cancelled"] },
];

/** Messages kept on the page (the oldest go first). */
const KEPT_MESSAGES = 500;
const WAIT_SECONDS = 25;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<Record<string, string>> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v !== undefined) e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c);
  }
  return e;
}

const tokens = (u: Usage) => {
  const n = u.input_tokens + u.output_tokens;
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n);
};
const cost = (u: Usage) => (u.cost_usd === undefined ? "" : `$${u.cost_usd.toFixed(u.cost_usd < 1 ? 4 : 2)}`);
const seconds = (ms: number) =>
  ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
/** `n` things: "1 run", "2 runs". */
const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const badge = (state: string, text = state.replace("_", " ")) => el("span", { class: `badge s-${state}` }, text);
const time = (iso: string) => el("time", { datetime: iso }, iso.slice(11, 19));

/** The instance a tool call was about: its `workflow`, or the one in a target. */
function instanceOf(x: Record<string, unknown> | undefined): string | undefined {
  if (!x) return undefined;
  if (typeof x.workflow === "string" && x.workflow) return x.workflow;
  if (typeof x.target === "string" && x.target) {
    const at = x.target.indexOf("@");
    return at < 0 ? "@global:main" : x.target.slice(at);
  }
  return undefined;
}

class Dashboard {
  workflow: string | undefined;
  since: string | undefined;
  seen: string | undefined;
  clockOffset = 0;
  generation = 0;
  poll: AbortController | undefined;
  /** Each section's data as last drawn: a section is drawn again only when it changed. */
  drawn = new Map<string, string>();
  /** Approvals being decided: their buttons stay disabled across redraws. */
  deciding = new Set<number>();
  /** Taken down by the host: nothing starts again. */
  torn = false;
  switching: ReturnType<typeof setTimeout> | undefined;

  constructor(readonly app: App) {}

  /** Whether `key`'s data differs from what is drawn (and remembers it). */
  changed(key: string, data: unknown): boolean {
    const json = JSON.stringify(data);
    if (this.drawn.get(key) === json) return false;
    this.drawn.set(key, json);
    return true;
  }

  /** Shows `w` from now on (a switch, or the instance of the call the host shows). */
  show(w: string | undefined) {
    if (!w || w === this.workflow || this.torn) return;
    this.workflow = w;
    this.since = undefined;
    this.seen = undefined;
    this.drawn.clear();
    $("channel").replaceChildren();
    this.closeViewer();
    this.restart();
  }

  /** A switch by the person: after they stop moving through the list. */
  switchTo(w: string) {
    clearTimeout(this.switching);
    this.switching = setTimeout(() => this.show(w), 300);
  }

  restart() {
    this.poll?.abort();
    if (this.torn || document.hidden) return;
    void this.loop(++this.generation);
  }

  /** Stops polling (hidden, or taken down). */
  pause() {
    this.generation++;
    this.poll?.abort();
  }

  async loop(generation: number) {
    let first = true;
    while (generation === this.generation) {
      this.poll = new AbortController();
      try {
        const args: Record<string, unknown> = { wait_seconds: first ? 0 : WAIT_SECONDS };
        if (this.workflow) args.workflow = this.workflow;
        if (this.since) args.since = this.since;
        if (this.seen) args.seen = this.seen;
        const r = await this.app.callServerTool(
          { name: "dashboard_watch", arguments: args },
          { signal: this.poll.signal, timeout: (WAIT_SECONDS + 20) * 1000 },
        );
        if (generation !== this.generation) return;
        if (r.isError) throw new Error(textOf(r.content));
        this.render(r.structuredContent as unknown as Snapshot);
        this.error(undefined);
        first = false;
      } catch (e) {
        if (generation !== this.generation) return;
        this.error(`Could not refresh: ${(e as Error).message ?? e}. Retrying.`);
        await new Promise((ok) => setTimeout(ok, 2000));
      }
    }
  }

  error(text: string | undefined) {
    const p = $("error");
    p.hidden = !text;
    p.textContent = text ?? "";
  }

  render(s: Snapshot) {
    this.clockOffset = s.now_ms - Date.now();
    if (!this.workflow && s.workflow) this.workflow = s.workflow;
    this.seen = s.version;
    if (this.changed("instances", [s.instances, s.workflow])) this.renderInstances(s);
    if (this.changed("status", s.status ?? null)) this.renderStatus(s);
    if (this.changed("approvals", [s.approvals, s.approvals_more, [...this.deciding]])) {
      this.renderApprovals(s.approvals, s.approvals_more);
    }
    if (this.changed("board", [s.board, s.board_more])) this.renderBoard(s.board, s.board_more);
    if (this.changed("agents", [s.agents, s.agents_more])) this.renderAgents(s);
    this.renderMessages(s.messages);
    if (this.changed("documents", s.documents)) this.renderDocuments(s.documents);
    if (this.changed("hooks", s.hooks ?? [])) this.renderHooks(s.hooks ?? []);
    this.tick();
  }

  renderInstances(s: Snapshot) {
    const select = $<HTMLSelectElement>("instance");
    const options = s.instances.map((i) =>
      el("option", { value: i.workflow }, `${i.workflow} (${i.status}, ${count(i.agents, "agent")})`),
    );
    if (s.workflow && !s.instances.some((i) => i.workflow === s.workflow)) {
      options.unshift(el("option", { value: s.workflow }, s.workflow));
    }
    select.replaceChildren(...options);
    select.value = s.workflow ?? "";
    // The whole text, when a long name is wider than the panel.
    select.title = select.selectedOptions[0]?.textContent ?? "";
  }

  renderStatus(s: Snapshot) {
    const st = s.status;
    const status = $("status");
    status.className = `badge s-${st?.status ?? "none"}`;
    status.textContent = st ? st.status : "no instance";
    const reason = $("reason");
    reason.hidden = !st?.reason;
    reason.textContent = st?.reason ?? "";
    $("totals").textContent = st
      ? [count(st.runs, "run"), `${tokens(st.usage)} tokens`, cost(st.usage)].filter(Boolean).join(" · ")
      : "";
  }

  renderHooks(list: Delivery[]) {
    $("hooks-section").hidden = list.length === 0;
    $("hooks").replaceChildren(
      ...list.map((d) =>
        el(
          "li",
          { class: "card" },
          el("div", { class: "card-head" }, el("span", { class: "name" }, d.hook), d.event ?? ""),
          el("div", {}, d.outcome),
          el("div", { class: "meta" }, `${d.delivery} · ${d.at}`),
        ),
      ),
    );
  }

  renderApprovals(list: Approval[], more: number) {
    $("approvals-section").hidden = list.length === 0;
    const rest = $("approvals-more");
    rest.hidden = more === 0;
    rest.textContent = `${more} more pending (approval_list shows them)`;
    $("approvals").replaceChildren(
      ...list.map((a) => {
        const card = el(
          "li",
          { class: "card", "data-approval": String(a.id) },
          el("div", { class: "card-head" }, el("span", { class: "name" }, `#${a.id} ${a.agent}`), badge(a.state)),
          el("div", {}, a.what),
          el("div", { class: "meta" }, a.contracts.join("; ")),
        );
        if (a.state === "pending") {
          const busy = this.deciding.has(a.id) ? "" : undefined;
          const approve = el("button", { type: "button", disabled: busy }, "Approve");
          const deny = el("button", { type: "button", disabled: busy }, "Deny");
          approve.onclick = () => this.decide(a.id, "approve", [approve, deny]);
          deny.onclick = () => this.decide(a.id, "deny", [approve, deny]);
          card.append(el("div", { class: "actions" }, approve, deny));
        } else if (a.reason) {
          card.append(el("div", { class: "meta" }, a.reason));
        }
        return card;
      }),
    );
  }

  async decide(id: number, decision: "approve" | "deny", buttons: HTMLButtonElement[]) {
    if (this.deciding.has(id)) return;
    this.deciding.add(id);
    for (const b of buttons) b.disabled = true;
    try {
      const r = await this.app.callServerTool({ name: "approval_decide", arguments: { id, decision } });
      if (r.isError) throw new Error(textOf(r.content));
      this.error(undefined);
    } catch (e) {
      this.error(`Approval #${id} was not decided: ${(e as Error).message ?? e}`);
      for (const b of buttons) b.disabled = false;
    } finally {
      this.deciding.delete(id);
    }
  }

  /** The task board: a column per state, each task a card with its owner, what
   * blocks it and whether a result is attached. */
  renderBoard(tasks: Task[], more: number) {
    $("board-section").hidden = tasks.length === 0 && more === 0;
    const rest = $("board-more");
    rest.hidden = more === 0;
    rest.textContent = `${count(more, "more task")} (task_list shows every one)`;
    $("board").replaceChildren(
      ...COLUMNS.map((c) => {
        const mine = tasks.filter((t) => c.takes.includes(t.column));
        const id = `col-${c.key}`;
        const cards = mine.map((t) => taskCard(t));
        if (!cards.length) cards.push(el("li", { class: "muted" }, "none"));
        return el(
          "div",
          { class: "column", role: "group", "aria-labelledby": id, "data-column": c.key },
          el("h3", { id }, `${c.label} `, el("span", { class: "muted" }, String(mine.length))),
          el("ul", { class: "list" }, ...cards),
        );
      }),
    );
  }

  renderAgents(s: Snapshot) {
    $("agents").replaceChildren(...s.agents.map((a) => this.agentCard(a)));
    const more = $("agents-more");
    more.hidden = s.agents_more === 0;
    more.textContent = `${count(s.agents_more, "more agent")} (agent_list shows every one)`;
  }

  agentCard(a: Agent) {
    const where = [a.backend + (a.model ? ` (${a.model})` : ""), a.node ? `node ${a.node}` : "", a.branch ? `worktree ${a.branch}` : a.workspace];
    const wait = a.waiting_for;
    // Held for an approval, its run (or its next one) waits: not "running".
    const state = wait ? badge("waiting", `waiting for approval #${wait.approval}`) : badge(a.state);
    const head = el("div", { class: "card-head" }, el("span", { class: "name" }, a.name), state);
    const since = wait?.since ?? a.running?.started_at;
    if (since) {
      head.append(el("span", { class: "elapsed", "data-started": since, "data-label": wait ? "for" : "running" }, ""));
    }
    const failed = a.failed_runs ? `, ${a.failed_runs} failed` : "";
    const totals = `${count(a.total_runs, "run")}${failed} · ${tokens(a.usage)} tokens ${cost(a.usage)}`;
    const card = el(
      "li",
      { class: "card", "data-agent": a.name },
      head,
      el("div", { class: "meta" }, where.filter(Boolean).join(" · ")),
      a.reason ? el("div", { class: "why" }, a.reason + (a.resume_at ? ` (until ${a.resume_at})` : "")) : null,
      el("div", { class: "meta" }, totals),
    );
    if (a.runs.length) card.append(runsTable(a.runs, wait !== undefined));
    const error = a.runs[0]?.error;
    if (error) card.append(el("div", { class: "why" }, `last run: ${error}`));
    return card;
  }

  renderMessages(list: Message[]) {
    if (!list.length) return;
    const ol = $("channel");
    const atEnd = atTheEnd(ol);
    for (const m of list) {
      const from = el("span", { class: "from" }, m.from);
      const to = m.to ? el("span", { class: "to" }, ` → ${m.to}`) : null;
      const li = el("li", { class: m.kind === "system" ? "system" : "", "data-id": m.id }, time(m.created_at), " ", from, to, ": ");
      // Its lines stay as written (a list is its lines); its inline marks are rendered.
      li.append(...inline(m.content));
      ol.append(li);
    }
    while (ol.children.length > KEPT_MESSAGES) ol.firstElementChild?.remove();
    this.since = list[list.length - 1].id;
    if (atEnd) showEnd(ol);
  }

  renderDocuments(files: string[]) {
    $("documents").replaceChildren(
      ...files.map((f) => {
        const b = el("button", { type: "button" }, f);
        b.onclick = () => this.openDoc(f, b);
        return el("li", {}, b);
      }),
    );
    if (!files.length) $("documents").append(el("li", { class: "muted" }, "none yet"));
  }

  opener: HTMLElement | undefined;

  async openDoc(file: string, opener: HTMLElement) {
    this.opener = opener;
    const generation = this.generation;
    const r = await this.app
      .callServerTool({ name: "team_doc_read", arguments: { workflow: this.workflow, file } })
      .catch((e) => ({ isError: true, content: [{ type: "text", text: String(e) }] }) as never);
    if (generation !== this.generation) return;
    const doc = r.structuredContent as { content?: string } | undefined;
    $("viewer-title").textContent = file;
    const body = r.isError ? [el("p", { class: "error" }, textOf(r.content))] : blocks(doc?.content ?? "", 4);
    $("viewer-body").replaceChildren(...body);
    $("viewer").hidden = false;
    $("viewer-title").focus();
  }

  closeViewer() {
    $("viewer").hidden = true;
    // The button that opened it, or its redrawn twin.
    const file = this.opener?.textContent;
    const back = this.opener?.isConnected
      ? this.opener
      : [...document.querySelectorAll<HTMLElement>("#documents button")].find((b) => b.textContent === file);
    back?.focus();
    this.opener = undefined;
  }

  /** Elapsed times of the runs in progress, by the server's clock. */
  tick() {
    const now = Date.now() + this.clockOffset;
    for (const e of document.querySelectorAll<HTMLElement>(".elapsed")) {
      const started = Date.parse(e.dataset.started ?? "");
      if (!Number.isNaN(started)) e.textContent = `${e.dataset.label} ${seconds(Math.max(0, now - started))}`;
    }
  }
}

/** A task's card: its number and title, its state when the column holds more
 * than one, its owner, what blocks it, whether a result is attached. */
function taskCard(t: Task) {
  const head = el("div", { class: "card-head" }, el("span", { class: "name" }, `#${t.id} ${t.title}`));
  if (t.column === "failed" || t.column === "cancelled") head.append(badge(t.column));
  if (t.approval !== undefined) head.append(badge("waiting", `approval #${t.approval}`));
  const facts = [
    t.owner ? `owner ${t.owner}` : t.assign ? `for ${t.assign}` : "",
    t.blocked_by?.length ? `blocked by ${t.blocked_by.map((b) => `#${b}`).join(", ")}` : "",
  ].filter(Boolean);
  return el(
    "li",
    { class: "card task", "data-task": String(t.id), "data-state": t.column },
    head,
    facts.length ? el("div", { class: "meta" }, facts.join(" · ")) : null,
    t.result ? el("div", { class: "result" }, "result attached") : null,
  );
}

/** An agent's latest runs: every agent's table has the same columns, of the
 * same widths (style.css), so that they line up from one agent to the next.
 * `waiting`: the run in progress is held for an approval. */
function runsTable(runs: Run[], waiting: boolean) {
  const columns = ["started", "trigger", "status", "took", "tokens", "cost"];
  const head = el("tr", {}, ...columns.map((h, i) => el("th", { class: i > 2 ? `c-${h} num` : `c-${h}` }, h)));
  const status = (r: Run) => (waiting && r.status === "running" ? badge("waiting") : badge(r.status));
  const rows = runs.map((r) =>
    el(
      "tr",
      { title: r.error ?? "" },
      el("td", {}, time(r.started_at)),
      el("td", {}, r.trigger),
      el("td", {}, status(r)),
      el("td", { class: "num" }, r.duration_ms === undefined ? "…" : seconds(r.duration_ms)),
      el("td", { class: "num" }, tokens(r.usage)),
      el("td", { class: "num" }, cost(r.usage)),
    ),
  );
  return el("table", { class: "runs" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

const atTheEnd = (ol: HTMLElement) => ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 4;

/** Shows the channel's end, and sizes it to whole messages: the first one shown
 * starts at its top, not halfway through (at most its max-height, style.css).
 * Measured in fractional pixels: rounded offsets would cut a pixel off. */
function showEnd(ol: HTMLElement) {
  ol.style.height = "";
  const origin = ol.getBoundingClientRect().top + ol.clientTop - ol.scrollTop;
  const tops = [...ol.children].map((li) => li.getBoundingClientRect().top - origin);
  const last = ol.lastElementChild?.getBoundingClientRect();
  if (!last) return;
  const room = ol.clientHeight;
  const bottom = last.bottom - origin;
  let top = bottom;
  for (let i = tops.length - 1; i >= 0 && bottom - tops[i] <= room; i--) top = tops[i];
  // All of it fits, or one message is taller than the whole panel.
  if (bottom <= room || top === bottom) {
    ol.scrollTop = ol.scrollHeight;
    return;
  }
  ol.style.height = `${Math.ceil(bottom - top) + ol.offsetHeight - ol.clientHeight}px`;
  ol.scrollTop = top;
}

function textOf(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content.map((c) => (c && typeof c === "object" && "text" in c ? String(c.text) : "")).join(" ");
}

function applyContext(ctx: McpUiHostContext | undefined) {
  if (!ctx) return;
  if (ctx.theme) applyDocumentTheme(ctx.theme);
  if (ctx.styles?.variables) applyHostStyleVariables(ctx.styles.variables);
  if (ctx.styles?.css?.fonts) applyHostFonts(ctx.styles.css.fonts);
}

const app = new App({ name: "agent-worker dashboard", version: "1" }, {}, { autoResize: true });
const board = new Dashboard(app);
app.ontoolinput = (p) => board.show(instanceOf(p.arguments as Record<string, unknown> | undefined));
app.ontoolresult = (p) => board.show(instanceOf(p.structuredContent as Record<string, unknown> | undefined));
app.onhostcontextchanged = (ctx) => applyContext(ctx);
app.onteardown = async () => {
  board.torn = true;
  board.pause();
  return {};
};
// Hidden (another tab, scrolled away in some hosts): no polling until seen again.
document.addEventListener("visibilitychange", () => (document.hidden ? board.pause() : board.restart()));

$<HTMLSelectElement>("instance").onchange = (e) => board.switchTo((e.target as HTMLSelectElement).value);
$("viewer-close").onclick = () => board.closeViewer();
// Links (http and https only) open through the host, which may ask the person
// first; the page itself navigates nowhere.
const viaHost = (e: MouseEvent) => {
  const a = (e.target as Element).closest?.("a[href]") as HTMLAnchorElement | null;
  if (!a) return;
  e.preventDefault();
  void app.openLink({ url: a.href }).catch(() => {});
};
for (const where of ["viewer-body", "channel"]) {
  $(where).addEventListener("click", viaHost);
  $(where).addEventListener("auxclick", viaHost);
}
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && !$("viewer").hidden) board.closeViewer();
});
setInterval(() => board.tick(), 1000);
// Another width wraps the messages anew: whole ones again at the end.
window.addEventListener("resize", () => atTheEnd($("channel")) && showEnd($("channel")));

void (async () => {
  await app.connect();
  applyContext(app.getHostContext());
  // The call the host shows may already have said which instance; else the newest.
  if (board.generation === 0) board.restart();
})();
