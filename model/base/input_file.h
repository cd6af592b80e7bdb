// Opening the files a user names for reading (configs, data directories' files, tokenizers,
// checkpoints, weights to import). Only regular files are read: a FIFO without a writer blocks
// a plain open() forever, a device can stream without end, and a directory opens on Linux and
// fails later with a puzzling message. Every such read goes through these helpers, which refuse
// anything else in one line naming the file and what it is.
#pragma once

#include <string>

namespace ledgerlm {

// Opens `path` read-only (O_CLOEXEC, blocking reads). Returns -1 with errno set when it cannot be
// opened at all (missing, no permission), so the caller keeps its own message for that. Throws
// Error "<what> '<path>' is a FIFO, expected a regular file" (a directory, a character device,
// ...) when it is not a regular file; symbolic links are followed. The open itself never blocks:
// it is done with O_NONBLOCK, and the flag is cleared once fstat has shown a regular file.
int input_file_open(const std::string& path, const std::string& what);

// The rest of the bytes of a descriptor input_file_open gave; closes it. A read error is an Error
// naming `what` and the path.
std::string input_file_read_fd(int fd, const std::string& path, const std::string& what);

// The whole file through input_file_open. Errors name `what` and the path: not a regular file,
// cannot be opened (with the system's reason), or a read error.
std::string input_file_read(const std::string& path, const std::string& what);

// For a file another library opens itself: throws as input_file_open does when `path` exists and
// is not a regular file; nothing when it is one or cannot be opened (the library reports that).
void input_file_require_regular(const std::string& path, const std::string& what);

// "a FIFO", "a directory", ...: what a stat mode is, for messages.
std::string input_file_kind(unsigned mode);

}  // namespace ledgerlm
