#include "server/serving.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <ctime>

#include "server/http_server.h"
#include "server/response.h"
#include "util/open_files.h"

namespace herd::server {
namespace {

// The socket of the connection `req` came on, found by its addresses: cpp-httplib 0.11
// (Debian's) hands handlers no socket and no way to ask whether the client is still there.
// -1 when none matches. The connection stays open while its handler runs, so the socket
// found is this connection's for that long.
int connection_socket(const httplib::Request& req) {
  auto port_and_address = [](const sockaddr_storage& a, std::string& address) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& in = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
      address = text;
      return static_cast<int>(ntohs(in.sin_port));
    }
    if (a.ss_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
      address = text;
      return static_cast<int>(ntohs(in6.sin6_port));
    }
    return -1;
  };
  for (const int fd : open_file_descriptors()) {
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
      continue;
    }
    std::string local_address, peer_address;
    if (port_and_address(local, local_address) == req.local_port &&
        port_and_address(peer, peer_address) == req.remote_port &&
        peer_address == req.remote_addr) {
      return fd;
    }
  }
  return -1;
}

// Whether the client of a connection has gone: it closed (or reset) the connection. A
// client that only half-closes after sending its request counts as gone too; HTTP clients
// do not do that while they wait for a response.
bool client_gone(int fd) {
  if (fd < 0) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

// Writes what one step of a stream produced (`out`), else `keep_alive` after kKeepAlive of
// silence, else nothing. A failed write means the client went away: its request is cancelled
// at once, which frees the slot. False ends the response.
bool write_events(httplib::DataSink& sink, std::string& out, engine::RequestStream& stream,
                  Clock::time_point& last_write, std::string_view keep_alive) {
  if (out.empty() && Clock::now() - last_write > kKeepAlive) out = keep_alive;
  if (out.empty()) return true;
  last_write = Clock::now();
  if (!sink.write(out.data(), out.size())) {
    stream.cancel();
    return false;
  }
  return true;
}

}  // namespace

Collected collect(engine::RequestStream& stream, const httplib::Request& req) {
  const int fd = connection_socket(req);
  Collected c;
  for (;;) {
    if (!stream.cancelled() && client_gone(fd)) stream.cancel();
    engine::StreamUpdate u = stream.wait(kWaitSlice);
    c.text += u.text;
    c.tokens.insert(c.tokens.end(), u.tokens.begin(), u.tokens.end());
    c.logprobs.insert(c.logprobs.end(), u.logprobs.begin(), u.logprobs.end());
    c.scores.insert(c.scores.end(), u.scores.begin(), u.scores.end());
    if (u.finish) {
      c.finish = *u.finish;
      return c;
    }
  }
}

ApiError generation_error(const engine::Finish& finish) {
  return ApiError(500, "generation failed: " + finish.error, "server_error", "",
                  "generation_failed");
}

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void stream_reply(httplib::Response& res, const char* content_type, ReplyStream r,
                  std::string_view keep_alive, StreamStep step) {
  auto reply = std::make_shared<ReplyStream>(std::move(r));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      content_type,
      [reply, keep_alive = std::string(keep_alive), step = std::move(step)](
          size_t, httplib::DataSink& sink) {
        const engine::StreamUpdate u = reply->stream->wait(kWaitSlice);
        if (reply->keep_tokens) {
          reply->tokens.insert(reply->tokens.end(), u.tokens.begin(), u.tokens.end());
        }
        std::string out;
        step(u, reply->tokens, out);
        if (u.finish) {
          const bool ok = sink.write(out.data(), out.size());
          sink.done();
          return ok;
        }
        return write_events(sink, out, *reply->stream, reply->last_write, keep_alive);
      },
      [reply](bool success) {
        if (!success) reply->stream->cancel();
        reply->in_flight.reset();
      });
}

void write_openai_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), e.to_json());
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

uint64_t Serving::next_id() {
  return server_->next_id_.fetch_add(1);
}

std::unique_ptr<InFlight> Serving::in_flight() {
  return std::make_unique<InFlight>(server_->in_flight_);
}

std::shared_ptr<engine::RequestStream> Serving::submit(engine::GenerationParams params,
                                                       std::shared_ptr<const JsonGrammar> grammar,
                                                       const char* prompt_param) {
  return server_->submit(*model_, *scheduler_, std::move(params), std::move(grammar), prompt_param);
}

}  // namespace herd::server
