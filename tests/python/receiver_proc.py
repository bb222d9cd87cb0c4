"""A rollout-node receiver as its own process, for test_torch_kill.py.

    python3 receiver_proc.py WORKDIR FAMILY RECEIVER_ID [--slow]

Restores the committed version by a dense load (DESIGN.md section 5 step 7:
a new or restarted receiver restores the committed version before it
joins): reads the commit record from the control plane and loads
WORKDIR/ckpt-<version>.pt. Then serves one attempt: waits for
WORKDIR/store/attempt-<tau>/ready, applies that attempt's payloads,
acknowledges, and writes a digest of every parameter's bits to
WORKDIR/digest-<tau>. With --slow every scatter sleeps (and
WORKDIR/applying marks the first one), so a test can kill it mid-apply."""

import hashlib
import os
import sys
import time

import torch

import dcr
import vllm_models as vm
from dcr.torch import Receiver


class _Slow:
    def __init__(self, real, marker):
        self.real, self.marker = real, marker

    def apply(self, *args):
        self.real.apply(*args)
        open(self.marker, "w").close()
        time.sleep(0.2)

    def sync(self):
        self.real.sync()


def digest(model):
    h = hashlib.blake2b(digest_size=16)
    for name, bits in sorted(vm.state_bits(model).items()):
        h.update(name.encode())
        h.update(bits.numpy().tobytes())
    return h.hexdigest()


def main():
    work, family, rid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    control = dcr.Control("sqlite", os.path.join(work, "control.db"))
    store = dcr.ObjectStore("dir:" + os.path.join(work, "store"))
    version = control.read()["version"]
    committed = torch.load(os.path.join(work, "ckpt-%d.pt" % version))
    model = vm.ServingModel(family)
    rx = Receiver(model)
    rx.prewarm(committed)  # loads the committed version through the model's loader
    if "--slow" in sys.argv:
        rx._scatter = _Slow(rx._scatter, os.path.join(work, "applying"))
    while True:
        ready = [k for k in store.keys("attempt-") if k.endswith("/ready")]
        if ready:
            break
        time.sleep(0.05)
    prefix = ready[-1][: -len("ready")]
    tau = int(prefix.split("-")[1].rstrip("/"))
    keys = [k for k in store.keys(prefix) if not k.endswith("/ready")]
    rx.apply([store.get(k) for k in keys])
    control.ack(tau, rid)
    with open(os.path.join(work, "digest-%d" % tau), "w") as f:
        f.write(digest(model))


if __name__ == "__main__":
    main()
