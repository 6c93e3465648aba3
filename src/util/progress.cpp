#include "util/progress.h"

#include <unistd.h>

#include <algorithm>

namespace herd {

Progress::Progress(FILE* out, std::string label, uint64_t total)
    : out_(out),
      label_(std::move(label)),
      total_(std::max<uint64_t>(total, 1)),
      tty_(out != nullptr && isatty(fileno(out))),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(uint64_t done) {
  if (out_ == nullptr || finished_) return;
  done = std::min(done, total_);
  double fraction = static_cast<double>(done) / static_cast<double>(total_);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) {
    int permille = static_cast<int>(fraction * 1000);
    if (permille == last_permille_) return;
    last_permille_ = permille;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r%s [%s] %5.1f%% %6.1fs", label_.c_str(), bar.c_str(), fraction * 100,
                 seconds);
    std::fflush(out_);
  } else {
    int decile = static_cast<int>(fraction * 10);
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(out_, "%s: %3d%% (%.1fs)\n", label_.c_str(), decile * 10, seconds);
  }
}

void Progress::finish() {
  if (out_ == nullptr || finished_) return;
  update(total_);
  finished_ = true;
  if (tty_) std::fputc('\n', out_);
}

}  // namespace herd
