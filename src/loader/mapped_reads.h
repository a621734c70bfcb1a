// The loader's reads out of mapped files (docs/architecture.md, "The loader"): a batch's split reads
// of local data files whose pages the page cache holds are copied out of a read-only mapping of the
// file, with no system call per read, whatever their size. Private to src/loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"

namespace stoke {

// Files mapped at once, at most: each mapping holds one of the process's memory maps (65,530 by
// default, vm.max_map_count). A table's files beyond the first this many read are read with a
// system call per read, as without mappings.
inline constexpr size_t kMaxMappedFiles = 1024;

// Which of a batch's reads can be copied out of a mapping. The mappings and what the page cache holds
// of them are the producer's: Find, BeginBatch and the constructor run on the producer thread only.
// The MappedFiles Find returns stay valid until the object is destroyed, and may be copied from on
// any thread (MappedFile::Copy).
//
// What the page cache holds is looked up (mincore(2), one call per 65,536 pages) for a whole file
// at once and kept as one bit per page. It is looked up again when older than the refresh interval
// (50 times the last lookup's cost, at least 100 ms), while lookups take at most 2 % of the time
// (a debt of at most 100 ms is kept):
// a page dropped from the page cache since the last lookup is read from the disk by the thread that
// copies it (a page fault), so a table larger than the memory goes to the fetcher instead as soon as
// a lookup shows it.
class MappedReads {
 public:
  explicit MappedReads(std::shared_ptr<const std::vector<std::string>> paths);

  // Takes the time for the batch being planned.
  void BeginBatch();
  // The mapping of file `file` when bytes [offset, offset + length) lie inside it and the page cache
  // held each of their pages at the last lookup; null otherwise (the read goes the other way). Maps
  // the file at its first read, where it can (a local regular file whose page cache the kernel
  // reports to this process) and kMaxMappedFiles allows.
  const MappedFile* Find(uint32_t file, uint64_t offset, uint32_t length);
  const std::string& path(uint32_t file) const { return (*paths_)[file]; }
  size_t mapped_files() const { return mapped_; }

 private:
  struct File {
    std::unique_ptr<MappedFile> map;  // null: not mappable (then never tried again)
    std::vector<uint64_t> resident;   // bit per page (MappedFile::Resident)
    int64_t looked_ns = 0;            // when, and what the lookup cost
    int64_t lookup_cost_ns = 0;
  };
  // The file's entry, mapped at its first use (an empty entry past kMaxMappedFiles).
  File& FileOf(uint32_t file);
  // Maps the file into `f` where it can.
  void Map(uint32_t file, File& f);
  // Looks up what the page cache holds of `f` when the refresh interval and the 2 % allow it.
  void Refresh(File& f);

  const std::shared_ptr<const std::vector<std::string>> paths_;
  std::unordered_map<uint32_t, File> files_;  // every file Find met up to the limit; nodes never move
  File unmapped_;                              // the entry of files past kMaxMappedFiles
  uint32_t last_file_ = ~uint32_t{0};          // the file of the last Find (a batch's reads come in file order)
  File* last_ = nullptr;
  size_t mapped_ = 0;
  const uint64_t page_ = MappedFile::page_size();  // the residency bits' unit
  const int64_t start_ns_;
  int64_t now_ns_ = 0;        // BeginBatch's time
  int64_t lookups_ns_ = 0;    // the lookups' total cost
};

}  // namespace stoke
