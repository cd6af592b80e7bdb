// CRC-32C (Castagnoli) of tensor data. Each piece of a checkpoint tensor carries its CRC in
// meta.json, and each tensor of a weights file SafeTensorsWriter writes (a run's
// model.safetensors, an import, an export) its CRC in the file's __metadata__ (safetensors.h), so
// that a flipped bit or a torn write is caught on load and reported with the file and tensor it
// hit. CRC-32C because x86-64 computes it in hardware (SSE4.2 crc32 instruction, several GB/s),
// so verifying costs little next to reading, and it detects every error burst of up to 32 bits
// (any one damaged byte) for certain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ledgerlm {

// CRC-32C of `bytes` continuing from `crc` (start with 0). Uses the hardware instruction where
// the CPU has it, a table otherwise; both give the same value.
uint32_t ckpt_crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// "crc32c:0123abcd" — the text form stored in meta.json (and in the __metadata__ of the weights
// files SafeTensorsWriter writes).
std::string ckpt_crc_text(uint32_t crc);

// Parses ckpt_crc_text's form ("crc32c:" and 8 hex digits, either case); false if it is not that.
bool ckpt_crc_parse(const std::string& text, uint32_t* crc);

}  // namespace ledgerlm
