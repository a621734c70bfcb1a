// The seed workload: geospatial volumes like those of the published case (30x30x10 voxels, 10
// float32 channels, about 360 KB each), one .npy file per sample, and labels.csv.
//
// The label says whether a buried high-permeability body is present. Each volume is layered
// background (per-channel trends along depth, lateral drift) plus voxel noise; a positive volume
// also holds an ellipsoid, at a random place and size, that raises the permeability, porosity and
// resistivity channels and lowers the density channel by less than the noise, so the body is not
// visible voxel by voxel but a 3D CNN learns it. A fraction of labels is flipped (label_noise), so
// no model reaches 100%.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <vector>

#include "core/clock.h"
#include "core/progress.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "format/npy.h"
#include "format/parquet_nested.h"
#include "format/parquet_writer.h"
#include "io/uri.h"
#include "io/storage.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

struct Sample {
  int label = 0;
  double x = 0, y = 0;
  bool validation = false;
};

// Approximately standard normal from three uniforms (Irwin-Hall; variance 1 after scaling): cheap
// enough for 90,000 voxels per sample.
inline float FastNormal(Rng& rng) {
  double s = rng.Uniform() + rng.Uniform() + rng.Uniform() - 1.5;
  return static_cast<float>(s * 2.0);
}

Sample GenerateVolume(const SynthVolumesOptions& o, int64_t index, std::vector<float>* out) {
  Rng rng(SplitMix64(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index)));
  const int64_t nx = o.shape[0], ny = o.shape[1], nz = o.shape[2], nc = o.channels;
  out->resize(static_cast<size_t>(nx * ny * nz * nc));
  Sample s;
  const int64_t grid = 1000;  // volumes laid out on a survey grid, 30 m apart
  s.x = static_cast<double>(index % grid) * 30.0 + rng.Uniform() * 10.0;
  s.y = static_cast<double>(index / grid) * 30.0 + rng.Uniform() * 10.0;
  s.validation = rng.Uniform() < 0.1;
  const bool body = rng.Uniform() < 0.5;

  // Background: per channel, a depth profile (layers) and a lateral drift.
  std::vector<float> layer(static_cast<size_t>(nz * nc));
  std::vector<float> drift_x(static_cast<size_t>(nc)), drift_y(static_cast<size_t>(nc));
  for (int64_t c = 0; c < nc; ++c) {
    double freq = 0.5 + rng.Uniform() * 2.0, phase = rng.Uniform() * 6.283, amp = 0.5 + rng.Uniform();
    double base = (rng.Uniform() - 0.5) * 2.0;
    for (int64_t z = 0; z < nz; ++z) {
      layer[z * nc + c] = static_cast<float>(base + amp * std::sin(freq * 6.283 * z / std::max<int64_t>(nz, 1) + phase));
    }
    drift_x[c] = static_cast<float>((rng.Uniform() - 0.5) * 0.04);
    drift_y[c] = static_cast<float>((rng.Uniform() - 0.5) * 0.04);
  }
  // The body: an ellipsoid with radii of 15-30% of each extent.
  double cx = 0, cy = 0, cz = 0, rx = 1, ry = 1, rz = 1;
  if (body) {
    rx = nx * (0.15 + 0.15 * rng.Uniform());
    ry = ny * (0.15 + 0.15 * rng.Uniform());
    rz = nz * (0.15 + 0.15 * rng.Uniform());
    cx = rx + rng.Uniform() * std::max(0.0, nx - 2 * rx);
    cy = ry + rng.Uniform() * std::max(0.0, ny - 2 * ry);
    cz = rz + rng.Uniform() * std::max(0.0, nz - 2 * rz);
  }
  // Channel effects inside the body (permeability, porosity, resistivity up; density down).
  const float kEffect[4] = {0.9f, 0.7f, 0.5f, -0.6f};
  float* p = out->data();
  for (int64_t x = 0; x < nx; ++x) {
    for (int64_t y = 0; y < ny; ++y) {
      for (int64_t z = 0; z < nz; ++z) {
        bool inside = false;
        if (body) {
          double dx = (x - cx) / rx, dy = (y - cy) / ry, dz = (z - cz) / rz;
          inside = dx * dx + dy * dy + dz * dz <= 1.0;
        }
        const float* l = &layer[z * nc];
        for (int64_t c = 0; c < nc; ++c) {
          float v = l[c] + drift_x[c] * x + drift_y[c] * y + FastNormal(rng);
          if (inside && c < 4) v += kEffect[c];
          *p++ = v;
        }
      }
    }
  }
  s.label = body ? 1 : 0;
  if (rng.Uniform() < o.label_noise) s.label = 1 - s.label;
  return s;
}

// The Parquet layout (SynthVolumesOptions::parquet): the samples' columns as Spark writes them.
SchemaNode SparkVolumesSchema() {
  using R = parquet::Repetition;
  SchemaNode element{.name = "element", .type = parquet::Type::kFloat};
  return SchemaNode{.name = "spark_schema", .repetition = R::kRequired, .kind = SchemaNode::Kind::kStruct,
                    .children = {{.name = "id", .type = parquet::Type::kInt64},
                                 {.name = "label", .type = parquet::Type::kInt32},
                                 {.name = "x", .type = parquet::Type::kDouble},
                                 {.name = "y", .type = parquet::Type::kDouble},
                                 {.name = "split", .type = parquet::Type::kByteArray, .is_string = true},
                                 {.name = "volume", .kind = SchemaNode::Kind::kList, .children = {element}}}};
}

// Writes every volume as a row of out_dir/volumes.parquet, in order (one writer: rows are added one
// at a time, each generated on the calling thread).
Result<int64_t> WriteSparkVolumes(const SynthVolumesOptions& o, Storage& fs, const std::string& out_dir,
                                  std::vector<Sample>* samples, ProgressBar* bar) {
  const int64_t values = o.shape[0] * o.shape[1] * o.shape[2] * o.channels;
  WriterOptions wo;
  STOKE_RETURN_IF_ERROR(SetCodecPolicy(Codec::kSnappy, &wo));  // every chunk, as Spark does by default
  wo.scalar_page_rows = std::max<int64_t>(1, (int64_t{1} << 20) / (values * 4));
  wo.row_group_rows = std::max<int64_t>(1, (int64_t{128} << 20) / (values * 4));
  STOKE_ASSIGN_OR_RETURN(auto writer, NestedParquetWriter::Create(fs, JoinPath(out_dir, "volumes.parquet"),
                                                                  SparkVolumesSchema(), wo));
  std::vector<float> volume;
  int64_t bytes = 0;
  for (int64_t i = 0; i < o.samples; ++i) {
    const Sample s = (*samples)[static_cast<size_t>(i)] = GenerateVolume(o, i, &volume);
    nlohmann::json row = {{"id", i}, {"label", s.label}, {"x", s.x}, {"y", s.y}, {"split", s.validation ? "val" : "train"},
                          {"volume", volume}};
    STOKE_RETURN_IF_ERROR(writer->AddRow(row));
    bytes += values * 4;
    bar->Add(1, static_cast<uint64_t>(values * 4));
  }
  STOKE_RETURN_IF_ERROR(writer->Close());
  return bytes;
}

}  // namespace

Result<SynthReport> SynthVolumes(const SynthVolumesOptions& o) {
  if (o.out_dir.empty()) return Status::InvalidArgument("synth volumes: an output directory is required");
  if (o.samples <= 0) return Status::InvalidArgument(fmt::format("synth volumes: `samples` must be positive, got {}", o.samples));
  if (o.shape.size() != 3 || o.shape[0] <= 0 || o.shape[1] <= 0 || o.shape[2] <= 0 || o.channels <= 0) {
    return Status::InvalidArgument("synth volumes: `shape` needs three positive sizes and `channels` a positive count");
  }
  if (o.shape[0] * o.shape[1] * o.shape[2] * o.channels > (int64_t{1} << 28)) {
    return Status::InvalidArgument("synth volumes: a volume of more than 2^28 elements is too large");
  }
  if (o.label_noise < 0 || o.label_noise > 0.5) return Status::InvalidArgument("synth volumes: label noise must lie in [0, 0.5]");
  STOKE_RETURN_IF_ERROR(CreateContainerFor(o.out_dir));
  STOKE_ASSIGN_OR_RETURN(StorageLocation out, ResolveStorageLocation(o.out_dir));
  Storage& fs = *out.storage;
  const std::string& out_dir = out.path;
  STOKE_RETURN_IF_ERROR(fs.CreateDirectories(out_dir));

  const int digits = std::max<int>(6, static_cast<int>(std::to_string(o.samples - 1).size()));
  std::vector<Sample> samples(static_cast<size_t>(o.samples));
  const std::vector<int64_t> shape = {o.shape[0], o.shape[1], o.shape[2], o.channels};
  Stopwatch watch;
  ProgressBar bar("synth volumes", static_cast<uint64_t>(o.samples), "files",
                  o.progress ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  std::atomic<int64_t> bytes{0};
  if (o.parquet) {
    STOKE_ASSIGN_OR_RETURN(int64_t written, WriteSparkVolumes(o, fs, out_dir, &samples, &bar));
    bar.Finish();
    SynthReport report;
    for (const Sample& s : samples) report.positives += s.label;
    report.files = o.samples;
    report.bytes = written;
    report.seconds = watch.Seconds();
    return report;
  }
  // Object stores: one PUT per file, so many in flight hide the per-request latency.
  ThreadPool pool(o.threads != 0 ? o.threads : fs.remote() ? fs.parallelism() : 0);
  // Tasks of 16 samples keep per-task overhead low and the output order irrelevant.
  const int64_t per_task = 16;
  const size_t tasks = static_cast<size_t>((o.samples + per_task - 1) / per_task);
  STOKE_RETURN_IF_ERROR(ParallelFor(pool, tasks, [&](size_t t) -> Status {
    std::vector<float> volume;
    for (int64_t i = static_cast<int64_t>(t) * per_task; i < std::min(o.samples, (static_cast<int64_t>(t) + 1) * per_task); ++i) {
      samples[i] = GenerateVolume(o, i, &volume);
      std::string path = JoinPath(out_dir, fmt::format("volume_{:0{}}.npy", i, digits));
      ByteView data(reinterpret_cast<const uint8_t*>(volume.data()), volume.size() * sizeof(float));
      STOKE_RETURN_IF_ERROR(WriteNpyFile(fs, path, DType::kFloat32, shape, data));
      bytes += static_cast<int64_t>(data.size());
      bar.Add(1, data.size());
    }
    return Status::OK();
  }));
  bar.Finish();

  std::string csv = "file,label,x,y,split\n";
  SynthReport report;
  for (int64_t i = 0; i < o.samples; ++i) {
    const Sample& s = samples[i];
    csv += fmt::format("volume_{:0{}}.npy,{},{:.2f},{:.2f},{}\n", i, digits, s.label, s.x, s.y,
                       s.validation ? "val" : "train");
    report.positives += s.label;
  }
  STOKE_RETURN_IF_ERROR(WriteFileAtomically(fs, JoinPath(out_dir, "labels.csv"), AsBytes(csv)));
  report.files = o.samples;
  report.bytes = bytes.load();
  report.seconds = watch.Seconds();
  return report;
}

}  // namespace stoke
