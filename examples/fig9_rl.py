#!/usr/bin/env python3
"""The seed's Figure 9 on real torch: a small policy-gradient loop run twice,
refit by dcr (a receiver failing mid-apply every --fail-every steps, repaired
by the overwrite retry) and by dense reloads; reward and KL curves must be
identical bit for bit.

    PYTHONPATH=python DCR_LIBRARY=build/libdcr.so python3 examples/fig9_rl.py \
        --out /tmp/fig9 [--family llama] [--steps 30] [--fail-every 5] [--seed 1]

The policy is a vLLM-style serving copy (tests/python/vllm_models.py) of FP32
masters trained with AdamW (BF16 weights published each step). Rollouts are
sampled from the serving copy with fixed per-step seeds; the toy task rewards
generating token 3. KL is KL(pi_step || pi_0) on a fixed probe batch, from
the serving copy's logits. Writes OUT/fig9.csv (step, reward and KL of both
runs, exact as float.hex too) and, when gnuplot is installed, OUT/fig9.svg
from examples/fig9.gp. Exit 1 when the curves differ anywhere.
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import vllm_models as vm  # noqa: E402

import dcr  # noqa: E402
from dcr import owner  # noqa: E402
from dcr.torch import Receiver  # noqa: E402

B, T, TARGET = 16, 8, 3


class _FailOnce:
    """Fault injection: the n-th scatter of one apply raises (a receiver
    dying mid-apply with part of the attempt written)."""

    def __init__(self, real, n):
        self.real, self.left = real, n

    def apply(self, *args):
        self.left -= 1
        if self.left == 0:
            raise RuntimeError("injected receiver failure")
        self.real.apply(*args)

    def sync(self):
        self.real.sync()


def sample(model, prompts, gen):
    seq = prompts.clone()
    for _ in range(T):
        probs = torch.softmax(model.logits(seq)[:, -1].float(), -1)
        seq = torch.cat([seq, torch.multinomial(probs, 1, generator=gen)], 1)
    return seq


def kl_to(p_logits, q_logits):
    p = torch.log_softmax(p_logits, -1)
    q = torch.log_softmax(q_logits, -1)
    return float((p.exp() * (p - q)).sum(-1).mean())


def run(mode, family, steps, fail_every, seed, tmp):
    torch.manual_seed(seed)
    masters = {k: v.requires_grad_() for k, v in vm.init_masters(family, seed).items()}
    opt = torch.optim.AdamW(masters.values(), lr=3e-3)
    committed = vm.checkpoint_of(masters)
    serving = vm.ServingModel(family)
    rx = None
    if mode == "dcr":
        rx = Receiver(serving)
        rx.prewarm(committed)
        control = dcr.Control("sqlite", os.path.join(tmp, "control.db"))
        rec = control.read()
        control.cas(rec, dict(rec, baseline=b"step-0"))
    else:
        serving.load_weights(committed.items())
    probe = torch.randint(0, vm.V, (4, 6), generator=torch.Generator().manual_seed(seed))
    ref_logits = serving.logits(probe)
    curve = []
    failed = set()  # steps whose first apply was killed mid-way
    for step in range(1, steps + 1):
        gen = torch.Generator().manual_seed(seed * 100003 + step)
        prompts = torch.randint(0, vm.V, (B, 1), generator=gen)
        with torch.no_grad():
            seq = sample(serving, prompts, gen)
        reward = (seq[:, 1:] == TARGET).float().mean(1)
        kl = kl_to(serving.logits(probe), ref_logits)
        curve.append((step, float(reward.mean()), kl))
        logp = torch.log_softmax(vm.hf_forward(family, masters, seq[:, :-1]), -1)
        taken = logp.gather(-1, seq[:, 1:].unsqueeze(-1)).squeeze(-1)[:, -T:].sum(1)
        loss = -((reward - reward.mean()) * taken).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        candidate = vm.checkpoint_of(masters)
        if mode == "dense":
            serving.load_weights(candidate.items())
        else:
            tau = control.prepare("fig9", step - 1, [1], 60000)
            payloads = owner.encode(committed, candidate, tau, 0, bucket_bytes=4096,
                                    xor_ok=lambda n: rx.path(n) != "overwrite")
            if fail_every and step % fail_every == 0:
                real = rx._scatter
                rx._scatter = _FailOnce(real, 3)
                try:
                    rx.apply(payloads)
                except RuntimeError:
                    failed.add(step)
                rx._scatter = real
                tau = control.prepare("fig9", step - 1, [1], 60000)
                payloads = owner.encode(committed, candidate, tau, 0, xor_ok=lambda n: False)
            rx.apply(payloads)
            control.ack(tau, 1)
            control.commit("fig9", tau, control.read(), b"step-%d" % step)
        committed = candidate
    return curve, failed


def out_dir(path):
    """--out checked before any use: a plain path (no control characters),
    created when absent."""
    if not path or any(ord(c) < 32 for c in path):
        raise ValueError("--out must be a non-empty path without control characters")
    os.makedirs(path, exist_ok=True)
    if not os.path.isdir(path):
        raise ValueError("--out %s is not a directory" % path)
    return os.path.abspath(path)


def main():
    ap = argparse.ArgumentParser(description="Figure 9: reward and KL, dcr refit against dense reload")
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", default="llama", choices=vm.FAMILIES)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--fail-every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if not 1 <= a.steps <= 100000 or a.fail_every < 0:
        ap.error("--steps in [1, 100000], --fail-every >= 0")
    try:
        out = out_dir(a.out)
    except (ValueError, OSError) as e:
        ap.error(str(e))
    with tempfile.TemporaryDirectory(prefix="lib-fig9-") as tmp:
        refit, failed = run("dcr", a.family, a.steps, a.fail_every, a.seed, tmp)
        dense, _ = run("dense", a.family, a.steps, 0, a.seed, tmp)
    same = [r[1:] == d[1:] for r, d in zip(refit, dense)]
    with open(os.path.join(out, "fig9.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "reward_dcr", "reward_dense", "kl_dcr", "kl_dense", "reward_dcr_hex", "kl_dcr_hex", "same",
                    "receiver_failed"])
        for (s, r1, k1), (_, r2, k2), eq in zip(refit, dense, same):
            w.writerow([s, r1, r2, k1, k2, r1.hex(), k1.hex(), int(eq), int(s in failed)])
    if shutil.which("gnuplot"):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fig9.gp")
        subprocess.run(["gnuplot", script], cwd=out, check=True)
    print("fig9: %d steps, %d injected receiver failures, curves %s; first/last reward %.4f/%.4f, last KL %.3g"
          % (a.steps, len(failed), "identical" if all(same) else "DIFFER", refit[0][1], refit[-1][1], refit[-1][2]))
    return 0 if all(same) else 1


if __name__ == "__main__":
    sys.exit(main())
