// Progress of long work (synthesizing, loading, shipping weights). On a terminal it
// redraws one bar line; otherwise it prints a plain line at every 10%, so logs stay short.
// The caller chooses the stream (the CLI passes stderr); library code only calls update().
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace herd {

class Progress {
 public:
  // total: units of work (bytes, tensors); label: what is being done.
  Progress(FILE* out, std::string label, uint64_t total);
  void update(uint64_t done);
  void finish();  // prints the final 100% line with the elapsed time

 private:
  FILE* out_;
  std::string label_;
  uint64_t total_;
  bool tty_;
  int last_decile_ = -1;
  int last_permille_ = -1;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace herd
