#include "data/corpus/text_cleaning.h"

#include <algorithm>
#include <cctype>

#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

template <typename LineFn>
std::string map_lines(std::string_view text, LineFn fn) {
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    bool last = end == std::string_view::npos;
    if (last) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!(last && line.empty())) fn(line, out);
    start = end + 1;
  }
  return out;
}

bool is_rule_line(std::string_view line) {
  // "=====", "-----", "~~~~", "+----+----+", "=== ====" (headings and table borders)
  if (line.size() < 3) return false;
  char first = line.find_first_not_of(' ') == std::string_view::npos ? ' ' : line[line.find_first_not_of(' ')];
  if (std::string_view("=-~^*#+`:'\"_.").find(first) == std::string_view::npos) return false;
  for (char c : line)
    if (c != first && c != ' ' && c != '+' && c != '|' && c != '=' && c != '-') return false;
  return true;
}

// Remove `open`...`close` delimiters around text within one line, keeping what is inside.
std::string unwrap(std::string_view line, std::string_view open, std::string_view close) {
  std::string out;
  size_t pos = 0;
  while (pos < line.size()) {
    size_t a = line.find(open, pos);
    if (a == std::string_view::npos) break;
    size_t b = line.find(close, a + open.size());
    if (b == std::string_view::npos) break;
    out.append(line.substr(pos, a - pos));
    out.append(line.substr(a + open.size(), b - a - open.size()));
    pos = b + close.size();
  }
  out.append(line.substr(std::min(pos, line.size())));
  return out;
}

// :role:`text <target>` or :role:`text` -> text
std::string strip_roles(std::string_view line) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t tick = line.find(":`", pos);
    if (tick == std::string_view::npos) break;
    size_t role_start = tick;
    while (role_start > pos && (std::isalnum(static_cast<unsigned char>(line[role_start - 1])) ||
                                line[role_start - 1] == ':' || line[role_start - 1] == '-'))
      --role_start;
    size_t end = line.find('`', tick + 2);
    if (role_start == tick || line[role_start] != ':' || end == std::string_view::npos) {
      out.append(line.substr(pos, tick + 2 - pos));
      pos = tick + 2;
      continue;
    }
    std::string_view inner = line.substr(tick + 2, end - tick - 2);
    size_t angle = inner.find(" <");
    if (angle != std::string_view::npos && inner.back() == '>') inner = inner.substr(0, angle);
    if (!inner.empty() && inner[0] == '~') inner.remove_prefix(1);
    out.append(line.substr(pos, role_start - pos));
    out.append(inner);
    pos = end + 1;
  }
  out.append(line.substr(pos));
  return out;
}

}  // namespace

std::string as_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = valid_sequence_length(text, pos);
    if (len == 0) {
      append_utf8(out, static_cast<unsigned char>(text[pos]));
      ++pos;
    } else {
      out.append(text.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

std::string normalize_whitespace(std::string_view text) {
  std::string unified;
  unified.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\r') {
      if (i + 1 < text.size() && text[i + 1] == '\n') continue;
      unified.push_back('\n');
    } else if (c == '\t') {
      unified.push_back(' ');
    } else if (c >= 0x20 || c == '\n') {
      if (c != 0x7F) unified.push_back(static_cast<char>(c));
    }
  }
  std::string out;
  out.reserve(unified.size());
  size_t pending_newlines = 0;
  map_lines(unified, [&](std::string_view line, std::string&) {
    size_t end = line.find_last_not_of(' ');
    line = end == std::string_view::npos ? std::string_view() : line.substr(0, end + 1);
    if (line.empty()) {
      ++pending_newlines;
      return;
    }
    if (!out.empty()) out.append(pending_newlines > 0 ? "\n\n" : "\n");
    pending_newlines = 0;
    out.append(line);
  });
  if (!out.empty()) out.push_back('\n');
  return out;
}

std::string dedent(std::string_view text) {
  return map_lines(text, [](std::string_view line, std::string& out) {
    size_t start = line.find_first_not_of(" \t");
    if (start != std::string_view::npos) out.append(line.substr(start));
    out.push_back('\n');
  });
}

std::string strip_dictionary_markup(std::string_view entry) {
  return map_lines(entry, [](std::string_view line, std::string& out) {
    size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && line[first] == '[' && line.back() == ']' &&
        line.find(']') == line.size() - 1)
      return;  // "[1913 Webster]", "[PJC]"
    std::string text;
    size_t pos = 0;
    while (pos < line.size()) {
      size_t a = line.find('\\', pos);
      size_t b = a == std::string_view::npos ? a : line.find('\\', a + 1);
      if (b == std::string_view::npos || b - a > 80) break;
      text.append(line.substr(pos, a - pos));
      pos = b + 1;
    }
    text.append(line.substr(std::min(pos, line.size())));
    // GCIDE pronunciation after the headword: "Abaca  ([a^]b\"[.a]*k[.a]), n." -> "Abaca, n."
    size_t open = text.find("  (");
    size_t close = open == std::string::npos ? open : text.find(')', open);
    if (close != std::string::npos && text.substr(open, close - open).find_first_of("[*\"`") != std::string::npos)
      text.erase(open, close + 1 - open);
    std::string unbraced;
    for (char c : text)
      if (c != '{' && c != '}') unbraced.push_back(c);
    // "Abdication , n." after the pronunciation went: close the gap before punctuation
    size_t gap;
    while ((gap = unbraced.find(" ,")) != std::string::npos) unbraced.erase(gap, 1);
    out.append(unbraced);
    out.push_back('\n');
  });
}

std::string strip_rst_markup(std::string_view text) {
  return map_lines(text, [](std::string_view line, std::string& out) {
    size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && line.substr(first, 2) == "..") return;
    if (is_rule_line(line)) return;
    std::string cleaned = strip_roles(line);
    cleaned = unwrap(cleaned, "``", "``");
    cleaned = unwrap(cleaned, "**", "**");
    cleaned = unwrap(cleaned, "`", "`_");
    out.append(cleaned);
    out.push_back('\n');
  });
}

}  // namespace sinklm
