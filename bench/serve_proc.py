"""A `parley serve` process on a free loopback port for the benchmark scripts (standard
library only; the tests have their own in tests/server/conftest.py)."""
import http.client
import os
import subprocess
import threading


class ParleyServe:
    """Starts `cmd` (a `parley serve ... --host 127.0.0.1 --port 0` command line), reads the
    port from its "listening on http://" line (start-up notes may come first; `lines` keeps
    them) and then drains its output, so the server never blocks on a full pipe (into the file
    PARLEY_SERVE_LOG names, if set)."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []
        line = ""
        for _ in range(50):
            line = self.proc.stdout.readline()
            self.lines.append(line)
            if not line or "listening on http://" in line:
                break
        if "listening on http://" not in line:
            self.proc.kill()
            raise RuntimeError("parley serve did not start:\n" + "".join(self.lines))
        self.port = int(line.split("http://127.0.0.1:")[1].split()[0])
        threading.Thread(target=self._drain, args=(os.environ.get("PARLEY_SERVE_LOG"),),
                         daemon=True).start()

    def _drain(self, log):
        """Reads the server's output to its end, into the file `log` names (else dropped)."""
        if not log:
            for _ in self.proc.stdout:
                pass
            return
        with open(log, "a") as sink:
            for line in self.proc.stdout:
                sink.write(line)

    def request(self, method, path, body=None, headers=None, timeout=600):
        """(status, body bytes) of one HTTP request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
