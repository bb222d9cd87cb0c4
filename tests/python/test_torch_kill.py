# ctest-labels: python torch integration
"""A Python receiver process killed (SIGKILL) mid-apply: the attempt cannot
commit (no acknowledgment), the restarted process restores the committed
version by a dense load, the coordinator's retry (a new attempt, every record
an absolute overwrite) brings it to the new version, and its parameters'
digest equals a dense load of the new checkpoint computed here."""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import torch

import dcr
import vllm_models as vm
from dcr import owner
from receiver_proc import digest

HERE = os.path.dirname(os.path.abspath(__file__))


class KillTest(unittest.TestCase):
    def test_killed_mid_apply_recovers(self):
        family = "moe"
        with tempfile.TemporaryDirectory(prefix="lib-kill-") as work:
            control = dcr.Control("sqlite", os.path.join(work, "control.db"))
            store = dcr.ObjectStore("dir:" + os.path.join(work, "store"))
            c0 = vm.checkpoint_of(vm.init_masters(family, 5))
            gen = torch.Generator().manual_seed(6)
            c1 = {k: torch.where(torch.rand(v.shape, generator=gen) < 0.05, (v.float() * 1.02).to(v.dtype), v)
                  for k, v in c0.items()}
            torch.save(c0, os.path.join(work, "ckpt-0.pt"))
            rec = control.read()
            control.cas(rec, dict(rec, baseline=b"v0"))
            cmd = [sys.executable, os.path.join(HERE, "receiver_proc.py"), work, family, "1"]

            rx = subprocess.Popen(cmd + ["--slow"])
            tau = control.prepare("coord", 0, [1], 60000)
            for i, p in enumerate(owner.encode(c0, c1, tau, 0, bucket_bytes=2048)):
                store.put("attempt-%d/%04d" % (tau, i), p)
            store.put("attempt-%d/ready" % tau, b"")
            deadline = time.time() + 120
            while not os.path.exists(os.path.join(work, "applying")):
                self.assertIsNone(rx.poll(), "the receiver exited before applying")
                self.assertLess(time.time(), deadline)
                time.sleep(0.02)
            rx.send_signal(signal.SIGKILL)
            rx.wait()
            self.assertEqual(control.acks(tau), [])
            with self.assertRaises(dcr.Error):
                control.commit("coord", tau, control.read(), b"v1")

            for k in store.keys("attempt-%d/" % tau):
                store.delete(k)
            rx = subprocess.Popen(cmd)  # restart: restores version 0 by a dense load
            tau = control.prepare("coord", 0, [1], 60000)
            for i, p in enumerate(owner.encode(c0, c1, tau, 0, xor_ok=lambda n: False)):
                store.put("attempt-%d/%04d" % (tau, i), p)
            store.put("attempt-%d/ready" % tau, b"")
            self.assertEqual(rx.wait(timeout=120), 0)
            self.assertEqual(control.commit("coord", tau, control.read(), b"v1")["version"], 1)
            oracle = vm.ServingModel(family)
            oracle.load_weights(c1.items())
            with open(os.path.join(work, "digest-%d" % tau)) as f:
                self.assertEqual(f.read(), digest(oracle))


if __name__ == "__main__":
    unittest.main()
