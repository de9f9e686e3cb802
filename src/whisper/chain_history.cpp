// ChainHistory (chain_history.h).
#include "whisper/chain_history.h"

#include <cstring>

#include "engine/error.h"

namespace parley::whisper {

namespace {

// `bytes` of zeroed host memory: pinned on CUDA (the device writes or copies into it).
template <typename T>
std::shared_ptr<T> host_buffer(Device device, size_t count) {
  const size_t bytes = count * sizeof(T);
  std::shared_ptr<T> p;
  if (device == Device::cuda)
    p = std::shared_ptr<T>(static_cast<T*>(cuda::malloc_pinned(bytes)),
                           [](T* q) { cuda::free_pinned(q); });
  else
    p = std::shared_ptr<T>(new T[count], std::default_delete<T[]>());
  std::memset(p.get(), 0, bytes);
  return p;
}

}  // namespace

ChainHistory::ChainHistory(Device device, int n_text_ctx, int64_t width, int n_vocab)
    : device_(device),
      initial_logits_(host_buffer<float>(device, size_t(n_vocab))),
      n_vocab_(size_t(n_vocab)) {
  const std::shared_ptr<int32_t> rows = host_buffer<int32_t>(device, size_t(n_text_ctx * width));
  // On the CPU the buffer is plain host memory, a CPU tensor; on CUDA a device view of it.
  history_ = Tensor::view(rows.get(), {n_text_ctx, width}, DType::i32, device, rows);
  if (device == Device::cuda)
    for (int i = 0; i < n_text_ctx; ++i) done_.push_back(std::make_unique<cuda::Event>());
}

Tensor ChainHistory::row(int64_t offset) const {
  return history_.slice0(offset, offset + 1).reshape({history_.dim(1)});
}

void ChainHistory::record(int64_t offset) {
  if (device_ == Device::cuda) done_[size_t(offset)]->record();
}

const int32_t* ChainHistory::read(int64_t offset) {
  if (device_ == Device::cuda) done_[size_t(offset)]->wait();
  return history_.data<int32_t>() + offset * history_.dim(1);
}

void ChainHistory::keep_initial(const Tensor& at_sot, int64_t offset) {
  const size_t bytes = n_vocab_ * sizeof(float);
  if (device_ == Device::cuda)
    cuda::memcpy_d2h_async(initial_logits_.get(), at_sot.raw(), bytes);
  else
    std::memcpy(initial_logits_.get(), at_sot.raw(), bytes);
  initial_ = int(offset);
}

std::span<const float> ChainHistory::initial() {
  check(initial_ >= 0, ErrorKind::internal, "[whisper] chain history: no initial pass kept");
  if (device_ == Device::cuda) done_[size_t(initial_)]->wait();
  return {initial_logits_.get(), n_vocab_};
}

}  // namespace parley::whisper
