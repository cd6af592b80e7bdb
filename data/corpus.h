// Reading a raw text corpus and splitting each document into train and val parts.
// A document is one input file (or all of stdin for "-").
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace ledgerlm {

struct Document {
  std::string source;  // path as found, or "-" for stdin
  std::string text;
};

// Expands --input values into the list of files to read, in order: a file as is, a directory as
// all regular files below it sorted by path (entries whose name starts with '.' are skipped, so
// .git and editor droppings stay out), "-" as itself. Throws Error for a path that does not exist.
std::vector<std::string> corpus_list_files(const std::vector<std::string>& inputs);

// Reads every listed file ("-" reads `stdin_stream`). Throws Error naming an unreadable file.
std::vector<Document> corpus_read(const std::vector<std::string>& files,
                                  std::istream& stdin_stream);

// Byte offset where the val part of `text` begins: the last `val_fraction` of the bytes, moved to
// the nearest line start when one lies within a quarter of the val length of the exact cut, and
// otherwise to a UTF-8 character boundary. Returns text.size() (no val) when val_fraction is 0 or
// the val part would round to zero bytes.
size_t corpus_split_point(std::string_view text, double val_fraction);

}  // namespace ledgerlm
