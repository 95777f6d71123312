# The "outside" server of the network allow-list tests: it runs on the host's loopback, where
# only bridle's proxy can reach it from inside a sandbox.
#
#   python3 net_server.py ROOT [CERT KEY]
#
# Prints its port on the first line of stdout, then serves until killed:
#   GET/HEAD /any/file  -> ROOT/any/file (a directory serves its index.html)
#   /git/...            -> git's smart HTTP (git http-backend, ROOT/git holds the repositories)
#   GET /hold           -> keeps the connection open until the client closes it
#   GET /stats          -> {"requests": N, "active": N, "max_active": N}
# With CERT and KEY it speaks TLS. Every request path is appended to ROOT/requests.log.
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

root = sys.argv[1]
lock = threading.Lock()
stats = {"requests": 0, "active": 0, "max_active": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle(self):
        with lock:
            stats["active"] += 1
            stats["max_active"] = max(stats["max_active"], stats["active"])
        try:
            super().handle()
        finally:
            with lock:
                stats["active"] -= 1

    def record(self):
        with lock:
            stats["requests"] += 1
            with open(os.path.join(root, "requests.log"), "a") as log:
                log.write(self.command + " " + self.path + "\n")

    def reply(self, status, body, kind="application/octet-stream", head=False):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET(head=True)

    def do_POST(self):
        self.do_GET()

    def do_GET(self, head=False):
        self.record()
        path = self.path.split("?", 1)[0]
        if path.startswith("/git/"):
            return self.git()
        if path == "/stats":
            with lock:
                body = json.dumps(stats).encode()
            return self.reply(200, body, "application/json", head)
        if path == "/hold":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.flush()
            while self.rfile.read(1):
                pass
            return
        file = os.path.normpath(os.path.join(root, path.lstrip("/")))
        if os.path.isdir(file):
            file = os.path.join(file, "index.html")
        if not file.startswith(root) or not os.path.isfile(file):
            return self.reply(404, b"not found\n", "text/plain", head)
        with open(file, "rb") as f:
            body = f.read()
        kind = "application/json" if file.endswith(".json") else "application/octet-stream"
        if file.endswith(".html"):
            kind = "application/json" if path.startswith("/npm/") else "text/html"
        self.reply(200, body, kind, head)

    def git(self):
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": os.path.join(root, "git"),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path[len("/git"):],
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_ADDR": "127.0.0.1",
        }
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


server = Server(("127.0.0.1", 0), Handler)
if len(sys.argv) > 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
