// Builds the dashboard into one self-contained HTML file: the app's script
// (with the ext-apps SDK bundled in) and its style inlined into the page, so
// that the host's sandbox, which allows no outside domain, needs nothing else.
//   node build.mjs [OUT]   (default dist/dashboard.html)
import { build } from "esbuild";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, "dist", "dashboard.html");

const bundled = await build({
  entryPoints: [join(here, "src", "app.ts")],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2022",
  platform: "browser",
  legalComments: "none",
  charset: "utf8",
  write: false,
});
const js = bundled.outputFiles[0].text;
if (/<\/script/i.test(js)) throw new Error("the bundle contains </script: it cannot be inlined");
const css = readFileSync(join(here, "src", "style.css"), "utf8");
const page = readFileSync(join(here, "src", "index.html"), "utf8");
const [before, after] = page.split("<!--SCRIPT-->");
if (after === undefined || !before.includes("/*STYLE*/")) {
  throw new Error("src/index.html must hold /*STYLE*/ and <!--SCRIPT-->");
}
const html = before.replace("/*STYLE*/", () => css) + `<script>${js}</script>` + after;
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, html);
console.error(`dashboard: ${out} (${html.length} bytes)`);
