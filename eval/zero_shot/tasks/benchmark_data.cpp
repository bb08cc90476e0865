#include "eval/zero_shot/tasks/benchmark_data.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/files/sha256.h"
#include "eval/zero_shot/tasks/benchmark_blobs.h"

namespace sinklm {
namespace {

const char* const kRepairHint =
    "; the copy is damaged or the binary is stale: restore eval/benchmarks/ with git and rebuild, or score your own "
    "files with --data DIR";

// Decompresses gzip bytes held in memory (data/io/byte_stream.h reads files; these sets are inside the binary).
std::string gunzip(std::string_view compressed, const std::string& origin) {
  z_stream z{};
  SINKLM_ASSERT(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK);  // 16+: expect a gzip header
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[1 << 16];
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
  }
  const std::string why = z.msg ? z.msg : compressed.empty() ? "no data" : "data ends early";
  inflateEnd(&z);
  if (status != Z_STREAM_END) fail(origin, ": corrupt gzip data (", why, ")", kRepairHint);
  return out;
}

// Lines with any non-blank character.
int64_t nonblank_lines(const std::string& text) {
  int64_t count = 0;
  bool content = false;
  for (char c : text) {
    if (c == '\n') {
      count += content;
      content = false;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      content = true;
    }
  }
  return count + content;
}

}  // namespace

const std::vector<OfficialBenchmark>& official_benchmarks() {
  // From eval/benchmarks/SOURCES.md (each sha256 was checked against the official file there).
  static const std::vector<OfficialBenchmark> sets = {
      {"arc_challenge", 1172, 1, "03227c30fd557ad1416c2cb955eeb6dc79eeb21e0679456a1ccd42eaccc0ff87"},
      {"arc_easy", 2376, 1, "874354cf372667530bd6cbd2d78dca2d657c5e2e746f53cf01d1e9d3a90cbc3d"},
      // SOURCES.md's hellaswag_val_full.txt.bz2 decompressed (its table gives the .bz2's sha256): llama.cpp's
      // text form of the official split, whose own file could not be obtained to check against.
      {"hellaswag", 10042, 6, "d572539320eb2050e858ca34b495bbe2103e3b3f1391a9c3bcdf215b0bb93bd1"},
      {"lambada_openai", 5153, 1, "4aa8d02cd17c719165fc8a7887fddd641f43fcafa4b1c806ca8abc31fabdb226"},
      {"openbookqa", 500, 1, "bbaca15e985ba386b2f73e9659fce608cf7722a35343864dbe7115cbbda341ab"},
      {"piqa", 1838, 1, "61533005e22f175534909b1ec8eacb6da03c233933558d1bafb15787453b1f55"},
      {"winogrande", 1267, 1, "69f3d7f3a900d775339b04c7de672609c40fca573e50f594f2ae66d8782505be"},
  };
  return sets;
}

const OfficialBenchmark* find_official_benchmark(const std::string& task) {
  const auto& sets = official_benchmarks();
  auto it = std::find_if(sets.begin(), sets.end(), [&](const OfficialBenchmark& b) { return task == b.task; });
  return it == sets.end() ? nullptr : &*it;
}

std::string official_benchmark_file(const std::string& task) {
  return "eval/benchmarks/" + task_file_name(task) + ".gz";
}

std::string verified_benchmark_text(const OfficialBenchmark& expected, std::string_view compressed,
                                    const std::string& origin) {
  std::string text = gunzip(compressed, origin);
  const int64_t lines = nonblank_lines(text), expected_lines = expected.documents * expected.lines_per_document;
  if (lines != expected_lines)
    fail(origin, ": ", lines, " lines, expected ", expected_lines, " (", expected.documents, " documents",
         expected.lines_per_document > 1 ? str(" of ", expected.lines_per_document, " lines") : "",
         ", eval/benchmarks/SOURCES.md)", kRepairHint);
  const std::string digest = sha256_bytes(text.data(), text.size());
  if (digest != expected.sha256)
    fail(origin, ": sha256 of the decompressed set is ", digest, ", expected ", expected.sha256,
         " (eval/benchmarks/SOURCES.md)", kRepairHint);
  return text;
}

ZeroShotTask load_official_task(const std::string& task, int64_t limit) {
  require_known_task(task);
  const OfficialBenchmark* set = find_official_benchmark(task);
  if (!set) {
    std::string official;
    for (const auto& b : official_benchmarks()) official += (official.empty() ? "" : ", ") + std::string(b.task);
    fail("--tasks ", task, ": sinklm ships no official copy of this task (it ships ", official,
         "); give --data DIR holding ", task_file_name(task),
         task.rfind("proxy_", 0) == 0 ? " (written by `sinklm eval build-tasks`)" : "");
  }
  const std::string file = official_benchmark_file(task);
  std::string text = verified_benchmark_text(*set, embedded_benchmark(task), file + " (embedded in sinklm)");
  ZeroShotTask out = parse_task(task, text, file, limit);
  out.official = true;
  return out;
}

std::vector<std::string> task_list(const std::string& list, const std::string& data_dir) {
  std::vector<std::string> tasks;
  if (list == "all" && data_dir.empty()) {
    for (const auto& set : official_benchmarks()) tasks.push_back(set.task);
    return tasks;
  }
  if (list == "all") {
    for (const auto& name : known_task_names())
      if (std::filesystem::exists(task_file(data_dir, name))) tasks.push_back(name);
    if (tasks.empty()) fail("--data ", data_dir, ": no <task>.jsonl files of known tasks (--tasks all)");
    return tasks;
  }
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) tasks.push_back(name);
  if (tasks.empty()) fail("--tasks: empty list");
  return tasks;
}

}  // namespace sinklm
