#!/usr/bin/env python3
"""dcr.torch in thirty lines: a model with a vLLM-style load_weights (q, k
and v fused into one parameter), a receiver prewarmed on version 0, the
owner's payloads for version 1, applied in place, checked bit for bit
against a dense load_weights of version 1.

    PYTHONPATH=python DCR_LIBRARY=build/libdcr.so python3 examples/torch_receiver.py
    PYTHONPATH=PREFIX/lib/python3/dist-packages python3 examples/torch_receiver.py   # installed
"""

import torch

from dcr import owner
from dcr.torch import Receiver


class Attention(torch.nn.Module):
    def __init__(self, h=64, kv=16):
        super().__init__()
        self.qkv = torch.nn.Parameter(torch.zeros(h + 2 * kv, h, dtype=torch.bfloat16), requires_grad=False)
        self.offsets = {"q_proj.weight": 0, "k_proj.weight": h, "v_proj.weight": h + kv}

    def load_weights(self, weights):  # vLLM's stacked-parameter mapping, in small
        for name, w in weights:
            self.qkv.data.narrow(0, self.offsets[name], w.shape[0]).copy_(w)


def checkpoint(seed):
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(r, 64, generator=g).bfloat16()
            for n, r in (("q_proj.weight", 64), ("k_proj.weight", 16), ("v_proj.weight", 16))}


v0 = checkpoint(0)
v1 = {n: torch.where(torch.rand(t.shape) < 0.05, t * 2, t) for n, t in v0.items()}  # 5% of elements change
model = Attention()
rx = Receiver(model)
print("prewarm:", rx.prewarm(v0)["counts"])
payloads = owner.encode(v0, v1, tau=1, owner=0)  # what an owner puts in the object store
print("applied %d records from %d payload(s)" % (rx.apply(payloads), len(payloads)))
dense = Attention()
dense.load_weights(v1.items())
same = torch.equal(model.qkv.view(torch.int16), dense.qkv.view(torch.int16))
print("bit for bit equal to a dense load_weights:", same)
raise SystemExit(0 if same else 1)
