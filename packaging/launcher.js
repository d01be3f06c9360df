#!/usr/bin/env node
// The `agent-worker` command of the npm package: it finds the binary that the
// package of this platform holds (one of the optional dependencies in
// package.json, which npm installs only where its os, cpu and libc match) and
// runs it with this process's stdin, stdout and stderr, so an MCP client talks
// to the binary itself. Signals sent here reach it, and its exit is this one's.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

function fail(message) {
  process.stderr.write(`agent-worker: ${message}\n`);
  process.exit(1);
}

function binary() {
  const manifest = require("../package.json");
  const suffix = `/agent-worker-${process.platform}-${process.arch}`;
  const pkg = Object.keys(manifest.optionalDependencies || {}).find((n) => n.endsWith(suffix));
  if (!pkg) {
    const built = Object.keys(manifest.optionalDependencies || {}).join(", ");
    fail(`no prebuilt binary for ${process.platform}-${process.arch} (there are: ${built}); ` +
      "build it from the source with `cargo install agent-worker --locked`");
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    fail(`${pkg}, which holds the binary for this platform, is not installed: ` +
      "npm skips optional dependencies with --omit=optional or --no-optional; install again without it");
  }
  const exe = process.platform === "win32" ? "agent-worker.exe" : "agent-worker";
  return path.join(dir, "bin", exe);
}

const child = spawn(binary(), process.argv.slice(2), { stdio: "inherit" });
child.on("error", (e) => fail(`cannot run ${e.path || "the binary"}: ${e.message}`));

// Forwarded while the child runs; the child's own exit decides ours.
const forwarded = process.platform === "win32" ? ["SIGINT", "SIGBREAK"] : ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
const forward = (signal) => child.kill(signal);
for (const s of forwarded) process.on(s, forward);

child.on("exit", (code, signal) => {
  for (const s of forwarded) process.off(s, forward);
  if (signal) {
    // Die of the same signal, so our parent sees what the binary saw.
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
