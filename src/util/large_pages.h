// Memory for big buffers read over and over (repacked weights): decode streams every byte
// once per token, so with 4 KiB pages it takes a TLB miss every 64 cache lines. Where the
// OS offers larger pages without privileges, the buffer asks for them.
//   Linux: 2 MiB-aligned, madvise(MADV_HUGEPAGE) over its whole 2 MiB extents (transparent
//          huge pages are often "madvise" only); the tail stays in small pages.
//   macOS: plain aligned memory. Apple Silicon's pages are 16 KiB already (4x fewer
//          misses), and superpages (VM_FLAGS_SUPERPAGE_SIZE_ANY, mach_vm_allocate) are an
//          x86_64 feature of the kernel, refused on arm64.
// docs/portability.md lists the calls per system.
#pragma once

#include <cstddef>

namespace herd {

// The huge page size the allocator aligns big buffers to (2 MiB), or 0 where it asks for
// none.
size_t huge_page_bytes();

// `bytes` of memory aligned to at least `alignment` (a power of two, at most 4096), huge
// pages where huge_page_bytes() > 0 and bytes >= it. Free it with std::free. nullptr when
// out of memory. The advice is only advice: without huge pages the memory works the same.
void* allocate_large(size_t bytes, size_t alignment);

}  // namespace herd
