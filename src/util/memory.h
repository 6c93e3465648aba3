// Memory figures of this process and machine, for bench reports and node profiles.
#pragma once

#include <cstddef>

namespace herd {

// The largest resident set this process has had, in bytes (getrusage).
size_t peak_rss_bytes();

}  // namespace herd
