#include "eval/zero_shot/tasks/hellaswag_text.h"

#include <sstream>

#include "core/error.h"

namespace sinklm {
namespace {

constexpr size_t kLinesPerItem = 6;  // context, gold label, four endings
const char* const kLayout =
    " (llama.cpp's HellaSwag text form: 6 lines per item, the context, the gold label 0-3 and four endings)";

// What line `index` (0-5) of an item holds, for errors.
std::string role(size_t index) { return index == 0 ? "context" : str("ending ", index - 2); }

}  // namespace

std::vector<TaskDocument> read_hellaswag_text(const std::string& text, const std::string& origin, int64_t limit) {
  std::vector<TaskDocument> items;
  std::vector<std::string> item;  // the lines read so far of the next item
  std::istringstream in(text);
  size_t line_number = 0;
  for (std::string line; (limit == 0 || static_cast<int64_t>(items.size()) < limit) && std::getline(in, line);) {
    ++line_number;
    if (item.size() == 1 && !(line.size() == 1 && line[0] >= '0' && line[0] <= '3'))
      fail(origin, ":", line_number, ": '", line, "' is not a gold label 0-3", kLayout);
    if (item.size() != 1 && line.empty()) fail(origin, ":", line_number, ": empty ", role(item.size()), kLayout);
    item.push_back(line);
    if (item.size() < kLinesPerItem) continue;
    items.push_back(multiple_choice(item[0], {item.begin() + 2, item.end()}, item[1][0] - '0'));
    item.clear();
  }
  if (!item.empty())
    fail(origin, ":", line_number, ": the text ends inside an item, after ", item.size(), " of its ", kLinesPerItem,
         " lines", kLayout);
  return items;
}

}  // namespace sinklm
