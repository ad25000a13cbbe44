#include "server/core/shared_memory.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

std::string Quoted(const std::string& text) {
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, 64)), text.size() > 64 ? "..." : "",
                      "'");
}

// A shm_open name: "/" then 1-254 bytes, none of them '/' or NUL.
bool ValidKey(const std::string& key) {
  if (key.size() < 2 || key.size() > 255 || key[0] != '/') return false;
  for (size_t i = 1; i < key.size(); ++i) {
    if (key[i] == '/' || key[i] == '\0') return false;
  }
  return key != "/." && key != "/..";
}

// Copies that survive the client shrinking its object. Past the object's new
// end, a page of a MAP_SHARED mapping is SIGBUS on access. The handler below
// jumps back to the copy that faulted, which then reports failure; a SIGBUS
// anywhere else goes to the previous disposition (the default: the process
// dies, as it would have without this handler).
thread_local sigjmp_buf* t_copy_recovery = nullptr;
struct sigaction g_previous_sigbus {};

extern "C" void OnSigbus(int sig, siginfo_t*, void*) {
  if (sigjmp_buf* recovery = t_copy_recovery; recovery != nullptr) {
    t_copy_recovery = nullptr;
    siglongjmp(*recovery, 1);
  }
  // Not a copy of ours: put the old disposition back and return, so that the
  // faulting instruction runs again under it.
  sigaction(sig, &g_previous_sigbus, nullptr);
}

void InstallSigbusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    // SA_NODEFER: SIGBUS stays unblocked after the jump out of the handler,
    // so sigsetjmp need not save the signal mask (a system call per copy).
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

// memcpy, false when a page of either range faulted (SIGBUS) on the way.
bool RecoverableCopy(void* to, const void* from, size_t bytes) {
  sigjmp_buf recovery;
  if (sigsetjmp(recovery, 0) != 0) return false;  // from OnSigbus
  // The fences keep the compiler from moving the copy's loads and stores
  // across the stores that arm and disarm the handler (it knows what memcpy
  // touches, and that the handler runs in between is invisible to it).
  t_copy_recovery = &recovery;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, from, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_copy_recovery = nullptr;
  return true;
}

}  // namespace

SharedMemoryRegion::~SharedMemoryRegion() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

absl::Status SharedMemoryRegion::CheckRange(uint64_t offset, uint64_t bytes,
                                            const std::string& what) const {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, bytes, &end) || end > byte_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", bytes, " bytes at offset ", offset, " lie outside shared-memory region ",
                     Quoted(name_), " of ", byte_size_, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegion::Shrunk(const std::string& what, uint64_t end) const {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": shared-memory object ", Quoted(key_), " of region ", Quoted(name_),
      " no longer holds ", offset_ + end, " bytes (shrunk after the region was registered?)"));
}

absl::Status SharedMemoryRegion::Read(uint64_t offset, void* out, uint64_t bytes,
                                      const std::string& what) const {
  if (absl::Status s = CheckRange(offset, bytes, what); !s.ok()) return s;
  if (!RecoverableCopy(out, data_ + offset, static_cast<size_t>(bytes))) {
    return Shrunk(what, offset + bytes);
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegion::Write(uint64_t offset, const void* in, uint64_t bytes,
                                       const std::string& what) const {
  if (absl::Status s = CheckRange(offset, bytes, what); !s.ok()) return s;
  if (!RecoverableCopy(data_ + offset, in, static_cast<size_t>(bytes))) {
    return Shrunk(what, offset + bytes);
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                            uint64_t offset, uint64_t byte_size) {
  if (name.empty() || name.size() > 256) {
    return absl::InvalidArgumentError("a shared-memory region needs a name of 1 to 256 bytes");
  }
  if (!ValidKey(key)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory key ", Quoted(key),
        " is not a shm_open name (one leading '/', no other '/', at most 255 bytes)"));
  }
  if (byte_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory region ", Quoted(name), " has a byte_size of 0"));
  }
  const int fd = shm_open(key.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    const std::string why = absl::StrCat("cannot open shared-memory object ", Quoted(key), ": ",
                                         std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(why) : absl::InvalidArgumentError(why);
  }
  struct stat st {};
  uint64_t end = 0;
  const long page = sysconf(_SC_PAGESIZE);
  auto region = std::shared_ptr<SharedMemoryRegion>(new SharedMemoryRegion());
  absl::Status status;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("shared-memory object ", Quoted(key), " is not a regular file"));
  } else if (__builtin_add_overflow(offset, byte_size, &end) ||
             end > static_cast<uint64_t>(st.st_size)) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "shared-memory object ", Quoted(key), " holds ", st.st_size, " bytes; region ",
        Quoted(name), " asks for ", byte_size, " at offset ", offset));
  } else {
    const uint64_t start = offset - offset % static_cast<uint64_t>(page);
    region->mapping_bytes_ = static_cast<size_t>(end - start);
    void* p = mmap(nullptr, region->mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(start));
    if (p == MAP_FAILED) {
      status = absl::InvalidArgumentError(absl::StrCat("cannot map shared-memory object ",
                                                       Quoted(key), ": ", std::strerror(errno)));
    } else {
      region->mapping_ = p;
      region->data_ = static_cast<uint8_t*>(p) + (offset - start);
    }
  }
  close(fd);
  if (!status.ok()) return status;
  InstallSigbusHandler();
  region->name_ = name;
  region->key_ = key;
  region->offset_ = offset;
  region->byte_size_ = byte_size;

  std::lock_guard<std::mutex> lock(mu_);
  if (regions_.count(name) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("shared-memory region ", Quoted(name), " is already registered"));
  }
  if (regions_.size() >= kMaxRegions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "at most ", kMaxRegions, " shared-memory regions may be registered at once"));
  }
  regions_.emplace(name, std::move(region));
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Unregister(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    regions_.clear();
    return absl::OkStatus();
  }
  if (regions_.erase(name) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region ", Quoted(name), " is registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> SharedMemoryRegistry::Status(
    const std::string& name) const {
  std::vector<std::shared_ptr<const SharedMemoryRegion>> out;
  if (!name.empty()) {
    absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> one = Find(name);
    if (!one.ok()) return one.status();
    out.push_back(*std::move(one));
    return out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [n, region] : regions_) out.push_back(region);
  return out;
}

absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> SharedMemoryRegistry::Find(
    const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region ", Quoted(name), " is registered"));
  }
  return it->second;
}

}  // namespace kiln::server
