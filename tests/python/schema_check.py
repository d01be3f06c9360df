"""Checks tool schemas the way strict clients read them.

Usage: python schema_check.py <tools.json>

<tools.json> is the server's tools/list result (a list of tools). Every input and
output schema must be a valid JSON Schema Draft 2020-12 document, and portable:
no "null" in a type, no $ref, only standard formats, every tool titled, input
objects closed to unknown properties. Prints one line per problem and exits 1 if
there is any.
"""

import json
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

STANDARD_FORMATS = {
    "date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "uuid", "regex",
}


def walk(node, path, problems, tool):
    if isinstance(node, dict):
        t = node.get("type")
        if t == "null" or (isinstance(t, list) and "null" in t):
            problems.append(f"{tool}: {path}: type allows null ({t})")
        if "$ref" in node or "$defs" in node:
            problems.append(f"{tool}: {path}: uses $ref/$defs")
        f = node.get("format")
        if f is not None and f not in STANDARD_FORMATS:
            problems.append(f"{tool}: {path}: non-standard format {f!r}")
        for k, v in node.items():
            walk(v, f"{path}/{k}", problems, tool)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, f"{path}/{i}", problems, tool)


def main() -> int:
    tools = json.load(open(sys.argv[1]))
    problems = []
    for t in tools:
        name = t["name"]
        if not t.get("title"):
            problems.append(f"{name}: no title")
        for key in ("inputSchema", "outputSchema"):
            s = t.get(key)
            if s is None:
                problems.append(f"{name}: no {key}")
                continue
            try:
                Draft202012Validator.check_schema(s)
            except SchemaError as e:
                problems.append(f"{name}: {key} is not valid Draft 2020-12: {e.message}")
            walk(s, key, problems, name)
            if s.get("type") != "object":
                problems.append(f"{name}: {key} is not an object schema")
        if t.get("inputSchema", {}).get("additionalProperties") is not False:
            problems.append(f"{name}: inputSchema accepts unknown properties")
    for p in problems:
        print(p)
    print(f"{len(tools)} tools checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
