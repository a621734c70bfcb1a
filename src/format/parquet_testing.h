// Test helpers for Parquet files: rewriting a file's footer to make the shapes other writers
// produce (or get wrong).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/buffer.h"
#include "format/parquet_metadata.h"
#include "format/parquet_reader.h"
#include "io/storage.h"

namespace stoke::testing_support {

// Rewrites the footer of a data file with what `change` makes of its metadata (pages untouched);
// returns the new file size.
template <typename Change>
inline int64_t RewriteFooter(const std::string& path, Change change) {
  auto reader = ParquetReader::Open(LocalStorage(), path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  parquet::FileMetaData meta = (*reader)->metadata();
  const uint64_t footer_start = (*reader)->file_size() - 8 - (*reader)->footer_size();
  reader->reset();
  change(meta);
  auto bytes = ReadFileToString(LocalStorage(), path);
  EXPECT_TRUE(bytes.ok());
  std::string out = bytes->substr(0, footer_start);
  std::string footer;
  parquet::SerializeFileMetaData(meta, &footer);
  out += footer;
  uint8_t len[4];
  StoreLE<uint32_t>(len, static_cast<uint32_t>(footer.size()));
  out.append(reinterpret_cast<const char*>(len), 4);
  out += "PAR1";
  EXPECT_TRUE(WriteFileAtomically(LocalStorage(), path, AsBytes(out)).ok());
  return static_cast<int64_t>(out.size());
}

}  // namespace stoke::testing_support
