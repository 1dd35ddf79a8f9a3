#!/usr/bin/env python3
"""A stand-in for llama.cpp's `llama-server` in tests: the same command line, /health and /completion, and
timings that say it decodes at 50 tokens/s plain and 100 with --spec-type. It records its arguments and every
request, each with its process id, in $FAKE_LLAMA_SERVER_LOG."""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
host = args[args.index("--host") + 1]
speculative = "--spec-type" in args
log = os.environ["FAKE_LLAMA_SERVER_LOG"]


def record(entry):
    with open(log, "a") as f:
        f.write(json.dumps({**entry, "pid": os.getpid()}) + "\n")


record({"args": args})


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"status": "ok"})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        settings = {k: v for k, v in request.items() if k != "prompt"}
        record({"request": settings, "prompt_tokens": len(request["prompt"])})
        n = min(20, request["n_predict"])
        rate = 100.0 if speculative else 50.0
        self._send(
            {
                "tokens": request["prompt"][-n:],
                "timings": {"prompt_ms": 80.0, "predicted_n": n, "predicted_ms": 1000.0 * (n - 1) / rate, "draft_n": 0},
            }
        )


HTTPServer((host, port), Handler).serve_forever()
