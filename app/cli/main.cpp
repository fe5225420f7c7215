// moesim: a discrete-event performance simulator for Mixture-of-Experts inference.
#if __has_include(<malloc.h>)
#include <malloc.h>
#endif

#include "app/cli/cli.hpp"

int main(int argc, char** argv) {
#if defined(M_TRIM_THRESHOLD) && defined(M_MMAP_THRESHOLD)  // glibc's
  // A serving step at 1,024 GPUs frees and allocates tens of MB (its dispatch and all-to-all
  // matrices). By default glibc hands freed memory at the heap's top back to the kernel, and
  // serves blocks over its threshold with their own mmap, so each step faulted its pages in again:
  // a sixth of such a run in the kernel. Freed memory stays with the process for reuse instead
  // (what it holds at its peak, which it reached anyway).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: HEAP_MAX_SIZE / 2 on 64-bit
#endif
  return moesim::run_cli(argc, argv);
}
