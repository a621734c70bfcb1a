// The loader's scalar values packed row by row (scalar_rows.h).
#include "loader/scalar_rows.h"

#include <cstring>

#include "core/buffer.h"
#include "loader/scalar_columns.h"

namespace stoke {

void ScalarRows::SetLayout(std::span<const ScalarColumn> columns, const std::vector<bool>& nullable, size_t rows,
                           size_t string_bytes) {
  fields_.assign(columns.size(), Field{});
  fixed_ = 0;
  strings_ = false;
  for (size_t k = 0; k < columns.size(); ++k) {
    Field& f = fields_[k];
    f.string = columns[k].is_string;
    f.size = f.string ? 2 * sizeof(uint32_t) : static_cast<uint32_t>(DTypeSize(columns[k].dtype));
    f.offset = static_cast<uint32_t>(fixed_);
    fixed_ += f.size;
    strings_ = strings_ || f.string;
  }
  for (size_t k = 0; k < columns.size(); ++k) {
    if (!nullable[k]) continue;
    fields_[k].nullable = true;
    fields_[k].valid_offset = static_cast<uint32_t>(fixed_++);
  }
  rows_ = 0;
  bytes_.clear();
  starts_.clear();
  bytes_.reserve(rows * fixed_ + string_bytes);
  if (strings_) starts_.reserve(rows);
}

void ScalarRows::Append(std::span<const ScalarColumn> part, size_t rows) {
  for (size_t r = 0; r < rows; ++r) AppendRow(part, r);
}

void ScalarRows::AppendRow(std::span<const ScalarColumn> part, size_t r) {
  const size_t start = bytes_.size();
  if (strings_) starts_.push_back(start);
  bytes_.resize(start + fixed_, 0);
  for (size_t k = 0; k < fields_.size(); ++k) {
    const Field& f = fields_[k];
    const ScalarColumn& c = part[k];
    if (f.nullable) bytes_[start + f.valid_offset] = c.valid.empty() ? 1 : c.valid[r];
    if (!f.string) {
      std::memcpy(bytes_.data() + start + f.offset, c.values.data() + r * f.size, f.size);
      continue;
    }
    const std::string& s = c.strings[r];
    // A record's strings are far below 4 GiB: the column's own Parquet page limits them.
    StoreLE<uint32_t>(bytes_.data() + start + f.offset, static_cast<uint32_t>(bytes_.size() - start));
    StoreLE<uint32_t>(bytes_.data() + start + f.offset + 4, static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  ++rows_;
}

void ScalarRows::Gather(std::span<const int64_t> table_rows, size_t begin, size_t end, ScalarBatch out) const {
  for (size_t k = 0; k < fields_.size(); ++k) {
    const Field& f = fields_[k];
    if (f.string) {
      std::string* strings = (*out.strings)[k].data();
      for (size_t i = begin; i < end; ++i) {
        const uint8_t* record = Record(table_rows[i]);
        const uint32_t at = LoadLE<uint32_t>(record + f.offset);
        const uint32_t length = LoadLE<uint32_t>(record + f.offset + 4);
        strings[i].assign(reinterpret_cast<const char*>(record) + at, length);
      }
    } else {
      uint8_t* values = (*out.values)[k].data();
      for (size_t i = begin; i < end; ++i) std::memcpy(values + i * f.size, Record(table_rows[i]) + f.offset, f.size);
    }
    if (f.nullable) {
      uint8_t* valid = (*out.valid)[k].data();
      for (size_t i = begin; i < end; ++i) valid[i] = Record(table_rows[i])[f.valid_offset];
    }
  }
}

}  // namespace stoke
