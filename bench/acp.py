#!/usr/bin/env python3
"""`bridle acp` end to end, over real pipes (issue 12):

1. process start (fork/exec of `bridle acp`) to the `initialize` answer on its stdout;
2. the model's first streamed chunk (written by a fake OpenAI-compatible server in this
   process) to the first `agent_message_chunk` `session/update` read from bridle's stdout,
   and, side by side in the same run, the same chunk to its `assistant/chunk` line in the
   session log (what the loop itself adds before a front end sees it).

Both ends of each measurement are read on this process's monotonic clock.
Usage: bench/acp.py BRIDLE_BINARY [RUNS]
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BRIDLE = sys.argv[1]
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 20


def chunk(text, finish=None):
    choice = {"index": 0, "delta": {"content": text}}
    if finish:
        choice["finish_reason"] = finish
    return ("data: " + json.dumps({"choices": [choice]}) + "\n\n").encode()


class Model:
    """A chat-completions server: headers, then the first chunk (its send time recorded),
    a pause, the rest."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = "http://127.0.0.1:%d/v1" % self.sock.getsockname()[1]
        self.sent = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            conn, _ = self.sock.accept()
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"connection: close\r\n\r\n"
            )
            time.sleep(0.05)
            conn.sendall(chunk("Hello"))
            self.sent.append(time.monotonic())
            time.sleep(0.2)
            conn.sendall(chunk(" there.", "stop") + b"data: [DONE]\n\n")
            conn.close()


def lines_of(proc, out):
    for line in proc.stdout:
        out.append((time.monotonic(), json.loads(line)))


def wait_for(out, pred, limit=20.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for t, msg in list(out):
            if pred(msg):
                return t, msg
        time.sleep(0.0005)
    raise SystemExit("no answer within %ss: %s" % (limit, out))


def send(proc, msg):
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()


def one_run(model, root):
    ws = os.path.join(root, "ws")
    os.makedirs(ws, exist_ok=True)
    env = dict(os.environ, HOME=root, BRIDLE_BASE_URL=model.url, BRIDLE_API_KEY="k")
    started = time.monotonic()
    proc = subprocess.Popen(
        [BRIDLE, "acp", "--model", "openai:bench", "--session-dir", os.path.join(root, "s")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, bufsize=1, env=env,
    )
    out = []
    threading.Thread(target=lines_of, args=(proc, out), daemon=True).start()
    send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    t_init, _ = wait_for(out, lambda m: m.get("id") == 0)
    send(proc, {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                "params": {"cwd": ws, "mcpServers": []}})
    _, new = wait_for(out, lambda m: m.get("id") == 1)
    sid = new["result"]["sessionId"]
    log = os.path.join(root, "s", sid + ".jsonl")
    sent_before = len(model.sent)
    send(proc, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}})
    # The log line of the chunk, polled as fast as we can (an upper bound on when it landed).
    logged = None
    deadline = time.monotonic() + 20
    while logged is None and time.monotonic() < deadline:
        try:
            with open(log) as f:
                if '"assistant/chunk"' in f.read():
                    logged = time.monotonic()
        except FileNotFoundError:
            pass
        if logged is None:
            time.sleep(0.0002)
    t_chunk, _ = wait_for(out, lambda m: m.get("method") == "session/update"
                          and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
    wait_for(out, lambda m: m.get("id") == 2)
    proc.stdin.close()
    proc.wait(timeout=10)
    first = model.sent[sent_before]
    return (t_init - started) * 1e3, (t_chunk - first) * 1e3, (logged - first) * 1e3


def main():
    model = Model()
    inits, chunks, logs = [], [], []
    for i in range(RUNS):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as root:
            a, b, c = one_run(model, root)
            inits.append(a)
            chunks.append(b)
            logs.append(c)

    def show(name, xs, goal):
        xs = sorted(xs)
        print("%-58s median %7.2f ms  p90 %7.2f ms  max %7.2f ms  (goal <= %s ms)" % (
            name, statistics.median(xs), xs[int(len(xs) * 0.9) - 1], xs[-1], goal))

    print("bridle acp, %d runs, binary %s" % (RUNS, BRIDLE))
    show("process start -> initialize answer", inits, 20)
    show("model's first chunk -> first agent_message_chunk", chunks, 5)
    show("model's first chunk -> assistant/chunk on disk in the log", logs, "-")


main()
