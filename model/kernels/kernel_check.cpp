// sinklm_kernel_check: every CPU kernel of model/kernels/ beside its reference, standalone (llm.c's way).
//
// For each kernel, at the shapes it serves (a `tiny`/`small` training step, a pythia-160m decode step), the
// reference is the LibTorch path the kernel replaces; the check prints the largest difference against the
// tolerance the dtype's rounding allows, and the median time of both over a few repetitions with their ratio.
// It fails (exit 1) when a kernel disagrees. The few-row product runs in every instruction set the CPU has,
// decode attention in the widest (AVX2: bfloat16 K/V only), the others need AVX-512F; a CPU with neither set
// has none to check (exit 77, skipped). SINKLM_CPU_ISA=avx2 (core/system/cpu_features.h) runs the AVX2 paths on an
// AVX-512 CPU.
// Times are printed, never asserted: `build/sinklm_kernel_check [--threads N] [--reps N]` is the
// micro-benchmark; ctest runs it as `kernel_check` (label unit).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/system/cpu_features.h"
#include "model/attention/attention.h"
#include "model/kernels/prompt_attention/amx_attention.h"
#include "model/kernels/cache_attention_kernel.h"
#include "model/kernels/few_row_matmul.h"
#include "model/kernels/prompt_attention/online_softmax_kernel.h"
#include "model/kernels/packed_qkv_attention.h"
#include "model/kernels/softmax_cross_entropy.h"
#include "model/kernels/token_scores.h"
#include "model/attention/rotary.h"

namespace sinklm {
namespace {

int g_reps = 5;
int g_failures = 0;

std::string str_shape(const std::vector<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

double median_ms(const std::function<void()>& run) {
  run();  // warm-up: first-touch pages, packed panels
  std::vector<double> ms;
  for (int i = 0; i < g_reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// One row of the table: agreement (fails above `tolerance`) and the two median times.
void report(const std::string& kernel, const std::string& shape, double difference, double tolerance,
            double reference_ms, double kernel_ms) {
  const bool ok = difference <= tolerance;
  if (!ok) ++g_failures;
  std::printf("%-28s %-30s %10.2e %10.2e %4s %10.3f %10.3f %7.2fx\n", kernel.c_str(), shape.c_str(), difference,
              tolerance, ok ? "ok" : "FAIL", reference_ms, kernel_ms, reference_ms / kernel_ms);
}

// What rounding allows a float32 sum of K terms in another order: about sqrt(K) roundings of the partial sums,
// each within half an ulp (2^-24) of their size, which the result's size bounds; 8x for the tail.
double sum_tolerance(int64_t K, const torch::Tensor& expected) {
  const double ulp = std::ldexp(1.0, -23);
  return 8 * ulp * std::sqrt(static_cast<double>(K)) * (expected.abs().max().item<double>() + 1);
}

// The same for a log-sum-exp over V logits (NLL, the loss): the sum's relative rounding, sqrt(V) ulps, becomes
// an absolute error of its log, beside the rounding of the largest logit it is shifted by.
double log_sum_exp_tolerance(int64_t V, const torch::Tensor& logits) {
  const double ulp = std::ldexp(1.0, -23);
  return 8 * ulp * (std::sqrt(static_cast<double>(V)) + logits.abs().max().item<double>());
}

// The decode projections: y = x W^T + b for a few rows in each weight format the CPU runs (reference: the
// float64 product of the operands rounded as the format rounds them; timed against LibTorch's float32 linear).
void check_few_row_matmul(int64_t M, int64_t K, int64_t N) {
  auto x = torch::randn({M, K}), w = torch::randn({N, K}) * 0.05, b = torch::randn({N});
  for (WeightFormat format : {WeightFormat::Fp32, WeightFormat::Bf16, WeightFormat::Int8}) {
    const auto packed = pack_few_row_weight(w, format);
    const auto expected = few_row_matmul_reference(x, w, b, format).to(torch::kFloat32);
    for (InstructionSet set : few_row_kernel_sets(format)) {
      const auto got = few_row_matmul_in(set, x, packed, b);
      report("few_row_matmul " + weight_format_name(format) + " " + instruction_set_name(set), str_shape({M, K, N}),
             max_difference(got, expected), sum_tolerance(K, expected), median_ms([&] { torch::linear(x, w, b); }),
             median_ms([&] { few_row_matmul_in(set, x, packed, b); }));
    }
  }
}

// Training/eval attention from the packed qkv (reference: rotary + causal attention on q, k, v views).
void check_packed_qkv_attention(int64_t B, int64_t T, int64_t H, int64_t D, int64_t R) {
  auto qkv = torch::randn({B, T, H, 3 * D});
  auto positions = torch::arange(T, torch::kInt64);
  auto [cos, sin] = RotaryEmbedding(R, 10000).cos_sin(positions);
  SinkColumn sink{torch::randn({H})};
  auto reference = [&] {
    auto heads = qkv.permute({0, 2, 1, 3});  // [B, H, T, 3D]
    auto q = apply_rotary(heads.narrow(-1, 0, D), cos, sin), k = apply_rotary(heads.narrow(-1, D, D), cos, sin);
    return causal_attention(q, k, heads.narrow(-1, 2 * D, D), sink, AttentionImpl::Reference)
        .transpose(1, 2)
        .reshape({B, T, H * D});
  };
  torch::NoGradGuard no_grad;
  auto got = packed_qkv_attention(qkv, cos, sin, sink), expected = reference();
  report("packed_qkv_attention (fwd)", str_shape({B, T, H, D}), max_difference(got, expected), sum_tolerance(T, expected),
         median_ms([&] { reference(); }), median_ms([&] { packed_qkv_attention(qkv, cos, sin, sink); }));
}

// Decode attention's two products against a cache laid out as decode/cache/kv_pool.h lays it out (keys stored
// transposed: entries contiguous), reference: LibTorch's matmul.
void check_cache_attention(int64_t m, int64_t H, int64_t width, int64_t D, torch::ScalarType dtype) {
  auto keys = torch::randn({m, H, D, width}).to(dtype).transpose(2, 3);  // [m, H, width, D], stride(2) == 1
  auto values = torch::randn({m, H, width, D}).to(dtype);
  auto q = torch::randn({m, H, 1, D});
  auto probs = torch::softmax(torch::randn({m, H, 1, width}), -1);
  if (!cache_attention_kernel_applies(keys, values)) return;  // AVX2: float32 K/V are LibTorch's
  const std::string shape = str_shape({m, H, width, D}) + (dtype == torch::kBFloat16 ? " bf16" : " f32");
  auto scores_reference = [&] { return torch::matmul(q, keys.to(torch::kFloat32).transpose(2, 3)); };
  auto mix_reference = [&] { return torch::matmul(probs, values.to(torch::kFloat32)); };
  const auto scores = scores_reference(), mixed = mix_reference();
  report("cached_key_scores", shape, max_difference(cached_key_scores(q, keys, 0), scores),
         sum_tolerance(D, scores), median_ms([&] { scores_reference(); }), median_ms([&] { cached_key_scores(q, keys, 0); }));
  report("cached_value_mix", shape, max_difference(cached_value_mix(probs, values), mixed),
         sum_tolerance(width, mixed), median_ms([&] { mix_reference(); }), median_ms([&] { cached_value_mix(probs, values); }));
}

// The fused output projection's chunk loss and gradient (reference: log_softmax, gather, exp, scatter_add).
void check_softmax_cross_entropy(int64_t r, int64_t V) {
  auto logits = torch::randn({r, V}) * 3, target = torch::randint(V, {r}, torch::kInt64), keep = torch::ones({r});
  auto reference = [&] {
    auto log_probs = torch::log_softmax(logits, 1);
    const double loss = -log_probs.gather(1, target.unsqueeze(1)).sum().item<double>();
    return std::make_pair(loss, log_probs.exp_().scatter_add_(1, target.unsqueeze(1), -keep.unsqueeze(1)));
  };
  auto [loss, gradient] = reference();
  auto fused = logits.clone();
  const double got = softmax_cross_entropy(fused, target, keep, /*write_gradient=*/true);
  const double difference = std::max(std::abs(got - loss) / r, max_difference(fused, gradient));
  report("softmax_cross_entropy", str_shape({r, V}), difference, log_sum_exp_tolerance(V, logits),
         median_ms([&] { reference(); }), median_ms([&] {
           auto chunk = logits.clone();
           softmax_cross_entropy(chunk, target, keep, true);
         }));
}

// Each target's NLL under its row of logits and the id ranked first (reference: log_softmax, gather, argmax).
void check_token_scores(int64_t T, int64_t V) {
  auto logits = torch::randn({T, V}) * 3;
  std::vector<int64_t> targets(T);
  for (int64_t i = 0; i < T; ++i) targets[i] = (i * 7919) % V;
  auto index = torch::tensor(targets).unsqueeze(1);
  auto reference = [&] { return std::pair{(-torch::log_softmax(logits, -1).gather(1, index)).squeeze(1), logits.argmax(1)}; };
  const auto [expected, expected_top1] = reference();
  const auto got = token_scores(logits, targets);
  SINKLM_ASSERT(torch::equal(got.top1, expected_top1), "token_scores: top-1 ids differ from argmax");
  report("token_scores", str_shape({T, V}), max_difference(got.nll, expected), log_sum_exp_tolerance(V, logits),
         median_ms([&] { reference(); }), median_ms([&] { token_scores(logits, targets); }));
}

// One key block of a prompt chunk's attention folded into the running softmax (reference: the same step in
// LibTorch ops: the mask, the row max, exp, the sums and the rescale, each a pass over the block). Positions:
// a ring filling up, half the block's slots empty.
void check_online_softmax(int64_t H, int64_t T, int64_t N, torch::ScalarType dtype) {
  if (!fold_score_block_kernel_applies(torch::zeros({1, 1, 1}, dtype))) return;  // AVX-512 without BW and VL
  const WindowVisibility v{N / 2, 1, N};
  auto positions = torch::arange(N, torch::kInt64);
  positions.narrow(0, N / 2, N - N / 2).fill_(-1);
  const auto scores = (torch::randn({H, T, N}) * 3).to(dtype);
  const OnlineSoftmax start{torch::randn({H, T}), torch::rand({H, T}) + 1, torch::randn({H, T, 64})};
  const float scale = 0.125f;
  auto reference = [&] {
    auto hidden = visible_columns(positions, v, T).logical_not();
    auto x = (scores.to(torch::kFloat32) * scale).masked_fill(hidden, -INFINITY);
    auto m = torch::maximum(start.max, std::get<0>(x.max(-1)));
    auto probs = (x - m.unsqueeze(-1)).exp();
    auto alpha = (start.max - m).exp();
    return std::make_pair(probs.to(dtype), start.out * alpha.unsqueeze(-1));
  };
  const auto [probs, out] = reference();
  auto folded = scores.clone();
  OnlineSoftmax state{start.max.clone(), start.sum.clone(), start.out.clone()};
  fold_score_block(folded, positions, v, scale, state);
  const double tolerance = dtype == torch::kFloat32 ? 1e-5 : 1.0 / 128;  // a bfloat16 probability: one step
  report(std::string("fold_score_block ") + c10::toString(dtype), str_shape({H, T, N}),
         std::max(max_difference(folded, probs), max_difference(state.out, out)), tolerance,
         median_ms([&] { reference(); }), median_ms([&] {
           auto block = scores.clone();
           OnlineSoftmax s{start.max.clone(), start.sum.clone(), start.out.clone()};
           fold_score_block(block, positions, v, scale, s);
         }));
}

// A prompt chunk's attention over one run of keys on AMX tiles. Agreement: against its scalar reference, the
// outputs normalised by the sums (their reference maxima differ by design), within the rounding of a bf16
// probability (2^-8 relative) times the largest value. Time: against the path it replaces, key blocks of 256 as
// oneDNN batched matmuls around fold_score_block. Positions: a full ring below the chunk, every key seen.
void check_amx_attention(int64_t H, int64_t T, int64_t N, int64_t D) {
  const auto q = torch::randn({H, T, D}).to(torch::kBFloat16);
  if (!amx_attention_applies(q) || !fold_score_block_kernel_applies(q)) return;
  // keys as a cache stores them, [H, D, N]
  const auto k = torch::randn({H, D, N}).to(torch::kBFloat16).transpose(1, 2);
  const auto values = torch::randn({H, N, D}).to(torch::kBFloat16);
  const auto positions = torch::arange(N, torch::kInt64);
  const WindowVisibility v{N, 0, WindowVisibility::kUnbounded};
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const auto fresh = [&] {
    return OnlineSoftmax{torch::full({H, T}, -INFINITY), torch::zeros({H, T}), torch::zeros({H, T, D})};
  };
  auto kernel = fresh(), reference = fresh();
  amx_attention_fold(q, k, values, positions, v, scale, kernel);
  amx_attention_fold_reference(q, k, values, positions, v, scale, reference);
  const auto normalised = [](const OnlineSoftmax& s) { return s.out / s.sum.unsqueeze(-1); };
  const auto blocked = [&] {
    auto s = fresh();
    for (int64_t b = 0; b < N; b += 256) {
      const int64_t n = std::min<int64_t>(256, N - b);
      auto scores = torch::bmm(q, k.narrow(1, b, n).transpose(1, 2));
      fold_score_block(scores, positions.narrow(0, b, n).contiguous(), v, scale, s);
      s.out.add_(torch::bmm(scores, values.narrow(1, b, n)));
    }
  };
  report("amx_attention bf16", str_shape({H, T, N, D}), max_difference(normalised(kernel), normalised(reference)),
         std::ldexp(1.0, -8) * values.abs().max().item<double>(), median_ms(blocked), median_ms([&] {
           auto s = fresh();
           amx_attention_fold(q, k, values, positions, v, scale, s);
         }));
}

}  // namespace
}  // namespace sinklm

int main(int argc, char** argv) {
  using namespace sinklm;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") threads = std::stoi(argv[i + 1]);
    else if (flag == "--reps") g_reps = std::max(1, std::stoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "sinklm_kernel_check: unknown flag %s (--threads N, --reps N)\n", argv[i]);
      return 2;
    }
  }
  if (!cpu_has_avx512f() && !cpu_has_avx2_fma()) {
    std::printf("sinklm_kernel_check: this CPU has neither AVX-512F nor AVX2, so LibTorch's ops run everywhere; nothing to check\n");
    return 77;
  }
  torch::manual_seed(1234);
  torch::set_num_threads(threads);
  std::printf("sinklm_kernel_check: %d thread(s), median of %d; kernel vs its reference (the LibTorch path it replaces)\n",
              threads, g_reps);
  std::printf("%-28s %-30s %10s %10s %4s %10s %10s %8s\n", "kernel", "shape", "max |diff|", "tolerance", "", "ref ms",
              "kernel ms", "speedup");
  check_few_row_matmul(1, 768, 2304);   // pythia-160m's query_key_value, one decoding stream
  check_few_row_matmul(16, 768, 3072);  // its MLP up-projection, 16 streams
  check_cache_attention(1, 12, 1024, 64, torch::kFloat32);  // one stream, W = 1024
  check_cache_attention(1, 12, 1024, 64, torch::kBFloat16);
  check_cache_attention(16, 12, 1024, 64, torch::kBFloat16);
  if (cpu_has_avx512f()) {
    check_packed_qkv_attention(4, 256, 4, 32, 8);    // a `tiny` training micro-batch
    check_packed_qkv_attention(2, 512, 12, 64, 16);  // pythia-160m's heads at 512 positions
    check_softmax_cross_entropy(256, 8192);  // a chunk of the demo's vocabulary
    check_token_scores(256, 50304);          // a prefill chunk of pythia's vocabulary
    check_online_softmax(12, 256, 256, torch::kBFloat16);  // a key block of a pythia-160m prompt chunk
    check_online_softmax(12, 256, 256, torch::kFloat32);
    check_amx_attention(12, 256, 1024, 64);  // a pythia-160m prompt chunk over a 1024-entry ring (AMX CPUs)
  } else {
    std::printf("(no AVX-512F: AVX2 runs the bf16 and int8 few-row tiles and bfloat16 decode attention; the other "
                "kernels are LibTorch's ops here)\n");
  }
  std::printf("%s\n", g_failures == 0 ? "every kernel agrees with its reference" : "KERNELS DISAGREE (FAIL rows)");
  return g_failures == 0 ? 0 : 1;
}
