// The storage interface: everything stoke reads or writes goes through it, so that backends
// (local files, Azure Blob, S3) and wrappers (throttling, fault injection) plug in one place.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "stoke/status.h"

namespace stoke {

class ObjectStorage;

// Told the outcome of an asynchronous read (RandomAccessFile::ReadAtAsync), once.
using ReadCallback = std::function<void(Status)>;

// A file opened for positioned reads. Thread-safe: ReadAt and ReadAtAsync may be called concurrently.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads exactly dst.size() bytes at `offset`. A range past the end of the file is an IOError
  // naming the file, offset and size.
  virtual Status ReadAt(uint64_t offset, MutableByteView dst) const = 0;
  // ReadAt without waiting: starts the read and calls `done` with its status once the bytes are in
  // `dst`, which must stay valid (and the file open) until then. `done` runs on the calling thread
  // before this returns (the default: a plain ReadAt), or on a thread of the backend's (object
  // stores: the HTTP client's event loop, so hundreds of reads are in flight without a thread each;
  // the read cache: its own threads), where it must be quick and must not wait for another read.
  virtual void ReadAtAsync(uint64_t offset, MutableByteView dst, ReadCallback done) const {
    done(ReadAt(offset, dst));
  }
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
  // Whether each read is a request to a remote service (an object store): readers then leave out
  // reads they can do without. Wrappers answer for the file they wrap.
  virtual bool remote() const { return false; }
};

// A file being written sequentially. Not thread-safe. Close() must be called to learn whether
// the data reached the file; the destructor closes silently and drops what was not yet written
// (local files stage up to 4 MiB for O_DIRECT writes; object stores upload only at Close).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(ByteView data) = 0;
  // Flushes to stable storage (fdatasync on local disks).
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
  virtual uint64_t bytes_written() const = 0;
  virtual const std::string& path() const = 0;
};

// One file of a Storage::ReadFileEnds batch: which bytes to read, and (out) what was read.
struct FileEnds {
  std::string path;
  uint64_t size = 0;        // the file's size as the caller knows it (a Delta add action's): reads are placed by it
  uint64_t tail_bytes = 0;  // read the last tail_bytes bytes (at most size)
  uint64_t head_bytes = 0;  // and the first head_bytes bytes (at most size; 0: none)
  AlignedBuffer tail;       // out: the last tail_bytes bytes
  AlignedBuffer head;       // out: the first head_bytes bytes
  Status status;            // out: this file's outcome; the buffers hold its bytes only when OK
};

struct DirEntry {
  std::string name;  // file name only, not the full path
  bool is_directory = false;
  uint64_t size = 0;
  int64_t modification_time_ms = 0;  // milliseconds since the epoch
  std::string etag;  // object stores: the object's ETag (quotes removed); "" elsewhere
};

// Thread-safe: all methods may be called concurrently.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) = 0;
  // OpenForRead of a file whose size the caller knows already (a Delta add action's `size`): object
  // stores then make no request (no HEAD), and size() is `size` (a wrong one makes reads fail, or
  // read other bytes). The default ignores `size` and opens as OpenForRead does.
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenForReadWithSize(const std::string& path, uint64_t size) {
    (void)size;
    return OpenForRead(path);
  }
  // Reads the ends of many files whose sizes the caller knows, as one batch: for readers that open
  // thousands of small files only for their footers. Each file's outcome is in its `status`: a
  // missing file is NotFound; a file shorter than its `size` is an IOError (a short read); one
  // longer than it yields other bytes than its ends, which a reader checking them reports. The
  // batch as a whole is Unsupported, with nothing read, where the storage has no batched path (the
  // default, and local disks without io_uring): callers then open each file. An empty batch asks
  // whether the storage has one at all (OK where it may). Local disks: io_uring, each file's open,
  // reads and close one linked chain on a direct descriptor (no process file descriptor, nothing
  // counted against RLIMIT_NOFILE), 64 files per system call. Read one by one with open, fstat,
  // pread and close, the tails of 650,000 one-row files took 2.4 and 2.6 times as long here.
  virtual Status ReadFileEnds(std::span<FileEnds> files) {
    (void)files;
    return Status::Unsupported("batched reads of file ends");
  }
  // The whole file (ReadFileToString). The default opens the file and reads it; object stores make
  // one GET (no HEAD for the size first).
  virtual Result<std::string> ReadFile(const std::string& path);
  // Creates (or truncates) a file. exclusive=true fails with AlreadyExists if it exists.
  virtual Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive = false) = 0;
  // The entries of a directory, sorted by name.
  virtual Result<std::vector<DirEntry>> List(const std::string& dir) = 0;
  // The names of the non-directory entries of a directory, sorted: List without a stat per entry
  // (a Delta log can hold tens of thousands of files).
  virtual Result<std::vector<std::string>> ListNames(const std::string& dir) = 0;
  // ListNames, only the names that start with `prefix`: on object stores one listing of the keys
  // with that prefix (a request for up to 1,000 of them, however many others the directory holds);
  // the default filters ListNames.
  virtual Result<std::vector<std::string>> ListNamesWithPrefix(const std::string& dir, const std::string& prefix);
  virtual Result<DirEntry> Stat(const std::string& path) = 0;
  virtual Status CreateDirectories(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status Delete(const std::string& path) = 0;
  // Creates `path` holding `data` only if nothing exists there, atomically: readers see either no
  // file or the whole file, and of two concurrent callers exactly one succeeds; the other gets
  // AlreadyExists. On local disks: a temporary file in the same directory, fsync, link() to the
  // final name (never rename, which would replace), unlink of the temporary.
  virtual Status PutIfAbsent(const std::string& path, ByteView data) = 0;
  // PutIfAbsent of a file already written: publishes `tmp` (made by Create in the same directory,
  // synced and closed by the caller) under `path` only if nothing exists there, atomically, without
  // holding its bytes in memory. On success `tmp` is gone; on any error, AlreadyExists included, it
  // is left for the caller to publish under another name or delete. Local disks: link() and a
  // directory sync. The default reads `tmp`, PutIfAbsent's its bytes, then deletes it.
  virtual Status PublishIfAbsent(const std::string& tmp, const std::string& path);
  // Makes the entries of directory `dir` durable: files created, renamed or linked into it survive
  // a power loss once this returns. On local disks an fsync of the directory (a rename or link is
  // otherwise not durable even when the file's data was synced); nothing on object stores, where a
  // write is durable when it returns. Whoever publishes a file by rename syncs its directory before
  // relying on it: before a commit references it, before reporting success.
  virtual Status SyncDirectory(const std::string& dir) { return Status::OK(); }
  // Makes the data of the closed files `paths` durable at once, for writers of many files that
  // close them without syncing each (WritableFile::Sync) and need them all durable before a commit
  // refers to them. Their names still need SyncDirectory. On local disks an fdatasync of each file,
  // or, for many files, one syncfs(2) per file system (one journal commit instead of one per file;
  // it also writes back other dirty data of that file system). Nothing on object stores.
  virtual Status SyncFiles(const std::vector<std::string>& paths) { return Status::OK(); }

  // What this storage is, asked by the layers above to choose how to use it (one answer per question):
  //
  // True for an object store (or a wrapper of one): every request is a round trip over the network,
  // so merge reads, read ahead and keep many requests in flight. False for this machine's disks.
  virtual bool remote() const { return false; }
  // True only for the local file system itself: its paths are this machine's file names, and
  // reading them with open(2), mmap(2) or a library that opens files itself (libhdf5) is the same as
  // reading through it. False for object stores, and for wrappers (fault injection, throttling),
  // which such reads would bypass.
  virtual bool local_files() const { return false; }
  // True when a file made by Create becomes visible only whole, at a successful Close (object
  // stores), so writers need no temporary name and rename; false where it is visible while being
  // written (local file systems).
  virtual bool CreateIsAtomic() const { return false; }
  // How many requests at once use this storage well in bulk work (stats, uploads, listings of many
  // directories): a local disk gains little past kLocalParallelism, an object store hides its
  // latency behind kRemoteParallelism.
  virtual size_t parallelism() const { return remote() ? kRemoteParallelism : kLocalParallelism; }
  // The object-store interface behind this storage (many ranges of one object at once, the
  // container), or nullptr.
  virtual ObjectStorage* objects() { return nullptr; }

  static constexpr size_t kLocalParallelism = 8;
  static constexpr size_t kRemoteParallelism = 32;
};

// Where to write a file that readers must see complete or not at all: "<path>.inprogress", to be
// renamed to `path` when complete, or `path` itself on a storage whose Create is atomic.
std::string InProgressPath(const Storage& storage, const std::string& path);

// The local file system (pread/write). A stateless, process-wide instance.
Storage& LocalStorage();

// A file of `storage` that is opened (OpenForReadWithSize) only at its first read, for readers given
// the bytes they expect to need beforehand (Storage::ReadFileEnds) that may never read the file
// itself. size() is `size`; remote() is `remote` (the storage's files' answer). A failed open is
// the failure of that read and of every later one.
std::unique_ptr<RandomAccessFile> OpenOnFirstRead(std::shared_ptr<Storage> storage, std::string path, uint64_t size,
                                                  bool remote);

// Reads a whole file into memory.
Result<std::string> ReadFileToString(Storage& storage, const std::string& path);
// Writes a whole file: data goes to "<path>.tmp-<random>", is synced, then renamed over `path`,
// and the directory is synced, so readers never see a partial file and the new file survives a
// power loss once this returns OK.
Status WriteFileAtomically(Storage& storage, const std::string& path, ByteView data);

// The directory part of a path or key ("a/b/c" -> "a/b", "c" -> "").
std::string ParentPath(const std::string& path);

// Joins two path parts with exactly one '/'.
std::string JoinPath(const std::string& a, const std::string& b);

// The last part of a path or key ("a/b/c" -> "c", "c" -> "c").
std::string BaseName(const std::string& path);

// `path` relative to the directory `dir` it lies under ("t/a/b" under "t" or "t/" -> "a/b"); `path`
// itself when it does not lie under `dir`.
std::string PathUnder(const std::string& path, const std::string& dir);

// Clean-up after a failed write: deletes `paths` in order, best effort. It stops at the first failure
// other than NotFound: the storage is then most likely unreachable (the reason the write failed),
// and each further delete would only wait out its own retries, minutes for hundreds of files on an
// object store. What is left is logged (`what` names the operation) and is never referenced by a
// commit: VACUUM removes it. Returns how many paths were not deleted.
size_t DeleteLeftovers(Storage& fs, const std::vector<std::string>& paths, std::string_view what);

}  // namespace stoke
