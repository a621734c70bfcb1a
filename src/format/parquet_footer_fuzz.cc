// libFuzzer target: a whole Parquet file from bytes: footer, schema, page indexes, page headers,
// pages, codecs and encodings, repetition and definition levels, nested record assembly. Every read
// must fail cleanly or succeed; none may crash or hang.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "format/parquet_nested.h"
#include "format/parquet_reader.h"
#include "io/memory_file.h"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = stoke::ParquetReader::Open(std::make_unique<stoke::MemoryFile>(data, size, "fuzz.parquet"));
  if (!r.ok()) return 0;
  stoke::AlignedBuffer cell;
  for (size_t c = 0; c < (*r)->columns().size() && c < 8; ++c) {
    (void)(*r)->ReadColumn(c);
    for (int g = 0; g < (*r)->num_row_groups() && g < 4; ++g) {
      (void)(*r)->ListPages(g, c);
      (void)(*r)->ReadColumnIndex(g, c);
    }
    if ((*r)->num_rows() > 0) (void)(*r)->ReadBinaryCell(0, c, &cell);
    for (int g = 0; g < (*r)->num_row_groups() && g < 4; ++g) {
      (void)(*r)->ReadColumnChunkLevels(g, c);
      stoke::ByteArrayChunk chunk;
      (void)(*r)->ReadByteArrayChunk(g, c, &chunk);
      auto pages = (*r)->ListPages(g, c);
      for (size_t p = 0; pages.ok() && p < pages->size() && p < 4; ++p) {
        const stoke::PageInfo& page = (*pages)[p];
        (void)(*r)->ReadByteArrayPage(g, c, static_cast<uint64_t>(page.offset),
                                      static_cast<uint64_t>(page.header_size + page.header.compressed_page_size), &chunk);
      }
    }
  }
  // Records assembled from the levels of every leaf (nested or flat), and the schema tree.
  (void)stoke::SchemaTree(**r);
  (void)stoke::ReadNestedParquet(**r);
  return 0;
}
