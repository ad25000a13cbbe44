#include "engine/fallback/torch_extensions.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace kiln::fallback {
namespace {

// Where Python packages live on Debian and derived systems (dist-packages)
// and elsewhere (site-packages), for any Python 3 version.
constexpr const char* kPatterns[] = {
    "/usr/lib/python3/dist-packages/torchvision/_C*.so",
    "/usr/local/lib/python3*/dist-packages/torchvision/_C*.so",
    "/usr/lib/python3*/site-packages/torchvision/_C*.so",
    "/usr/local/lib/python3*/site-packages/torchvision/_C*.so",
};

std::vector<std::string> Candidates() {
  std::vector<std::string> files;
  if (const char* env = std::getenv("KILN_TORCHVISION_LIBRARY"); env != nullptr && *env != 0) {
    files.emplace_back(env);
    return files;
  }
  for (const char* pattern : kPatterns) {
    glob_t found{};
    if (::glob(pattern, 0, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) files.emplace_back(found.gl_pathv[i]);
    }
    ::globfree(&found);
  }
  return files;
}

}  // namespace

std::string LoadTorchVisionOps() {
  static std::once_flag once;
  static std::string loaded;
  std::call_once(once, [] {
    for (const std::string& file : Candidates()) {
      // Registers its operators with libtorch's dispatcher as it loads; kept
      // loaded for the life of the process.
      if (::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
        loaded = file;
        return;
      }
    }
  });
  return loaded;
}

}  // namespace kiln::fallback
