"""An OTLP/HTTP receiver for the trace tests: decodes what exporters POST.

Usage: python otlp_receiver.py

Listens on 127.0.0.1 (a free port, printed first on stdout), takes
POST /v1/traces (protobuf, or gzip of it) and answers 200 to every export (logs
and metrics too, which it ignores). When stdin closes it prints every span it
received as one JSON line: name, trace_id, span_id, parent (hex, "" for a root),
kind (1 internal, 2 server, 3 client), status (0 unset, 1 ok, 2 error) and its
message, its attributes, its links (trace_id, span_id), and its resource's.
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
LOCK = threading.Lock()
MAX_BODY = 16 * 1024 * 1024


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {a.key: value(a.value) for a in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        if length > MAX_BODY:
            self.send_error(413)
            return
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        kind = self.headers.get("Content-Type") or ""
        if self.path.endswith("/v1/traces") and "protobuf" in kind:
            request = ExportTraceServiceRequest.FromString(body)
            got = []
            for rs in request.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        got.append({
                            "name": s.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex(),
                            "kind": s.kind,
                            "status": s.status.code,
                            "message": s.status.message,
                            "attributes": attributes(s.attributes),
                            "links": [
                                {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()}
                                for l in s.links
                            ],
                            "resource": resource,
                        })
            with LOCK:
                SPANS.extend(got)
        out = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()
    with LOCK:
        for s in SPANS:
            print(json.dumps(s, default=str))
    sys.stdout.flush()


main()
