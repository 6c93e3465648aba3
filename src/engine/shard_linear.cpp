// The linear-attention half of a hybrid model's layer: Gated DeltaNet (Qwen3-Next, Qwen3.5 /
// 3.6), its projections around delta_net_mix (delta_net.h) and the per-sequence state it
// keeps in the shard's cache.
#include <algorithm>

#include "engine/shard_state.h"
#include "util/error.h"

namespace herd::engine {

bool Shard::has_recurrent_state() const {
  return state_->kv.has_recurrent() || state_->arch->attention == AttentionKind::kCompressed;
}

RecurrentSnapshot Shard::snapshot_state(int32_t seq) const {
  if (state_->arch->attention == AttentionKind::kCompressed)
    return state_->compressed_snapshot(seq);
  if (state_->device != nullptr) {  // the states are the device's; the position the host's
    RecurrentSnapshot out;
    out.pos = state_->kv.recurrent_pos(seq);
    state_->device->download_states(seq, out.rows);
    return out;
  }
  return state_->kv.snapshot(seq);
}

void Shard::restore_state(int32_t seq, const RecurrentSnapshot& snapshot) {
  if (state_->arch->attention == AttentionKind::kCompressed) {
    state_->compressed_restore(seq, snapshot);
    return;
  }
  if (state_->device != nullptr) {
    state_->device->upload_states(seq, snapshot.rows);
    RecurrentSnapshot position;  // the host's cache holds no states: only the position
    position.pos = snapshot.pos;
    state_->kv.restore(seq, position);
    return;
  }
  state_->kv.restore(seq, snapshot);
}

namespace {

using RowRanges = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end) of rows

void add_row(RowRanges& rows, int64_t r) {
  if (!rows.empty() && rows.back().second == r) {
    ++rows.back().second;
  } else {
    rows.push_back({r, r + 1});
  }
}

// The rows `rows` of 2-D weight t, in that order: a view of the file for one range, else a
// copy the shard keeps (in `owned` while the packed matrix reads it).
PackedMatrix pack_rows(const gguf::TensorInfo& t, const RowRanges& rows, kernels::Isa isa,
                       std::vector<std::vector<uint8_t>>& owned) {
  const int64_t cols = t.shape[0];
  const size_t row = row_bytes(t.type, cols);
  int64_t n = 0;
  for (auto [b, e] : rows) n += e - b;
  if (rows.size() == 1) {
    return kernels::pack_matrix(
        {t.type, n, cols, t.data + row * static_cast<size_t>(rows[0].first)}, isa);
  }
  std::vector<uint8_t> copy;  // [n][row]
  copy.reserve(row * static_cast<size_t>(n));
  for (auto [b, e] : rows) {
    copy.insert(copy.end(), t.data + row * static_cast<size_t>(b),
                t.data + row * static_cast<size_t>(e));
  }
  PackedMatrix packed = kernels::pack_matrix({t.type, n, cols, copy.data()}, isa);
  if (packed.owned_bytes() == 0) owned.push_back(std::move(copy));
  return packed;
}

// Columns [c0, c1) of every row of 2-D weight t (whole quant blocks only).
PackedMatrix pack_columns(const gguf::TensorInfo& t, int64_t c0, int64_t c1, kernels::Isa isa,
                          std::vector<std::vector<uint8_t>>& owned) {
  const int64_t cols = t.shape[0], rows = t.shape[1];
  if (c0 == 0 && c1 == cols) return kernels::pack_matrix({t.type, rows, cols, t.data}, isa);
  const int64_t block = type_traits(t.type).block_size;
  if (c0 % block != 0 || c1 % block != 0) {
    throw Error("engine", "tensor '" + std::string(t.name) + "': its columns [" +
                              std::to_string(c0) + ", " + std::to_string(c1) +
                              ") held by this rank cut its quant blocks of " +
                              std::to_string(block));
  }
  const size_t row = row_bytes(t.type, cols), skip = row_bytes(t.type, c0);
  const size_t part = row_bytes(t.type, c1 - c0);
  std::vector<uint8_t> copy;  // [rows][part]
  copy.reserve(part * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = t.data + row * static_cast<size_t>(r) + skip;
    copy.insert(copy.end(), src, src + part);
  }
  PackedMatrix packed = kernels::pack_matrix({t.type, rows, c1 - c0, copy.data()}, isa);
  if (packed.owned_bytes() == 0) owned.push_back(std::move(copy));
  return packed;
}

std::vector<float> floats_of(const gguf::TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  type_traits(t.type).dequantize(t.data, out.data(), t.n_elements);
  return out;
}

}  // namespace

void Shard::State::resolve_delta_slice() {
  const int64_t n_v = hp.delta_n_v_heads, n_k = hp.delta_n_k_heads, group = n_v / n_k;
  int64_t vb = 0, ve = n_v;
  if (n_head < hp.n_head) {
    if (n_v % hp.n_head == 0) {
      const int64_t per_head = n_v / hp.n_head;
      vb = spec.slice.head_begin * per_head;
      ve = spec.slice.head_end * per_head;
    } else if (spec.slice.head_begin != 0 || n_head == 0) {
      vb = ve = 0;  // the rank of the first heads runs the layers whole
    }
  }
  int64_t kb = 0, ke = n_k;
  if (ve == vb) {
    ke = 0;
  } else if (!arch->delta_v_tiled) {
    kb = vb / group;
    ke = (ve - 1) / group + 1;
  }
  delta_v_begin = vb;
  delta_k_begin = kb;
  delta_dims = {ke - kb,   ve - vb, hp.delta_head_k, hp.delta_head_v, hp.delta_conv_kernel,
                hp.rms_eps};
}

void Shard::State::load_linear(const gguf::File& file, Layer& l, int64_t il) {
  const DeltaNetDims& d = delta_dims;  // held
  if (d.n_v_heads == 0) return;
  const int64_t n_k = hp.delta_n_k_heads, n_v = hp.delta_n_v_heads, group = n_v / n_k;
  const int64_t dk = hp.delta_head_k, dv = hp.delta_head_v, kernel = d.conv_kernel;
  const int64_t kb = delta_k_begin, ke = kb + d.n_k_heads;
  const int64_t vb = delta_v_begin, ve = vb + d.n_v_heads;
  const kernels::Isa isa = options.isa;
  const std::string blk = "blk." + std::to_string(il) + ".";
  auto tensor = [&](const char* name) -> const gguf::TensorInfo& {
    return file.tensor(blk + name);
  };
  // The held channels of the convolution: [q of the held K heads | k of them | v of the held
  // V heads].
  const RowRanges channels = {{kb * dk, ke * dk},
                              {(n_k + kb) * dk, (n_k + ke) * dk},
                              {2 * n_k * dk + vb * dv, 2 * n_k * dk + ve * dv}};
  l.delta_qkv = pack_rows(tensor("attn_qkv.weight"), channels, isa, owned_copies);
  l.delta_z = pack_rows(tensor("attn_gate.weight"), {{vb * dv, ve * dv}}, isa, owned_copies);
  if (arch->delta_ba_fused) {
    // ssm_ba's rows per K head g: [b of its group V heads | a of them]; held: all b, then all a.
    RowRanges rows;
    for (int64_t j = vb; j < ve; ++j) add_row(rows, j / group * 2 * group + j % group);
    for (int64_t j = vb; j < ve; ++j) add_row(rows, j / group * 2 * group + group + j % group);
    l.delta_ba = pack_rows(tensor("ssm_ba.weight"), rows, isa, owned_copies);
  } else {
    l.delta_beta = pack_rows(tensor("ssm_beta.weight"), {{vb, ve}}, isa, owned_copies);
    l.delta_alpha = pack_rows(tensor("ssm_alpha.weight"), {{vb, ve}}, isa, owned_copies);
  }
  l.delta_out = pack_columns(tensor("ssm_out.weight"), vb * dv, ve * dv, isa, owned_copies);
  // ssm_conv1d is [conv_dim][kernel] (a channel's taps together); the kernel reads
  // [kernel][held channels], one tap of every channel together.
  const std::vector<float> conv = floats_of(tensor("ssm_conv1d.weight"));
  const int64_t held = d.conv_dim();
  l.delta_conv.assign(static_cast<size_t>(kernel * held), 0.0f);
  int64_t c = 0;
  for (auto [b, e] : channels) {
    for (int64_t ch = b; ch < e; ++ch, ++c) {
      for (int64_t j = 0; j < kernel; ++j) {
        l.delta_conv[static_cast<size_t>(j * held + c)] =
            conv[static_cast<size_t>(ch * kernel + j)];
      }
    }
  }
  const std::vector<float> dt = floats_of(tensor("ssm_dt.bias")), a = floats_of(tensor("ssm_a"));
  l.delta_dt_bias.assign(dt.begin() + vb, dt.begin() + ve);
  l.delta_a.assign(a.begin() + vb, a.begin() + ve);
  l.delta_norm = floats_of(tensor("ssm_norm.weight"));
  for (int64_t j = vb; j < ve; ++j) {
    const int64_t k = arch->delta_v_tiled ? j % n_k : j / group;
    l.delta_k_head.push_back(static_cast<int32_t>(k - kb));
  }
}

CacheLayout Shard::State::cache_layout(int64_t n_ctx) const {
  CacheLayout layout;
  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    const LayerOptions lo = layer_options(*arch, hp, il);
    if (lo.linear) {
      layout.layers.push_back({.kind = LayerCache::kRecurrent});
    } else if (arch->attention == AttentionKind::kMla) {
      // One row per token: the normed latent and the roped key; the values are the latent.
      layout.layers.push_back({.k_dim = hp.kv_lora_rank + hp.n_rot, .v_dim = 0});
    } else if (!lo.own_kv) {
      layout.layers.push_back({});  // reads layer lo.kv_layer's
    } else {
      // The slice's KV heads (a whole shard's are each layer's own count).
      const int64_t kv_heads = partial_sums ? n_head_kv : lo.n_head_kv;
      layout.layers.push_back({.k_dim = kv_heads * lo.head_dim, .v_dim = kv_heads * lo.head_dim_v});
    }
  }
  layout.n_seq = options.n_seq;
  layout.n_ctx = n_ctx;
  if (arch->delta_net) layout.recurrent = delta_dims.state_shape();
  return layout;
}

void Shard::State::linear_attention(const Layer& l, int64_t layer, const Batch& batch,
                                    ThreadPool& pool, float* out) {
  const DeltaNetDims& d = delta_dims;
  const int64_t n = batch.size(), n_v = d.n_v_heads;
  float* b = delta_ba_buf.data();       // [n][n_v]
  float* alpha = b + n * n_v;           // [n][n_v]
  float* mixed = delta_out_buf.data();  // ssm_ba's [n][2 n_v], before it is split
  const bool fused = l.delta_ba.rows() > 0;
  kernels::MatmulJob jobs[4] = {{&l.delta_qkv, delta_qkv_buf.data()},
                                {&l.delta_z, delta_z_buf.data()}};
  size_t n_jobs = 2;
  if (fused) {
    jobs[n_jobs++] = {&l.delta_ba, mixed};
  } else {
    jobs[n_jobs++] = {&l.delta_beta, b};
    jobs[n_jobs++] = {&l.delta_alpha, alpha};
  }
  kernels::matmul_batch({jobs, n_jobs}, h.data(), n, pool, workspace);
  if (fused) {
    // ssm_ba's held rows are [b of the held V heads | a of them].
    for (int64_t t = 0; t < n; ++t) {
      std::copy_n(mixed + t * 2 * n_v, n_v, b + t * n_v);
      std::copy_n(mixed + t * 2 * n_v + n_v, n_v, alpha + t * n_v);
    }
  }
  const DeltaNetWeights w{l.delta_conv.data(), l.delta_dt_bias.data(), l.delta_a.data(),
                          l.delta_norm.data(), l.delta_k_head.data()};
  delta_net_mix(d, w, batch, layer, kv,
                {delta_qkv_buf.data(), delta_z_buf.data(), b, alpha, delta_out_buf.data()},
                options.isa, delta_scratch, pool);
  kernels::matmul(l.delta_out, delta_out_buf.data(), n, out, pool, workspace);
}

}  // namespace herd::engine
