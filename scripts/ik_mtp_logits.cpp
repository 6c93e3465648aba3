// The reference's MTP head logits for a model with a NextN block, for mtp_head_test: the head
// alone, fed hidden states that both sides generate (mtp_reference_hidden below) instead of
// a main model's, so that only the head is compared.
//
// Built against ik_llama.cpp (commit 8337e4cd3, a CPU Release build with libllama.so):
//   g++ -O2 -std=c++17 -I$IK/include -I$IK/ggml/include scripts/ik_mtp_logits.cpp \
//       -L$IK/build/src -L$IK/build/ggml/src -lllama -lggml -o ik_mtp_logits
//   LD_LIBRARY_PATH=$IK/build/src:$IK/build/ggml/src ./ik_mtp_logits MODEL OUT T0,T1,...
// (src/engine/testdata/mtp_*.ik.logits: T = 1,5,17,42,99,3,250,7,64, MODEL the test's synthesized
// file or ../shared/models/frontier2/*.gguf.) Runs tokens T0..Tn at positions 0..n (hidden row 0:
// zeros, as the reference's prompt warmup conditions a sequence's first token; row i > 0:
// mtp_reference_hidden(i - 1)) in one MTP_OP_UPDATE_ACCEPTED batch of sequence 0 with f16 K and V
// caches and flash attention (the settings of ../shared/models) and writes the n + 1 rows of logits
// (float32, [n + 1][n_vocab]) to OUT.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

bool llama_set_draft_input_hidden_state_copy(llama_context* ctx, const float* hidden_state,
                                             size_t n_floats);

// Hidden row i, element j: the same formula in mtp_head_test.cpp.
static float mtp_reference_hidden(int i, int j) {
  return 2.0f * std::sin(0.37f * static_cast<float>(i + 1) + 0.11f * static_cast<float>(j));
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL OUT T0,T1,...\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> tokens;
  for (char* p = argv[3]; *p != 0;) {
    tokens.push_back(static_cast<llama_token>(std::strtol(p, &p, 10)));
    if (*p == ',') ++p;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.mtp = true;
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 64;
  cp.n_batch = cp.n_ubatch = 64;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F16;  // f32 is refused with flash attention on the CPU
  cp.flash_attn = true;
  cp.mtp = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int n = static_cast<int>(tokens.size());
  const int n_embd = llama_model_n_embd(model), n_vocab = llama_n_vocab(model);
  std::vector<float> hidden(static_cast<size_t>(n) * n_embd, 0.0f);
  for (int i = 1; i < n; ++i) {
    for (int j = 0; j < n_embd; ++j) {
      hidden[static_cast<size_t>(i) * n_embd + j] = mtp_reference_hidden(i - 1, j);
    }
  }
  if (!llama_set_draft_input_hidden_state_copy(ctx, hidden.data(), hidden.size())) return 1;
  llama_set_mtp_op_type(ctx,
                        MTP_OP_UPDATE_ACCEPTED);  // WARMUP runs the same graph but keeps no logits
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = tokens[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) return 1;
  FILE* out = std::fopen(argv[2], "wb");
  for (int i = 0; i < n; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    if (row == nullptr) return 1;
    std::fwrite(row, sizeof(float), static_cast<size_t>(n_vocab), out);
  }
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_free_model(model);
  return 0;
}
