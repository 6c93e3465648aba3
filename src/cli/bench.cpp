// herd bench: prefill and decode speed of a model, the machine's memory read bandwidth
// measured in the same run, and decode as a share of the bandwidth roofline (the weight
// bytes one token must read, divided by the bandwidth, over the measured time per token).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "util/bandwidth.h"
#include "util/error.h"
#include "util/memory.h"

namespace herd::cli {
namespace {

struct BenchOptions {
  ModelOptions model;
  int64_t n_prompt = 64;
  int64_t n_gen = 32;
  int reps = 3;
  int64_t seqs = 1;
  bool json = false;
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("bench", "Measure prefill and decode speed against the memory roofline");
  auto o = std::make_shared<BenchOptions>();
  o->model.add_to(*cmd);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens (prefill, one batch)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens (decode, one at a time)")
      ->capture_default_str();
  cmd->add_option("-r,--reps", o->reps, "Repetitions (the median is reported)")
      ->capture_default_str();
  cmd->add_option("-s,--seqs", o->seqs,
                  "Also decode this many sequences together, one batch per step")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    if (o->n_prompt < 1 || o->n_gen < 1 || o->reps < 1)
      throw Error("cli", "-p, -n and -r must be positive");
    if (o->seqs < 1) throw Error("cli", "--seqs must be positive");
    // Like llama-bench, the context is what the run needs unless --ctx says otherwise.
    ModelOptions model = o->model;
    if (model.n_ctx == 0) model.n_ctx = o->n_prompt + o->n_gen;
    auto runner = model.open(o->seqs);
    const HParams& hp = runner->hparams();
    if (o->n_prompt + o->n_gen > runner->n_ctx()) {
      throw Error("cli", "-p + -n = " + std::to_string(o->n_prompt + o->n_gen) +
                             " exceeds the context of " + std::to_string(runner->n_ctx()));
    }
    // Deterministic pseudo-random prompt ids (the content does not change the cost).
    std::vector<int32_t> ids(static_cast<size_t>(o->n_prompt));
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>((i * 7919 + 13) % hp.n_vocab);
    std::vector<float> logits;
    engine::Batch batch;
    auto prefill = [&] {
      batch.clear();
      for (int64_t i = 0; i < o->n_prompt; ++i)
        batch.add(ids[static_cast<size_t>(i)], 0, static_cast<int32_t>(i), i + 1 == o->n_prompt);
      runner->forward(batch, logits);
    };
    auto run_decode = [&] {
      for (int64_t i = 0; i < o->n_gen; ++i) {
        batch.clear();
        batch.add(ids[static_cast<size_t>(i) % ids.size()], 0,
                  static_cast<int32_t>(o->n_prompt + i), true);
        runner->forward(batch, logits);
      }
    };
    prefill();  // warm-up: page in the weights, grow the scratch buffers
    run_decode();
    std::vector<double> prefill_tps, decode_tps;
    for (int r = 0; r < o->reps; ++r) {
      double t0 = now_seconds();
      prefill();
      double t1 = now_seconds();
      run_decode();
      double t2 = now_seconds();
      prefill_tps.push_back(static_cast<double>(o->n_prompt) / (t1 - t0));
      decode_tps.push_back(static_cast<double>(o->n_gen) / (t2 - t1));
    }
    // Batched decode: every step one token of each of `seqs` sequences (slots 0..seqs-1),
    // each after its own copy of the prompt.
    double batch_tps = 0;
    if (o->seqs > 1) {
      for (int64_t s = 1; s < o->seqs; ++s) {
        batch.clear();
        for (int64_t i = 0; i < o->n_prompt; ++i) {
          batch.add(ids[static_cast<size_t>(i)], static_cast<int32_t>(s), static_cast<int32_t>(i),
                    i + 1 == o->n_prompt);
        }
        runner->forward(batch, logits);
      }
      std::vector<double> tps;
      for (int r = 0; r < o->reps; ++r) {
        double t0 = now_seconds();
        for (int64_t i = 0; i < o->n_gen; ++i) {
          batch.clear();
          for (int64_t s = 0; s < o->seqs; ++s) {
            batch.add(ids[static_cast<size_t>(i + s) % ids.size()], static_cast<int32_t>(s),
                      static_cast<int32_t>(o->n_prompt + i), true);
          }
          runner->forward(batch, logits);
        }
        tps.push_back(static_cast<double>(o->n_gen * o->seqs) / (now_seconds() - t0));
      }
      batch_tps = median(tps);
    }
    // Peak memory before the bandwidth probe allocates its buffer.
    const double peak_rss = static_cast<double>(peak_rss_bytes());
    const double model_bytes = static_cast<double>(runner->info().weight_bytes) +
                               static_cast<double>(runner->shard().kv_cache_bytes());
    const double bandwidth = measure_read_bandwidth(runner->pool());
    // Bytes one decoded token reads: every weight the forward pass uses once (the
    // embedding contributes one row only).
    const auto& embd = runner->file().tensor("token_embd.weight");
    double bytes_per_token = static_cast<double>(runner->info().weight_bytes) -
                             static_cast<double>(embd.n_bytes) +
                             static_cast<double>(embd.n_bytes) / static_cast<double>(hp.n_vocab);
    if (hp.tied_output) bytes_per_token += static_cast<double>(embd.n_bytes);
    const double decode = median(decode_tps), prefill_speed = median(prefill_tps);
    const double roofline_tps = bandwidth / bytes_per_token;
    const double roofline_pct = 100.0 * decode / roofline_tps;
    if (o->json) {
      nlohmann::ordered_json j = {{"model", o->model.model},
                                  {"threads", runner->pool().size()},
                                  {"isa", std::string(kernels::isa_name(runner->isa()))},
                                  {"n_prompt", o->n_prompt},
                                  {"n_gen", o->n_gen},
                                  {"prefill_tok_s", prefill_speed},
                                  {"decode_tok_s", decode},
                                  {"bandwidth_gbs", bandwidth / 1e9},
                                  {"roofline_pct", roofline_pct},
                                  {"weight_bytes_per_token", bytes_per_token},
                                  {"peak_rss_mb", peak_rss / 1e6},
                                  {"seqs", o->seqs},
                                  {"batch_decode_tok_s", batch_tps},
                                  {"weights_plus_kv_mb", model_bytes / 1e6}};
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("model        %s\n", o->model.model.c_str());
    std::printf("threads      %d (%s kernels)\n", runner->pool().size(),
                std::string(kernels::isa_name(runner->isa())).c_str());
    std::printf("prefill      %8.1f tok/s  (%lld tokens, median of %d)\n", prefill_speed,
                static_cast<long long>(o->n_prompt), o->reps);
    std::printf("decode       %8.1f tok/s  (%lld tokens, median of %d)\n", decode,
                static_cast<long long>(o->n_gen), o->reps);
    if (o->seqs > 1) {
      std::printf("batch decode %8.1f tok/s  (%lld sequences together: %.2fx one sequence)\n",
                  batch_tps, static_cast<long long>(o->seqs), batch_tps / decode);
    }
    std::printf("bandwidth    %8.1f GB/s (read, measured now)\n", bandwidth / 1e9);
    std::printf("memory       %8.1f MB peak RSS (weights + KV cache: %.1f MB)\n", peak_rss / 1e6,
                model_bytes / 1e6);
    std::printf("roofline     %8.1f tok/s  (%.1f MB of weights per token); decode at %.0f%%\n",
                roofline_tps, bytes_per_token / 1e6, roofline_pct);
  });
}

}  // namespace herd::cli
