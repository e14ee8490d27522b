"""An OTLP trace receiver for Aether's tests and benchmarks, decoding with the official
`opentelemetry-proto` package: OTLP/HTTP (protobuf, POST /v1/traces) and OTLP/gRPC
(TraceService/Export), each on a port of its own.

Every span received is written as one JSON line to --out (ids in hex, attributes as plain
values, the resource's attributes, the transport and the request's headers beside it); a
line {"forbidden": TEXT} is written when a request's raw bytes contain a --forbid text (an
argument value or a secret that must never leave in a span). With --discard the requests are
read and answered, not decoded (for benchmarks: the receiver's own work stays small).

The first line on stdout is {"http": PORT, "grpc": PORT} once both are listening."""
import argparse
import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

lock = threading.Lock()
args = None
out = None


def value(v: common_pb2.AnyValue):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attributes(kvs) -> dict:
    return {kv.key: value(kv.value) for kv in kvs}


def record(raw: bytes, transport: str, headers: dict) -> None:
    lines = []
    for text in args.forbid:
        if text.encode() in raw:
            lines.append({"forbidden": text})
    if not args.discard:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(raw)
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    lines.append(
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "attributes": attributes(span.attributes),
                            "status": {"code": span.status.code, "message": span.status.message},
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "scope": ss.scope.name,
                            "resource": resource,
                            "transport": transport,
                            "headers": headers,
                        }
                    )
    if lines and out is not None:
        with lock:
            for line in lines:
                out.write(json.dumps(line) + "\n")
            out.flush()


class Http(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(415)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        record(raw, "http", {k.lower(): v for k, v in self.headers.items()})
        body = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


class Grpc(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        headers = {k.lower(): v for k, v in context.invocation_metadata()}
        record(request.SerializeToString(), "grpc", headers)
        return trace_service_pb2.ExportTraceServiceResponse()


def main() -> None:
    global args, out
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="file the spans are written to (JSON lines)")
    parser.add_argument("--forbid", action="append", default=[])
    parser.add_argument("--discard", action="store_true")
    args = parser.parse_args()
    out = open(args.out, "a") if args.out else None

    http = ThreadingHTTPServer(("127.0.0.1", 0), Http)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Grpc(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"http": http.server_address[1], "grpc": grpc_port}), flush=True)
    # Until stdin closes (the test or benchmark that started it is done), or a signal.
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass
    server.stop(0)
    http.shutdown()


if __name__ == "__main__":
    main()
