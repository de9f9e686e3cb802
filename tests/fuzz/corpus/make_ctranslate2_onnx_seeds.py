#!/usr/bin/env python3
"""Writes the tiny synthetic seed files of fuzz_ctranslate2 and fuzz_onnx.

Run from anywhere: python3 tests/fuzz/corpus/make_ctranslate2_onnx_seeds.py
CTranslate2 seeds follow ctranslate2/specs/model_spec.py's writer; ONNX seeds are built
with the `onnx` package (pip install onnx), which only this script needs.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def ct2_model(version):
    out = bytearray()

    def string(s):
        b = s.encode() + b"\0"
        out.extend(struct.pack("<H", len(b)) + b)

    def variable(name, dims, type_id, item_size, data):
        string(name)
        out.extend(struct.pack("<B", len(dims)))
        for d in dims:
            out.extend(struct.pack("<I", d))
        if version >= 4:
            out.extend(struct.pack("<BI", type_id, len(data)))
        else:
            out.extend(struct.pack("<BI", item_size, len(data) // item_size))
        out.extend(data)

    out.extend(struct.pack("<I", version))
    if version >= 2:
        string("TinySpec")
        out.extend(struct.pack("<I", 1))
    typed = version >= 4
    out.extend(struct.pack("<I", 4 if typed else 3))
    variable("enc/weight", [2, 3], 0, 4, struct.pack("<6f", 1.5, -2, 3.25, 0, -0.5, 8))
    if typed:
        variable("enc/bias", [3], 4, 2, struct.pack("<3H", 0x3C00, 0xC000, 0x3800))
    variable("enc/q", [4], 1, 1, struct.pack("<4b", -128, -1, 0, 127))
    variable("num_heads", [], 2, 2, struct.pack("<h", 6))
    if version >= 3:
        out.extend(struct.pack("<I", 1))
        string("dec/projection")
        string("enc/weight")
    return bytes(out)


def onnx_models():
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "W")
    b = helper.make_tensor("B", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0])  # float_data
    h = helper.make_tensor("H", TensorProto.FLOAT16, [2], np.array([1, -2], np.float16).view(np.uint16).tolist())
    q = helper.make_tensor("Q", TensorProto.INT8, [3], [-128, 0, 127])
    shape = helper.make_tensor("S", TensorProto.INT64, [2], [3, -1])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    mm = helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")
    plain = helper.make_model(helper.make_graph([mm], "plain", [x], [y], [w, b, h, q, shape]),
                              producer_name="parley-seed")
    plain.metadata_props.add(key="version", value="1")

    def branch(name, value):
        c = helper.make_node("Constant", [], [name + "_c"],
                             value=numpy_helper.from_array(np.full([2], value, np.float32), "w"))
        out = helper.make_tensor_value_info(name + "_c", TensorProto.FLOAT, [2])
        return helper.make_graph([c], name, [], [out])

    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])
    iff = helper.make_node("If", ["cond"], ["z"], name="If_0",
                           then_branch=branch("then", 16.0), else_branch=branch("else", 8.0))
    const = helper.make_node("Constant", [], ["sr"], value=helper.make_tensor("", TensorProto.INT64, [], [16000]))
    floats = helper.make_node("Constant", [], ["vf"], value_floats=[1.5, 2.5])
    branches = helper.make_model(helper.make_graph([const, floats, iff], "branches", [cond], [z]),
                                 producer_name="parley-seed")
    return {"plain.onnx": plain.SerializeToString(), "branches.onnx": branches.SerializeToString()}


def main():
    for v in (1, 3, 6):
        with open(os.path.join(HERE, "ctranslate2", f"tiny_v{v}.bin"), "wb") as f:
            f.write(ct2_model(v))
    for name, data in onnx_models().items():
        with open(os.path.join(HERE, "onnx", name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
