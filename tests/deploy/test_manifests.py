"""Checks the deployment files against each other and against `kilnd --help`: images, ports, probes,
volume mounts, the Secrets TLS and tokens come from, Prometheus annotations, every flag passed to
kilnd, and deploy/compose.yaml (parsed here; Compose itself is not run by this test)."""
import os
import re
import subprocess
import unittest

import yaml

SOURCE = os.environ.get("KILN_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ["KILN_BIN"]
K8S = os.path.join(SOURCE, "deploy", "kubernetes")


def load_all():
    docs = []
    for name in sorted(os.listdir(K8S)):
        if name.endswith(".yaml"):
            with open(os.path.join(K8S, name)) as f:
                docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def kilnd_flags():
    out = subprocess.run([os.path.join(BIN, "kilnd"), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    return set(re.findall(r"--[a-z][a-z0-9-]*", out))


def flag_names(args):
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def arg_value(args, flag):
    for a in args:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


class ManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_all()
        cls.flags = kilnd_flags()
        cls.by_kind = {}
        for d in cls.docs:
            cls.by_kind.setdefault(d["kind"], []).append(d)

    def one(self, kind):
        self.assertIn(kind, self.by_kind, f"no {kind} manifest")
        return self.by_kind[kind][0]

    def check_container(self, c, port_name=None):
        self.assertTrue(c["image"])
        for flag in flag_names(c["args"]):
            self.assertIn(flag, self.flags, f"{flag} is not a kilnd flag")
        port = int(arg_value(c["args"], "--port"))
        self.assertEqual(arg_value(c["args"], "--host"), "0.0.0.0")
        ports = {p["containerPort"]: p for p in c["ports"]}
        self.assertIn(port, ports)
        if port_name:
            self.assertEqual(ports[port]["name"], port_name)
        probe = c["readinessProbe"]
        if "grpc" in probe:
            self.assertEqual(probe["grpc"]["port"], port)
        else:
            # HTTP readiness on the HTTP port, HTTPS when kilnd has a certificate.
            self.assertEqual(probe["httpGet"]["path"], "/v2/health/ready")
            http = int(arg_value(c["args"], "--http-port"))
            by_name = {p["name"]: p["containerPort"] for p in c["ports"]}
            self.assertEqual(by_name[probe["httpGet"]["port"]], http)
            self.assertEqual(probe["httpGet"].get("scheme", "HTTP"),
                             "HTTPS" if arg_value(c["args"], "--tls-cert") else "HTTP")
        return port

    def test_every_document_has_kind_and_name(self):
        self.assertGreaterEqual(len(self.docs), 6)
        for d in self.docs:
            self.assertIn("apiVersion", d)
            self.assertTrue(d["metadata"]["name"])

    def test_deployment(self):
        dep = self.one("Deployment")
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        self.check_container(c, "grpc")
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/v2/health/live")
        # All three ports, and Prometheus' scrape annotations on the metrics one.
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"grpc": 8001, "http": 8000, "metrics": 8002})
        notes = dep["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(notes["prometheus.io/scrape"], "true")
        self.assertEqual(int(notes["prometheus.io/port"]), ports["metrics"])
        # TLS files and the token file come from Secrets mounted where the flags point.
        secrets = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
        mounts_by_volume = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        for flag in ("--tls-cert", "--tls-key", "--auth-tokens"):
            path = arg_value(c["args"], flag)
            self.assertIsNotNone(path, flag)
            volume = [v for v, mount in mounts_by_volume.items()
                      if path.startswith(mount.rstrip("/") + "/")]
            self.assertEqual(len(volume), 1, f"{flag} {path} is not on one mounted volume")
            self.assertIn(volume[0], secrets, f"{flag} is not mounted from a Secret")
            self.assertEqual(secrets[volume[0]]["defaultMode"] & 0o007, 0, "world-readable")
        self.assertIn("cpu", c["resources"]["requests"])
        self.assertIn("memory", c["resources"]["requests"])
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        self.assertIn(arg_value(c["args"], "--model-repository"), mounts)
        self.assertIn(arg_value(c["args"], "--cache-dir"), mounts)
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"]
                  if "persistentVolumeClaim" in v}
        for m in c["volumeMounts"]:
            if m["name"] in claims:
                self.assertEqual(claims[m["name"]],
                                 self.one("PersistentVolumeClaim")["metadata"]["name"])
        self.assertEqual(dep["spec"]["selector"]["matchLabels"],
                         dep["spec"]["template"]["metadata"]["labels"])

    def test_service_targets_the_deployment_port(self):
        svc = self.one("Service")
        dep = self.one("Deployment")
        self.assertEqual(svc["spec"]["selector"], dep["spec"]["template"]["metadata"]["labels"])
        names = {p["name"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]}
        for p in svc["spec"]["ports"]:
            self.assertIn(p["targetPort"], names)

    def test_autoscaler_targets_the_deployment(self):
        hpa = self.one("HorizontalPodAutoscaler")
        self.assertEqual(hpa["spec"]["scaleTargetRef"]["name"], self.one("Deployment")["metadata"]["name"])
        self.assertLessEqual(hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])

    def test_kserve_serving_runtime(self):
        rt = self.one("ServingRuntime")
        formats = {f["name"] for f in rt["spec"]["supportedModelFormats"]}
        self.assertIn("pytorch", formats)
        self.assertIn("grpc-v2", rt["spec"]["protocolVersions"])
        c = rt["spec"]["containers"][0]
        self.assertEqual(c["name"], "kserve-container")
        self.check_container(c)
        self.assertEqual(arg_value(c["args"], "--model-repository"), "/mnt/models")
        isvc = self.one("InferenceService")
        self.assertEqual(isvc["spec"]["predictor"]["model"]["runtime"], rt["metadata"]["name"])

    def test_dockerfile_entrypoint_uses_real_flags(self):
        with open(os.path.join(SOURCE, "deploy", "Dockerfile")) as f:
            text = f.read()
        entry = re.search(r"ENTRYPOINT\s*\[(.*)\]", text).group(1)
        for flag in re.findall(r'"(--[a-z-]+)"', entry):
            self.assertIn(flag, self.flags)
        self.assertIn("scripts/install-deps.sh", text)
        self.assertRegex(text, r"EXPOSE 8001")
        self.assertRegex(text, r"EXPOSE 8000")  # HTTP/REST, kilnd's --http-port default
        self.assertRegex(text, r"EXPOSE 8002")  # Prometheus /metrics, kilnd's --metrics-port default

    def test_metrics_port_is_exposed_and_annotated_for_prometheus(self):
        dep = self.one("Deployment")
        template = dep["spec"]["template"]
        c = template["spec"]["containers"][0]
        port = int(arg_value(c["args"], "--metrics-port"))
        self.assertIn("--metrics-port", self.flags)
        self.assertIn(port, {p["containerPort"] for p in c["ports"] if p["name"] == "metrics"})
        notes = template["metadata"]["annotations"]
        self.assertEqual(notes["prometheus.io/scrape"], "true")
        self.assertEqual(int(notes["prometheus.io/port"]), port)
        self.assertEqual(notes["prometheus.io/path"], "/metrics")
        svc = self.one("Service")
        self.assertIn("metrics", {p["targetPort"] for p in svc["spec"]["ports"]})


class ComposeTest(unittest.TestCase):
    """deploy/compose.yaml parses and agrees with the image: the three ports, named volumes on the
    image's /models and /cache, an HTTP readiness health check, real kilnd flags."""

    def test_compose_file(self):
        with open(os.path.join(SOURCE, "deploy", "compose.yaml")) as f:
            compose = yaml.safe_load(f)
        kiln = compose["services"]["kiln"]
        self.assertEqual(kiln["build"]["dockerfile"], "deploy/Dockerfile")
        # The build target defaults to the Dockerfile's last stage (what a plain `podman build` makes);
        # KILN_BUILD_TARGET=prebuilt names the stage that takes the host's binaries.
        with open(os.path.join(SOURCE, "deploy", "Dockerfile")) as f:
            stages = re.findall(r"^FROM \S+ AS (\S+)$", f.read(), re.M)
        target = re.fullmatch(r"\$\{KILN_BUILD_TARGET:-([\w-]+)\}", kiln["build"]["target"])
        self.assertIsNotNone(target, kiln["build"]["target"])
        self.assertEqual(target.group(1), stages[-1])
        self.assertIn("prebuilt", stages)
        # Docker's legacy builder runs every stage up to the target: the host-binaries stage must not
        # come after the stage that compiles.
        self.assertLess(stages.index("prebuilt"), stages.index("build"))
        # Compose v1 (Debian bookworm's docker-compose 1.29) refuses a top-level `name`.
        self.assertEqual(set(compose), {"services", "volumes"})
        published = sorted(int(p.rsplit(":", 1)[1]) for p in kiln["ports"])
        self.assertEqual(published, [8000, 8001, 8002])
        mounts = dict(v.split(":", 1) for v in kiln["volumes"])
        self.assertEqual(mounts, {"models": "/models", "cache": "/cache"})
        self.assertEqual(set(compose["volumes"]), {"models", "cache"})
        check = " ".join(kiln["healthcheck"]["test"])
        self.assertIn("/dev/tcp/127.0.0.1/8000", check)
        self.assertIn("GET /v2/health/ready", check)
        flags = kilnd_flags()
        for flag in flag_names(kiln["command"]):
            self.assertIn(flag, flags)
        with open(os.path.join(SOURCE, "deploy", "prometheus.yml")) as f:
            prometheus = yaml.safe_load(f)
        self.assertEqual(prometheus["scrape_configs"][0]["static_configs"][0]["targets"],
                         ["kiln:8002"])

    def test_health_check_command_against_kilnd(self):
        """The compose health check's command, run on the host against a real kilnd's HTTP port."""
        import tempfile
        with open(os.path.join(SOURCE, "deploy", "compose.yaml")) as f:
            test = yaml.safe_load(f)["services"]["kiln"]["healthcheck"]["test"]
        # ["CMD-SHELL", "<command>"]: the command runs under /bin/sh in the container.
        self.assertEqual(test[0], "CMD-SHELL")
        self.assertEqual(len(test), 2)
        script = test[1]
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.Popen([os.path.join(BIN, "kilnd"), "--port", "0", "--http-port", "0",
                                     "--model-repository", tmp], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            try:
                port = None
                for line in proc.stdout:
                    m = re.search(r"kilnd HTTP listening on \S+:(\d+)", line)
                    if m:
                        port = m.group(1)
                        break
                self.assertIsNotNone(port)
                ok = subprocess.run(["/bin/sh", "-c", script.replace("/8000", "/" + port)],
                                    timeout=30)
                self.assertEqual(ok.returncode, 0)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
                proc.stdout.close()


class RuntimeLibrariesTest(unittest.TestCase):
    """The container's runtime stage installs `install-deps.sh --runtime`; every library kilnd and kiln
    link directly must come from a package in that list (or from the base image)."""

    BASE_IMAGE = {"libc6", "libgcc-s1"}

    def owner(self, soname):
        path = None
        for line in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines():
            parts = line.strip().split(" => ")
            if parts[0].split(" ")[0] == soname and len(parts) == 2:
                path = parts[1]
                break
        self.assertIsNotNone(path, f"{soname} not found by ldconfig")
        real = os.path.realpath(path)
        for candidate in (real, real.replace("/usr/lib/", "/lib/", 1), path):
            r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout.split(":")[0]
        self.fail(f"no package owns {soname} ({real})")

    def test_runtime_stage_has_every_linked_library(self):
        runtime = set(subprocess.run(
            ["bash", os.path.join(SOURCE, "scripts", "install-deps.sh"), "--print-runtime"],
            capture_output=True, text=True, check=True).stdout.split())
        for binary in ("kilnd", "kiln-torch-worker", "kiln"):
            dyn = subprocess.run(["readelf", "-d", os.path.join(BIN, binary)], capture_output=True,
                                 text=True, check=True).stdout
            for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dyn):
                if soname.startswith("ld-linux"):
                    continue
                pkg = self.owner(soname)
                self.assertTrue(pkg in runtime or pkg in self.BASE_IMAGE,
                                f"{binary} links {soname} from {pkg}, missing in the runtime list")


if __name__ == "__main__":
    unittest.main()
