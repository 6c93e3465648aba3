// TempDir: a fresh directory under $TMPDIR for one test, removed again when it goes out of
// scope. The name carries the process id, so parallel test processes never share one.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace herd {

class TempDir {
 public:
  // $TMPDIR/herd-<prefix>-<pid>-<name>, emptied first.
  TempDir(const std::string& prefix, const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("herd-" + prefix + "-" + std::to_string(getpid()) + "-" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  operator const std::filesystem::path&() const { return path_; }
  std::filesystem::path operator/(const char* child) const { return path_ / child; }

 private:
  std::filesystem::path path_;
};

}  // namespace herd
