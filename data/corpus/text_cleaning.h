// Clean-up of extracted text for the corpus: encoding, whitespace and light markup.
#pragma once
#include <string>
#include <string_view>

namespace sinklm {

// Valid UTF-8 as it is; any byte that is not part of a valid sequence is read as Latin-1 instead.
std::string as_utf8(std::string_view text);

// \r\n and \r -> \n, tab -> space, other control characters dropped, trailing spaces removed from each line,
// at most one blank line in a row, no leading or trailing blank lines, and a final newline (unless empty).
std::string normalize_whitespace(std::string_view text);

// Every line's leading spaces and tabs removed.
std::string dedent(std::string_view text);

// dictd dictionaries (GCIDE, Jargon File): pronunciations \Ab*do"men\ and  ([a^]b"d[o^]*men) removed, cross-reference
// braces {word} -> word, source-tag lines such as "[1913 Webster]" dropped.
std::string strip_dictionary_markup(std::string_view entry);

// reStructuredText (kernel documentation): directive and comment lines ("..") dropped, heading
// under/overlines and table rules dropped, inline roles :ref:`text <target>` -> text, ``code`` -> code,
// `link`_ -> link, **strong** -> strong.
std::string strip_rst_markup(std::string_view text);

}  // namespace sinklm
