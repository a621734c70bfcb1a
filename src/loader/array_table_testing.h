// Test helpers: Delta tables of array columns as another engine could have written them (the loader's
// array-column tests and the block shuffle's decode units).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stoke::testing_arrays {

using json = nlohmann::json;

// A Delta table of one data file per element of `files` (rows as JSON: {"id": .., "v": [..], "m":
// [[..], ..]}), v a list<float> and m a list<list<int>>, in row groups of `row_group_rows` rows and
// pages of `page_rows` rows (an OffsetIndex for each chunk), in a temporary directory removed with
// it. Defined in array_cells_test.cc (the loader's test binary).
class ArrayTable {
 public:
  explicit ArrayTable(const std::vector<std::vector<json>>& files, int64_t row_group_rows = 3, int64_t page_rows = 2);
  ~ArrayTable();
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Row `id`: {"id": id, "v": [id, id + 0.5, -id], "m": [[id, id + 1], [id + 2, id + 3]]}.
json Row(int64_t id);
// Rows first, first + 1, ... (n of them).
std::vector<json> Rows(int64_t first, int64_t n);
// Rows as Row() makes them, but with `values` floats in v: id, id + 1, ...
std::vector<json> LongRows(int64_t first, int64_t n, int values);

}  // namespace stoke::testing_arrays
