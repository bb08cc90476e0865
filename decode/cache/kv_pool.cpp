#include "decode/cache/kv_pool.h"

#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {

torch::Tensor kv_keys_zeros(std::vector<int64_t> shape, const torch::TensorOptions& options) {
  std::swap(shape[shape.size() - 2], shape[shape.size() - 1]);
  return torch::zeros(shape, options).transpose(-2, -1);
}

KvPool::KvPool(int64_t layers, int64_t heads, int64_t sinks, int64_t recent, int64_t head_dim, torch::ScalarType dtype,
               torch::Device device, int64_t page_slots)
    : layers_(layers),
      heads_(heads),
      sinks_(sinks),
      recent_(recent),
      head_dim_(head_dim),
      page_slots_(page_slots),
      dtype_(dtype),
      device_(device) {}

KvPool::Slot KvPool::acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t p = 0; p < static_cast<int64_t>(pages_.size()); ++p)
    for (int64_t s = 0; s < page_slots_; ++s)
      if (!pages_[p].used[s]) {
        pages_[p].used[s] = true;
        for (int64_t l = 0; l < layers_; ++l) {
          pages_[p].keys[l][s].zero_();
          pages_[p].values[l][s].zero_();
        }
        return {p, s};
      }
  Page page;
  const auto opts = torch::TensorOptions().dtype(dtype_).device(device_);
  for (int64_t l = 0; l < layers_; ++l) {
    page.keys.push_back(kv_keys_zeros({page_slots_, heads_, sinks_ + recent_, head_dim_}, opts));
    page.values.push_back(torch::zeros({page_slots_, heads_, sinks_ + recent_, head_dim_}, opts));
  }
  page.used.assign(page_slots_, false);
  page.used[0] = true;
  pages_.push_back(std::move(page));
  return {static_cast<int64_t>(pages_.size()) - 1, 0};
}

void KvPool::release(Slot slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  SINKLM_ASSERT(slot.page >= 0 && slot.page < static_cast<int64_t>(pages_.size()) && pages_[slot.page].used[slot.index],
                "releasing a slot that is not held");
  pages_[slot.page].used[slot.index] = false;
}

std::shared_ptr<KvPool> KvPools::get(int64_t layers, int64_t heads, int64_t sinks, int64_t recent, int64_t head_dim,
                                     torch::ScalarType dtype, int64_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& pool = pools_[{layers, heads, sinks, recent, head_dim, dtype, tag}];
  if (!pool) pool = std::make_shared<KvPool>(layers, heads, sinks, recent, head_dim, dtype, device_);
  return pool;
}

}  // namespace sinklm
