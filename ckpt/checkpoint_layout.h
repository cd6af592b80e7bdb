// The data files of a checkpoint: a safetensors file whose layout (header and the byte offset of
// every logical tensor) is a pure function of the list of logical tensors, so each rank can
// compute it on its own and pwrite its pieces at their final place in a shared file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace ledgerlm {

struct CkptTensorSlot {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t offset = 0;  // bytes from the start of the data section
};

struct CkptFileLayout {
  std::string stem;                     // "model" -> model.safetensors
  std::vector<CkptTensorSlot> tensors;  // in data order
  std::string header;                   // length prefix + JSON + padding: bytes [0, data_start)
  int64_t data_start = 0;
  int64_t total_bytes = 0;  // file size

  const CkptTensorSlot* find(const std::string& name) const;
};

// One layout per data file, from the logical tensors the pieces belong to (first appearance
// order). Pieces of the same tensor must agree on dtype and shape, lie inside it and not
// overlap (an Error otherwise: it is a bug in the caller).
// Several ranks: pass the union of every rank's (file, name, dtype, shape) descriptors.
std::vector<CkptFileLayout> ckpt_layouts_build(const std::vector<CkptPiece>& pieces);

// Creates `path` with the layout's header and its full size (rank 0 under sharding).
void ckpt_file_create(const std::string& path, const CkptFileLayout& layout);
// Writes one piece at its place in an existing file and returns its CRC-32C. Any rank. A piece
// without `data` is streamed from its `read` through a buffer of about `chunk_bytes`.
uint32_t ckpt_file_write_piece(int fd, const std::string& path, const CkptFileLayout& layout,
                               const CkptPiece& piece, int64_t chunk_bytes = 4 << 20);
// fsync of a file or directory by path; throws Error naming it.
void ckpt_fsync_path(const std::string& path, bool directory);

}  // namespace ledgerlm
