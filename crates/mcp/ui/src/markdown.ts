// Markdown as DOM nodes, for the documents the team writes. Nothing is parsed
// as HTML: every piece of text becomes a text node, and only the constructs
// below make elements (headings, paragraphs, lists, quotes, code, rules,
// tables; strong, emphasis, strikethrough, code spans, links). A tag in the
// text shows as the text it is. A link keeps its target only when it is
// http(s); the page hands it to the host to open (see `links`).

/** Nesting (quotes, lists, inline marks) deeper than this shows as text. */
const MAX_DEPTH = 8;
/** A block of inline text longer than this shows as plain text (the marks' scan is quadratic). */
const MAX_INLINE = 5000;

type Kids = (Node | string)[];

function h<K extends keyof HTMLElementTagNameMap>(tag: K, kids: Kids = [], attrs: Record<string, string> = {}) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.append(...kids);
  return e;
}

/** The URL when it is http or https, else undefined (javascript:, data:, relative…). */
export function safeUrl(raw: string): string | undefined {
  try {
    const u = new URL(raw);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : undefined;
  } catch {
    return undefined;
  }
}

function link(text: Kids, raw: string): Node {
  const url = safeUrl(raw);
  if (!url) return h("span", text);
  return h("a", text, { href: url, rel: "noopener noreferrer", target: "_blank" });
}

// One alternative per inline construct, tried left to right at each position:
// 1-2 code span, 3-4 link, 5 strong, 6 strong, 7 em, 8 em, 9 strikethrough,
// 10 <autolink>, 11 bare URL, 12 escaped character.
const INLINE = new RegExp(
  [
    /(`+)([^`][\s\S]*?)\1(?!`)/,
    /\[([^\][]*)\]\(\s*<?([^\s()<>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/,
    /\*\*(?=\S)([\s\S]*?\S)\*\*/,
    /(?<!\w)__(?=\S)([\s\S]*?\S)__(?!\w)/,
    /\*(?=[^\s*])([\s\S]*?[^\s*])\*/,
    /(?<!\w)_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/,
    /~~(?=\S)([\s\S]*?\S)~~/,
    /<(https?:\/\/[^\s<>]+)>/,
    /(https?:\/\/[^\s<>]*[^\s<>.,:;!?"')\]])/,
    /\\([!-/:-@[-`{-~])/,
  ]
    .map((r) => r.source)
    .join("|"),
  "g",
);

/** Inline Markdown as nodes. */
export function inline(text: string, depth = 0): Kids {
  if (depth > MAX_DEPTH || text.length > MAX_INLINE) return [text];
  const out: Kids = [];
  let at = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > at) out.push(text.slice(at, m.index));
    at = m.index + m[0].length;
    const g = m.slice(1);
    const deeper = (s: string) => inline(s, depth + 1);
    if (g[1] !== undefined) out.push(h("code", [g[1].replace(/^ (.*) $/s, "$1")]));
    else if (g[3] !== undefined) out.push(link(deeper(g[2]), g[3]));
    else if (g[4] !== undefined || g[5] !== undefined) out.push(h("strong", deeper(g[4] ?? g[5])));
    else if (g[6] !== undefined || g[7] !== undefined) out.push(h("em", deeper(g[6] ?? g[7])));
    else if (g[8] !== undefined) out.push(h("del", deeper(g[8])));
    else if (g[9] !== undefined || g[10] !== undefined) out.push(link([g[9] ?? g[10]], g[9] ?? g[10]));
    else out.push(g[11]);
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
const TABLE_RULE = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

const cells = (row: string) =>
  row
    .trim()
    .replace(/^\||\|$/g, "")
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());

/** Whether `line` starts a block other than a paragraph (so a paragraph ends before it). */
function startsBlock(line: string, next: string | undefined): boolean {
  return (
    FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line) ||
    (line.includes("|") && next !== undefined && TABLE_RULE.test(next))
  );
}

/** Block Markdown as nodes; headings start at `<h{top}>`. */
export function blocks(text: string, top = 1, depth = 0): Node[] {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const out: Node[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const [node, next] = block(lines, i, top, depth);
    out.push(node);
    i = next;
  }
  return out;
}

/** The block that starts at line `i`, and the line after it. */
function block(lines: string[], i: number, top: number, depth: number): [Node, number] {
  const line = lines[i];
  const fence = FENCE.exec(line);
  if (fence) {
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !lines[j].trimStart().startsWith(fence[1])) body.push(lines[j++]);
    return [h("pre", [h("code", [body.join("\n")])]), j + 1];
  }
  const heading = HEADING.exec(line);
  if (heading) {
    const level = Math.min(6, top + heading[1].length - 1) as 1 | 2 | 3 | 4 | 5 | 6;
    return [h(`h${level}`, inline(heading[2] ?? "", depth)), i + 1];
  }
  if (RULE.test(line)) return [h("hr"), i + 1];
  if (depth < MAX_DEPTH && QUOTE.test(line)) {
    const inner: string[] = [];
    let j = i;
    for (let m; j < lines.length && (m = QUOTE.exec(lines[j])); j++) inner.push(m[1]);
    return [h("blockquote", blocks(inner.join("\n"), top, depth + 1)), j];
  }
  if (depth < MAX_DEPTH && ITEM.test(line)) return list(lines, i, top, depth);
  if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) return table(lines, i, depth);
  const para: string[] = [line.trim()];
  let j = i + 1;
  while (j < lines.length && lines[j].trim() && !startsBlock(lines[j], lines[j + 1])) para.push(lines[j++].trim());
  return [h("p", inline(para.join("\n"), depth)), j];
}

/** A list: its items while they have the first one's kind and indent; an item's
 * indented lines are its own blocks (a nested list). */
function list(lines: string[], i: number, top: number, depth: number): [Node, number] {
  const first = ITEM.exec(lines[i])!;
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items: Node[] = [];
  let j = i;
  const sibling = (l: string | undefined) => {
    const m = l === undefined ? null : ITEM.exec(l);
    return m && m[1].length === indent && /\d/.test(m[2]) === ordered ? m : null;
  };
  while (j < lines.length) {
    // A blank line between two items keeps them in one list.
    if (!lines[j].trim() && sibling(lines[j + 1])) j++;
    const m = sibling(lines[j]);
    if (!m) break;
    const body = [m[3]];
    const inside = indent + m[2].length + 1;
    j++;
    while (j < lines.length) {
      const l = lines[j];
      const lead = l.length - l.trimStart().length;
      if (l.trim() && lead < inside && (ITEM.test(l) || startsBlock(l, lines[j + 1]))) break;
      if (!l.trim() && !(lines[j + 1] ?? "").startsWith(" ".repeat(inside))) break;
      body.push(l.slice(Math.min(lead, inside)));
      j++;
    }
    const task = /^\[([ xX])\][ \t]+/.exec(body[0]);
    if (task) body[0] = `${task[1] === " " ? "☐" : "☑"} ${body[0].slice(task[0].length)}`;
    const kids = blocks(body.join("\n"), top, depth + 1);
    // An item's first paragraph is its text (a nested list follows it).
    const text = kids[0] instanceof HTMLParagraphElement ? [...kids[0].childNodes] : [];
    items.push(h("li", text.length ? [...text, ...kids.slice(1)] : kids));
  }
  const start = ordered ? Number.parseInt(first[2], 10) : 1;
  return [h(ordered ? "ol" : "ul", items, ordered && start !== 1 ? { start: String(start) } : {}), j];
}

function table(lines: string[], i: number, depth: number): [Node, number] {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : ""));
  const row = (tag: "th" | "td", cs: string[]) =>
    h("tr", head.map((_, k) => h(tag, inline(cs[k] ?? "", depth), align[k] ? { class: `align-${align[k]}` } : {})));
  const body: Node[] = [];
  let j = i + 2;
  while (j < lines.length && lines[j].includes("|") && lines[j].trim()) body.push(row("td", cells(lines[j++])));
  return [h("div", [h("table", [h("thead", [row("th", head)]), h("tbody", body)])], { class: "md-table" }), j];
}
