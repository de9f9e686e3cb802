"""Fixtures for the server API tests: a `parley serve` process on a free loopback port
with the real Whisper tiny.en (PARLEY_TEST_MODEL_DIR), started by the test itself.

Environment (set by tests/CMakeLists.txt): PARLEY_BIN, PARLEY_TEST_MODEL_DIR,
PARLEY_TEST_DATA.
"""
import http.client
import json
import os
import signal
import subprocess
import threading
import time

import pytest

BIN = os.environ.get("PARLEY_BIN", "build/parley")
MODEL = os.environ.get("PARLEY_TEST_MODEL_DIR", "")
DATA = os.environ.get("PARLEY_TEST_DATA", "../shared/data")


def audio(name):
    return os.path.join(DATA, "audio", name)


class Server:
    """One parley serve process; `port` is read from its start-up line."""

    def __init__(self, *args, model=None):
        cmd = [BIN, "serve", "--model", model or MODEL, "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        # Start-up notes (e.g. about the VAD model) may come before the listening line.
        line = ""
        for _ in range(20):
            line = self.proc.stdout.readline()
            self.lines.append(line)
            if not line or "listening on http://" in line:
                break
        if "listening on http://" not in line:
            self.proc.kill()
            raise RuntimeError("parley serve did not start: " + line + self.proc.stdout.read())
        self.port = int(line.split("http://127.0.0.1:")[1].split()[0])
        self.url = f"http://127.0.0.1:{self.port}"
        # Keep draining stdout so the server never blocks on a full pipe.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def request(self, method, path, body=None, headers=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def metrics(self):
        status, _, body = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
        return out

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def terminate(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="session")
def server():
    s = Server("--workers", "2", "--queue", "16")
    yield s
    assert s.terminate() == 0


@pytest.fixture
def make_server():
    started = []

    def make(*args, model=None):
        s = Server(*args, model=model)
        started.append(s)
        return s

    yield make
    for s in started:
        s.terminate()


def multipart(fields, files=(), boundary="parleyboundary1234"):
    """A multipart/form-data body: fields [(name, value)], files [(name, filename, bytes)]."""
    out = b""
    for name, value in fields:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
                f"{value}\r\n").encode()
    for name, filename, data in files:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; "
                f"filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def error_of(body):
    """The OpenAI error object of a response body; asserts its shape."""
    doc = json.loads(body)
    assert set(doc) == {"error"}, doc
    err = doc["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    return err


def normalized(text):
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


JFK = "and so my fellow americans ask not what your country can do for you ask what you can do for your country"


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()
