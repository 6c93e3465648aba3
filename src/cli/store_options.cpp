#include "cli/store_options.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "util/error.h"

namespace herd::cli {

namespace {

using Clock = std::chrono::steady_clock;

// One file's download on `out`: a redrawn bar on a terminal, else a line at every 10% or
// every 10 s, whichever comes first. Notes (retries) interrupt it on lines of their own.
class DownloadProgress {
 public:
  explicit DownloadProgress(FILE* out) : out_(out), tty_(isatty(fileno(out))) {}

  void start(const std::string& label) {
    end_line();
    label_ = label;
    start_ = last_ = Clock::now();
    last_decile_ = -1;
    first_bytes_ = -1;
  }
  void update(uint64_t done, uint64_t total) {
    const auto now = Clock::now();
    if (first_bytes_ < 0) first_bytes_ = static_cast<int64_t>(done);
    const double fraction = total ? static_cast<double>(done) / static_cast<double>(total) : 1;
    const int decile = static_cast<int>(fraction * 10);
    const bool finished = done >= total;
    if (tty_) {
      if (!finished && now - last_ < std::chrono::milliseconds(100)) return;
    } else if (!finished && decile == last_decile_ && now - last_ < std::chrono::seconds(10)) {
      return;
    }
    if (finished && done_printed_) return;
    last_ = now;
    last_decile_ = decile;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate =
        seconds > 0 ? static_cast<double>(done - static_cast<uint64_t>(first_bytes_)) / seconds : 0;
    const std::string amounts = store::format_size(done) + " of " + store::format_size(total) +
                                ", " + store::format_size(static_cast<uint64_t>(rate)) + "/s";
    if (tty_) {
      constexpr int kWidth = 30;
      std::string bar(static_cast<size_t>(fraction * kWidth), '#');
      bar.resize(kWidth, '.');
      std::fprintf(out_, "\r\033[K%s [%s] %5.1f%% %s", label_.c_str(), bar.c_str(), fraction * 100,
                   amounts.c_str());
      on_line_ = true;
    } else {
      std::fprintf(out_, "%s: %3.0f%% (%s)\n", label_.c_str(), fraction * 100, amounts.c_str());
    }
    if (finished) {
      done_printed_ = true;
      end_line();
    }
    std::fflush(out_);
  }
  void note(const std::string& text) {
    end_line();
    std::fprintf(out_, "herd: %s\n", text.c_str());
    std::fflush(out_);
  }
  void reset() { done_printed_ = false; }

 private:
  void end_line() {
    if (on_line_) std::fputc('\n', out_);
    on_line_ = false;
  }
  FILE* out_;
  bool tty_;
  std::string label_;
  Clock::time_point start_, last_;
  int last_decile_ = -1;
  int64_t first_bytes_ = -1;
  bool on_line_ = false;
  bool done_printed_ = false;
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

store::Store store_from(const std::string& models_dir) {
  const store::fs::path root =
      models_dir.empty()
          ? store::default_root(env("HERD_MODELS_DIR"), env("XDG_DATA_HOME"), env("HOME"))
          : store::fs::path(models_dir);
  const char* extra = env("HERD_MODEL_PATH");
  return store::Store(root, store::parse_path_list(extra ? extra : ""));
}

}  // namespace

void StoreFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--models-dir", models_dir,
                 "The model store (default: $HERD_MODELS_DIR, else $XDG_DATA_HOME/herd/models, "
                 "else ~/.local/share/herd/models)");
}

store::Store StoreFlags::open() const {
  return store_from(models_dir);
}

store::PullOptions pull_options(FILE* out) {
  store::PullOptions o;
  if (const char* endpoint = env("HF_ENDPOINT")) o.endpoint = endpoint;
  if (const char* token = env("HF_TOKEN")) o.http.token = token;
  auto progress = std::make_shared<DownloadProgress>(out);
  o.http.on_note = [progress](const std::string& text) { progress->note(text); };
  o.http.on_progress = [progress](uint64_t done, uint64_t total) { progress->update(done, total); };
  o.on_file = [progress](const store::RepoFile& f, const store::fs::path& where, bool download) {
    if (!download) {
      progress->note(f.path + ": already at " + where.string());
      return;
    }
    progress->reset();
    progress->start("herd: pull " + store::fs::path(f.path).filename().string());
  };
  return o;
}

ResolvedModel resolve_model(const std::string& arg) {
  std::error_code ec;
  if (arg.empty() || store::fs::exists(arg, ec)) return {arg, std::nullopt};
  const std::optional<store::ModelName> name = store::parse_model_name(arg);
  if (!name) return {arg, std::nullopt};
  const store::Store store = store_from("");
  std::optional<store::LocalModel> local = store.find_local(*name);
  if (!local) {
    std::fprintf(stderr, "herd: %s is not in the store (%s): pulling it\n", name->str().c_str(),
                 store.root().c_str());
    local = store::pull(store, *name, pull_options(stderr));
  }
  const store::RepoFile& first = local->model.files.front();
  // a split model's first file opens them all
  return {local->paths.front().string(), net::StoreName{name->repo_id(), first.path, first.size}};
}

std::string resolve_model_arg(const std::string& arg) {
  return resolve_model(arg).path;
}

}  // namespace herd::cli
