#include "model/tensor_slice.h"

#include <string>

#include "util/error.h"

namespace herd {
namespace {

constexpr const char* kHeadKey = "herd.slice.head";
constexpr const char* kKvHeadKey = "herd.slice.kv_head";
constexpr const char* kFfKey = "herd.slice.ff";
constexpr const char* kVocabKey = "herd.slice.vocab";
constexpr const char* kExpertsKey = "herd.slice.experts";
constexpr const char* kNVocabKey = "herd.slice.n_vocab";

std::string range_text(int64_t begin, int64_t end) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "[" + string.
  std::string text("[");
  text.append(std::to_string(begin)).append(", ").append(std::to_string(end)).append(")");
  return text;
}

[[noreturn]] void bad_cut(std::string_view name, const std::string& problem) {
  std::string text("tensor '");
  text.append(name).append("': ").append(problem);
  throw Error("model", text);
}

// Merges contiguous byte ranges before passing them on, so that a cut that keeps whole
// rows or whole experts is one range, not one per row.
class RunMerger {
 public:
  explicit RunMerger(const std::function<void(uint64_t, uint64_t)>& run) : run_(run) {}
  void add(uint64_t offset, uint64_t size) {
    if (size == 0) return;
    if (size_ > 0 && offset_ + size_ == offset) {
      size_ += size;
      return;
    }
    flush();
    offset_ = offset;
    size_ = size;
  }
  void flush() {
    if (size_ > 0) run_(offset_, size_);
    size_ = 0;
  }

 private:
  const std::function<void(uint64_t, uint64_t)>& run_;
  uint64_t offset_ = 0, size_ = 0;
};

void write_range(gguf::Writer& writer, const char* key, int64_t begin, int64_t end) {
  const int32_t range[] = {static_cast<int32_t>(begin), static_cast<int32_t>(end)};
  writer.set_i32_array(key, range);
}

void read_range(const gguf::File& file, const char* key, int64_t& begin, int64_t& end) {
  const std::vector<int32_t> range = file.get_i32_array(key);
  if (range.size() != 2 || range[0] < 0 || range[1] < -1) {
    throw Error("model", "'" + file.origin() + "': '" + key + "' is not a range [begin, end]");
  }
  begin = range[0];
  end = range[1];
}

}  // namespace

WeightCut weight_cut(const TensorSpec& spec, const TensorSlice& slice, const HParams& hp) {
  WeightCut cut;
  if (spec.per_expert) cut.experts = slice.experts;
  int64_t begin = 0, end = -1, unit = 1;
  switch (spec.split) {
    case SplitBy::kNone:
      return cut;
    case SplitBy::kHeads:
      begin = slice.head_begin, end = slice.head_end;
      break;
    case SplitBy::kKvHeads:
      begin = slice.kv_head_begin, end = slice.kv_head_end;
      break;
    case SplitBy::kFf:
      begin = slice.ff_begin, end = slice.ff_end;
      break;
    case SplitBy::kVocab:
      begin = slice.vocab_begin, end = slice.vocab_end;
      break;
  }
  unit = spec.split_unit;
  cut.dim = spec.split_dim;
  const int64_t whole = spec.shape.at(static_cast<size_t>(cut.dim));
  if (unit == 0) {
    // A tensor that cannot follow the slice's range (a dense layer of an MoE model whose
    // width is not a multiple of an expert's): only a slice holding all of it is valid.
    if (begin != 0 || end >= 0) {
      bad_cut(spec.name, "it cannot be cut by the slice's range " + range_text(begin, end) +
                             " (its width is not a multiple of the range's unit)");
    }
    cut.begin = 0;
    cut.end = whole;
    return cut;
  }
  cut.begin = begin * unit;
  cut.end = end < 0 ? whole : end * unit;
  return cut;
}

std::vector<int64_t> cut_shape(std::string_view name, TensorType type,
                               const std::vector<int64_t>& shape, const WeightCut& cut) {
  std::vector<int64_t> out = shape;
  if (cut.dim >= 0) {
    const char* what = cut.dim == 0 ? "columns " : "rows ";
    if (static_cast<size_t>(cut.dim) >= shape.size() || cut.begin < 0 || cut.begin > cut.end ||
        cut.end > shape[static_cast<size_t>(cut.dim)]) {
      bad_cut(name, what + range_text(cut.begin, cut.end) + " are outside its shape");
    }
    const TypeTraits& tt = type_traits(type);
    if (cut.dim == 0 && (cut.begin % tt.block_size != 0 || cut.end % tt.block_size != 0)) {
      bad_cut(name, what + range_text(cut.begin, cut.end) + " cut its " + std::string(tt.name) +
                        " blocks of " + std::to_string(tt.block_size) +
                        " (a tensor slice must hold whole blocks)");
    }
    out[static_cast<size_t>(cut.dim)] = cut.end - cut.begin;
  }
  if (cut.experts) {
    // Experts along the last dimension: [cols, rows, experts] or a bias [cols, experts].
    if (shape.size() != 3 && shape.size() != 2) {
      bad_cut(name, "experts of a tensor that is not [cols, rows, experts] or [cols, experts]");
    }
    const size_t expert_dim = shape.size() - 1;
    for (size_t i = 0; i < cut.experts->size(); ++i) {
      const int64_t e = (*cut.experts)[i];
      if (e < 0 || e >= shape[expert_dim] || (i > 0 && e <= (*cut.experts)[i - 1])) {
        bad_cut(name, "experts must be ascending distinct ids below " +
                          std::to_string(shape[expert_dim]) + " (has " + std::to_string(e) + ")");
      }
    }
    out[expert_dim] = static_cast<int64_t>(cut.experts->size());
  }
  return out;
}

void for_each_cut_run(TensorType type, const std::vector<int64_t>& shape, const WeightCut& cut,
                      const std::function<void(uint64_t offset, uint64_t size)>& run) {
  const uint64_t row = row_bytes(type, shape[0]);
  // Rows of one expert's matrix: a per-expert bias [cols, experts] has one per expert.
  const int64_t rows = shape.size() > 1 && !(cut.experts && shape.size() == 2) ? shape[1] : 1;
  const uint64_t matrix = row * static_cast<uint64_t>(rows);  // one expert's, or the tensor's
  int64_t n_matrices = 1;
  for (size_t d = 2; d < shape.size(); ++d) n_matrices *= shape[d];
  if (cut.experts && shape.size() == 2) n_matrices = shape[1];
  RunMerger merged(run);
  auto cut_matrix = [&](int64_t m) {
    const uint64_t base = matrix * static_cast<uint64_t>(m);
    if (cut.dim == 1) {
      merged.add(base + row * static_cast<uint64_t>(cut.begin),
                 row * static_cast<uint64_t>(cut.end - cut.begin));
    } else if (cut.dim == 0) {
      const uint64_t offset = row_bytes(type, cut.begin),
                     size = row_bytes(type, cut.end - cut.begin);
      for (int64_t r = 0; r < rows; ++r)
        merged.add(base + row * static_cast<uint64_t>(r) + offset, size);
    } else {
      merged.add(base, matrix);
    }
  };
  if (cut.experts) {
    for (int64_t e : *cut.experts) cut_matrix(e);
  } else {
    for (int64_t m = 0; m < n_matrices; ++m) cut_matrix(m);
  }
  merged.flush();
}

void write_slice_metadata(gguf::Writer& writer, const TensorSlice& slice, int64_t n_vocab) {
  write_range(writer, kHeadKey, slice.head_begin, slice.head_end);
  write_range(writer, kKvHeadKey, slice.kv_head_begin, slice.kv_head_end);
  write_range(writer, kFfKey, slice.ff_begin, slice.ff_end);
  write_range(writer, kVocabKey, slice.vocab_begin, slice.vocab_end);
  if (slice.experts) {
    const std::vector<int32_t> experts(slice.experts->begin(), slice.experts->end());
    writer.set_i32_array(kExpertsKey, experts);
  }
  writer.set_u64(kNVocabKey, static_cast<uint64_t>(n_vocab));
}

std::optional<FileSlice> read_slice_metadata(const gguf::File& file) {
  if (!file.has(kHeadKey)) return std::nullopt;
  FileSlice held;
  TensorSlice& s = held.slice;
  read_range(file, kHeadKey, s.head_begin, s.head_end);
  read_range(file, kKvHeadKey, s.kv_head_begin, s.kv_head_end);
  read_range(file, kFfKey, s.ff_begin, s.ff_end);
  read_range(file, kVocabKey, s.vocab_begin, s.vocab_end);
  if (file.has(kExpertsKey)) {
    const std::vector<int32_t> experts = file.get_i32_array(kExpertsKey);
    s.experts.emplace(experts.begin(), experts.end());
  }
  const uint64_t n_vocab = file.get_u64(kNVocabKey);
  if (n_vocab == 0 || n_vocab > (uint64_t{1} << 31)) {
    throw Error("model", "'" + file.origin() + "': '" + kNVocabKey + "' is out of range");
  }
  held.n_vocab = static_cast<int64_t>(n_vocab);
  return held;
}

}  // namespace herd
