// CRC-32C (Castagnoli) of checkpoint tensor data. Each piece of a checkpoint tensor carries its
// CRC in meta.json so that a flipped bit or a torn write is caught on load and reported with the
// file and tensor it hit. CRC-32C because x86-64 computes it in hardware (SSE4.2 crc32
// instruction, several GB/s), so verifying a checkpoint costs little next to reading it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ledgerlm {

// CRC-32C of `bytes` continuing from `crc` (start with 0). Uses the hardware instruction where
// the CPU has it, a table otherwise; both give the same value.
uint32_t ckpt_crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// "crc32c:0123abcd" — the text form stored in meta.json.
std::string ckpt_crc_text(uint32_t crc);

}  // namespace ledgerlm
