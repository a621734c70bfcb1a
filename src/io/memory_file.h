// A RandomAccessFile over bytes in memory (not copied: they must outlive the file). For parsers
// fed from memory: fuzz targets, bytes already fetched whole.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "io/storage.h"

namespace stoke {

class MemoryFile final : public RandomAccessFile {
 public:
  MemoryFile(const uint8_t* data, size_t size, std::string path = "memory")
      : data_(data), size_(size), path_(std::move(path)) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    if (offset > size_ || dst.size() > size_ - offset) {
      return Status::IOError(fmt::format("{}: read of {} bytes at offset {} is past the end ({} bytes)", path_, dst.size(),
                                         offset, size_));
    }
    if (dst.size() > 0) std::memcpy(dst.data(), data_ + offset, dst.size());
    return Status::OK();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const uint8_t* data_;
  size_t size_;
  std::string path_;
};

}  // namespace stoke
