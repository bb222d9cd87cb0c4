# ctest-labels: python torch integration
"""End to end on real training: torch trains each family's FP32 masters with
AdamW; every step publishes the BF16 checkpoint, the owner encodes the
changed bits against the committed version into payloads in an object
store, the Python receiver verifies and applies them into its serving copy,
acknowledges through the control plane, and the coordinator commits. After
every step the serving copy's parameters and its logits on a fixed batch
equal a dense load_weights of that step's checkpoint, bit for bit."""

import os
import tempfile
import unittest

import torch

import dcr
import vllm_models as vm
from dcr import owner
from dcr.torch import Receiver

STEPS = 5
SEED = int.from_bytes(os.urandom(4), "little")


def _dense(family, ckpt):
    m = vm.ServingModel(family)
    m.load_weights(ckpt.items())
    return m


class _FailingScatter:
    """Fault injection around the receiver's scatter: the fail_at-th call
    raises after the earlier ones have written (a receiver dying mid-apply)."""

    def __init__(self, real, fail_at):
        self.real = real
        self.left = fail_at

    def apply(self, *args):
        self.left -= 1
        if self.left == 0:
            raise RuntimeError("injected failure mid-apply")
        self.real.apply(*args)

    def sync(self):
        self.real.sync()


class EndToEndTest(unittest.TestCase):
    def run_family(self, family, tmp):
        torch.manual_seed(SEED)
        masters = {k: v.requires_grad_() for k, v in vm.init_masters(family, SEED).items()}
        opt = torch.optim.AdamW(masters.values(), lr=1e-4, weight_decay=0.01)
        gen = torch.Generator().manual_seed(SEED)
        batch = torch.randint(0, vm.V, (4, 16), generator=gen)
        probe = torch.randint(0, vm.V, (2, 16), generator=gen)

        key = dcr.PayloadKey(os.urandom(32))
        store = dcr.ObjectStore("dir:" + os.path.join(tmp, family, "store"))
        control = dcr.Control("sqlite", os.path.join(tmp, family + "-control.db"))
        committed = vm.checkpoint_of(masters)
        serving = vm.ServingModel(family)
        rx = Receiver(serving)
        rx.prewarm(committed)
        rec = control.read()
        control.cas(rec, dict(rec, baseline=b"step-0"))
        receiver_id = 1
        changed_total = 0
        for step in range(1, STEPS + 1):
            logits = vm.hf_forward(family, masters, batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vm.V), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            candidate = vm.checkpoint_of(masters)

            tau = control.prepare("coord", step - 1, [receiver_id], 60000)
            payloads = owner.encode(committed, candidate, tau, owner=0, key=key, bucket_bytes=8192,
                                    xor_ok=lambda n: rx.path(n) != "overwrite")
            for i, p in enumerate(payloads):
                store.put("attempt-%d/owner-0/%06d" % (tau, i), p)
            received = [store.get(k) for k in store.keys("attempt-%d/" % tau)]
            records = rx.apply(received, key=key)
            control.ack(tau, receiver_id)
            rec = control.commit("coord", tau, control.read(), b"step-%d" % step)
            self.assertEqual(rec["version"], step)
            committed = candidate
            changed_total += records

            oracle = vm.ServingModel(family)
            oracle.load_weights(candidate.items())
            self.assertEqual(vm.bits_equal(vm.state_bits(serving), vm.state_bits(oracle)), [],
                             "%s step %d" % (family, step))
            got, want = serving.logits(probe), oracle.logits(probe)
            self.assertTrue(torch.equal(got.view(torch.int32), want.view(torch.int32)), "%s step %d" % (family, step))
        n = sum(t.numel() for t in committed.values())
        print("%s: %d AdamW steps, %d records (%.2f%% of elements per step), fallback reloads %d" % (
            family, STEPS, changed_total, 100.0 * changed_total / STEPS / n, rx.stats["fallback_reloads"]))
        self.assertGreater(changed_total, 0)
        return rx

    def test_families(self):
        print("seed", SEED)
        with tempfile.TemporaryDirectory(prefix="lib-e2e-") as tmp:
            for family in vm.FAMILIES:
                with self.subTest(family=family):
                    self.run_family(family, tmp)

    def test_failed_apply_is_repaired_by_overwrite_retry(self):
        """A receiver that fails mid-apply (after some records are written)
        never acknowledges; the coordinator's retry sends the complete
        changed set as overwrites, which repairs the half-applied storage;
        XOR is refused meanwhile."""
        with tempfile.TemporaryDirectory(prefix="lib-e2e-") as tmp:
            for family in ("moe", "gemma"):
                control = dcr.Control("sqlite", os.path.join(tmp, family + ".db"))
                rec = control.read()
                control.cas(rec, dict(rec, baseline=b"v0"))
                c0 = vm.checkpoint_of(vm.init_masters(family, SEED))
                gen = torch.Generator().manual_seed(SEED)
                c1 = {k: torch.where(torch.rand(v.shape, generator=gen) < 0.1, (v.float() * 1.01).to(v.dtype), v)
                      for k, v in c0.items()}
                model = vm.ServingModel(family)
                rx = Receiver(model)
                rx.prewarm(c0)
                real = rx._scatter
                rx._scatter = _FailingScatter(real, fail_at=7)
                tau = control.prepare("coord", 0, [1], 60000)
                with self.assertRaisesRegex(RuntimeError, "injected"):
                    rx.apply(owner.encode(c0, c1, tau, 0, bucket_bytes=2048))
                self.assertNotEqual(vm.bits_equal(vm.state_bits(model), vm.state_bits(_dense(family, c0))), [])
                with self.assertRaises(dcr.Error):  # nobody acknowledged tau
                    control.commit("coord", tau, control.read(), b"v1")
                rx._scatter = real
                tau = control.prepare("coord", 0, [1], 60000)
                with self.assertRaisesRegex(ValueError, "half-applied"):
                    rx.apply(owner.encode(c0, c1, tau, 0))
                rx.apply(owner.encode(c0, c1, tau, 0, xor_ok=lambda n: False))
                control.ack(tau, 1)
                self.assertEqual(control.commit("coord", tau, control.read(), b"v1")["version"], 1)
                self.assertEqual(vm.bits_equal(vm.state_bits(model), vm.state_bits(_dense(family, c1))), [], family)
                self.assertFalse(rx.dirty)

    def test_receiver_refuses_foreign_key(self):
        with tempfile.TemporaryDirectory(prefix="lib-e2e-"):
            c0 = vm.checkpoint_of(vm.init_masters("llama", SEED))
            model = vm.ServingModel("llama")
            rx = Receiver(model)
            rx.prewarm(c0)
            c1 = {k: (v * 1.5).to(v.dtype) for k, v in c0.items()}
            forged = owner.encode(c0, c1, 1, 0, key=dcr.PayloadKey(os.urandom(32)))
            before = vm.state_bits(model)
            with self.assertRaises(dcr.Error):
                rx.apply(forged, key=dcr.PayloadKey(os.urandom(32)))
            self.assertEqual(vm.bits_equal(vm.state_bits(model), before), [])


if __name__ == "__main__":
    unittest.main()
