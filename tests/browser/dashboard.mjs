// Drives the team dashboard (an MCP App) in the MCP Inspector's web UI, in
// headless Chromium (playwright-core): connects, opens the dashboard from the
// Apps tab (its own tool, dashboard_open), and talks to the Rust test over stdio:
//   prints READY            the dashboard shows the coder waiting for its approval
//   reads   SENT            the test has sent "status please" with channel_send
//   prints  SEEN <epoch ms> when that message showed in the dashboard
//   prints  APPROVED        after clicking Approve, when the dashboard shows it
//   prints  BOARD           showing @global:main, where the test adds a plan
//   reads   ADDED / CLAIMED / DONE, the board's moves the test made; prints OPEN
//                           and HELD when the first two show (DONE: board.png)
//   prints  RESULT <json>   what else it checked (the panel's title, plurals, the
//                           runs' columns, the picker, the channel's top, the
//                           document's Markdown, theme, keyboard, switcher)
// Run by tests/inspector_web.rs on the Inspector's Node. Environment:
//   PLAYWRIGHT_CORE, CHROMIUM, INSPECTOR_URL, USER_DATA_DIR as inspector_web.mjs;
//   SHOTS  a folder for dashboard-light.png (an approval pending), dashboard-dark.png
//          (decided, a document open), board.png (a task board moving) and, if it
//          fails, failure.png
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const require = createRequire(import.meta.url);
const { chromium } = require(env("PLAYWRIGHT_CORE"));
const shots = env("SHOTS");

const deadline = setTimeout(() => {
  console.error("dashboard: timed out");
  process.exit(1);
}, 100_000);

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function expectLine(word) {
  const { value, done } = await lines.next();
  if (done || value.trim() !== word) throw new Error(`expected ${word} from the test, got ${value}`);
}

const context = await chromium.launchPersistentContext(env("USER_DATA_DIR"), {
  executablePath: env("CHROMIUM"),
  headless: true,
  // Tall enough that the light screenshot shows the whole dashboard.
  viewport: { width: 1280, height: 1300 },
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = context.pages()[0] ?? (await context.newPage());
let failure = null;
const result = {};
try {
  await context.route(
    (url) => !/^(https?:\/\/127\.0\.0\.1[:/]|about:|data:)/.test(url.toString()),
    (route) => route.abort(),
  );
  page.setDefaultTimeout(20_000);
  await page.goto(env("INSPECTOR_URL"));
  const toggle = page.getByRole("switch", { name: /^Connect or disconnect/ });
  await toggle.waitFor({ state: "attached" });
  await toggle.dispatchEvent("click");
  await page.waitForSelector('[data-testid="connection-status"][data-status="connected"]');

  // Apps: the tools that open the dashboard; its own needs no argument.
  await page.locator("label", { hasText: /^Apps$/ }).first().click();
  await page.getByRole("button", { name: /Team dashboard/ }).first().click();
  // A tool with no required argument opens at once; else "Open App" runs it.
  const open = page.getByTestId("open-app");
  const ready = page.locator('[data-app-status="ready"]');
  await open.or(ready).first().waitFor();
  if (!(await ready.count())) await open.click();
  await ready.waitFor();
  const frame = page.frames().find((f) => f.url() === "about:srcdoc");
  if (!frame) throw new Error("no app frame (about:srcdoc)");
  await frame.waitForSelector('[data-agent="coder"] .badge.s-waiting');
  await frame.waitForSelector('[data-approval] button:has-text("Approve")');
  await frame.waitForSelector('[data-agent="reviewer"] .badge.s-idle');
  const panel = page.getByTestId("apps-form");
  // The panel is titled as the dashboard, not as some tool that opens it.
  result.title = await panel.locator("h1, h2, h3, h4, p, span, div")
    .filter({ hasText: /^(Team dashboard|dashboard_open|List workflows)$/ }).first().textContent();
  result.coder = await frame.locator('[data-agent="coder"] .card-head').textContent();
  result.texts = await frame.evaluate(() =>
    [...document.querySelectorAll("#totals, #instance option, [data-agent] .meta")].map((e) => e.textContent));
  result.columns = await frame.evaluate(() =>
    [...document.querySelectorAll("table.runs")].map((t) =>
      [...t.rows[0].cells, ...t.rows[1].cells].map((c) => Math.round(c.getBoundingClientRect().left))));
  result.headings = await frame.evaluate(() =>
    [...document.querySelector("table.runs").rows[0].cells].map((c) => c.textContent));
  // The picker's text fits it: the select is wider than its text, arrow and padding.
  result.picker = await frame.evaluate(() => {
    const s = document.getElementById("instance");
    const probe = document.createElement("span");
    probe.style.font = getComputedStyle(s).font;
    probe.style.whiteSpace = "pre";
    probe.textContent = s.selectedOptions[0].textContent;
    document.body.append(probe);
    const text = probe.getBoundingClientRect().width;
    probe.remove();
    const cs = getComputedStyle(s);
    const room = s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
    return { text: Math.ceil(text), room: Math.floor(room), label: s.selectedOptions[0].textContent };
  });
  result.message_marks = await frame.evaluate(() =>
    [...document.querySelectorAll("#channel code, #channel strong")].map((e) => e.textContent));
  result.width = await frame.evaluate(() => document.documentElement.clientWidth);
  result.overflows = await frame.evaluate(
    () => document.documentElement.scrollWidth > document.documentElement.clientWidth,
  );
  await panel.screenshot({ path: `${shots}/dashboard-light.png` });
  console.log("READY");

  // A message the test sends shows within a second.
  await expectLine("SENT");
  await frame.waitForSelector('#channel li:has-text("status please")', { timeout: 5_000 });
  console.log(`SEEN ${Date.now()}`);

  // Approve, as the person would: by keyboard, the button focused and Enter.
  const approve = frame.locator('[data-approval] button:has-text("Approve")').first();
  await approve.focus();
  await approve.press("Enter");
  await frame.waitForSelector('[data-approval] .badge.s-approved');
  console.log("APPROVED");
  // The channel, scrolled to its end, starts with a whole message.
  await frame.waitForSelector('#channel li:has-text("is approved")');
  result.channel = await frame.evaluate(() => {
    const ol = document.getElementById("channel");
    const box = ol.getBoundingClientRect();
    const top = box.top + ol.clientTop;
    const bottom = top + ol.clientHeight;
    const items = [...ol.children].map((li) => li.getBoundingClientRect());
    const first = items.find((r) => r.bottom > top + 0.5);
    return {
      scrolls: ol.scrollHeight > ol.clientHeight,
      first_cut: Math.round(top - first.top),
      last_cut: Math.round(items[items.length - 1].bottom - bottom),
    };
  });

  // The document viewer, by keyboard: Enter opens, Escape closes and gives focus back.
  const doc = frame.locator('#documents button:has-text("plan.md")');
  await doc.focus();
  await doc.press("Enter");
  await frame.waitForSelector('#viewer:not([hidden]) #viewer-body:has-text("Ship the dashboard")');
  result.viewer_focus = await frame.evaluate(() => document.activeElement?.id);
  // Its Markdown rendered: elements for the constructs, the raw HTML as text.
  result.markdown = await frame.evaluate(() => {
    const b = document.getElementById("viewer-body");
    const all = (sel) => [...b.querySelectorAll(sel)].map((e) => e.textContent);
    return {
      heading: all("h4"),
      items: all("li"),
      strong: all("strong"),
      code: all("code"),
      links: [...b.querySelectorAll("a")].map((a) => a.getAttribute("href")),
      raw: b.textContent.includes("<img src=x onerror=alert(1)>"),
      elements: [...new Set([...b.querySelectorAll("*")].map((e) => e.tagName.toLowerCase()))].sort(),
    };
  });
  // A link opens through the host (the Inspector opens a window), not in the app's frame.
  const opened = context.waitForEvent("request", {
    predicate: (r) => r.url().startsWith("https://modelcontextprotocol.io"),
    timeout: 10_000,
  });
  await frame.locator("#viewer-body a").first().click();
  result.link_opened = (await opened).url();
  result.app_stays = !frame.isDetached() && frame.url() === "about:srcdoc";
  for (const p of context.pages()) if (p !== page) await p.close();
  await frame.locator("body").press("Escape");
  await frame.waitForSelector("#viewer", { state: "hidden" });
  result.focus_back = await frame.evaluate(() => document.activeElement?.textContent);

  // Light and dark: the host's theme reaches the page.
  result.theme_light = await frame.evaluate(() => document.documentElement.dataset.theme ?? null);
  result.bg_light = await frame.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await doc.press("Enter");
  await page.emulateMedia({ colorScheme: "dark" });
  await frame.waitForFunction(
    (light) => getComputedStyle(document.body).backgroundColor !== light,
    result.bg_light,
    { timeout: 10_000 },
  );
  result.theme_dark = await frame.evaluate(() => document.documentElement.dataset.theme ?? null);
  result.bg_dark = await frame.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await panel.screenshot({ path: `${shots}/dashboard-dark.png` });

  // The switcher: another instance, its agents.
  await frame.selectOption("#instance", "@global:main");
  await frame.waitForSelector('[data-agent="bob"]');
  result.switched = await frame.evaluate(() => [...document.querySelectorAll("[data-agent]")].map((e) => e.dataset.agent));

  // The board moves: a plan added shows in open and blocked, a claim moves a
  // task to claimed with its owner, done moves it to done with its result.
  console.log("BOARD");
  await expectLine("ADDED");
  const card = (column, title) => `[data-column="${column}"] [data-task]:has-text("${title}")`;
  await frame.waitForSelector(card("open", "Design the API"), { timeout: 5_000 });
  await frame.waitForSelector(card("blocked", "Ship it"));
  result.board_added = await columns(frame);
  console.log("OPEN");
  await expectLine("CLAIMED");
  await frame.waitForSelector(`${card("claimed", "Design the API")}:has-text("owner bob")`, { timeout: 5_000 });
  result.board_claimed = await columns(frame);
  console.log("HELD");
  await expectLine("DONE");
  await frame.waitForSelector(`${card("done", "Design the API")}:has-text("result attached")`, { timeout: 5_000 });
  await frame.waitForSelector(`${card("claimed", "Build the client")}:has-text("owner bob")`);
  result.board_done = await columns(frame);
  result.board_labels = await frame.evaluate(() =>
    [...document.querySelectorAll("#board [role=group]")].map((g) => document.getElementById(g.getAttribute("aria-labelledby")).textContent));
  await page.emulateMedia({ colorScheme: "light" });
  await frame.waitForFunction((dark) => getComputedStyle(document.body).backgroundColor !== dark, result.bg_dark);
  // The app alone (its body is as tall as what it shows), for the book.
  await frame.locator("body").screenshot({ path: `${shots}/board.png` });
  result.board_overflows = await frame.evaluate(
    () => document.documentElement.scrollWidth > document.documentElement.clientWidth,
  );
} catch (e) {
  failure = e;
  await page.screenshot({ path: `${shots}/failure.png`, fullPage: true }).catch(() => {});
} finally {
  await context.close();
  clearTimeout(deadline);
}
/** The board's cards by column, as "#id title | meta | result". */
async function columns(frame) {
  return frame.evaluate(() => Object.fromEntries(
    [...document.querySelectorAll("#board [data-column]")].map((c) => [
      c.dataset.column,
      [...c.querySelectorAll("[data-task]")].map((t) =>
        [...t.children].map((e) => e.textContent).join(" | ")),
    ])));
}

if (failure) {
  console.error(`dashboard: ${failure.message ?? failure}`);
  process.exit(1);
}
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(0);
