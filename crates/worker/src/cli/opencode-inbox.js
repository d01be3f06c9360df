// One run's OpenCode plugin, written into its scratch folder by the worker: after
// each tool call, what arrived in the agent's inbox (the worker binary in hook
// mode, reading the run's token from the environment) is added to the tool's
// output, so the model reads it in its next request. Nothing new, or any
// failure: the output is left as it was.
import { spawn } from "node:child_process";

const EXE = "__EXE__";
const FILE = "__FILE__";

function inbox() {
  return new Promise((resolve) => {
    const child = spawn(EXE, ["__hook", FILE], { stdio: ["pipe", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("error", () => resolve(""));
    child.on("close", () => {
      try {
        resolve(JSON.parse(out).hookSpecificOutput.additionalContext || "");
      } catch {
        resolve("");
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify({ hook_event_name: "PostToolUse" }));
  });
}

export const AgentWorkerInbox = async () => ({
  "tool.execute.after": async (_input, output) => {
    const news = await inbox();
    if (!news) return;
    // Built-in tools answer in `output`; MCP tools in `content` blocks.
    if (typeof output.output === "string") output.output += "\n\n" + news;
    else if (Array.isArray(output.content)) output.content.push({ type: "text", text: news });
  },
});
