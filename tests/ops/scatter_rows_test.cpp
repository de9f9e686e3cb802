// scatter_rows (ops/scatter_rows.h) on every built device and dtype against a plain
// reference: named rows get src's rows bit for bit, the others keep what they held.
#include "engine/ops/scatter_rows.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/error.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

class ScatterRows : public OpTest {};

TEST_P(ScatterRows, WritesNamedRowsAndKeepsTheRest) {
  const int64_t rows = 40, d = 24, n = 9;
  const HostTensor before = random({rows, d});
  const HostTensor src = random({n, d});
  // n distinct rows in a random order, the first and last row among them.
  std::vector<int32_t> all(static_cast<size_t>(rows));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t i = rows - 1; i > 0; --i) std::swap(all[size_t(i)], all[size_t(uniform_int(0, i))]);
  // (The shuffled rows may include 0 and rows - 1 again: those are skipped, since a row
  // named twice has no defined result on CUDA.)
  std::vector<int32_t> picked = {0, int32_t(rows - 1)};
  for (int32_t r : all)
    if (r != 0 && r != rows - 1 && int64_t(picked.size()) < n) picked.push_back(r);
  std::sort(picked.begin() + 2, picked.end());
  const int64_t m = int64_t(picked.size());
  Tensor ids = Tensor::empty({m}, DType::i32);
  std::copy(picked.begin(), picked.end(), ids.data<int32_t>());

  std::vector<double> want(before.v.begin(), before.v.end());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < d; ++c)
      want[size_t(picked[size_t(i)] * d + c)] = src.v[size_t(i * d + c)];
  Tensor o = dev(before.t);
  scatter_rows(dev(src.t).slice0(0, m), ids, o);  // ids on the host
  expect_close(read_floats(o), want, {0.0, 0.0}, "scatter_rows, host ids");
  Tensor o2 = dev(before.t);
  scatter_rows(dev(src.t).slice0(0, m), dev(ids), o2);  // ids on the device
  expect_close(read_floats(o2), want, {0.0, 0.0}, "scatter_rows, device ids");
}

TEST_P(ScatterRows, BadArgumentsAreErrors) {
  const HostTensor src = random({2, 4});
  Tensor o = dev(random({5, 4}).t);
  for (int32_t bad : {5, -1}) {
    Tensor ids = Tensor::empty({2}, DType::i32);
    ids.data<int32_t>()[0] = 1;
    ids.data<int32_t>()[1] = bad;
    try {
      scatter_rows(dev(src.t), ids, o);
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("[scatter_rows]"), std::string::npos) << e.what();
    }
  }
  Tensor ids3 = Tensor::zeros({3}, DType::i32);  // 3 ids for 2 rows
  EXPECT_THROW(scatter_rows(dev(src.t), ids3, o), Error);
  Tensor narrow = dev(random({5, 3}).t);  // another row width
  Tensor ids2 = Tensor::zeros({2}, DType::i32);
  ids2.data<int32_t>()[1] = 1;
  EXPECT_THROW(scatter_rows(dev(src.t), ids2, narrow), Error);
}

INSTANTIATE_TEST_SUITE_P(Ops, ScatterRows, ::testing::ValuesIn(op_params()), op_param_name);

}  // namespace
}  // namespace parley::test
