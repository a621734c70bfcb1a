// What the binding's files share (module.cc, table_tools.cc, gpu_images.cc): stoke::Status to Python exceptions,
// running stoke's tools without the GIL, and numpy dtypes.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "stoke/dtype.h"
#include "stoke/status.h"

namespace stoke_python {

namespace py = pybind11;

// Raises the Python exception for `status` (REQUIRES: !status.ok()). The message is kept verbatim.
[[noreturn]] void ThrowStatus(const stoke::Status& status);
// ThrowStatus when `status` is an error.
void ThrowIfError(const stoke::Status& status);
// After a call that ran without the GIL: a signal that arrived meanwhile (SIGINT) raises now.
void RaisePendingSignals();
// The numpy dtype of a stoke dtype (bfloat16 as uint16: the same bits).
py::dtype NumpyDType(stoke::DType dtype);
// A column of samples of `sample_dims` dimensions, as one array with the rows first: refused in
// words naming the column when numpy cannot hold that many dimensions (numpy's own error names none).
void CheckNumpyDims(const std::string& column, size_t sample_dims);

// The value of a parse (ParseCodec, ParseDType, ...), or its error raised (ValueError).
template <typename T>
T Parsed(stoke::Result<T> r) {
  if (!r.ok()) ThrowStatus(r.status());
  return std::move(r).value();
}

// Runs f() without the GIL, then raises a pending signal or the error of its Result.
template <typename F>
auto RunTool(F&& f) {
  auto r = [&] {
    py::gil_scoped_release release;
    return f();
  }();
  RaisePendingSignals();
  if constexpr (std::is_same_v<decltype(r), stoke::Status>) {
    ThrowIfError(r);
  } else {
    if (!r.ok()) ThrowStatus(r.status());
    return std::move(*r);
  }
}

// The table commands: ingest, optimize, vacuum, query, history, inspect, checkpoint, synth
// (table_tools.cc).
void BindTableTools(py::module_& m);
// The GPU image tools: gpu_images_shape, finish_gpu_images, finish_gpu_images_on_host (gpu_images.cc).
void BindGpuImages(py::module_& m);

}  // namespace stoke_python
