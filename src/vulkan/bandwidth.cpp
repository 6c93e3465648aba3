#include "vulkan/bandwidth.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"
#include "vulkan/device_info.h"
#include "vulkan/recorder.h"

namespace herd::vulkan {

CopyBandwidth measure_copy_bandwidth(Context& context, size_t bytes, int copies) {
  HERD_CHECK(bytes > 0 && copies > 0);
  Buffer a(context, bytes, BufferKind::kDevice, "the bandwidth test's source");
  Buffer b(context, bytes, BufferKind::kDevice, "the bandwidth test's destination");
  Recorder r(context);
  r.begin();
  for (int i = 0; i < copies; ++i) {
    // Back and forth: each copy reads what the one before wrote (the recorder's barrier).
    if (i % 2 == 0) {
      r.copy(a, 0, b, 0, bytes);
    } else {
      r.copy(b, 0, a, 0, bytes);
    }
  }
  r.submit_and_wait();  // warm-up: first touches of the memory, driver set-up
  const auto start = std::chrono::steady_clock::now();
  r.submit_and_wait();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  CopyBandwidth result;
  result.bytes = bytes;
  result.copies = copies;
  result.seconds = elapsed.count();
  result.gb_per_s = 2.0 * double(bytes) * copies / std::max(result.seconds, 1e-9) / 1e9;
  return result;
}

double measure_copy_bandwidth_gbs(int index) {
  const std::unique_ptr<Context> context = Context::create(index);
  return measure_copy_bandwidth(*context).gb_per_s;
}

}  // namespace herd::vulkan
