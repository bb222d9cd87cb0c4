"""A rollout-node receiver as its own process, for test_torch_kill.py.

    python3 receiver_proc.py WORKDIR FAMILY RECEIVER_ID [--slow] [--live DIR [--restore-only]]

Restores the committed version by a dense load (DESIGN.md section 5 step 7:
a new or restarted receiver restores the committed version before it
joins): reads the commit record from the control plane and loads
WORKDIR/ckpt-<version>.pt. Then serves one attempt: waits for
WORKDIR/store/attempt-<tau>/ready, applies that attempt's payloads,
acknowledges, and writes a digest of every parameter's bits to
WORKDIR/digest-<tau>. With --slow every scatter sleeps (and
WORKDIR/applying marks the first one), so a test can kill it mid-apply.

--live DIR: the model's weights live in resident files under DIR
(dcr.torch.Resident), marked dirty with the attempt before its first write.
A start that finds them restores them as a C rollout node does: prewarms on
WORKDIR/ckpt-0.pt only to learn where elements land (the files' bytes are
put back afterwards; their digest goes to WORKDIR/mixture-<id>), then
Receiver.restore (libdcr's decision; replay or repair from the store's
retained versions and repair sets), or a dense load when that says dense;
the kind and why go to WORKDIR/restore-<id>. --restore-only: then writes
the digest to WORKDIR/digest-restored-<id> and exits."""

import hashlib
import os
import sys
import time

import torch

import dcr
import vllm_models as vm
from dcr.torch import Receiver, Resident, restore_state


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


def _option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


def _write(work, name, text):
    with open(os.path.join(work, name), "w") as f:
        f.write(text)


def restore_live(work, rid, rx, res, store, rec):
    """A restart over resident files: learn the landings, put the files'
    bytes back, restore to the committed version (dense when told)."""
    held, dirty = restore_state(res.state(), rec)
    files = [s.flat.clone() for s in rx.stores.values()]
    rx.prewarm(torch.load(os.path.join(work, "ckpt-0.pt")))  # for the landings only
    for s, saved in zip(rx.stores.values(), files):
        s.flat.copy_(saved)
    _write(work, "mixture-%d" % rid, digest(rx.model))
    kind, why = rx.restore(store, rec["version"], held=held, dirty=dirty)
    if kind == "dense":
        rx.load_dense(torch.load(os.path.join(work, "ckpt-%d.pt" % rec["version"])))
    res.mark_clean(rec["version"])
    _write(work, "restore-%d" % rid, "%s %s" % (kind, why))


def main():
    work, family, rid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    control = dcr.Control("sqlite", os.path.join(work, "control.db"))
    store = dcr.ObjectStore("dir:" + os.path.join(work, "store"))
    rec = control.read()
    version = rec["version"]
    model = vm.ServingModel(family)
    res = Resident(model, _option("--live")) if _option("--live") else None
    rx = Receiver(model)
    if res is not None and res.existed:
        restore_live(work, rid, rx, res, store, rec)
    else:
        rx.prewarm(torch.load(os.path.join(work, "ckpt-%d.pt" % version)))  # loads the committed version
        if res is not None:
            res.mark_clean(version)
    if "--restore-only" in sys.argv:
        _write(work, "digest-restored-%d" % rid, digest(model))
        return
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
    if res is not None:
        res.mark_dirty(tau, version)
    rx.apply([store.get(k) for k in keys])
    control.ack(tau, rid)
    _write(work, "digest-%d" % tau, digest(model))

if __name__ == "__main__":
    main()
