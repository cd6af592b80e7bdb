// A shared library opened at run time (dlopen) instead of linked: for optional vendor libraries
// (cuDNN, NCCL) that the binary must start without. A missing library, or one whose symbols
// are missing, is a reason string for the caller's one fallback line, never a crash at start-up.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ledgerlm {

class SharedLibrary {
 public:
  // The first of `names` that dlopen finds (each tried as given: a bare soname searches the
  // library path). nullptr with *why = every name and dlerror's reason when none loads.
  static std::unique_ptr<SharedLibrary> open(const std::vector<std::string>& names,
                                             std::string* why);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The address of `symbol`, or nullptr with *why naming the symbol and the library.
  void* find(const char* symbol, std::string* why) const;
  // find() cast to the function type F.
  template <class F>
  F function(const char* symbol, std::string* why) const {
    return reinterpret_cast<F>(find(symbol, why));
  }
  // The name it was opened by, and where the loader found it (dlinfo), for logs.
  const std::string& name() const { return name_; }
  std::string path() const;
  // The dlopen handle, for a vendor header that resolves its own symbols through it (the cuDNN
  // frontend's dynamic loading reads one global handle).
  void* native_handle() const { return handle_; }

 private:
  SharedLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* handle_;
  std::string name_;
};

}  // namespace ledgerlm
