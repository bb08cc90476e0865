// Task formats (requests built as lm-eval builds them), metrics, and the PNG encoder.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "eval/zero_shot/eval_report.h"
#include "eval/figures/heatmap.h"
#include "eval/figures/png_image.h"
#include "eval/zero_shot/tasks/task_formats.h"
#include "eval/zero_shot/task_metrics.h"
#include "tests/eval/eval_test_support.h"

namespace fs = std::filesystem;
using namespace sinklm;

namespace {

const std::string kFixtures = SINKLM_EVAL_FIXTURES;

// A --data directory holding `task`'s file (task_file_name) with `text`.
std::string write_task(const std::string& task, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("sinklm-eval-unit-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / task_file_name(task)) << text;
  return dir.string();
}


std::vector<ContinuationScore> scores(std::vector<double> lls) {
  std::vector<ContinuationScore> out;
  for (double ll : lls) out.push_back({ll, false, 1});
  return out;
}

}  // namespace

TEST(TaskFormats, ArcContextAndChoicesFollowLmEval) {
  ZeroShotTask task = load_task("arc_easy", kFixtures, 0);
  ASSERT_EQ(task.docs.size(), 5u);
  const TaskDocument& d = task.docs[1];
  EXPECT_EQ(d.requests[0].context, "Question: What do plants need to make food?\nAnswer:");
  EXPECT_EQ(d.requests[1].continuation, " sunlight");
  EXPECT_EQ(d.choices[1], "sunlight");
  EXPECT_EQ(d.gold, 1);
  EXPECT_EQ(task.docs[4].gold, 0);  // numeric labels "1", "2", "3"
  EXPECT_EQ(task.docs[4].requests.size(), 3u);
  EXPECT_FALSE(task.proxy);
}

TEST(TaskFormats, LimitTakesTheFirstDocuments) { EXPECT_EQ(load_task("piqa", kFixtures, 2).docs.size(), 2u); }

// proxy_hellaswag is in HellaSwag's Hugging Face layout, with lm-eval's hellaswag preprocessing.
TEST(TaskFormats, HellaswagPreprocessingAndCapitalize) {
  ZeroShotTask task = load_task("proxy_hellaswag", kFixtures, 0);
  // ctx_b "She THEN" is capitalize()d to "She then".
  EXPECT_EQ(task.docs[1].requests[0].context, "Baking cookies: A woman mixes flour and sugar in a bowl. She then");
  EXPECT_EQ(task.docs[1].choices[0], "pours the batter onto a tray and bakes it.");
  // " [title]" -> ". ", "[...]" dropped after the strip (so a leading "[step] " leaves a space), as in lm-eval.
  EXPECT_EQ(task.docs[2].requests[0].context, "Home and Garden: How to water a plant. Check the soil.");
  EXPECT_EQ(task.docs[2].choices[0], " Push a finger into the soil to feel whether it is dry.");
  EXPECT_EQ(task.docs[0].gold, 3);
  EXPECT_EQ(hellaswag_preprocess("  a [x\ny] b  "), "a [x\ny] b");
}

// hellaswag is llama.cpp's text form: each line as it is, context -> " " + ending.
TEST(TaskFormats, HellaswagTextFormIsSixLinesPerItem) {
  ZeroShotTask task = load_task("hellaswag", kFixtures, 0);
  EXPECT_EQ(task.file, kFixtures + "/hellaswag.txt");
  EXPECT_EQ(task.scoring, TaskScoring::MultipleChoice);
  ASSERT_EQ(task.docs.size(), 4u);
  const TaskDocument& d = task.docs[1];
  EXPECT_EQ(d.requests.size(), 4u);
  EXPECT_EQ(d.requests[2].context, "Baking cookies: A woman mixes flour and sugar in a bowl. She THEN");
  EXPECT_EQ(d.requests[0].continuation, " pours the batter onto a tray and bakes it.");
  EXPECT_EQ(d.choices[3], "reads a newspaper on the sofa.");
  EXPECT_EQ(task.docs[0].gold, 3);
  EXPECT_EQ(task.docs[0].requests[0].continuation, " , the man adds wax to the windshield and cuts it.");
  EXPECT_EQ(load_task("hellaswag", kFixtures, 3).docs.size(), 3u);
  EXPECT_EQ(task_variant("hellaswag").label, "llama.cpp text form");
  EXPECT_EQ(task_variant("piqa").label, "");
}

TEST(TaskFormats, HellaswagTextErrorsNameFileAndLine) {
  const std::string item = "Ctx: a man\n1\nruns.\nsits.\njumps.\nsleeps.\n";
  auto error = [](const std::string& text) {
    return user_error([&] { load_task("hellaswag", write_task("hellaswag", text), 0); });
  };
  EXPECT_NE(error(item + "Ctx: b\n2\nx.\n").find("hellaswag.txt:9: the text ends inside an item, after 3 of its 6 lines"),
            std::string::npos)
      << error(item + "Ctx: b\n2\nx.\n");
  EXPECT_NE(error("Ctx: a\n4\nx\ny\nz\nw\n").find("hellaswag.txt:2: '4' is not a gold label 0-3 (llama.cpp's"),
            std::string::npos);
  EXPECT_NE(error(item + "Ctx: b\n0\nx\n\ny\nz\n").find("hellaswag.txt:10: empty ending 1"), std::string::npos);
  EXPECT_NE(error("").find("no documents"), std::string::npos);
  EXPECT_NE(user_error([] { load_task("hellaswag", "/nonexistent", 0); })
                .find("/nonexistent/hellaswag.txt: cannot open task file (expected <data>/hellaswag.txt: llama.cpp's"),
            std::string::npos);
}

TEST(TaskFormats, WinograndeIsPartialScoring) {
  ZeroShotTask task = load_task("winogrande", kFixtures, 0);
  EXPECT_EQ(task.scoring, TaskScoring::PartialScoring);
  const TaskDocument& d = task.docs[0];
  EXPECT_EQ(d.requests[0].context, "Sarah was a much better surgeon than Maria so Sarah");
  EXPECT_EQ(d.requests[1].context, "Sarah was a much better surgeon than Maria so Maria");
  EXPECT_EQ(d.requests[0].continuation, " always got the harder cases.");
  EXPECT_EQ(d.requests[1].continuation, d.requests[0].continuation);
  EXPECT_EQ(task.docs[2].gold, 1);
}

TEST(TaskFormats, LambadaSplitsOffTheLastWord) {
  ZeroShotTask task = load_task("lambada_openai", kFixtures, 0);
  EXPECT_EQ(task.docs[1].requests[0].context, "The captain looked at the map for a long time. Then he folded the");
  EXPECT_EQ(task.docs[1].requests[0].continuation, " map");
}

TEST(TaskFormats, OpenBookQaStripsTheAnswerKey) {
  ZeroShotTask task = load_task("openbookqa", kFixtures, 0);
  EXPECT_EQ(task.docs[1].gold, 3);  // answerKey " D"
  EXPECT_EQ(task.docs[0].requests[0].context, "The sun is responsible for");
}

TEST(TaskFormats, ErrorsNameFileLineAndField) {
  std::string dir = write_task("piqa",
                               "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 1}\n"
                               "{\"goal\": \"g\", \"solution1\": \"a\", \"sol2\": \"b\", \"label\": 1}\n");
  try {
    load_task("piqa", dir, 0);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("piqa.jsonl:2: missing field 'sol1'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_task("arc_easyy", dir, 0), UserError);
  EXPECT_THROW(load_task("arc_easy", dir, 0), UserError);  // no file
}

TEST(TaskMetrics, AccAndAccNormDifferWhenLengthsDo) {
  ZeroShotTask task;
  task.name = "t";
  task.docs.push_back({{{"c", " a"}, {"c", " bbbb"}}, {"a", "bbbb"}, 1});
  // Summed: choice 0 wins (-2 > -4); per character: choice 1 wins (-1 > -2).
  auto metrics = task_metrics(task, {scores({-2.0, -4.0})});
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].metric, "acc");
  EXPECT_EQ(metrics[0].value, 0.0);
  EXPECT_EQ(metrics[1].metric, "acc_norm");
  EXPECT_EQ(metrics[1].value, 1.0);
}

TEST(TaskMetrics, ChanceIsTheMeanOfOneOverEachDocumentsChoices) {
  ZeroShotTask task;
  task.name = "arc";
  task.docs.push_back({{{"c", " a"}, {"c", " b"}}, {"a", "b"}, 0});
  task.docs.push_back({{{"c", " a"}, {"c", " b"}, {"c", " c"}, {"c", " d"}}, {"a", "b", "c", "d"}, 3});
  const auto metrics = task_metrics(task, {scores({-1, -2}), scores({-1, -2, -3, -4})});
  for (const MetricResult& m : metrics) EXPECT_EQ(m.choices, (std::vector<int64_t>{2, 4})) << m.metric;
  const nlohmann::json file = results_json({}, metrics);
  EXPECT_DOUBLE_EQ(file["results"][0]["chance"].get<double>(), (1.0 / 2 + 1.0 / 4) / 2);
  const std::string path = testing::TempDir() + "/chance.json";
  std::ofstream(path) << results_file_text(file);
  EXPECT_EQ(read_results_file(path)[1].choices, (std::vector<int64_t>{2, 4})) << "read back";
  ZeroShotTask lambada;
  lambada.scoring = TaskScoring::LastWord;
  lambada.docs.push_back({{{"c", " w"}}, {}, 0});
  const nlohmann::json open_vocabulary = results_json({}, task_metrics(lambada, {{{-1.0, true, 1}}}));
  for (const auto& r : open_vocabulary["results"]) EXPECT_TRUE(r["chance"].is_null()) << r["metric"];
}

TEST(TaskMetrics, TiesGoToTheFirstChoiceAndStderrIsTheSampleOne) {
  ZeroShotTask task;
  task.name = "t";
  for (int gold : {0, 1, 0}) task.docs.push_back({{{"c", " x"}, {"c", " y"}}, {"x", "y"}, gold});
  auto metrics = task_metrics(task, {scores({-1, -1}), scores({-1, -1}), scores({-3, -1})});
  EXPECT_NEAR(metrics[0].value, 1.0 / 3, 1e-12);
  EXPECT_NEAR(metrics[0].standard_error, std::sqrt((2 * (1.0 / 9) + 4.0 / 9) / 2) / std::sqrt(3.0), 1e-12);
}

TEST(TaskMetrics, LastWordAccuracyIsGreedyAndPerplexityIsPerDocument) {
  ZeroShotTask task;
  task.name = "lambada";
  task.scoring = TaskScoring::LastWord;
  for (int i = 0; i < 2; ++i) task.docs.push_back({{{"c", " w"}}, {}, 0});
  auto metrics = task_metrics(task, {{{-1.0, true, 2}}, {{-3.0, false, 1}}});
  EXPECT_EQ(metrics[0].value, 0.5);
  EXPECT_EQ(metrics[1].metric, "perplexity");
  EXPECT_NEAR(metrics[1].value, std::exp(2.0), 1e-9);
}

TEST(PngImage, ChunksHaveValidCrcAndTheDataInflatesToThePixels) {
  RgbImage image(3, 2);
  const uint8_t red[3] = {255, 0, 0}, blue[3] = {0, 0, 255};
  image.set(0, 0, red);
  image.set(2, 1, blue);
  const std::string png = encode_png(image);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto u32 = [&](size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  std::vector<std::string> types;
  std::string idat;
  for (size_t at = 8; at < png.size();) {
    const uint32_t length = u32(at);
    const std::string type = png.substr(at + 4, 4);
    const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(png.data() + at + 4), length + 4);
    EXPECT_EQ(u32(at + 8 + length), crc) << type;
    if (type == "IHDR") EXPECT_EQ(u32(at + 8), 3u);
    if (type == "IDAT") idat = png.substr(at + 8, length);
    types.push_back(type);
    at += 12 + length;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  std::string raw(2 * (1 + 9), '\0');
  uLongf raw_size = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size, reinterpret_cast<const Bytef*>(idat.data()),
                       idat.size()),
            Z_OK);
  EXPECT_EQ(raw_size, raw.size());
  EXPECT_EQ(raw.substr(0, 4), std::string("\0\xff\0\0", 4));        // filter 0, then the red pixel
  EXPECT_EQ(raw.substr(10 + 7, 3), std::string("\0\0\xff", 3));     // row 1, pixel 2: blue
  EXPECT_EQ(raw.substr(1 + 3, 3), std::string("\xff\xff\xff", 3));  // untouched pixels are white
}

TEST(Heatmap, ColourMapEndsAndMaskedCells) {
  uint8_t low[3], high[3];
  viridis(0, low);
  viridis(1, high);
  EXPECT_EQ(low[0], 68);
  EXPECT_EQ(high[1], 231);
  RgbImage image = render_heatmap({0.f, std::nanf(""), 0.5f, 1.f}, 2, 2, 0, 1, 4);
  EXPECT_EQ(image.height, 8);
  EXPECT_EQ(image.pixels[(0 * image.width + 4) * 3], 225);      // (row 0, col 1) is masked: grey
  EXPECT_EQ(image.pixels[(4 * image.width + 4) * 3 + 1], 231);  // (row 1, col 1) = high: viridis yellow
}
