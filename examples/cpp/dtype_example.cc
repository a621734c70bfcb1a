// stoke/dtype.h: what a column holds (ColumnKind) and its element type (DType), as a query result or
// a batch describes each column.
#include <cstdio>
#include <string>
#include <vector>

#include "example_support.h"
#include "stoke/dtype.h"
#include "stoke/table.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir));
  stoke::QueryOptions query;
  query.table_dir = table;
  query.select = {"id", "file", "volume"};
  query.limit = 4;
  STOKE_ASSIGN_OR_RETURN(stoke::QueryResult result, stoke::QueryTableColumns(query));
  for (const stoke::QueryColumn& c : result.columns) {
    switch (c.kind) {
      case stoke::ColumnKind::kScalar:  // one element per row in `data`
        std::printf("%s: %s, %zu bytes a row\n", c.name.c_str(), stoke::DTypeName(c.dtype).data(),
                    stoke::DTypeSize(c.dtype));
        break;
      case stoke::ColumnKind::kTensor:  // one array of `shape` per row in `data`
        std::printf("%s: %s tensors of %zu dimensions\n", c.name.c_str(), stoke::DTypeName(c.dtype).data(),
                    c.shape.size());
        break;
      case stoke::ColumnKind::kDate:       // int64 days since 1970-01-01 per row in `data`
      case stoke::ColumnKind::kTimestamp:  // int64 microseconds since 1970-01-01 per row in `data`
        std::printf("%s: %zu rows\n", c.name.c_str(), c.data.size() / sizeof(int64_t));
        break;
      case stoke::ColumnKind::kString:   // text per row in `strings`
      case stoke::ColumnKind::kBinary:   // bytes per row in `strings`
      case stoke::ColumnKind::kDecimal:  // exact decimal text per row in `strings`
      case stoke::ColumnKind::kNested:   // JSON text of a struct, array or map per row in `strings`
        std::printf("%s: %s\n", c.name.c_str(), c.strings.empty() ? "" : c.strings[0].c_str());
        break;
    }
  }
  const stoke::QueryColumn& volume = result.columns[2];
  STOKE_RETURN_IF_ERROR(example::Expect(volume.kind == stoke::ColumnKind::kTensor &&
                                        volume.dtype == stoke::DType::kFloat32 &&
                                        volume.shape == std::vector<int64_t>{8, 8, 4, 2},
                                        "float32 volumes of [8, 8, 4, 2]"));
  // Names are NumPy's, and read back.
  STOKE_ASSIGN_OR_RETURN(stoke::DType half, stoke::ParseDType("float16"));
  return example::Expect(stoke::DTypeSize(half) == 2 && !stoke::ParseDType("float128").ok(),
                         "float16 of 2 bytes and no float128");
}

int main() { return example::Run(Example); }
