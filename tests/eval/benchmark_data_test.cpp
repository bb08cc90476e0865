// The official sets embedded in sinklm (eval/zero_shot/tasks/benchmark_data.h): every one loads and verifies, and damaged
// data is an error naming the file.
#include <gtest/gtest.h>
#include <zlib.h>

#include "core/error.h"
#include "eval/zero_shot/tasks/benchmark_blobs.h"
#include "eval/zero_shot/tasks/benchmark_data.h"
#include "tests/eval/eval_test_support.h"

using namespace sinklm;

namespace {

std::string gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
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

const OfficialBenchmark& piqa() { return *find_official_benchmark("piqa"); }
const std::string kOrigin = "eval/benchmarks/piqa.jsonl.gz (embedded in sinklm)";
const OfficialBenchmark& hellaswag() { return *find_official_benchmark("hellaswag"); }
const std::string kHellaswagOrigin = "eval/benchmarks/hellaswag.txt.gz (embedded in sinklm)";

}  // namespace

TEST(BenchmarkData, EveryOfficialSetIsEmbeddedAndVerified) {
  ASSERT_EQ(official_benchmarks().size(), 7u);
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

// The counts and the first labels SOURCES.md gives for the official validation split.
TEST(BenchmarkData, HellaswagShipsEveryValidationItemInLlamaCppTextForm) {
  ZeroShotTask task = load_official_task("hellaswag", 0);
  EXPECT_EQ(task.file, "eval/benchmarks/hellaswag.txt.gz");
  EXPECT_EQ(task.scoring, TaskScoring::MultipleChoice);
  ASSERT_EQ(task.docs.size(), 10042u);
  int labels[4] = {0, 0, 0, 0};
  size_t four_endings = 0, empty = 0;
  for (const TaskDocument& d : task.docs) {
    ASSERT_GE(d.gold, 0);
    ASSERT_LE(d.gold, 3);
    ++labels[d.gold];
    four_endings += d.requests.size() == 4 && d.choices.size() == 4;
    for (const auto& r : d.requests) empty += r.context.empty() || r.continuation.size() < 2;
  }
  EXPECT_EQ(four_endings, 10042u);
  EXPECT_EQ(empty, 0u);
  EXPECT_EQ(labels[0], 2515);
  EXPECT_EQ(labels[1], 2485);
  EXPECT_EQ(labels[2], 2584);
  EXPECT_EQ(labels[3], 2458);
  const int first_ten[] = {3, 3, 2, 2, 1, 1, 2, 0, 1, 1};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(task.docs[i].gold, first_ten[i]) << i;
  EXPECT_EQ(task.docs[0].requests[0].context, "Roof shingle removal: A man is sitting on a roof. he");
  EXPECT_EQ(task.docs[0].requests[3].continuation, " starts pulling up roofing on a roof.");
  EXPECT_EQ(task.docs[0].choices[3], "starts pulling up roofing on a roof.");
  EXPECT_EQ(load_official_task("hellaswag", 5).docs.size(), 5u);  // --limit
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
  EXPECT_NE(message.find(kOrigin + ": 1837 lines, expected 1838 (1838 documents, eval/benchmarks/SOURCES.md)"),
            std::string::npos)
      << message;

  std::string edited = text;
  edited[edited.find("\"goal\": \"") + 9] ^= 0x20;  // one letter's case: same count, different bytes
  message = user_error([&] { verified_benchmark_text(piqa(), gzip(edited), kOrigin); });
  EXPECT_NE(message.find(kOrigin + ": sha256 of the decompressed set is"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("expected ") + piqa().sha256), std::string::npos) << message;
}

TEST(BenchmarkData, HellaswagWrongCountOrDigestNamesTheFile) {
  const std::string text = verified_benchmark_text(hellaswag(), embedded_benchmark("hellaswag"), kHellaswagOrigin);
  const std::string shorter = text.substr(0, text.rfind('\n', text.size() - 2) + 1);  // the last ending dropped
  std::string message = user_error([&] { verified_benchmark_text(hellaswag(), gzip(shorter), kHellaswagOrigin); });
  EXPECT_NE(message.find(kHellaswagOrigin + ": 60251 lines, expected 60252 (10042 documents of 6 lines"),
            std::string::npos)
      << message;

  std::string edited = text;
  edited[edited.find("\n3\n") + 1] = '2';  // the first item's gold label: same lines, another answer
  message = user_error([&] { verified_benchmark_text(hellaswag(), gzip(edited), kHellaswagOrigin); });
  EXPECT_NE(message.find(kHellaswagOrigin + ": sha256 of the decompressed set is"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("expected ") + hellaswag().sha256), std::string::npos) << message;
  EXPECT_NE(message.find("restore eval/benchmarks/ with git and rebuild"), std::string::npos) << message;
}

TEST(BenchmarkData, TasksWithoutAnOfficialCopyAskForData) {
  EXPECT_NE(user_error([] { load_official_task("proxy_hellaswag", 0); })
                .find("sinklm ships no official copy of this task (it ships arc_challenge, arc_easy, hellaswag, "
                      "lambada_openai, openbookqa, piqa, winogrande); give --data DIR holding proxy_hellaswag.jsonl"),
            std::string::npos);
  EXPECT_NE(user_error([] { load_official_task("proxy_lambada", 0); }).find("sinklm eval build-tasks"),
            std::string::npos);
  EXPECT_NE(user_error([] { load_official_task("arc-easy", 0); }).find("unknown task 'arc-easy'"), std::string::npos);
}
