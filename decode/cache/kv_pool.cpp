#include "decode/cache/kv_pool.h"

#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {

torch::Tensor kv_keys_zeros(std::vector<int64_t> shape, const torch::TensorOptions& options) {
  std::swap(shape[shape.size() - 2], shape[shape.size() - 1]);
  return torch::zeros(shape, options).transpose(-2, -1);
}

KvLayer KvLayer::zeros(KvFormat format, std::vector<int64_t> lead, int64_t heads, int64_t sinks, int64_t entries,
                       int64_t head_dim, torch::Device device) {
  const auto shape = [&](std::vector<int64_t> tail) {
    auto s = lead;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  const auto opts = torch::TensorOptions().device(device);
  KvLayer l;
  l.keys = kv_keys_zeros(shape({heads, entries, head_dim}), opts.dtype(kv_storage_dtype(format)));
  l.values = torch::zeros(shape({heads, entries, head_dim}), opts.dtype(kv_storage_dtype(format)));
  if (kv_quantized(format)) {
    l.key_scales = torch::zeros(shape({heads, entries}), opts.dtype(kKvScaleDtype));
    l.value_scales = torch::zeros(shape({heads, entries}), opts.dtype(kKvScaleDtype));
  }
  if (kv_sinks_exact(format)) {
    l.sink_keys = torch::zeros(shape({heads, sinks, head_dim}), opts.dtype(torch::kFloat32));
    l.sink_values = torch::zeros(shape({heads, sinks, head_dim}), opts.dtype(torch::kFloat32));
  }
  return l;
}

std::vector<torch::Tensor*> KvLayer::entry_tensors() {
  std::vector<torch::Tensor*> out{&keys, &values};
  if (key_scales.defined()) out.insert(out.end(), {&key_scales, &value_scales});
  return out;
}

std::vector<const torch::Tensor*> KvLayer::all() const {
  std::vector<const torch::Tensor*> out;
  for (const auto* t : {&keys, &values, &key_scales, &value_scales, &sink_keys, &sink_values})
    if (t->defined()) out.push_back(t);
  return out;
}

namespace {

template <typename Fn>
KvLayer map_layer(const KvLayer& l, const Fn& fn) {
  const auto apply = [&](const torch::Tensor& t) { return t.defined() ? fn(t) : t; };
  return {apply(l.keys), apply(l.values), apply(l.key_scales), apply(l.value_scales), apply(l.sink_keys),
          apply(l.sink_values)};
}

}  // namespace

KvLayer KvLayer::narrow(int64_t first, int64_t count) const {
  return map_layer(*this, [&](const torch::Tensor& t) { return t.narrow(0, first, count); });
}

KvLayer KvLayer::select(int64_t index) const {
  return map_layer(*this, [&](const torch::Tensor& t) { return t[index]; });
}

KvLayer KvLayer::unsqueeze() const {
  return map_layer(*this, [](const torch::Tensor& t) { return t.unsqueeze(0); });
}

int64_t KvLayer::bytes() const {
  int64_t bytes = 0;
  for (const auto* t : all()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
  return bytes;
}

KvPool::KvPool(int64_t layers, int64_t heads, int64_t sinks, int64_t recent, int64_t head_dim, KvFormat format,
               torch::Device device, int64_t page_slots)
    : layers_(layers),
      heads_(heads),
      sinks_(sinks),
      recent_(recent),
      head_dim_(head_dim),
      page_slots_(page_slots),
      format_(format),
      device_(device) {}

KvPool::Slot KvPool::acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t p = 0; p < static_cast<int64_t>(pages_.size()); ++p)
    for (int64_t s = 0; s < page_slots_; ++s)
      if (!pages_[p].used[s]) {
        pages_[p].used[s] = true;
        for (const auto& layer : pages_[p].layers)
          for (const auto* t : layer.all()) (*t)[s].zero_();
        return {p, s};
      }
  Page page;
  for (int64_t l = 0; l < layers_; ++l)
    page.layers.push_back(KvLayer::zeros(format_, {page_slots_}, heads_, sinks_, sinks_ + recent_, head_dim_, device_));
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
                                     KvFormat format, int64_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& pool = pools_[{layers, heads, sinks, recent, head_dim, format, tag}];
  if (!pool) pool = std::make_shared<KvPool>(layers, heads, sinks, recent, head_dim, format, device_);
  return pool;
}

}  // namespace sinklm
