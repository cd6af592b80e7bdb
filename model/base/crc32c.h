// CRC-32C (Castagnoli), the checksum of everything ledgerlm writes and reads back. Each piece of
// a checkpoint tensor carries its CRC in meta.json, each tensor of a weights file
// SafeTensorsWriter writes (a run's model.safetensors, an import, an export) its CRC in the
// file's __metadata__ (safetensors.h), and each MiB of a token shard its CRC in the shard's
// checksum table (data/shard.h), so that a flipped bit or a torn write is caught on load and
// reported with the file and the tensor or block it hit. CRC-32C because x86-64 computes it in
// hardware (SSE4.2 crc32 instruction, several GB/s), so verifying costs little next to reading, and
// it detects every error burst of up to 32 bits (any one damaged byte) for certain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ledgerlm {

// CRC-32C of `bytes` continuing from `crc` (start with 0). Uses the hardware instruction where
// the CPU has it, a table otherwise; both give the same value.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// "crc32c:0123abcd" — the text form stored in meta.json (and in the __metadata__ of the weights
// files SafeTensorsWriter writes).
std::string crc32c_text(uint32_t crc);

// Parses crc32c_text's form ("crc32c:" and 8 hex digits, either case); false if it is not that.
bool crc32c_parse(const std::string& text, uint32_t* crc);

}  // namespace ledgerlm
