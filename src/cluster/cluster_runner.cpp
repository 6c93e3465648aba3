// ClusterRunner's public methods and the forward through the pipeline: each stage's worker
// (and a chain's receiver), sending a batch to a stage's ranks and gathering its result.
// Forming a pod is in pod_forming.cpp, a lost node in recovery.cpp (ClusterRunner::forward
// with it), status() and cluster_json() in cluster_status.cpp.
#include "cluster/cluster_runner.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/cluster_runner_state.h"
#include "net/activations.h"
#include "util/error.h"

namespace herd::cluster {

namespace {

// How long a stage may take to answer one batch. A dead node is caught much sooner by the
// heartbeat; this only bounds a node that answers pings but never the batch.
constexpr net::Millis kResultTimeout{600000};

// Micro-batches of a batch for a pipeline of n_stages: one piece when there is nothing to
// overlap; otherwise pieces small enough that every stage has work (a long prompt in
// chunks of at least 16 tokens, about 4 per stage; a few decode tokens in n_stages groups).
// A long prompt starts with a half-size chunk (so the next stage starts sooner) and so
// usually ends with one (so the previous stage idles less at the end): less bubble than
// equal chunks, at the same chunk efficiency in the middle.
std::vector<engine::Batch> split_batch(const engine::Batch& batch, size_t n_stages) {
  const size_t n = static_cast<size_t>(batch.size());
  if (n_stages <= 1 || n <= 1) return {batch};
  std::vector<size_t> sizes;
  if (n >= 64) {
    const size_t piece = std::max<size_t>(16, (n + 4 * n_stages - 1) / (4 * n_stages));
    sizes.push_back(piece / 2);
    for (size_t done = piece / 2; done < n; done += sizes.back()) {
      sizes.push_back(std::min(piece, n - done));
    }
  } else {
    const size_t piece = (n + n_stages - 1) / n_stages;
    for (size_t done = 0; done < n; done += sizes.back())
      sizes.push_back(std::min(piece, n - done));
  }
  std::vector<engine::Batch> pieces;
  size_t begin = 0;
  for (size_t size : sizes) {
    engine::Batch b;
    for (size_t t = begin; t < begin + size; ++t) {
      b.add(batch.tokens[t], batch.seq[t], batch.pos[t], batch.want_logits[t] != 0);
    }
    pieces.push_back(std::move(b));
    begin += size;
  }
  return pieces;
}

// Bytes of the FORWARD frame a stage of a chain sends each rank of the next: header, batch
// layout, activations and the stage times so far (docs/protocol.md).
uint64_t link_frame_bytes(uint64_t n_tokens, int64_t n_embd, net::WireDType dtype,
                          uint64_t n_times) {
  return net::kFrameHeaderSize + 4 + 13 * n_tokens + 17 +
         n_tokens * net::wire_row_bytes(static_cast<uint64_t>(n_embd), dtype) + 4 + 8 * n_times;
}

}  // namespace

ClusterRunner::Impl::~Impl() {
  for (auto& s : stages) s->in.close();
  for (auto& s : stages) {
    if (s->worker.joinable()) s->worker.join();
  }
  for (auto& s : stages) s->sent.close();
  for (auto& s : stages) {
    if (s->receiver.joinable()) s->receiver.join();
  }
  for (auto& s : stages) {
    for (RankRunner& rank : s->ranks) {
      if (rank.remote) rank.remote->close();
      rank.ring.reset();
    }
  }
  for (RankRunner& spare : spares) spare.remote->close();
  heartbeat.reset();
}

void ClusterRunner::Impl::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex);
  if (error.empty()) error = message;
}

void ClusterRunner::Impl::finish(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++n_finished;
    if (!job.failed) finished.push_back(std::move(job));
  }
  changed.notify_all();
}

void ClusterRunner::Impl::pass_on(StageRunner& s, Job job) {
  if (job.failed || s.chain_end + 1 == stages.size()) {
    finish(std::move(job));
  } else {
    stages[s.chain_end + 1]->in.push(std::move(job));
  }
}

// A stage this process runs (or holds a rank of) runs each batch to its end here; the head
// of a chain of nodes only sends it, and its receiver waits for the result, so that the
// next micro-batch goes out while the chain works on this one.
void ClusterRunner::Impl::worker(StageRunner& s) {
  while (std::optional<Job> job = s.in.pop()) {
    bool broken;
    {
      std::lock_guard<std::mutex> lock(mutex);
      broken = !error.empty();
    }
    if (!broken && !job->failed) {
      try {
        if (s.all_remote) {
          send_batch(s, *job);
        } else {
          run_stage(s, *job);
        }
      } catch (const std::exception& e) {
        fail(e.what());
        job->failed = true;
      }
    } else {
      job->failed = true;
    }
    if (s.all_remote) {
      s.sent.push(std::move(*job));
    } else {
      pass_on(s, std::move(*job));
    }
  }
}

void ClusterRunner::Impl::receiver(StageRunner& s) {
  while (std::optional<Job> job = s.sent.pop()) {
    bool broken;
    {
      std::lock_guard<std::mutex> lock(mutex);
      broken = !error.empty();
    }
    if (!broken && !job->failed) {
      try {
        receive_result(s, *job);
      } catch (const std::exception& e) {
        fail(e.what());
        job->failed = true;
      }
    } else {
      job->failed = true;
    }
    pass_on(s, std::move(*job));
  }
}

void ClusterRunner::Impl::run_stage(StageRunner& s, Job& job) {
  if (s.chained) return;  // its chain's head sent the batch on and received the result
  send_batch(s, job);
  receive_result(s, job);
}

// Every rank gets the batch (and the input activations) first; then this process runs its
// own rank, whose all-reduces meet the remote ranks' as they compute.
void ClusterRunner::Impl::send_batch(StageRunner& s, Job& job) {
  const HParams& hp = info.hp;
  const auto n = static_cast<uint32_t>(job.batch.size());
  const bool embeds = s.ranks[0].assignment.shard.embedding;
  const float* input = job.data.empty() ? nullptr : job.data.data();
  job.sent_at = Clock::now();
  job.frame_id = ++s.next_id;
  job.bytes_sent = 0;
  net::Forward request;
  request.batch = std::move(job.batch);
  if (!embeds) {
    request.activations = net::encode_activations(
        job.data, n, static_cast<uint32_t>(hp.hidden_width()), options.wire_dtype, s.wire);
  }
  try {
    // Encoded once for every rank. The bytes counted are the frames' own (a connection's
    // counters also move with heartbeats, and with frames that arrive while we look).
    const net::Payload payload = net::encode(request);
    const net::ConstBytes parts[2] = {payload.head, payload.tail};  // no stage times
    for (RankRunner& rank : s.ranks) {
      if (!rank.remote) continue;
      rank.remote->send_frame_parts(
          net::FrameHeader{net::MessageType::FORWARD, 0, job.frame_id, payload.size()}, parts);
      job.bytes_sent += net::kFrameHeaderSize + payload.size();
    }
  } catch (...) {
    job.batch = std::move(request.batch);
    throw;
  }
  job.batch = std::move(request.batch);
  for (RankRunner& rank : s.ranks) {
    if (rank.remote) continue;
    const auto t0 = Clock::now();
    rank.part->forward(job.batch, input, rank.output, rank.ring.get());
    rank.compute_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }
}

// The next frame from `rank` of the last stage of s's chain. While it waits, the other nodes
// of the chain are watched. When anything goes wrong in the chain (a connection failed: the
// heartbeat's verdict, or it closed; a node reported an ERROR: a bad batch, or a stage link
// that broke), the failure reported is the one of the earliest stage: a node that dies makes
// the next stage's link fail, which closes the links after it, so the later errors are
// consequences. A short grace lets the earlier reports arrive.
net::Frame ClusterRunner::Impl::receive_from_chain(StageRunner& s, RankRunner& rank) {
  if (s.chain_end == static_cast<size_t>(s.index)) return rank.remote->recv_frame(kResultTimeout);
  const auto deadline = Clock::now() + kResultTimeout;
  const auto first_failure = [&](const std::string& fallback) -> std::string {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (size_t i = static_cast<size_t>(s.index); i <= s.chain_end; ++i) {
      for (RankRunner& other : stages[i]->ranks) {
        try {
          // Throws "[net] peer 'name (address)': ..." for a failed connection.
          std::optional<net::Frame> frame = other.remote->try_recv_frame(net::Millis(0));
          // The last stage's ranks send results too: only an ERROR of theirs counts.
          if (!frame || (i == s.chain_end && frame->header.type != net::MessageType::ERROR)) {
            continue;
          }
          if (frame->header.type != net::MessageType::ERROR) {
            net::throw_unexpected(*frame, net::MessageType::ERROR, other.remote->peer_name());
          }
          const net::ErrorReply e = net::decode_error(frame->payload());
          return "[cluster] node '" + other.node_name + "': " + net::printable(e.message);
        } catch (const std::exception& e) {
          return e.what();
        }
      }
    }
    return fallback;
  };
  for (;;) {
    std::optional<net::Frame> frame;
    try {
      frame = rank.remote->try_recv_frame(net::Millis(100));
    } catch (const std::exception& e) {
      throw Error(first_failure(e.what()));
    }
    if (frame && frame->header.type != net::MessageType::ERROR) return std::move(*frame);
    if (frame) {
      const net::ErrorReply e = net::decode_error(frame->payload());
      throw Error(
          first_failure("[cluster] node '" + rank.node_name + "': " + net::printable(e.message)));
    }
    // The stages before the last send this process nothing but an ERROR.
    for (size_t i = static_cast<size_t>(s.index); i <= s.chain_end; ++i) {
      for (RankRunner& other : stages[i]->ranks) {
        if (&other == &rank) continue;
        std::optional<net::Frame> got;
        try {
          if (i == s.chain_end) {
            if (other.remote->is_open()) continue;
            throw Error("cluster", "node '" + other.node_name + "': its connection failed");
          }
          got = other.remote->try_recv_frame(net::Millis(0));
        } catch (const std::exception& e) {
          throw Error(first_failure(e.what()));
        }
        if (!got) continue;
        std::string text;
        try {
          if (got->header.type != net::MessageType::ERROR) {
            net::throw_unexpected(*got, net::MessageType::ERROR, other.remote->peer_name());
          }
          text = "[cluster] node '" + other.node_name +
                 "': " + net::printable(net::decode_error(got->payload()).message);
        } catch (const std::exception& e) {
          text = e.what();
        }
        throw Error(first_failure(text));
      }
    }
    if (Clock::now() > deadline) {
      throw Error("cluster", "node '" + rank.node_name + "': no result within " +
                                 std::to_string(kResultTimeout.count()) + " ms");
    }
  }
}

void ClusterRunner::Impl::receive_result(StageRunner& s, Job& job) {
  const HParams& hp = info.hp;
  const auto n = static_cast<uint32_t>(job.batch.size());
  StageRunner& end = *stages[s.chain_end];
  const bool logits = end.ranks[0].assignment.shard.output;
  const size_t chain = s.chain_end + 1 - static_cast<size_t>(s.index);
  uint64_t received = 0;
  std::vector<uint64_t> upstream_ns;  // the chain's stages before its last
  for (size_t i = 0; i < end.ranks.size(); ++i) {
    RankRunner& rank = end.ranks[i];
    if (!rank.remote) continue;
    net::Frame frame = receive_from_chain(s, rank);
    received += net::kFrameHeaderSize + frame.header.length;
    if (frame.header.type == net::MessageType::ERROR) {
      const net::ErrorReply e = net::decode_error(frame.payload());
      throw Error("cluster", "node '" + rank.node_name + "': " + net::printable(e.message));
    }
    const net::Result result = net::expect_message<net::Result>(frame, rank.remote->peer_name());
    const auto [vb, ve] = rank.vocab(hp.n_vocab);
    // Logits: this rank's vocabulary rows; hidden states: rank 0 sends them, others none.
    const auto rows = static_cast<uint32_t>(logits ? job.batch.n_logits() : i == 0 ? n : 0);
    const auto cols = static_cast<uint32_t>(logits ? ve - vb : hp.hidden_width());
    if (frame.header.id != job.frame_id ||
        result.kind != (logits ? net::ResultKind::LOGITS : net::ResultKind::HIDDEN) ||
        result.output.rows != rows || result.output.cols != cols ||
        result.upstream_ns.size() != chain - 1) {
      throw Error("cluster", "node '" + rank.node_name + "' answered batch " +
                                 std::to_string(frame.header.id) + " with " +
                                 std::to_string(result.output.rows) + "x" +
                                 std::to_string(result.output.cols) + " (" +
                                 std::to_string(result.upstream_ns.size()) +
                                 " stage times), expected batch " + std::to_string(job.frame_id) +
                                 ", " + std::to_string(rows) + "x" + std::to_string(cols) + " (" +
                                 std::to_string(chain - 1) + ")");
    }
    rank.output.resize(static_cast<size_t>(rows) * cols);
    net::decode_activations(result.output, rank.output);
    rank.compute_ns = result.compute_ns;
    if (upstream_ns.empty()) upstream_ns = result.upstream_ns;
  }

  // The stage's output: rank 0's hidden states, or the ranks' logit columns side by side.
  uint64_t compute_ns = 0;
  for (const RankRunner& rank : end.ranks) compute_ns = std::max(compute_ns, rank.compute_ns);
  if (!logits || end.ranks.size() == 1) {
    std::swap(job.data, end.ranks[0].output);
  } else {
    const size_t n_logits = static_cast<size_t>(job.batch.n_logits());
    const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
    job.data.assign(n_logits * n_vocab, 0.0f);
    for (const RankRunner& rank : end.ranks) {
      const auto [vb, ve] = rank.vocab(hp.n_vocab);
      const size_t width = static_cast<size_t>(ve - vb);
      for (size_t t = 0; t < n_logits; ++t) {
        std::copy_n(rank.output.data() + t * width, width,
                    job.data.data() + t * n_vocab + static_cast<size_t>(vb));
      }
    }
  }

  count_stage_stats(s, job, compute_ns, upstream_ns, received);
}

// Per stage: its compute time; the coordinator's bytes at the ends of the chain; the time
// the chain was busy with this batch (since it was sent, or since the previous result
// came when batches queued) to its last stage, less the stages' compute before it.
void ClusterRunner::Impl::count_stage_stats(StageRunner& s, const Job& job, uint64_t compute_ns,
                                            const std::vector<uint64_t>& upstream_ns,
                                            uint64_t received) {
  const HParams& hp = info.hp;
  const auto n = static_cast<uint32_t>(job.batch.size());
  const size_t chain = s.chain_end + 1 - static_cast<size_t>(s.index);
  const auto now = Clock::now();
  const auto busy_from = std::max(job.sent_at, s.last_result);
  s.last_result = now;
  double busy = std::chrono::duration<double>(now - busy_from).count();
  for (size_t k = 0; k < chain; ++k) {
    StageRunner& stage = *stages[static_cast<size_t>(s.index) + k];
    const bool last = k + 1 == chain;
    const double seconds = static_cast<double>(last ? compute_ns : upstream_ns[k]) * 1e-9;
    std::lock_guard<std::mutex> lock(stage.stats_mutex);
    stage.stats.batches += 1;
    stage.stats.tokens += n;
    stage.stats.compute_seconds += seconds;
    stage.stats.busy_seconds += last ? std::max(seconds, busy) : seconds;
    busy -= seconds;
    if (k == 0) stage.stats.bytes_sent += job.bytes_sent;
    if (last) stage.stats.bytes_received += received;
    if (k > 0) {
      stage.stats.link_bytes_received +=
          stage.ranks.size() * link_frame_bytes(n, hp.hidden_width(), options.wire_dtype, k);
    }
  }
}

std::unique_ptr<ClusterRunner> ClusterRunner::open(const std::string& path,
                                                   const ClusterOptions& options) {
  for (size_t i = 0; i < options.peers.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (options.peers[i] == options.peers[j]) {
        throw Error("cluster", "peer " + options.peers[i] + " is given twice in --peers");
      }
    }
  }
  auto state = std::make_unique<State>(path, options);
  std::vector<std::string> unreachable, failed_loads;
  std::unique_ptr<Impl> impl = form_pod(*state, options.peers, false, unreachable, failed_loads);
  state->seq_len.resize(static_cast<size_t>(impl->plan.n_seq));
  state->event("formed", "pod formed: " + impl->describe());
  return std::unique_ptr<ClusterRunner>(new ClusterRunner(std::move(state), std::move(impl)));
}

void ClusterRunner::Impl::forward(const engine::Batch& batch, std::vector<float>& logits) {
  Impl& r = *this;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.error.empty()) throw Error("cluster", "the cluster failed earlier: " + r.error);
    r.finished.clear();
    r.n_finished = 0;
  }
  // Recurrent state operations since the last batch, on every rank before this batch.
  if (!r.pending_states.empty()) r.run_states({});
  const auto start = Clock::now();
  std::vector<engine::Batch> pieces = split_batch(batch, r.stages.size());
  if (pieces.size() == 1) {
    // Nothing to overlap (one decode token): the stages run on this thread, which saves a
    // hand-off between threads per stage (tens of microseconds each on a busy machine).
    Job job;
    job.batch = std::move(pieces[0]);
    try {
      for (const auto& stage : r.stages) r.run_stage(*stage, job);
    } catch (const std::exception& e) {
      r.fail(e.what());
      job.failed = true;
    }
    r.finish(std::move(job));
  } else {
    for (size_t i = 0; i < pieces.size(); ++i) {
      Job job;
      job.index = i;
      job.batch = std::move(pieces[i]);
      r.stages[0]->in.push(std::move(job));
    }
  }
  std::unique_lock<std::mutex> lock(r.mutex);
  r.changed.wait(lock, [&] { return r.n_finished == pieces.size(); });
  r.forward_seconds += seconds_since(start);
  if (!r.error.empty()) {
    // The first failure as its module reported it ("[cluster] node 'a': ..."): not wrapped
    // in a second "[cluster]".
    throw r.error.starts_with('[') ? Error(r.error) : Error("cluster", r.error);
  }
  std::sort(r.finished.begin(), r.finished.end(),
            [](const Job& a, const Job& b) { return a.index < b.index; });
  if (r.finished.size() == 1) {
    logits = std::move(r.finished[0].data);
    return;
  }
  logits.clear();
  for (const Job& job : r.finished) logits.insert(logits.end(), job.data.begin(), job.data.end());
}

std::vector<std::string> ClusterRunner::Impl::lost_nodes() const {
  std::vector<std::string> lost;
  auto add = [&](int node) {
    const std::string& address = nodes[static_cast<size_t>(node)].address;
    if (std::find(lost.begin(), lost.end(), address) == lost.end()) lost.push_back(address);
  };
  for (const auto& s : stages) {
    for (const RankRunner& rank : s->ranks) {
      if (rank.remote && !rank.remote->is_open()) add(rank.node);
    }
  }
  return lost;
}

std::string ClusterRunner::Impl::describe() const {
  const Impl& r = *this;
  std::string text = r.plan.parallel + " of " + std::to_string(r.stages.size()) + " stages:";
  for (const auto& s : r.stages) {
    text += " " + s->name + " [" + std::to_string(s->stats.layer_begin) + ", " +
            std::to_string(s->stats.layer_end) + ")";
  }
  for (size_t i = 0; i < r.spares.size(); ++i) {
    text += (i == 0 ? "; spares: " : ", ") + r.spares[i].node_name + " for stage " +
            std::to_string(r.spares[i].assignment.stage);
    if (r.spares[i].assignment.n_ranks > 1) {
      text += " rank " + std::to_string(r.spares[i].assignment.rank);
    }
  }
  return text + "; local " + std::to_string(r.pool->size()) + " threads";
}

ClusterRunner::ClusterRunner(std::unique_ptr<State> state, std::shared_ptr<Impl> pod)
    : state_(std::move(state)), pod_(std::move(pod)) {
  n_ctx_ = pod_->plan.n_ctx;
  n_seq_ = pod_->plan.n_seq;
  remember_pod(*pod_);
  mender_ = std::thread([this] { mend(); });
}

ClusterRunner::~ClusterRunner() {
  {
    std::lock_guard<std::mutex> lock(mender_mutex_);
    stopping_ = true;
  }
  mender_wake_.notify_all();
  mender_.join();
}

std::shared_ptr<ClusterRunner::Impl> ClusterRunner::pod() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return pod_;
}

void ClusterRunner::set_pod(std::shared_ptr<Impl> pod) {
  std::shared_ptr<Impl> old;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    old = std::move(pod_);
    pod_ = std::move(pod);
  }
  // The old pod says BYE to its nodes here, outside the lock (cluster_json() is not kept waiting).
}

const HParams& ClusterRunner::hparams() const {
  return state_->info.hp;
}
int64_t ClusterRunner::n_ctx() const {
  return n_ctx_;
}
int64_t ClusterRunner::n_seq() const {
  return n_seq_;
}
const gguf::File& ClusterRunner::file() const {
  return state_->file;
}
const ModelInfo& ClusterRunner::info() const {
  return state_->info;
}
const Plan& ClusterRunner::plan() const {
  return last_plan_;
}
const std::vector<NodeProfile>& ClusterRunner::nodes() const {
  return last_nodes_;
}

}  // namespace herd::cluster
