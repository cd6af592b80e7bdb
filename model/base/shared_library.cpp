// SharedLibrary: dlopen/dlsym with the reasons kept for one log line.
#include "model/base/shared_library.h"

#include <dlfcn.h>
#include <link.h>

namespace ledgerlm {

std::unique_ptr<SharedLibrary> SharedLibrary::open(const std::vector<std::string>& names,
                                                   std::string* why) {
  std::string reasons;
  for (const std::string& name : names) {
    // RTLD_LOCAL: the vendor library's symbols stay out of the global namespace, so they cannot
    // shadow or be shadowed by another copy linked elsewhere in the process.
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return std::unique_ptr<SharedLibrary>(new SharedLibrary(handle, name));
    const char* err = dlerror();
    if (!reasons.empty()) reasons.append("; ");
    reasons.append(err != nullptr ? err : name + ": not found");
  }
  if (why != nullptr) *why = names.empty() ? std::string("no library name given") : reasons;
  return nullptr;
}

SharedLibrary::~SharedLibrary() {
  // Never dlclose: a vendor library may have started threads or registered atexit handlers that
  // would then point into unmapped code (cuDNN and NCCL both keep state until exit).
}

void* SharedLibrary::find(const char* symbol, std::string* why) const {
  dlerror();
  void* address = dlsym(handle_, symbol);
  if (address == nullptr && why != nullptr) {
    *why = std::string(symbol) + " not found in " + name_;
  }
  return address;
}

std::string SharedLibrary::path() const {
  const link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
    return name_;
  }
  return map->l_name;
}

}  // namespace ledgerlm
