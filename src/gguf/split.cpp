#include "gguf/split.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "gguf/writer.h"
#include "util/error.h"
#include "util/split_name.h"

namespace herd::gguf {
namespace {

// The split.* keys of one file, as integers (any integer type is accepted).
struct SplitKeys {
  int64_t no = 0;
  int64_t count = 1;
  int64_t n_tensors = 0;
};

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error("gguf", "'" + origin + "': " + what);
}

std::optional<SplitKeys> split_keys(const File& f) {
  if (!f.has(kSplitCount)) return std::nullopt;
  SplitKeys keys;
  keys.count = f.get_i64(kSplitCount);
  keys.no = f.get_i64(kSplitNo);
  keys.n_tensors = f.get_i64(kSplitTensorsCount);
  if (keys.count < 1 || keys.count > 99999) {
    fail(f.origin(), "split.count " + std::to_string(keys.count) + " is not 1 to 99999 files");
  }
  if (keys.no < 0 || keys.no >= keys.count) {
    fail(f.origin(),
         "split.no " + std::to_string(keys.no) + " is not a file of " + std::to_string(keys.count));
  }
  if (keys.n_tensors < 0) {
    fail(f.origin(), "split.tensors.count " + std::to_string(keys.n_tensors) + " is negative");
  }
  return keys;
}

// Checks that `part`, opened as file `no` (from 0) of the set `first` heads, belongs to it.
void check_part(const File& part, int64_t no, const SplitKeys& set, const std::string& first) {
  const std::string which = "file " + std::to_string(no + 1) + " of the " +
                            std::to_string(set.count) + " of the split model '" + first + "'";
  const std::optional<SplitKeys> keys = split_keys(part);
  if (!keys) fail(part.origin(), "no split.count key: not a file of a split model (" + which + ")");
  if (keys->count != set.count) {
    fail(part.origin(), "split.count is " + std::to_string(keys->count) + ", but it should be " +
                            which + ": a file of another split model?");
  }
  if (keys->no != no) {
    fail(part.origin(), "split.no " + std::to_string(keys->no) + " says it is file " +
                            std::to_string(keys->no + 1) + ", but its name says it is " + which);
  }
  if (keys->n_tensors != set.n_tensors) {
    fail(part.origin(), "split.tensors.count is " + std::to_string(keys->n_tensors) +
                            " where the first file's is " + std::to_string(set.n_tensors) +
                            ": a file of another split model?");
  }
}

}  // namespace

File File::open_split(File opened) {
  const std::optional<SplitKeys> keys = split_keys(opened);
  if (!keys || keys->count == 1) return opened;
  const std::optional<SplitName> name = parse_split_name(opened.origin_);
  if (!name || name->of != keys->count || name->part != keys->no + 1) {
    char expected[64];
    std::snprintf(expected, sizeof expected, "NAME-%05lld-of-%05lld.gguf",
                  static_cast<long long>(keys->no + 1), static_cast<long long>(keys->count));
    fail(opened.origin_, "file " + std::to_string(keys->no + 1) + " of a model split in " +
                             std::to_string(keys->count) + " files (split.no, split.count), but " +
                             "not named " + expected + ": the other files are found by name");
  }
  const std::string first_path = name->part_path(1);
  auto open_part = [&](int64_t no) {
    const std::string path = name->part_path(static_cast<int>(no + 1));
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      fail(path, "missing: file " + std::to_string(no + 1) + " of the " +
                     std::to_string(keys->count) + " of the split model '" + first_path +
                     "' is not there");
    }
    return open_one(path);
  };

  // The first file holds the metadata and heads the set; the file opened is kept.
  std::optional<File> given;
  if (keys->no != 0) given.emplace(std::move(opened));
  File model = given ? open_part(0) : std::move(opened);
  check_part(model, 0, *keys, first_path);

  for (int64_t no = 1; no < keys->count; ++no) {
    File part = given && no == keys->no ? std::move(*given) : open_part(no);
    check_part(part, no, *keys, first_path);
    const uint32_t index = static_cast<uint32_t>(no);
    for (const TensorInfo& t : part.tensors_) {
      if (const TensorInfo* seen = model.find_tensor(t.name)) {
        fail(part.origin_, "tensor '" + std::string(t.name) + "' is in '" +
                               model.file_origin(seen->file) + "' too");
      }
      model.tensor_index_.emplace(t.name, model.tensors_.size());
      model.tensors_.push_back(t);
      model.tensors_.back().file = index;
    }
    model.shards_.push_back(std::move(part));
  }
  if (static_cast<int64_t>(model.tensors_.size()) != keys->n_tensors) {
    fail(first_path, "the " + std::to_string(keys->count) + " files of the split model hold " +
                         std::to_string(model.tensors_.size()) +
                         " tensors, but split.tensors.count says " +
                         std::to_string(keys->n_tensors));
  }

  // The split.* keys describe the files, not the model: a copy of the metadata (a pod
  // node's part of the weights, one file) must not claim to be part of a set.
  std::erase_if(model.kv_, [](const auto& kv) { return kv.first.starts_with("split."); });
  model.kv_index_.clear();
  for (size_t i = 0; i < model.kv_.size(); ++i) model.kv_index_.emplace(model.kv_[i].first, i);
  return model;
}

std::vector<std::string> write_split(const File& model, const std::string& prefix, int n_files) {
  const size_t n_tensors = model.tensors().size();
  if (n_files < 1 || static_cast<size_t>(n_files) > n_tensors || n_files > 65535) {
    throw Error("gguf", "cannot split '" + model.origin() + "' (" + std::to_string(n_tensors) +
                            " tensors) in " + std::to_string(n_files) + " files");
  }
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-of-%05d.gguf", n_files);
  const SplitName name{prefix, 1, n_files, suffix};
  std::vector<std::string> paths;
  size_t next = 0;
  for (int no = 0; no < n_files; ++no) {
    // Files no .. n_files-1 share what is left as evenly as whole tensors allow.
    const size_t end = next + (n_tensors - next) / static_cast<size_t>(n_files - no);
    Writer writer(model.alignment());
    if (no == 0) {
      for (const auto& [key, value] : model.metadata()) {
        if (!key.starts_with("split.")) writer.set_value(key, value);
      }
    }
    writer.set_u16(kSplitNo, static_cast<uint16_t>(no));
    writer.set_u16(kSplitCount, static_cast<uint16_t>(n_files));
    writer.set_i32(kSplitTensorsCount, static_cast<int32_t>(n_tensors));
    for (size_t i = next; i < end; ++i) {
      const TensorInfo& t = model.tensors()[i];
      writer.add_tensor(t.name, t.type, t.shape);
    }
    paths.push_back(name.part_path(no + 1));
    writer.write(paths.back(), [&](size_t index, std::span<uint8_t> out) {
      const std::span<const uint8_t> bytes = model.tensors()[next + index].bytes();
      std::copy(bytes.begin(), bytes.end(), out.begin());
    });
    next = end;
  }
  return paths;
}

}  // namespace herd::gguf
