#pragma once
#include <cstddef>
#include <cstdint>

namespace sinklm {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord and TensorBoard event
// files; crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t size);

}  // namespace sinklm
