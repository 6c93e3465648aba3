#include "hub/pod_clients.h"

#include <poll.h>
#include <sys/socket.h>

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace herd::hub {
namespace {

using Clock = std::chrono::steady_clock;

// Linux's flag against SIGPIPE on a send; macOS has none (httplib sets SO_NOSIGPIPE there).
#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;
#endif

// What the wire may carry beyond an answer's body: its status line, headers and chunk sizes.
constexpr size_t kWireAllowance = 64 << 10;

// One call's bytes on the wire: how many it may still read, and until when.
struct WireBudget {
  size_t bytes_left = 0;
  Clock::time_point deadline;
  bool over_bytes = false, over_time = false;
};

// A plain socket as httplib's client reads it, every read counted against the budget and
// waiting no later than its deadline: a pod that trickles a header line, or a chunk size
// with no end, is cut off, where httplib would grow its line buffer for as long as it came.
class CountedStream final : public httplib::Stream {
 public:
  CountedStream(int fd, WireBudget& budget) : fd_(fd), budget_(budget) {}

  bool is_readable() const override { return ready(POLLIN); }
  bool is_writable() const override { return ready(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      // httplib reads headers a byte at a time: read ahead, within the budget.
      if (budget_.bytes_left == 0) {
        budget_.over_bytes = true;
        return -1;
      }
      if (!ready(POLLIN)) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buffer_, std::min(sizeof buffer_, budget_.bytes_left), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      budget_.bytes_left -= static_cast<size_t>(n);
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::copy_n(buffer_ + begin_, n, ptr);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!ready(POLLOUT)) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, kSendFlags);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;  // not asked by httplib's client
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  socket_t socket() const override { return fd_; }

 private:
  // Waits for the socket until the deadline; false (over_time when it passed) if not ready.
  bool ready(short events) const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(budget_.deadline - Clock::now());
    if (left.count() <= 0) {
      budget_.over_time = true;
      return false;
    }
    pollfd p{fd_, events, 0};
    int n;
    do {
      n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    } while (n < 0 && errno == EINTR);
    if (n == 0) budget_.over_time = true;
    return n > 0;
  }

  int fd_;
  WireBudget& budget_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// httplib's plain-HTTP client reading through a CountedStream.
class CountedClient final : public httplib::ClientImpl {
 public:
  CountedClient(const std::string& host, int port, WireBudget& budget)
      : httplib::ClientImpl(host, port), budget_(budget) {}

 private:
  bool process_socket(const Socket& socket,
                      std::function<bool(httplib::Stream& strm)> callback) override {
    CountedStream stream(socket.sock, budget_);
    return callback(stream);
  }

  WireBudget& budget_;
};

// Ends an https call at its deadline, whatever phase it is in (httplib reads TLS itself, so
// a CountedStream cannot time its reads): httplib's stop() shuts the socket down, the one
// thing it allows from another thread. Joined when the call is over.
class Watchdog {
 public:
  Watchdog(httplib::ClientImpl& client, Clock::time_point deadline)
      : thread_([this, &client, deadline] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_changed_.wait_until(lock, deadline, [this] { return done_; })) {
            fired_ = true;
            client.stop();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_changed_.notify_one();
    thread_.join();
  }
  bool fired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false, fired_ = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace

PodAnswer PodClients::send(const PodAddress& address, httplib::Request request,
                           const AnswerLimits& limits, time_t connect_seconds) const {
  PodAnswer answer;
  WireBudget wire;
  wire.bytes_left = limits.max_bytes + kWireAllowance;
  wire.deadline = Clock::now() + limits.deadline;
  size_t body_bytes = 0;
  bool refused = false;
  try {
    std::unique_ptr<httplib::ClientImpl> client;
    if (address.scheme == "https") {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
      auto tls = std::make_unique<httplib::SSLClient>(address.host, address.port);
      if (!ca_file_.empty()) tls->set_ca_cert_path(ca_file_.c_str());
      client = std::move(tls);
#endif
    } else {
      client = std::make_unique<CountedClient>(address.host, address.port, wire);
    }
    if (!client || !client->is_valid()) {
      answer.failure = "it has a URL this hub cannot reach (" + address.base_url() + ")";
      return answer;
    }
    if (!address.ip.empty() && address.ip != address.host) {
      client->set_hostname_addr_map({{address.host, address.ip}});
    }
    client->set_connection_timeout(connect_seconds);
    // Over https a read waits at most the deadline (plain HTTP: CountedStream's own waits).
    client->set_read_timeout(std::max<time_t>(1, limits.deadline.count()));
    // An inflated body is counted as it comes out, but a pod has no reason to compress.
    request.set_header("Accept-Encoding", "identity");
    auto handler = std::move(request.response_handler);
    auto receiver = std::move(request.content_receiver);
    request.response_handler = [&](const httplib::Response& r) {
      answer.status = r.status;
      answer.content_type = r.get_header_value("Content-Type");
      refused = handler && !handler(r);
      return !refused;
    };
    request.content_receiver = [&](const char* data, size_t n, uint64_t offset, uint64_t total) {
      body_bytes += n;
      if (body_bytes > limits.max_bytes) return !(answer.over_limit = true);
      if (Clock::now() > wire.deadline) return !(wire.over_time = true);
      if (receiver) return receiver(data, n, offset, total);
      answer.body.append(data, n);
      return true;
    };
    std::optional<Watchdog> watchdog;
    if (address.scheme == "https") watchdog.emplace(*client, wire.deadline);
    const httplib::Result r = client->send(request);
    if (watchdog && watchdog->fired()) wire.over_time = true;
    watchdog.reset();
    answer.over_limit = answer.over_limit || wire.over_bytes;
    if (answer.over_limit) {
      answer.failure = "it answered over " + std::to_string(limits.max_bytes) + " bytes";
    } else if (wire.over_time) {
      answer.failure = "it did not answer within " + std::to_string(limits.deadline.count()) + " s";
    } else if (refused) {
      answer.failure = "it answered " + std::to_string(answer.status);
    } else if (!r) {
      answer.failure = "it did not answer (" + httplib::to_string(r.error()) + ")";
    }
  } catch (const std::exception& e) {
    // httplib parses the host and port again; a receiver may throw
    answer.failure = std::string("it could not be asked (") + e.what() + ")";
  }
  if (!answer.answered()) {
    answer.status = 0;
    answer.body.clear();
  }
  return answer;
}

PodAnswer PodClients::get(const PodAddress& address, const std::string& path,
                          const AnswerLimits& limits, time_t connect_seconds) const {
  httplib::Request request;
  request.method = "GET";
  request.path = path;
  return send(address, std::move(request), limits, connect_seconds);
}

PodAnswer PodClients::post(const PodAddress& address, const std::string& path, std::string body,
                           const AnswerLimits& limits, const std::string& authorization,
                           time_t connect_seconds) const {
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = std::move(body);
  request.set_header("Content-Type", "application/json");
  if (!authorization.empty()) request.set_header("Authorization", authorization);
  return send(address, std::move(request), limits, connect_seconds);
}

}  // namespace herd::hub
