// Tests' tokenizer: the built-in vocabulary of a tiny synthetic model, made once per test
// process.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gguf/reader.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"

namespace herd::server {

inline const tokenizer::Tokenizer& tiny_vocabulary() {
  static const tokenizer::Tokenizer tok = [] {
    SynthOptions o;
    o.arch = "qwen3";
    o.type = "f32";
    o.out_path = ::testing::TempDir() + "/tiny_vocabulary_" + std::to_string(getpid()) + ".gguf";
    o.n_embd = 64;
    o.n_layer = 1;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.n_ff = 128;
    o.threads = 1;
    synthesize(o);
    tokenizer::Tokenizer t = tokenizer::Tokenizer::from_gguf(gguf::File::open(o.out_path));
    std::filesystem::remove(o.out_path);
    return t;
  }();
  return tok;
}

}  // namespace herd::server
