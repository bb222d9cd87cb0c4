"""The owner's side in Python: compare two versions of canonical tensors by
their stored bits and encode the changed records into payloads with libdcr.

Comparison is libdcr's change detection, the constructor's own
(dcr_construct_diff, dcr/construct.h): by bit pattern, never float equality
(-0.0 against +0.0 and NaN payloads count as changes). XOR records are used
for every tensor whose receivers allow it (xor_ok(name) true), overwrite
records otherwise.
"""

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
