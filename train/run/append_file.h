// A file that grows by whole records: the metrics log's JSON lines and the TensorBoard event
// file's framed records. Every write is checked: a failed or short one (a full disk) truncates the
// file back to its last complete record and throws one Error naming the file, so a run stops
// instead of training on without its log, and the file never ends inside a record.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ledgerlm {

class AppendFile {
 public:
  AppendFile() = default;
  // Opens `path` for appending (created if missing). `what` names the file in errors
  // ("metrics log", "TensorBoard event file").
  AppendFile(const std::string& path, const std::string& what);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(std::string_view record);  // one record, with as few write(2) calls as it takes
  void sync();                           // fdatasync: the records so far are durable
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail_write(const std::string& why) const;

  std::string path_, what_;
  int fd_ = -1;
  int64_t size_ = 0;  // bytes of complete records
};

}  // namespace ledgerlm
