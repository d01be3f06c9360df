// Drives the MCP Inspector's web UI in headless Chromium (playwright-core):
// connects to the server the UI was launched for, opens Tools, fills
// workflow_run's form (file, wait_seconds), executes it and reads the result.
// Run by tests/inspector_web.rs on the Inspector's Node. Environment:
//   PLAYWRIGHT_CORE  the playwright-core package dir
//   CHROMIUM         the browser executable
//   INSPECTOR_URL    the web UI's URL with its API token
//   WORKFLOW_FILE    absolute path of the workflow YAML
//   USER_DATA_DIR    a fresh, empty profile dir
//   SCREENSHOT       where to save a PNG of the page at the end
// Prints one line `RESULT <json>` (the negotiated era, whether the UI declared
// the tasks extension, the structured result) and exits 0, or prints why it
// failed and exits 1. A screenshot is taken either way.
import { createRequire } from "node:module";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const require = createRequire(import.meta.url);
const { chromium } = require(env("PLAYWRIGHT_CORE"));

// The whole run, with a margin under the Rust test's own limit.
const deadline = setTimeout(() => {
  console.error("inspector_web: timed out");
  process.exit(1);
}, 45_000);

const context = await chromium.launchPersistentContext(env("USER_DATA_DIR"), {
  executablePath: env("CHROMIUM"),
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
let failure = null;
let result = null;
const page = context.pages()[0] ?? (await context.newPage());
try {
  // Only loopback: the UI's web fonts and anything else outside are refused.
  await context.route(
    (url) => !/^https?:\/\/127\.0\.0\.1[:/]/.test(url.toString()),
    (route) => route.abort(),
  );
  // The UI's MCP client sends each JSON-RPC message through its backend's
  // /api/mcp/send: keep the initialize request to see what it declared.
  let initialize = null;
  page.on("request", (req) => {
    if (!req.url().endsWith("/api/mcp/send")) return;
    try {
      const body = JSON.parse(req.postData() ?? "null");
      if (body?.message?.method === "initialize") initialize = body.message.params;
    } catch {
      // not JSON: not ours to judge
    }
  });
  page.setDefaultTimeout(20_000);
  await page.goto(env("INSPECTOR_URL"));

  // Servers: the one server of the launch, switched on.
  // The switch's input is drawn over by its track (zero size while the page lays
  // out on a busy machine): a click event on the input itself toggles it, as the
  // person's click on the track does.
  const toggle = page.getByRole("switch", { name: /^Connect or disconnect/ });
  await toggle.waitFor({ state: "attached" });
  await toggle.dispatchEvent("click");
  await page.getByText("Connected", { exact: true }).waitFor();
  const era = (await page.getByText(/^MCP \d{4}-\d{2}-\d{2}$/).first().textContent()).slice(4);

  // Tools: workflow_run, its form filled as a user would.
  await page.locator("label", { hasText: /^Tools$/ }).first().click();
  await page.getByRole("button", { name: /workflow_run/ }).click();
  await page.getByLabel("file", { exact: true }).fill(env("WORKFLOW_FILE"));
  await page.getByLabel("wait_seconds", { exact: true }).fill("20");
  await page.getByRole("button", { name: "Execute Tool" }).click();

  // Either the structured output or the error panel ("Tool Call Failed").
  const structured = page.getByTestId("structured-output");
  const failed = page.getByText("Tool Call Failed", { exact: true });
  await structured.or(failed).first().waitFor({ timeout: 30_000 });
  if (await failed.count()) {
    const alert = page.getByRole("alert");
    const why = (await alert.count())
      ? await alert.first().innerText()
      : await failed.locator("xpath=../..").innerText();
    throw new Error(`the UI shows "Tool Call Failed": ${why.replace(/\s+/g, " ")}`);
  }
  // The JSON sits in an Ace editor, which draws only the lines in view: read
  // the editor's whole value.
  const text = await structured
    .locator(".ace_editor")
    .evaluate((el) => el.env?.editor?.getValue() ?? null);
  if (text === null) throw new Error("no editor value in the structured output");
  const caps = initialize?.capabilities ?? {};
  result = {
    era,
    initialize_version: initialize?.protocolVersion ?? null,
    tasks_extension: caps.extensions?.["io.modelcontextprotocol/tasks"] !== undefined,
    tasks_capability: caps.tasks !== undefined,
    structured: JSON.parse(text),
  };
  // For the screenshot: the end of the structured output (its workflow and
  // status) in view.
  await structured.scrollIntoViewIfNeeded();
  await structured
    .locator(".mantine-ScrollArea-viewport")
    .first()
    .evaluate((el) => el.scrollTo(0, el.scrollHeight));
  await page.waitForTimeout(200);
} catch (e) {
  failure = e;
} finally {
  await page.screenshot({ path: env("SCREENSHOT"), fullPage: true }).catch(() => {});
  await context.close();
  clearTimeout(deadline);
}
if (failure) {
  console.error(`inspector_web: ${failure.message ?? failure}`);
  process.exit(1);
}
console.log(`RESULT ${JSON.stringify(result)}`);
