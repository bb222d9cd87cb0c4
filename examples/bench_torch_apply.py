#!/usr/bin/env python3
"""Apply into torch parameters against a dense load_weights, in one run.

    PYTHONPATH=python DCR_LIBRARY=build/libdcr.so python3 examples/bench_torch_apply.py \
        [--hidden 1024] [--layers 4] [--vocab 32000] [--rate 0.01] [--repeats 5]

Builds the llama-style test model (tests/python/vllm_models.py: fused QKV,
merged gate/up, tied embeddings) at the given size in BF16, prewarms a
dcr.torch receiver on version 0, makes a uniform change of `rate` of every
tensor's elements, and times (best of --repeats): a dense load_weights of the
new checkpoint into the model; the receiver's apply of the XOR payloads
(verify, decode and apply; applying the same XOR payloads again goes back,
so every repeat applies a real change); and decode alone. Prints one JSON
object. Prewarm time and the receiver's extra memory (landing tables and
fallback shadows) are reported beside the model's bytes.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import vllm_models as vm  # noqa: E402

import dcr  # noqa: E402
from dcr import owner  # noqa: E402
from dcr.torch import Receiver  # noqa: E402


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.hidden % 4 or a.hidden < 8 or a.layers < 1 or a.vocab < 2 or not 0 < a.rate <= 1 or a.repeats < 1:
        ap.error("--hidden a multiple of 4 (>= 8), --layers >= 1, --vocab >= 2, 0 < --rate <= 1, --repeats >= 1")
    vm.V, vm.H, vm.KV, vm.I, vm.L = a.vocab, a.hidden, a.hidden // 4, (a.hidden * 11) // 4, a.layers
    torch.manual_seed(a.seed)
    c0 = vm.checkpoint_of(vm.init_masters("llama", a.seed))
    model = vm.ServingModel("llama")
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    rx = Receiver(model)
    t0 = time.perf_counter()
    rx.prewarm(c0)
    prewarm_s = time.perf_counter() - t0
    extra = sum(land.lut.nbytes for lands in rx.landings.values() for land in lands if land.lut is not None)
    extra += sum(t.numel() * t.element_size() for t in rx.shadow.values())

    gen = torch.Generator().manual_seed(a.seed + 1)
    c1 = {}
    for name, t in c0.items():
        mask = torch.rand(t.shape, generator=gen) < a.rate
        c1[name] = torch.where(mask, (t.float() * 1.01 + 1e-3).to(t.dtype), t)
    payloads = owner.encode(c0, c1, tau=1, owner=0)
    records = sum(len(p.items()) and sum(i.count for i in p.items()) for p in
                  [dcr.Payload.decode(b) for b in payloads])

    dense_s = best(lambda: model.load_weights(c0.items()), a.repeats)
    apply_s = best(lambda: rx.apply(payloads), a.repeats)

    def decode_only():
        for b in payloads:
            with dcr.Payload.decode(b) as p:
                for it in p.items():
                    it.indices()
                    it.values()

    decode_s = best(decode_only, a.repeats)
    print(json.dumps({
        "model_bytes": model_bytes, "tensors": len(c0), "records": records,
        "payload_bytes": sum(len(p) for p in payloads), "rate": a.rate,
        "dense_load_weights_s": round(dense_s, 5), "apply_s": round(apply_s, 5),
        "decode_s": round(decode_s, 5), "apply_over_dense": round(apply_s / dense_s, 3),
        "prewarm_s": round(prewarm_s, 3), "prewarm_over_dense": round(prewarm_s / dense_s, 2),
        "receiver_extra_bytes": extra, "extra_over_model": round(extra / model_bytes, 3),
        "paths": rx.report()["counts"], "torch": torch.__version__, "threads": torch.get_num_threads(),
    }, indent=1))


if __name__ == "__main__":
    main()
