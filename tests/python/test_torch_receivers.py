# ctest-labels: python torch
"""dcr.torch receivers in vLLM-style models (tests/python/vllm_models.py):
after prewarm on version 0 and the payloads of a change, every parameter
equals, bit for bit, a fresh model's dense load_weights of version 1 (the
oracle is torch itself running the loader), and so do the logits. Bad
input fails with one line and writes nothing."""

import os
import unittest

import torch

import dcr
import vllm_models as vm
from dcr import owner
from dcr.torch import Receiver

SEED = int.from_bytes(os.urandom(4), "little")


def changed(ckpt, frac, gen, nan=False):
    """ckpt with about frac of every tensor's elements given new values,
    special ones among them (a sign flip of the first element, so -0.0 for
    +0.0 too, and with nan a NaN in every q_proj)."""
    out = {}
    for name, t in ckpt.items():
        mask = torch.rand(t.shape, generator=gen) < frac
        noise = (torch.randn(t.shape, generator=gen) * 0.02).to(t.dtype)
        new = torch.where(mask, t + noise, t)
        flat = new.reshape(-1)
        flat[0] = -flat[0]
        if nan and name.endswith("q_proj.weight"):
            flat[1] = float("nan")
        out[name] = new.contiguous()
    return out


def dense(family, ckpt):
    m = vm.ServingModel(family)
    m.load_weights(ckpt.items())
    return m


class ReceiverTest(unittest.TestCase):
    def setUp(self):
        print("seed", SEED)
        self.gen = torch.Generator().manual_seed(SEED)
        self.ids = torch.randint(0, vm.V, (2, 12), generator=self.gen)

    def refit(self, family, frac=0.01, nan=False):
        c0 = vm.checkpoint_of(vm.init_masters(family, SEED))
        model = vm.ServingModel(family)
        rx = Receiver(model)
        rx.prewarm(c0)
        self.assertEqual(vm.bits_equal(vm.state_bits(model), vm.state_bits(dense(family, c0))), [])
        c1 = changed(c0, frac, self.gen, nan)
        payloads = owner.encode(c0, c1, tau=1, owner=0, xor_ok=lambda n: rx.path(n) != "overwrite",
                                bucket_bytes=1024)
        self.assertGreater(len(payloads), 1)
        records = rx.apply(payloads)
        self.assertGreater(records, 0)
        oracle = dense(family, c1)
        self.assertEqual(vm.bits_equal(vm.state_bits(model), vm.state_bits(oracle)), [], family)
        logits, expected = model.logits(self.ids), oracle.logits(self.ids)
        self.assertTrue(torch.equal(logits.view(torch.int32), expected.view(torch.int32)))
        self.assertEqual(bool(logits.isnan().any()), nan)
        return rx, model, c1

    def test_llama_fused_and_tied(self):
        rx, _, _ = self.refit("llama")
        rep = rx.report()
        self.assertEqual(rep["paths"]["lm_head.weight"], "skipped")  # tied: vLLM skips it
        self.assertEqual(rep["counts"]["xor"], len(rep["paths"]) - 1)
        self.assertEqual(rep["fallback"], {})

    def test_moe_stacked_experts(self):
        rx, _, _ = self.refit("moe")
        self.assertEqual(rx.report()["counts"]["xor"], len(vm.canonical_shapes("moe")))

    def test_fp32_converting_loader(self):
        rx, _, _ = self.refit("fp32")
        rep = rx.report()
        self.assertEqual(rep["counts"]["overwrite"], len(rep["paths"]))

    def test_unmappable_ops_fall_back_exactly(self):
        rx, _, _ = self.refit("gemma")
        fb = rx.report()["fallback"]
        norms = {n for n in vm.canonical_shapes("gemma") if n.endswith("norm.weight")}
        self.assertEqual(set(fb), norms | {"model.embed_tokens.weight"})
        self.assertIn("computed values", fb["model.norm.weight"])
        self.assertIn("cannot see", fb["model.embed_tokens.weight"])
        self.assertEqual(rx.stats["fallback_reloads"], len(fb))

    def test_large_change_rate(self):
        self.refit("moe", frac=0.5, nan=True)

    def test_overlapping_writes_keep_the_last(self):
        # A loader that writes a parameter twice (all of a, then b over its
        # first row) and one tensor through a transposed, strided view: the
        # later write owns the overlap, so the receiver needs the table of
        # last writers and index landings; the oracle is a dense load.
        class Overlap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.p = torch.nn.Parameter(torch.zeros(6, 8, dtype=torch.bfloat16), requires_grad=False)
                self.q = torch.nn.Parameter(torch.zeros(8, 6, dtype=torch.bfloat16), requires_grad=False)

            def load_weights(self, weights):
                for name, w in weights:
                    if name == "a":
                        self.p.data.copy_(w)
                    elif name == "b":
                        self.p.data[0].copy_(w)
                    else:
                        self.q.data.t().copy_(w)

        def ckpt(gen):
            return {"a": torch.randn(6, 8, generator=gen).bfloat16(), "b": torch.randn(8, generator=gen).bfloat16(),
                    "c": torch.randn(6, 8, generator=gen).bfloat16()}

        c0, c1 = ckpt(self.gen), ckpt(self.gen)
        model, oracle = Overlap(), Overlap()
        rx = Receiver(model)
        rx.prewarm(c0)
        self.assertEqual(rx.report()["counts"]["xor"], 3)
        self.assertEqual(rx.report()["fallback"], {})
        rx.apply(owner.encode(c0, c1, tau=1, owner=0))
        oracle.load_weights(list(c1.items()))
        self.assertTrue(torch.equal(model.p.view(torch.int16), oracle.p.view(torch.int16)))
        self.assertTrue(torch.equal(model.q.view(torch.int16), oracle.q.view(torch.int16)))

    def test_bad_input_writes_nothing(self):
        family = "llama"
        c0 = vm.checkpoint_of(vm.init_masters(family, SEED))
        model = vm.ServingModel(family)
        rx = Receiver(model)
        rx.prewarm(c0)
        before = vm.state_bits(model)
        c1 = changed(c0, 0.05, self.gen)
        good = owner.encode(c0, c1, tau=1, owner=0)
        with dcr.Encoder() as enc:
            enc.add("model.layers.9.mlp.up_proj.weight", (vm.I, vm.H), "bf16", dcr.XOR, [3], [1])
            unknown = enc.finish(1, 0, 99)
            enc.add("model.norm.weight", (vm.H + 1,), "bf16", dcr.XOR, [3], [1])
            wrong_shape = enc.finish(1, 0, 98)
        with self.assertRaisesRegex(ValueError, "model.layers.9.mlp.up_proj.weight: the model has no such tensor"):
            rx.apply(good + [unknown])
        with self.assertRaisesRegex(ValueError, "model.norm.weight: shape"):
            rx.apply(good + [wrong_shape])
        corrupt = bytearray(good[-1])
        corrupt[-1] ^= 1
        with self.assertRaises(dcr.Error):
            rx.apply(good[:-1] + [bytes(corrupt)])
        self.assertEqual(vm.bits_equal(vm.state_bits(model), before), [])
        # XOR records for a converting path are refused too.
        fp = vm.ServingModel("fp32")
        rx32 = Receiver(fp)
        rx32.prewarm(vm.checkpoint_of(vm.init_masters("fp32", SEED)))
        with dcr.Encoder() as enc:
            enc.add("model.norm.weight", (vm.H,), "bf16", dcr.XOR, [0], [1])
            xor = enc.finish(1, 0, 1)
        with self.assertRaisesRegex(ValueError, "overwrite only"):
            rx32.apply([xor])


if __name__ == "__main__":
    unittest.main()
