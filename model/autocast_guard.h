// RAII mixed precision: inside the guard, matmuls (projections, the LM head) on `device`'s type (CUDA or the
// CPU, where oneDNN runs bf16 with AVX512-BF16) run in `dtype` (bf16 by default) while parameters,
// reductions and the loss stay float32. The previous state of that device type is restored on exit.
#pragma once
#include <ATen/autocast_mode.h>
#include <c10/core/Device.h>

namespace sinklm {

class AutocastGuard {
 public:
  explicit AutocastGuard(c10::Device device, c10::ScalarType dtype = c10::kBFloat16)
      : type_(device.type()),
        previous_enabled_(at::autocast::is_autocast_enabled(type_)),
        previous_dtype_(at::autocast::get_autocast_dtype(type_)) {
    at::autocast::set_autocast_dtype(type_, dtype);
    at::autocast::set_autocast_enabled(type_, true);
  }
  ~AutocastGuard() {
    at::autocast::set_autocast_enabled(type_, previous_enabled_);
    at::autocast::set_autocast_dtype(type_, previous_dtype_);
    at::autocast::clear_cache();
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  // Whether autocast is on for `device`'s type now (what a recomputation must restore).
  static bool enabled(c10::Device device) { return at::autocast::is_autocast_enabled(device.type()); }
  static c10::ScalarType dtype(c10::Device device) { return at::autocast::get_autocast_dtype(device.type()); }

 private:
  c10::DeviceType type_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace sinklm
