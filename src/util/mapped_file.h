// MappedFile: a read-only memory map of a whole file (POSIX mmap, so Linux and macOS).
// Move-only; the mapping lives as long as the object. An empty file maps to an empty span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace herd {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws herd::Error("[io] ...") naming the path when the file cannot be opened or mapped.
  static MappedFile open(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the OS this process no longer needs the pages wholly inside [p, p + n) (after
  // their content was copied elsewhere, e.g. repacked weights): they leave the process's
  // resident set and are read again from the file if touched. A hint; never fails.
  void release(const uint8_t* p, size_t n) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole file into a string; throws herd::Error("[io] ...") on failure.
std::string read_file(const std::string& path);

}  // namespace herd
