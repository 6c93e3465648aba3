#include "util/large_pages.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace herd {

size_t huge_page_bytes() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  return size_t{2} << 20;  // x86-64 and arm64 with 4 KiB base pages
#else
  return 0;
#endif
}

void* allocate_large(size_t bytes, size_t alignment) {
  const size_t huge = huge_page_bytes();
  if (huge > 0 && bytes >= huge) {
    void* p = nullptr;
    if (posix_memalign(&p, huge, bytes) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
#endif
    return p;
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

}  // namespace herd
