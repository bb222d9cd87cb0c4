# ctest-labels: python unit
"""The dcr package over libdcr: payload round trips applied into every kind
of caller-owned buffer (oracle: the target words computed with numpy), keyed
digests, refusal of damaged payloads, object stores and the control plane."""

import os
import tempfile
import unittest

import numpy as np
import torch

import dcr


def _change(rng, base, n):
    """base with n elements given fresh random bits (some special values)."""
    new = base.copy()
    idx = np.sort(rng.choice(base.size, n, replace=False))
    new[idx] = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    new[idx[:2]] = [0x8000, 0x7FC1]  # -0.0 and a NaN payload count as changes
    return new


class PayloadTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
        self.base = self.rng.integers(0, 1 << 16, size=3000, dtype=np.uint16)
        self.new = _change(self.rng, self.base, 60)
        self.key = dcr.PayloadKey(os.urandom(32))
        ch = np.flatnonzero(self.base != self.new)
        with dcr.Encoder(self.key) as enc:
            enc.add("a.weight", (30, 100), "bf16", dcr.XOR, ch, self.base[ch] ^ self.new[ch])
            enc.add("b.weight", (3000,), "bf16", dcr.OVERWRITE, ch, self.new[ch])
            self.buf = enc.finish(tau=7, owner=2, payload_id=5)

    def test_header_and_items(self):
        hdr = dcr.verify(self.buf, key=self.key)
        self.assertEqual((hdr["tau"], hdr["owner"], hdr["payload_id"], hdr["item_count"]), (7, 2, 5, 2))
        with dcr.Payload.decode(self.buf, key=self.key) as p:
            items = p.items()
            self.assertEqual([i.name for i in items], ["a.weight", "b.weight"])
            self.assertEqual(items[0].shape, (30, 100))
            np.testing.assert_array_equal(items[0].indices(), np.flatnonzero(self.base != self.new))

    def test_apply_into_buffers(self):
        bufs = {
            "bytearray": bytearray(self.base.tobytes()),
            "numpy": self.base.copy(),
            "torch": torch.from_numpy(self.base.view(np.int16).copy()).view(torch.bfloat16).reshape(30, 100),
        }
        with dcr.Payload.decode(self.buf, key=self.key) as p:
            for kind, dst in bufs.items():
                for item in p.items():
                    target = bufs[kind] if item.name == "a.weight" else self.base.copy()
                    item.apply(target)
                    if item.name == "b.weight":
                        np.testing.assert_array_equal(target, self.new)
        np.testing.assert_array_equal(np.frombuffer(bufs["bytearray"], np.uint16), self.new)
        np.testing.assert_array_equal(bufs["numpy"], self.new)
        got = bufs["torch"].reshape(-1).view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(got, self.new)

    def test_apply_refuses_wrong_buffers(self):
        with dcr.Payload.decode(self.buf, key=self.key) as p:
            item = p.items()[0]
            with self.assertRaisesRegex(ValueError, "a.weight.*bytes"):
                item.apply(bytearray(10))
            with self.assertRaisesRegex(ValueError, "read-only"):
                item.apply(bytes(6000))
            t = torch.zeros(100, 30, dtype=torch.bfloat16).t()
            with self.assertRaisesRegex(ValueError, "not contiguous"):
                item.apply(t)

    def test_keys_and_damage(self):
        with self.assertRaises(dcr.Error) as e:
            dcr.Payload.decode(self.buf)  # keyed payload, no key here
        self.assertEqual(e.exception.status, -21)
        with self.assertRaises(dcr.Error):
            dcr.Payload.decode(self.buf, key=dcr.PayloadKey(os.urandom(32)))
        for pos in (3, 20, len(self.buf) - 1):
            bad = bytearray(self.buf)
            bad[pos] ^= 0x10
            with self.assertRaises(dcr.Error, msg="byte %d" % pos):
                dcr.Payload.decode(bytes(bad), key=self.key)
        with self.assertRaises(dcr.Error):
            dcr.Payload.decode(self.buf[:-5], key=self.key)

    def test_encoder_validates(self):
        with dcr.Encoder() as enc:
            with self.assertRaisesRegex(dcr.Error, "x"):
                enc.add("x", (4,), "bf16", dcr.XOR, [2, 1], np.ones(2, np.uint16))  # not increasing
            with self.assertRaises(ValueError):
                enc.add("x", (4,), "bf16", dcr.XOR, [1], np.ones(2, np.uint16))

    def test_key_file(self):
        with tempfile.TemporaryDirectory(prefix="lib-py-") as d:
            path = os.path.join(d, "k")
            with open(path, "wb") as f:
                f.write(b"k" * 32)
            os.chmod(path, 0o600)
            dcr.Payload.decode(self._signed(dcr.PayloadKey.load(path)), key=dcr.PayloadKey(b"k" * 32)).close()
            with open(path, "wb") as f:
                f.write(b"short")
            with self.assertRaisesRegex(dcr.Error, "32"):
                dcr.PayloadKey.load(path)

    def _signed(self, key):
        with dcr.Encoder(key) as enc:
            enc.add("t", (2,), "fp32", dcr.OVERWRITE, None, np.array([1, 2], np.uint32))
            return enc.finish(1, 0, 0)


class ServicesTest(unittest.TestCase):
    def test_store_and_control(self):
        with tempfile.TemporaryDirectory(prefix="lib-py-") as d:
            store = dcr.ObjectStore("dir:" + os.path.join(d, "store"))
            store.put("attempt-1/p0", b"abc")
            store.put("attempt-1/p1", b"defg")
            self.assertEqual(store.keys("attempt-1/"), ["attempt-1/p0", "attempt-1/p1"])
            self.assertEqual(store.get("attempt-1/p1"), b"defg")
            with self.assertRaises(dcr.Error):
                store.get("attempt-1/none")
            control = dcr.Control("sqlite", os.path.join(d, "control.db"))
            zero = control.read()
            self.assertEqual(zero["version"], 0)
            v0 = dict(zero, baseline=b"v0")
            control.cas(zero, v0)
            tau = control.prepare("coord-a", 0, [1, 2], 60000)
            control.ack(tau, 1)
            with self.assertRaises(dcr.Error):  # receiver 2 has not acknowledged
                control.commit("coord-a", tau, control.read(), b"v1")
            with self.assertRaises(dcr.Error):  # not a required receiver
                control.ack(tau, 9)
            control.ack(tau, 2)
            self.assertEqual(control.acks(tau), [1, 2])
            rec = control.commit("coord-a", tau, control.read(), b"v1")
            self.assertEqual((rec["version"], rec["attempt"]), (1, tau))
            self.assertEqual(control.read()["baseline"][:2], b"v1")


if __name__ == "__main__":
    unittest.main()
