// Shared by the libFuzzer targets in tests/fuzz: a scratch directory for the files a target
// writes, splitting one input into several files, and the per-target counters printed at exit
// ("fuzz_NAME: N inputs, A accepted") that scripts/fuzz.sh reads to prove each target reaches the
// path where its parser accepts the input (a target that only ever rejects would test nothing).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ledgerlm::fuzz {

// Separates the files packed into one fuzz input (also in each target's dictionary).
inline constexpr std::string_view kPartSeparator = "\n--ledgerlm-fuzz-part--\n";

// Splits `data` at kPartSeparator into at most `max_parts` parts (the last takes the rest).
inline std::vector<std::string> split_parts(const uint8_t* data, size_t size, size_t max_parts) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = in.find(kPartSeparator);
    if (at == std::string_view::npos) break;
    parts.emplace_back(in.substr(0, at));
    in.remove_prefix(at + kPartSeparator.size());
  }
  parts.emplace_back(in);
  return parts;
}

inline std::string join_parts(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? std::string(kPartSeparator) : "") + parts[i];
  return out;
}

// A directory of this process (in /dev/shm when there is one: no disk writes), removed at exit.
class Scratch {
 public:
  Scratch() {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string templ = base + "/ledgerlm_fuzz_XXXXXX";
    dir_ = ::mkdtemp(templ.data());
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  std::string write(const std::string& name, std::string_view bytes) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    return path;
  }
  void remove(const std::string& name) const {
    std::error_code ec;
    std::filesystem::remove(dir_ + "/" + name, ec);
  }

 private:
  std::string dir_;
};

// Counts inputs and the ones that reached the accept path; prints them when the process exits.
class Stats {
 public:
  explicit Stats(const char* name) : name_(name) {}
  ~Stats() {
    std::fprintf(stderr, "%s: %llu inputs, %llu accepted\n", name_,
                 static_cast<unsigned long long>(inputs_),
                 static_cast<unsigned long long>(accepted_));
  }
  void input() { ++inputs_; }
  void accept() { ++accepted_; }

 private:
  const char* name_;
  uint64_t inputs_ = 0, accepted_ = 0;
};

}  // namespace ledgerlm::fuzz
