// stoke._stoke's GPU image tools (include/stoke/gpu_images.h): the shape a batch's gpu_images column
// finishes to, and its finishing on a CUDA device (device pointers and the stream come from torch) or
// on the host.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "binding.h"
#include "stoke/gpu_images.h"

namespace stoke_python {
namespace {

using Records = py::array_t<uint8_t, py::array::c_style>;

stoke::GpuImagesShape ShapeOf(const Records& records) {
  if (records.ndim() != 2) throw py::value_error("GPU image records: expected a [rows, record bytes] uint8 array");
  return Parsed(stoke::GpuImagesShapeOf(records.data(), records.shape(0), static_cast<size_t>(records.shape(1))));
}

// (dtype name, shape) of the images `records` finish to.
py::tuple GpuImagesShape(const Records& records) {
  const stoke::GpuImagesShape s = ShapeOf(records);
  return py::make_tuple(std::string(stoke::DTypeName(s.dtype)), py::tuple(py::cast(s.shape)));
}

void FinishOnDevice(uintptr_t records, size_t record_bytes, const std::string& dtype, const std::vector<int64_t>& shape,
                    uintptr_t out, uintptr_t stream, int device) {
  stoke::GpuImagesShape s;
  s.dtype = Parsed(stoke::ParseDType(dtype));
  s.shape = shape;
  s.num_bytes = stoke::DTypeSize(s.dtype);
  for (int64_t d : shape) s.num_bytes *= static_cast<size_t>(d);
  RunTool([&] {
    return stoke::FinishGpuImages(reinterpret_cast<const void*>(records), record_bytes, s, reinterpret_cast<void*>(out),
                                  reinterpret_cast<void*>(stream), device);
  });
}

py::array FinishOnHost(const Records& records) {
  const stoke::GpuImagesShape s = ShapeOf(records);
  py::array out(NumpyDType(s.dtype), std::vector<py::ssize_t>(s.shape.begin(), s.shape.end()));
  const uint8_t* in = records.data();
  void* dst = out.mutable_data();
  RunTool([&] { return stoke::FinishGpuImagesOnHost(in, static_cast<size_t>(records.shape(1)), s, dst); });
  return out;
}

}  // namespace

void BindGpuImages(py::module_& m) {
  m.def("gpu_images_shape", &GpuImagesShape, py::arg("records"),
        "(dtype name, shape) of the images a batch's gpu_images column finishes to.");
  m.def("finish_gpu_images", &FinishOnDevice, py::arg("records"), py::arg("record_bytes"), py::arg("dtype"),
        py::arg("shape"), py::arg("out"), py::arg("stream"), py::arg("device"),
        "Queues the finishing of records (a device pointer) into out (a device pointer) on a cudaStream_t of device.");
  m.def("finish_gpu_images_on_host", &FinishOnHost, py::arg("records"),
        "The images a gpu_images column finishes to, computed on the host (the device's reference).");
}

}  // namespace stoke_python
