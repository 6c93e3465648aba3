// PodClients against fake pods (httplib servers, or raw sockets for what httplib's server
// never writes): what a pod answers is read within its limits, whatever it sends.
#include "hub/pod_clients.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
#include <openssl/ssl.h>

#include "http/test_certificate.h"
#endif

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

namespace herd::hub {
namespace {

using Clock = std::chrono::steady_clock;

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;
#endif

// Its routes are set before it listens.
struct FakePod {
  explicit FakePod(const std::function<void(httplib::Server&)>& routes) {
    routes(server);
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~FakePod() {
    server.stop();
    thread.join();
  }
  PodAddress address() const { return {"http", "127.0.0.1", port, "127.0.0.1"}; }
  httplib::Server server;
  int port = 0;
  std::thread thread;
};

// A socket that accepts one connection and writes `head` then `byte` forever (until the
// client goes), for a status line or chunk size httplib would read without end.
struct RawPod {
  explicit RawPod(std::string head, char byte) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
    thread = std::thread([this, head = std::move(head), byte] {
      const int c = ::accept(fd, nullptr, nullptr);
      if (c < 0) return;
#ifdef SO_NOSIGPIPE
      const int on = 1;
      ::setsockopt(c, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on);
#endif
      ::send(c, head.data(), head.size(), kSendFlags);
      const std::string block(16384, byte);
      while (::send(c, block.data(), block.size(), kSendFlags) > 0) sent += block.size();
      ::close(c);
    });
  }
  ~RawPod() {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    thread.join();
  }
  PodAddress address() const {
    return {"http", "127.0.0.1", port, "127.0.0.1"};
  }
  int fd = -1, port = 0;
  std::atomic<size_t> sent{0};
  std::thread thread;
};

TEST(PodClientsTest, ReadsAnAnswerWithinItsCap) {
  FakePod pod([](httplib::Server& server) {
    server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
  });
  const PodClients clients("");
  const PodAnswer a = clients.get(pod.address(), "/health", {1024, std::chrono::seconds(5)});
  ASSERT_TRUE(a.answered()) << a.failure;
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, R"({"status":"ok"})");
  EXPECT_EQ(a.content_type, "application/json");
}

TEST(PodClientsTest, RefusesABodyOverItsCapWithOrWithoutLength) {
  FakePod pod([](httplib::Server& server) {
    server.Get("/long", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(100000, 'x'), "text/plain");
    });
    // Chunked, without end: the cap, not the pod, ends it.
    server.Get("/endless", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        const std::string block(65536, 'y');
        return sink.write(block.data(), block.size());
      });
    });
  });
  const PodClients clients("");
  for (const char* path : {"/long", "/endless"}) {
    const PodAnswer a = clients.get(pod.address(), path, {4096, std::chrono::seconds(20)});
    EXPECT_FALSE(a.answered()) << path;
    EXPECT_TRUE(a.over_limit) << path;
    EXPECT_EQ(a.failure, "it answered over 4096 bytes") << path;
    EXPECT_TRUE(a.body.empty()) << path;
  }
}

TEST(PodClientsTest, CountsWhatAStreamingReceiverGets) {
  FakePod pod([](httplib::Server& server) {
    server.Post("/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        const std::string event = "data: {}\n\n";
        return sink.write(event.data(), event.size());
      });
    });
  });
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = "{}";
  size_t got = 0;
  request.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
    got += n;
    return true;
  };
  const PodAnswer a =
      PodClients("").send(pod.address(), std::move(request), {50000, std::chrono::seconds(20)});
  EXPECT_TRUE(a.over_limit);
  EXPECT_LE(got, size_t{50000});
  EXPECT_GT(got, size_t{40000});
}

TEST(PodClientsTest, EndlessHeaderOrChunkSizeIsCutAtTheWireCap) {
  const PodClients clients("");
  for (const auto& [head, byte] :
       {std::pair<std::string, char>{"HTTP/1.1 200 OK\r\nX-A: ", 'a'},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", '0'}}) {
    RawPod pod(head, byte);
    const PodAnswer a = clients.get(pod.address(), "/health", {4096, std::chrono::seconds(20)});
    EXPECT_FALSE(a.answered());
    EXPECT_TRUE(a.over_limit) << a.failure;
    // Read no more than the cap and the framing's allowance (what the kernel buffered aside).
    EXPECT_LT(pod.sent.load(), size_t{64} << 20);
  }
}

TEST(PodClientsTest, ATrickleEndsAtTheDeadline) {
  FakePod pod([](httplib::Server& server) {
    server.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return sink.write("x", 1);
      });
    });
  });
  const auto start = Clock::now();
  const PodAnswer a =
      PodClients("").get(pod.address(), "/slow", {1 << 20, std::chrono::seconds(2)});
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_FALSE(a.answered());
  EXPECT_FALSE(a.over_limit);
  EXPECT_EQ(a.failure, "it did not answer within 2 s");
  EXPECT_LT(took, 4.0);
}

TEST(PodClientsTest, ARefusedStatusIsAFailure) {
  FakePod pod([](httplib::Server& server) {
    server.Get("/busy", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content("busy", "text/plain");
    });
  });
  httplib::Request request;
  request.method = "GET";
  request.path = "/busy";
  request.response_handler = [](const httplib::Response& r) { return r.status < 500; };
  const PodAnswer a =
      PodClients("").send(pod.address(), std::move(request), {1024, std::chrono::seconds(5)});
  EXPECT_EQ(a.failure, "it answered 503");
  EXPECT_EQ(a.status, 0);
}

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
// A pod over https that finishes the handshake and then trickles its headers (a byte every
// 100 ms, for ever): the library reads TLS itself, so only the watchdog ends the call.
TEST(PodClientsTest, AnHttpsTrickleEndsAtTheDeadline) {
  std::signal(SIGPIPE, SIG_IGN);  // as `herd hub` does: TLS writes to a closed socket
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("herd-pod-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  http::TestCertificate certificate;
  ASSERT_TRUE(certificate.sign());
  certificate.write(dir);
  const std::string ca = (dir / "cert.pem").string();

  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate(ctx, certificate.cert);
  SSL_CTX_use_PrivateKey(ctx, certificate.key);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::listen(fd, 4);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  std::thread pod([fd, ctx] {
    const int c = ::accept(fd, nullptr, nullptr);
    if (c < 0) return;
#ifdef SO_NOSIGPIPE
    const int on = 1;
    ::setsockopt(c, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on);
#endif
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, c);
    if (SSL_accept(ssl) == 1) {
      const std::string head = "HTTP/1.1 200 OK\r\nX-A: ";
      bool up = SSL_write(ssl, head.data(), static_cast<int>(head.size())) > 0;
      for (int i = 0; up && i < 100; ++i) {  // 10 s at most
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        up = SSL_write(ssl, "a", 1) > 0;
      }
    }
    SSL_free(ssl);
    ::close(c);
  });
  const PodAddress address{"https", "127.0.0.1", ntohs(a.sin_port), "127.0.0.1"};
  const auto start = Clock::now();
  const PodAnswer answer = PodClients(ca).get(address, "/health", {4096, std::chrono::seconds(2)});
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(answer.failure, "it did not answer within 2 s");
  EXPECT_LT(took, 4.0);
  pod.join();
  ::close(fd);
  SSL_CTX_free(ctx);
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace herd::hub
