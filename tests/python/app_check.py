"""Checks an MCP App's metadata against the ext-apps SDK's own JSON Schema.

Usage: python app_check.py <schema.json> <offer.json>

<schema.json> is @modelcontextprotocol/ext-apps' dist/src/generated/schema.json
(Draft 2020-12, with $defs McpUiToolMeta and McpUiResourceMeta). <offer.json> is
{"tools": <tools/list result's tools>, "contents": <resources/read contents>, "uri":
<the app's uri>}, as a host that renders apps received them. Every tool's
`_meta.ui` must be a valid McpUiToolMeta whose resourceUri (when it has one) names
the app; the app's content must be one HTML document of the app MIME type whose
`_meta.ui` is a valid McpUiResourceMeta. Prints one line per problem and exits 1
if there is any.
"""

import json
import sys

from jsonschema import Draft202012Validator

MIME = "text/html;profile=mcp-app"


def validator(schema, name):
    sub = dict(schema["$defs"][name])
    sub["$defs"] = schema["$defs"]
    return Draft202012Validator(sub)


def main():
    schema = json.load(open(sys.argv[1]))
    offer = json.load(open(sys.argv[2]))
    tool_meta = validator(schema, "McpUiToolMeta")
    resource_meta = validator(schema, "McpUiResourceMeta")
    problems = []
    linked = 0
    for t in offer["tools"]:
        ui = (t.get("_meta") or {}).get("ui")
        if ui is None:
            continue
        for e in tool_meta.iter_errors(ui):
            problems.append(f"tool {t['name']}: _meta.ui: {e.message}")
        uri = ui.get("resourceUri")
        if uri is not None:
            linked += 1
            if uri != offer["uri"]:
                problems.append(f"tool {t['name']}: resourceUri {uri!r} is not the app's")
    if linked == 0:
        problems.append("no tool opens the app")
    contents = offer["contents"]
    if len(contents) != 1:
        problems.append(f"the app's resource has {len(contents)} contents, not 1")
    for c in contents:
        if c.get("mimeType") != MIME:
            problems.append(f"content mimeType {c.get('mimeType')!r}, not {MIME}")
        if not c.get("text", "").lstrip().lower().startswith("<!doctype html>"):
            problems.append("content is not an HTML document")
        ui = (c.get("_meta") or {}).get("ui")
        if ui is None:
            problems.append("content has no _meta.ui")
        else:
            for e in resource_meta.iter_errors(ui):
                problems.append(f"content _meta.ui: {e.message}")
    for p in problems:
        print(p)
    print(f"checked {len(offer['tools'])} tools ({linked} open the app) and the app's resource")
    sys.exit(1 if problems else 0)


main()
