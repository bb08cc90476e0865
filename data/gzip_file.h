// Reading gzip (and dictzip, which is gzip-compatible) files whole.
#pragma once
#include <string>

namespace sinklm {

// The decompressed contents; a file that is not gzip is returned as it is (zlib's transparent mode).
// UserError naming the path when it cannot be read or is corrupt.
std::string read_gzip_file(const std::string& path);

}  // namespace sinklm
