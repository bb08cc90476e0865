#include "decode/attention/chunk_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/kernels/prompt_attention/amx_attention.h"

namespace sinklm {
namespace {

// Key columns per block of the blocked path: a block's bf16 scores for 12 heads and a 256-query chunk
// ([12, 256, 256], 1.5 MiB) stay in a core's L2 between the product, the fold and the mix.
constexpr int64_t kKeyBlock = 256;

double score_scale(const torch::Tensor& queries) { return 1.0 / std::sqrt(static_cast<double>(queries.size(-1))); }

// Whether any of the chunk's T queries sees a column of `positions` (the block is skipped otherwise).
bool block_seen(const torch::Tensor& positions, const WindowVisibility& v, int64_t T) {
  const auto* p = positions.data_ptr<int64_t>();
  return std::any_of(p, p + positions.numel(), [&](int64_t x) { return v.seen_by_any(x, T); });
}

// out [H, m, n] (float32, columns of a larger buffer) += alpha · a [H, m, k] · b [H, k, n], the product in a's
// dtype: float32 accumulates in place (baddbmm: no temporary, no extra pass), bf16 is widened first.
void add_product(torch::Tensor out, const torch::Tensor& a, const torch::Tensor& b, double alpha) {
  if (out.numel() == 0 || a.size(-1) == 0) return;
  if (a.scalar_type() == torch::kFloat32) torch::baddbmm_out(out, out, a, b, 1, alpha);
  else out.add_(torch::matmul(a, b), alpha);
}

const torch::Tensor& shape_source(const std::vector<KeyRun>& runs) {
  SINKLM_ASSERT(!runs.empty(), "chunk attention needs at least one run of keys");
  for (const auto& run : runs)
    SINKLM_ASSERT(run.queries.dim() == 3 && run.keys.dim() == 3 && run.keys.sizes() == run.values.sizes() &&
                      run.positions.numel() == run.keys.size(1) && run.queries.sizes() == runs[0].queries.sizes(),
                  "key run: queries [H, T, D], keys and values [H, N, D], positions [N]");
  return runs[0].queries;
}

// The running softmax with the sink column already folded in: its logit as the max, 1 as the sum, its value
// (or nothing) as the output.
OnlineSoftmax start_with_sink(const SinkColumn& sink, const torch::Tensor& sink_queries, int64_t H, int64_t T,
                              int64_t D) {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  OnlineSoftmax state{torch::full({H, T}, -std::numeric_limits<float>::infinity(), opts), torch::zeros({H, T}, opts),
                      torch::zeros({H, T, D}, opts)};
  if (!sink.present()) return state;
  state.max.copy_(sink_column_logits(sink, 3, torch::kFloat32, sink_queries).squeeze(-1).expand({H, T}));
  state.sum.fill_(1.0f);
  if (sink.value.defined()) state.out.copy_(sink.value.to(torch::kFloat32).view({H, 1, D}).expand({H, T, D}));
  return state;
}

// q: the runs' queries, shapes already checked (shape_source).
torch::Tensor blocked_chunk_attention(const std::vector<KeyRun>& runs, const torch::Tensor& q,
                                      const WindowVisibility& visibility, const SinkColumn& sink,
                                      const torch::Tensor& sink_queries) {
  const int64_t H = q.size(0), T = q.size(1), D = q.size(2);
  const auto scale = static_cast<float>(score_scale(q));
  auto state = start_with_sink(sink, sink_queries, H, T, D);
  for (const auto& run : runs) {
    if (amx_attention_applies(run.queries)) {  // the whole run on AMX tiles: its scores never leave L1
      amx_attention_fold(run.queries, run.keys, run.values, run.positions, visibility, scale, state);
      continue;
    }
    for (int64_t b = 0; b < run.keys.size(1); b += kKeyBlock) {
      const int64_t n = std::min(kKeyBlock, run.keys.size(1) - b);
      const auto positions = run.positions.narrow(0, b, n).contiguous();
      if (!block_seen(positions, visibility, T)) continue;
      auto scores = torch::bmm(run.queries, run.keys.narrow(1, b, n).transpose(1, 2));  // [H, T, n]
      fold_score_block(scores, positions, visibility, scale, state);                  // now probabilities
      state.out.add_(torch::bmm(scores, run.values.narrow(1, b, n)));                 // [H, T, D]
    }
  }
  return state.out.div_(state.sum.unsqueeze(-1));
}

}  // namespace

torch::Tensor chunk_attention_reference(const std::vector<KeyRun>& runs, const WindowVisibility& visibility,
                                        const SinkColumn& sink, const torch::Tensor& sink_queries) {
  const auto& q = shape_source(runs);
  const int64_t H = q.size(0), T = q.size(1);
  std::vector<torch::Tensor> positions;
  for (const auto& run : runs) positions.push_back(run.positions);
  // scores = mask + q · kᵀ / sqrt(D) over every run's columns, each product written into its columns of one
  // buffer that starts as the mask (0 or -inf): no concatenation, no pass for the scale or the mask.
  auto hidden = visible_columns(torch::cat(positions), visibility, T).logical_not();  // [T, ΣN]
  auto scores = torch::zeros(hidden.sizes(), torch::kFloat32)
                    .masked_fill(hidden, -std::numeric_limits<float>::infinity())
                    .to(q.device())
                    .expand({H, T, hidden.size(1)})
                    .clone(torch::MemoryFormat::Contiguous);  // [H, T, ΣN]
  int64_t column = 0;
  for (const auto& run : runs) {
    add_product(scores.narrow(-1, column, run.keys.size(1)), run.queries, run.keys.transpose(1, 2), score_scale(q));
    column += run.keys.size(1);
  }
  auto probs32 = softmax_with_sink(scores, sink, sink_queries);  // [H, T, ΣN]
  auto probs = probs32.to(q.scalar_type());
  auto out = torch::zeros({H, T, q.size(2)}, q.options().dtype(torch::kFloat32));
  if (auto from_sink = sink_value_output(probs32, sink); from_sink.defined()) out += from_sink;
  column = 0;
  for (const auto& run : runs) {
    const int64_t n = run.keys.size(1);
    if (n > 0) out += torch::matmul(probs.narrow(-1, column, n), run.values).to(torch::kFloat32);
    column += n;
  }
  return out;
}

torch::Tensor chunk_attention(const std::vector<KeyRun>& runs, const WindowVisibility& visibility,
                              const SinkColumn& sink, const torch::Tensor& sink_queries) {
  const auto& q = shape_source(runs);
  // The fold writes probabilities in the products' dtype, so the blocked path needs a dtype the kernel takes.
  if (sink.softmax() && fold_score_block_kernel_applies(q))
    return blocked_chunk_attention(runs, q, visibility, sink, sink_queries);
  return chunk_attention_reference(runs, visibility, sink, sink_queries);
}

}  // namespace sinklm
