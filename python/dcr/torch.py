"""dcr receivers inside PyTorch models, through the model's own loader.

    from dcr.torch import Receiver
    rx = Receiver(model)                 # model.load_weights(iterable of (name, tensor))
    rx.prewarm(committed_checkpoint)     # dict canonical name -> tensor (CPU)
    rx.apply([payload_bytes, ...], key=key)   # every payload of one attempt

Prewarm runs the model's own load_weights over the committed checkpoint, one
canonical tensor at a time, under a torch function mode that sees every
tensor operation. It follows each canonical tensor's elements through views
(any tensor sharing its storage), index-permuting operations (cat, stack,
contiguous, transpose, chunk, ...) and dtype conversions (to, float, ...,
and copy_ into a parameter of another dtype), and records, for every copy
into a parameter's storage, which canonical element lands in which storage
position and through which conversions. Anything else a loader does to a
canonical tensor's values (arithmetic, a write it cannot see) makes that
tensor a fallback: its committed values are kept in a host shadow, payload
records go into the shadow, and the tensor is reloaded densely through
load_weights after every attempt that changed it.

A probe pass then checks the learned map against the loader itself: the
checkpoint is loaded again with every value's sign bit flipped (which every
dtype conversion preserves, so every element that lands anywhere changes
bits), and every parameter element must equal what the map predicts. Where
no landing converts dtype (the usual BF16 model) this needs no copy of the
model: every parameter storage is digested, the flipped checkpoint loaded
one tensor at a time through one scratch buffer, the sign bits flipped back
at the positions the map predicts, and the digests must come out unchanged
(the model then holds the committed version again). Otherwise, or when a
digest differs, the exact probe compares every element against a copy: an
element that changed where the map says nothing lands, or landed with other
bits, turns its canonical tensor into a fallback, and the committed
checkpoint is loaded again. Interception itself keeps no index per element
for the usual writes (a whole canonical tensor copied into a contiguous
span of a parameter); other writes get index tensors, and a parameter with
overlapping writes a table of which write came last.

Apply validates every item of every payload first (digest, names, shapes,
dtypes, XOR only where the path has no conversion) and writes nothing when
any is wrong; then it XORs or overwrites the landed storage positions
directly. Limitations: CPU tensors only; a loader must load each checkpoint
tensor independently of the others (vLLM's loaders do), and torch 1.13 does
not route Tensor.__setitem__ through function modes, so a loader that writes
parameters with `param[...] = w` is caught by the probe and falls back.
"""

import hashlib
import json
import os
import time

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

import dcr

_TORCH_DTYPES = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
}
_INT_VIEW = {2: torch.int16, 4: torch.int32, 1: torch.uint8, 8: torch.int64}

# Operations that only move or select elements: the same call on a tensor
# of element indices gives where each output element came from.
_PERMUTING = {
    "view", "reshape", "narrow", "__getitem__", "chunk", "split", "split_with_sizes", "tensor_split",
    "t", "transpose", "permute", "contiguous", "clone", "flatten", "unflatten", "squeeze", "unsqueeze",
    "expand", "expand_as", "cat", "concat", "stack", "index_select", "select", "unbind", "view_as",
    "reshape_as", "detach", "movedim", "flip", "repeat", "T", "mT", "data", "__get__",
}
# Conversions: element order unchanged, values converted as torch does.
_CONVERTING = {"to", "float", "half", "bfloat16", "double", "type", "type_as"}
# Reads that neither move values nor matter to placement.
_INERT = {"size", "dim", "numel", "stride", "storage_offset", "is_contiguous", "element_size", "shape",
          "dtype", "device", "storage", "data_ptr", "__len__", "__format__", "__repr__", "ndim",
          "requires_grad", "is_floating_point", "nelement", "__hash__", "__eq__", "__bool__"}


def _name_of(func):
    name = getattr(func, "__name__", "")
    if name == "__get__":
        return getattr(getattr(func, "__self__", None), "__name__", "__get__")
    return name


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)


def _bits(t):
    """The stored bits of t as integers of the same width (a view)."""
    return t.view(_INT_VIEW[t.element_size()])


_ARANGE = {}
_WHOLE = object()  # the index of a whole canonical tensor, not built (see _Intercept._index)


def _arange(n):
    """torch.arange(n) (int64), cached: prewarm asks for the same storage
    sizes again and again."""
    got = _ARANGE.get(n)
    if got is None:
        got = _ARANGE[n] = torch.arange(n, dtype=torch.int64)
    return got


def _run_start(idx):
    """s when the 1-D int64 tensor idx is s, s+1, ..., s+n-1; else None."""
    n = idx.numel()
    if n == 0:
        return None
    s = int(idx[0])
    if s < 0 or int(idx[-1]) != s + n - 1:
        return None
    return s if torch.equal(idx, _arange(s + n)[s:]) else None


def _storage_index(numel_storage, t):
    """Storage positions of t's elements, in t's shape (a view: no copy)."""
    return _arange(numel_storage).as_strided(t.shape, t.stride(), t.storage_offset())


class _Landing:
    """Where some of one canonical tensor's elements land: lut[canonical flat
    index] = storage position in param storage `store` (-1: not here), with the
    dtype conversions met on the way."""

    __slots__ = ("store", "lut", "convs", "full", "offset")

    def __init__(self, store, lut, convs, offset=None):
        self.store = store
        self.convs = convs
        if offset is not None:
            self.full, self.offset, self.lut = True, offset, None
            return
        self.full = bool((lut >= 0).all())  # every element lands here: no mask on apply
        # The usual landing is one contiguous block (a narrow of a fused
        # parameter): position = offset + canonical index, and no table.
        self.offset = None
        if self.full and lut.size and np.array_equal(lut, np.arange(lut[0], lut[0] + lut.size)):
            self.offset = int(lut[0])
            lut = None
        elif lut.size and store.size < (1 << 31):
            lut = lut.astype(np.int32)
        self.lut = lut

    def pairs(self, numel):
        """(canonical flat indices, storage positions) of every element landing here."""
        if self.offset is not None:
            cidx = np.arange(numel)
            return cidx, cidx + self.offset
        cidx = np.flatnonzero(self.lut >= 0)
        return cidx, self.lut[cidx].astype(np.int64)


class _Store:
    """One parameter storage: a flat view over all of it, and numpy words."""

    def __init__(self, name, tensor):
        self.name = name
        self.dtype = tensor.dtype
        self.size = tensor.storage().size()
        self.flat = tensor.detach().as_strided((self.size,), (1,), 0)
        self.words = self.flat.view(_INT_VIEW[tensor.element_size()]).numpy()


class _Intercept(TorchFunctionMode):
    """Follows one canonical tensor through a load_weights call."""

    def __init__(self, rx, name, canon):
        super().__init__()
        self.rx = rx
        self.name = name
        self.canon = canon
        self.cptr = canon.storage().data_ptr()
        # Storage position -> canonical flat index (the identity for the
        # usual contiguous tensor, which needs no table).
        size = canon.storage().size()
        if canon.is_contiguous() and canon.storage_offset() == 0 and size == canon.numel():
            self.flat_of_storage = None
        else:
            self.flat_of_storage = torch.full((size,), -1, dtype=torch.int64)
            self.flat_of_storage[_storage_index(size, canon).reshape(-1)] = torch.arange(canon.numel())
        self.tracked = {}  # id(tensor) -> (tensor, index tensor, convs)
        self.poisoned = {}  # id(tensor) -> tensor
        self.events = []

    # -- what a tensor is -------------------------------------------------
    def _index(self, t, lazy=False):
        """(index tensor, convs) when t's elements are canonical elements
        (index -1 where an element is not), else None. With lazy, the whole
        canonical tensor in its own order (what nearly every loader copies)
        is _WHOLE instead of an index tensor: no index is built for it."""
        hit = self.tracked.get(id(t))
        if hit is not None and hit[0] is t:
            idx = hit[1]
            return (idx if lazy or idx is not _WHOLE else self._whole_index(t)), hit[2]
        if t.dtype == self.canon.dtype and t.storage().data_ptr() == self.cptr:
            if self._is_whole(t):
                return (_WHOLE if lazy else self._whole_index(t)), ()
            pos = _storage_index(self.canon.storage().size(), t)
            return (pos if self.flat_of_storage is None else self.flat_of_storage[pos]), ()
        return None

    def _is_whole(self, t):
        """t is the canonical tensor's elements in row-major order."""
        return (self.flat_of_storage is None and t.storage_offset() == 0 and t.numel() == self.canon.numel()
                and t.is_contiguous())

    def _whole_index(self, t):
        return _arange(self.canon.numel()).view(t.shape)

    def _is_poisoned(self, t):
        hit = self.poisoned.get(id(t))
        return hit is not None and hit is t

    # -- the mode -----------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name_of(func)
        if name in ("copy_",):
            self._write(args[0], args[1], name)
        elif name.endswith("_") and not name.startswith("__") or "out" in kwargs:
            dst = kwargs.get("out", args[0] if args else None)
            if isinstance(dst, torch.Tensor):
                self._write(dst, None, name)
        out = func(*args, **kwargs)
        if name in _INERT:
            return out
        ins = [t for t in _tensors((args, kwargs)) if t is not out]
        involved = [t for t in ins if self._index(t, lazy=True) is not None or self._is_poisoned(t)]
        if not involved or not isinstance(out, (torch.Tensor, list, tuple)):
            return out
        if name.endswith("_") and not name.startswith("__"):
            return out  # the in-place write was recorded above
        if any(self._is_poisoned(t) for t in involved):
            self._poison(out)
        elif name in _PERMUTING:
            self._permute(func, args, kwargs, out)
        elif name in _CONVERTING:
            self._convert(args[0], out)
        else:
            self._poison(out)
        return out

    def _poison(self, out):
        for t in _tensors(out):
            self.poisoned[id(t)] = t

    def _permute(self, func, args, kwargs, out):
        def swap(a):
            if isinstance(a, torch.Tensor):
                got = self._index(a)
                if got is not None:
                    swap.convs.add(got[1])
                    return got[0]
                if a.is_floating_point():
                    return torch.full(a.shape, -1, dtype=torch.int64)
                return a
            if isinstance(a, (list, tuple)):
                return type(a)(swap(x) for x in a)
            return a

        swap.convs = set()
        with torch._C.DisableTorchFunction():
            idx_out = func(*swap(args), **{k: swap(v) for k, v in kwargs.items()})
        if len(swap.convs) != 1:
            self._poison(out)  # pieces converted differently: not one path
            return
        convs = swap.convs.pop()
        for t, i in zip(_tensors(out), _tensors(idx_out)):
            self.tracked[id(t)] = (t, i, convs)

    def _convert(self, src, out):
        if out is src:
            return  # a conversion to the dtype it has: the same tensor
        got = self._index(src, lazy=True)
        if got is None or not isinstance(out, torch.Tensor) or out.shape != src.shape:
            self._poison(out)
            return
        idx, convs = got
        if out.dtype != src.dtype:
            convs = convs + (out.dtype,)
        self.tracked[id(out)] = (out, idx, convs)

    def _write(self, dst, src, how):
        store = self.rx._store_of(dst)
        if store is None:
            return
        with torch._C.DisableTorchFunction():
            # A contiguous destination is a span of its storage: no index.
            if dst.is_contiguous():
                pos = (None, dst.storage_offset(), dst.numel())
            else:
                pos = (_storage_index(store.size, dst).reshape(-1), None, dst.numel())
            if src is None or not isinstance(src, torch.Tensor):
                self.events.append((store, pos, None, "unmapped " + how))
                return
            got = self._index(src, lazy=src.shape == dst.shape)
            if got is None:
                reason = "computed values" if self._is_poisoned(src) else None
                self.events.append((store, pos, None, reason))
                return
            idx, convs = got
            if dst.dtype != src.dtype:
                convs = convs + (dst.dtype,)
            if idx is _WHOLE:
                self.events.append((store, pos, (None, convs, 0), None))
                return
            idx = idx.expand(dst.shape).reshape(-1)
            self.events.append((store, pos, (idx, convs, _run_start(idx)), None))


class Receiver:
    """One rollout rank's resident model, refit in place by dcr payloads."""

    def __init__(self, model, load_weights=None):
        self.model = model
        self.load_weights = load_weights or model.load_weights
        self.stores = {}
        for n, t in list(model.named_parameters()) + list(model.named_buffers()):
            if t.device.type != "cpu":
                raise ValueError("dcr.torch: %s is on %s; only CPU tensors are supported" % (n, t.device))
            ptr = t.storage().data_ptr()
            if ptr not in self.stores:
                self.stores[ptr] = _Store(n, t)
        self.canon = {}  # name -> (shape, dcr dtype code, torch dtype)
        self.landings = {}  # name -> [_Landing]
        self.fallback = {}  # name -> reason
        self.shadow = {}  # name -> canonical tensor (fallbacks only)
        # apply_s: time spent writing records (after decoding and checking).
        self.stats = {"fallback_reloads": 0, "apply_s": 0.0}
        self._scatter = dcr.Scatter("cpu")
        self.dirty = False  # a failed apply may have left storage half-applied
        # Record buffers reused from item to item and apply to apply (fresh
        # arrays would fault in their pages every time).
        self._idx_buf = np.empty(0, dtype=np.int64)
        self._val_buf = np.empty(0, dtype=np.uint8)

    def _store_of(self, t):
        with torch._C.DisableTorchFunction():
            return self.stores.get(t.storage().data_ptr())

    # -- prewarm --------------------------------------------------------------
    def prewarm(self, checkpoint):
        """Loads the committed checkpoint (name -> tensor) through the model's
        loader and learns where every element lands. Returns report()."""
        owners = {ptr: _Owner(s.size) for ptr, s in self.stores.items()}
        events = []
        try:
            for name, tensor in checkpoint.items():
                if tensor.dtype not in _TORCH_DTYPES:
                    raise ValueError("dcr.torch: %s: dtype %s has no dcr word type" % (name, tensor.dtype))
                canon = tensor.detach()
                if canon.storage().data_ptr() in self.stores:
                    canon = canon.clone()  # the checkpoint shares a parameter's storage: follow a copy
                self.canon[name] = (tuple(canon.shape), dcr.dtype_code(_TORCH_DTYPES[canon.dtype]), canon.dtype)
                mode = _Intercept(self, name, canon)
                with mode:
                    self.load_weights([(name, canon)])
                for store, pos, mapped, reason in mode.events:
                    owners[store.flat.storage().data_ptr()].claim(pos, len(events))
                    events.append((name, store, pos, mapped, reason))
            self._resolve(events, owners)
        finally:
            _ARANGE.clear()  # index tables are for prewarm only
        del events, owners
        if not self._probe_by_digest(checkpoint):
            self._probe(checkpoint)
            self.load_weights(list(checkpoint.items()))
        for name in self.fallback:
            self.shadow[name] = checkpoint[name].detach().clone()
        return self.report()

    def _resolve(self, events, owners):
        """Keeps, of every write, the positions no later write replaced."""
        for eid, (name, store, pos, mapped, reason) in enumerate(events):
            alive = owners[store.flat.storage().data_ptr()].alive(pos, eid)
            if alive is not True and not alive.any():
                continue
            if mapped is None:
                if reason is not None:
                    self.fallback.setdefault(name, "its loader writes %s into %s" % (reason, store.name))
                continue
            idx, convs, idx_start = mapped
            numel = int(np.prod(self.canon[name][0]))
            if pos[1] is not None and idx_start == 0 and pos[2] == numel and (alive is True or alive.all()):
                # The usual case: the whole tensor lands as one block.
                self.landings.setdefault(name, []).append(_Landing(store, None, convs, offset=pos[1]))
                continue
            if idx is None:
                idx = torch.arange(numel)
            dst = pos[0] if pos[0] is not None else torch.arange(pos[1], pos[1] + pos[2])
            keep = (idx >= 0) if alive is True else torch.from_numpy(alive) & (idx >= 0)
            self._add_landing(name, store, idx[keep], dst[keep], convs)

    def _add_landing(self, name, store, cidx, pos, convs):
        numel = int(np.prod(self.canon[name][0]))
        while cidx.numel():
            lut = torch.full((numel,), -1, dtype=torch.int64)
            lut[cidx] = pos
            placed = lut[cidx] == pos  # duplicates of a canonical index: one per landing
            self.landings.setdefault(name, []).append(_Landing(store, lut.numpy(), convs))
            cidx, pos = cidx[~placed], pos[~placed]

    def _probe_by_digest(self, checkpoint):
        """The probe without copies, for the usual model whose landings
        convert nothing: digest every parameter storage, load the checkpoint
        with every sign bit flipped (one tensor at a time), flip the sign
        bits back at the landed positions the map predicts, and digest
        again. Equal digests everywhere: the map holds for every element
        (nothing landed anywhere else, nothing landed differently) and the
        model holds the committed version again. False (nothing concluded)
        when a digest differs (the model is loaded with the committed version
        again) or some landing converts dtype (a conversion may not keep a
        NaN's sign), for the exact probe to decide."""
        if any(land.convs for lands in self.landings.values() for land in lands):
            return False
        before = {ptr: _digest(s) for ptr, s in self.stores.items()}
        # One scratch buffer for every flipped tensor: no allocation per tensor.
        scratch = torch.empty(max(t.numel() * t.element_size() for t in checkpoint.values()), dtype=torch.uint8)
        for name, tensor in checkpoint.items():
            self.load_weights([(name, _flip_sign(tensor, scratch))])
        del scratch
        for name, lands in self.landings.items():
            for land in lands:
                words = land.store.words
                mask = _sign_mask_np(words.dtype)
                if land.offset is not None:
                    words[land.offset : land.offset + int(np.prod(self.canon[name][0]))] ^= mask
                else:
                    words[land.pairs(int(np.prod(self.canon[name][0])))[1]] ^= mask
        if all(_digest(s) == before[ptr] for ptr, s in self.stores.items()):
            return True
        self.load_weights(list(checkpoint.items()))  # back to the committed version for the exact probe
        return False

    def _probe(self, checkpoint):
        """Loads the sign-flipped checkpoint and checks every parameter
        element against what the landings predict."""
        expect = {ptr: s.words.copy() for ptr, s in self.stores.items()}
        flipped = {n: _flip_sign(t) for n, t in checkpoint.items()}
        self.load_weights(list(flipped.items()))
        claimed = {ptr: np.zeros(s.size, dtype=bool) for ptr, s in self.stores.items()}
        for name, lands in self.landings.items():
            for land in lands:
                ptr = land.store.flat.storage().data_ptr()
                src = flipped[name].reshape(-1)
                if land.offset is not None:
                    pos = slice(land.offset, land.offset + src.numel())
                else:
                    cidx, pos = land.pairs(src.numel())
                    src = src[torch.from_numpy(cidx)]
                expect[ptr][pos] = _converted_words(src, land.convs)
                claimed[ptr][pos] = True
        for ptr, s in self.stores.items():
            bad = np.nonzero(s.words != expect[ptr])[0]
            if bad.size == 0:
                continue
            self._blame(s, bad, claimed[ptr], checkpoint, flipped)

    def _blame(self, store, bad, claimed, checkpoint, flipped):
        """Turns the canonical tensors behind mispredicted elements into
        fallbacks: the landing's owner where one claims the element, else
        whichever tensor's own load changes it."""
        bad_set = set(bad.tolist())
        for name, lands in self.landings.items():
            for land in lands:
                if land.store is store and bad_set.intersection(land.pairs(checkpoint[name].numel())[1].tolist()):
                    self.fallback.setdefault(name, "its loaded values differ from the mapped copy in %s" % store.name)
        unclaimed = bad[~claimed[bad]]
        if unclaimed.size == 0:
            return
        for name in checkpoint:
            ref = store.words[unclaimed].copy()
            self.load_weights([(name, checkpoint[name])])
            if (store.words[unclaimed] != ref).any():
                self.fallback.setdefault(name, "its loader writes %s where the interception cannot see" % store.name)
            self.load_weights([(name, flipped[name])])

    # -- reports -------------------------------------------------------------
    def path(self, name):
        """How name is applied: "xor", "overwrite", "fallback" or "skipped"."""
        if name in self.fallback:
            return "fallback"
        lands = self.landings.get(name)
        if not lands:
            return "skipped"
        return "xor" if all(not land.convs for land in lands) else "overwrite"

    def report(self):
        """Every canonical tensor's path, and the fallbacks with their reasons."""
        paths = {n: self.path(n) for n in self.canon}
        return {"paths": paths, "fallback": dict(self.fallback),
                "counts": {p: sum(1 for v in paths.values() if v == p) for p in ("xor", "overwrite", "fallback", "skipped")}}

    # -- apply ----------------------------------------------------------------
    def apply(self, payloads, key=None):
        """Verifies, decodes and checks every payload of an attempt, then
        applies all of them; raises dcr.Error or ValueError (one line naming
        the payload or tensor) before writing anything when one is wrong.
        Returns the number of records applied."""
        decoded = [dcr.Payload.decode(b, key=key) for b in payloads]
        try:
            items = [it for p in decoded for it in p.items()]
            for it in items:
                self._check(it)
            n = 0
            reload = set()
            # From the first write until the last, a failure leaves storage
            # half-applied: only absolute overwrites (the retry of DESIGN.md
            # section 5 step 7) can repair it, so XOR is refused until then.
            self.dirty = True
            t0 = time.perf_counter()
            for it in items:
                n += self._apply_item(it, reload)
            self._scatter.sync()
            self.stats["apply_s"] += time.perf_counter() - t0
            for name in sorted(reload):
                self.load_weights([(name, self.shadow[name])])
                self.stats["fallback_reloads"] += 1
            self.dirty = False
            return n
        finally:
            for p in decoded:
                p.close()

    def _check(self, it):
        known = self.canon.get(it.name)
        if known is None:
            raise ValueError("dcr.torch: payload item %s: the model has no such tensor" % it.name)
        shape, code, _ = known
        if it.shape != shape or it.dtype != code:
            raise ValueError("dcr.torch: payload item %s: shape %s %s, the model's %s %s" % (
                it.name, it.shape, dcr.dtype_name(it.dtype), shape, dcr.dtype_name(code)))
        if it.encoding == dcr.XOR and self.dirty:
            raise ValueError("dcr.torch: payload item %s: XOR records after a failed apply (storage may be "
                             "half-applied; only an overwrite retry repairs it)" % it.name)
        if it.encoding == dcr.XOR and self.path(it.name) == "overwrite":
            raise ValueError("dcr.torch: payload item %s: XOR records for a tensor whose load path converts "
                             "its dtype (overwrite only)" % it.name)

    def _apply_item(self, it, reload):
        if it.name in self.fallback:
            it.apply(self.shadow[it.name])
            reload.add(it.name)
            return it.count
        self._idx_buf = _grown(self._idx_buf, it.count, np.int64)
        self._val_buf = _grown(self._val_buf, it.count * 4, np.uint8)
        idx = it.indices(self._idx_buf)
        vals = it.values(self._val_buf)
        for land in self.landings.get(it.name, ()):
            v = vals
            if land.offset is not None:
                pos, base, span = idx, land.offset, (it.first, it.last)
            else:
                # Table entries are storage positions (made in prewarm): no scan.
                pos, base, span = land.lut[idx].astype(np.int64), 0, (0, land.store.size - 1)
                if not land.full:
                    sel = pos >= 0
                    pos, v = pos[sel], vals[sel]
            if land.convs:
                signed = torch.from_numpy(v.view(np.dtype("i%d" % v.itemsize)))
                v = _converted_words(signed.view(self.canon[it.name][2]), land.convs)
            self._scatter.apply(land.store.words, pos, v.view(land.store.words.dtype), it.encoding, base, span)
        return it.count

    # -- restore (dcr/recovery.h) ----------------------------------------------
    def load_dense(self, checkpoint):
        """A dense load of a committed checkpoint (name -> tensor) through
        the model's loader, the restore of last resort: the model and the
        fallback tensors' shadows hold it, and the receiver is clean."""
        self.load_weights(list(checkpoint.items()))
        for name in self.fallback:
            self.shadow[name] = checkpoint[name].detach().clone()
        self.dirty = False

    def restore(self, store, version, held=None, dirty=None, key=None):
        """Brings the model to the committed `version` the way a C receiver
        is (dcr/recovery.h): libdcr's decision (dcr.restore_decide) from what
        it holds (held: a clean version; dirty: (tau, u), an attempt from u
        killed mid-apply, its writes partly landed), then replay of the
        retained versions held+1..version, or repair: version u+1's repair
        set when it covers tau (else u+1's retained payloads, which must then
        be overwrite records only), then replay of u+2..version. Every
        manifest and payload is read and checked before the first write.
        Returns (kind, why): kind "clean", "replay" or "repair" when done,
        "dense" when the caller must load `version` densely (load_dense: the
        decision said so, a version is not retained, or the records cannot
        repair; a dirty receiver stays dirty, refusing XOR, until then)."""
        kind, action, why = dcr.restore_decide(held, version, from_version=dirty[1] if dirty else None)
        if action in ("nothing", "check"):
            return "clean", why
        if kind not in ("replay", "repair"):
            return "dense", why
        if self.fallback:
            return "dense", "fallback tensors: their shadows hold the prewarmed version, not the one held"
        try:
            if kind == "replay":
                steps = self._fetch(store, held + 1, version)
            else:
                steps = [self._repair_records(store, dirty[1] + 1, dirty[0])] + \
                        self._fetch(store, dirty[1] + 2, version)
        except dcr.Error as e:
            return "dense", str(e)
        if kind == "repair":
            self.dirty = True  # XOR records are refused until the repair is whole
        try:
            for payloads in steps:
                self.apply(payloads, key=key)
        except (dcr.Error, ValueError) as e:
            return "dense", str(e)
        return kind, why


    def _fetch(self, store, first, last):
        """Retained versions first..last, each chained to the one before."""
        out = []
        for v in range(first, last + 1):
            r = store.retained(v)
            if r["from"] != v - 1:
                raise dcr.Error(-1, "dcr.torch: retained version %d is from %d, not %d" % (v, r["from"], v - 1))
            out.append(r["payloads"])
        return out


    def _repair_records(self, store, version, tau):
        """Version's repair set when it covers attempt tau, else its retained
        payloads (apply refuses their XOR records: the receiver is dirty)."""
        try:
            rs = store.repair_set(version)
            if 0 < rs["covers_from"] <= tau <= rs["tau"]:
                return rs["payloads"]
        except dcr.Error:
            pass
        return self._fetch(store, version, version)[0]


def _grown(buf, n, dtype):
    """buf when it holds n elements, else a new array of 1.5x n."""
    return buf if buf.size >= n else np.empty(max(n, buf.size * 3 // 2), dtype=dtype)


class _Owner:
    """Which write event last wrote each element of one parameter storage.
    Writes to disjoint spans (what loaders do) need no table; the first
    write that overlaps an earlier one, or is not a span, makes one
    (an int32 event id per element)."""

    def __init__(self, size):
        self.size = size
        self.spans = []  # (start, stop, event id) while there is no table
        self.table = None

    def claim(self, pos, eid):
        idx, start, n = pos
        if self.table is None:
            if idx is None and all(start + n <= a or b <= start for a, b, _ in self.spans):
                self.spans.append((start, start + n, eid))
                return
            self.table = np.full(self.size, -1, dtype=np.int32)
            for a, b, e in self.spans:
                self.table[a:b] = e
        if idx is None:
            self.table[start : start + n] = eid
        else:
            self.table[idx.numpy()] = eid

    def alive(self, pos, eid):
        """True when all of the event's positions are still its own, else a
        bool array per position."""
        if self.table is None:
            return True
        idx, start, n = pos
        return (self.table[start : start + n] if idx is None else self.table[idx.numpy()]) == eid


def _digest(store):
    """A digest of a parameter storage's bytes (SHA-1: the fastest of
    hashlib's here; it guards against accidents, not adversaries)."""
    return hashlib.sha1(store.words).digest()


def _sign_mask_np(word_dtype):
    bits = np.dtype(word_dtype).itemsize * 8
    return np.array(1 << (bits - 1), dtype=np.uint64).astype(word_dtype)


def _flip_sign(t, scratch=None):
    """t with every element's sign bit flipped: every dtype conversion keeps
    the flip, so every element that lands anywhere lands with other bits.
    Written into scratch (a uint8 tensor at least t's bytes) when given."""
    src = _bits(t.detach().contiguous())
    if scratch is None:
        out = torch.empty_like(src)
    else:
        out = scratch[: t.numel() * t.element_size()].view(src.dtype).view(src.shape)
    # numpy's XOR with a scalar is vectorised; torch 1.13's is several times slower.
    words = src.numpy()
    np.bitwise_xor(words, _sign_mask_np(words.dtype), out=out.numpy())
    return out.view(t.dtype)


def _converted_words(values, convs):
    """values (a canonical-dtype tensor) through the conversions, as numpy words."""
    for dtype in convs:
        values = values.to(dtype)
    return _bits(values.contiguous()).numpy()


# ---- live resident files and restores (dcr/recovery.h) ------------------------


class Resident:
    """A model's weights in files that outlive its process (the live
    resident files of DESIGN.md section 11): every parameter and buffer
    storage of the model mapped shared from DIR/s<k>.bin (torch.from_file),
    so that a process killed mid-apply leaves exactly the mixture of the
    committed version and its attempt's writes there, and DIR/STATE saying
    what they hold: clean at a version, or dirty with the attempt (and the
    version it started from) whose writes may have landed.

    Build it on a freshly constructed model, before dcr.torch.Receiver:
    existed is True when the files were there (their bytes are now the
    model's), False when they were created (the model's bytes copied in)."""

    def __init__(self, model, directory):
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        by_storage, order = {}, []
        for _, t in list(model.named_parameters()) + list(model.named_buffers()):
            ptr = t.storage().data_ptr()
            if ptr not in by_storage:
                by_storage[ptr] = []
                order.append(ptr)
            by_storage[ptr].append(t)
        files = [os.path.join(directory, "s%d.bin" % k) for k in range(len(order))]
        self.existed = os.path.exists(os.path.join(directory, "STATE"))
        for path, ptr in zip(files, order):
            tensors = by_storage[ptr]
            self._map(path, tensors)

    def _map(self, path, tensors):
        first = tensors[0]
        numel, dtype = first.storage().size(), first.dtype
        nbytes = numel * first.element_size()
        if not self.existed:
            with open(path, "wb") as f:
                f.truncate(nbytes)
        elif os.path.getsize(path) != nbytes:
            raise ValueError("dcr.torch: resident file %s holds %d bytes, the model's storage %d"
                             % (path, os.path.getsize(path), nbytes))
        mapped = torch.from_file(path, shared=True, size=numel, dtype=dtype)
        if not self.existed:
            mapped.copy_(first.detach().as_strided((numel,), (1,), 0))
        for t in tensors:
            t.data = mapped.as_strided(t.shape, t.stride(), t.storage_offset())

    def state(self):
        """{"held": v} (clean at v) or {"dirty": tau, "from": u}, as marked."""
        with open(os.path.join(self.dir, "STATE")) as f:
            return json.load(f)

    def mark_clean(self, version):
        self._mark({"held": int(version)})

    def mark_dirty(self, tau, from_version):
        """Before an attempt's first write: its writes may land from now on."""
        self._mark({"dirty": int(tau), "from": int(from_version)})

    def _mark(self, state):
        tmp = os.path.join(self.dir, "STATE.tmp")
        with open(tmp, "w") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.dir, "STATE"))


def restore_state(state, commit):
    """(held, dirty) for Receiver.restore from a Resident's state and the
    control plane's commit record: dirty (tau, u) becomes clean at u + 1 when
    the record says that attempt tau committed version u + 1 (its writes
    all landed: it acknowledged before the commit)."""
    if "held" in state:
        return state["held"], None
    if commit["attempt"] == state["dirty"] and commit["version"] == state["from"] + 1:
        return commit["version"], None
    return None, (state["dirty"], state["from"])
