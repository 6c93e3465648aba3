#include "util/open_files.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string>

namespace herd {

std::vector<int> open_file_descriptors() {
#if defined(__linux__)
  const char* kDirectory = "/proc/self/fd";
#else
  const char* kDirectory = "/dev/fd";
#endif
  std::vector<int> fds;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kDirectory, ec)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (error == std::errc() && end == name.data() + name.size() && fd >= 0) fds.push_back(fd);
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

}  // namespace herd
