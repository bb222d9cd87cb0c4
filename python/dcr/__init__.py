"""dcr from Python: payloads, object stores and the control plane over libdcr.

A Python process can take a rollout-node role beside the C ones:

    import dcr
    key = dcr.PayloadKey.load("payload.key")          # or None: unkeyed
    store = dcr.ObjectStore("dir:/shared/refit")
    for k in store.keys("attempt-7/"):
        with dcr.Payload.decode(store.get(k), key=key) as p:   # verified first
            for item in p.items():
                item.apply(buffer_for[item.name])             # XOR or overwrite
    control = dcr.Control("sqlite", "/shared/control.db")
    control.ack(tau, receiver_id)

Everything here calls the public C API (include/dcr/*.h) through ctypes; no
copy of the format lives in Python. Errors raise dcr.Error carrying the
status and libdcr's one-line message. PyTorch receivers are in dcr.torch.
"""

import ctypes

import numpy as np

from . import _lib
from ._lib import lib

__all__ = [
    "Error",
    "XOR",
    "OVERWRITE",
    "PayloadKey",
    "Encoder",
    "Payload",
    "Item",
    "verify",
    "ObjectStore",
    "Control",
    "dtype_size",
    "word_dtype",
    "Scatter",
    "hash64",
    "diff",
    "detect_kernel",
    "restore_decide",
    "RESTORE_NONE",
]

XOR = _lib.ENCODING_XOR
OVERWRITE = _lib.ENCODING_OVERWRITE

# Stored-bit words of each dcr dtype (dcr/dtype.h order).
_WORDS = {0: np.uint16, 1: np.uint16, 2: np.uint32, 3: np.uint8}
_DTYPE_NAMES = {"bf16": 0, "fp16": 1, "fp32": 2, "fp8_e4m3": 3}


class Error(Exception):
    """A libdcr call failed: .status is the dcr_status_t, str() the one line."""

    def __init__(self, status, line):
        super().__init__(line)
        self.status = status


def _check(status):
    if status != 0:
        raise Error(status, lib.dcr_error_line(status).decode("utf-8", "replace"))


def _call_bytes(fn, *args, caller_frees=True):
    """fn(*args, &buf, &len), then the len bytes at buf: the one shape of
    every libdcr call that hands back a buffer. caller_frees: the buffer is
    malloc'd for the caller (freed here once copied); False where the callee
    keeps owning it (dcr_encoder_finish)."""
    buf = ctypes.c_void_p()
    n = ctypes.c_size_t()
    _check(fn(*args, ctypes.byref(buf), ctypes.byref(n)))
    try:
        return ctypes.string_at(buf, n.value) if n.value else b""
    finally:
        if caller_frees:
            _lib.libc.free(buf)


def dtype_code(dtype):
    """A dcr dtype code from a name ("bf16", "bfloat16", "fp32", ...) or a code."""
    if isinstance(dtype, int):
        if dtype not in _WORDS:
            raise ValueError("dcr: unknown dtype code %d" % dtype)
        return dtype
    out = ctypes.c_int()
    _check(lib.dcr_dtype_parse(str(dtype).encode(), ctypes.byref(out)))
    return out.value


def dtype_name(dtype):
    return lib.dcr_dtype_name(dtype_code(dtype)).decode()


def dtype_size(dtype):
    return int(lib.dcr_dtype_size(dtype_code(dtype)))


def hash64(array):
    """libdcr's 64-bit hash (dcr/hash.h, not cryptographic) of a contiguous
    numpy array's bytes."""
    if not array.flags.c_contiguous:
        raise ValueError("dcr: hash64 of a non-contiguous array")
    return int(lib.dcr_hash64(array.ctypes.data, array.nbytes))


def word_dtype(dtype):
    """The numpy unsigned integer type holding one element's stored bits."""
    return _WORDS[dtype_code(dtype)]


# Records of room per dcr_construct_diff call: 16 of its 2^20-element
# sub-runs at most. np.empty does not touch the pages, so only the records
# written cost memory.
_DIFF_ROOM = 1 << 24


def diff(before, now, dtype, encoding):
    """The records that take before to now, two versions of one tensor's
    stored bits (numpy arrays of equal size, words of dtype or any array of
    that itemsize): (indices, values), int64 flat indices of every element
    whose bits differ (ascending) and, per index, the new word (OVERWRITE)
    or old ^ new (XOR). Detection is libdcr's, the constructor's own
    (dcr_construct_diff): -0.0 against +0.0 and NaN payloads are changes."""
    code = dtype_code(dtype)
    word = _WORDS[code]
    a = np.ascontiguousarray(before).view(word).reshape(-1)
    b = np.ascontiguousarray(now).view(word).reshape(-1)
    if a.size != b.size:
        raise ValueError("dcr: diff of %d against %d elements" % (a.size, b.size))
    room = max(1, min(a.size, _DIFF_ROOM))
    idx, vals = np.empty(room, np.int64), np.empty(room, word)
    at, count = ctypes.c_int64(0), ctypes.c_size_t()
    parts = []
    while True:
        _check(lib.dcr_construct_diff(a.ctypes.data, b.ctypes.data, a.size, code, encoding, ctypes.byref(at),
                                      idx.ctypes.data, vals.ctypes.data, room, ctypes.byref(count)))
        if at.value == a.size and not parts:
            return idx[: count.value], vals[: count.value]
        parts.append((idx[: count.value].copy(), vals[: count.value].copy()))
        if at.value == a.size:
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def detect_kernel():
    """The vector kernel libdcr's detector runs on this CPU ("avx512",
    "avx2", "sse2" or "scalar")."""
    return lib.dcr_detect_kernel().decode()


class PayloadKey:
    """A shared payload key (32 bytes): owners sign with it, receivers accept
    only payloads signed with it."""

    def __init__(self, key_bytes):
        key_bytes = bytes(key_bytes)
        if len(key_bytes) != _lib.KEY_SIZE:
            raise ValueError("dcr: a payload key is %d bytes, not %d" % (_lib.KEY_SIZE, len(key_bytes)))
        self._c = _lib.PayloadKey(True, (ctypes.c_uint8 * _lib.KEY_SIZE)(*key_bytes))

    @classmethod
    def load(cls, path):
        """Reads a key file (exactly 32 bytes) through libdcr's checked reader."""
        c = _lib.PayloadKey()
        _check(lib.dcr_payload_key_load(str(path).encode(), ctypes.byref(c), None))
        return cls(bytes(c.bytes))


def _policy(key, max_raw):
    policy = _lib.PayloadPolicy(None, max_raw)
    if key is not None:
        policy.key = ctypes.pointer(key._c)
    return policy


def verify(buf, key=None, max_raw=0):
    """Checks a payload's header and digest (keyed when key is given) without
    decompressing it; returns the header as a dict. Raises dcr.Error."""
    buf = bytes(buf)
    hdr = _lib.PayloadHeader()
    policy = _policy(key, max_raw)
    _check(lib.dcr_payload_verify(buf, len(buf), ctypes.byref(policy), ctypes.byref(hdr)))
    return _header_dict(hdr)


def _header_dict(hdr):
    return {
        "version": hdr.version,
        "flags": hdr.flags,
        "tau": hdr.tau,
        "owner": hdr.owner,
        "payload_id": hdr.payload_id,
        "item_count": hdr.item_count,
        "raw_len": hdr.raw_len,
        "compressed_len": hdr.compressed_len,
    }


class Encoder:
    """Builds payloads (the owner's side): add items, then finish()."""

    def __init__(self, key=None, max_version=None):
        """max_version: the newest payload format version to write (1 or 2;
        None: libdcr's default, which picks per item the smaller coding)."""
        self._h = ctypes.c_void_p()
        _check(lib.dcr_encoder_create(ctypes.byref(self._h)))
        if key is not None:
            lib.dcr_encoder_set_key(self._h, ctypes.byref(key._c))
        if max_version is not None:
            st = lib.dcr_encoder_set_max_version(self._h, max_version)
            if st != 0:
                self.close()
                _check(st)

    def close(self):
        if self._h:
            lib.dcr_encoder_destroy(self._h)
            self._h = ctypes.c_void_p()

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def add(self, name, shape, dtype, encoding, indices, values):
        """One tensor's records: indices (strictly increasing flat indices, or
        None for the run starting at 0 of len(values)) and values (stored-bit
        words of dtype, or any array of that itemsize)."""
        code = dtype_code(dtype)
        shape_arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        word = _WORDS[code]
        vals = np.ascontiguousarray(values)
        if vals.dtype.itemsize != np.dtype(word).itemsize:
            if vals.dtype.kind not in "iu":
                raise ValueError("dcr: %s: values of %s are not words of %s" % (name, vals.dtype, dtype_name(code)))
            vals = vals.astype(word)
        vals = vals.view(word).reshape(-1)
        item = _lib.CodecItem(name.encode(), len(shape), shape_arr, code, encoding, vals.size, None, 0,
                              vals.ctypes.data)
        if indices is not None:
            idx = np.ascontiguousarray(indices, dtype=np.int64)
            if idx.size != vals.size:
                raise ValueError("dcr: %s: %d indices for %d values" % (name, idx.size, vals.size))
            item.indices = idx.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        _check(lib.dcr_encoder_add(self._h, ctypes.byref(item)))

    def finish(self, tau, owner, payload_id, level=1, shuffle=False):
        """The payload (bytes) of every item added since the last finish."""
        params = _lib.EncodeParams(tau, owner, payload_id, level, shuffle)
        return _call_bytes(lib.dcr_encoder_finish, self._h, ctypes.byref(params), caller_frees=False)


class Item:
    """One decoded item: one canonical tensor's records."""

    def __init__(self, payload, index, c_item):
        self._payload = payload
        self._index = index
        self.name = c_item.name.decode()
        self.shape = tuple(c_item.shape[: c_item.ndim])
        self.numel = c_item.numel
        self.dtype = c_item.dtype
        self.encoding = c_item.encoding
        self.count = c_item.count
        self.first = c_item.first  # smallest and largest index (the decoder checked both)
        self.last = c_item.last

    def indices(self, out=None):
        """The records' flat indices (int64, increasing). out: a reusable
        int64 array of at least count elements to write them into (a fresh
        array per item costs page faults on large items); returns the part
        written."""
        out = _room(out, self.count, np.int64)
        _check(lib.dcr_payload_item_indices(self._payload._h, self._index, out.ctypes.data))
        return out

    def values(self, out=None):
        """The records' stored-bit words (uint16/uint32/uint8 by dtype);
        out as for indices(), of any word type (viewed as this dtype's)."""
        word = _WORDS[self.dtype]
        if out is not None:
            out = out.view(np.uint8)[: self.count * np.dtype(word).itemsize].view(word) \
                if out.nbytes >= self.count * np.dtype(word).itemsize else None
        out = _room(out, self.count, word)
        _check(lib.dcr_payload_item_values(self._payload._h, self._index, out.ctypes.data))
        return out

    def apply(self, dst):
        """Applies the records to dst, the canonical tensor's elements in
        row-major order: a writable buffer (bytearray, numpy array, memoryview)
        or an object with data_ptr() and nbytes/numel()*element_size() (a
        contiguous CPU torch tensor). XOR items XOR the stored bits, overwrite
        items replace them."""
        words = _words_of(dst, _WORDS[self.dtype], self.numel, self.name)
        idx = self.indices()
        vals = self.values()
        if self.encoding == XOR:
            words[idx] ^= vals
        else:
            words[idx] = vals


def _room(out, n, dtype):
    """out[:n] when out is a contiguous array of dtype with room for n, else
    a new array of n."""
    if out is not None and out.dtype == dtype and out.flags.c_contiguous and out.size >= n:
        return out[:n]
    return np.empty(n, dtype=dtype)


def _words_of(dst, word, numel, name):
    """A numpy view of dst's bytes as numel words (no copy)."""
    nbytes = numel * np.dtype(word).itemsize
    if hasattr(dst, "data_ptr"):
        if hasattr(dst, "is_contiguous") and not dst.is_contiguous():
            raise ValueError("dcr: %s: the destination tensor is not contiguous" % name)
        if getattr(dst, "device", None) is not None and str(dst.device) != "cpu":
            raise ValueError("dcr: %s: the destination tensor is not in host memory" % name)
        have = dst.numel() * dst.element_size()
        if have != nbytes:
            raise ValueError("dcr: %s: destination holds %d bytes, the tensor %d" % (name, have, nbytes))
        raw = (ctypes.c_uint8 * nbytes).from_address(dst.data_ptr())
        return np.frombuffer(raw, dtype=word)
    mv = memoryview(dst)
    if mv.readonly:
        raise ValueError("dcr: %s: the destination buffer is read-only" % name)
    if mv.nbytes != nbytes:
        raise ValueError("dcr: %s: destination holds %d bytes, the tensor %d" % (name, mv.nbytes, nbytes))
    return np.frombuffer(mv.cast("B"), dtype=word)


class Scatter:
    """libdcr's record application into resident memory (dcr/device.h,
    device "cpu"): dst[pos[k]] ^= values[k] (XOR) or = values[k]. One per
    receiver thread; sync() before the written memory is read."""

    def __init__(self, device="cpu"):
        self._d = ctypes.c_void_p()
        self._s = ctypes.c_void_p()
        _check(lib.dcr_device_create(device.encode(), ctypes.byref(self._d)))
        st = lib.dcr_device_stream_create(self._d, _lib.ACTOR_RECEIVER, 0, ctypes.byref(self._s))
        if st != 0:
            lib.dcr_device_destroy(self._d)
            self._d = ctypes.c_void_p()
            _check(st)

    def close(self):
        if self._d:
            lib.dcr_device_stream_destroy(self._d, self._s)
            lib.dcr_device_destroy(self._d)
            self._d = ctypes.c_void_p()

    __del__ = close

    def apply(self, dst_words, positions, values, encoding, base=0, span=None):
        """dst_words: a writable numpy array of 1, 2 or 4-byte words;
        positions: distinct int64 indices into dst_words[base:] (checked
        against its length here); values: words of dst_words' width.
        span=(lo, hi): the caller knows every position lies in [lo, hi] (a
        decoded item's first and last index): only the span is checked,
        instead of a scan of the positions."""
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        vals = np.ascontiguousarray(values)
        if vals.itemsize != dst_words.itemsize or vals.size != pos.size:
            raise ValueError("dcr: scatter of %d values (%d bytes) into words of %d bytes at %d positions" % (
                vals.size, vals.itemsize, dst_words.itemsize, pos.size))
        if pos.size:
            lo, hi = span if span is not None else (pos.min(), pos.max())
            if base < 0 or lo < 0 or base + hi >= dst_words.size:
                raise ValueError("dcr: scatter position out of bounds (%d words)" % dst_words.size)
        op = _lib.DEVICE_XOR if encoding == XOR else _lib.DEVICE_OVERWRITE
        dst = dst_words.ctypes.data + base * dst_words.itemsize
        _check(lib.dcr_device_scatter(self._d, self._s, dst, dst_words.itemsize, pos.ctypes.data,
                                      vals.ctypes.data, pos.size, op))

    def sync(self):
        _check(lib.dcr_device_sync(self._d, self._s))


class Payload:
    """A decoded, fully validated payload. Use decode(); close() (or a with
    block) frees it. Items stay valid while the payload is open."""

    def __init__(self):
        self._h = ctypes.c_void_p()
        _check(lib.dcr_payload_create(ctypes.byref(self._h)))

    @classmethod
    def decode(cls, buf, key=None, max_raw=0):
        """Verifies (digest, keyed when key is given) and decodes buf; nothing
        of a payload that fails any rule is exposed. Raises dcr.Error."""
        p = cls()
        buf = bytes(buf)
        policy = _policy(key, max_raw)
        try:
            _check(lib.dcr_payload_decode_with(p._h, buf, len(buf), ctypes.byref(policy)))
        except Error:
            p.close()
            raise
        return p

    def close(self):
        if self._h:
            lib.dcr_payload_destroy(self._h)
            self._h = ctypes.c_void_p()

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def header(self):
        return _header_dict(lib.dcr_payload_get_header(self._h).contents)

    def items(self):
        out = []
        for i in range(lib.dcr_payload_item_count(self._h)):
            c = _lib.PayloadItem()
            _check(lib.dcr_payload_item(self._h, i, ctypes.byref(c)))
            out.append(Item(self, i, c))
        return out


class ObjectStore:
    """An object store by URL ("PATH", "dir:PATH", "s3://BUCKET/PREFIX" with
    s3_endpoint): where owners put payloads and rollout nodes get them."""

    def __init__(self, url, s3_endpoint=None, timeout_ms=0):
        self._h = ctypes.c_void_p()
        cfg = _lib.ObjstoreConfig(url.encode(), s3_endpoint.encode() if s3_endpoint else None, timeout_ms, 0, 0, 0)
        _check(lib.dcr_objstore_create(ctypes.byref(cfg), ctypes.byref(self._h)))

    def close(self):
        if self._h:
            lib.dcr_objstore_destroy(self._h)
            self._h = ctypes.c_void_p()

    __del__ = close

    def put(self, key, data):
        data = bytes(data)
        _check(lib.dcr_objstore_put(self._h, key.encode(), data, len(data), None))

    def get(self, key, max_bytes=None):
        """The whole object; max_bytes bounds it (default: its listed size)."""
        if max_bytes is None:
            sizes = dict(self.entries(key))
            if key not in sizes:
                raise Error(-2, "not found: object store get %s: no such key" % key)
            max_bytes = sizes[key]
        return _call_bytes(lib.dcr_objstore_get, self._h, key.encode(), max_bytes, None)

    def keys(self, prefix=""):
        """Every key under prefix, ascending."""
        return [k for k, _ in self.entries(prefix)]

    def entries(self, prefix=""):
        """(key, size) of every object under prefix, ascending."""
        entries = ctypes.POINTER(_lib.ObjstoreEntry)()
        n = ctypes.c_size_t()
        _check(lib.dcr_objstore_list_all(self._h, prefix.encode(), ctypes.byref(entries), ctypes.byref(n)))
        try:
            return [(entries[i].key.decode(), entries[i].size) for i in range(n.value)]
        finally:
            _lib.libc.free(entries)

    def delete(self, key):
        _check(lib.dcr_objstore_delete(self._h, key.encode()))

    # -- retention and repair sets (dcr/recovery.h) ---------------------------
    def retain(self, version, tau, payloads):
        """Retains the payloads (bytes) of `version`, committed by attempt
        tau from version - 1, under versions/v<version>/ with its VERSION
        manifest written last (dcr_retain_put), for receivers that replay."""
        names = ["payload-0-%d.dcrp" % i for i in range(len(payloads))]
        c_names = (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])
        bufs, lens = _buffers(payloads)
        _check(lib.dcr_retain_put(self._h, version, tau, len(payloads), c_names, bufs, lens))

    def retain_repair(self, version, tau, covers_from, owner, owners, payloads):
        """Stores owner `owner` (of `owners`)'s repair set of `version`: the
        committed run's records in overwrite form (dcr.owner.repair_payloads),
        covering the interrupted attempts covers_from..tau
        (dcr_retain_repair_put; REPAIR-<owner> written last)."""
        bufs, lens = _buffers(payloads)
        _check(lib.dcr_retain_repair_put(self._h, version, tau, covers_from, owner, owners, len(payloads), bufs,
                                         lens, None))

    def retained(self, version):
        """The retained payloads of `version`: {"version", "from", "tau",
        "payloads"}, every payload checked against its manifest's length and
        digest. dcr.Error (DCR_ENOTFOUND) when the version is not retained."""
        return self._manifest(lib.dcr_retain_manifest_read, version)

    def repair_set(self, version):
        """The complete repair set of `version` as retained(), with
        "covers_from": the earliest interrupted attempt it repairs."""
        return self._manifest(lib.dcr_retain_repair_read, version)

    def _manifest(self, read, version):
        m = _lib.RetainManifest()
        _check(read(self._h, version, ctypes.byref(m)))
        try:
            payloads = [_call_bytes(lib.dcr_retain_payload_get, self._h, ctypes.byref(m), i) for i in range(m.n)]
            return {"version": m.version, "from": getattr(m, "from"), "tau": m.tau, "covers_from": m.covers_from,
                    "payloads": payloads}
        finally:
            lib.dcr_retain_manifest_free(ctypes.byref(m))


def _buffers(payloads):
    """(const uint8_t *const *, const size_t *) arrays over bytes objects
    (which must outlive the call)."""
    n = max(1, len(payloads))
    bufs = (ctypes.c_void_p * n)(*[ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p) for b in payloads])
    lens = (ctypes.c_size_t * n)(*[len(b) for b in payloads])
    return bufs, lens


RESTORE_NONE = _lib.RESTORE_NONE
_RESTORE_ACTIONS = ("nothing", "check", "defer", "apply")


def restore_decide(held, version, from_version=None, untouched=False, repair_in_retry=False,
                   retry_refused=False):
    """libdcr's restore decision for one receiver asked to reach `version`
    (dcr_restore_decide, dcr/recovery.h): held, the clean version it holds
    (None: dirty or unknown); from_version, the version its interrupted
    attempt started from (dirty with a known attempt). Returns (kind,
    action, why): kind "clean", "replay", "repair", "dense" or "anchor";
    action "nothing", "check", "defer" or "apply"."""
    st = _lib.RestoreState(RESTORE_NONE if held is None else held,
                           RESTORE_NONE if from_version is None else from_version,
                           untouched, repair_in_retry, retry_refused)
    why = ctypes.create_string_buffer(160)
    choice = lib.dcr_restore_decide(ctypes.byref(st), version, why, len(why))
    return (lib.dcr_restore_kind_name(choice.kind).decode(), _RESTORE_ACTIONS[choice.action],
            why.value.decode("utf-8", "replace"))


class Control:
    """The control plane ("sqlite" at a file path, "etcd" at etcd://HOST:PORT):
    commit record, attempts, acknowledgments, prewarm reports."""

    def __init__(self, backend, address, timeout_ms=0):
        self._h = ctypes.c_void_p()
        cfg = _lib.ControlConfig(address.encode(), timeout_ms)
        _check(lib.dcr_control_create(backend.encode(), ctypes.byref(cfg), ctypes.byref(self._h)))

    def close(self):
        if self._h:
            lib.dcr_control_destroy(self._h)
            self._h = ctypes.c_void_p()

    __del__ = close

    def read(self):
        """The committed record: dict(version, baseline, attempt, committed_ns)."""
        rec = _lib.CommitRecord()
        _check(lib.dcr_control_read(self._h, ctypes.byref(rec)))
        return _record_dict(rec)

    def cas(self, expected, desired):
        _check(lib.dcr_control_cas(self._h, ctypes.byref(_record(expected)), ctypes.byref(_record(desired))))

    def prepare(self, coordinator, from_version, receivers, deadline_ms):
        arr = (ctypes.c_uint32 * len(receivers))(*receivers)
        req = _lib.ControlPrepare(coordinator.encode(), from_version, arr, len(receivers), deadline_ms)
        tau = ctypes.c_uint64()
        _check(lib.dcr_control_prepare(self._h, ctypes.byref(req), ctypes.byref(tau)))
        return tau.value

    def ack(self, tau, receiver):
        """This receiver holds P^{v+1} for attempt tau."""
        _check(lib.dcr_control_ack(self._h, tau, receiver))

    def acks(self, tau):
        n = ctypes.c_size_t()
        _check(lib.dcr_control_acks(self._h, tau, None, 0, ctypes.byref(n)))
        out = (ctypes.c_uint32 * max(1, n.value))()
        _check(lib.dcr_control_acks(self._h, tau, out, n.value, ctypes.byref(n)))
        return list(out[: n.value])

    def commit(self, coordinator, tau, expected, baseline):
        """The joint commit of tau by compare-and-set against expected."""
        base = bytes(baseline).ljust(_lib.CONTROL_BASELINE_BYTES, b"\0")
        rec = _lib.CommitRecord()
        _check(lib.dcr_control_commit(self._h, coordinator.encode(), tau, ctypes.byref(_record(expected)), base,
                                      ctypes.byref(rec)))
        return _record_dict(rec)

    def report_put(self, receiver, data):
        data = bytes(data)
        _check(lib.dcr_control_report_put(self._h, receiver, data, len(data)))

    def report_get(self, receiver):
        return _call_bytes(lib.dcr_control_report_get, self._h, receiver)


def _record_dict(rec):
    return {
        "version": rec.version,
        "baseline": bytes(rec.baseline),
        "attempt": rec.attempt,
        "committed_ns": rec.committed_ns,
    }


def _record(d):
    rec = _lib.CommitRecord()
    rec.version = d["version"]
    base = bytes(d["baseline"]).ljust(_lib.CONTROL_BASELINE_BYTES, b"\0")
    rec.baseline = (ctypes.c_uint8 * _lib.CONTROL_BASELINE_BYTES)(*base)
    rec.attempt = d["attempt"]
    rec.committed_ns = d["committed_ns"]
    return rec
