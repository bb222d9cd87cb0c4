"""Loading libdcr and the C declarations the package uses (ctypes).

The structures below mirror the public headers under include/dcr/ field for
field; each names the header it copies. Only the public API is used.
"""

import ctypes
import ctypes.util
import os

MAX_DIMS = 6  # DCR_MAX_DIMS, dcr/tensor.h
KEY_SIZE = 32  # DCR_CODEC_KEY_SIZE, dcr/codec.h
HEADER_SIZE = 64  # DCR_CODEC_HEADER_SIZE
OBJSTORE_KEY_MAX = 512  # DCR_OBJSTORE_KEY_MAX, dcr/objstore.h
OBJSTORE_VERSION_MAX = 80
CONTROL_BASELINE_BYTES = 32  # dcr/control.h
CONTROL_ID_MAX = 64
RETAIN_NAME_MAX = 95  # DCR_RETAIN_NAME_MAX, dcr/recovery.h
RETAIN_DIGEST_BYTES = 32  # DCR_RETAIN_DIGEST_BYTES
RESTORE_NONE = (1 << 64) - 1  # DCR_RESTORE_NONE

ACTOR_RECEIVER = 3  # DCR_ACTOR_RECEIVER, dcr/trace.h
DEVICE_XOR = 0  # dcr_device_op_t, dcr/device.h
DEVICE_OVERWRITE = 1
ENCODING_XOR = 0
ENCODING_OVERWRITE = 1

c_status = ctypes.c_int


class PayloadKey(ctypes.Structure):  # dcr_payload_key_t
    _c_name_ = "dcr_payload_key_t"
    _fields_ = [("set", ctypes.c_bool), ("bytes", ctypes.c_uint8 * KEY_SIZE)]


class PayloadPolicy(ctypes.Structure):  # dcr_payload_policy_t
    _c_name_ = "dcr_payload_policy_t"
    _fields_ = [("key", ctypes.POINTER(PayloadKey)), ("max_raw", ctypes.c_uint64)]


class PayloadHeader(ctypes.Structure):  # dcr_payload_header_t
    _c_name_ = "dcr_payload_header_t"
    _fields_ = [
        ("version", ctypes.c_uint16),
        ("flags", ctypes.c_uint16),
        ("tau", ctypes.c_uint64),
        ("payload_id", ctypes.c_uint64),
        ("owner", ctypes.c_uint32),
        ("item_count", ctypes.c_uint32),
        ("raw_len", ctypes.c_uint64),
        ("compressed_len", ctypes.c_uint64),
        ("digest", ctypes.c_uint8 * 16),
    ]


class CodecItem(ctypes.Structure):  # dcr_codec_item_t
    _c_name_ = "dcr_codec_item_t"
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("dtype", ctypes.c_int),
        ("encoding", ctypes.c_int),
        ("count", ctypes.c_size_t),
        ("indices", ctypes.POINTER(ctypes.c_int64)),
        ("run_start", ctypes.c_int64),
        ("values", ctypes.c_void_p),
    ]


class EncodeParams(ctypes.Structure):  # dcr_encode_params_t
    _c_name_ = "dcr_encode_params_t"
    _fields_ = [
        ("tau", ctypes.c_uint64),
        ("owner", ctypes.c_uint32),
        ("payload_id", ctypes.c_uint64),
        ("level", ctypes.c_int),
        ("shuffle", ctypes.c_bool),
    ]


class PayloadItem(ctypes.Structure):  # dcr_payload_item_t
    _c_name_ = "dcr_payload_item_t"
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("numel", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("encoding", ctypes.c_int),
        ("location", ctypes.c_int),
        ("gap_bytes", ctypes.c_uint),
        ("rice_k", ctypes.c_uint),
        ("value_coding", ctypes.c_int),
        ("location_bytes", ctypes.c_size_t),
        ("value_bytes", ctypes.c_size_t),
        ("count", ctypes.c_size_t),
        ("first", ctypes.c_int64),
        ("last", ctypes.c_int64),
        ("values", ctypes.c_void_p),
    ]


class ObjstoreConfig(ctypes.Structure):  # dcr_objstore_config_t
    _c_name_ = "dcr_objstore_config_t"
    _fields_ = [
        ("url", ctypes.c_char_p),
        ("s3_endpoint", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_int),
        ("retries", ctypes.c_int),
        ("multipart_threshold", ctypes.c_uint64),
        ("part_bytes", ctypes.c_uint64),
    ]


class ObjstoreEntry(ctypes.Structure):  # dcr_objstore_entry_t
    _c_name_ = "dcr_objstore_entry_t"
    _fields_ = [
        ("key", ctypes.c_char * (OBJSTORE_KEY_MAX + 1)),
        ("size", ctypes.c_uint64),
        ("version", ctypes.c_char * OBJSTORE_VERSION_MAX),
    ]


class ControlConfig(ctypes.Structure):  # dcr_control_config_t
    _c_name_ = "dcr_control_config_t"
    _fields_ = [("address", ctypes.c_char_p), ("timeout_ms", ctypes.c_int)]


class CommitRecord(ctypes.Structure):  # dcr_commit_record_t
    _c_name_ = "dcr_commit_record_t"
    _fields_ = [
        ("version", ctypes.c_uint64),
        ("baseline", ctypes.c_uint8 * CONTROL_BASELINE_BYTES),
        ("attempt", ctypes.c_uint64),
        ("committed_ns", ctypes.c_int64),
    ]


class ControlPrepare(ctypes.Structure):  # dcr_control_prepare_t
    _c_name_ = "dcr_control_prepare_t"
    _fields_ = [
        ("coordinator", ctypes.c_char_p),
        ("from_version", ctypes.c_uint64),
        ("receivers", ctypes.POINTER(ctypes.c_uint32)),
        ("n_receivers", ctypes.c_size_t),
        ("deadline_ms", ctypes.c_uint32),
    ]


class RetainEntry(ctypes.Structure):  # dcr_retain_entry_t, dcr/recovery.h
    _c_name_ = "dcr_retain_entry_t"
    _fields_ = [
        ("name", ctypes.c_char * (RETAIN_NAME_MAX + 1)),
        ("bytes", ctypes.c_uint64),
        ("digest", ctypes.c_uint8 * RETAIN_DIGEST_BYTES),
    ]


class RetainManifest(ctypes.Structure):  # dcr_retain_manifest_t
    _c_name_ = "dcr_retain_manifest_t"
    _fields_ = [
        ("version", ctypes.c_uint64),
        ("from", ctypes.c_uint64),
        ("tau", ctypes.c_uint64),
        ("covers_from", ctypes.c_uint64),
        ("n", ctypes.c_size_t),
        ("entries", ctypes.POINTER(RetainEntry)),
    ]


class RetainStats(ctypes.Structure):  # dcr_retain_stats_t
    _c_name_ = "dcr_retain_stats_t"
    _fields_ = [
        ("payloads", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("pruned", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
    ]


class RestoreState(ctypes.Structure):  # dcr_restore_state_t
    _c_name_ = "dcr_restore_state_t"
    _fields_ = [
        ("held", ctypes.c_uint64),
        ("from", ctypes.c_uint64),
        ("untouched", ctypes.c_bool),
        ("repair_in_retry", ctypes.c_bool),
        ("retry_refused", ctypes.c_bool),
    ]


class RestoreChoice(ctypes.Structure):  # dcr_restore_choice_t
    _c_name_ = "dcr_restore_choice_t"
    _fields_ = [("kind", ctypes.c_int), ("action", ctypes.c_int)]


def _candidates():
    """Where libdcr may be: $DCR_LIBRARY (tests point it at a build tree),
    then the library `cmake --install` placed beside this package, then the
    system's search path."""
    env = os.environ.get("DCR_LIBRARY")
    if env:
        yield env
    try:
        from . import _libpath  # written by cmake --install

        yield _libpath.LIBRARY
    except ImportError:
        pass
    found = ctypes.util.find_library("dcr")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "dcr: libdcr not found (tried %s); install dcr with cmake --install or "
        "set DCR_LIBRARY to libdcr.so" % (", ".join(tried) or "nothing: no installed copy")
    )


lib = _load()
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]
libc.free.restype = None

P = ctypes.POINTER
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t

_SIGNATURES = {
    # status.h
    "dcr_status_str": (ctypes.c_char_p, [c_status]),
    "dcr_error_line": (ctypes.c_char_p, [c_status]),
    "dcr_error_clear": (None, []),
    # hash.h
    "dcr_hash64": (ctypes.c_uint64, [_vp, _sz]),
    # dtype.h
    "dcr_dtype_parse": (c_status, [ctypes.c_char_p, P(ctypes.c_int)]),
    "dcr_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "dcr_dtype_size": (_sz, [ctypes.c_int]),
    # codec.h
    "dcr_payload_key_load": (c_status, [ctypes.c_char_p, P(PayloadKey), P(ctypes.c_bool)]),
    "dcr_encoder_create": (c_status, [P(_vp)]),
    "dcr_encoder_destroy": (None, [_vp]),
    "dcr_encoder_set_key": (None, [_vp, P(PayloadKey)]),
    "dcr_encoder_add": (c_status, [_vp, P(CodecItem)]),
    "dcr_encoder_item_count": (_sz, [_vp]),
    "dcr_encoder_set_max_version": (c_status, [_vp, ctypes.c_uint]),
    "dcr_encoder_finish": (c_status, [_vp, P(EncodeParams), P(_vp), P(_sz)]),
    "dcr_payload_verify": (c_status, [ctypes.c_char_p, _sz, P(PayloadPolicy), P(PayloadHeader)]),
    "dcr_payload_auth_failure": (ctypes.c_bool, [c_status, ctypes.c_char_p, _sz, P(PayloadKey)]),
    "dcr_payload_create": (c_status, [P(_vp)]),
    "dcr_payload_destroy": (None, [_vp]),
    "dcr_payload_decode_with": (c_status, [_vp, ctypes.c_char_p, _sz, P(PayloadPolicy)]),
    "dcr_payload_get_header": (P(PayloadHeader), [_vp]),
    "dcr_payload_item_count": (_sz, [_vp]),
    "dcr_payload_item": (c_status, [_vp, _sz, P(PayloadItem)]),
    "dcr_payload_item_indices": (c_status, [_vp, _sz, _vp]),
    "dcr_payload_item_values": (c_status, [_vp, _sz, _vp]),
    # construct.h: change detection of one tensor (the constructor's detector)
    "dcr_construct_diff": (
        c_status,
        [_vp, _vp, ctypes.c_int64, ctypes.c_int, ctypes.c_int, P(ctypes.c_int64), _vp, _vp, _sz, P(_sz)],
    ),
    "dcr_detect_kernel": (ctypes.c_char_p, []),  # device.h: the detector's SIMD kernel
    # device.h: record application into resident storage ("cpu": host memory)
    "dcr_device_create": (c_status, [ctypes.c_char_p, P(_vp)]),
    "dcr_device_destroy": (None, [_vp]),
    "dcr_device_stream_create": (c_status, [_vp, ctypes.c_int, ctypes.c_int, P(_vp)]),
    "dcr_device_stream_destroy": (None, [_vp, _vp]),
    "dcr_device_scatter": (c_status, [_vp, _vp, _vp, _sz, _vp, _vp, _sz, ctypes.c_int]),
    "dcr_device_sync": (c_status, [_vp, _vp]),
    # objstore.h
    "dcr_objstore_create": (c_status, [P(ObjstoreConfig), P(_vp)]),
    "dcr_objstore_destroy": (None, [_vp]),
    "dcr_objstore_put": (c_status, [_vp, ctypes.c_char_p, ctypes.c_char_p, _sz, _vp]),
    "dcr_objstore_get": (c_status, [_vp, ctypes.c_char_p, _sz, _vp, P(_vp), P(_sz)]),
    "dcr_objstore_list_all": (c_status, [_vp, ctypes.c_char_p, P(P(ObjstoreEntry)), P(_sz)]),
    "dcr_objstore_delete": (c_status, [_vp, ctypes.c_char_p]),
    # control.h
    "dcr_control_create": (c_status, [ctypes.c_char_p, P(ControlConfig), P(_vp)]),
    "dcr_control_destroy": (None, [_vp]),
    "dcr_control_read": (c_status, [_vp, P(CommitRecord)]),
    "dcr_control_cas": (c_status, [_vp, P(CommitRecord), P(CommitRecord)]),
    "dcr_control_prepare": (c_status, [_vp, P(ControlPrepare), P(ctypes.c_uint64)]),
    "dcr_control_ack": (c_status, [_vp, ctypes.c_uint64, ctypes.c_uint32]),
    "dcr_control_acks": (c_status, [_vp, ctypes.c_uint64, P(ctypes.c_uint32), _sz, P(_sz)]),
    "dcr_control_commit": (
        c_status,
        [_vp, ctypes.c_char_p, ctypes.c_uint64, P(CommitRecord), ctypes.c_char_p, P(CommitRecord)],
    ),
    "dcr_control_report_put": (c_status, [_vp, ctypes.c_uint32, ctypes.c_char_p, _sz]),
    "dcr_control_report_get": (c_status, [_vp, ctypes.c_uint32, P(_vp), P(_sz)]),
    # recovery.h: retained versions, repair sets, the restore decision
    "dcr_retain_put": (
        c_status,
        [_vp, ctypes.c_uint64, ctypes.c_uint64, _sz, P(ctypes.c_char_p), P(_vp), P(_sz)],
    ),
    "dcr_retain_manifest_read": (c_status, [_vp, ctypes.c_uint64, P(RetainManifest)]),
    "dcr_retain_manifest_free": (None, [P(RetainManifest)]),
    "dcr_retain_payload_get": (c_status, [_vp, P(RetainManifest), _sz, P(_vp), P(_sz)]),
    "dcr_retain_repair_put": (
        c_status,
        [_vp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_int, _sz, P(_vp), P(_sz),
         P(RetainStats)],
    ),
    "dcr_retain_repair_read": (c_status, [_vp, ctypes.c_uint64, P(RetainManifest)]),
    "dcr_restore_decide": (RestoreChoice, [P(RestoreState), ctypes.c_uint64, ctypes.c_char_p, _sz]),
    "dcr_restore_kind_name": (ctypes.c_char_p, [ctypes.c_int]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


# ---- layout check ------------------------------------------------------------
# libdcr exports the size and field offsets of every structure mirrored above
# (dcr/abi.h); a mirror that disagrees would read and write wrong bytes
# without any error, so the package refuses to load instead.


class AbiRow(ctypes.Structure):  # dcr_abi_row_t
    _c_name_ = "dcr_abi_row_t"
    _fields_ = [
        ("type", ctypes.c_char_p),
        ("field", ctypes.c_char_p),
        ("offset", ctypes.c_size_t),
        ("size", ctypes.c_size_t),
    ]


MIRRORS = [PayloadKey, PayloadPolicy, PayloadHeader, CodecItem, EncodeParams, PayloadItem, ObjstoreConfig,
           ObjstoreEntry, ControlConfig, CommitRecord, ControlPrepare, RetainEntry, RetainManifest, RetainStats,
           RestoreState, RestoreChoice]
CONSTANTS = {
    "DCR_MAX_DIMS": MAX_DIMS,
    "DCR_CODEC_KEY_SIZE": KEY_SIZE,
    "DCR_OBJSTORE_KEY_MAX": OBJSTORE_KEY_MAX,
    "DCR_OBJSTORE_VERSION_MAX": OBJSTORE_VERSION_MAX,
    "DCR_CONTROL_BASELINE_BYTES": CONTROL_BASELINE_BYTES,
    "DCR_RETAIN_NAME_MAX": RETAIN_NAME_MAX,
    "DCR_RETAIN_DIGEST_BYTES": RETAIN_DIGEST_BYTES,
}


def layout_table(library):
    """libdcr's layout table: {type: [(field or None, offset, size), ...]}."""
    fn = getattr(library, "dcr_abi_layout", None)
    if fn is None:
        raise ImportError("dcr: %s has no layout table (dcr_abi_layout): it is older than this package"
                          % library._name)
    fn.restype = ctypes.POINTER(AbiRow)
    fn.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    n = ctypes.c_size_t()
    rows = fn(ctypes.byref(n))
    table = {}
    for i in range(n.value):
        r = rows[i]
        field = r.field.decode() if r.field else None
        table.setdefault(r.type.decode(), []).append((field, r.offset, r.size))
    return table


def layout_mismatch(table, mirrors, constants):
    """The first disagreement between the mirrors and libdcr's table, as one
    line naming the structure and field; None when every one agrees."""
    consts = {f: size for f, _, size in table.get("constant", [])}
    for name, value in constants.items():
        if consts.get(name) != value:
            return "constant %s is %s in python/dcr/_lib.py, %s in libdcr" % (name, value, consts.get(name))
    for cls in mirrors:
        rows = table.get(cls._c_name_)
        if rows is None:
            return "%s (%s) is not in libdcr's layout table" % (cls._c_name_, cls.__name__)
        what = "%s (python/dcr/_lib.py %s)" % (cls._c_name_, cls.__name__)
        c_fields = [(f, off, size) for f, off, size in rows if f is not None]
        py_fields = [(f, getattr(cls, f).offset, getattr(cls, f).size) for f, _ in cls._fields_]
        for k in range(max(len(c_fields), len(py_fields))):
            c = c_fields[k] if k < len(c_fields) else None
            py = py_fields[k] if k < len(py_fields) else None
            if c is None:
                return "%s: field %s is not in libdcr's structure" % (what, py[0])
            if py is None or py[0] != c[0]:
                return "%s: field %s (offset %d in libdcr) is missing or out of order" % (what, c[0], c[1])
            if py[1:] != c[1:]:
                return "%s: field %s at offset %d size %d, libdcr's at offset %d size %d" % (
                    what, c[0], py[1], py[2], c[1], c[2])
        c_size = [size for f, _, size in rows if f is None]
        if c_size != [ctypes.sizeof(cls)]:
            return "%s: size %d, libdcr's %s" % (what, ctypes.sizeof(cls), c_size)
    return None


def check_layout(library=None, mirrors=MIRRORS, constants=CONSTANTS):
    """Raises ImportError with one line when a mirror disagrees with libdcr."""
    library = library or lib
    bad = layout_mismatch(layout_table(library), mirrors, constants)
    if bad:
        raise ImportError("dcr: C structure mirror out of date: %s (libdcr at %s)" % (bad, library._name))


check_layout()
