"""Writes weight files made to attack whoever loads them, for tests/weights/weights_test.cpp.

Usage: hostile_files.py OUT_DIR MARKER
Each code_<case>.pt runs `touch MARKER.<case>` when Python's pickle loads it, as
torch.load(weights_only=False) does, but code_torch_load.pt, which loads inner.pt (a tensor) into
its state dict through torch.load; load_hostile.py shows each one run. The size_* files declare sizes their bytes do
not hold (or inflate to); nested_* are 100,000 levels deep. Each file also holds a proper state dict, so a reader
that ignored the hostile part would find weights.
"""
import builtins
import collections
import io
import os
import pickle
import subprocess
import sys
import zipfile

import torch

out, marker = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)


class Storage:
    """A storage of the zip: ('storage', torch.FloatStorage, key, 'cpu', numel) as torch.save."""

    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class Call:
    """Unpickles to fn(*args): what a malicious __reduce__ gives pickle."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None


def pickled(obj):
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(obj)
    return buffer.getvalue()


def write(name, pkl, storages, compress=False):
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(os.path.join(out, name), "w", method) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        for key, data in storages.items():
            z.writestr(f"archive/data/{key}", data)


weights = torch.arange(4, dtype=torch.float32)
four = {"0": weights.numpy().tobytes()}


def state(**extra):
    d = collections.OrderedDict(w=Tensor(Storage("0", 4), 0, (4,), (1,)))
    d.update(extra)
    return d


def touch(case):
    return f"touch {marker}.{case}"


write("code_os_system.pt", pickled(state(x=Call(os.system, touch("os_system")))), four)
write("code_eval.pt",
      pickled(state(x=Call(builtins.eval, f"__import__('os').system('{touch('eval')}')"))), four)
write("code_exec.pt",
      pickled(state(x=Call(builtins.exec, f"import os; os.system('{touch('exec')}')"))), four)
write("code_popen.pt", pickled(state(x=Call(subprocess.Popen, ["touch", f"{marker}.popen"]))),
      four)
torch.save(torch.arange(3.0), os.path.join(out, "inner.pt"))
write("code_torch_load.pt", pickled(state(x=Call(torch.load, os.path.join(out, "inner.pt")))),
      four)


def short_unicode(text):
    data = text.encode()
    assert len(data) < 256, text
    return b"\x8c" + bytes([len(data)]) + data


# A STACK_GLOBAL naming an attribute path (pathlib.Path.touch), which Python's pickle resolves
# from protocol 4 on: called with PosixPath(MARKER.attribute_path).
body = pickled(state())
assert body.startswith(b"\x80\x02") and body.endswith(b".")
gadget = (short_unicode("pathlib") + short_unicode("Path.touch") + b"\x93" +
          short_unicode("pathlib") + short_unicode("PosixPath") + b"\x93" +
          short_unicode(f"{marker}.attribute_path") + b"\x85R\x85R0")
write("code_attribute_path.pt", b"\x80\x04" + body[2:-1] + gadget + b".", four)

write("size_storage_terabytes.pt",
      pickled({"w": Tensor(Storage("0", 10**12), 0, (10**12,), (1,))}), four)
write("size_view_past_storage.pt", pickled({"w": Tensor(Storage("0", 4), 2, (10,), (1,))}), four)
write("size_view_overflow.pt",
      pickled({"w": Tensor(Storage("0", 4), 0, (2**40, 2**40), (2**40, 2**40))}), four)
write("size_view_repeated.pt",
      pickled({"w": Tensor(Storage("0", 4), 0, (10**6, 10**6), (0, 0))}), four)
# 200 MB of zeros deflated to a few hundred kilobytes: a zip bomb.
write("size_deflate_bomb.pt", pickled(state()), {"0": bytes(200 << 20)}, compress=True)

# A record the central directory says is 4 GB long, in a file of a few hundred bytes.
write("size_record_past_file.pt", pickled(state()), four)
path = os.path.join(out, "size_record_past_file.pt")
raw = bytearray(open(path, "rb").read())
name = b"archive/data/0"
at = raw.find(b"PK\x01\x02")
while raw[at + 46:at + 46 + len(name)] != name:
    at = raw.find(b"PK\x01\x02", at + 4)
raw[at + 20:at + 28] = (0xFFFFFFF0).to_bytes(4, "little") * 2
open(path, "wb").write(bytes(raw))

# Zips LibTorch's reader opens and then refuses, leaking miniz's state (fuzz_torch_file with leak
# detection): no records, records in no folder, no version record, versions it does not read.
# (a record whose directory lists none: an empty zip has no local header, no torch.save magic)
write("layout_no_records.pt", pickled(state()), four)
path = os.path.join(out, "layout_no_records.pt")
raw = bytearray(open(path, "rb").read())
end = raw.rfind(b"PK\x05\x06")
raw[end + 8:end + 20] = bytes(8) + end.to_bytes(4, "little")
open(path, "wb").write(bytes(raw))
with zipfile.ZipFile(os.path.join(out, "layout_no_folder.pt"), "w") as z:
    z.writestr("data.pkl", pickled(state()))
    z.writestr("version", "3\n")
    z.writestr("data/0", four["0"])
with zipfile.ZipFile(os.path.join(out, "layout_no_version.pt"), "w") as z:
    z.writestr("archive/data.pkl", pickled(state()))
    z.writestr("archive/.format_version", "1")
    z.writestr("archive/data/0", four["0"])
for name, version in [("layout_version_11.pt", "11\n"), ("layout_version_text.pt", "three")]:
    with zipfile.ZipFile(os.path.join(out, name), "w") as z:
        z.writestr("archive/data.pkl", pickled(state()))
        z.writestr("archive/version", version)
        z.writestr("archive/data/0", four["0"])

def flag_version_record(name, local_at, central_at, bits):
    """A zip whose version record has `bits` set at offset local_at of its local header and
    central_at of its central directory entry (None: not there), which LibTorch's reader opens
    and then refuses, leaking miniz's state (fuzz_checkpoint's findings)."""
    path = os.path.join(out, name)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickled(state()))
        z.writestr("archive/version", "3\n")
        z.writestr("archive/data/0", four["0"])
    raw = bytearray(open(path, "rb").read())
    for signature, at_field, name_at in [(b"PK\x03\x04", local_at, 30), (b"PK\x01\x02", central_at, 46)]:
        if at_field is None:
            continue
        at = raw.find(signature)
        while raw[at + name_at:at + name_at + 15] != b"archive/version":
            at = raw.find(signature, at + 4)
        raw[at + at_field] |= bits
    open(path, "wb").write(bytes(raw))
    try:
        torch._C.PyTorchFileReader(path)
        raise SystemExit("LibTorch's reader opened " + path + ", which this case assumes it refuses")
    except (RuntimeError, UnicodeDecodeError):
        # Refused. The folder case's message quotes the bytes LibTorch read as the version, which
        # are whatever its buffer held and may not decode as UTF-8 when pybind converts them.
        pass


# Marked encrypted (general-purpose flag bit 0): "unsupported encryption".
flag_version_record("layout_version_encrypted.pt", 6, 8, 0x1)
# Marked a directory (MS-DOS attribute 0x10 of the external attributes): miniz reads it as
# empty, "Couldn't parse the version".
flag_version_record("layout_version_directory.pt", None, 38, 0x10)

# Fuzzing findings, kept as regressions (docs/security.md).
torch.save({"w": torch.zeros(0), "v": torch.ones(2)}, os.path.join(out, "finding_empty_storage.pt"))

# 100,000 nested lists beside a state dict, and a module that holds itself.
deep = b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b"."
write("nested_lists.pt", deep, four)
module = torch.nn.Linear(2, 2)
module._modules["again"] = module
torch.save({"model": module}, os.path.join(out, "nested_module_cycle.pt"))

# Pickles as Python writes them in every protocol (a list held three times: memo stores and
# reads), for the memo walk over the pickles LibTorch reads (weights/pickle_scan.h), and two that
# store at an index beyond their entries: LONG_BINPUT 2^31 and PUT 5, each after none.
shared = [1.5, "x", b"y"]
for protocol in range(6):
    with open(os.path.join(out, f"memo_p{protocol}.pkl"), "wb") as f:
        f.write(pickle.dumps({"a": shared, "b": (shared, shared), "n": 2**70, "s": {1, 2}},
                             protocol=protocol))
with open(os.path.join(out, "memo_long_binput.pkl"), "wb") as f:
    f.write(b"\x80\x02]r\x00\x00\x00\x80.")
with open(os.path.join(out, "memo_put.pkl"), "wb") as f:
    f.write(b"(lp5\n.")
# 1,001 nested lists: one level past what the walk allows.
with open(os.path.join(out, "memo_nested.pkl"), "wb") as f:
    f.write(b"\x80\x02" + b"]" * 1001 + b"a" * 1000 + b".")
