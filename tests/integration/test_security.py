"""A model is untrusted code, and so is every upload and request (issue 15): the real kilnd, driven
through stock grpcio and the real `kiln` CLI.

  - Partial uploads are bounded: their count (--max-partial-uploads) and the bytes they declare
    together (--max-partial-upload-bytes); one more is RESOURCE_EXHAUSTED. Abandoned ones expire
    after --partial-upload-ttl-s without a write, at start-up and by the periodic sweep.
  - Versions stay in 1..2^53 everywhere: a streamed upload above it is INVALID_ARGUMENT and writes
    nothing; a directory above it in the repository is reported at start-up.
  - --port 0 opens exactly one listening socket, the advertised one.
  - Request parameters kilnd does not understand are INVALID_ARGUMENT naming them; those of the
    shared-memory, classification and sequence extensions are UNIMPLEMENTED; the known ones
    (profile, priority, timeout) work, so stock clients keep working.
  - The import child is sandboxed: an uploaded model that reads /etc/passwd or writes a file with
    torch.from_file is refused and writes nothing; native code in the child that tries to read or
    write files, open sockets, exec, fork, signal or trace the daemon, mount, chroot or become root
    is refused each time (test-only probe); an import past --import-memory-mb is contained.
After each case kilnd is alive and a good model still serves libtorch's numbers. About 40 s.
"""
import glob
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np
import torch
import torch.nn as nn
from grpc_tools import protoc

import hostile_models
from test_end_to_end import BIN, SOURCE, Kilnd, assert_close

MiB = 1 << 20


def load_stubs():
    """Python stubs for KServe v2 and Kiln's repository service, generated at test time."""
    out = tempfile.mkdtemp(prefix="kiln-stubs-")
    protos = os.path.join(out, "proto")
    shutil.copytree(os.path.join(SOURCE, "proto"), protos)
    # The protoc in Debian's grpc_tools predates proto3 `optional` (UploadHeader.config_json,
    # which these tests never set): a plain field has the same wire format.
    path = os.path.join(protos, "kiln", "v1", "repository_service.proto")
    with open(path) as f:
        text = f.read().replace("optional string config_json", "string config_json")
    with open(path, "w") as f:
        f.write(text)
    rc = protoc.main(["protoc", f"-I{protos}", f"--python_out={out}", f"--grpc_python_out={out}",
                      "inference/grpc_service.proto", "kiln/v1/repository_service.proto"])
    assert rc == 0, "protoc failed"
    sys.path.insert(0, out)
    from inference import grpc_service_pb2, grpc_service_pb2_grpc  # noqa: E402
    from kiln.v1 import repository_service_pb2, repository_service_pb2_grpc  # noqa: E402
    return grpc_service_pb2, grpc_service_pb2_grpc, repository_service_pb2, \
        repository_service_pb2_grpc


pb, pb_grpc, repo_pb, repo_grpc = load_stubs()


class ReadPasswd(nn.Module):
    """Returns the first bytes of /etc/passwd (a constant path: folded at import)."""

    def forward(self, x):
        return x.sum() + torch.from_file("/etc/passwd", False, 64, dtype=torch.uint8).float()


class WriteFile(nn.Module):
    """Creates and fills a file outside the repository; its path is set before scripting."""
    path: str

    def __init__(self, path):
        super().__init__()
        self.path = path

    def forward(self, x):
        t = torch.from_file(self.path, True, 16, dtype=torch.uint8)
        t.fill_(66)
        return x + t.float().sum()


class OuterProducts(nn.Module):
    """Holds three n x n products of its input: 1.2 GB at n = 10000, past the libtorch run's
    --import-memory-mb of 1024 while Kiln's own run stays within --max-request-memory-mb."""

    def forward(self, x):
        a = x.unsqueeze(0) * x.unsqueeze(1)
        b = a * 2.0
        c = b + a
        return (a + b + c).sum()


class HugeConstant(nn.Module):
    """A 64 GiB constant the import folds: past any --import-memory-mb."""

    def forward(self, x):
        return x + torch.ones(1 << 34).sum()


def listening_sockets(pid):
    """(address, port) of every TCP socket in LISTEN state that process `pid` holds."""
    inodes = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # 0A: LISTEN
                    found.append((local.split(":")[0], int(local.split(":")[1], 16)))
    return found


class SecurityTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-security-")
        cls.models = os.path.join(cls.tmp, "models")
        hostile_models.write_all(cls.models)
        cls.x = os.path.join(cls.tmp, "x.npy")
        np.save(cls.x, np.array([-1.0, 2.0, -3.0], dtype=np.float32))
        cls.want = np.maximum(np.load(cls.x), 0)
        cls.servers = []

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def start(cls, repo_name, args=(), env=None):
        server = Kilnd(os.path.join(cls.tmp, repo_name), args=args, env=env)
        cls.servers.append(server)
        return server

    def kiln(self, server, *args, check=False, timeout=300):
        cmd = [os.path.join(BIN, "kiln"), "--server", server.address, *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            self.fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def assert_still_serving(self, server):
        """kilnd survived: alive, and the good model answers with libtorch's numbers."""
        self.assertTrue(server.alive(), server.text()[-3000:])
        out = tempfile.mkdtemp(dir=self.tmp)
        self.kiln(server, "infer", "relu", "--input", f"x={self.x}", "--output-dir", out,
                  check=True)
        assert_close(self, np.load(os.path.join(out, "output0.npy")), self.want)

    def assert_rpc_error(self, call, code, *fragments):
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        self.assertEqual(caught.exception.code(), code, caught.exception.details())
        for fragment in fragments:
            self.assertIn(fragment, caught.exception.details())
        return caught.exception.details()


class UploadBoundsTest(SecurityTestBase):
    """--max-partial-uploads, --max-partial-upload-bytes, --partial-upload-ttl-s."""
    TTL_S = 3

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.args = ["--max-partial-uploads", 3, "--max-partial-upload-bytes", 3 * MiB]
        cls.server = cls.start("repo", cls.args + ["--partial-upload-ttl-s", cls.TTL_S])
        cls.kiln_cls(cls.server, "upload", os.path.join(cls.models, "relu.pt"), "--name", "relu")

    @staticmethod
    def kiln_cls(server, *args):
        subprocess.run([os.path.join(BIN, "kiln"), "--server", server.address, *map(str, args)],
                       check=True, capture_output=True, timeout=120)

    def stub(self, server=None):
        return repo_grpc.ModelRepositoryServiceStub(
            grpc.insecure_channel((server or self.server).address))

    def staging(self, server=None):
        return os.path.join((server or self.server).repo, ".kiln-uploads")

    def parts(self, server=None):
        return sorted(glob.glob(os.path.join(self.staging(server), "*.part")))

    def abandon(self, n, size, sent=1000, server=None):
        """Starts an upload of `size` declared bytes (content n), sends `sent` and stops: the
        server keeps the bytes to resume. Returns the gRPC error (FAILED_PRECONDITION: incomplete)."""
        sha = hashlib.sha256(str(n).encode()).hexdigest()
        header = repo_pb.UploadHeader(model_name=f"abandoned{n}", version=0, total_size=size,
                                      sha256=sha, offset=0)
        requests = [repo_pb.UploadModelRequest(header=header),
                    repo_pb.UploadModelRequest(chunk=b"\0" * sent)]
        try:
            self.stub(server).UploadModel(iter(requests), timeout=30)
        except grpc.RpcError as e:
            return e
        self.fail("an incomplete upload succeeded")

    def test_partial_uploads_are_bounded_in_count_and_bytes_and_expire(self):
        # The limits are in the log.
        self.assertRegex(self.server.text(), r"partial uploads: at most 3, 3\.0 MiB declared "
                                             r"together, expired after 3 s idle")
        for n in range(3):
            e = self.abandon(n, 1000 * 1000)
            self.assertEqual(e.code(), grpc.StatusCode.FAILED_PRECONDITION, e.details())
        self.assertEqual(len(self.parts()), 3)
        # One more: the count is reached.
        e = self.abandon(3, 1000)
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
        self.assertIn("3 partial uploads are already kept or in progress, the server's limit "
                      "(--max-partial-uploads 3)", e.details())
        self.assertIn("--partial-upload-ttl-s", e.details())
        self.assertEqual(len(self.parts()), 3)
        # A complete upload of a known file needs no part, and still goes through.
        self.kiln(self.server, "upload", os.path.join(self.models, "relu.pt"), "--name", "relu2",
                  check=True)
        # The abandoned parts expire after the TTL, swept without any request.
        deadline = time.monotonic() + self.TTL_S + 5
        while self.parts() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.parts(), [])
        # The log is read on a thread: the line may trail the files' removal a little.
        self.assertTrue(self.server.wait_for_log(r"removed an abandoned upload \(1000 of 1000000 "
                                                 r"bytes"), self.server.text())
        # The declared bytes are bounded too: 2 MB held, 1.2 MB more does not fit in 3 MiB.
        for n in range(4, 6):
            self.assertEqual(self.abandon(n, 1000 * 1000).code(),
                             grpc.StatusCode.FAILED_PRECONDITION)
        e = self.abandon(6, 1200 * 1000)
        self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
        self.assertIn("cannot start an upload of 1200000 bytes: partial uploads already hold "
                      "2000000 of the 3145728 bytes they may declare together "
                      "(--max-partial-upload-bytes)", e.details())
        self.assert_still_serving(self.server)

    def test_abandoned_parts_older_than_the_ttl_are_removed_at_start_up(self):
        server = self.start("repo_restart", self.args + ["--partial-upload-ttl-s", 3600])
        self.kiln(server, "upload", os.path.join(self.models, "relu.pt"), "--name", "relu",
                  check=True)
        self.assertEqual(self.abandon(10, 5000, server=server).code(),
                         grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(self.abandon(11, 5000, server=server).code(),
                         grpc.StatusCode.FAILED_PRECONDITION)
        old, fresh = self.parts(server)
        server.stop()
        two_hours_ago = time.time() - 7200
        os.utime(old, (two_hours_ago, two_hours_ago))
        server = self.start("repo_restart", self.args + ["--partial-upload-ttl-s", 3600])
        self.assertEqual(self.parts(server), [fresh])
        self.assert_still_serving(server)


class RequestBoundsTest(SecurityTestBase):
    """Versions, --port 0, request parameters."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A directory past 2^53 in a pre-filled repository: reported, not served.
        repo = os.path.join(cls.tmp, "repo")
        os.makedirs(os.path.join(repo, "relu", "9007199254740993"))
        shutil.copy(os.path.join(cls.models, "relu.pt"),
                    os.path.join(repo, "relu", "9007199254740993", "model.pt"))
        cls.server = cls.start("repo")
        subprocess.run([os.path.join(BIN, "kiln"), "--server", cls.server.address, "upload",
                        os.path.join(cls.models, "relu.pt"), "--name", "relu"], check=True,
                       capture_output=True, timeout=120)
        channel = grpc.insecure_channel(cls.server.address)
        cls.infer_stub = pb_grpc.GRPCInferenceServiceStub(channel)
        cls.repo_stub = repo_grpc.ModelRepositoryServiceStub(channel)

    def test_a_version_above_two_to_the_53_is_refused_everywhere(self):
        self.assertIn("model 'relu': directory '9007199254740993' is not served", self.server.text())
        with open(os.path.join(self.models, "relu.pt"), "rb") as f:
            data = f.read()
        header = repo_pb.UploadHeader(model_name="big_version", version=(1 << 63) - 1,
                                      total_size=len(data),
                                      sha256=hashlib.sha256(data).hexdigest(), offset=0)
        requests = [repo_pb.UploadModelRequest(header=header),
                    repo_pb.UploadModelRequest(chunk=data)]
        self.assert_rpc_error(
            lambda: self.repo_stub.UploadModel(iter(requests), timeout=60),
            grpc.StatusCode.INVALID_ARGUMENT, "version 9223372036854775807 is out of range: "
            "versions are 1 to 9007199254740992 (2^53), or 0 for the next version")
        self.assertFalse(os.path.exists(os.path.join(self.server.repo, "big_version")))
        self.assertEqual(glob.glob(os.path.join(self.server.repo, ".kiln-uploads", "*.part")), [])
        # The KServe load names its version in the file parameter: the same bound.
        req = pb.RepositoryModelLoadRequest(model_name="big_version")
        req.parameters["file:9007199254740993/model.pt"].bytes_param = data
        self.assert_rpc_error(lambda: self.infer_stub.RepositoryModelLoad(req, timeout=60),
                              grpc.StatusCode.INVALID_ARGUMENT, "unsupported file parameter")
        self.assert_rpc_error(
            lambda: self.repo_stub.DeleteModel(
                repo_pb.DeleteModelRequest(model_name="relu", version=1 << 60), timeout=30),
            grpc.StatusCode.INVALID_ARGUMENT, "out of range")
        self.assert_still_serving(self.server)

    def test_port_zero_opens_exactly_the_advertised_ports(self):
        # gRPC's --port 0, HTTP's --http-port 0 and --metrics-port 0: one socket each, all
        # advertised.
        advertised = sorted(p for p in (self.server.port, self.server.http_port,
                                        self.server.metrics_port) if p is not None)
        sockets = listening_sockets(self.server.proc.pid)
        self.assertEqual(sorted(port for _, port in sockets), advertised, sockets)
        self.assertRegex(self.server.text(), rf"serving on 127\.0\.0\.1:{self.server.port}\b")
        # Nobody else can bind them beside kilnd (no SO_REUSEPORT on kilnd's sockets).
        for port in advertised:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            with self.assertRaises(OSError):
                s.bind(("127.0.0.1", port))
            s.close()

    def request(self):
        x = np.load(self.x)
        req = pb.ModelInferRequest(model_name="relu")
        t = req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        req.outputs.add(name="output0")
        return req, t

    def test_unknown_request_parameters_are_refused_by_name(self):
        req, _ = self.request()
        req.parameters["temperature"].double_param = 0.5
        req.outputs[0].parameters["scale"].int64_param = 2
        self.assert_rpc_error(lambda: self.infer_stub.ModelInfer(req, timeout=30),
                              grpc.StatusCode.INVALID_ARGUMENT,
                              "unknown parameters 'temperature' (request), 'scale' (output "
                              "'output0')")
        # The shared-memory parameters are understood (test_shared_memory.py); a region nobody
        # registered is named.
        req, t = self.request()
        del req.raw_input_contents[:]
        t.parameters["shared_memory_region"].string_param = "region0"
        t.parameters["shared_memory_byte_size"].int64_param = 12
        self.assert_rpc_error(lambda: self.infer_stub.ModelInfer(req, timeout=30),
                              grpc.StatusCode.NOT_FOUND,
                              "no shared-memory region 'region0' is registered")
        req, _ = self.request()
        req.outputs[0].parameters["classification"].int64_param = 2
        self.assert_rpc_error(lambda: self.infer_stub.ModelInfer(req, timeout=30),
                              grpc.StatusCode.UNIMPLEMENTED, "'classification'")
        req, _ = self.request()
        req.parameters["profile"].string_param = "yes"
        self.assert_rpc_error(lambda: self.infer_stub.ModelInfer(req, timeout=30),
                              grpc.StatusCode.INVALID_ARGUMENT,
                              "parameter 'profile' of the request must be a bool_param")
        self.assert_still_serving(self.server)

    def test_what_stock_clients_send_keeps_working(self):
        # tritonclient sends no parameter by default; "priority" and "timeout" (µs) when set.
        req, _ = self.request()
        req.parameters["priority"].uint64_param = 1
        req.parameters["timeout"].int64_param = 30 * 1000 * 1000
        reply = self.infer_stub.ModelInfer(req, timeout=30)
        got = np.frombuffer(reply.raw_output_contents[0], dtype=np.float32)
        assert_close(self, got, self.want)


class SandboxTest(SecurityTestBase):
    """The import child's sandbox."""
    IMPORT_MEMORY_MB = 1024

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.outside = os.path.join(cls.tmp, "outside")
        os.makedirs(cls.outside)
        torch.jit.script(ReadPasswd()).save(os.path.join(cls.models, "read_passwd.pt"))
        cls.escape_file = os.path.join(cls.outside, "written-by-a-model")
        torch.jit.script(WriteFile(cls.escape_file)).save(os.path.join(cls.models, "write_file.pt"))
        torch.jit.script(HugeConstant()).save(os.path.join(cls.models, "huge_constant.pt"))
        cls.server = cls.start("repo", ["--import-memory-mb", cls.IMPORT_MEMORY_MB])
        subprocess.run([os.path.join(BIN, "kiln"), "--server", cls.server.address, "upload",
                        os.path.join(cls.models, "relu.pt"), "--name", "relu"], check=True,
                       capture_output=True, timeout=120)

    def upload(self, server, model, name):
        return self.kiln(server, "upload", os.path.join(self.models, model), "--name", name)

    def test_the_import_reports_its_sandbox(self):
        m = self.server.wait_for_log(r"import sandbox: ")
        self.assertTrue(m, self.server.text())
        log = self.server.text()
        self.assertRegex(log, r"import sandbox: .*no-new-privs.*seccomp")
        if os.geteuid() == 0:
            self.assertRegex(log, r"import sandbox: .*empty root \(chroot\).*uid/gid 65534/65534")

    def test_a_model_reading_etc_passwd_is_refused(self):
        r = self.upload(self.server, "read_passwd.pt", "read_passwd")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("aten::from_file", r.stderr)
        self.assertIn("kiln: error: INVALID_ARGUMENT: ", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.server.repo, "read_passwd")))
        r = self.kiln(self.server, "infer", "read_passwd", "--input", f"x={self.x}")
        self.assertIn("NOT_FOUND", r.stderr)
        self.assert_still_serving(self.server)

    def test_a_model_writing_a_file_is_refused_and_writes_nothing(self):
        r = self.upload(self.server, "write_file.pt", "write_file")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("aten::from_file", r.stderr)
        self.assertIn("effects on the server's host", r.stderr)
        self.assertFalse(os.path.exists(self.escape_file))
        self.assertEqual(os.listdir(self.outside), [])
        self.assert_still_serving(self.server)

    def test_an_import_past_the_memory_limit_is_contained(self):
        r = self.upload(self.server, "huge_constant.pt", "huge_constant")
        self.assertIn("kiln: error: RESOURCE_EXHAUSTED: ", r.stderr)
        self.assertIn(f"{self.IMPORT_MEMORY_MB} MiB", r.stderr)
        self.assert_still_serving(self.server)

    def test_native_code_in_the_import_child_cannot_leave_the_sandbox(self):
        target = os.path.join(self.outside, "probe-was-here")
        for stale in ("/tmp/kiln-sandbox-escape",):
            if os.path.exists(stale):
                os.unlink(stale)
        server = self.start("repo_probe", env={"KILN_TEST_IMPORT_FAULT": "escape",
                                               "KILN_TEST_ESCAPE_FILE": target})
        r = self.upload(server, "relu.pt", "probed")
        self.assertIn("kiln: error: PERMISSION_DENIED: ", r.stderr)
        attempts = r.stderr.split("sandbox probe: ", 1)[1].strip().split("; ")
        names = [a.split(": ")[0] for a in attempts]
        for what in ("read /etc/passwd", "create /tmp/kiln-sandbox-escape",
                     f"create {target}", "open a TCP socket", "open a Unix socket",
                     "exec /bin/sh", "fork", "signal the daemon", "signal its process group",
                     "trace the daemon", "mount a tmpfs", "chroot", "become root",
                     "unshare a user namespace", "lift its memory limit"):
            self.assertIn(what, names, attempts)
        for attempt in attempts:
            self.assertIn(": refused (", attempt)
        self.assertFalse(os.path.exists(target))
        self.assertFalse(os.path.exists("/tmp/kiln-sandbox-escape"))
        self.assertEqual(os.listdir(self.outside), [])
        self.assertTrue(server.alive())


class ReferenceSandboxTest(SecurityTestBase):
    """The verified import runs the uploaded program through libtorch in the sandboxed worker
    child, under --import-memory-mb and the load's time limit, never in kilnd."""
    IMPORT_MEMORY_MB = 1024

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.outside = os.path.join(cls.tmp, "outside")
        os.makedirs(cls.outside)
        torch.jit.script(OuterProducts()).save(os.path.join(cls.models, "outer.pt"))
        cls.verify_relu = os.path.join(cls.tmp, "verify_relu.json")
        with open(cls.verify_relu, "w") as f:
            f.write('{"verify": {"inputs": [{"name": "x", "dims": [3]}]}}')
        cls.verify_outer = os.path.join(cls.tmp, "verify_outer.json")
        with open(cls.verify_outer, "w") as f:
            f.write('{"verify": {"inputs": [{"name": "x", "dims": [10000]}]}}')
        cls.server = cls.start("repo", ["--import-memory-mb", cls.IMPORT_MEMORY_MB,
                                        "--max-request-memory-mb", 4096])
        subprocess.run([os.path.join(BIN, "kiln"), "--server", cls.server.address, "upload",
                        os.path.join(cls.models, "relu.pt"), "--name", "relu", "--config",
                        cls.verify_relu], check=True, capture_output=True, timeout=120)

    def upload(self, server, model, name, config):
        return self.kiln(server, "upload", os.path.join(self.models, model), "--name", name,
                         "--config", config)

    def test_the_verified_import_still_passes_through_the_worker(self):
        r = self.kiln(self.server, "metadata", "relu", check=True)
        self.assertRegex(r.stdout, r"verify = passed on x=FP32\[3\]: output0 max \|diff\|")
        # The libtorch run happened in the sandboxed child: kilnd itself never loaded libtorch
        # (a model without fallback ops needs it nowhere else).
        with open(f"/proc/{self.server.proc.pid}/maps") as f:
            self.assertNotIn("libtorch_cpu", f.read())
        self.assertNotIn("loaded libtorch", self.server.text())
        self.assertRegex(self.server.text(), r"import sandbox: .*seccomp")

    def test_a_libtorch_run_past_the_memory_limit_is_contained(self):
        r = self.upload(self.server, "outer.pt", "outer", self.verify_outer)
        self.assertIn("kiln: error: RESOURCE_EXHAUSTED: ", r.stderr)
        self.assertIn("verified import's libtorch run exceeded its memory limit of "
                      f"{self.IMPORT_MEMORY_MB} MiB", r.stderr)
        self.assert_still_serving(self.server)

    def test_a_crash_in_the_libtorch_run_is_contained(self):
        server = self.start("repo_crash", env={"KILN_TEST_REFERENCE_FAULT": "crash"})
        r = self.upload(server, "relu.pt", "crashing", self.verify_relu)
        self.assertIn("kiln: error: INVALID_ARGUMENT: ", r.stderr)
        self.assertIn("verified import's libtorch run process crashed with signal 11", r.stderr)
        self.assertTrue(server.alive())

    def test_native_code_in_the_libtorch_run_cannot_leave_the_sandbox(self):
        target = os.path.join(self.outside, "probe-was-here")
        server = self.start("repo_probe", env={"KILN_TEST_REFERENCE_FAULT": "escape",
                                               "KILN_TEST_ESCAPE_FILE": target})
        r = self.upload(server, "relu.pt", "probed", self.verify_relu)
        self.assertIn("kiln: error: PERMISSION_DENIED: ", r.stderr)
        attempts = r.stderr.split("sandbox probe: ", 1)[1].strip().split("; ")
        names = [a.split(": ")[0] for a in attempts]
        for what in ("read /etc/passwd", f"create {target}", "open a TCP socket",
                     "open a Unix socket", "exec /bin/sh", "signal the daemon", "trace the daemon",
                     "lift its memory limit"):
            self.assertIn(what, names, attempts)
        for attempt in attempts:
            self.assertIn(": refused (", attempt)
        self.assertFalse(os.path.exists(target))
        self.assertEqual(os.listdir(self.outside), [])
        self.assertTrue(server.alive())
        # The import itself ran unprobed: only the reference run is.
        self.assertNotIn("probed", os.listdir(server.repo))


if __name__ == "__main__":
    unittest.main()
