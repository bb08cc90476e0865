#include "data/tokenizers/nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "core/error.h"
#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

void append_normalized(std::string& out, std::string_view valid_utf8) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  SINKLM_ASSERT(U_SUCCESS(status), "ICU NFC normaliser unavailable: ", u_errorName(status));
  icu::StringPiece piece(valid_utf8.data(), static_cast<int32_t>(valid_utf8.size()));
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out.append(valid_utf8);
    return;
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  SINKLM_ASSERT(U_SUCCESS(status), "ICU NFC normalisation failed: ", u_errorName(status));
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0, pos = 0;
  while (pos < text.size()) {
    size_t len = valid_sequence_length(text, pos);
    if (len > 0) {
      pos += len;
      continue;
    }
    append_normalized(out, text.substr(run_start, pos - run_start));
    out.push_back(text[pos]);
    run_start = ++pos;
  }
  append_normalized(out, text.substr(run_start));
  return out;
}

}  // namespace sinklm
