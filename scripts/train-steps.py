#!/usr/bin/env python3
"""Real training steps for dcr's tests and benchmarks.

Trains a small model of one supported family (qwen2: dense, biased q/k/v;
qwen3_moe: q/k norms, a router and routed experts) with PyTorch's AdamW on
deterministic text, the way RL trainers keep weights: FP32 master weights,
cast to BF16 (round to nearest even, torch's own cast) after every step.
The learning rate warms up linearly over --warmup steps to --lr (1e-6 by
default) and stays there. The BF16 weights after --warmup + --steps - 1
and after --warmup + --steps steps are written as two safetensors
checkpoints, OUT/old and OUT/new (one optimizer step apart), each with a
Hugging Face config.json beside it, named as dcr's inventory names them, so

    dcr diff OUT/old OUT/new --json

measures one real step. The last line printed is one JSON object with the
step's changed elements and its entropy bound computed here with numpy
(docs/commands/diff.md#entropy-bound), an oracle for dcr diff's figures.
Needs Debian's python3-torch and python3-numpy
(scripts/install-deps.sh). Deterministic for a given seed and torch build.

Usage: train-steps.py --family qwen2|qwen3_moe --out DIR [--hidden 64]
       [--layers 2] [--vocab 512] [--warmup 3] [--steps 1] [--lr 1e-6]
       [--seq 64] [--batch 4] [--seed 1]
       train-steps.py --synthetic LIST --out DIR [--seed 1]

--synthetic LIST trains nothing: it writes OUT/model.safetensors with
N(0, 0.02) BF16 weights (norms 1 + N(0, 0.002)) for every tensor of LIST,
the output of `dcr inventory --model M [--scale S --layers N] --list`, as
starting weights for `dcr diff --init` on a model too large to train here
(the synthetic uniform benchmarks of issue 33).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of "
    "wisdom, it was the age of foolishness, it was the epoch of belief, it was "
    "the epoch of incredulity, it was the season of Light, it was the season of "
    "Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct "
    "to Heaven, we were all going direct the other way. "
    "Call me Ishmael. Some years ago - never mind how long precisely - having "
    "little or no money in my purse, and nothing particular to interest me on "
    "shore, I thought I would sail about a little and see the watery part of "
    "the world. It is a way I have of driving off the spleen and regulating "
    "the circulation. "
)


def fail(msg):
    print("train-steps: " + msg, file=sys.stderr)
    sys.exit(2)


def config_of(a):
    heads = max(2, a.hidden // 16)
    cfg = {
        "model_type": a.family,
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": heads,
        "num_key_value_heads": max(1, heads // 2),
        "vocab_size": a.vocab,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6,
    }
    if a.family == "qwen2":
        cfg["intermediate_size"] = 2 * a.hidden
    else:
        cfg["head_dim"] = a.hidden // heads
        cfg["moe_intermediate_size"] = a.hidden // 2
        cfg["num_experts"] = 4
        cfg["num_experts_per_tok"] = 2
    return cfg


class Model:
    """Parameters in a dict keyed by Hugging Face names, FP32 masters."""

    def __init__(self, cfg, gen):
        self.cfg = cfg
        h, v = cfg["hidden_size"], cfg["vocab_size"]
        self.nh, self.nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd = cfg.get("head_dim", h // self.nh)
        self.p = {}

        def normal(name, *shape):
            self.p[name] = (torch.randn(*shape, generator=gen) * 0.02).requires_grad_()

        def ones(name, n):
            self.p[name] = torch.ones(n).requires_grad_()

        def zeros(name, n):
            self.p[name] = torch.zeros(n).requires_grad_()

        normal("model.embed_tokens.weight", v, h)
        for i in range(cfg["num_hidden_layers"]):
            L = "model.layers.%d." % i
            ones(L + "input_layernorm.weight", h)
            normal(L + "self_attn.q_proj.weight", self.nh * self.hd, h)
            normal(L + "self_attn.k_proj.weight", self.nkv * self.hd, h)
            normal(L + "self_attn.v_proj.weight", self.nkv * self.hd, h)
            normal(L + "self_attn.o_proj.weight", h, self.nh * self.hd)
            if cfg["model_type"] == "qwen2":
                zeros(L + "self_attn.q_proj.bias", self.nh * self.hd)
                zeros(L + "self_attn.k_proj.bias", self.nkv * self.hd)
                zeros(L + "self_attn.v_proj.bias", self.nkv * self.hd)
            else:
                ones(L + "self_attn.q_norm.weight", self.hd)
                ones(L + "self_attn.k_norm.weight", self.hd)
            ones(L + "post_attention_layernorm.weight", h)
            if cfg["model_type"] == "qwen2":
                f = cfg["intermediate_size"]
                normal(L + "mlp.gate_proj.weight", f, h)
                normal(L + "mlp.up_proj.weight", f, h)
                normal(L + "mlp.down_proj.weight", h, f)
            else:
                f = cfg["moe_intermediate_size"]
                normal(L + "mlp.gate.weight", cfg["num_experts"], h)
                for e in range(cfg["num_experts"]):
                    E = L + "mlp.experts.%d." % e
                    normal(E + "gate_proj.weight", f, h)
                    normal(E + "up_proj.weight", f, h)
                    normal(E + "down_proj.weight", h, f)
        ones("model.norm.weight", h)
        normal("lm_head.weight", v, h)

    def bf16(self):
        """The weights as stored: FP32 masters cast to BF16 (nearest even)."""
        return {k: t.detach().to(torch.bfloat16) for k, t in self.p.items()}

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def rope(self, x):
        t = x.shape[-2]
        half = self.hd // 2
        freq = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
        ang = torch.arange(t, dtype=torch.float32)[:, None] * freq[None, :]
        cos, sin = ang.cos(), ang.sin()
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def attention(self, L, x):
        p, b, t = self.p, x.shape[0], x.shape[1]

        def proj(name, n):
            y = x @ p[L + "self_attn.%s.weight" % name].T
            if L + "self_attn.%s.bias" % name in p:
                y = y + p[L + "self_attn.%s.bias" % name]
            return y.view(b, t, n, self.hd).transpose(1, 2)

        q, k, v = proj("q_proj", self.nh), proj("k_proj", self.nkv), proj("v_proj", self.nkv)
        if L + "self_attn.q_norm.weight" in p:
            q = self.rms(q, p[L + "self_attn.q_norm.weight"])
            k = self.rms(k, p[L + "self_attn.k_norm.weight"])
        q, k = self.rope(q), self.rope(k)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        s = s.masked_fill(mask, float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, self.nh * self.hd)
        return y @ p[L + "self_attn.o_proj.weight"].T

    def swiglu(self, P, x):
        p = self.p
        g = F.silu(x @ p[P + "gate_proj.weight"].T) * (x @ p[P + "up_proj.weight"].T)
        return g @ p[P + "down_proj.weight"].T

    def mlp(self, L, x):
        if self.cfg["model_type"] == "qwen2":
            return self.swiglu(L + "mlp.", x)
        logits = x @ self.p[L + "mlp.gate.weight"].T
        w, idx = logits.softmax(-1).topk(self.cfg["num_experts_per_tok"], dim=-1)
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.cfg["num_experts"]):
            sel = (idx == e).float() * w
            gate = sel.sum(-1, keepdim=True)
            out = out + gate * self.swiglu(L + "mlp.experts.%d." % e, x)
        return out

    def loss(self, tokens):
        p = self.p
        x = p["model.embed_tokens.weight"][tokens[:, :-1]]
        for i in range(self.cfg["num_hidden_layers"]):
            L = "model.layers.%d." % i
            x = x + self.attention(L, self.rms(x, p[L + "input_layernorm.weight"]))
            x = x + self.mlp(L, self.rms(x, p[L + "post_attention_layernorm.weight"]))
        logits = self.rms(x, p["model.norm.weight"]) @ p["lm_head.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def write_safetensors(path, tensors):
    """safetensors: u64 header length, JSON header, then the data (BF16 LE)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def entropy_bound(old, new):
    """Positions n H(c/n) per tensor plus -log2 of each XOR mask's frequency."""
    pos_bits, masks = 0.0, []
    for k in old:
        a = old[k].view(torch.int16).numpy().view(np.uint16).ravel()
        b = new[k].view(torch.int16).numpy().view(np.uint16).ravel()
        d = a != b
        c, n = int(d.sum()), a.size
        if 0 < c < n:
            p = c / n
            pos_bits += n * (-p * math.log2(p) - (1 - p) * math.log2(1 - p))
        masks.append(a[d] ^ b[d])
    m = np.concatenate(masks) if masks else np.zeros(0, np.uint16)
    _, counts = np.unique(m, return_counts=True)
    val_bits = float((counts * np.log2(m.size / counts)).sum()) if m.size else 0.0
    return int(m.size), (pos_bits + val_bits) / 8.0


def save(out, sub, cfg, tensors):
    d = os.path.join(out, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)


def synthetic(list_path, out, seed):
    """N(0, 0.02) BF16 weights for every 'name [d0, d1] bf16' line of list_path."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for line in open(list_path):
        parts = line.split()
        if len(parts) < 3 or not parts[1].startswith("["):
            continue
        shape = [int(x) for x in line[line.index("[") + 1 : line.index("]")].split(",") if x.strip()]
        if parts[-1] != "bf16":
            fail("%s: %s is %s; --synthetic writes bf16 tensors only" % (list_path, parts[0], parts[-1]))
        n = int(np.prod(shape)) if shape else 1
        x = rng.standard_normal(n, dtype=np.float32) * 0.02
        if "norm" in parts[0]:
            x = 1.0 + 0.1 * x
        tensors[parts[0]] = torch.from_numpy(x.reshape(shape)).to(torch.bfloat16)
    if not tensors:
        fail("%s lists no tensor (expected `dcr inventory --list` output)" % list_path)
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    print("wrote %d tensors to %s" % (len(tensors), os.path.join(out, "model.safetensors")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=["qwen2", "qwen3_moe"])
    ap.add_argument("--synthetic", metavar="LIST")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.synthetic:
        synthetic(a.synthetic, a.out, a.seed)
        return
    if a.family is None:
        fail("--family qwen2|qwen3_moe (or --synthetic LIST) is required")
    if a.hidden < 32 or a.hidden % 32 or a.layers < 1 or a.vocab < 256 or a.steps < 1:
        fail("--hidden must be a multiple of 32, --layers >= 1, --vocab >= 256, --steps >= 1")
    if a.warmup < 0 or not (0 < a.lr < 1) or a.seq < 2 or a.batch < 1:
        fail("--warmup >= 0, 0 < --lr < 1, --seq >= 2, --batch >= 1")
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(a.seed)
    cfg = config_of(a)
    m = Model(cfg, gen)
    opt = torch.optim.AdamW(list(m.p.values()), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.01)
    data = torch.tensor(list(TEXT.encode("ascii")), dtype=torch.long)
    total = a.warmup + a.steps
    prev = m.bf16()
    for step in range(1, total + 1):
        lr = a.lr * min(1.0, step / (a.warmup + 1))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(data) - a.seq - 1, (a.batch,), generator=gen)
        batch = torch.stack([data[s : s + a.seq + 1] for s in starts])
        opt.zero_grad()
        loss = m.loss(batch)
        loss.backward()
        opt.step()
        now = m.bf16()
        if step == total:
            save(a.out, "old", cfg, prev)
            save(a.out, "new", cfg, now)
            changed = sum(int((prev[k].view(torch.int16) != now[k].view(torch.int16)).sum()) for k in now)
            n = sum(t.numel() for t in now.values())
            print("%s: step %d (lr %.3g, loss %.4f): %d of %d BF16 elements changed (%.3f%%)"
                  % (a.family, step, lr, float(loss), changed, n, 100.0 * changed / n))
            c, bound = entropy_bound(prev, now)
            print(json.dumps({"family": a.family, "elements": n, "changed_elements": c,
                              "entropy_bound_bytes": bound}))
        prev = now


if __name__ == "__main__":
    main()
