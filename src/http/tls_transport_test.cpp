// GuardedServer over TLS: a request served through a client that speaks TLS, and a client
// that opens a connection and never finishes its handshake dropped at the header deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "http/guarded_server.h"
#include "http/test_certificate.h"
#include "util/error.h"

namespace herd::http {
namespace {

using namespace std::chrono_literals;

// A self-signed certificate for 127.0.0.1 and its key, as PEM files in `dir`.
void write_self_signed(const std::filesystem::path& dir) {
  TestCertificate certificate;
  ASSERT_TRUE(certificate.sign());
  certificate.write(dir);
}

TEST(GuardedServerTls, ServesOverTlsAndDropsAnUnfinishedHandshake) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("herd-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  write_self_signed(dir);
  HttpLimits limits;
  limits.header_timeout = 500ms;
  limits.max_body_bytes = 4096;
  GuardedServer server(limits);
  EXPECT_THROW(server.use_tls((dir / "cert.pem").string(), (dir / "cert.pem").string()), Error);
  server.use_tls((dir / "cert.pem").string(), (dir / "key.pem").string());
  server.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(std::to_string(req.body.size()), "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listening([&] { server.listen_after_bind(); });

  // A client that connects and sends nothing: no handshake, dropped at the deadline.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const auto start = std::chrono::steady_clock::now();
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 3000), 1);
  char byte;
  EXPECT_LE(recv(fd, &byte, 1, 0), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  close(fd);

  httplib::SSLClient client("127.0.0.1", port);
  client.enable_server_certificate_verification(false);
  const auto r = client.Post("/echo", std::string(1000, 'x'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "1000");
  // Over the limit: refused, the body unread (small enough to sit in the socket's buffers,
  // so the client reads the answer; a far bigger one may see the connection reset first).
  const auto big = client.Post("/echo", std::string(limits.max_body_bytes + 1, 'x'), "text/plain");
  EXPECT_TRUE(big && big->status == 413);

  server.stop();
  listening.join();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace herd::http
