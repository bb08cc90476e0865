// A training step allocates and frees the same large host buffers every step (logits, activations, their
// gradients: tens of MB each at CPU scale); so does every prefill chunk of `stream`, `serve`, `eval` and
// `analyze` (a chunk's [256, 50304] logits alone are 51 MB for a Pythia vocabulary). glibc serves blocks above its mmap threshold (at most 32 MB) with
// fresh mmap'd pages and unmaps them on free, so every step pays page faults and the kernel's zeroing of
// every page it touches first: about a quarter of a `tiny` step on the CPU. keep_host_memory() serves all
// blocks from the heap and never trims it, so from the second step on every buffer reuses pages the process
// already has. The cost is that memory a step freed is not returned to the system while the process runs.
// cli/main.cpp calls it once for every command that runs a model.
#pragma once

namespace sinklm {

// Process-wide (glibc mallopt); call before the first large allocation.
void keep_host_memory();

}  // namespace sinklm
