// Memory read bandwidth of this machine, measured: every thread of the pool streams its
// share of a buffer much larger than the caches; the best of a few passes is reported.
// Used by `herd bench` (decode roofline) and, later, by node profiles.
#pragma once

#include <cstddef>

#include "util/thread_pool.h"

namespace herd {

// Bytes per second. buffer_bytes should be several times the last-level cache.
double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{512} << 20,
                              int passes = 5);

}  // namespace herd
