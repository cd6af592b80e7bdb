// Error reporting: one exception type carrying a single human-readable line.
// Bad input anywhere in ledgerlm becomes an Error; train/main.cpp prints it as one line and
// exits non-zero. Never thrown from inside hot loops (check arguments before entering them).
#pragma once

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ledgerlm {

// The text of errno's current value, for messages about a failed system call.
inline std::string errno_text() {
  return std::strerror(errno);
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An Error that ends a whole job of several ranks at once (a rank that stopped answering, a rank
// that failed alone), its text already naming the ranks concerned. Code that catches Errors to
// agree on them across ranks (comm_agree, the phases of a checkpoint save) lets it through:
// agreeing needs every rank, and this error says that one is missing.
class JobError : public Error {
 public:
  using Error::Error;
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <class T, class... Rest>
void append_all(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append_all(os, rest...);
}
}  // namespace detail

// Builds a message from any streamable pieces: error_message("key ", name, " must be > 0").
template <class... Args>
std::string error_message(const Args&... args) {
  std::ostringstream os;
  detail::append_all(os, args...);
  return os.str();
}

[[noreturn]] inline void fail(const std::string& message) {
  throw Error(message);
}

}  // namespace ledgerlm

// User-facing check: the message should name the file/key/value and what was expected.
#define LLM_REQUIRE(cond, ...)                                             \
  do {                                                                     \
    if (!(cond)) ::ledgerlm::fail(::ledgerlm::error_message(__VA_ARGS__)); \
  } while (0)

// Internal invariant: a failure is a bug in ledgerlm, so report where it happened.
#define LLM_ASSERT(cond, ...)                                                                   \
  do {                                                                                          \
    if (!(cond))                                                                                \
      ::ledgerlm::fail(::ledgerlm::error_message("internal error at ", __FILE__, ":", __LINE__, \
                                                 ": ", #cond, " ", ##__VA_ARGS__));             \
  } while (0)
