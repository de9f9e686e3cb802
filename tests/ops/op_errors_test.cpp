// Argument checks of the public ops: mismatched shapes, dtypes and devices are
// parley::Errors whose message names the op and the offending tensors. Host tensors only:
// the checks run before any backend is chosen.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/ops/attention.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "engine/ops/transpose.h"
#include "op_test_util.h"

namespace parley {
namespace {

using test::expect_error;

Tensor f32(const Shape& s) { return Tensor::zeros(s, DType::f32); }
Tensor of(const Shape& s, DType t) { return Tensor::zeros(s, t); }

TEST(OpErrors, MatmulInnerDimensions) {
  Tensor a = f32({2, 3}), b = f32({4, 5}), c = f32({2, 5});
  expect_error([&] { matmul(a, b, c); },
               {"[matmul]", "a f32[2, 3] and b f32[4, 5]", "inner dimensions 3 and 4 differ"});
  MatmulOptions t;
  t.trans_b = true;
  Tensor bt = f32({5, 4});
  expect_error([&] { matmul(a, bt, c, t); }, {"[matmul]", "inner dimensions 3 and 4"});
}

TEST(OpErrors, MatmulDtypesAndOutput) {
  Tensor a = f32({2, 3}), b16 = of({3, 5}, DType::bf16), b = f32({3, 5});
  Tensor c = f32({2, 5});
  expect_error([&] { matmul(a, b16, c); }, {"[matmul]", "dtypes differ"});
  Tensor c_bad = f32({2, 4});
  expect_error([&] { matmul(a, b, c_bad); }, {"[matmul]", "c f32[2, 4]", "[2, 5]"});
  Tensor c16 = of({2, 5}, DType::f16);
  expect_error([&] { matmul(a, b, c16); }, {"[matmul]", "c f16[2, 5]"});
  Tensor bias = f32({4});
  MatmulOptions o;
  o.bias = &bias;
  expect_error([&] { matmul(a, b, c, o); }, {"[matmul]", "bias f32[4]", "[5]"});
  Tensor ai = of({2, 3}, DType::i32), bi = of({3, 5}, DType::i32);
  expect_error([&] { matmul(ai, bi, c); }, {"[matmul]", "float"}, ErrorKind::unsupported);
}

TEST(OpErrors, MatmulBatches) {
  Tensor a = f32({2, 3, 4}), b = f32({3, 4, 5}), c = f32({2, 3, 5});
  expect_error([&] { matmul(a, b, c); }, {"[matmul]", "batch sizes 2 and 3 differ"});
  Tensor a2 = f32({3, 4}), b3 = f32({2, 4, 5}), c2 = f32({3, 5});
  expect_error([&] { matmul(a2, b3, c2); }, {"[matmul]", "3-D"});
}

TEST(OpErrors, MixedDevices) {
  // A CUDA-labelled view of host memory: the check rejects it before anything reads it.
  Tensor a = f32({2, 3}), c = f32({2, 5});
  Tensor host_b = f32({3, 5});
  Tensor b = Tensor::view(host_b.raw(), {3, 5}, DType::f32, Device::cuda, nullptr);
  expect_error([&] { matmul(a, b, c); },
               {"[matmul]", "a f32[2, 3] is on cpu", "b f32[3, 5] is on cuda"});
  expect_error([&] { add(a, b, c); }, {"[add]", "cuda"});
}

TEST(OpErrors, Elementwise) {
  Tensor a = f32({2, 3}), b = f32({2}), o = f32({2, 3});
  expect_error([&] { add(a, b, o); }, {"[add]", "a f32[2, 3] and b f32[2]", "trailing"});
  expect_error([&] { mul(a, b, o); }, {"[mul]", "trailing"});
  Tensor o_bad = f32({3, 2});
  expect_error([&] { scale(a, 2.0f, o_bad); }, {"[scale]", "out f32[3, 2]"});
  Tensor o16 = of({2, 3}, DType::bf16);
  expect_error([&] { gelu(a, o16); }, {"[gelu]", "out bf16[2, 3]"});
  Tensor xi = of({2, 3}, DType::i32);
  expect_error([&] { silu(xi, xi); }, {"[silu]", "float"}, ErrorKind::unsupported);
  Tensor oi = of({2, 3}, DType::i32);
  expect_error([&] { convert(a, oi); }, {"[convert]", "f32[2, 3]", "i32[2, 3]"});
  expect_error([&] { convert(a, o_bad); }, {"[convert]", "shapes differ"});
}

TEST(OpErrors, Norms) {
  Tensor x = f32({2, 8}), g = f32({7}), b = f32({8}), o = f32({2, 8});
  expect_error([&] { layer_norm(x, g, b, 1e-5f, o); }, {"[layer_norm]", "gamma f32[7]", "[8]"});
  Tensor g8 = f32({8}), b16 = of({8}, DType::f16);
  expect_error([&] { layer_norm(x, g8, b16, 1e-5f, o); }, {"[layer_norm]", "beta f16[8]"});
  Tensor o_bad = f32({2, 9});
  expect_error([&] { rms_norm(x, g8, 1e-5f, o_bad); }, {"[rms_norm]", "out f32[2, 9]"});
}

TEST(OpErrors, Softmax) {
  Tensor x = f32({2, 8}), o = of({2, 8}, DType::f16);
  expect_error([&] { softmax(x, o); }, {"[softmax]", "out f16[2, 8]"});
  expect_error([&] { log_softmax(x, o); }, {"[log_softmax]"});
}

TEST(OpErrors, Conv1d) {
  Tensor x = f32({1, 4, 10}), w = f32({6, 5, 3}), o = f32({1, 6, 8});
  expect_error([&] { conv1d(x, w, o); }, {"[conv1d]", "input channels 4 and 5 differ"});
  Tensor w4 = f32({6, 4, 3}), o_bad = f32({1, 6, 9});
  expect_error([&] { conv1d(x, w4, o_bad); }, {"[conv1d]", "out f32[1, 6, 9]", "[1, 6, 8]"});
  Tensor w_long = f32({6, 4, 13});
  expect_error([&] { conv1d(x, w_long, o); }, {"[conv1d]", "shorter than kernel 13"});
  Conv1dOptions bad;
  bad.stride = 0;
  expect_error([&] { conv1d_out_length(10, 3, bad); }, {"[conv1d]", "stride 0"});
}

TEST(OpErrors, Embedding) {
  Tensor table = f32({10, 4}), o = f32({3, 4});
  Tensor ids_f = f32({3});
  expect_error([&] { embedding(table, ids_f, o); }, {"[embedding]", "ids f32[3]", "i32"});
  Tensor ids = of({3}, DType::i32), o_bad = f32({3, 5});
  expect_error([&] { embedding(table, ids, o_bad); }, {"[embedding]", "out f32[3, 5]"});
}

TEST(OpErrors, Permute) {
  Tensor x = f32({2, 3, 4}), o = f32({4, 3, 2});
  expect_error([&] { permute(x, {0, 1}, o); }, {"[permute]", "(0, 1)", "[2, 3, 4]"});
  expect_error([&] { permute(x, {0, 0, 1}, o); }, {"[permute]", "(0, 0, 1)"});
  expect_error([&] { permute(x, {1, 0, 2}, o); }, {"[permute]", "out f32[4, 3, 2]", "[3, 2, 4]"});
  expect_error([&] { transpose(x, 0, 3, o); }, {"[transpose]", "dimensions 0 and 3"});
}

TEST(OpErrors, Attention) {
  Tensor q = f32({1, 2, 3, 8}), k = f32({1, 2, 5, 4}), v = f32({1, 2, 5, 8}), o = f32({1, 2, 3, 8});
  expect_error([&] { attention(q, k, v, o); },
               {"[attention]", "q f32[1, 2, 3, 8]", "k f32[1, 2, 5, 4]"});
  Tensor k8 = f32({1, 2, 5, 8}), v16 = of({1, 2, 5, 8}, DType::f16);
  expect_error([&] { attention(q, k8, v16, o); }, {"[attention]", "dtypes differ"});
  Tensor mask = f32({1, 5});
  AttentionOptions opt;
  opt.key_mask = &mask;
  expect_error([&] { attention(q, k8, v, o, opt); }, {"[attention]", "key_mask f32[1, 5]", "i8"});
  Tensor mask_bad = of({1, 4}, DType::i8);
  opt.key_mask = &mask_bad;
  expect_error([&] { attention(q, k8, v, o, opt); }, {"[attention]", "key_mask i8[1, 4]"});
  opt.key_mask = nullptr;
  Tensor lens_f32 = f32({1}), lens_bad = of({2}, DType::i32);
  opt.key_len = &lens_f32;
  expect_error([&] { attention(q, k8, v, o, opt); }, {"[attention]", "key_len f32[1]", "i32"});
  opt.key_len = &lens_bad;
  expect_error([&] { attention(q, k8, v, o, opt); }, {"[attention]", "key_len i32[2]"});
  opt.key_len = nullptr;
  // batch_index: k and v of another item count, but the index must fit them.
  Tensor k3 = f32({3, 2, 5, 8}), v3 = f32({3, 2, 5, 8}), v2 = f32({2, 2, 5, 8});
  expect_error([&] { attention(q, k3, v3, o); }, {"[attention]", "unless batch_index"});
  Tensor index = of({1}, DType::i32), index_f32 = f32({1});
  index.data<int32_t>()[0] = 3;
  opt.batch_index = &index_f32;
  expect_error([&] { attention(q, k3, v3, o, opt); }, {"[attention]", "batch_index f32[1]"});
  opt.batch_index = &index;
  expect_error([&] { attention(q, k3, v3, o, opt); },
               {"[attention]", "batch_index 3 outside [0, 3)"});
  expect_error([&] { attention(q, k3, v2, o, opt); }, {"[attention]", "with k's B, H and Lk"});
  index.data<int32_t>()[0] = 2;
  attention(q, k3, v3, o, opt);  // item 2 of 3
}

TEST(OpErrors, AttentionQkv) {
  Tensor qkv = f32({1, 5, 48}), o = f32({1, 5, 16});
  expect_error([&] { attention_qkv(qkv, 5, o); },
               {"[attention_qkv]", "qkv f32[1, 5, 48]", "5 heads"});
  Tensor o_bad = f32({1, 4, 16});
  expect_error([&] { attention_qkv(qkv, 2, o_bad); }, {"[attention_qkv]", "out f32[1, 4, 16]"});
  Tensor o16 = of({1, 5, 16}, DType::f16);
  expect_error([&] { attention_qkv(qkv, 2, o16); }, {"[attention_qkv]", "dtypes differ"});
  Tensor flat = f32({5, 48});
  expect_error([&] { attention_qkv(flat, 2, o); }, {"[attention_qkv]", "3 dimensions"});
}

TEST(OpErrors, AttentionTokens) {
  Tensor qkv = f32({1, 3, 48}), cache = f32({1, 10, 48}), o = f32({1, 3, 16});
  Tensor o_bad = f32({1, 3, 15});
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16}, {cache, 32}, 5, 2, o_bad);
      },
      {"[attention_tokens]", "out f32[1, 3, 15]", "H = 2"});
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 33}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "k f32[1, 10, 48] at column 33"});
  expect_error(
      [&] {
        attention_tokens({qkv, -1}, {cache, 16}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "q f32[1, 3, 48] at column -1"});
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16}, {cache, 32}, 11, 2, o);
      },
      {"[attention_tokens]", "11 keys"});
  Tensor q4 = f32({1, 4, 48});
  expect_error(
      [&] {
        attention_tokens({q4, 0}, {cache, 16}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "same number of queries"});
  Tensor batch2 = f32({2, 10, 48});
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {batch2, 16}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "k f32[2, 10, 48]"});
  Tensor c16 = of({1, 10, 48}, DType::f16);
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16}, {c16, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "dtypes differ"});
  Tensor index_f32 = f32({1}), index_2 = of({2}, DType::i32);
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16, &index_f32}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "batch_index f32[1]", "i32"});
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16}, {cache, 32, &index_2}, 5, 2, o);
      },
      {"[attention_tokens]", "batch_index i32[2]"});
  Tensor index_far = of({1}, DType::i32);
  index_far.data<int32_t>()[0] = 1;
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16, &index_far}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "batch_index 1 outside [0, 1)"});
  expect_error(
      [&] {
        attention_tokens({qkv, 0, &index_far}, {cache, 16}, {cache, 32}, 5, 2, o);
      },
      {"[attention_tokens]", "q takes no batch_index"});
  Tensor mask = of({1, 5}, DType::i8);
  AttentionOptions opt;
  opt.key_mask = &mask;
  expect_error(
      [&] {
        attention_tokens({qkv, 0}, {cache, 16}, {cache, 32}, 5, 2, o, opt);
      },
      {"[attention_tokens]", "key_mask"});
}

TEST(OpErrors, Select) {
  Tensor x = f32({2, 5}), o = f32({2});
  expect_error([&] { argmax(x, o); }, {"[argmax]", "out f32[2]", "i32[2]"});
  Tensor v = f32({2, 6}), i = of({2, 6}, DType::i32);
  expect_error([&] { topk(x, 6, v, i); }, {"[topk]", "k = 6", "[1, 5]"});
  Tensor v3 = f32({2, 3}), i3 = f32({2, 3});
  expect_error([&] { topk(x, 3, v3, i3); }, {"[topk]", "indices f32[2, 3]"});
}

}  // namespace
}  // namespace parley
