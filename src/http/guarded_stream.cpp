#include "http/guarded_stream.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace herd::http {
namespace {

void address_and_port(const sockaddr_storage& a, socklen_t size, std::string& ip, int& port) {
  char host[NI_MAXHOST] = {};
  char service[NI_MAXSERV] = {};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), size, host, sizeof host, service,
                  sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(service);
  }
}

}  // namespace

ssize_t SocketTransport::recv(char* data, size_t size) {
  ssize_t n;
  do {
    n = ::recv(fd_, data, size, 0);
  } while (n < 0 && errno == EINTR);
  return n;
}

ssize_t SocketTransport::send(const char* data, size_t size) {
  ssize_t n;
  do {
    n = ::send(fd_, data, size, kSendFlags);
  } while (n < 0 && errno == EINTR);
  return n;
}

GuardedStream::GuardedStream(int fd, Transport& transport, const HttpLimits& limits,
                             IoTimeouts timeouts)
    : fd_(fd),
      transport_(transport),
      limits_(limits),
      timeouts_(timeouts),
      buffer_(std::make_unique<char[]>(kBufferSize)) {}

bool GuardedStream::wait_request(std::chrono::milliseconds idle,
                                 const std::function<bool()>& keep_waiting) {
  phase_ = Phase::kIdle;
  overrun_ = Overrun::kNone;
  written_ = 0;
  const auto give_up = Clock::now() + idle;
  constexpr std::chrono::milliseconds kSlice{100};
  while (buffer_begin_ == buffer_end_ && transport_.pending() == 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
    if (wait_ready(POLLIN, std::clamp(left, std::chrono::milliseconds(0), kSlice))) break;
    if (left <= kSlice || !keep_waiting()) return false;
  }
  phase_ = Phase::kHeaders;
  phase_bytes_ = 0;
  deadline_ = Clock::now() + limits_.header_timeout;
  return true;
}

void GuardedStream::begin_body() {
  phase_ = Phase::kBody;
  phase_bytes_ = 0;
  deadline_ = Clock::now() + limits_.body_timeout;
}

size_t GuardedStream::allowance() const {
  switch (phase_) {
    case Phase::kHeaders:
      return limits_.max_header_bytes - std::min(phase_bytes_, limits_.max_header_bytes);
    case Phase::kBody: {
      const size_t cap = limits_.max_body_bytes + limits_.body_framing_allowance();
      return cap - std::min(phase_bytes_, cap);
    }
    case Phase::kIdle:
      return 0;  // reads happen after wait_request() only
  }
  return 0;
}

bool GuardedStream::wait_ready(short events, std::chrono::milliseconds timeout) const {
  pollfd p{fd_, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(timeout.count(), 0)));
    if (r < 0 && errno == EINTR) continue;
    // An error or hang-up counts as ready: the read or write that follows says what it was.
    return r > 0;
  }
}

ssize_t GuardedStream::fill() {
  while (transport_.pending() == 0) {
    const auto now = Clock::now();
    if (now >= deadline_) {
      overrun_ = phase_ == Phase::kHeaders ? Overrun::kHeaderTime : Overrun::kBodyTime;
      return -1;
    }
    const auto until_deadline = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now);
    const auto wait = std::min(until_deadline, timeouts_.read);
    if (wait_ready(POLLIN, wait)) break;
    if (until_deadline > timeouts_.read) return -1;  // a silent peer, before the deadline
  }
  const ssize_t n = transport_.recv(buffer_.get(), kBufferSize);
  if (n <= 0) return n;
  buffer_begin_ = 0;
  buffer_end_ = static_cast<size_t>(n);
  return n;
}

ssize_t GuardedStream::read(char* ptr, size_t size) {
  const size_t allowed = allowance();
  if (allowed == 0) {
    if (phase_ == Phase::kHeaders) overrun_ = Overrun::kHeaderBytes;
    if (phase_ == Phase::kBody) overrun_ = Overrun::kBodyBytes;
    return -1;
  }
  if (buffer_begin_ == buffer_end_) {
    const ssize_t n = fill();
    if (n <= 0) return n;
  }
  const size_t n = std::min({size, allowed, buffer_end_ - buffer_begin_});
  std::memcpy(ptr, buffer_.get() + buffer_begin_, n);
  buffer_begin_ += n;
  phase_bytes_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t GuardedStream::write(const char* ptr, size_t size) {
  if (!wait_ready(POLLOUT, timeouts_.write)) return -1;
  const ssize_t n = transport_.send(ptr, size);
  if (n > 0) written_ += static_cast<size_t>(n);
  return n;
}

bool GuardedStream::is_readable() const {
  return buffer_begin_ < buffer_end_ || transport_.pending() > 0 ||
         wait_ready(POLLIN, timeouts_.read);
}

bool GuardedStream::is_writable() const {
  if (!wait_ready(POLLOUT, timeouts_.write)) return false;
  // Writable yet gone: a readable socket whose peek finds the end (the client closed).
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void GuardedStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t size = sizeof a;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &size) == 0) {
    address_and_port(a, size, ip, port);
  }
}

void GuardedStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t size = sizeof a;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size) == 0) {
    address_and_port(a, size, ip, port);
  }
}

}  // namespace herd::http
