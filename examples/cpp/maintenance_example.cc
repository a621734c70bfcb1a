// stoke/maintenance.h: compaction, vacuum and checkpoints. Each is one commit (or none); no
// version's rows change.
#include <optional>
#include <string>

#include "example_support.h"
#include "stoke/maintenance.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir, 64, /*rows_per_file=*/8));

  stoke::OptimizeOptions optimize;  // small files into files of about target_file_bytes
  optimize.table_dir = table;
  optimize.progress = false;        // codec: default nullopt, the table's own
  STOKE_ASSIGN_OR_RETURN(stoke::OptimizeReport compacted, stoke::OptimizeTable(optimize));
  STOKE_RETURN_IF_ERROR(example::Expect(compacted.files_before == 8 && compacted.files_after == 1,
                                        "8 files compacted into 1"));

  // The 8 small files now belong to version 0 only. Keep no history: they can go.
  stoke::VacuumOptions vacuum;
  vacuum.table_dir = table;
  vacuum.retain_hours = 0;
  vacuum.dry_run = true;  // list them first
  vacuum.progress = false;
  STOKE_ASSIGN_OR_RETURN(stoke::VacuumReport listed, stoke::VacuumTable(vacuum));
  STOKE_RETURN_IF_ERROR(example::Expect(listed.files.size() == 8, "8 files to delete"));
  vacuum.dry_run = false;
  STOKE_ASSIGN_OR_RETURN(stoke::VacuumReport deleted, stoke::VacuumTable(vacuum));
  STOKE_RETURN_IF_ERROR(example::Expect(deleted.files.size() == listed.files.size(), "the files listed deleted"));

  // A checkpoint of the latest version (commits write one every 10 versions by themselves).
  return stoke::CheckpointTable(table, std::nullopt);
}

int main() { return example::Run(Example); }
