"""Reads a CTranslate2 model.bin (binary versions 4..6) into numpy arrays.

Layout (little-endian), as src/io/ctranslate2.h describes:
  u32 version; string spec_name; u32 spec_revision; u32 count;
  per variable: string name, u8 rank, u32 dims[rank], u8 dtype, u32 nbytes, data;
  u32 alias count, per alias: string alias, string target.
string = u16 length (including a terminating NUL) + bytes.
"""
import struct

import numpy as np

_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}  # 5: bf16


def _bf16_to_f32(raw):
    u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return u.view(np.float32)


def read_ct2(path):
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("H")
        s = buf[pos : pos + n].rstrip(b"\0").decode("utf-8")
        pos += n
        return s

    (version,) = take("I")
    if not 4 <= version <= 6:
        raise ValueError(f"{path}: CTranslate2 binary version {version} unsupported (4..6)")
    spec = string()
    (revision,) = take("I")
    (count,) = take("I")
    variables = {}
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        dims = take("I" * rank) if rank else ()
        dtype, nbytes = take("BI")
        raw = buf[pos : pos + nbytes]
        pos += nbytes
        if dtype == 5:
            arr = _bf16_to_f32(raw)
        elif dtype in _DTYPES:
            arr = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<"))
        else:
            raise ValueError(f"{name}: unknown CTranslate2 type id {dtype}")
        variables[name] = arr.reshape(dims)
    aliases = {}
    if pos < len(buf):
        (n_alias,) = take("I")
        for _ in range(n_alias):
            a = string()
            aliases[a] = string()
    return {"version": version, "spec": spec, "revision": revision,
            "variables": variables, "aliases": aliases}
