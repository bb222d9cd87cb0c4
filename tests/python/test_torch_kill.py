# ctest-labels: python torch integration
"""A Python receiver process killed (SIGKILL) mid-apply.

Dense restart: the attempt cannot commit (no acknowledgment), the restarted
process restores the committed version by a dense load, the coordinator's
retry (a new attempt, every record an absolute overwrite) brings it to the
new version, and its parameters' digest equals a dense load of the new
checkpoint computed here.

Repair and replay (the C rollout nodes' paths, dcr/recovery.h): the
receiver's weights live in resident files; killed mid-apply of attempt tau1
from version 0, it leaves them a mixture of versions 0 and 1. The run goes
on without it: a survivor commits version 1 (attempt tau2, XOR records) and
version 2; the owner retains each version's payloads and stores its repair
set (the committed run's records in overwrite form, covering tau1). The
restarted process repairs from version 1's repair set and replays version 2
(libdcr decides, reads, checks every payload's digest), and its parameters
equal a dense load of version 2."""

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
from dcr.torch import Receiver, Resident, restore_state
from receiver_proc import digest

HERE = os.path.dirname(os.path.abspath(__file__))


class KillTest(unittest.TestCase):
    def _kill_mid_apply(self, cmd, work, control, store, c0, c1, required):
        """Starts the receiver process (slow scatters), opens an attempt
        requiring `required`, publishes the owner's payloads for c0 -> c1,
        and kills the receiver by SIGKILL once it is applying; the attempt."""
        rx = subprocess.Popen(cmd + ["--slow"])
        tau = control.prepare("coord", 0, required, 60000)
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
        return tau

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

            tau = self._kill_mid_apply(cmd, work, control, store, c0, c1, [1])
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


    def test_killed_live_receiver_repairs_and_replays(self):
        family = "moe"
        with tempfile.TemporaryDirectory(prefix="lib-repair-") as work:
            control = dcr.Control("sqlite", os.path.join(work, "control.db"))
            store = dcr.ObjectStore("dir:" + os.path.join(work, "store"))
            c0 = vm.checkpoint_of(vm.init_masters(family, 5))
            gen = torch.Generator().manual_seed(7)
            c1 = _changed(c0, gen)
            c2 = _changed(c1, gen)
            for v, c in enumerate((c0, c1, c2)):
                torch.save(c, os.path.join(work, "ckpt-%d.pt" % v))
            rec = control.read()
            control.cas(rec, dict(rec, baseline=b"v0"))
            cmd = [sys.executable, os.path.join(HERE, "receiver_proc.py"), work, family, "1",
                   "--live", os.path.join(work, "resident-1")]

            tau1 = self._kill_mid_apply(cmd, work, control, store, c0, c1, [1, 2])

            # The run goes on without receiver 1: a survivor takes versions 1 and 2.
            survivor = vm.ServingModel(family)
            srx = Receiver(survivor)
            srx.prewarm(c0)
            for k in store.keys("attempt-%d/" % tau1):
                store.delete(k)
            for version, (old, new) in enumerate(((c0, c1), (c1, c2)), start=1):
                tau = control.prepare("coord", version - 1, [2], 60000)
                payloads = owner.encode(old, new, tau, 0)
                srx.apply(payloads)
                control.ack(tau, 2)
                self.assertEqual(control.commit("coord", tau, control.read(), b"v%d" % version)["version"], version)
                store.retain(version, tau, payloads)
                # tau1 tried the same candidate from the same baseline: covered.
                self.assertTrue(owner.covered(old, new, new))
                covers_from = tau1 if version == 1 else tau
                store.retain_repair(version, tau, covers_from, 0, 1, owner.repair_payloads(old, new, tau, 0))

            subprocess.run(cmd + ["--restore-only"], check=True, timeout=300)
            with open(os.path.join(work, "restore-1")) as f:
                self.assertEqual(f.read().split()[0], "repair")
            dense = {}
            for v, c in enumerate((c0, c1, c2)):
                m = vm.ServingModel(family)
                m.load_weights(c.items())
                dense[v] = digest(m)
            with open(os.path.join(work, "mixture-1")) as f:
                mixture = f.read()
            self.assertNotIn(mixture, dense.values(), "the kill left no partly applied state to repair")
            with open(os.path.join(work, "digest-restored-1")) as f:
                self.assertEqual(f.read(), dense[2])
            self.assertEqual(digest(survivor), dense[2])

    def test_uncovered_dirty_receiver_is_left_untouched_for_dense(self):
        """Dirty from an attempt the repair set does not cover, with XOR
        records retained: restore refuses before any write and says dense."""
        family = "moe"
        with tempfile.TemporaryDirectory(prefix="lib-refuse-") as work:
            store = dcr.ObjectStore("dir:" + os.path.join(work, "store"))
            c0 = vm.checkpoint_of(vm.init_masters(family, 5))
            c1 = _changed(c0, torch.Generator().manual_seed(8))
            store.retain(1, 5, owner.encode(c0, c1, 5, 0))
            store.retain_repair(1, 5, 5, 0, 1, owner.repair_payloads(c0, c1, 5, 0))
            model = vm.ServingModel(family)
            res = Resident(model, os.path.join(work, "resident"))
            rx = Receiver(model)
            rx.prewarm(c0)
            res.mark_dirty(4, 0)  # attempt 4: before the set's coverage (5..5)
            before = digest(model)
            held, dirty = restore_state(res.state(), {"version": 1, "attempt": 5})
            self.assertEqual((held, dirty), (None, (4, 0)))
            kind, why = rx.restore(store, 1, held=held, dirty=dirty)
            self.assertEqual(kind, "dense")
            self.assertIn("XOR", why)
            self.assertEqual(digest(model), before)
            with self.assertRaises(ValueError):  # still dirty: XOR refused until a dense load
                rx.apply(store.retained(1)["payloads"])
            self.assertEqual(digest(model), before)
            # Loaded densely at 0, it replays version 1 from the retained payloads;
            # a version not retained (2) fails before any write and says dense.
            rx.load_dense(c0)
            kind, why = rx.restore(store, 2, held=0)
            self.assertEqual(kind, "dense")
            self.assertIn("not found", why)
            self.assertEqual(digest(model), before)
            self.assertEqual(rx.restore(store, 1, held=0)[0], "replay")
            oracle = vm.ServingModel(family)
            oracle.load_weights(c1.items())
            self.assertEqual(digest(model), digest(oracle))


def _changed(c, gen):
    return {k: torch.where(torch.rand(v.shape, generator=gen) < 0.05, (v.float() * 1.02).to(v.dtype), v)
            for k, v in c.items()}


if __name__ == "__main__":
    unittest.main()
