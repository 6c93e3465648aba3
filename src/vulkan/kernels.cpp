#include "vulkan/kernels.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <string_view>

#include "quant/iq_grids.h"
#include "util/error.h"
#include "vulkan/kernel_args.h"

namespace herd::vulkan {
namespace {

// Rows of a matvec workgroup: each x value loaded serves this many rows.
constexpr uint32_t kMatvecRows = 2;

// matmul.comp's tile: rows x tokens per workgroup, and its invocations.
constexpr uint64_t kMatmulRows = 64;
constexpr uint32_t kMatmulTokens = 32;
constexpr uint32_t kMatmulInvocations = 128;

struct MatvecShader {
  TensorType type;
  const char* name;
};
const MatvecShader kMatvecShaders[] = {
    {TensorType::F32, "matvec_f32"},         {TensorType::F16, "matvec_f16"},
    {TensorType::BF16, "matvec_bf16"},       {TensorType::Q4_0, "matvec_q4_0"},
    {TensorType::Q4_1, "matvec_q4_1"},       {TensorType::Q5_0, "matvec_q5_0"},
    {TensorType::Q5_1, "matvec_q5_1"},       {TensorType::Q8_0, "matvec_q8_0"},
    {TensorType::Q2_K, "matvec_q2_K"},       {TensorType::Q3_K, "matvec_q3_K"},
    {TensorType::Q4_K, "matvec_q4_K"},       {TensorType::Q5_K, "matvec_q5_K"},
    {TensorType::Q6_K, "matvec_q6_K"},       {TensorType::IQ4_NL, "matvec_iq4_nl"},
    {TensorType::IQ4_XS, "matvec_iq4_xs"},   {TensorType::MXFP4, "matvec_mxfp4"},
    {TensorType::IQ1_S, "matvec_iq1_s"},     {TensorType::IQ1_M, "matvec_iq1_m"},
    {TensorType::IQ2_XXS, "matvec_iq2_xxs"}, {TensorType::IQ2_XS, "matvec_iq2_xs"},
    {TensorType::IQ2_S, "matvec_iq2_s"},     {TensorType::IQ3_XXS, "matvec_iq3_xxs"},
    {TensorType::IQ3_S, "matvec_iq3_s"},
};

const char* matvec_shader(TensorType type) {
  for (const MatvecShader& s : kMatvecShaders) {
    if (s.type == type) return s.name;
  }
  return nullptr;
}

using detail::ceil_div;
using detail::u32;

// The codebook each grid type's shaders read (weights.glsl): quant/iq_grids.h's tables as
// they lie in memory, 64-bit rows as two little-endian words.
struct GridTable {
  std::vector<TensorType> types;
  const void* data;
  size_t bytes;
};
const GridTable kGridTables[] = {
    {{TensorType::IQ2_XXS}, quant::kIq2xxsGrid, sizeof(quant::kIq2xxsGrid)},
    {{TensorType::IQ2_XS}, quant::kIq2xsGrid, sizeof(quant::kIq2xsGrid)},
    {{TensorType::IQ2_S}, quant::kIq2sGrid, sizeof(quant::kIq2sGrid)},
    {{TensorType::IQ3_XXS}, quant::kIq3xxsGrid, sizeof(quant::kIq3xxsGrid)},
    {{TensorType::IQ3_S}, quant::kIq3sGrid, sizeof(quant::kIq3sGrid)},
    {{TensorType::IQ1_S, TensorType::IQ1_M}, quant::kIq1sGrid, sizeof(quant::kIq1sGrid)},
};
// Vulkan's largest minStorageBufferOffsetAlignment: every table's offset is one.
constexpr size_t kGridAlignment = 256;

}  // namespace

Kernels::Kernels(Context& context, KernelOptions options) : context_(context) {
  const DeviceInfo& info = context.info();
  subgroups_ = options.subgroups && info.subgroup_arithmetic && info.subgroup_size > 0;
  matmul_min_tokens_ = options.matmul_min_tokens;
  // Powers of two (the shared-memory tree needs one) within the device's limit, at least
  // one whole subgroup where that fits.
  const uint32_t limit = std::bit_floor(std::max<uint32_t>(info.max_workgroup_size, 1));
  reduce_size_ = std::min<uint32_t>(std::max<uint32_t>(128, info.subgroup_size), limit);
  elementwise_size_ = std::min<uint32_t>(256, limit);

  // The grid codebooks, every table at an offset any device can bind.
  size_t total = 0;
  for (const GridTable& t : kGridTables) {
    total += ceil_div(t.bytes, kGridAlignment) * kGridAlignment;
  }
  grids_ = std::make_unique<Buffer>(context, total, BufferKind::kDevice, "IQ grid codebooks");
  size_t offset = 0;
  for (const GridTable& t : kGridTables) {
    upload(context, *grids_, t.data, t.bytes, offset);
    for (const TensorType type : t.types) {
      grid_bindings_.emplace(type, Binding(*grids_, offset, t.bytes));
    }
    offset += ceil_div(t.bytes, kGridAlignment) * kGridAlignment;
  }
}

const Binding* Kernels::grid_binding(TensorType type) const {
  const auto it = grid_bindings_.find(type);
  return it == grid_bindings_.end() ? nullptr : &it->second;
}

Kernels::~Kernels() = default;

bool Kernels::has_matvec(TensorType type) {
  return matvec_shader(type) != nullptr;
}

const Pipeline& Kernels::pipeline(const std::string& shader, uint32_t n_buffers,
                                  uint32_t push_bytes, std::vector<uint32_t> spec_constants) {
  // One pipeline per shader and specialization (matmul's tile comes in several).
  std::string key = shader;
  for (const uint32_t c : spec_constants) key += "/" + std::to_string(c);
  std::unique_ptr<Pipeline>& slot = pipelines_[key];
  if (slot == nullptr) {
    PipelineOptions options;
    options.shader = shader;
    options.n_buffers = n_buffers;
    options.push_bytes = push_bytes;
    options.spec_constants = spec_constants;
    slot = std::make_unique<Pipeline>(context_, options);
  }
  return *slot;
}

void Kernels::matvec(Recorder& r, TensorType type, Binding w, Binding x, Binding y, int64_t rows,
                     int64_t cols, int64_t n_tokens) {
  MatvecCall call{type, rows, cols, n_tokens};
  record_matvec(r, call, w, x, y, nullptr);
}

void Kernels::matmul(Recorder& r, TensorType type, Binding w, Binding x, Binding y, int64_t rows,
                     int64_t cols, int64_t n_tokens) {
  // The IQ grid types have no tiled shader yet (their codebook reads): matvec.
  if (n_tokens < matmul_min_tokens_ || grid_binding(type) != nullptr) {
    matvec(r, type, w, x, y, rows, cols, n_tokens);
    return;
  }
  record_matmul(r, MatvecCall{type, rows, cols, n_tokens}, w, x, y, nullptr);
}

void Kernels::matmul_experts(Recorder& r, TensorType type, Binding w, Binding x, Binding ids,
                             Binding y, const ExpertShape& shape) {
  const MatvecCall call = MatvecCall::experts(type, shape);
  // The slots an expert gets on average: where that is a few, matvec's pass per slot is
  // as fast as a tile of mostly zeros.
  if (shape.n_tokens * shape.n_used < matmul_min_tokens_ * std::max<int64_t>(shape.n_expert, 1) ||
      grid_binding(type) != nullptr) {
    record_matvec(r, call, w, x, y, &ids);
    return;
  }
  record_matmul(r, call, w, x, y, &ids);
}

void Kernels::record_matmul(Recorder& r, const MatvecCall& c, Binding w, Binding x, Binding y,
                            const Binding* ids) {
  const char* name = matvec_shader(c.type);
  if (name == nullptr) {
    throw Error("vulkan", "no matrix-matrix shader for " + std::string(type_traits(c.type).name) +
                              " weights yet");
  }
  // Tokens per tile (slots per expert on average, with ids): the fewest tiles that hold
  // them, so that a few tokens compute no tile of zeros; 32 from there on.
  const int64_t per_tile = ids != nullptr ? ceil_div(uint64_t(c.n_tokens * c.n_used),
                                                     uint64_t(std::max<int64_t>(c.n_expert, 1)))
                                          : c.n_tokens;
  const uint32_t tile_tokens = per_tile <= 8 ? 8 : per_tile <= 16 ? 16 : kMatmulTokens;
  const uint64_t row_tiles = ceil_div(uint64_t(c.rows), kMatmulRows);
  const int64_t matrix_bytes = c.rows * int64_t(row_bytes(c.type, c.cols));
  struct Push {
    uint32_t rows, cols, row_bytes, n_tokens, row_tiles, n_used, expert_bytes, x_per_slot;
  } push{u32(c.rows, "rows"),
         u32(c.cols, "cols"),
         u32(int64_t(row_bytes(c.type, c.cols)), "row bytes"),
         u32(c.n_tokens, "tokens"),
         u32(int64_t(row_tiles), "row tiles"),
         u32(c.n_used, "experts used"),
         u32(matrix_bytes, "matrix bytes"),
         c.x_per_slot ? 1u : 0u};
  // Byte offsets into the weights (element offsets, for the float types) and indices into
  // x and y are 32-bit: a larger stack of experts is bound in parts.
  u32(matrix_bytes * std::max<int64_t>(c.n_expert, 1), "bytes of the weights");
  u32(c.rows * c.cols * std::max<int64_t>(c.n_expert, 1), "weights");
  u32(c.n_tokens * c.n_used * std::max(c.rows, c.cols), "activations");
  const std::string shader = std::string(ids != nullptr ? "matmul_ids_" : "matmul_") +
                             (name + std::string_view("matvec_").size());
  // The shader's tile needs exactly this many invocations, and at most 14.3 KiB of shared
  // memory: both within what every Vulkan device offers (128 invocations, 16 KiB).
  const std::vector<uint32_t> spec = {kMatmulInvocations, context_.info().subgroup_size,
                                      tile_tokens};
  if (ids != nullptr) {
    r.dispatch(pipeline(shader, 4, sizeof(Push), spec), {w, x, y, *ids}, push,
               row_tiles * uint64_t(c.n_expert));
  } else {
    r.dispatch(pipeline(shader, 3, sizeof(Push), spec), {w, x, y}, push,
               row_tiles * ceil_div(uint64_t(c.n_tokens), tile_tokens));
  }
}

void Kernels::matvec_experts(Recorder& r, TensorType type, Binding w, Binding x, Binding ids,
                             Binding y, const ExpertShape& shape) {
  const MatvecCall call = MatvecCall::experts(type, shape);
  record_matvec(r, call, w, x, y, &ids);
}

void Kernels::moe_combine(Recorder& r, Binding y, Binding weights, Binding out, int64_t n,
                          int64_t n_used, int64_t n_tokens) {
  struct Push {
    uint32_t n, n_used, n_tokens;
  } push{u32(n, "n"), u32(n_used, "experts used"), u32(n_tokens, "tokens")};
  u32(n * n_used * n_tokens, "values");
  const Pipeline& p =
      pipeline("moe_combine", 3, sizeof(Push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {y, weights, out}, push, ceil_div(uint64_t(n * n_tokens), elementwise_size_));
}

void Kernels::get_rows(Recorder& r, TensorType type, Binding w, Binding ids, Binding out,
                       int64_t cols, int64_t n_tokens) {
  const char* name = matvec_shader(type);
  if (name == nullptr) {
    throw Error("vulkan",
                "no row-gather shader for " + std::string(type_traits(type).name) + " weights yet");
  }
  struct Push {
    uint32_t cols, row_bytes, n_tokens;
  } push{u32(cols, "cols"), u32(int64_t(row_bytes(type, cols)), "row bytes"),
         u32(n_tokens, "tokens")};
  u32(n_tokens * cols, "values");
  const std::string shader = std::string("get_rows_") + (name + std::string_view("matvec_").size());
  const std::vector<uint32_t> spec = {elementwise_size_, context_.info().subgroup_size};
  const uint64_t groups = ceil_div(uint64_t(n_tokens * cols), elementwise_size_);
  if (const Binding* grid = grid_binding(type)) {
    r.dispatch(pipeline(shader, 4, sizeof(Push), spec), {w, ids, out, *grid}, push, groups);
  } else {
    r.dispatch(pipeline(shader, 3, sizeof(Push), spec), {w, ids, out}, push, groups);
  }
}

void Kernels::record_matvec(Recorder& r, const MatvecCall& c, Binding w, Binding x, Binding y,
                            const Binding* ids) {
  const char* name = matvec_shader(c.type);
  if (name == nullptr) {
    throw Error("vulkan", "no matrix-vector shader for " + std::string(type_traits(c.type).name) +
                              " weights yet");
  }
  const int64_t matrix_bytes = c.rows * int64_t(row_bytes(c.type, c.cols));
  struct Push {
    uint32_t rows, cols, row_bytes, n_tokens, n_used, expert_bytes, x_per_slot;
  } push{u32(c.rows, "rows"),
         u32(c.cols, "cols"),
         u32(int64_t(row_bytes(c.type, c.cols)), "row bytes"),
         u32(c.n_tokens, "tokens"),
         u32(c.n_used, "experts used"),
         u32(matrix_bytes, "matrix bytes"),
         c.x_per_slot ? 1u : 0u};
  // Byte offsets into the weights are 32-bit: a larger stack of experts is bound in parts.
  u32(matrix_bytes * std::max<int64_t>(c.n_expert, 1), "bytes of the experts' weights");
  u32(c.n_tokens * c.n_used * std::max(c.rows, c.cols), "activations");
  const uint32_t size =
      std::min<uint32_t>(reduce_size_, std::max<uint32_t>(64, context_.info().subgroup_size));
  const std::string shader = std::string(ids != nullptr ? "matvec_ids_" : "matvec_") +
                             (name + std::string_view("matvec_").size()) +
                             (subgroups_ ? "_subgroup" : "_shared");
  const std::vector<uint32_t> spec = {size, context_.info().subgroup_size, kMatvecRows};
  const uint64_t groups = ceil_div(uint64_t(c.rows), kMatvecRows);
  const Binding* grid = grid_binding(c.type);
  if (ids != nullptr && grid != nullptr) {
    r.dispatch(pipeline(shader, 5, sizeof(Push), spec), {w, x, y, *ids, *grid}, push, groups);
  } else if (ids != nullptr) {
    r.dispatch(pipeline(shader, 4, sizeof(Push), spec), {w, x, y, *ids}, push, groups);
  } else if (grid != nullptr) {
    r.dispatch(pipeline(shader, 4, sizeof(Push), spec), {w, x, y, *grid}, push, groups);
  } else {
    r.dispatch(pipeline(shader, 3, sizeof(Push), spec), {w, x, y}, push, groups);
  }
}

void Kernels::rms_norm(Recorder& r, Binding x, Binding weight, Binding out, int64_t n,
                       int64_t n_rows, float eps) {
  struct Push {
    uint32_t n, n_rows;
    float eps;
  } push{u32(n, "n"), u32(n_rows, "rows"), eps};
  u32(n * n_rows, "elements");
  const Pipeline& p = pipeline(subgroups_ ? "rms_norm_subgroup" : "rms_norm_shared", 3,
                               sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, weight, out}, push, uint64_t(n_rows));
}

void Kernels::softmax(Recorder& r, Binding x, int64_t n, int64_t n_rows) {
  struct Push {
    uint32_t n, n_rows;
  } push{u32(n, "n"), u32(n_rows, "rows")};
  u32(n * n_rows, "elements");
  const Pipeline& p = pipeline(subgroups_ ? "softmax_subgroup" : "softmax_shared", 1, sizeof(Push),
                               {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {x}, push, uint64_t(n_rows));
}

void Kernels::gated(Recorder& r, GatedActivation kind, Binding gate, Binding up, Binding out,
                    int64_t n, float limit) {
  const struct {
    uint32_t n, kind;
    float limit;
  } push{u32(n, "n"), static_cast<uint32_t>(kind), limit};
  const Pipeline& p =
      pipeline("gated", 3, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {gate, up, out}, push, ceil_div(uint64_t(n), elementwise_size_));
}

void Kernels::add(Recorder& r, Binding a, Binding b, Binding out, int64_t n) {
  const struct { uint32_t n; } push{u32(n, "n")};
  const Pipeline& p =
      pipeline("add", 3, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {a, b, out}, push, ceil_div(uint64_t(n), elementwise_size_));
}

void Kernels::scale(Recorder& r, Binding x, float s, int64_t n) {
  const struct {
    uint32_t n;
    float s;
  } push{u32(n, "n"), s};
  const Pipeline& p =
      pipeline("scale", 1, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {x}, push, ceil_div(uint64_t(n), elementwise_size_));
}

void Kernels::rope(Recorder& r, Binding x, Binding angles, const RopeShape& s) {
  HERD_CHECK_MSG(s.n_rot % 2 == 0 && s.rot_offset + s.n_rot <= s.head_dim,
                 "n_rot " + std::to_string(s.n_rot) + ", head_dim " + std::to_string(s.head_dim));
  struct Push {
    uint32_t n_tokens, n_head, head_dim, n_rot, rot_offset, neox;
  } push{u32(s.n_tokens, "tokens"), u32(s.n_head, "heads"),          u32(s.head_dim, "head_dim"),
         u32(s.n_rot, "n_rot"),     u32(s.rot_offset, "rot_offset"), s.neox ? 1u : 0u};
  const uint64_t pairs = uint64_t(s.n_tokens) * uint64_t(s.n_head) * uint64_t(s.n_rot / 2);
  u32(int64_t(s.n_tokens * s.n_head * s.head_dim), "elements");
  const Pipeline& p =
      pipeline("rope", 2, sizeof(Push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, angles}, push, ceil_div(pairs, elementwise_size_));
}

void Kernels::route(Recorder& r, Binding logits, const Binding* bias, Binding experts,
                    Binding weights, const RouterShape& s) {
  HERD_CHECK_MSG(s.n_expert > 0 && s.n_expert <= 512 && s.n_used > 0 && s.n_used <= 64 &&
                     s.n_used <= s.n_expert && s.n_group >= 1 && s.n_group <= 64 &&
                     s.n_expert % s.n_group == 0 && s.n_group_used >= 1 &&
                     s.n_group_used <= s.n_group,
                 "experts " + std::to_string(s.n_expert) + ", used " + std::to_string(s.n_used) +
                     ", groups " + std::to_string(s.n_group));
  struct Push {
    uint32_t n_tokens, n_expert, n_used, gating, has_bias, norm_weights;
    float weights_scale;
    uint32_t n_group, n_group_used;
  } push{u32(s.n_tokens, "tokens"),
         u32(s.n_expert, "experts"),
         u32(s.n_used, "experts used"),
         static_cast<uint32_t>(s.gating),
         bias != nullptr ? 1u : 0u,
         s.norm_weights ? 1u : 0u,
         s.weights_scale,
         u32(s.n_group, "groups"),
         u32(s.n_group_used, "groups used")};
  const Pipeline& p =
      pipeline("router", 4, sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  // Without a bias the binding is unused: any buffer does.
  r.dispatch(p, {logits, bias != nullptr ? *bias : logits, experts, weights}, push,
             uint64_t(s.n_tokens));
}

void Kernels::store_f16(Recorder& r, Binding src, Binding dst, int64_t n, int64_t offset) {
  HERD_CHECK_MSG(n % 2 == 0 && offset % 2 == 0,
                 "n " + std::to_string(n) + ", offset " + std::to_string(offset));
  const struct { uint32_t n, offset; } push{u32(n, "n"), u32(offset, "offset")};
  u32(n + offset, "elements");
  const Pipeline& p =
      pipeline("store_f16", 2, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {src, dst}, push, ceil_div(uint64_t(n / 2), elementwise_size_));
}

void Kernels::store_rows(Recorder& r, Binding src, Binding rows, Binding dst, int64_t n,
                         int64_t n_tokens) {
  HERD_CHECK_MSG(n % 2 == 0, "n " + std::to_string(n));
  const struct { uint32_t n, n_tokens; } push{u32(n, "n"), u32(n_tokens, "tokens")};
  const uint64_t pairs = uint64_t(n / 2) * uint64_t(n_tokens);
  u32(int64_t(pairs), "pairs");
  const Pipeline& p =
      pipeline("store_rows", 3, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {src, rows, dst}, push, ceil_div(pairs, elementwise_size_));
}

void Kernels::add_bias(Recorder& r, Binding x, Binding bias, int64_t n, int64_t n_rows) {
  const struct { uint32_t n, n_rows; } push{u32(n, "n"), u32(n_rows, "rows")};
  u32(n * n_rows, "elements");
  const Pipeline& p =
      pipeline("add_bias", 2, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, bias}, push, ceil_div(uint64_t(n * n_rows), elementwise_size_));
}

void Kernels::add_expert_bias(Recorder& r, Binding x, Binding bias, Binding ids, int64_t n,
                              int64_t n_rows) {
  const struct { uint32_t n, n_rows; } push{u32(n, "n"), u32(n_rows, "rows")};
  u32(n * n_rows, "elements");
  const Pipeline& p =
      pipeline("add_bias_ids", 3, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, bias, ids}, push, ceil_div(uint64_t(n * n_rows), elementwise_size_));
}

void Kernels::copy_rows(Recorder& r, Binding src, Binding dst, int64_t n_rows, int64_t width,
                        int64_t src_stride, int64_t src_offset, int64_t dst_stride,
                        int64_t dst_offset) {
  HERD_CHECK(src_offset + width <= src_stride && dst_offset + width <= dst_stride);
  const struct {
    uint32_t n_rows, width, src_stride, src_offset, dst_stride, dst_offset;
  } push{u32(n_rows, "rows"),       u32(width, "width"),       u32(src_stride, "stride"),
         u32(src_offset, "offset"), u32(dst_stride, "stride"), u32(dst_offset, "offset")};
  u32(n_rows * std::max(src_stride, dst_stride), "elements");
  const Pipeline& p =
      pipeline("copy_rows", 2, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {src, dst}, push, ceil_div(uint64_t(n_rows * width), elementwise_size_));
}

void Kernels::remap_experts(Recorder& r, Binding ids, Binding local, int64_t n) {
  const struct { uint32_t n; } push{u32(n, "ids")};
  const Pipeline& p = pipeline("remap_experts", 2, sizeof(push),
                               {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {ids, local}, push, ceil_div(uint64_t(n), elementwise_size_));
}

void Kernels::attend(Recorder& r, Binding q, Binding keys, Binding values, const Binding* sinks,
                     Binding scores, Binding out, const AttentionShape& s) {
  HERD_CHECK_MSG(s.k_dim % 2 == 0 && s.stride % 2 == 0 && s.head_stride % 2 == 0 &&
                     s.k_dim <= 1024 && s.v_dim <= s.stride && s.n_kv_head > 0 &&
                     s.n_head % s.n_kv_head == 0,
                 "k_dim " + std::to_string(s.k_dim) + ", stride " + std::to_string(s.stride) +
                     ", heads " + std::to_string(s.n_head) + "/" + std::to_string(s.n_kv_head));
  const int64_t pos0 = s.pos0 >= 0 ? s.pos0 : s.n_pos - s.n_tokens;
  HERD_CHECK_MSG(s.n_tokens >= 1 && pos0 >= 0 && pos0 + s.n_tokens <= s.n_pos && s.window >= 0,
                 "pos0 " + std::to_string(pos0) + ", tokens " + std::to_string(s.n_tokens) +
                     ", positions " + std::to_string(s.n_pos));
  struct Push {
    uint32_t n_head, n_kv_head, n_pos, k_dim, v_dim, stride, head_stride;
    float scale;
    uint32_t has_sinks, n_tokens, pos0, window, q_offset, kv_offset, out_offset;
  } push{u32(s.n_head, "heads"),
         u32(s.n_kv_head, "KV heads"),
         u32(s.n_pos, "positions"),
         u32(s.k_dim, "k_dim"),
         u32(s.v_dim, "v_dim"),
         u32(s.stride, "stride"),
         u32(s.head_stride, "head stride"),
         s.scale,
         sinks != nullptr ? 1u : 0u,
         u32(s.n_tokens, "tokens"),
         u32(pos0, "pos0"),
         u32(s.window, "window"),
         u32(s.q_offset, "query offset"),
         u32(s.kv_offset, "cache offset"),
         u32(s.out_offset, "output offset")};
  HERD_CHECK_MSG(s.kv_offset % 2 == 0, "cache offset " + std::to_string(s.kv_offset));
  u32(s.kv_offset + s.n_pos * s.stride, "cache elements");
  u32(s.q_offset + s.n_tokens * s.n_head * s.k_dim, "query elements");
  u32(s.out_offset + s.n_tokens * s.n_head * s.v_dim, "output elements");
  u32(s.n_tokens * s.n_head * std::max(s.n_pos, s.k_dim), "scores");
  const Pipeline& p = pipeline(subgroups_ ? "attend_subgroup" : "attend_shared", 6, sizeof(Push),
                               {reduce_size_, context_.info().subgroup_size});
  // Without sinks the binding is unused: any buffer does.
  r.dispatch(p, {q, keys, values, sinks != nullptr ? *sinks : q, scores, out}, push,
             uint64_t(s.n_tokens * s.n_head));
}

}  // namespace herd::vulkan
