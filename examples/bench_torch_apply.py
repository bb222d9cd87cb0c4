#!/usr/bin/env python3
"""Apply into torch parameters against a dense load_weights and against the
C receiver's apply on the same tensors and payloads, in one run.

    PYTHONPATH=python DCR_LIBRARY=build/libdcr.so python3 examples/bench_torch_apply.py \
        [--hidden 1024] [--layers 4] [--vocab 32000] [--rate 0.01] [--repeats 5] \
        [--rounds 3] [--max-version 1|2] [--c-bench build/dcr_bench_c_apply]

Builds the llama-style test model (tests/python/vllm_models.py: fused QKV,
merged gate/up, tied embeddings; the checkpoint leaves lm_head out, as tied
Hugging Face checkpoints do) at the given size in BF16, prewarms a dcr.torch
receiver on version 0 (time, and how far the process's resident memory
peaks above where it was, beside the same for the first dense load),
makes a uniform change of `rate` of every tensor's elements, encodes the XOR
payloads, and then, --repeats times, alternating: a dense load_weights of
version 0 (timed: the dense reference), then the receiver's apply of the
payloads (timed: verify + decode + apply; and apply alone, the writes after
decoding and checking). After every repeat the model must equal a dense
load_weights of version 1 bit for bit.

Two dense references: load_weights over tensors already in memory (the
floor of any reload), and the reload a serving runtime does, load_weights
over the checkpoint's files read from the page cache as vLLM's weight
iterators read them: a safetensors file (mapped privately, each tensor a view
of its bytes, as safe_open's get_tensor gives them) and a .pt file
(torch.load, as its pt iterator does). The files are read once before the first timing, so the
page cache holds them; each file load is checked bit for bit against the
in-memory one. --rounds alternates these repeats
with runs of the C half, so both see the same machine load.

The C side (examples/bench_c_apply.c, built as dcr_bench_c_apply) runs in a
child process on the same checkpoint file and payload files with the same
layout through the vLLM loader of workloads/serve: --repeats times a dense
load from memory, a dense load from the safetensors file (mapped and read
from the page cache), then decode + apply; its resident parameters must end
bit for bit equal
to the torch model's (dcr_hash64 of every parameter). Prints one JSON
object; every time is the best of the repeats. Without --c-bench (or when it
does not exist) the C half is left out and said so.
"""

import argparse
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import vllm_models as vm  # noqa: E402

import dcr  # noqa: E402
from dcr import _lib, owner  # noqa: E402
from dcr.torch import Receiver  # noqa: E402

_lib.lib.dcr_hash64.restype = ctypes.c_uint64
_lib.lib.dcr_hash64.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def _status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s in /proc/self/status" % key)


def peak_increase(fn):
    """(seconds, bytes): how long fn() takes and how far the process's
    resident memory peaks above where it was before (Linux: the peak is
    reset through /proc/self/clear_refs first; -1 where that is refused)."""
    before = _status_bytes("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    t0 = time.perf_counter()
    fn()
    took = time.perf_counter() - t0
    return took, (_status_bytes("VmHWM") - before if reset else -1)


def write_safetensors(path, tensors):
    """A safetensors file of BF16 tensors (the format: an 8-byte header
    length, a JSON header of dtype, shape and data offsets, the data)."""
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for raw in blobs:
            f.write(raw)


_ST_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


def safetensors_weights(path):
    """(name, tensor) pairs of a safetensors file in file order, as
    safetensors' safe_open(..., "pt").get_tensor gives them to vLLM's
    iterator: the file mapped privately as one torch storage, each tensor a
    view of its bytes (read from the page cache when load_weights copies it)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    base = 8 + n
    mapped = torch.from_file(path, shared=False, size=os.path.getsize(path), dtype=torch.uint8)
    for name, e in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                          key=lambda kv: kv[1]["data_offsets"][0]):
        lo, hi = e["data_offsets"]
        yield name, mapped[base + lo : base + hi].view(_ST_DTYPES[e["dtype"]]).view(e["shape"])


def pt_weights(path):
    """(name, tensor) pairs of a torch.save'd state dict (vLLM's pt iterator)."""
    return torch.load(path, map_location="cpu", weights_only=True).items()


def warm_page_cache(*paths):
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


def model_config(a):
    return {"name": "bench-torch-llama", "family": "llama", "hidden_size": a.hidden,
            "intermediate_size": vm.I, "num_hidden_layers": a.layers, "num_attention_heads": a.hidden // 64,
            "num_key_value_heads": vm.KV // 64, "head_dim": 64, "vocab_size": a.vocab,
            "tie_word_embeddings": True, "attention_bias": False}


def param_hashes(model):
    out = []
    for p in model.parameters():
        t = p.detach()
        out.append((t.numel() * t.element_size(), "%016x" % _lib.lib.dcr_hash64(t.data_ptr(),
                                                                              t.numel() * t.element_size())))
    return sorted(out)


def c_inputs(a, work, ckpt, payloads):
    """The C half's command line: model config and payload files written
    under work, the checkpoint file ckpt; None when there is no C binary."""
    if not a.c_bench or not os.path.exists(a.c_bench):
        return None
    cfg = os.path.join(work, "model.json")
    with open(cfg, "w") as f:
        json.dump(model_config(a), f)
    files = []
    for i, b in enumerate(payloads):
        files.append(os.path.join(work, "p%03d.bin" % i))
        with open(files[-1], "wb") as f:
            f.write(b)
    return [a.c_bench, cfg, ckpt, str(a.repeats)] + files


def run_c(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def best_c(runs):
    """The best of each C figure over rounds (parameters: the last run's)."""
    out = dict(runs[-1])
    for k in ("dense_s", "dense_file_s", "ingest_s", "apply_s"):
        out[k] = min(r[k] for r in runs)
    return out


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def torch_round(a, model, rx, files, c0, payloads, want, times):
    """--repeats times: dense load_weights of version 0 from the safetensors
    file, from the .pt file and from memory, then the apply of the payloads
    (version 1), checked against the dense oracle."""
    for _ in range(a.repeats):
        times["dense_st"].append(timed(lambda: model.load_weights(safetensors_weights(files["st"]))))
        times["dense_pt"].append(timed(lambda: model.load_weights(pt_weights(files["pt"]))))
        times["dense"].append(timed(lambda: model.load_weights(c0.items())))
        before = rx.stats["apply_s"]
        times["ingest"].append(timed(lambda: rx.apply(payloads)))
        times["apply_only"].append(rx.stats["apply_s"] - before)
        got = vm.state_bits(model)
        bad = [n for n in want if not torch.equal(got[n], want[n])]
        if bad:
            sys.exit("bench_torch_apply: after apply %s differs from a dense load_weights" % bad[0])


def check_file_loads(model, files, c0):
    """Each file's dense load must give the model the in-memory load's bits."""
    model.load_weights(c0.items())
    want = vm.state_bits(model)
    for kind, weights in (("safetensors", safetensors_weights(files["st"])), ("pt", pt_weights(files["pt"]))):
        model.load_weights(weights)
        got = vm.state_bits(model)
        bad = [n for n in want if not torch.equal(got[n], want[n])]
        if bad:
            sys.exit("bench_torch_apply: the %s file's load gives %s other bits" % (kind, bad[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="torch repeats and a C run, alternated (default 3)")
    ap.add_argument("--max-version", type=int, choices=(1, 2), default=None,
                    help="newest payload format version the owner writes (default: libdcr's)")
    ap.add_argument("--c-bench", default=None, help="the dcr_bench_c_apply binary (default: none)")
    a = ap.parse_args()
    if a.hidden % 256 or a.layers < 1 or a.vocab < 2 or a.vocab % 64 or not 0 < a.rate <= 1 or a.repeats < 1 or a.rounds < 1:
        ap.error("--hidden a multiple of 256, --layers >= 1, --vocab a multiple of 64, 0 < --rate <= 1, "
                 "--repeats >= 1, --rounds >= 1")
    vm.V, vm.H, vm.KV, vm.I, vm.L = a.vocab, a.hidden, a.hidden // 4, (a.hidden * 11) // 4, a.layers
    torch.manual_seed(a.seed)
    c0 = vm.checkpoint_of(vm.init_masters("llama", a.seed))
    del c0["lm_head.weight"]  # tied: the checkpoint holds the embedding only
    model = vm.ServingModel("llama")
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    first_dense_s, dense_peak = peak_increase(lambda: model.load_weights(c0.items()))
    rx = Receiver(model)
    prewarm_s, prewarm_peak = peak_increase(lambda: rx.prewarm(c0))
    extra = sum(land.lut.nbytes for lands in rx.landings.values() for land in lands if land.lut is not None)
    extra += sum(t.numel() * t.element_size() for t in rx.shadow.values())

    gen = torch.Generator().manual_seed(a.seed + 1)
    c1 = {}
    for name, t in c0.items():
        mask = torch.rand(t.shape, generator=gen) < a.rate
        c1[name] = torch.where(mask, (t.float() * 1.01 + 1e-3).to(t.dtype), t)
    payloads = owner.encode(c0, c1, tau=1, owner=0, max_version=a.max_version)
    records = 0
    for b in payloads:
        with dcr.Payload.decode(b) as p:
            records += sum(it.count for it in p.items())
    oracle = vm.ServingModel("llama")
    oracle.load_weights(c1.items())
    want = vm.state_bits(oracle)

    work = tempfile.mkdtemp(prefix="dcr-bench-torch-")
    try:
        files = {"st": os.path.join(work, "c0.safetensors"), "pt": os.path.join(work, "c0.pt")}
        write_safetensors(files["st"], c0)
        torch.save(c0, files["pt"])
        warm_page_cache(*files.values())
        check_file_loads(model, files, c0)
        cmd = c_inputs(a, work, files["st"], payloads)
        times = {k: [] for k in ("dense", "dense_st", "dense_pt", "ingest", "apply_only")}
        c_runs = []
        # Rounds alternate the torch repeats and a C run, so that both
        # halves see the same load; every figure is the best over rounds.
        for _ in range(a.rounds):
            torch_round(a, model, rx, files, c0, payloads, want, times)
            if cmd:
                c_runs.append(run_c(cmd))
    finally:
        shutil.rmtree(work)
    c = best_c(c_runs) if c_runs else None
    best = {k: min(v) for k, v in times.items()}
    dense_s, ingest_s, apply_s = best["dense"], best["ingest"], best["apply_only"]

    out = {
        "model_bytes": model_bytes, "tensors": len(c0), "records": records,
        "payload_bytes": sum(len(p) for p in payloads), "rate": a.rate, "repeats": a.repeats, "rounds": a.rounds,
        "max_version": a.max_version,
        "dense_load_weights_s": round(dense_s, 5), "apply_s": round(ingest_s, 5),
        "apply_only_s": round(apply_s, 5), "apply_over_dense": round(ingest_s / dense_s, 3),
        "apply_only_over_dense": round(apply_s / dense_s, 3),
        "dense_safetensors_file_s": round(best["dense_st"], 5), "dense_pt_file_s": round(best["dense_pt"], 5),
        "apply_over_dense_safetensors_file": round(ingest_s / best["dense_st"], 3),
        "apply_over_dense_pt_file": round(ingest_s / best["dense_pt"], 3),
        "prewarm_s": round(prewarm_s, 3), "first_dense_load_s": round(first_dense_s, 5),
        "prewarm_over_dense": round(prewarm_s / dense_s, 2),
        "prewarm_peak_rss_increase_bytes": prewarm_peak, "dense_load_peak_rss_increase_bytes": dense_peak,
        "receiver_extra_bytes": extra,
        "paths": rx.report()["counts"], "torch": torch.__version__, "threads": torch.get_num_threads(),
        "loadavg": open("/proc/loadavg").read().split()[:3],
    }
    if c is None:
        out["c_receiver"] = "not run (no --c-bench binary)"
    else:
        if c["records"] != records:
            sys.exit("bench_torch_apply: the C receiver applied %d records, torch %d" % (c["records"], records))
        same = sorted((n, h) for _, n, h in c["params"]) == param_hashes(model)
        if not same:
            sys.exit("bench_torch_apply: the C receiver's parameters differ from the torch model's")
        out["c_receiver"] = {
            "dense_s": c["dense_s"], "dense_file_s": c["dense_file_s"], "apply_s": c["ingest_s"],
            "apply_only_s": c["apply_s"], "apply_over_dense": round(c["ingest_s"] / c["dense_s"], 3),
            "apply_over_dense_file": round(c["ingest_s"] / c["dense_file_s"], 3),
            "torch_apply_over_c_apply": round(ingest_s / c["ingest_s"], 3),
            "torch_apply_only_over_c_apply_only": round(apply_s / c["apply_s"], 3),
            "parameters_equal": same,
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
