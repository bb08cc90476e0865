// RAII mixed precision: inside the guard, CUDA matmuls and attention run in `dtype` (bf16 by default)
// while parameters, reductions and the loss stay float32. A no-op on the CPU, where sinklm runs fp32.
#pragma once
#include <ATen/autocast_mode.h>
#include <c10/core/Device.h>

namespace sinklm {

class AutocastGuard {
 public:
  explicit AutocastGuard(c10::Device device, c10::ScalarType dtype = c10::kBFloat16) : active_(device.is_cuda()) {
    if (!active_) return;
    previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    previous_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
  }
  ~AutocastGuard() {
    if (!active_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, previous_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
    at::autocast::clear_cache();
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::kBFloat16;
};

}  // namespace sinklm
