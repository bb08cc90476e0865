#include "core/system/host_memory.h"

#include <malloc.h>

#include <climits>

#include "core/error.h"

namespace sinklm {

void keep_host_memory() {
  // mallopt returns 1 on success; both settings are within glibc's documented ranges.
  SINKLM_ASSERT(mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1, "mallopt refused");
}

}  // namespace sinklm
