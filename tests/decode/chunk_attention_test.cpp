// A prompt chunk's attention against a stream cache's runs of keys (decode/attention/chunk_attention.h): the
// online softmax kernel and the AMX run kernel against their scalar references (model/kernels/
// online_softmax_kernel.h, amx_attention.h), and the blocked
// path against the one-buffer reference, over rings with empty slots, evicted and scrambled positions, blocks no
// query sees, and every sink column.
#include "decode/attention/chunk_attention.h"
#include "model/kernels/prompt_attention/amx_attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

namespace sinklm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Ring positions as a stream cache holds them: recent positions in scrambled slots, some slots empty (-1).
torch::Tensor ring_positions(int64_t capacity, int64_t first, int64_t held, int64_t seed) {
  torch::manual_seed(seed);
  auto positions = torch::full({capacity}, -1, torch::kInt64);
  auto slots = torch::randperm(capacity, torch::kInt64).narrow(0, 0, held);
  positions.index_put_({slots}, torch::arange(first - held, first, torch::kInt64));
  return positions;
}

OnlineSoftmax state_with_history(int64_t H, int64_t T, int64_t D) {
  OnlineSoftmax s{torch::randn({H, T}), torch::rand({H, T}) * 3 + 0.5, torch::randn({H, T, D})};
  s.max.select(1, 0).fill_(-kInf);  // rows that have seen nothing yet
  s.sum.select(1, 0).zero_();
  s.out.select(1, 0).zero_();
  return s;
}

OnlineSoftmax clone(const OnlineSoftmax& s) { return {s.max.clone(), s.sum.clone(), s.out.clone()}; }

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol, const std::string& what) {
  EXPECT_TRUE(torch::allclose(a.to(torch::kFloat32), b.to(torch::kFloat32), rtol, atol))
      << what << ": max difference " << (a.to(torch::kFloat32) - b.to(torch::kFloat32)).abs().max().item<float>();
}

TEST(OnlineSoftmaxKernel, FoldsABlockAsTheScalarReferenceDoes) {
  if (!fold_score_block_kernel_applies(torch::zeros({1, 1, 1}))) GTEST_SKIP() << "no AVX-512 (F, BW, VL) on this CPU";
  const int64_t H = 3, T = 37, D = 40;
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t N : {5, 16, 70}) {
      for (const WindowVisibility v : {WindowVisibility{100, 0, WindowVisibility::kUnbounded},
                                       WindowVisibility{100, 2, 30}, WindowVisibility{3, 4, 8}}) {
        for (bool ordered : {false, true}) {
          torch::manual_seed(N);
          // Random (empty slots, later positions, a sink), or a held run from 10 before the first query that
          // some rows see whole (the kernel's shortcut) and the others in part.
          const int64_t from = std::max<int64_t>(0, v.first_query - 10);
          auto positions =
              ordered ? torch::arange(from, from + N, torch::kInt64) : torch::randint(-1, 140, {N}, torch::kInt64);
          if (!ordered) positions[0] = 1;  // a sink (below S when S > 0)
          auto scores = (torch::randn({H, T, N}) * 4).to(dtype);
          auto start = state_with_history(H, T, D);
          auto kernel = clone(start), reference = clone(start);
          auto kernel_scores = scores.clone(), reference_scores = scores.clone();
          fold_score_block(kernel_scores, positions, v, 0.125f, kernel);
          fold_score_block_reference(reference_scores, positions, v, 0.125f, reference);
          const auto label = std::string(c10::toString(dtype)) + (ordered ? " ordered" : "") + " N " +
                             std::to_string(N) + " S " + std::to_string(v.sinks) + " R " + std::to_string(v.recent);
          // exp differs from libm's by ~1e-7 relative; a bfloat16 probability may round one step apart.
          const double rtol = dtype == torch::kFloat32 ? 1e-5 : 1.0 / 128;
          expect_close(kernel_scores, reference_scores, rtol, 1e-7, label + " probabilities");
          EXPECT_TRUE(torch::equal(kernel.max, reference.max)) << label;
          expect_close(kernel.sum, reference.sum, 1e-5, 1e-6, label + " sums");
          expect_close(kernel.out, reference.out, 1e-5, 1e-6, label + " outputs");
          // Something was folded, something was hidden, and the rows' history was rescaled.
          EXPECT_GT(reference_scores.to(torch::kFloat32).gt(0).sum().item<int64_t>(), 0) << label;
          EXPECT_FALSE(torch::equal(reference.out, start.out)) << label;
        }
      }
    }
  }
}

// The AMX kernel folds a whole run as its scalar reference does, up to where their reference maxima differ
// (lazy rescaling): the log of each row's sum relative to its maximum, and the normalised output, which moves
// by at most the rounding of a probability to bf16 (2^-8 relative) times the largest value.
TEST(AmxAttentionKernel, FoldsARunAsTheScalarReferenceDoes) {
  if (!amx_attention_applies(torch::zeros({1, 1, 64}, torch::kBFloat16))) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  const int64_t H = 3;
  for (int64_t D : {32, 64}) {
    for (int64_t T : {37, 16}) {
      for (int64_t N : {5, 40, 70, 300}) {
        for (const WindowVisibility v : {WindowVisibility{100, 0, WindowVisibility::kUnbounded},
                                         WindowVisibility{100, 2, 30}, WindowVisibility{3, 4, 8}}) {
          for (bool ordered : {false, true}) {
            torch::manual_seed(N + D + T);
            const int64_t from = std::max<int64_t>(0, v.first_query - 10);
            auto positions =
                ordered ? torch::arange(from, from + N, torch::kInt64) : torch::randint(-1, 140, {N}, torch::kInt64);
            if (!ordered) positions[0] = 1;  // a sink (below S when S > 0)
            if (ordered && N > 40) {  // a ring not yet full: its last slots empty, the held ones seen by the chunk
              const int64_t held = N - N / 4, first = std::max<int64_t>(0, v.first_query - held / 2);
              positions = torch::cat({torch::arange(first, first + held, torch::kInt64), torch::full({N / 4}, -1, torch::kInt64)});
            }
            // Keys stored [H, D, N] as a cache stores them, or rows with a stride (a view); a few values stored
            // by columns (copied); scores large enough to raise the maximum late.
            const auto q = (torch::randn({H, T, D}) * 2).to(torch::kBFloat16);
            const auto k = ordered ? (torch::randn({H, N, 2 * D}) * 2).to(torch::kBFloat16).narrow(2, D / 2, D)
                                   : (torch::randn({H, D, N}) * 2).to(torch::kBFloat16).transpose(1, 2);
            const auto values = N > 5 ? torch::randn({H, N, D}).to(torch::kBFloat16)
                                      : torch::randn({H, D, N}).to(torch::kBFloat16).transpose(1, 2);
            auto start = state_with_history(H, T, D);
            auto kernel = clone(start), reference = clone(start);
            amx_attention_fold(q, k, values, positions, v, 0.125f, kernel);
            amx_attention_fold_reference(q, k, values, positions, v, 0.125f, reference);
            const auto label = "D " + std::to_string(D) + " T " + std::to_string(T) + " N " + std::to_string(N) +
                               " S " + std::to_string(v.sinks) + " R " + std::to_string(v.recent) +
                               (ordered ? " ordered" : "");
            const auto seen = reference.max.isfinite();
            ASSERT_TRUE(torch::equal(kernel.max.isfinite(), seen)) << label;
            const auto lag = (reference.max - kernel.max).masked_select(seen);
            EXPECT_TRUE(lag.ge(-1e-5).all().item<bool>() && lag.le(kLazyRescale).all().item<bool>()) << label;
            const auto log_sum = [&](const OnlineSoftmax& s) { return (s.sum.log() + s.max).masked_select(seen); };
            expect_close(log_sum(kernel), log_sum(reference), 1e-5, 1e-5, label + " log sums");
            const auto normalised = [](const OnlineSoftmax& s) { return s.out / s.sum.unsqueeze(-1); };
            const double bound = std::ldexp(1.0, -8) * values.abs().max().item<double>();
            expect_close(normalised(kernel), normalised(reference), 1e-5, bound, label + " outputs");
            // Rows that see nothing keep their history exactly.
            const auto unseen = (start.max == reference.max) & (start.sum == reference.sum);
            EXPECT_TRUE(torch::equal(kernel.out.index({unseen}), start.out.index({unseen}))) << label;
          }
        }
      }
    }
  }
}

// The runs a chunk of T queries at stream positions first.. meets: S sinks, a ring of `capacity` slots holding
// `held` recent positions (scrambled, the rest empty), and the chunk itself.
std::vector<KeyRun> runs_of(int64_t S, int64_t capacity, int64_t held, int64_t first, int64_t T, int64_t H, int64_t D,
                            torch::ScalarType dtype) {
  const auto q = torch::randn({H, T, D}).to(dtype), q_sinks = torch::randn({H, T, D}).to(dtype);
  const auto entries = [&](int64_t n) { return torch::randn({H, n, D}).to(dtype); };
  return {{q_sinks, entries(S), entries(S), torch::arange(S, torch::kInt64)},
          {q, entries(capacity), entries(capacity), ring_positions(capacity, first, held, first + held)},
          {q, entries(T), entries(T), torch::arange(first, first + T, torch::kInt64)}};
}

TEST(ChunkAttention, BlockedEqualsTheOneBufferReference) {
  const int64_t H = 4, D = 32;
  struct Case {
    int64_t S, capacity, held, first, T, recent;
  };
  // A ring filling up (empty slots, and whole key blocks of them), a full ring wrapped and evicting within the
  // chunk, no sinks, and a chunk longer than the window.
  const Case cases[] = {
      {1, 700, 200, 201, 48, 700}, {1, 300, 300, 900, 64, 300}, {0, 520, 300, 300, 40, 520}, {4, 60, 60, 500, 90, 60}};
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const auto& c : cases) {
      torch::manual_seed(c.first + c.T);
      const auto runs = runs_of(c.S, c.capacity, c.held, c.first, c.T, H, D, dtype);
      const WindowVisibility v{c.first, c.S, c.recent};
      SinkColumn none;
      SinkColumn logit{torch::randn({H}), {}, {}};
      SinkColumn kv{torch::randn({H}), torch::randn({H, D}), torch::randn({H, D})};
      for (const auto* sink : {&none, &logit, &kv}) {
        const auto label = std::string(c10::toString(dtype)) + " S " + std::to_string(c.S) + " first " +
                           std::to_string(c.first) + (sink->present() ? sink->value.defined() ? " kv" : " logit" : "");
        const auto blocked = chunk_attention(runs, v, *sink, runs[0].queries);
        const auto reference = chunk_attention_reference(runs, v, *sink, runs[0].queries);
        ASSERT_EQ(blocked.sizes(), reference.sizes());
        // bfloat16: both round the scores and the products' outputs to bfloat16, the blocked path its
        // probabilities before normalising, the reference after.
        const double tol = dtype == torch::kFloat32 ? 1e-5 : 2e-2;
        expect_close(blocked, reference, tol, tol, label);
      }
    }
  }
}

// What the mask hides stays hidden: changing a key no query may see (an evicted ring entry, an empty slot, a
// later chunk entry) leaves every output as it was, and changing one a query sees changes it.
TEST(ChunkAttention, HiddenKeysDoNotMatterAndVisibleOnesDo) {
  const int64_t H = 2, D = 16, S = 1, R = 40, first = 500, T = 20;
  torch::manual_seed(5);
  auto runs = runs_of(S, R, R, first, T, H, D, torch::kFloat32);
  const WindowVisibility v{first, S, R};
  const auto before = chunk_attention(runs, v, {}, runs[0].queries);
  // The ring's oldest entry (position first - R) is seen by no query: query t sees positions above t - R.
  const auto oldest = runs[1].positions.eq(first - R).nonzero().item<int64_t>();
  runs[1].keys.select(1, oldest).fill_(50.0f);
  runs[1].values.select(1, oldest).fill_(50.0f);
  // The chunk's last entry is seen only by the last query.
  runs[2].values.select(1, T - 1).fill_(50.0f);
  const auto after = chunk_attention(runs, v, {}, runs[0].queries);
  EXPECT_TRUE(torch::allclose(after.narrow(1, 0, T - 1), before.narrow(1, 0, T - 1), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(after.narrow(1, T - 1, 1), before.narrow(1, T - 1, 1), 1e-3, 1e-3));
}

}  // namespace
}  // namespace sinklm
