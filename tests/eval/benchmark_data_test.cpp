// The official sets embedded in sinklm (eval/benchmark_data.h): every one loads and verifies, and damaged
// data is an error naming the file.
#include <gtest/gtest.h>
#include <zlib.h>

#include "core/error.h"
#include "eval/benchmark_blobs.h"
#include "eval/benchmark_data.h"

using namespace sinklm;

namespace {

std::string gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The UserError message of `f`, "" when it does not throw one.
template <typename F>
std::string user_error(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const OfficialBenchmark& piqa() { return *find_official_benchmark("piqa"); }
const std::string kOrigin = "eval/benchmarks/piqa.jsonl.gz (embedded in sinklm)";

}  // namespace

TEST(BenchmarkData, EveryOfficialSetIsEmbeddedAndVerified) {
  ASSERT_EQ(official_benchmarks().size(), 6u);
  for (const auto& set : official_benchmarks()) {
    ZeroShotTask task = load_official_task(set.task, 0);
    EXPECT_EQ(static_cast<int64_t>(task.docs.size()), set.documents) << set.task;
    EXPECT_TRUE(task.official);
    EXPECT_FALSE(task.proxy);
    EXPECT_EQ(task.data_sha256, set.sha256) << set.task;
    EXPECT_EQ(task.file, official_benchmark_file(set.task));
  }
}

TEST(BenchmarkData, OfficialSetsParseAsLmEvalDoes) {
  ZeroShotTask lambada = load_official_task("lambada_openai", 2);
  ASSERT_EQ(lambada.docs.size(), 2u);  // --limit
  EXPECT_EQ(lambada.scoring, TaskScoring::LastWord);
  EXPECT_EQ(lambada.docs[0].requests[0].continuation, " signs");  // the first LAMBADA passage ends "... signs"
  ZeroShotTask winogrande = load_official_task("winogrande", 1);
  EXPECT_EQ(winogrande.scoring, TaskScoring::PartialScoring);
  EXPECT_EQ(load_official_task("arc_challenge", 1).docs[0].requests.size(), 4u);
}

TEST(BenchmarkData, CorruptDataNamesTheFile) {
  std::string bytes(embedded_benchmark("piqa"));
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() / 2] ^= 0x55;
  std::string message = user_error([&] { verified_benchmark_text(piqa(), bytes, kOrigin); });
  EXPECT_NE(message.find(kOrigin + ": corrupt gzip data"), std::string::npos) << message;
}

TEST(BenchmarkData, TruncatedOrMissingDataNamesTheFile) {
  std::string_view bytes = embedded_benchmark("piqa");
  EXPECT_NE(user_error([&] { verified_benchmark_text(piqa(), bytes.substr(0, bytes.size() / 2), kOrigin); })
                .find(kOrigin + ": corrupt gzip data (data ends early)"),
            std::string::npos);
  EXPECT_NE(user_error([&] { verified_benchmark_text(piqa(), {}, kOrigin); }).find(kOrigin + ": corrupt gzip data (no data)"),
            std::string::npos);
}

TEST(BenchmarkData, WrongCountOrDigestNamesTheFile) {
  const std::string text = verified_benchmark_text(piqa(), embedded_benchmark("piqa"), kOrigin);
  const std::string shorter = text.substr(0, text.rfind('\n', text.size() - 2) + 1);  // last document dropped
  std::string message = user_error([&] { verified_benchmark_text(piqa(), gzip(shorter), kOrigin); });
  EXPECT_NE(message.find(kOrigin + ": 1837 documents, expected 1838"), std::string::npos) << message;

  std::string edited = text;
  edited[edited.find("\"goal\": \"") + 9] ^= 0x20;  // one letter's case: same count, different bytes
  message = user_error([&] { verified_benchmark_text(piqa(), gzip(edited), kOrigin); });
  EXPECT_NE(message.find(kOrigin + ": sha256 of the decompressed set is"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("expected ") + piqa().sha256), std::string::npos) << message;
}

TEST(BenchmarkData, TasksWithoutAnOfficialCopyAskForData) {
  EXPECT_NE(user_error([] { load_official_task("hellaswag", 0); }).find("sinklm ships no official copy"),
            std::string::npos);
  EXPECT_NE(user_error([] { load_official_task("proxy_lambada", 0); }).find("sinklm eval build-tasks"),
            std::string::npos);
  EXPECT_NE(user_error([] { load_official_task("arc-easy", 0); }).find("unknown task 'arc-easy'"), std::string::npos);
}
