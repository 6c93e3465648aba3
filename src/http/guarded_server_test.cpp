// GuardedServer against raw sockets on loopback: what a hostile client sends, byte by byte.
#include "http/guarded_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace herd::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

HttpLimits test_limits() {
  HttpLimits l;
  l.max_body_bytes = 4096;
  l.max_header_bytes = 2048;
  l.header_timeout = 600ms;
  l.body_timeout = 2000ms;
  l.max_connections = 8;
  l.max_connections_per_address = 4;
  return l;
}

class GuardedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    server_.Delete("/items/([a-z]+)", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content("deleted " + req.matches[1].str(), "text/plain");
    });
    server_.Get("/throw", [](const httplib::Request&, httplib::Response&) {
      throw std::runtime_error("the handler failed");
    });
    server_.Get("/hold", [this](const httplib::Request&, httplib::Response& res) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++held_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
      res.set_content("released", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  void TearDown() override {
    release();
    server_.stop();
    thread_.join();
  }

  int connect_client() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
  static bool send_text(int fd, const std::string& s) {
    return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // What the server sends until it closes, or until `timeout` passes.
  static std::string read_all(int fd, std::chrono::milliseconds timeout = 5000ms) {
    std::string out;
    const auto until = Clock::now() + timeout;
    char buf[4096];
    while (Clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One whole response (by its Content-Length), leaving the connection open.
  static std::string read_response(int fd) {
    std::string out;
    char buf[4096];
    for (;;) {
      const size_t end = out.find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t at = out.find("Content-Length: ");
        const size_t length = at == std::string::npos ? 0 : std::stoul(out.substr(at + 16));
        if (out.size() >= end + 4 + length) return out;
      }
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0) return out;
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  static bool closed_by_server(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) return false;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
    }
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  void wait_held(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    ASSERT_TRUE(changed_.wait_for(lock, 5s, [&] { return held_ >= n; }));
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

  GuardedServer server_{test_limits()};
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int held_ = 0;
  bool released_ = false;
};

TEST_F(GuardedServerTest, ServesAKeepAliveClient) {
  const int fd = connect_client();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(send_text(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
    const std::string r = read_response(fd);
    EXPECT_EQ(r.substr(0, 15), "HTTP/1.1 200 OK") << r;
    EXPECT_EQ(r.substr(r.size() - 1), "5");
  }
  // A chunked body within the limit is read whole.
  ASSERT_TRUE(send_text(fd,
                        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"));
  const std::string r = read_response(fd);
  EXPECT_EQ(r.substr(0, 15), "HTTP/1.1 200 OK") << r;
  EXPECT_EQ(r.substr(r.size() - 1), "7");
  close(fd);
}

TEST_F(GuardedServerTest, AnswersADeleteWithoutABodyAtOnce) {
  // No Content-Length (as Node's fetch sends a DELETE): no body, and the connection goes on.
  const int fd = connect_client();
  for (const char* item : {"abc", "xyz"}) {
    ASSERT_TRUE(
        send_text(fd, std::string("DELETE /items/") + item + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string r = read_response(fd);
    EXPECT_EQ(r.substr(0, 15), "HTTP/1.1 200 OK") << r;
    EXPECT_EQ(r.substr(r.size() - 11), std::string("deleted ") + item) << r;
  }
  // Content-Length: 0 is routed by httplib itself.
  ASSERT_TRUE(send_text(fd, "DELETE /items/q HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  const std::string r = read_response(fd);
  EXPECT_EQ(r.substr(r.size() - 9), "deleted q") << r;
  // A path no Delete() route matches, and a DELETE with a body, are refused unread.
  ASSERT_TRUE(send_text(fd, "DELETE /items/A1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(read_all(fd).substr(0, 12), "HTTP/1.1 404");
  close(fd);
  const int fd2 = connect_client();
  ASSERT_TRUE(send_text(fd2, "DELETE /items/abc HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n"));
  EXPECT_EQ(read_all(fd2).substr(0, 12), "HTTP/1.1 404");
  close(fd2);
}

TEST_F(GuardedServerTest, SlowHeaderLinesEndAtTheDeadline) {
  const int fd = connect_client();
  const auto start = Clock::now();
  ASSERT_TRUE(send_text(fd, "GET /health HTTP/1.1\r\n"));
  std::string answer;
  for (int i = 0; i < 40 && answer.empty(); ++i) {  // a header line every 100 ms, for 4 s
    send_text(fd, "X-Slow-" + std::to_string(i) + ": 1\r\n");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) answer = read_all(fd, 1000ms);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 408") << answer;
  EXPECT_NE(answer.find("did not arrive within 0.6 s"), std::string::npos) << answer;
  EXPECT_LT(seconds, 2.0);
  close(fd);
}

TEST_F(GuardedServerTest, AnIdleConnectionAnswersNothingAndIsClosed) {
  const int fd = connect_client();
  ASSERT_TRUE(send_text(fd, "GET /hea"));  // the request line never ends
  const std::string answer = read_all(fd, 3000ms);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 408") << answer;
  close(fd);
}

TEST_F(GuardedServerTest, CapsHeaderBytes) {
  const int fd = connect_client();
  std::string request = "GET /health HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i)
    request += "X-Filler-" + std::to_string(i) + ": 0123456789abcdef\r\n";
  ASSERT_TRUE(send_text(fd, request));  // over 2048 bytes, no end of headers
  const std::string answer = read_all(fd);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 431") << answer;
  EXPECT_NE(answer.find("limit of 2048 bytes"), std::string::npos);
  close(fd);
}

TEST_F(GuardedServerTest, RefusesAChunkedBodyOverTheCapWithoutReadingItAll) {
  const int fd = connect_client();
  // A chunk of 256 MiB announced; the server answers once the cap (4096 + framing
  // allowance) is passed, while the client has nearly all of it still to send (what it
  // sent beyond the cap sits in the kernel's socket buffers, a few MiB at most).
  ASSERT_TRUE(send_text(fd,
                        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "10000000\r\n"));
  const std::string piece(16384, 'a');
  std::string answer;
  size_t sent = 0;
  while (sent < (size_t{256} << 20) && answer.empty()) {
    if (!send_text(fd, piece)) break;  // the server closed
    sent += piece.size();
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1) > 0) answer = read_all(fd, 1000ms);
  }
  if (answer.empty()) answer = read_all(fd);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
  EXPECT_NE(answer.find("limit of 4096 bytes"), std::string::npos) << answer;
  EXPECT_LT(sent, size_t{64} << 20);
  close(fd);
}

TEST_F(GuardedServerTest, RefusesAnOversizedLengthBeforeTheBody) {
  const int fd = connect_client();
  ASSERT_TRUE(send_text(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 200000000\r\n\r\n"));
  const std::string answer = read_all(fd);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
  EXPECT_NE(answer.find("\"code\":\"body_too_large\""), std::string::npos) << answer;
  close(fd);
}

TEST_F(GuardedServerTest, RefusesCompressedBodies) {
  const int fd = connect_client();
  ASSERT_TRUE(send_text(fd,
                        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
                        "Content-Length: 10\r\n\r\n"));
  const std::string answer = read_all(fd);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 415") << answer;
  close(fd);
}

TEST_F(GuardedServerTest, RefusesABodyForAPathWithoutAHandler) {
  const int fd = connect_client();
  ASSERT_TRUE(
      send_text(fd, "POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string answer = read_all(fd);  // no body sent: answered before reading one
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 404") << answer;
  EXPECT_TRUE(answer.find("POST /nowhere") != std::string::npos);
  close(fd);
  const int fd2 = connect_client();
  ASSERT_TRUE(send_text(fd2, "POST /echo HTTP/1.1\r\nHost: x\r\n\r\n"));  // neither framing
  EXPECT_EQ(read_all(fd2).substr(0, 12), "HTTP/1.1 411");
  close(fd2);
}

TEST_F(GuardedServerTest, EvictsAHalfOpenConnectionForANewcomer) {
  int slow[4];
  for (int& fd : slow) {
    fd = connect_client();
    ASSERT_TRUE(send_text(fd, "GET /health HTTP/1.1\r\nX-Slow: "));
  }
  std::this_thread::sleep_for(100ms);  // all four admitted
  const int fd = connect_client();
  ASSERT_TRUE(send_text(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answer = read_all(fd);
  EXPECT_EQ(answer.substr(0, 15), "HTTP/1.1 200 OK") << answer;
  EXPECT_TRUE(closed_by_server(slow[0]));  // the oldest went
  EXPECT_EQ(server_.connections().evicted, 1);
  for (int s : slow) close(s);
  close(fd);
}

TEST_F(GuardedServerTest, RefusesANewcomerWhenEveryConnectionIsBusy) {
  int busy[4];
  for (int& fd : busy) {
    fd = connect_client();
    ASSERT_TRUE(send_text(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  wait_held(4);
  const int fd = connect_client();
  const std::string answer = read_all(fd, 2000ms);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 503") << answer;
  EXPECT_NE(answer.find("too many connections"), std::string::npos);
  EXPECT_EQ(server_.connections().refused, 1);
  release();
  for (int b : busy) {
    EXPECT_EQ(read_response(b).substr(0, 15), "HTTP/1.1 200 OK");
    close(b);
  }
  close(fd);
}

TEST_F(GuardedServerTest, AnswersAHandlersException500) {
  const int fd = connect_client();
  ASSERT_TRUE(send_text(fd, "GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string answer = read_response(fd);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 500") << answer;
  EXPECT_NE(answer.find("the handler failed"), std::string::npos);
  // The connection and the server go on.
  ASSERT_TRUE(send_text(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(read_response(fd).substr(0, 15), "HTTP/1.1 200 OK");
  close(fd);
}

// stop() does not wait for a half-open connection's header deadline (10 s by default).
TEST(GuardedServerStop, DropsHalfOpenConnections) {
  GuardedServer server{HttpLimits{}};
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listening([&] { server.listen_after_bind(); });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(send(fd, "GET /health HTTP/1.1\r\nX-Slow: ", 30, MSG_NOSIGNAL), 30);
  for (int i = 0; i < 100 && server.connections().open == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(server.connections().open, 1);
  const auto start = Clock::now();
  server.stop();
  listening.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  close(fd);
}

}  // namespace
}  // namespace herd::http
