"""The owner's side in Python: compare two versions of canonical tensors by
their stored bits and encode the changed records into payloads with libdcr.

Comparison is libdcr's change detection, the constructor's own
(dcr_construct_diff, dcr/construct.h): by bit pattern, never float equality
(-0.0 against +0.0 and NaN payloads count as changes). XOR records are used
for every tensor whose receivers allow it (xor_ok(name) true), overwrite
records otherwise.
"""

import numpy as np

import dcr

_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}


def words(tensor):
    """A canonical tensor's stored bits as numpy unsigned words (a copy of
    a torch tensor, or a view of a numpy array)."""
    name = _NAMES[str(tensor.dtype)]
    t = tensor.detach().contiguous().reshape(-1)
    signed = {2: "int16", 4: "int32"}[t.element_size()]
    import torch

    return t.view(getattr(torch, signed)).numpy().view(dcr.word_dtype(name)), name


def changed_items(old, new, xor_ok=lambda name: True):
    """Yields (name, shape, dtype, encoding, indices, values) for every
    canonical tensor of new whose bits differ from old's."""
    for name, t_new in new.items():
        w_new, dtype = words(t_new)
        w_old, dtype_old = words(old[name])
        if dtype_old != dtype or w_old.shape != w_new.shape:
            raise ValueError("dcr.owner: %s changed dtype or shape between versions" % name)
        encoding = dcr.XOR if xor_ok(name) else dcr.OVERWRITE
        idx, vals = dcr.diff(w_old, w_new, dtype, encoding)
        if idx.size:
            yield name, tuple(t_new.shape), dtype, encoding, idx, vals


def encode(old, new, tau, owner, xor_ok=lambda name: True, key=None, bucket_bytes=64 << 20,
           shuffle=False, max_version=None):
    """Payloads (bytes) carrying every change from old to new, cut into
    buckets of about bucket_bytes of raw records; tensors are never split.
    max_version: see dcr.Encoder."""
    out = []
    pid = 0
    with dcr.Encoder(key, max_version) as enc:
        pending = 0
        for name, shape, dtype, encoding, idx, vals in changed_items(old, new, xor_ok):
            enc.add(name, shape, dtype, encoding, idx, vals)
            pending += idx.size * (8 + vals.itemsize)
            if pending >= bucket_bytes:
                out.append(enc.finish(tau, owner, pid, shuffle=shuffle))
                pid += 1
                pending = 0
        if pending or not out:
            out.append(enc.finish(tau, owner, pid, shuffle=shuffle))
    return out


# ---- repair sets (dcr/recovery.h) -------------------------------------------


def repair_payloads(old, new, tau, owner, key=None, bucket_bytes=64 << 20):
    """The committed run's records in overwrite form (what the constructor
    keeps, dcr/construct.h): every element whose bits differ from old to
    new, with its new value, stamped with the committing attempt tau. Stored
    as the version's repair set (dcr.ObjectStore.retain_repair), they bring
    a receiver killed mid-apply of a covered attempt from old to new,
    whatever part of that attempt landed."""
    return encode(old, new, tau, owner, xor_ok=lambda name: False, key=key, bucket_bytes=bucket_bytes)


def covered(old, tried, committed):
    """Whether a run from old over candidate tried emitted only records
    whose positions the committed run's (from old over committed) hold,
    tensor by tensor: then the committed run's repair set repairs a receiver
    dirty from the tried run (the constructor's coverage rule)."""
    for name, t_tried in tried.items():
        w_old, dtype = words(old[name])
        tried_idx, _ = dcr.diff(w_old, words(t_tried)[0], dtype, dcr.OVERWRITE)
        if tried_idx.size == 0:
            continue
        if name not in committed:
            return False
        kept, _ = dcr.diff(w_old, words(committed[name])[0], dtype, dcr.OVERWRITE)
        at = np.searchsorted(kept, tried_idx)
        if (at >= kept.size).any() or not (kept[np.minimum(at, kept.size - 1)] == tried_idx).all():
            return False
    return True
