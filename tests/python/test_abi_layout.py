# ctest-labels: python unit
"""The layout check of the ctypes mirrors (python/dcr/_lib.py) against the
table libdcr exports (dcr/abi.h): it passes for the package's mirrors, and a
mirror that lost, moved, resized or gained a field, or a wrong constant, is
refused with one line naming the structure and the field."""

import ctypes
import unittest

from dcr import _lib


def _mirror_without(cls, drop=None, retype=None, extra=None):
    """A copy of a mirror with one field dropped, retyped or appended."""
    fields = []
    for name, ctype in cls._fields_:
        if name == drop:
            continue
        fields.append((name, retype[1]) if retype and retype[0] == name else (name, ctype))
    if extra:
        fields.append(extra)
    return type(cls.__name__, (ctypes.Structure,), {"_c_name_": cls._c_name_, "_fields_": fields})


class LayoutTest(unittest.TestCase):
    def setUp(self):
        self.table = _lib.layout_table(_lib.lib)

    def test_package_mirrors_agree(self):
        self.assertIsNone(_lib.layout_mismatch(self.table, _lib.MIRRORS, _lib.CONSTANTS))
        _lib.check_layout()  # what import ran

    def test_every_field_of_every_mirror_is_in_the_table(self):
        for cls in _lib.MIRRORS:
            rows = self.table[cls._c_name_]
            self.assertEqual([f for f, _, _ in rows if f], [f for f, _ in cls._fields_], cls._c_name_)
            self.assertEqual(sum(1 for f, _, _ in rows if f is None), 1, cls._c_name_)

    def test_table_offsets_are_increasing_and_inside_the_size(self):
        # From first principles: C lays members out in declaration order,
        # without overlap, inside sizeof.
        for name, rows in self.table.items():
            if name == "constant":
                continue
            size = [s for f, _, s in rows if f is None][0]
            end = 0
            for f, off, s in rows:
                if f is None:
                    continue
                self.assertGreaterEqual(off, end, "%s.%s overlaps the field before it" % (name, f))
                end = off + s
            self.assertLessEqual(end, size, name)

    def test_lost_field_is_named(self):
        # The break that happened once: dcr_payload_item_t gained rice_k.
        bad = _mirror_without(_lib.PayloadItem, drop="rice_k")
        line = _lib.layout_mismatch(self.table, [bad], {})
        self.assertIn("dcr_payload_item_t", line)
        self.assertIn("field rice_k", line)
        with self.assertRaises(ImportError) as cm:
            _lib.check_layout(mirrors=[bad], constants={})
        self.assertEqual(len(str(cm.exception).splitlines()), 1)
        self.assertIn("rice_k", str(cm.exception))

    def test_resized_field_is_named(self):
        bad = _mirror_without(_lib.PayloadItem, retype=("count", ctypes.c_uint32))
        line = _lib.layout_mismatch(self.table, [bad], {})
        self.assertIn("field count at offset", line)

    def test_extra_field_is_named(self):
        bad = _mirror_without(_lib.CommitRecord, extra=("spare", ctypes.c_uint64))
        self.assertIn("field spare is not in libdcr", _lib.layout_mismatch(self.table, [bad], {}))

    def test_size_only_difference_is_caught(self):
        # Same fields, more trailing padding than C has.
        bad = type("ControlConfig", (ctypes.Structure,), {
            "_c_name_": "dcr_control_config_t", "_pack_": 1,
            "_fields_": _lib.ControlConfig._fields_ + []})
        line = _lib.layout_mismatch(self.table, [bad], {})
        self.assertIsNotNone(line)
        self.assertIn("dcr_control_config_t", line)

    def test_wrong_constant_is_named(self):
        line = _lib.layout_mismatch(self.table, [], {"DCR_MAX_DIMS": _lib.MAX_DIMS + 1})
        self.assertIn("DCR_MAX_DIMS", line)

    def test_unknown_structure_is_named(self):
        bad = type("Nope", (ctypes.Structure,), {"_c_name_": "dcr_nope_t", "_fields_": [("a", ctypes.c_int)]})
        self.assertIn("dcr_nope_t", _lib.layout_mismatch(self.table, [bad], {}))


if __name__ == "__main__":
    unittest.main()
