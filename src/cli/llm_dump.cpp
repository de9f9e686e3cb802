// `parley llm dump --model DIR --ids 1,2,3 --out logits.npy [--greedy N]`: the logits of a
// prompt at every position (f32 [n_ids, vocab] .npy) from the batched paged forward, and
// with --greedy N the N greedy continuation ids (one decode step per token through the
// same forward and KV cache), printed as JSON: {"greedy": [...]}. For parity checks
// against mlx-lm (tests/parity/llm_mlx_parity_test.py).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/load_options.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "io/npy.h"
#include "llm/model.h"
#include "llm/mtp.h"

namespace parley::cli {
namespace {

struct DumpOptions {
  std::string model;
  std::string ids;
  std::string ids_file;
  std::string out;
  std::string mtp_out;
  int greedy = 0;
  int threads = 0;  // 0: all hardware threads
  DeviceFlags device;
};

std::vector<int32_t> parse_ids(const std::string& text, const std::string& source) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(), ::isspace), item.end());
    if (item.empty()) continue;
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      check_arg(used == item.size() && v >= 0 && v <= INT32_MAX, "");
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      throw Error(ErrorKind::invalid_argument,
                  "[llm dump] " + source + ": '" + item + "' is not a token id");
    }
  }
  check_arg(!ids.empty(), "[llm dump] " + source + ": no token ids");
  return ids;
}

int32_t argmax(const float* row, int64_t n) {
  return int32_t(std::max_element(row, row + n) - row);
}

void run_dump(const DumpOptions& o) {
  if (o.threads > 0) set_cpu_threads(o.threads);
  std::vector<int32_t> ids;
  if (!o.ids_file.empty()) {
    std::ifstream in(o.ids_file);
    check(bool(in), ErrorKind::not_found, "[llm dump] cannot open " + o.ids_file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    std::replace_if(
        text.begin(), text.end(), [](char ch) { return std::isspace(ch); }, ',');
    ids = parse_ids(text, o.ids_file);
  } else {
    ids = parse_ids(o.ids, "--ids");
  }
  const LlmModel model = LlmModel::load(o.model, llm_load_options(o.device));
  const int64_t vocab = model.config().vocab_size;
  for (int32_t id : ids)
    check_arg(id < vocab, "[llm dump] token id " + std::to_string(id) + " >= vocab_size " +
                              std::to_string(vocab));
  const int64_t total = int64_t(ids.size()) + o.greedy;
  const int64_t n_blocks = KvCache::blocks_for(total);
  KvCache cache(model.config(), n_blocks, model.device(), model.dtype());
  // Blocks in reverse order: the forward must follow the table, not assume contiguity.
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.rbegin(), table.rend(), 0);
  ForwardScratch scratch(model.device());
  Tensor logits;
  Batch batch;
  batch.rows.push_back({ids, 0, table, true, true});
  scratch.keep_hidden = !o.mtp_out.empty();
  model.forward(batch, cache, logits, scratch);
  io::write_npy(o.out, logits);
  if (!o.mtp_out.empty()) {
    // The MTP module at positions 0 .. n - 2, each with the token after it: logits of the
    // token two ahead.
    check_arg(model.n_mtp() > 0, "[llm dump] " + o.model + " has no MTP module");
    check_arg(ids.size() >= 2, "[llm dump] --mtp-out needs at least 2 ids");
    KvCache mtp_cache(mtp_cache_config(model.config()), n_blocks, model.device(), model.dtype());
    Batch mb;
    mb.rows.push_back({std::span(ids).subspan(1), 0, table, true, true});
    const Tensor hidden = scratch.hidden.slice0(0, int64_t(ids.size()) - 1);
    Tensor mtp_logits;
    model.forward_mtp(mb, hidden, mtp_cache, mtp_logits, scratch);
    io::write_npy(o.mtp_out, mtp_logits);
    scratch.keep_hidden = false;
  }
  std::vector<int32_t> greedy;
  int32_t next = argmax(logits.data<float>() + (logits.dim(0) - 1) * vocab, vocab);
  for (int step = 0; step < o.greedy; ++step) {
    greedy.push_back(next);
    if (step + 1 == o.greedy) break;
    Batch b;
    b.rows.push_back({std::span<const int32_t>(&greedy.back(), 1), int32_t(ids.size()) + step,
                      table, true, false});
    model.forward(b, cache, logits, scratch);
    next = argmax(logits.data<float>(), vocab);
  }
  std::cout << "{\"n_ids\": " << ids.size() << ", \"greedy\": [";
  for (size_t i = 0; i < greedy.size(); ++i) std::cout << (i ? ", " : "") << greedy[i];
  std::cout << "]}\n";
}

}  // namespace

void add_llm_command(CLI::App& app) {
  auto* llm = app.add_subcommand("llm", "Chat-model tools");
  llm->require_subcommand(1);
  auto opt = std::make_shared<DumpOptions>();
  auto* d = llm->add_subcommand("dump", "Write a prompt's all-position logits as .npy");
  d->add_option("--model", opt->model, "Hugging Face model directory")->required();
  d->add_option("--ids", opt->ids, "Prompt token ids, comma separated");
  d->add_option("--ids-file", opt->ids_file, "File of prompt token ids (commas or spaces)");
  d->add_option("--out", opt->out, "Output .npy: f32 [n_ids, vocab]")->required();
  d->add_option("--mtp-out", opt->mtp_out,
                "Also the MTP module's logits (llm/mtp.h) at positions 0 .. n-2, each given "
                "the next id: f32 [n_ids - 1, vocab] .npy");
  d->add_option("--greedy", opt->greedy, "Greedy continuation tokens to print as JSON")
      ->check(CLI::NonNegativeNumber);
  d->add_option("--threads", opt->threads, "CPU threads (0: all)");
  add_device_flags(d, opt->device);
  d->callback([opt] {
    if (opt->ids.empty() == opt->ids_file.empty())
      throw Error(ErrorKind::invalid_argument, "[llm dump] give exactly one of --ids, --ids-file");
    run_dump(*opt);
  });
}

}  // namespace parley::cli
