// libFuzzer target: a whole Parquet file from bytes: footer, schema, page indexes, page headers,
// pages, codecs and encodings, repetition and definition levels, nested record assembly. Every read
// must fail cleanly or succeed; none may crash or hang.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "format/parquet_nested.h"
#include "format/parquet_reader.h"

namespace {

class MemoryFile : public stoke::RandomAccessFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  stoke::Status ReadAt(uint64_t offset, stoke::MutableByteView dst) const override {
    if (offset > size_ || dst.size() > size_ - offset) return stoke::Status::IOError("read past end");
    std::memcpy(dst.data(), data_ + offset, dst.size());
    return stoke::Status::OK();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const uint8_t* data_;
  size_t size_;
  std::string path_ = "fuzz.parquet";
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = stoke::ParquetReader::Open(std::make_unique<MemoryFile>(data, size));
  if (!r.ok()) return 0;
  stoke::AlignedBuffer cell;
  for (size_t c = 0; c < (*r)->columns().size() && c < 8; ++c) {
    (void)(*r)->ReadColumn(c);
    for (int g = 0; g < (*r)->num_row_groups() && g < 4; ++g) {
      (void)(*r)->ListPages(g, c);
      (void)(*r)->ReadColumnIndex(g, c);
    }
    if ((*r)->num_rows() > 0) (void)(*r)->ReadBinaryCell(0, c, &cell);
    for (int g = 0; g < (*r)->num_row_groups() && g < 4; ++g) (void)(*r)->ReadColumnChunkLevels(g, c);
  }
  // Records assembled from the levels of every leaf (nested or flat), and the schema tree.
  (void)stoke::SchemaTree(**r);
  (void)stoke::ReadNestedParquet(**r);
  return 0;
}
