// matmul: picks a kernel-table entry per weight matrix, quantizes the activations once per
// call, and splits the rows (and, for small matrices, the tokens) across the pool.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>

#include "kernels/kernel_table.h"
#include "util/error.h"
#include "util/large_pages.h"

namespace herd::kernels {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kNeon:
      return "neon";
  }
  return "unknown";
}

const MatmulKernel* find_matmul_kernel(TensorType type, Isa isa) {
  bool reached = false;  // compiled_isas() is best first: skip those above `isa`
  for (Isa candidate : compiled_isas()) {
    if (candidate == isa) reached = true;
    if (!reached) continue;
    for (const MatmulKernel& k : isa_kernels(candidate)) {
      if (k.type == type) return &k;
    }
  }
  if (!reached && isa != Isa::kScalar) return find_matmul_kernel(type, Isa::kScalar);
  return nullptr;
}

// ---- PackedMatrix ------------------------------------------------------------------------

namespace {

constexpr size_t kAlignment = 64;  // a cache line and an AVX-512 vector

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Repacked weights are streamed once per token: huge pages where the OS has them
// (util/large_pages.h).
uint8_t* allocate_packed(size_t bytes) {
  return static_cast<uint8_t*>(allocate_large(bytes, kAlignment));
}

}  // namespace

struct PackedMatrix::Impl {
  const MatmulKernel* kernel = nullptr;
  TensorType type = TensorType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;  // the bytes the kernel reads: `owned` or the caller's
  std::unique_ptr<uint8_t, AlignedFree> owned;
  size_t owned_bytes = 0;
};

PackedMatrix::PackedMatrix() : impl_(std::make_unique<Impl>()) {}
PackedMatrix::~PackedMatrix() = default;
PackedMatrix::PackedMatrix(PackedMatrix&&) noexcept = default;
PackedMatrix& PackedMatrix::operator=(PackedMatrix&&) noexcept = default;

TensorType PackedMatrix::type() const {
  return impl_->type;
}
int64_t PackedMatrix::rows() const {
  return impl_->rows;
}
int64_t PackedMatrix::cols() const {
  return impl_->cols;
}
MatrixView PackedMatrix::gguf_view() const {
  const bool as_stored = impl_->kernel == nullptr || impl_->kernel->packed_bytes == nullptr;
  return {impl_->type, impl_->rows, impl_->cols, as_stored ? impl_->data : nullptr};
}
size_t PackedMatrix::owned_bytes() const {
  return impl_->owned_bytes;
}

PackedMatrix pack_matrix(const MatrixView& w, Isa isa) {
  const TypeTraits* traits = find_type_traits(static_cast<uint32_t>(w.type));
  const std::string type_name =
      traits ? std::string(traits->name) : "id " + std::to_string(uint32_t(w.type));
  const MatmulKernel* kernel = find_matmul_kernel(w.type, isa);
  if (kernel == nullptr) {
    throw Error("kernels", "no matmul kernel for weights of type " + type_name);
  }
  if (w.rows <= 0 || w.cols <= 0 || w.cols % traits->block_size != 0) {
    throw Error("kernels", "a " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                               " matrix cannot be stored as " + type_name);
  }
  if (w.data == nullptr) throw Error("kernels", "matrix of type " + type_name + " has no data");

  PackedMatrix packed;
  PackedMatrix::Impl& impl = *packed.impl_;
  impl.kernel = kernel;
  impl.type = w.type;
  impl.rows = w.rows;
  impl.cols = w.cols;
  impl.data = w.data;
  if (kernel->packed_bytes != nullptr) {
    const size_t bytes = round_up(kernel->packed_bytes(w.rows, w.cols), kAlignment);
    impl.owned.reset(allocate_packed(bytes));
    if (!impl.owned) {
      throw Error("kernels", "out of memory repacking a " + std::to_string(bytes) + "-byte " +
                                 type_name + " matrix");
    }
    kernel->pack(w, impl.owned.get());
    impl.data = impl.owned.get();
    impl.owned_bytes = bytes;
  }
  return packed;
}

// ---- Workspace ---------------------------------------------------------------------------

uint8_t* Workspace::get(size_t bytes) {
  const size_t needed = bytes + kAlignment;  // room to align the start
  if (buffer_.size() < needed) buffer_.resize(needed);
  const uintptr_t start = reinterpret_cast<uintptr_t>(buffer_.data());
  return buffer_.data() + (round_up(start, kAlignment) - start);
}

// ---- matmul ------------------------------------------------------------------------------

namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kMinParallelWork = 1 << 16;

// Row slices per thread (see split_work). A single token reads each weight once and is
// bound by memory: fewer, longer runs keep the hardware prefetchers streaming (2 slices
// per thread decoded q4_k_m ~5% faster than 4 with two threads, 16 ~10% slower).
constexpr int64_t kChunksPerThread = 4;
constexpr int64_t kOneTokenChunksPerThread = 2;

// How the (row group x token) work is cut into tasks.
struct Split {
  int64_t row_groups;    // rows / row_align, rounded up
  int64_t row_chunks;    // tasks along rows
  int64_t token_chunks;  // tasks along tokens
};

Split split_work(int64_t row_groups, int64_t n_tokens, int n_threads, bool parallel) {
  Split s{row_groups, 1, 1};
  if (!parallel || n_threads <= 1) return s;
  // A few contiguous slices of rows per thread, handed out dynamically: each slice still
  // streams its weights in one long run (decode), and a thread that the OS preempts or
  // that runs slower holds up only its current slice, not the whole product.
  const int64_t per_thread = n_tokens == 1 ? kOneTokenChunksPerThread : kChunksPerThread;
  s.row_chunks = std::min<int64_t>(row_groups, int64_t(n_threads) * per_thread);
  if (n_tokens > 1 && s.row_chunks < 2 * n_threads) {
    // Few rows, many tokens (e.g. attn_k): split the tokens too.
    s.token_chunks = std::min<int64_t>(n_tokens, (2 * n_threads + s.row_chunks - 1) / s.row_chunks);
  }
  return s;
}

}  // namespace

void matmul(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Workspace& workspace) {
  const MatmulJob job{&w, y};
  matmul_batch({&job, 1}, x, n_tokens, pool, workspace);
}

void matmul_batch(std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens,
                  ThreadPool& pool, Workspace& workspace) {
  HERD_CHECK(n_tokens >= 0);
  HERD_CHECK_MSG(jobs.size() <= kMaxBatch, "jobs " + std::to_string(jobs.size()));
  if (n_tokens == 0 || jobs.empty()) return;
  const int64_t cols = jobs[0].w->cols();
  const int n_threads = pool.size();

  // Jobs whose kernels read the same activation blocks share one quantized copy (e.g. a
  // q4_K attn_q and a q6_K attn_v both read Q8_K blocks).
  struct Format {
    const MatmulKernel* kernel;  // whose quantizer fills it
    const float* x;              // from these activations
    size_t stride;               // bytes per token, 64-aligned
    uint8_t* data;               // [n_tokens][stride]
  };
  std::array<Format, kMaxBatch> formats;
  std::array<int, kMaxBatch> format_of;
  size_t n_formats = 0, scratch_stride = 0;
  int64_t work = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const PackedMatrix::Impl& m = jobs[j].w->impl();
    HERD_CHECK(m.kernel != nullptr);
    HERD_CHECK_MSG(m.cols == cols,
                   "cols " + std::to_string(m.cols) + " vs " + std::to_string(cols));
    const MatmulKernel& k = *m.kernel;
    const float* job_x = jobs[j].x != nullptr ? jobs[j].x : x;
    size_t f = 0;
    while (f < n_formats && (formats[f].kernel->quantize_activations != k.quantize_activations ||
                             formats[f].x != job_x))
      ++f;
    if (f == n_formats) {
      formats[n_formats++] = {&k, job_x, round_up(k.activation_row_bytes(cols), kAlignment),
                              nullptr};
    }
    format_of[j] = int(f);
    if (k.scratch_bytes)
      scratch_stride = std::max(scratch_stride, round_up(k.scratch_bytes(cols), kAlignment));
    work += m.rows * cols * n_tokens;
  }

  // workspace: per format [n_tokens][stride] activations, then [n_threads][scratch_stride]
  size_t bytes = scratch_stride * size_t(n_threads);
  for (size_t f = 0; f < n_formats; ++f) bytes += formats[f].stride * size_t(n_tokens);
  uint8_t* next = workspace.get(bytes);
  for (size_t f = 0; f < n_formats; ++f) {
    formats[f].data = next;
    next += formats[f].stride * size_t(n_tokens);
  }
  uint8_t* scratch = next;

  const bool parallel = work >= kMinParallelWork;
  auto quantize = [&](int64_t task) {  // task = format * n_tokens + token
    const Format& f = formats[size_t(task / n_tokens)];
    const int64_t t = task % n_tokens;
    f.kernel->quantize_activations(f.x + t * cols, cols, f.data + size_t(t) * f.stride);
  };
  const int64_t n_quantize = int64_t(n_formats) * n_tokens;
  if (parallel && n_quantize >= 2 * n_threads) {
    pool.parallel_for(n_quantize, [&](int64_t begin, int64_t end, int) {
      for (int64_t task = begin; task < end; ++task) quantize(task);
    });
  } else {
    for (int64_t task = 0; task < n_quantize; ++task) quantize(task);
  }

  // Every job's (row slice x token slice) tasks, numbered job after job.
  std::array<Split, kMaxBatch> splits;
  std::array<int64_t, kMaxBatch + 1> first_task;
  first_task[0] = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const PackedMatrix::Impl& m = jobs[j].w->impl();
    const int64_t row_groups = (m.rows + m.kernel->row_align - 1) / m.kernel->row_align;
    splits[j] = split_work(row_groups, n_tokens, n_threads, parallel);
    first_task[j + 1] = first_task[j] + splits[j].row_chunks * splits[j].token_chunks;
  }
  auto run_task = [&](int64_t task, int thread) {
    size_t j = 0;
    while (task >= first_task[j + 1]) ++j;
    const PackedMatrix::Impl& m = jobs[j].w->impl();
    const MatmulKernel& k = *m.kernel;
    const Split& s = splits[j];
    const Format& f = formats[size_t(format_of[j])];
    const int64_t local = task - first_task[j];
    const int64_t rc = local % s.row_chunks, tc = local / s.row_chunks;
    const int64_t g0 = s.row_groups * rc / s.row_chunks,
                  g1 = s.row_groups * (rc + 1) / s.row_chunks;
    const int64_t t0 = n_tokens * tc / s.token_chunks, t1 = n_tokens * (tc + 1) / s.token_chunks;
    if (g0 == g1 || t0 == t1) return;
    GemmArgs a;
    a.weights = m.data;
    a.rows = m.rows;
    a.cols = m.cols;
    a.row_begin = g0 * k.row_align;
    a.row_end = std::min(m.rows, g1 * k.row_align);
    a.activations = f.data + size_t(t0) * f.stride;
    a.activation_stride = f.stride;
    a.n_tokens = t1 - t0;
    a.y = jobs[j].y + t0 * m.rows;
    a.y_stride = m.rows;
    a.scratch = scratch + size_t(thread) * scratch_stride;
    k.gemm(a);
  };
  const int64_t n_tasks = first_task[jobs.size()];
  if (n_tasks == 1) {
    run_task(0, 0);
  } else {
    pool.run(n_tasks, run_task);
  }
}

}  // namespace herd::kernels
