#include "io/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <utility>

#include "io/crc32_copy.h"
#include "io/local_files.h"

namespace stoke {
namespace {

// The guarded copy running on this thread, to which a SIGBUS jumps back (volatile: the handler reads
// it between the copy's own accesses).
thread_local sigjmp_buf* volatile t_copy = nullptr;
struct sigaction g_previous_bus_action;

// SIGBUS: during a guarded copy, the mapped file shrank under it: jump back to the copy, which
// reports it. Otherwise whatever the process did before stoke installed this handler.
void OnBusError(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* env = t_copy) {
    t_copy = nullptr;
    // The jump does not restore the signal mask: a handler installed after this one that calls it
    // without SA_NODEFER would leave SIGBUS blocked, and the next fault would end the process.
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
    siglongjmp(*env, 1);
  }
  const struct sigaction& previous = g_previous_bus_action;
  const bool handler = previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN;
  if (handler && (previous.sa_flags & SA_SIGINFO) != 0) {
    previous.sa_sigaction(signal, info, context);
  } else if (handler) {
    previous.sa_handler(signal);
  } else {
    // The default action (a fault's SIGBUS cannot be ignored): the access runs again and the signal
    // ends the process, as it would have without stoke.
    ::signal(SIGBUS, SIG_DFL);
  }
}

// Installs OnBusError once per process. SA_NODEFER: the jump out of the handler leaves SIGBUS
// unblocked; SA_ONSTACK: a thread with an alternate signal stack keeps using it.
void InstallBusErrorHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnBusError;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    ::sigaction(SIGBUS, &action, &g_previous_bus_action);
  });
}

// The kernel tells a process the page cache state of a mapped file only when it owns the file or
// may write to it (mincore(2)). Root in a user namespace, or without its capabilities, may do
// neither: only the kernel's own permission check says.
bool ResidencyKnown(const std::string& path, const struct stat& st) {
  return st.st_uid == ::geteuid() || ::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0;
}

// Copies [from, from + head_n) to head and the next tail_n bytes to tail (with tail_crc, taking their
// CRC as Crc32Copy does, its stores as `tail_stores` says); false when a SIGBUS stopped it. Nothing
// but the copies runs while the handler may jump back here.
bool GuardedCopy(const uint8_t* from, size_t head_n, uint8_t* head, size_t tail_n, uint8_t* tail, uint32_t* tail_crc,
                 CopyStores tail_stores) {
  sigjmp_buf env;
  if (sigsetjmp(env, 0) != 0) {
    // A copy around the caches cut short skipped its closing fence: its stores are ordered here as a
    // finished copy's are (the fault's delivery most likely drained them already).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return false;
  }
  t_copy = &env;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (head_n != 0) std::memcpy(head, from, head_n);
  if (tail_crc != nullptr) {
    *tail_crc = Crc32Copy(tail, from + head_n, tail_n, *tail_crc, tail_stores);  // assigned once the copy ended
  } else if (tail_n != 0) {
    std::memcpy(tail, from + head_n, tail_n);
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_copy = nullptr;
  return true;
}

}  // namespace

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int error = 0;
  const int fd = OpenReadDescriptor(path, /*direct=*/false, &error);
  if (fd < 0) {
    if (error == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IOError(fmt::format("{}: open: {}", path, std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    error = errno;
    CloseDescriptor(fd);
    return Status::IOError(fmt::format("{}: fstat: {}", path, std::strerror(error)));
  }
  if (!S_ISREG(st.st_mode)) {
    CloseDescriptor(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  InstallBusErrorHandler();
  const auto size = static_cast<size_t>(st.st_size);
  void* map = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  error = errno;
  CloseDescriptor(fd);
  if (map == MAP_FAILED) return Status::IOError(fmt::format("{}: mmap: {}", path, std::strerror(error)));
  return MappedFile(map, size, ResidencyKnown(path, st));
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      residency_known_(other.residency_known_),
      shrunk_(std::move(other.shrunk_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, size_);
    map_ = std::exchange(other.map_, nullptr);
    size_ = std::exchange(other.size_, 0);
    residency_known_ = other.residency_known_;
    shrunk_ = std::move(other.shrunk_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

bool MappedFile::Copy(uint64_t offset, size_t n, uint8_t* out) const {
  return Copy(offset, n, out, 0, nullptr);
}

bool MappedFile::Copy(uint64_t offset, size_t head_n, uint8_t* head, size_t tail_n, uint8_t* tail,
                      uint32_t* tail_crc, CopyStores tail_stores) const {
  if (offset > size_ || head_n + tail_n > size_ - offset || shrunk()) return false;
  const auto* from = static_cast<const uint8_t*>(map_) + offset;
  if (GuardedCopy(from, head_n, head, tail_n, tail, tail_crc, tail_stores)) return true;
  shrunk_->store(true, std::memory_order_relaxed);
  return false;
}

size_t MappedFile::page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

bool MappedFile::Resident(std::vector<uint64_t>* pages) const {
  const size_t kPage = page_size();
  constexpr size_t kChunkPages = size_t{1} << 16;  // mincore's vector per call: 64 KiB
  const size_t total = (size_ + kPage - 1) / kPage;
  pages->assign((total + 63) / 64, 0);
  std::vector<unsigned char> chunk(std::min(total, kChunkPages));
  for (size_t first = 0; first < total; first += kChunkPages) {
    const size_t n = std::min(kChunkPages, total - first);
    const size_t bytes = std::min(n * kPage, size_ - first * kPage);
    if (::mincore(static_cast<uint8_t*>(map_) + first * kPage, bytes, chunk.data()) != 0) return false;
    for (size_t i = 0; i < n; ++i) {
      if ((chunk[i] & 1) != 0) (*pages)[(first + i) / 64] |= uint64_t{1} << ((first + i) % 64);
    }
  }
  return true;
}

}  // namespace stoke
