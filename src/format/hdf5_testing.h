// Test support: writes HDF5 files with libhdf5's own API (for the format and ingest tests).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

namespace stoke::testing_support {

struct DatasetSpec {
  std::string name;
  hid_t file_type;                 // stored type
  hid_t mem_type;                  // type of `data`
  std::vector<hsize_t> dims;       // empty: scalar
  std::vector<hsize_t> chunk;      // empty: contiguous
  bool shuffle = false;
  int deflate = -1;                // level, -1: none
  bool fletcher32 = false;
  const void* data = nullptr;      // nullptr: not written (chunks stay unallocated)
};

inline void WriteDataset(hid_t file, const DatasetSpec& s) {
  hid_t space = s.dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(s.dims.size()), s.dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!s.chunk.empty()) {
    ASSERT_GE(H5Pset_chunk(dcpl, static_cast<int>(s.chunk.size()), s.chunk.data()), 0);
  }
  if (s.shuffle) {
    ASSERT_GE(H5Pset_shuffle(dcpl), 0);
  }
  if (s.deflate >= 0) {
    ASSERT_GE(H5Pset_deflate(dcpl, static_cast<unsigned>(s.deflate)), 0);
  }
  if (s.fletcher32) {
    ASSERT_GE(H5Pset_fletcher32(dcpl), 0);
  }
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t ds = H5Dcreate2(file, s.name.c_str(), s.file_type, space, lcpl, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0) << s.name;
  if (s.data != nullptr) {
    ASSERT_GE(H5Dwrite(ds, s.mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data), 0) << s.name;
  }
  H5Dclose(ds);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
}

inline void StringAttribute(hid_t loc, const char* name, const std::string& value, bool variable) {
  hid_t type = H5Tcopy(H5T_C_S1);
  hid_t space = H5Screate(H5S_SCALAR);
  if (variable) {
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    const char* p = value.c_str();
    hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, &p);
    H5Aclose(a);
  } else {
    H5Tset_size(type, value.size() + 3);  // NUL padding after the text
    H5Tset_strpad(type, H5T_STR_NULLPAD);
    std::string padded = value + std::string(3, '\0');
    hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, padded.data());
    H5Aclose(a);
  }
  H5Sclose(space);
  H5Tclose(type);
}

template <typename T>
void NumberAttribute(hid_t loc, const char* name, hid_t type, T value, hsize_t count = 1) {
  std::vector<T> values(count, value);
  hid_t space = count == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &count, nullptr);
  hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, values.data());
  H5Aclose(a);
  H5Sclose(space);
}

}  // namespace stoke::testing_support
