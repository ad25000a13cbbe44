"""A real kilnd process for tests and benchmarks: the one launcher every Python test and tool uses.

kilnd prints "kilnd listening on HOST:PORT" on stdout once it serves, so `--port 0` gives a free
loopback port with no race; then "kilnd HTTP listening on HOST:PORT" for its HTTP/REST endpoint
and "kilnd metrics listening on HOST:PORT" for its Prometheus /metrics. kilnd's HTTP and metrics
ports default to 8000 and 8002: unless the arguments name --http-port (--metrics-port), the
launcher passes `--http-port 0` (`--metrics-port 0`), so kilnds started side by side never collide
on them. The log (stderr) is read on a thread so its pipe never fills; with merge_log it shares
stdout with the address line, else it is kept apart (tests that check every log line is JSON want
it so).
"""
import os
import re
import signal
import subprocess
import threading
import time


class KilndProcess:
    def __init__(self, bin_dir, args, env=None, merge_log=True, startup_timeout=300, wrapper=()):
        """Starts `bin_dir/kilnd args...` and waits until it listens (RuntimeError otherwise).
        `wrapper`: words run in front of kilnd (valgrind and its options); without it, those of
        $KILN_KILND_WRAPPER (split on spaces), so any test's kilnd can run under a tool."""
        wrapper = wrapper or os.environ.get("KILN_KILND_WRAPPER", "").split()
        self.lines = []  # log lines, in order
        self.started = time.monotonic()
        args = [str(a) for a in args]
        wants_http = self._port_flag(args, "--http-port")
        wants_metrics = self._port_flag(args, "--metrics-port")
        self.proc = subprocess.Popen(
            [*wrapper, os.path.join(bin_dir, "kilnd"), *args], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_log else subprocess.PIPE, text=True, errors="replace",
            env={**os.environ, **(env or {})})
        self._readers = []
        if not merge_log:
            self._read_in_background(self.proc.stderr)
        deadline = time.time() + startup_timeout
        m = None
        self.http_address, self.http_port = None, None  # None: no HTTP endpoint
        self.metrics_address, self.metrics_port = None, None  # None: no metrics endpoint
        while (m is None or (wants_http and self.http_port is None)
               or (wants_metrics and self.metrics_port is None)):
            line = self.proc.stdout.readline()
            if not line or time.time() > deadline:
                self.stop()
                raise RuntimeError(f"kilnd did not start (exit {self.proc.returncode}):\n"
                                   + self.text())
            if merge_log:
                self.lines.append(line)
            h = re.search(r"kilnd HTTP listening on (\S+):(\d+)", line)
            p = re.search(r"kilnd metrics listening on (\S+):(\d+)", line)
            if h:
                self.http_address = f"{h.group(1)}:{h.group(2)}"
                self.http_port = int(h.group(2))
            elif p:
                self.metrics_address = f"{p.group(1)}:{p.group(2)}"
                self.metrics_port = int(p.group(2))
            elif m is None:
                m = re.search(r"listening on (\S+):(\d+)", line)
        self.address = f"{m.group(1)}:{m.group(2)}"
        self.port = int(m.group(2))
        self.ready_s = time.monotonic() - self.started
        self._read_in_background(self.proc.stdout)

    @staticmethod
    def _port_flag(args, flag):
        """Adds `flag 0` to `args` unless they name `flag`; whether the endpoint is on (>= 0)."""
        named = [i for i, a in enumerate(args) if a == flag or a.startswith(flag + "=")]
        if not named:
            args += [flag, "0"]
            named = [len(args) - 2]
        i = named[-1]
        value = args[i].split("=", 1)[1] if "=" in args[i] else args[i + 1]
        return int(value) >= 0

    def _read_in_background(self, stream):
        def read():
            for line in stream:
                self.lines.append(line)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        self._readers.append(reader)

    def text(self):
        return "".join(self.lines)

    def wait_for_log(self, pattern, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.text()):
                return True
            time.sleep(0.05)
        return False

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=60):
        """SIGTERM (kilnd drains and exits 0), SIGKILL after `timeout` s; returns the exit status."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._close()
        return self.proc.returncode

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self._close()

    def _close(self):
        # The process is gone: the readers reach EOF, then the pipes can close.
        for reader in self._readers:
            reader.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not any(r.is_alive() for r in self._readers):
                stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
