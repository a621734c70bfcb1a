// The live row counts of a snapshot (delta_log.h): the stats' numRecords less the rows deletion
// vectors delete.
#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "table/add_stats.h"
#include "table/delta_log.h"

namespace stoke::delta {

int64_t AddFile::LiveRecords(int64_t num_records) const {
  if (num_records < 0 || !deletion_vector) return num_records;
  const int64_t live = num_records - deletion_vector->cardinality;
  return live >= 0 ? live : -1;  // more rows deleted than the file holds: the stats are wrong
}

int64_t Snapshot::num_records() const {
  // Sums of chunks of files, on every core when there are many.
  constexpr size_t kChunk = 8192;
  const size_t chunks = (files.size() + kChunk - 1) / kChunk;
  std::vector<int64_t> sums(chunks, 0);
  const std::vector<ColumnSpec> no_columns;
  auto sum_chunk = [&](size_t c) -> Status {
    AddStatsReader reader(no_columns);
    int64_t total = 0;
    for (size_t i = c * kChunk; i < std::min(files.size(), (c + 1) * kChunk); ++i) {
      const AddFile& f = files[i];
      const int64_t records = f.LiveRecords(f.stats ? reader.NumRecords(*f.stats) : -1);
      if (records < 0 || __builtin_add_overflow(total, records, &total)) {
        total = -1;
        break;
      }
    }
    sums[c] = total;
    return Status::OK();
  };
  if (chunks > 1) {
    ThreadPool pool(0);
    (void)ParallelFor(pool, chunks, sum_chunk);
  } else if (chunks == 1) {
    (void)sum_chunk(0);
  }
  int64_t total = 0;
  for (int64_t s : sums) {
    if (s < 0 || __builtin_add_overflow(total, s, &total)) return -1;
  }
  return total;
}

}  // namespace stoke::delta
