#include "http/guarded_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "http/guarded_stream.h"
#include "util/error.h"
#ifdef HERD_HTTP_TLS
#include "http/tls_transport.h"
#endif

namespace herd::http {
namespace {

// Threads beyond max_connections, for connections that are refused (they answer 503 and
// close at once) and for evicted ones still ending.
constexpr size_t kSpareThreads = 32;

// httplib's task queue, a thread per task: a thread is started whenever every thread is
// busy, up to max_threads (then tasks wait: the connection caps keep that rare), and kept
// for the next task. So an accepted connection never waits behind connections that hold
// threads, which a fixed pool makes it do.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> task) override {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    if (tasks_.size() > idle_ && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { work(); });
    }
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stopping, and nothing is left to serve
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();  // process_and_close_socket: catches what it throws
      lock.lock();
    }
  }

  const size_t max_threads_;
  std::mutex mutex_;  // guards what follows (threads_: also joined by shutdown() alone)
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

// The stream of the connection this thread serves: the pre- and post-routing handlers get
// only the request and response, and must reach its limits' state. Each connection is
// served by one thread from start to end, so a thread's stream is its connection's.
thread_local GuardedStream* t_stream = nullptr;

// OpenAI's shape of an error, as serve's own (server/response.h).
std::string error_json(int status, const std::string& message, const char* code) {
  const nlohmann::json e = {{"error",
                             {{"message", message},
                              {"type", status >= 500 ? "server_error" : "invalid_request_error"},
                              {"param", nullptr},
                              {"code", code}}}};
  return e.dump();
}

void refuse(httplib::Response& res, int status, const std::string& message, const char* code) {
  res.status = status;
  res.set_content(error_json(status, message, code), "application/json");
  res.set_header("Connection", "close");
  if (t_stream) t_stream->close_after_request();
}

std::string seconds_text(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(t.count()) / 1000);
  return text;
}

const char* status_text(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
  }
  return "Error";
}

struct Refusal {
  int status = 0;
  std::string message;
  const char* code = "";
};

// What a read past a limit is answered with; nullopt: none was.
std::optional<Refusal> overrun_refusal(GuardedStream::Overrun overrun, const HttpLimits& limits) {
  switch (overrun) {
    case GuardedStream::Overrun::kNone:
      return std::nullopt;
    case GuardedStream::Overrun::kHeaderBytes:
      return Refusal{431,
                     "the request's line and headers are larger than the limit of " +
                         std::to_string(limits.max_header_bytes) + " bytes",
                     "headers_too_large"};
    case GuardedStream::Overrun::kHeaderTime:
      return Refusal{
          408, "the request's headers did not arrive within " + seconds_text(limits.header_timeout),
          "timeout"};
    case GuardedStream::Overrun::kBodyBytes:
      return Refusal{413,
                     "the request body is larger than the limit of " +
                         std::to_string(limits.max_body_bytes) + " bytes",
                     "body_too_large"};
    case GuardedStream::Overrun::kBodyTime:
      return Refusal{408,
                     "the request body did not arrive within " + seconds_text(limits.body_timeout),
                     "timeout"};
  }
  return std::nullopt;
}

// A whole response written without httplib (the request could not be parsed, or the
// connection is refused before it has a stream).
std::string canned_response(int status, const std::string& message, const char* code) {
  const std::string body = error_json(status, message, code);
  return "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + (status == 503 ? "Retry-After: 1\r\n" : "") + "\r\n" + body;
}

std::string peer_address(int fd) {
  sockaddr_storage a{};
  socklen_t size = sizeof a;
  char host[NI_MAXHOST] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &size) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&a), size, host, sizeof host, nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return "?";
  }
  return host;
}

bool is_digits(const std::string& s) {
  return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

// As httplib decides it (case aside, the whole value must be "chunked").
bool is_chunked(std::string coding) {
  for (char& c : coding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return coding == "chunked";
}

}  // namespace

GuardedServer::GuardedServer(HttpLimits limits)
    : limits_(limits),
      table_({.max_connections = limits.max_connections,
              .max_per_address = limits.max_connections_per_address}) {
  const size_t max_threads =
      static_cast<size_t>(std::max(1, limits_.max_connections)) + kSpareThreads;
  new_task_queue = [max_threads] { return new ConnectionThreads(max_threads); };
  set_payload_max_length(limits_.max_body_bytes);
  set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return screen(req, res); });
  set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!t_stream) return;
    if (const auto r = overrun_refusal(t_stream->overrun(), limits_)) {
      refuse(res, r->status, r->message, r->code);
    }
  });
  set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message += std::string(": ") + e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(error_json(500, message, "internal_error"), "application/json");
  });
}

GuardedServer::~GuardedServer() = default;

void GuardedServer::use_tls(const std::string& cert_file, const std::string& key_file) {
#ifdef HERD_HTTP_TLS
  tls_ = std::make_unique<TlsContext>(cert_file, key_file);
#else
  throw Error("http", "TLS: this herd was built without OpenSSL");
#endif
}

void GuardedServer::stop() {
  httplib::Server::stop();
  table_.shutdown_evictable();
}

GuardedServer& GuardedServer::Post(const std::string& pattern, Handler handler) {
  post_routes_.emplace_back(pattern);
  httplib::Server::Post(pattern, std::move(handler));
  return *this;
}

GuardedServer& GuardedServer::Delete(const std::string& pattern, Handler handler) {
  delete_routes_.emplace_back(std::regex(pattern), handler);
  httplib::Server::Delete(pattern, std::move(handler));
  return *this;
}

bool GuardedServer::answer_bodiless_delete(const httplib::Request& req,
                                           httplib::Response& res) const {
  for (const auto& [route, handler] : delete_routes_) {
    // The handler reads its path's captures from req.matches, which httplib sets when it
    // routes; a copy of the request takes them here (they point into the copy's path).
    httplib::Request routed = req;
    if (!std::regex_match(routed.path, routed.matches, route)) continue;
    handler(routed, res);
    return true;
  }
  return false;
}

bool GuardedServer::has_post_route(const std::string& path) const {
  for (const std::regex& route : post_routes_) {
    if (std::regex_match(path, route)) return true;
  }
  return false;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  ConnectionTable::Entry entry{.fd = sock, .address = peer_address(sock)};
#ifdef SO_NOSIGPIPE
  const int one = 1;
  setsockopt(sock, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  try {
    if (!table_.admit(entry)) {
      const std::string refusal = canned_response(
          503,
          "too many connections (" + std::to_string(limits_.max_connections_per_address) +
              " from one address, " + std::to_string(limits_.max_connections) + " in all)",
          "too_many_connections");
      [[maybe_unused]] const ssize_t n =
          ::send(sock, refusal.data(), refusal.size(), kSendFlags | MSG_DONTWAIT);
    } else {
      std::unique_ptr<Transport> transport;
#ifdef HERD_HTTP_TLS
      if (tls_) transport = tls_->accept(sock, limits_.header_timeout);
#endif
      if (!tls_) transport = std::make_unique<SocketTransport>(sock);
      if (transport) {
        const GuardedStream::IoTimeouts io{
            std::chrono::seconds(read_timeout_sec_) +
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::microseconds(read_timeout_usec_)),
            std::chrono::seconds(write_timeout_sec_) +
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::microseconds(write_timeout_usec_))};
        GuardedStream stream(sock, *transport, limits_, io);
        t_stream = &stream;
        try {
          ok = serve_connection(stream, entry);
        } catch (...) {
          t_stream = nullptr;
          throw;
        }
        t_stream = nullptr;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[http] a connection from %s ended by an error: %s\n",
                 entry.address.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "[http] a connection from %s ended by an unknown error\n",
                 entry.address.c_str());
  }
  table_.remove(entry);  // before close: the fd is not shut down by an eviction after this
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

bool GuardedServer::serve_connection(GuardedStream& stream, ConnectionTable::Entry& entry) {
  const auto keep_waiting = [this] { return svr_sock_ != INVALID_SOCKET; };
  bool ok = false;
  for (size_t left = std::max<size_t>(keep_alive_max_count_, 1); left > 0; --left) {
    table_.set_evictable(entry, true);  // idle, then reading headers
    if (!stream.wait_request(std::chrono::seconds(keep_alive_timeout_sec_), keep_waiting)) break;
    bool connection_closed = false;
    ok = process_request(stream, /*close_connection=*/left == 1, connection_closed,
                         [&](httplib::Request&) {
                           table_.set_evictable(entry, false);
                           stream.begin_body();
                         });
    if (const auto r = overrun_refusal(stream.overrun(), limits_); r && stream.written() == 0) {
      // The request line itself overran: httplib gives up without an answer.
      const std::string answer = canned_response(r->status, r->message, r->code);
      stream.write(answer.data(), answer.size());
    }
    if (!ok || connection_closed || stream.closing()) break;
  }
  return ok;
}

httplib::Server::HandlerResponse GuardedServer::screen(const httplib::Request& req,
                                                       httplib::Response& res) const {
  const std::string encoding = req.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity") {
    refuse(res, 415,
           "compressed request bodies are not taken (Content-Encoding: " + encoding +
               "): send the body as it is",
           "unsupported_encoding");
    return HandlerResponse::Handled;
  }
  const bool has_length = req.has_header("Content-Length");
  const bool has_coding = req.has_header("Transfer-Encoding");
  const std::string length_text = req.get_header_value("Content-Length");
  if (req.get_header_value_count("Content-Length") > 1 ||
      req.get_header_value_count("Transfer-Encoding") > 1 || (has_length && has_coding) ||
      (has_length && !is_digits(length_text))) {
    refuse(res, 400, "the body's length is ambiguous (Content-Length and Transfer-Encoding)",
           "bad_framing");
    return HandlerResponse::Handled;
  }
  if (has_coding && !is_chunked(req.get_header_value("Transfer-Encoding"))) {
    refuse(res, 501,
           "Transfer-Encoding: " + req.get_header_value("Transfer-Encoding") +
               " is not supported (chunked is)",
           "bad_framing");
    return HandlerResponse::Handled;
  }
  const uint64_t length = has_length ? std::stoull(length_text) : 0;
  // httplib reads a body for these methods (without a length: to the connection's end).
  const bool reads_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                          req.method == "DELETE" || req.method == "PRI";
  if (!(has_coding || length > 0 || (reads_body && !has_length))) return HandlerResponse::Unhandled;
  if (req.method == "DELETE" && !has_length && !has_coding && answer_bodiless_delete(req, res)) {
    return HandlerResponse::Handled;
  }
  if (req.method != "POST" || !has_post_route(req.path)) {
    refuse(res, 404, "no route for " + req.method + " " + req.path + " takes a body", "no_route");
    return HandlerResponse::Handled;
  }
  if (!has_length && !has_coding) {
    refuse(res, 411, "a POST needs Content-Length or chunked Transfer-Encoding", "length_required");
    return HandlerResponse::Handled;
  }
  if (length > limits_.max_body_bytes) {
    refuse(res, 413,
           "the request body (" + std::to_string(length) + " bytes) is larger than the limit of " +
               std::to_string(limits_.max_body_bytes) + " bytes",
           "body_too_large");
    return HandlerResponse::Handled;
  }
  return HandlerResponse::Unhandled;
}

}  // namespace herd::http
