// herd bench: prefill and decode speed of a model, the machine's memory read bandwidth
// measured in the same run, and decode as a share of the bandwidth roofline (the weight
// bytes one token must read, divided by the bandwidth, over the measured time per token);
// with --lookup, speculative decoding against plain decode (bench_speculative.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include <optional>

#include "cli/bench_speculative.h"
#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/speculative_options.h"
#include "engine/request_speed.h"
#include "engine/runner.h"
#include "engine/scheduler.h"
#include "plan/predict.h"
#include "tokenizer/tokenizer.h"
#include "util/bandwidth.h"
#include "util/error.h"
#include "util/memory.h"
#include "util/thread_pool.h"
#include "vulkan/device_info.h"

namespace herd::cli {
namespace {

struct BenchOptions {
  ModelOptions model;
  int64_t n_prompt = 64;
  int64_t n_gen = 32;
  int reps = 3;
  int64_t seqs = 1;
  int64_t depth = 0;  // > 0: decode after a context of this many tokens (llama-bench -gp)
  SpeculativeOptions speculative;  // also measure speculative decoding (K drafts per step)
  bool json = false;
};

// CPU seconds used by the whole process (all threads). On a shared machine the wall clock
// mostly measures the other processes; with one thread, CPU time per token does not.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs the requests together through the scheduler, on this thread, until every one has
// finished. at_decode (when set) runs once, as soon as every request has its first token
// (their prompts' passes done): a decode's clocks start there. Throws Error when one fails.
void run_together(engine::Scheduler& scheduler, std::vector<engine::GenerationParams> requests,
                  const std::function<void()>& at_decode) {
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (engine::GenerationParams& p : requests) streams.push_back(scheduler.submit(std::move(p)));
  std::vector<char> started(streams.size(), 0), finished(streams.size(), 0);
  bool decoding = false;
  engine::StreamUpdate u;
  for (size_t n_finished = 0; n_finished < streams.size();) {
    scheduler.step();
    for (size_t i = 0; i < streams.size(); ++i) {
      if (finished[i]) continue;
      streams[i]->wait(std::chrono::milliseconds(0), u);
      if (!u.tokens.empty()) started[i] = 1;
      if (!u.finish) continue;
      if (u.finish->reason == engine::FinishReason::kError) throw Error("bench", u.finish->error);
      finished[i] = 1;
      ++n_finished;
    }
    if (!decoding && std::all_of(started.begin(), started.end(), [](char c) { return c != 0; })) {
      decoding = true;
      if (at_decode) at_decode();
    }
  }
}

// Share of the stages' time spent idle while forward() ran: 1 - sum(compute) / (S * wall).
double bubble(const std::vector<engine::StageStats>& stages, double wall) {
  if (stages.empty() || wall <= 0) return 0;
  double compute = 0;
  for (const engine::StageStats& s : stages) compute += s.compute_seconds;
  return std::max(0.0, 1.0 - compute / (static_cast<double>(stages.size()) * wall));
}

nlohmann::json stage_json(const std::vector<engine::StageStats>& prefill,
                          const std::vector<engine::StageStats>& decode, int64_t n_prompt,
                          int64_t n_gen) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < decode.size(); ++i) {
    const engine::StageStats& p = prefill[i];
    const engine::StageStats& d = decode[i];
    const double n_p = static_cast<double>(n_prompt), n_d = static_cast<double>(n_gen);
    out.push_back({{"node", d.node},
                   {"layers", {d.layer_begin, d.layer_end}},
                   {"prefill_compute_ms_per_token", 1e3 * p.compute_seconds / n_p},
                   {"prefill_wire_ms_per_token", 1e3 * (p.busy_seconds - p.compute_seconds) / n_p},
                   {"decode_compute_ms_per_token", 1e3 * d.compute_seconds / n_d},
                   {"decode_wire_ms_per_token", 1e3 * (d.busy_seconds - d.compute_seconds) / n_d},
                   {"decode_bytes_sent_per_token", static_cast<double>(d.bytes_sent) / n_d},
                   {"decode_bytes_received_per_token", static_cast<double>(d.bytes_received) / n_d},
                   {"decode_link_bytes_received_per_token",
                    static_cast<double>(d.link_bytes_received) / n_d}});
  }
  return out;
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
  cmd->add_option("-d,--depth", o->depth,
                  "Decode after a context of this many tokens, filled untimed (llama-bench "
                  "-gp DEPTH,N); 0: right after the -p prompt")
      ->capture_default_str();
  o->speculative.add_to(*cmd, "Also measure speculative decoding",
                        ": the cost of verifying K+1 tokens, acceptance, decode against plain");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    if (o->n_prompt < 1 || o->n_gen < 1 || o->reps < 1)
      throw Error("cli", "-p, -n and -r must be positive");
    if (o->seqs < 1) throw Error("cli", "--seqs must be positive");
    if (o->depth < 0) throw Error("cli", "--depth must not be negative");
    // Decoding starts after the prompt, or after the --depth context.
    const int64_t decode_start = o->depth > 0 ? o->depth : o->n_prompt;
    const int64_t needed =
        std::max(o->n_prompt, decode_start) + o->n_gen +
        std::max({o->speculative.lookup, o->speculative.draft_max, o->speculative.mtp});
    // Like llama-bench, the context is what the run needs unless --ctx says otherwise.
    ModelOptions model = o->model;
    if (model.n_ctx == 0) model.n_ctx = needed;
    o->speculative.apply(model);
    auto runner = model.open(o->seqs);
    const HParams& hp = runner->hparams();
    if (needed > runner->n_ctx()) {
      throw Error("cli", "the run needs " + std::to_string(needed) +
                             " positions, beyond the context of " +
                             std::to_string(runner->n_ctx()));
    }
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(runner->file());
    // Deterministic pseudo-random prompt ids (the content does not change the cost).
    std::vector<int32_t> ids(static_cast<size_t>(o->n_prompt));
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>((i * 7919 + 13) % hp.n_vocab);
    // What the runner says of itself; a pod (across nodes) adds per-stage figures of the last
    // repetition, prefill and decode apart.
    const engine::RunnerStatus status = runner->status();
    const bool pod = status.pod;
    // Every figure is of requests through the scheduler, the loop run and serve use: the
    // prompt in one pass (the --depth context in passes of at least 256), greedy decoding
    // past end tokens.
    engine::SchedulerOptions so;
    so.batch_tokens = std::max<int64_t>(o->n_prompt, 256);
    engine::Scheduler scheduler(*runner, tok, so, nullptr);
    std::vector<int32_t> depth_ids(static_cast<size_t>(o->depth));
    for (size_t i = 0; i < depth_ids.size(); ++i)
      depth_ids[i] = static_cast<int32_t>((i * 7919 + 13) % hp.n_vocab);
    const std::vector<int32_t>& decode_prompt = o->depth > 0 ? depth_ids : ids;
    // Decode after the prompt (or the --depth context), whose cache the slot holds (filled
    // untimed first): the clocks start at the first token, then n_gen passes of one token.
    struct Decode {
      double seconds = 0, cpu_seconds = 0;
    };
    auto decode_after_prompt = [&](bool last) {
      run_together(scheduler, {engine::timing_request(decode_prompt, 0, false)}, nullptr);
      Decode d;
      double t0 = 0, c0 = 0;
      run_together(scheduler, {engine::timing_request(decode_prompt, o->n_gen, false)}, [&] {
        if (pod && last) runner->reset_stats();
        t0 = now_seconds();
        c0 = cpu_seconds();
      });
      d.seconds = now_seconds() - t0;
      d.cpu_seconds = cpu_seconds() - c0;
      return d;
    };
    // Warm-up: page in the weights, grow the scratch buffers.
    run_together(scheduler, {engine::timing_request(ids, 0, true)}, nullptr);
    decode_after_prompt(false);
    std::vector<engine::StageStats> prefill_stages, decode_stages;
    double prefill_wall = 0, decode_wall = 0;
    std::vector<double> prefill_tps, decode_tps, decode_cpu;
    for (int r = 0; r < o->reps; ++r) {
      const bool last = r + 1 == o->reps;
      if (pod && last) runner->reset_stats();
      const double t0 = now_seconds();
      run_together(scheduler, {engine::timing_request(ids, 0, true)}, nullptr);
      const double prefill_seconds = now_seconds() - t0;
      if (pod && last) {
        prefill_stages = runner->stage_stats();
        prefill_wall = runner->forward_seconds();
      }
      const Decode d = decode_after_prompt(last);
      if (pod && last) {
        decode_stages = runner->stage_stats();
        decode_wall = runner->forward_seconds();
      }
      prefill_tps.push_back(static_cast<double>(o->n_prompt) / prefill_seconds);
      decode_tps.push_back(static_cast<double>(o->n_gen) / d.seconds);
      decode_cpu.push_back(1e3 * d.cpu_seconds / static_cast<double>(o->n_gen));
    }
    // Batched decode: `seqs` requests of the prompt together, each in its own slot, all
    // prefilled in one pass (a scheduler of their own) and then decoded in the same passes.
    double batch_tps = 0, batch_cpu_ms = 0;  // tokens per second; CPU ms per token
    if (o->seqs > 1) {
      engine::SchedulerOptions together = so;
      together.batch_tokens = o->n_prompt * o->seqs;
      std::vector<double> tps, cpu;
      for (int r = 0; r < o->reps; ++r) {
        engine::Scheduler batched(*runner, tok, together, nullptr);
        std::vector<engine::GenerationParams> requests(static_cast<size_t>(o->seqs),
                                                       engine::timing_request(ids, o->n_gen, true));
        double t0 = 0, c0 = 0;
        run_together(batched, std::move(requests), [&] {
          t0 = now_seconds();
          c0 = cpu_seconds();
        });
        tps.push_back(static_cast<double>(o->n_gen * o->seqs) / (now_seconds() - t0));
        cpu.push_back(1e3 * (cpu_seconds() - c0) / static_cast<double>(o->n_gen * o->seqs));
      }
      batch_tps = median(tps);
      batch_cpu_ms = median(cpu);
    }
    // Peak memory before the bandwidth probe allocates its buffer.
    const double peak_rss = static_cast<double>(peak_rss_bytes());
    const double model_bytes = static_cast<double>(runner->info().weight_bytes) +
                               static_cast<double>(status.kv_cache_bytes);
    ThreadPool probe_pool(o->model.threads);
    // The roofline of the memory the weights are read from: the device's when the model runs
    // on one (its measured copy bandwidth), else the CPU's.
    const double bandwidth = status.device_index >= 0
                                 ? vulkan::measure_copy_bandwidth_gbs(status.device_index) * 1e9
                                 : measure_read_bandwidth(probe_pool);
    // Bytes one decoded token reads: every weight the forward pass uses once, but of each
    // MoE layer's experts only the ones a token runs through, and one row of the embedding.
    const auto& embd = runner->file().tensor("token_embd.weight");
    double bytes_per_token = 0;
    for (const TensorSpec& spec : runner->info().tensors) {
      const double bytes = static_cast<double>(runner->file().tensor(spec.name).n_bytes);
      if (spec.role == TensorRole::kEmbedding) {
        bytes_per_token += bytes / static_cast<double>(hp.n_vocab);
      } else if (spec.per_expert) {
        bytes_per_token +=
            bytes * static_cast<double>(hp.n_expert_used) / static_cast<double>(hp.n_expert);
      } else {
        bytes_per_token += bytes;
      }
    }
    if (hp.tied_output) bytes_per_token += static_cast<double>(embd.n_bytes);
    const double decode = median(decode_tps), prefill_speed = median(prefill_tps);
    std::optional<SpeculativeBench> speculative;
    if (o->speculative.mtp > 0) {
      if (runner->mtp_layers() == 0) {
        throw Error("cli",
                    "--mtp: the model has no MTP head here (no NextN layers, or not on "
                    "this machine's CPU: --device cpu)");
      }
      speculative =
          bench_speculative(*runner, nullptr, ids, o->n_gen, o->speculative.mtp, o->reps, true);
    } else if (auto draft = o->speculative.open_draft(model, *runner, 1)) {
      speculative =
          bench_speculative(*runner, draft.get(), ids, o->n_gen, o->speculative.draft_max, o->reps);
    } else if (o->speculative.lookup > 0) {
      speculative =
          bench_speculative(*runner, nullptr, ids, o->n_gen, o->speculative.lookup, o->reps);
    }
    const double roofline_tps = bandwidth / bytes_per_token;
    const double roofline_pct = 100.0 * decode / roofline_tps;
    if (o->json) {
      nlohmann::ordered_json j = {{"model", o->model.model},
                                  {"threads", probe_pool.size()},
                                  {"runner", runner->describe()},
                                  {"device", status.device},
                                  {"n_prompt", o->n_prompt},
                                  {"n_gen", o->n_gen},
                                  {"depth", o->depth},
                                  {"prefill_tok_s", prefill_speed},
                                  {"decode_tok_s", decode},
                                  {"bandwidth_gbs", bandwidth / 1e9},
                                  {"roofline_pct", roofline_pct},
                                  {"weight_bytes_per_token", bytes_per_token},
                                  {"peak_rss_mb", peak_rss / 1e6},
                                  {"seqs", o->seqs},
                                  {"batch_decode_tok_s", batch_tps},
                                  {"decode_cpu_ms_per_tok", median(decode_cpu)},
                                  {"batch_decode_cpu_ms_per_tok", batch_cpu_ms},
                                  {"weights_plus_kv_mb", model_bytes / 1e6}};
      if (speculative) {
        j["acceptance"] = speculative->acceptance;
        j["speculative"] = speculative->json();
      }
      if (pod) {
        j["stages"] = stage_json(prefill_stages, decode_stages, o->n_prompt, o->n_gen);
        j["pipeline_bubble_prefill"] = bubble(prefill_stages, prefill_wall);
        j["pipeline_bubble_decode"] = bubble(decode_stages, decode_wall);
        // What the coordinator sends and receives per decoded token, all stages together:
        // with stage links it does not grow with the number of stages.
        uint64_t coordinator_bytes = 0;
        for (const engine::StageStats& s : decode_stages) {
          coordinator_bytes += s.bytes_sent + s.bytes_received;
        }
        j["coordinator_bytes_per_token"] =
            static_cast<double>(coordinator_bytes) / static_cast<double>(o->n_gen);
        const Prediction predicted = runner->prediction(o->n_prompt);
        j["predicted_decode_tok_s"] = predicted.decode_tokens_per_s;
        j["predicted_prefill_tok_s"] = predicted.prefill_tokens_per_s;
      }
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("model        %s\n", o->model.model.c_str());
    std::printf("runner       %s\n", runner->describe().c_str());
    std::printf("prefill      %8.1f tok/s  (%lld tokens, median of %d)\n", prefill_speed,
                static_cast<long long>(o->n_prompt), o->reps);
    std::printf("decode       %8.1f tok/s  (%lld tokens after %lld, median of %d)\n", decode,
                static_cast<long long>(o->n_gen), static_cast<long long>(decode_start), o->reps);
    if (o->seqs > 1) {
      std::printf("batch decode %8.1f tok/s  (%lld sequences together: %.2fx one sequence)\n",
                  batch_tps, static_cast<long long>(o->seqs), batch_tps / decode);
      std::printf("cpu time     %8.2f ms/token decode, %.2f ms/token batch decode (%.2fx)\n",
                  median(decode_cpu), batch_cpu_ms, median(decode_cpu) / batch_cpu_ms);
    }
    std::printf("bandwidth    %8.1f GB/s (read, measured now)\n", bandwidth / 1e9);
    std::printf("memory       %8.1f MB peak RSS (weights + KV cache: %.1f MB)\n", peak_rss / 1e6,
                model_bytes / 1e6);
    std::printf("roofline     %8.1f tok/s  (%.1f MB of weights read per token); decode at %.0f%%\n",
                roofline_tps, bytes_per_token / 1e6, roofline_pct);
    if (speculative) speculative->print();
    if (pod) {
      const Prediction predicted = runner->prediction(o->n_prompt);
      std::printf("predicted    %s: measured decode %.2fx, prefill %.2fx of it\n",
                  prediction_text(predicted).c_str(), decode / predicted.decode_tokens_per_s,
                  predicted.prefill_tokens_per_s > 0
                      ? prefill_speed / predicted.prefill_tokens_per_s
                      : 0.0);
      std::printf("stages       (last repetition; per token)\n");
      for (size_t i = 0; i < decode_stages.size(); ++i) {
        const engine::StageStats& p = prefill_stages[i];
        const engine::StageStats& d = decode_stages[i];
        const double n_p = static_cast<double>(o->n_prompt), n_d = static_cast<double>(o->n_gen);
        std::printf(
            "  %-20s layers [%lld, %lld)  prefill %.2f ms compute %.2f ms wire  decode %.2f ms "
            "compute %.2f ms wire  sent %.0f B/token%s\n",
            d.node.c_str(), static_cast<long long>(d.layer_begin),
            static_cast<long long>(d.layer_end), 1e3 * p.compute_seconds / n_p,
            1e3 * (p.busy_seconds - p.compute_seconds) / n_p, 1e3 * d.compute_seconds / n_d,
            1e3 * (d.busy_seconds - d.compute_seconds) / n_d,
            static_cast<double>(d.bytes_sent) / n_d,
            d.link_bytes_received > 0 ? " (input straight from the previous stage)" : "");
      }
      std::printf("bubble       prefill %.0f%%, decode %.0f%% (share of stage-time idle)\n",
                  100 * bubble(prefill_stages, prefill_wall),
                  100 * bubble(decode_stages, decode_wall));
    }
  });
}

}  // namespace herd::cli
