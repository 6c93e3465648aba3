// A node daemon serving on a free port of 127.0.0.1 in a thread of this process, for tests
// of pods in one process (cluster_test, the server's speculative pod test).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "cluster/node.h"

namespace herd::cluster {

class TestNode {
 public:
  explicit TestNode(const std::string& name, std::filesystem::path cache,
                    bool use_model_files = true,
                    std::optional<store::Store> own_store = std::nullopt) {
    NodeOptions o;
    o.name = name;
    o.threads = 1;
    o.cache_dir = std::move(cache);
    o.bandwidth_gbs = 10;  // skip the measurements
    o.measure_matmul = false;
    o.use_model_files = use_model_files;
    o.own_store = std::move(own_store);
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex_);
      log_ += std::string(line) + "\n";
    };
    server_ = std::make_unique<NodeServer>(std::move(o));
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestNode() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  std::string log() {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }

 private:
  std::unique_ptr<NodeServer> server_;
  std::thread thread_;
  std::mutex mutex_;
  std::string log_;
};

}  // namespace herd::cluster
