#!/usr/bin/env python3
"""Writes the tiny seed files of fuzz_safetensors, fuzz_npz, fuzz_gguf and fuzz_ggml
into tests/fuzz/corpus/<format>/.

Python standard library only (struct, zipfile, json), written independently of the C++
writers so the seeds also cross-check them. Run from anywhere:
    python3 tests/fuzz/corpus/make_weight_format_seeds.py
"""
import io
import json
import os
import struct
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def f16(*v):
    return struct.pack("<%de" % len(v), *v)


# --- safetensors: u64 header length, JSON header padded with spaces to 8, data.
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


write("safetensors", "two_tensors", safetensors(
    [("w", "F32", [2, 2], f32(1, 2, 3, 4)), ("b", "F16", [3], f16(0.5, -1, 2))], {"format": "pt"}))
write("safetensors", "empty_header", safetensors([]))
write("safetensors", "int_types", safetensors(
    [("ids", "I32", [2], struct.pack("<2i", 7, -9)), ("q", "I8", [1, 3], bytes([1, 255, 3])),
     ("z", "BF16", [0], b"")]))


# --- npy v1.0 and npz (stored, deflated, ZIP64 extras as numpy writes them).
def npy(descr, shape, raw):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        descr, "(%d,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(map(str, shape)))
    total = (10 + len(d) + 1 + 63) // 64 * 64
    d = d.ljust(total - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + raw


def npz(entries, method, zip64=False):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        for name, data in entries:
            with z.open(name, "w", force_zip64=zip64) as f:
                f.write(data)
    return buf.getvalue()


arrays = [("a.npy", npy("<f4", [2, 3], f32(0, 1, 2, 3, 4, 5))), ("b.npy", npy("<i4", [2], struct.pack("<2i", 1, 2))),
          ("c.npy", npy("<f2", [1], f16(1.5))), ("d.npy", npy("|i1", [3], bytes([1, 2, 3])))]
write("npz", "stored.npz", npz(arrays, zipfile.ZIP_STORED))
write("npz", "deflated_zip64.npz", npz(arrays[:2], zipfile.ZIP_DEFLATED, zip64=True))
write("npz", "single.npy", arrays[0][1])


# --- GGUF v3: header, metadata, tensor infos, aligned data.
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kvs, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, typ, val in kvs:
        out += gstr(key) + struct.pack("<I", typ) + val
    offset, datas = 0, []
    for name, ne, typ, raw in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", typ, offset)
        datas.append((offset, raw))
        offset = (offset + len(raw) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    start = len(out)
    for off, raw in datas:
        out += b"\0" * (start + off - len(out)) + raw
    return out


q8_block = f16(0.25) + bytes((i * 7) & 0xFF for i in range(32))
write("gguf", "mixed.gguf", gguf(
    [("general.architecture", 8, gstr("whisper")), ("general.alignment", 4, struct.pack("<I", 32)),
     ("u8", 0, b"\x07"), ("f64", 12, struct.pack("<d", 0.5)), ("flag", 7, b"\x01"),
     ("tokens", 9, struct.pack("<IQ", 8, 2) + gstr("a") + gstr("bc")),
     ("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 1) + struct.pack("<i", -3))],
    [("w", [2, 2], 0, f32(1, 2, 3, 4)), ("h", [3], 1, f16(1, 2, 3)), ("q", [32], 8, q8_block),
     ("bf", [2], 30, b"\x80\x3f\x00\x40")]))
write("gguf", "empty.gguf", gguf([], []))


# --- whisper.cpp legacy ggml .bin: magic, 11 hparams, filters, vocab, tensor records.
def ggml(tensors):
    out = struct.pack("<I", 0x67676D6C) + struct.pack("<11i", 51865, 1500, 384, 6, 4, 448, 384, 6, 4, 2, 1)
    out += struct.pack("<ii", 2, 3) + f32(0, 0.5, 1, 1.5, 2, 2.5)
    vocab = [b"!", b" the", b""]
    out += struct.pack("<i", len(vocab)) + b"".join(struct.pack("<I", len(t)) + t for t in vocab)
    for name, ne, typ, raw in tensors:
        out += struct.pack("<iii", len(ne), len(name), typ) + struct.pack("<%di" % len(ne), *ne) + name + raw
    return out


write("ggml", "tensors.bin", ggml([(b"enc.w", [2, 2], 1, f16(1, 2, 3, 4)), (b"enc.b", [2], 0, f32(5, 6))]))
write("ggml", "header_only.bin", ggml([]))
