// The device's memory bandwidth as a buffer-to-buffer copy measures it: what a decode,
// which reads every weight once per token, can at best approach (the issue's "bandwidth
// the decode reached against the device's measured copy bandwidth"). A measurement, not a
// claim: it says what this device did in this run.
#pragma once

#include <cstddef>

#include "vulkan/context.h"

namespace herd::vulkan {

struct CopyBandwidth {
  size_t bytes = 0;  // of each copy
  int copies = 0;    // in the timed submission
  double seconds = 0;
  double gb_per_s = 0;  // bytes read plus bytes written, per second (10^9 bytes)
};

// Copies a device-local buffer of `bytes` into another, `copies` times in one submission,
// after one untimed warm-up submission. Throws herd::Error("[vulkan] ...") when the device
// cannot hold the two buffers.
CopyBandwidth measure_copy_bandwidth(Context& context, size_t bytes = size_t(256) << 20,
                                     int copies = 8);

}  // namespace herd::vulkan
