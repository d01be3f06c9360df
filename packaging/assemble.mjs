// The files of the packages that `scripts/package` makes, from one version (the
// workspace's), the names in release.json and the binaries it built:
//
//   node assemble.mjs platforms                 "npm target exe" per declared platform
//   node assemble.mjs stage VERSION OUT HOST_BIN PLATFORM=BIN...
//       OUT/npm/agent-worker/ (the launcher), OUT/npm/agent-worker-PLATFORM/ for
//       each built one, OUT/mcpb/PLATFORM/ (a bundle's folder, its tools asked of
//       HOST_BIN over stdio)
//   node assemble.mjs server-json VERSION OUT MCPB_FILE...
//       OUT/server.json for the MCP registry, naming the launcher and the bundles
//
// Plain Node (18 or later), no dependencies.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.dirname(here);
const release = JSON.parse(fs.readFileSync(path.join(here, "release.json"), "utf8"));
const DESCRIPTION = "A multi-agent orchestration kernel that is itself an MCP server";
const KEYWORDS = ["mcp", "mcp-server", "agents", "multi-agent", "orchestration"];
const SERVER_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";

const platformPackage = (p) => `${release.npm_scope}/agent-worker-${p.npm}`;
const platform = (npm) =>
  release.platforms.find((p) => p.npm === npm) ?? die(`unknown platform ${npm} (release.json)`);

function die(message) {
  process.stderr.write(`assemble: ${message}\n`);
  process.exit(1);
}

function write(file, content) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof content === "string" ? content : `${JSON.stringify(content, null, 2)}\n`);
}

function copy(from, to, mode) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
  if (mode) fs.chmodSync(to, mode);
}

function launcherPackage(version) {
  return {
    name: release.npm_launcher,
    version,
    description: DESCRIPTION,
    license: "MIT",
    keywords: KEYWORDS,
    bin: { "agent-worker": "bin/agent-worker.js" },
    files: ["bin", "LICENSE", "README.md"],
    engines: { node: ">=18" },
    mcpName: release.registry_name,
    optionalDependencies: Object.fromEntries(release.platforms.map((p) => [platformPackage(p), version])),
  };
}

function platformManifest(p, version) {
  return {
    name: platformPackage(p),
    version,
    description: `The agent-worker binary for ${p.npm} (${p.target}); install ${release.npm_launcher}, which runs it`,
    license: "MIT",
    os: [p.os],
    cpu: [p.cpu],
    ...(p.libc ? { libc: [p.libc] } : {}),
    files: ["bin", "LICENSE", "README.md"],
    preferUnplugged: true,
    publishConfig: { access: "public" },
  };
}

const README_LAUNCHER = `# agent-worker

${DESCRIPTION}. This package runs the prebuilt binary of your platform (from the
optional dependency that matches it), so no Rust toolchain is needed:

\`\`\`sh
npx -y agent-worker --version
claude mcp add -s user agent-worker -- npx -y agent-worker
\`\`\`

In a client's JSON configuration: \`{"command": "npx", "args": ["-y", "agent-worker"]}\`.
The stdio launch relays to a kernel it starts in the background in the data dir
(the platform's data folder, or \`AGENT_WORKER_HOME\`). \`agent-worker --help\` lists
the flags; the book in the repository is the documentation.
`;

const readmePlatform = (p) => `# ${platformPackage(p)}

The agent-worker binary for ${p.npm} (\`${p.target}\`). Install \`${release.npm_launcher}\`
instead: it depends on this package where it fits and runs its binary.
`;

/// The lead's tools, asked of the binary itself over stdio (a kernel in its own
/// process, in a data dir of its own that is removed afterwards).
async function tools(bin) {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), "agent-worker-tools-"));
  try {
    const child = spawn(bin, ["--foreground", "--data-dir", data, "--log", "warn"], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    const replies = new Map();
    let buffer = "";
    let wake = () => {};
    child.stdout.on("data", (chunk) => {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (!line) continue;
        const msg = JSON.parse(line);
        if (msg.id !== undefined) replies.set(msg.id, msg);
        wake();
      }
    });
    const send = (msg) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
    const reply = (id) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${bin}: no answer to request ${id} in 60 s`)), 60_000);
        const check = () => {
          if (!replies.has(id)) return;
          clearTimeout(timer);
          const r = replies.get(id);
          r.error ? reject(new Error(`${bin}: ${JSON.stringify(r.error)}`)) : resolve(r.result);
        };
        wake = check;
        check();
      });
    send({
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "package", version: "1" } },
    });
    await reply(1);
    send({ method: "notifications/initialized" });
    send({ id: 2, method: "tools/list", params: {} });
    const list = await reply(2);
    child.stdin.end();
    await new Promise((resolve) => child.on("exit", resolve));
    // A tool's first sentence: the bundle's list is for a person choosing it.
    return list.tools.map((t) => ({ name: t.name, description: firstSentence(t.description ?? "") }));
  } finally {
    fs.rmSync(data, { recursive: true, force: true });
  }
}

function firstSentence(description) {
  const text = description.replace(/\s+/g, " ");
  const end = text.search(/\.(\s|$)/);
  return end < 0 ? text.trim() : text.slice(0, end + 1).trim();
}

function bundleManifest(p, version, toolList) {
  return {
    manifest_version: "0.3",
    name: "agent-worker",
    display_name: "agent-worker",
    version,
    description: DESCRIPTION,
    long_description:
      "You add it as one MCP server; from there the assistant creates agents that run as worker " +
      "subprocesses of Claude Code, Codex, Gemini CLI, OpenCode, Cursor, a direct API loop or a " +
      "scripted mock, and that work together through a shared channel, inboxes, documents, a task " +
      "board and votes. The team lives in a kernel that outlives the client, its state in one " +
      "SQLite file in the data folder.",
    author: { name: release.author },
    license: "MIT",
    keywords: KEYWORDS,
    icon: "icon.png",
    server: {
      type: "binary",
      entry_point: `server/${p.exe}`,
      mcp_config: {
        command: `\${__dirname}/server/${p.exe}`,
        args: [],
        env: { AGENT_WORKER_HOME: "${user_config.data_dir}" },
      },
    },
    tools: toolList,
    compatibility: { platforms: [p.os] },
    user_config: {
      data_dir: {
        type: "directory",
        title: "Data folder",
        description:
          "Where the kernel keeps its state: its SQLite file, logs and the admin token. " +
          "Left empty, the platform's data folder (as for every other launch).",
        required: false,
        // A host substitutes a setting's default when the user gives none (an
        // unset one would reach the server as the placeholder itself); the
        // server takes an empty AGENT_WORKER_HOME as unset.
        default: "",
      },
    },
  };
}

async function stage(version, out, hostBin, built) {
  const launcher = path.join(out, "npm", "agent-worker");
  write(path.join(launcher, "package.json"), launcherPackage(version));
  copy(path.join(here, "launcher.js"), path.join(launcher, "bin", "agent-worker.js"), 0o755);
  copy(path.join(repo, "LICENSE"), path.join(launcher, "LICENSE"));
  write(path.join(launcher, "README.md"), README_LAUNCHER);
  const toolList = await tools(hostBin);
  for (const arg of built) {
    const [npm, bin] = arg.split("=");
    const p = platform(npm);
    const dir = path.join(out, "npm", `agent-worker-${p.npm}`);
    write(path.join(dir, "package.json"), platformManifest(p, version));
    copy(bin, path.join(dir, "bin", p.exe), 0o755);
    copy(path.join(repo, "LICENSE"), path.join(dir, "LICENSE"));
    write(path.join(dir, "README.md"), readmePlatform(p));
    const bundle = path.join(out, "mcpb", p.npm);
    write(path.join(bundle, "manifest.json"), bundleManifest(p, version, toolList));
    copy(bin, path.join(bundle, "server", p.exe), 0o755);
    copy(path.join(here, "icon.png"), path.join(bundle, "icon.png"));
    copy(path.join(repo, "LICENSE"), path.join(bundle, "LICENSE"));
  }
  console.log(`${toolList.length} tools listed in the bundle's manifest`);
}

function serverJson(version, out, bundles) {
  const assets = release.release_assets.replace("{version}", version);
  const sha256 = (f) => createHash("sha256").update(fs.readFileSync(f)).digest("hex");
  const dataDir = {
    name: "AGENT_WORKER_HOME",
    description: "The data folder (default: the platform's data folder)",
    isRequired: false,
    format: "filepath",
  };
  write(path.join(out, "server.json"), {
    $schema: SERVER_SCHEMA,
    name: release.registry_name,
    title: "agent-worker",
    description: DESCRIPTION,
    version,
    packages: [
      {
        registryType: "npm",
        identifier: release.npm_launcher,
        version,
        runtimeHint: "npx",
        transport: { type: "stdio" },
        environmentVariables: [dataDir],
      },
      ...bundles.map((f) => ({
        registryType: "mcpb",
        identifier: `${assets}/${path.basename(f)}`,
        version,
        fileSha256: sha256(f),
        transport: { type: "stdio" },
      })),
    ],
  });
}

const [command, ...args] = process.argv.slice(2);
if (command === "platforms") {
  for (const p of release.platforms) console.log(`${p.npm} ${p.target} ${p.exe}`);
} else if (command === "stage" && args.length >= 4) {
  const [version, out, hostBin, ...built] = args;
  await stage(version, out, hostBin, built);
} else if (command === "server-json" && args.length >= 2) {
  const [version, out, ...bundles] = args;
  serverJson(version, out, bundles);
} else {
  die("usage: assemble.mjs platforms | stage VERSION OUT HOST_BIN PLATFORM=BIN... | server-json VERSION OUT MCPB...");
}
