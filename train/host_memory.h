// A training step allocates and frees the same large host buffers every step (logits, activations, their
// gradients: tens of MB each at CPU scale). glibc serves blocks above its mmap threshold (at most 32 MB) with
// fresh mmap'd pages and unmaps them on free, so every step pays page faults and the kernel's zeroing of
// every page it touches first: about a quarter of a `tiny` step on the CPU. keep_host_memory() serves all
// blocks from the heap and never trims it, so from the second step on every buffer reuses pages the process
// already has. The cost is that memory a step freed is not returned to the system while the process runs.
#pragma once

namespace sinklm {

// Process-wide (glibc mallopt); call before the first large allocation.
void keep_host_memory();

}  // namespace sinklm
