#include "cli/model_options.h"

#include "util/error.h"

namespace herd::cli {

void ModelOptions::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "GGUF model file")->required();
  cmd.add_option("-t,--threads", threads, "Threads (default: all cores)");
  cmd.add_option("-c,--ctx", n_ctx,
                 "Context length (default: the model's, at most " +
                     std::to_string(engine::kDefaultMaxCtx) + ")");
  cmd.add_option("--isa", isa, "Kernel instruction set: auto, scalar, avx2, avx512")
      ->capture_default_str();
}

std::unique_ptr<engine::LocalRunner> ModelOptions::open(int64_t n_seq) const {
  engine::LocalOptions options;
  options.threads = threads;
  options.n_ctx = n_ctx;
  options.n_seq = n_seq;
  if (isa == "auto" || isa == "avx512") {
    options.isa_limit = kernels::Isa::kAvx512;
  } else if (isa == "avx2") {
    options.isa_limit = kernels::Isa::kAvx2;
  } else if (isa == "scalar") {
    options.isa_limit = kernels::Isa::kScalar;
  } else {
    throw Error("cli", "unknown --isa '" + isa + "' (auto, scalar, avx2, avx512)");
  }
  return engine::LocalRunner::open(model, options);
}

}  // namespace herd::cli
