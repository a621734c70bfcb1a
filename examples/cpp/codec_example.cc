// stoke/codec.h: the page codec a tool writes with, from the name a user gave (a flag, a config).
#include <string>

#include "example_support.h"
#include "stoke/codec.h"
#include "stoke/ingest.h"
#include "stoke/table.h"
#include "stoke/tools.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(stoke::Codec codec, stoke::ParseCodec("lz4_raw"));
  STOKE_RETURN_IF_ERROR(example::Expect(stoke::CodecName(codec) == "lz4_raw", "the name read back"));
  // An unknown name is InvalidArgument listing the names: "unknown codec 'brotli' (expected auto, ...)".
  STOKE_RETURN_IF_ERROR(example::Expect(!stoke::ParseCodec("brotli").ok(), "no brotli"));

  stoke::SynthVolumesOptions volumes;
  volumes.out_dir = dir + "/volumes";
  volumes.samples = 16;
  volumes.shape = {8, 8, 4};
  volumes.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::SynthVolumes(volumes));
  stoke::IngestOptions ingest;
  ingest.source_dir = volumes.out_dir;
  ingest.table_dir = dir + "/table";
  ingest.codec = codec;  // default Codec::kAuto: zstd where it pays
  ingest.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::IngestSources(ingest));

  // The table records its codec (OPTIMIZE rewrites with it); inspect shows it.
  stoke::InspectTableOptions inspect;
  inspect.format = stoke::DescriptionFormat::kJson;
  STOKE_ASSIGN_OR_RETURN(std::string description, stoke::InspectTable(ingest.table_dir, inspect));
  return example::Expect(description.find("\"codec\": \"lz4_raw\"") != std::string::npos,
                         "the table's codec in its description");
}

int main() { return example::Run(Example); }
