// Synthetic models: random weights in a real GGUF file that herd and other GGUF readers
// load, for tests and benchmarks on machines that cannot download a model. The file is
// written tensor by tensor (never the whole model in memory), quantized with the same
// row quantizers as any other herd code, deterministically from the seed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/arch.h"

namespace herd {

struct SynthOptions {
  std::string arch = "llama";
  std::string out_path;
  std::string vocab_path;  // empty: the built-in byte-level vocabulary and ChatML template
  // A chat template file written instead of the vocabulary's (tests of a model family's
  // template with a vocabulary that ships none, or another version's); empty: none.
  std::string chat_template_path;
  std::string type = "f16";
  uint64_t seed = 1;
  int64_t n_embd = 256;
  int64_t n_ff = 0;  // 0: 3 * n_embd rounded to 64 (dense) or n_embd / 2 per expert (MoE)
  int64_t n_layer = 4;
  int64_t n_head = 8;
  int64_t n_head_kv = 0;  // 0: n_head / 2 (at least 1)
  int64_t head_dim = 0;   // 0: n_embd / n_head
  int64_t n_ctx = 4096;
  int64_t n_expert = 8;
  int64_t n_expert_used = 2;
  int64_t n_ff_expert = 0;  // 0: n_ff
  int threads = 0;          // 0: all cores
  // progress(done_bytes, total_bytes); may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
};

// The hyper-parameters the options describe, with defaults filled in; throws herd::Error
// ("[synth] ...") naming the option when they are inconsistent.
HParams synth_hparams(const SynthOptions& options, int64_t n_vocab);

// Writes the model to options.out_path (atomically: a failure leaves no file).
void synthesize(const SynthOptions& options);

}  // namespace herd
