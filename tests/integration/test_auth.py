"""TLS and bearer-token authentication (server/security/) end to end: the real kilnd over loopback
with a throwaway CA, server and client certificates made by `openssl` in a temporary directory.

- TLS on both ports from the same files: gRPC (grpcio's secure channel) and HTTPS (the standard
  library's http.client and curl), the server's certificate checked against the test CA; a
  plaintext client gets nothing.
- Mutual TLS (--tls-client-ca): a client with a certificate of the CA is served, one without a
  certificate or with one of another CA is refused in the handshake, on both ports.
- Every RPC of both gRPC services and every HTTP route with no token, a wrong token, an `infer`
  token and an `admin` token gets the status the role table says (UNAUTHENTICATED / 401,
  PERMISSION_DENIED / 403, or the call's own answer); a refused admin call changes nothing.
- The `kiln` CLI with --tls-ca and KILN_TOKEN / --token; start-up refuses a malformed token file
  or a key that does not match the certificate, naming the line or the file; tokens never appear
  in the log.
"""
import hashlib
import http.client
import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np
import torch

import test_end_to_end as e2e
import test_security

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kilnd_process import KilndProcess  # noqa: E402
from torch_fixtures import save_and_run  # noqa: E402

pb, pb_grpc, repo_pb, repo_grpc = (test_security.pb, test_security.pb_grpc, test_security.repo_pb,
                                   test_security.repo_grpc)

UNAUTH, DENIED, OK = grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, \
    grpc.StatusCode.OK


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A CA, a server certificate for localhost / 127.0.0.1 and a client certificate signed by it,
    and a second CA with a client certificate of its own (which the first CA does not vouch for)."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                f"/CN=kiln test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, ca, ext in (("server", "ca", "server.ext"), ("client", "ca", "client.ext"),
                          ("rogue", "other-ca", "client.ext")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=kiln test {name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", f"{name}.pem", cwd=d)
    return {name: os.path.join(d, name) for name in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key", "rogue.pem",
             "rogue.key", "other-ca.pem")}


class Lin(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = torch.nn.Linear(4, n)

    def forward(self, x):
        return self.fc(x)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class TlsAuthTest(unittest.TestCase):
    """One kilnd with TLS and tokens; a second with mutual TLS."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-auth-")
        cls.pki = make_pki(cls.tmp)
        cls.infer_token = "infer-" + secrets.token_hex(16)
        cls.admin_token = "admin-" + secrets.token_hex(16)
        cls.tokens = os.path.join(cls.tmp, "tokens")
        with open(cls.tokens, "w") as f:
            f.write(f"# Kiln tokens\n\ninfer {cls.infer_token}\n  # admins\nadmin "
                    f"{cls.admin_token}\n")
        os.chmod(cls.tokens, 0o600)
        # A model in the repository before start-up, and a second file to upload.
        cls.repo = os.path.join(cls.tmp, "models")
        os.makedirs(os.path.join(cls.repo, "lin", "1"))
        torch.manual_seed(0)
        cls.x = torch.randn(2, 4)
        lin = Lin(3).eval()
        cls.expected = save_and_run(torch.jit.trace(lin, cls.x),
                                    os.path.join(cls.repo, "lin", "1", "model.pt"),
                                    (cls.x,)).numpy()
        cls.scratch = os.path.join(cls.tmp, "scratch.pt")
        save_and_run(torch.jit.trace(Lin(2).eval(), cls.x), cls.scratch, (cls.x,))
        tls = ["--tls-cert", cls.pki["server.pem"], "--tls-key", cls.pki["server.key"]]
        cls.server = e2e.Kilnd(cls.repo, args=[*tls, "--auth-tokens", cls.tokens])
        mtls_repo = os.path.join(cls.tmp, "mtls-models")
        shutil.copytree(cls.repo, mtls_repo)
        cls.mtls = e2e.Kilnd(mtls_repo, args=[*tls, "--tls-client-ca", cls.pki["ca.pem"]])
        cls.creds = grpc.ssl_channel_credentials(root_certificates=read(cls.pki["ca.pem"]))
        cls.channel = grpc.secure_channel(cls.server.address, cls.creds)
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)
        cls.repo_stub = repo_grpc.ModelRepositoryServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        for server in (cls.server, cls.mtls):
            server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- helpers ----
    def metadata(self, who):
        token = {"none": None, "wrong": "wrong-" + secrets.token_hex(16),
                 "infer": self.infer_token, "admin": self.admin_token}[who]
        return [] if token is None else [("authorization", f"Bearer {token}")]

    def infer_request(self):
        request = pb.ModelInferRequest(model_name="lin")
        request.inputs.add(name="x", datatype="FP32", shape=[2, 4])
        request.raw_input_contents.append(self.x.numpy().tobytes())
        return request

    def grpc_code(self, call, request, who):
        try:
            call(request, metadata=self.metadata(who), timeout=120)
            return OK
        except grpc.RpcError as e:
            if e.code() in (UNAUTH, DENIED):
                self.assertNotIn(self.infer_token, e.details())
                self.assertNotIn(self.admin_token, e.details())
            return e.code()

    def https(self, method, path, who, body=None, headers=None, server=None, context=None):
        server = server or self.server
        host, port = server.http_address.rsplit(":", 1)
        if context is None:
            context = ssl.create_default_context(cafile=self.pki["ca.pem"])
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=120)
        headers = dict(headers or {})
        for key, value in self.metadata(who):
            headers["Authorization"] = value
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read(), dict(response.getheaders())
        finally:
            conn.close()

    def assert_model_ready(self, name="lin"):
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name=name), timeout=60).ready)

    # ---- gRPC ----
    def test_grpc_every_rpc_with_each_credential(self):
        """The matrix: public RPCs need nothing, infer RPCs need a token of either role, admin
        RPCs the admin role. A refused admin RPC leaves the model serving."""
        s, r = self.stub, self.repo_stub
        sha = hashlib.sha256(read(self.scratch)).hexdigest()
        public = [(s.ServerLive, pb.ServerLiveRequest()), (s.ServerReady, pb.ServerReadyRequest()),
                  (s.ModelReady, pb.ModelReadyRequest(name="lin"))]
        infer = [(s.ServerMetadata, pb.ServerMetadataRequest()),
                 (s.ModelMetadata, pb.ModelMetadataRequest(name="lin")),
                 (s.ModelInfer, self.infer_request()),
                 (s.ModelStatistics, pb.ModelStatisticsRequest(name="lin")),
                 (r.CacheStatistics, repo_pb.CacheStatisticsRequest(model_name="lin")),
                 (s.SystemSharedMemoryStatus, pb.SystemSharedMemoryStatusRequest())]
        admin = [(s.RepositoryIndex, pb.RepositoryIndexRequest()),
                 (s.SystemSharedMemoryRegister, pb.SystemSharedMemoryRegisterRequest(
                     name="r", key="/kiln-auth-none", byte_size=4)),
                 (s.SystemSharedMemoryUnregister, pb.SystemSharedMemoryUnregisterRequest()),
                 (s.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="lin")),
                 (s.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name="lin")),
                 (r.QueryModelFile, repo_pb.QueryModelFileRequest(sha256=sha, size=1)),
                 (r.DeleteModel, repo_pb.DeleteModelRequest(model_name="lin"))]
        for who in ("none", "wrong", "infer", "admin"):
            for call, request in public:
                self.assertEqual(self.grpc_code(call, request, who), OK, (who, call))
            for call, request in infer:
                want = UNAUTH if who in ("none", "wrong") else OK
                self.assertEqual(self.grpc_code(call, request, who), want, (who, call))
            if who == "admin":
                continue  # below, on a scratch model
            for call, request in admin:
                want = DENIED if who == "infer" else UNAUTH
                self.assertEqual(self.grpc_code(call, request, who), want, (who, call))
            upload = iter([repo_pb.UploadModelRequest(header=repo_pb.UploadHeader(
                model_name="lin", version=2, total_size=1, sha256=sha))])
            self.assertEqual(self.grpc_code(r.UploadModel, upload, who),
                             DENIED if who == "infer" else UNAUTH)
            self.assert_model_ready()  # nothing was unloaded or deleted
        self.assertTrue(os.path.exists(os.path.join(self.server.repo, "lin", "1", "model.pt")))
        self.assertFalse(os.path.exists(os.path.join(self.server.repo, "lin", "2")))

        # The admin role may do all of it, on a model of its own.
        md = self.metadata("admin")
        data = read(self.scratch)
        s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(
            model_name="scratch", parameters={"file:1/model.pt": pb.ModelRepositoryParameter(
                bytes_param=data)}), metadata=md, timeout=300)
        self.assert_model_ready("scratch")
        self.assertIn("scratch", [m.name for m in s.RepositoryIndex(
            pb.RepositoryIndexRequest(), metadata=md, timeout=60).models])
        self.assertTrue(r.QueryModelFile(repo_pb.QueryModelFileRequest(sha256=sha, size=len(data)),
                                         metadata=md, timeout=60).present)
        s.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="scratch"),
                                metadata=md, timeout=60)
        self.assertFalse(s.ModelReady(pb.ModelReadyRequest(name="scratch"), timeout=60).ready)
        s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="scratch"), metadata=md,
                              timeout=300)
        chunks = [repo_pb.UploadModelRequest(header=repo_pb.UploadHeader(
            model_name="scratch2", version=1, total_size=len(data), sha256=sha)),
            repo_pb.UploadModelRequest(chunk=data)]
        done = r.UploadModel(iter(chunks), metadata=md, timeout=300)
        self.assertEqual(done.model_name, "scratch2")
        self.assert_model_ready("scratch2")
        for name in ("scratch", "scratch2"):
            r.DeleteModel(repo_pb.DeleteModelRequest(model_name=name), metadata=md, timeout=60)
            self.assertFalse(os.path.exists(os.path.join(self.server.repo, name)))

    def test_grpc_inference_over_tls_gives_the_right_numbers_and_plaintext_gets_nothing(self):
        response = self.stub.ModelInfer(self.infer_request(), metadata=self.metadata("infer"),
                                         timeout=120)
        got = np.frombuffer(response.raw_output_contents[0], np.float32).reshape(2, 3)
        e2e.assert_close(self, got, self.expected)
        with grpc.insecure_channel(self.server.address) as plain:
            with self.assertRaises(grpc.RpcError) as ctx:
                pb_grpc.GRPCInferenceServiceStub(plain).ServerLive(pb.ServerLiveRequest(),
                                                                   timeout=10)
            self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_messages_explain_and_log_never_shows_a_token(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.ModelInfer(self.infer_request(), timeout=60)
        self.assertIn("needs a bearer token", ctx.exception.details())
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="lin"),
                                            metadata=self.metadata("infer"), timeout=60)
        self.assertIn("RepositoryModelUnload needs the role 'admin'; this token's role is "
                      "'infer'", ctx.exception.details())
        wrong = self.metadata("wrong")
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.ModelMetadata(pb.ModelMetadataRequest(name="lin"), metadata=wrong,
                                    timeout=60)
        self.assertIn("the bearer token is not valid", ctx.exception.details())
        self.assertTrue(self.server.wait_for_log(r"refused ModelMetadata from ipv4:127\.0\.0\.1"))
        log = self.server.text()
        self.assertIn("authentication: 2 bearer token(s)", log)
        for token in (self.infer_token, self.admin_token, wrong[0][1].split()[1]):
            self.assertNotIn(token, log)

    # ---- HTTP ----
    def test_http_every_route_with_each_credential(self):
        body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4],
                                       "data": self.x.flatten().tolist()}]})
        json_headers = {"Content-Type": "application/json"}
        public = [("GET", "/v2/health/live"), ("GET", "/v2/health/ready"),
                  ("GET", "/v2/models/lin/ready"), ("GET", "/v2/models/lin/versions/1/ready")]
        infer = [("GET", "/v2", None), ("GET", "/v2/models/lin", None),
                 ("GET", "/v2/models/lin/versions/1", None), ("GET", "/v2/models/stats", None),
                 ("GET", "/v2/models/lin/stats", None), ("POST", "/v2/models/lin/infer", body),
                 ("POST", "/v2/models/lin/versions/1/infer", body),
                 ("GET", "/v2/systemsharedmemory/status", None)]
        admin = [("POST", "/v2/repository/index", "{}"),
                 ("POST", "/v2/systemsharedmemory/region/r/register",
                  '{"key": "/kiln-auth-none", "byte_size": 4}'),
                 ("POST", "/v2/systemsharedmemory/unregister", "{}"),
                 ("POST", "/v2/repository/models/lin/load", "{}"),
                 ("POST", "/v2/repository/models/lin/unload", "{}")]
        for who in ("none", "wrong", "infer", "admin"):
            for method, path in public:
                status, _, _ = self.https(method, path, who)
                self.assertEqual(status, 200, (who, path))
            for method, path, data in infer:
                status, answer, headers = self.https(method, path, who, data, json_headers)
                if who in ("none", "wrong"):
                    self.assertEqual(status, 401, (who, path))
                    self.assertEqual(headers.get("WWW-Authenticate"), 'Bearer realm="kiln"')
                    self.assertIn("error", json.loads(answer))
                else:
                    self.assertEqual(status, 200, (who, path, answer))
                    if path.endswith("/infer"):
                        out = json.loads(answer)["outputs"][0]
                        got = np.array(out["data"], np.float32).reshape(out["shape"])
                        e2e.assert_close(self, got, self.expected)
            for method, path, data in admin:
                if who == "admin":
                    continue  # below, in an order that leaves the model serving
                status, answer, _ = self.https(method, path, who, data, json_headers)
                self.assertEqual(status, 403 if who == "infer" else 401, (who, path))
                self.assertNotIn(self.infer_token.encode(), answer)
            self.assert_model_ready()
        status, answer, _ = self.https("POST", "/v2/repository/models/lin/unload", "admin", "{}",
                                       json_headers)
        self.assertEqual(status, 200, answer)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="lin"), timeout=60).ready)
        status, answer, _ = self.https("POST", "/v2/repository/models/lin/load", "admin", "{}",
                                       json_headers)
        self.assertEqual(status, 200, answer)
        self.assert_model_ready()
        status, answer, _ = self.https("POST", "/v2/repository/index", "admin", "{}", json_headers)
        self.assertEqual(status, 200)
        self.assertIn("lin", [m["name"] for m in json.loads(answer)])

    def test_curl_over_https_with_a_token(self):
        url = f"https://{self.server.http_address}/v2/models/lin"
        base = ["curl", "-sS", "--cacert", self.pki["ca.pem"], "-o", "/dev/null", "-w",
                "%{http_code}"]
        self.assertEqual(subprocess.run(base + [url], capture_output=True, text=True).stdout,
                         "401")
        ok = subprocess.run(base + ["-H", f"Authorization: Bearer {self.infer_token}", url],
                            capture_output=True, text=True)
        self.assertEqual(ok.stdout, "200", ok.stderr)
        # Plain HTTP to the HTTPS port gets no answer from the model routes.
        plain = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                f"http://{self.server.http_address}/v2/health/ready"],
                               capture_output=True, text=True)
        self.assertNotEqual(plain.stdout, "200")
        # An unknown CA is refused by the client: the server presents the test CA's certificate.
        untrusted = subprocess.run(["curl", "-sS", url], capture_output=True, text=True)
        self.assertNotEqual(untrusted.returncode, 0)

    # ---- mutual TLS ----
    def test_mutual_tls_refuses_a_client_without_a_certificate_of_the_ca(self):
        ca = read(self.pki["ca.pem"])
        good = grpc.ssl_channel_credentials(ca, read(self.pki["client.key"]),
                                            read(self.pki["client.pem"]))
        with grpc.secure_channel(self.mtls.address, good) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)
            self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="lin"), timeout=30).ready)
        for creds in (grpc.ssl_channel_credentials(ca),
                      grpc.ssl_channel_credentials(ca, read(self.pki["rogue.key"]),
                                                   read(self.pki["rogue.pem"]))):
            with grpc.secure_channel(self.mtls.address, creds) as channel:
                with self.assertRaises(grpc.RpcError) as ctx:
                    pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(),
                                                                         timeout=10)
                self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAVAILABLE)
        # HTTPS: the same files.
        context = ssl.create_default_context(cafile=self.pki["ca.pem"])
        context.load_cert_chain(self.pki["client.pem"], self.pki["client.key"])
        status, _, _ = self.https("GET", "/v2/health/ready", "none", server=self.mtls,
                                  context=context)
        self.assertEqual(status, 200)
        for cert in (None, "rogue"):
            context = ssl.create_default_context(cafile=self.pki["ca.pem"])
            if cert:
                context.load_cert_chain(self.pki[f"{cert}.pem"], self.pki[f"{cert}.key"])
            with self.assertRaises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
                self.https("GET", "/v2/health/ready", "none", server=self.mtls, context=context)
        self.assertTrue(self.mtls.alive())

    # ---- the CLI ----
    def test_cli_with_tls_ca_and_token(self):
        def kiln(*args, token=None):
            env = {k: v for k, v in os.environ.items() if k != "KILN_TOKEN"}
            if token is not None:
                env["KILN_TOKEN"] = token
            return subprocess.run([os.path.join(e2e.BIN, "kiln"), "--server", self.server.address,
                                   "--tls-ca", self.pki["ca.pem"], *args], env=env,
                                  capture_output=True, text=True, timeout=300)

        done = kiln("metadata", "lin", token=self.infer_token)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("FP32", done.stdout)
        done = kiln("infer", "lin", "-i", "x=" + ",".join(str(v) for v in
                                                          self.x.flatten().tolist()) + ":2x4",
                    token=self.infer_token)
        self.assertEqual(done.returncode, 0, done.stderr)
        done = kiln("metadata", "lin")
        self.assertEqual(done.returncode, 9, done.stderr)
        self.assertIn("UNAUTHENTICATED", done.stderr)
        self.assertIn("set KILN_TOKEN or --token", done.stderr)
        done = kiln("unload", "lin", token=self.infer_token)
        self.assertEqual(done.returncode, 9, done.stderr)
        self.assertIn("PERMISSION_DENIED", done.stderr)
        done = kiln("--token", self.admin_token, "models")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("lin", done.stdout)
        # Without --tls-ca the handshake fails: the test CA is not the system's.
        plain = subprocess.run([os.path.join(e2e.BIN, "kiln"), "--server", self.server.address,
                                "--timeout", "10", "health"], capture_output=True, text=True,
                               timeout=60)
        self.assertNotEqual(plain.returncode, 0)
        self.assert_model_ready()


class StartupTest(unittest.TestCase):
    """A malformed token file or mismatched TLS files stop kilnd at start-up with a clear error."""

    def start_fails(self, args, *fragments):
        tmp = tempfile.mkdtemp(prefix="kiln-auth-start-")
        try:
            proc = subprocess.run([os.path.join(e2e.BIN, "kilnd"), "--port", "0", "--http-port",
                                   "0", "--model-repository", os.path.join(tmp, "m"), *args],
                                  capture_output=True, text=True, timeout=120)
            self.assertNotEqual(proc.returncode, 0)
            for fragment in fragments:
                self.assertIn(fragment, proc.stderr)
            return proc.stderr
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_bad_token_file_and_tls_files(self):
        tmp = tempfile.mkdtemp(prefix="kiln-auth-files-")
        try:
            secret = secrets.token_hex(16)
            bad = os.path.join(tmp, "tokens")
            with open(bad, "w") as f:
                f.write(f"# tokens\ninfer {secret}\n\nreader {secret}x\n")
            err = self.start_fails(["--auth-tokens", bad], "line 4: unknown role")
            self.assertNotIn(secret, err)
            with open(bad, "w") as f:
                f.write("admin 12345\n")
            self.start_fails(["--auth-tokens", bad], "line 1: the token has 5 characters")
            pki = make_pki(tmp)
            self.start_fails(["--tls-cert", pki["server.pem"]],
                             "TLS needs both --tls-cert and --tls-key")
            self.start_fails(["--tls-cert", pki["server.pem"], "--tls-key", pki["client.key"]],
                             "--tls-key", "does not belong to --tls-cert's certificate")
            self.start_fails(["--tls-cert", pki["server.key"], "--tls-key", pki["server.key"]],
                             "--tls-cert", "PEM certificate chain")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_warns_on_a_public_address_without_tokens(self):
        tmp = tempfile.mkdtemp(prefix="kiln-auth-warn-")
        try:
            args = ["--host", "0.0.0.0", "--port", "0", "--model-repository",
                    os.path.join(tmp, "m")]
            with KilndProcess(e2e.BIN, args) as server:
                self.assertIn("without authentication (--auth-tokens)", server.text())
            with e2e.Kilnd(os.path.join(tmp, "m")) as server:
                self.assertNotIn("without authentication", server.text())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
