#include "tools/allocator.h"

#include <cstdlib>

#if CARAPACE_WITH_MIMALLOC
#include <mimalloc.h>
#endif

namespace carapace {

std::string allocator_in_use() {
#if CARAPACE_WITH_MIMALLOC
  // Linked is not enough: malloc (and calloc) must resolve to it, not to the C library.
  void* probe = std::calloc(1, 64);
  bool served = mi_is_in_heap_region(probe);
  std::free(probe);
  if (served) {
    int v = mi_version();  // 209 for 2.0.9
    return "mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
  }
#endif
  return "system";
}

}  // namespace carapace
