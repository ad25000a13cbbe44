"""`kiln profile` against the real kilnd: per-node times of a small conv net (the conv listed with
a nonzero time, shares adding up to 100%, layouts and shapes shown), the Chrome trace it writes
with --trace (one complete event per step run), a loop's steps profiled per iteration, and a
plain request (no "profile" parameter) answering no profile. Models are made by torch at test
time."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from test_end_to_end import BIN, Kilnd


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.conv1(x))
        y = torch.relu(self.conv2(y)) + y
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Doubling(torch.nn.Module):
    """A loop on values: runs on the dynamic path."""

    def forward(self, x):
        while bool(x.sum() < 100):
            x = x * 2
        return x


def parse_profile(stdout):
    """The table rows of `kiln profile` as dicts (share, ms, calls, node, op, kernel, step, rest)."""
    rows = []
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.split()[:3] == ["%", "ms", "calls"])
    for line in lines[start + 1:]:
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$",
                     line)
        if not m:
            break
        rows.append({"share": float(m.group(1)), "ms": float(m.group(2)),
                     "calls": float(m.group(3)), "node": int(m.group(4)), "op": m.group(5),
                     "kernel": m.group(6), "step": m.group(7), "rest": m.group(8)})
    return rows


class ProfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-profile-")
        torch.manual_seed(0)
        x = torch.rand(1, 3, 32, 32)
        torch.jit.trace(ConvNet().eval(), x).save(os.path.join(cls.tmp, "convnet.pt"))
        np.save(os.path.join(cls.tmp, "x.npy"), x.numpy())
        torch.jit.script(Doubling()).save(os.path.join(cls.tmp, "doubling.pt"))
        np.save(os.path.join(cls.tmp, "ones.npy"), np.ones(4, np.float32))
        cls.server = Kilnd(os.path.join(cls.tmp, "repo"))
        for name in ("convnet", "doubling"):
            cls.kiln_cli("upload", os.path.join(cls.tmp, f"{name}.pt"), "--name", name)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def kiln_cli(cls, *args, check=True):
        cmd = [os.path.join(BIN, "kiln"), "--server", cls.server.address, *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def assert_shares_add_up(self, rows, stdout):
        total = sum(r["share"] for r in rows)
        # Each share is rounded to 0.1%.
        self.assertAlmostEqual(total, 100.0, delta=0.05 * len(rows) + 0.1, msg=stdout)

    def test_conv_net_table_and_trace(self):
        trace = os.path.join(self.tmp, "trace.json")
        merged = os.path.join(self.tmp, "profile.json")
        r = self.kiln_cli("profile", "convnet", "-i", f"x={os.path.join(self.tmp, 'x.npy')}",
                          "--runs", 3, "--trace", trace, "--json", merged)
        self.assertIn("3 runs; per run:", r.stdout)
        rows = parse_profile(r.stdout)
        self.assertGreater(len(rows), 2, r.stdout)
        convs = [row for row in rows if row["op"] == "Conv"]
        self.assertEqual(len(convs), 2, r.stdout)
        for conv in convs:
            self.assertGreater(conv["ms"], 0.0, r.stdout)
            self.assertEqual(conv["calls"], 1, r.stdout)
            self.assertEqual(conv["step"], "static", r.stdout)
            self.assertIn("FP32[1, 16, 32, 32]", conv["rest"], r.stdout)
            self.assertIn("aten::_convolution", conv["rest"], r.stdout)
        # Sorted by time, longest first.
        self.assertEqual([row["ms"] for row in rows], sorted((row["ms"] for row in rows),
                                                             reverse=True), r.stdout)
        self.assert_shares_add_up(rows, r.stdout)

        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        complete = [e for e in events if e.get("ph") == "X"]
        with open(merged) as f:
            profile = json.load(f)
        self.assertEqual(profile["runs"], 3)
        # One complete event per step run.
        self.assertEqual(len(complete), sum(n["calls"] for n in profile["nodes"]))
        for e in complete:
            self.assertIsInstance(e["name"], str)
            self.assertGreaterEqual(e["dur"], 0)
            self.assertGreaterEqual(e["ts"], 0)
        self.assertEqual(sorted({e["args"]["run"] for e in complete}), [0, 1, 2])
        self.assertTrue(any(e["args"]["op"] == "Conv" and e["dur"] > 0 for e in complete))

    def test_loop_steps_are_profiled_per_iteration(self):
        r = self.kiln_cli("profile", "doubling", "-i", f"x={os.path.join(self.tmp, 'ones.npy')}",
                          "--runs", 2)
        rows = parse_profile(r.stdout)
        loops = [row for row in rows if row["op"] == "Loop"]
        self.assertEqual(len(loops), 1, r.stdout)
        self.assertEqual(loops[0]["step"], "loop")
        self.assertEqual(loops[0]["calls"], 1)
        # 4 -> 8 -> 16 -> 32 -> 64 -> 128: five doublings, each a step inside the loop.
        muls = [row for row in rows if row["op"] == "Mul"]
        self.assertEqual(len(muls), 1, r.stdout)
        self.assertEqual(muls[0]["calls"], 5, r.stdout)
        self.assert_shares_add_up(rows, r.stdout)

    def test_top_limits_rows_and_plain_requests_have_no_profile(self):
        r = self.kiln_cli("profile", "convnet", "-i", f"x={os.path.join(self.tmp, 'x.npy')}",
                          "--runs", 1, "--top", 2)
        self.assertEqual(len(parse_profile(r.stdout)), 2, r.stdout)
        self.assertIn("more nodes:", r.stdout)
        # Off by default: `kiln infer` works as before.
        r = self.kiln_cli("infer", "convnet", "-i", f"x={os.path.join(self.tmp, 'x.npy')}")
        self.assertIn("output0", r.stdout)


if __name__ == "__main__":
    unittest.main()
