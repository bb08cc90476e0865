// The CPU decode-attention kernels (model/kernels/cache_attention_kernel.h) against torch::matmul and index_put_ on
// the pool's layout: a run of slots narrowed out of a page, keys stored transposed, one or two query rows,
// float32 and bfloat16 storage.
#include "model/kernels/cache_attention_kernel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/system/cpu_features.h"
#include "decode/cache/kv_pool.h"
#include "../model/model_test_support.h"

namespace sinklm {
namespace {

void expect_close(const torch::Tensor& got, const torch::Tensor& expected, const std::string& what) {
  EXPECT_LE(testing_support::scaled_max_error(got, expected), 1e-5) << what;
}

struct Run {
  torch::Tensor keys, values;  // [m, H, width, D]: slots 1..m of a page of m + 2, keys stored transposed
};

Run random_run(int64_t m, int64_t H, int64_t width, int64_t D, torch::ScalarType dtype = torch::kFloat32) {
  auto keys = kv_keys_zeros({m + 2, H, width, D}, dtype);
  auto values = torch::zeros({m + 2, H, width, D}, dtype);
  const auto fill = [&](const torch::IntArrayRef sizes) {  // int8: the integers the kernels read
    return dtype == torch::kChar ? torch::randint(-127, 128, sizes) : torch::randn(sizes);
  };
  keys.copy_(fill(keys.sizes()));
  values.copy_(fill(values.sizes()));
  return {keys.narrow(0, 1, m), values.narrow(0, 1, m)};
}

// Float32, bfloat16 and int8 storage; the reference multiplies the stored values in float32, as the kernel
// does. AVX-512F runs every dtype, AVX2 bfloat16 and int8 only (SINKLM_CPU_ISA=avx2 runs this test that way on an AVX-512 CPU:
// ctest's test_decode_avx2).
TEST(CacheAttentionKernel, ScoresAndMixEqualMatmulOnThePoolLayout) {
  if (!cpu_has_avx512f() && !cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX-512F or AVX2: decode attention uses torch::matmul";
  torch::manual_seed(0);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kChar})
    for (int64_t D : {16, 32, 64, 128})
      for (int64_t width : {1, 15, 16, 17, 95, 96, 97, 100, 256, 260, 300, 1024}) {  // register tiles, rows beyond
        const int64_t m = 3, H = 2, split = std::min<int64_t>(4, width);
        const std::string what = std::string(c10::toString(dtype)) + " D " + std::to_string(D) + " width " +
                                 std::to_string(width);
        auto run = random_run(m, H, width, D, dtype);
        const bool kernel = cpu_has_avx512f() || dtype != torch::kFloat32;
        ASSERT_EQ(cache_attention_kernel_applies(run.keys, run.values), kernel) << what;
        auto keys_t = run.keys.to(torch::kFloat32).transpose(2, 3);  // [m, H, D, width]
        auto values = run.values.to(torch::kFloat32);
        auto one = torch::randn({m, H, 1, D});
        expect_close(cached_key_scores(one, run.keys, split), torch::matmul(one, keys_t), what + " one query");
        // Two query rows: the first `split` columns take row 1, the rest row 0.
        auto two = torch::randn({m, H, 2, D});
        auto expected = torch::cat({torch::matmul(two.narrow(2, 1, 1), keys_t.narrow(3, 0, split)),
                                    torch::matmul(two.narrow(2, 0, 1), keys_t.narrow(3, split, width - split))}, -1);
        expect_close(cached_key_scores(two, run.keys, split), expected, what + " two queries");
        auto probs = torch::softmax(torch::randn({m, H, 1, width}), -1);
        expect_close(cached_value_mix(probs, run.values), torch::matmul(probs, values), what + " mix");
      }
}

// Every dtype a cache is stored in (float16: int8's scales, as [m, H, width, 1]), on layouts the attention
// kernels read and on ones they do not (D = 1, 8).
TEST(CacheAttentionKernel, StoreEqualsIndexPut) {
  torch::manual_seed(1);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kChar, torch::kHalf})
    for (int64_t D : {32, 8, 1}) {
      auto run = random_run(4, 3, 20, D, dtype), reference = random_run(4, 3, 20, D, dtype);
      reference.keys.copy_(run.keys);
      reference.values.copy_(run.values);
      const auto r = torch::tensor({0, 2, 3}, torch::kInt64), c = torch::tensor({5, 0, 19}, torch::kInt64);
      const auto entries = [&] {  // int8 entries arrive as integers (quantize_kv)
        return dtype == torch::kChar ? torch::randint(-127, 128, {3, 3, D}) : torch::randn({3, 3, D});
      };
      auto k = entries(), v = entries();
      store_cache_entries(run.keys, run.values, r, c, k, v);
      using torch::indexing::Slice;
      reference.keys.index_put_({r, Slice(), c}, k.to(dtype));
      reference.values.index_put_({r, Slice(), c}, v.to(dtype));
      const std::string what = std::string(c10::toString(dtype)) + " D " + std::to_string(D);
      EXPECT_TRUE(torch::equal(run.keys, reference.keys)) << what;
      EXPECT_TRUE(torch::equal(run.values, reference.values)) << what;
    }
}

TEST(CacheAttentionKernel, DoesNotApplyToRowMajorKeysHalfOrRaggedHeads) {
  auto values = torch::zeros({1, 2, 16, 32});
  EXPECT_FALSE(cache_attention_kernel_applies(torch::zeros({1, 2, 16, 32}), values));  // keys not transposed
  EXPECT_FALSE(cache_attention_kernel_applies(kv_keys_zeros({1, 2, 16, 32}, torch::kHalf), values.to(torch::kHalf)));
  EXPECT_FALSE(cache_attention_kernel_applies(kv_keys_zeros({1, 2, 16, 24}, torch::kFloat32), torch::zeros({1, 2, 16, 24})));
}

}  // namespace
}  // namespace sinklm
