// stoke/ingest.h: source files into a table. Appends resume (a source file is in the table or not);
// an overwrite replaces every row in one commit.
#include <string>

#include "example_support.h"
#include "stoke/ingest.h"
#include "stoke/tools.h"

stoke::Status Example(const std::string& dir) {
  stoke::SynthVolumesOptions volumes;  // 32 .npy files and labels.csv
  volumes.out_dir = dir + "/volumes";
  volumes.samples = 32;
  volumes.shape = {8, 8, 4};
  volumes.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::SynthVolumes(volumes));

  stoke::IngestOptions options;
  options.source_dir = volumes.out_dir;
  options.labels_csv = volumes.out_dir + "/labels.csv";  // joined on its `file` column
  options.table_dir = dir + "/table";                    // created when missing
  options.tensor_column = "volume";
  options.progress = false;
  STOKE_ASSIGN_OR_RETURN(stoke::IngestReport first, stoke::IngestSources(options));
  STOKE_RETURN_IF_ERROR(example::Expect(first.version == 0 && first.rows == 32, "32 rows at version 0"));

  // Again: every source file is in the table already, so nothing is committed.
  STOKE_ASSIGN_OR_RETURN(stoke::IngestReport again, stoke::IngestSources(options));
  STOKE_RETURN_IF_ERROR(example::Expect(again.files_added == 0 && again.skipped == 32, "nothing to do"));

  // A mode from user input: "append" or "overwrite".
  STOKE_ASSIGN_OR_RETURN(options.mode, stoke::ParseIngestMode("overwrite"));
  options.rows_per_file = 8;
  STOKE_ASSIGN_OR_RETURN(stoke::IngestReport overwrite, stoke::IngestSources(options));
  return example::Expect(overwrite.version == 1 && overwrite.files_added == 4 && overwrite.files_removed == 1,
                         "version 1 in 4 files");
}

int main() { return example::Run(Example); }
