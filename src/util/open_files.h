// The file descriptors this process has open, as the OS lists them: /proc/self/fd on
// Linux, /dev/fd on macOS and the BSDs (fdesc(5): one entry per open descriptor of the
// reading process). docs/portability.md lists the calls per system.
#pragma once

#include <vector>

namespace herd {

// Ascending. Includes the descriptor of the listing itself while it is read (closed again
// on return: callers probe each one, e.g. with getsockname). Empty when the directory
// cannot be read. Thread-safe; other threads may open and close descriptors meanwhile.
std::vector<int> open_file_descriptors();

}  // namespace herd
