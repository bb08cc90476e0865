#pragma once
#include <cstdint>
#include <string>

namespace sinklm {

// Lower-case hex sha256 of a whole file (streamed; works on multi-GB checkpoints).
std::string sha256_file(const std::string& path);
std::string sha256_bytes(const void* data, size_t size);

}  // namespace sinklm
