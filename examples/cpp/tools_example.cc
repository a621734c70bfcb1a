// stoke/tools.h: the file tools that are not about tables: seed workloads, source files into plain
// Parquet files, and describing or printing one Parquet file.
#include <string>

#include "example_support.h"
#include "stoke/tools.h"

stoke::Status Example(const std::string& dir) {
  stoke::SynthVolumesOptions volumes;
  volumes.out_dir = dir + "/volumes";
  volumes.samples = 10;
  volumes.shape = {8, 8, 4};
  volumes.progress = false;
  STOKE_ASSIGN_OR_RETURN(stoke::SynthReport synth, stoke::SynthVolumes(volumes));

  stoke::ConvertOptions convert;
  convert.source_dir = volumes.out_dir;
  convert.labels_csv = volumes.out_dir + "/labels.csv";
  convert.out = dir + "/volumes.parquet";  // one file; a directory gets part files
  convert.codec = stoke::Codec::kZstd;
  convert.progress = false;
  STOKE_ASSIGN_OR_RETURN(stoke::ConvertReport converted, stoke::ConvertSources(convert));
  STOKE_RETURN_IF_ERROR(example::Expect(converted.rows == synth.files, "a row per file"));

  stoke::InspectFileOptions inspect;
  inspect.pages = true;  // every page: one per sample in the tensor column
  STOKE_ASSIGN_OR_RETURN(std::string description, stoke::InspectParquetFile(convert.out, inspect));
  STOKE_RETURN_IF_ERROR(example::Expect(description.find("row group 0:") != std::string::npos, "a row group"));
  stoke::CatOptions cat;
  cat.columns = {"file", "data"};  // tensor cells as md5:<hex> len:<bytes>
  cat.limit = 3;
  STOKE_ASSIGN_OR_RETURN(stoke::TextRows rows, stoke::CatParquetRows(convert.out, cat));
  STOKE_RETURN_IF_ERROR(example::Expect(rows.rows.size() == 3 && rows.rows[0][1]->rfind("md5:", 0) == 0,
                                        "tensor cells as md5"));
  const std::string csv = stoke::RowsText(rows, stoke::RowFormat::kCsv);  // as `stoke cat --format csv`
  return example::Expect(csv.rfind("file,data\n", 0) == 0, "CSV with a header");
}

int main() { return example::Run(Example); }
