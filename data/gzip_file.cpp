#include "data/gzip_file.h"

#include <zlib.h>

#include "core/error.h"

namespace sinklm {

std::string read_gzip_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) fail(path, ": cannot open");
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    int n = gzread(file, buffer, sizeof(buffer));
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(file, &code);
      gzclose(file);
      fail(path, ": corrupt gzip data: ", why);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  gzclose(file);
  return out;
}

}  // namespace sinklm
