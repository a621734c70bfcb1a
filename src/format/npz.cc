#include "format/npz.h"

#include <fmt/format.h>
#include <zip.h>

#include <memory>
#include <unordered_set>

namespace stoke {
namespace {

constexpr std::string_view kNpySuffix = ".npy";
// The end-of-central-directory record of a zip with no members, which is all Python's zipfile
// writes for numpy.savez() without arrays (libzip writes nothing at all).
constexpr std::string_view kEmptyZip("PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22);

struct ZipDiscard {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};
struct ZipSourceFree {
  void operator()(zip_source_t* source) const { zip_source_free(source); }
};
struct ZipFileClose {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};
using ZipArchivePtr = std::unique_ptr<zip_t, ZipDiscard>;
using ZipSourcePtr = std::unique_ptr<zip_source_t, ZipSourceFree>;
using ZipFilePtr = std::unique_ptr<zip_file_t, ZipFileClose>;

// The message of a libzip error, releasing what zip_error_strerror allocates.
std::string TakeZipErrorMessage(zip_error_t* error) {
  std::string message = zip_error_strerror(error);
  zip_error_fini(error);
  return message;
}

// Inflates one member into a buffer of exactly `size` bytes (its directory size, already bounded).
// Reading to the end makes libzip verify the member's CRC-32.
Result<AlignedBuffer> ReadMember(zip_t* archive, zip_uint64_t index, uint64_t size, std::string_view where) {
  ZipFilePtr file(zip_fopen_index(archive, index, 0));
  if (file == nullptr) {
    return Status::Corruption(fmt::format("{}: cannot open member: {}", where, zip_strerror(archive)));
  }
  AlignedBuffer data(size);
  uint64_t done = 0;
  while (done < size) {
    const zip_int64_t n = zip_fread(file.get(), data.data() + done, size - done);
    if (n < 0) return Status::Corruption(fmt::format("{}: {}", where, zip_file_strerror(file.get())));
    if (n == 0) {
      return Status::Corruption(
          fmt::format("{}: member ends after {} bytes, but the central directory says {}", where, done, size));
    }
    done += static_cast<uint64_t>(n);
  }
  uint8_t extra;
  const zip_int64_t n = zip_fread(file.get(), &extra, 1);
  if (n < 0) return Status::Corruption(fmt::format("{}: {}", where, zip_file_strerror(file.get())));
  if (n > 0) {
    return Status::Corruption(
        fmt::format("{}: member is longer than the {} bytes the central directory says", where, size));
  }
  return data;
}

// The whole contents of a buffer source that libzip has finished writing.
Result<std::string> ReadWrittenArchive(zip_source_t* source, const std::string& path) {
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_source_stat(source, &stat) != 0 || (stat.valid & ZIP_STAT_SIZE) == 0 || zip_source_open(source) != 0) {
    return Status::Internal(
        fmt::format("{}: reading the archive built in memory: {}", path, zip_error_strerror(zip_source_error(source))));
  }
  std::string bytes(stat.size, '\0');
  uint64_t done = 0;
  while (done < bytes.size()) {
    const zip_int64_t n = zip_source_read(source, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<uint64_t>(n);
  }
  zip_source_close(source);
  if (done != bytes.size()) {
    return Status::Internal(
        fmt::format("{}: read {} of the {} bytes of the archive built in memory", path, done, bytes.size()));
  }
  return bytes;
}

}  // namespace

Result<std::vector<std::pair<std::string, NpyArray>>> DecodeNpz(ByteView bytes, std::string_view name) {
  // libzip opens an empty buffer as an empty archive, but an empty file is not a zip file.
  if (bytes.empty()) {
    return Status::Corruption(fmt::format("{}: offset 0: expected a zip archive, found an empty file", name));
  }
  zip_error_t error;
  zip_error_init(&error);
  ZipSourcePtr source(zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error));
  if (source == nullptr) return Status::Internal(fmt::format("{}: {}", name, TakeZipErrorMessage(&error)));
  ZipArchivePtr archive(zip_open_from_source(source.get(), ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (archive == nullptr) {
    return Status::Corruption(fmt::format("{}: not a readable zip archive: {}", name, TakeZipErrorMessage(&error)));
  }
  source.release();  // the archive owns it now

  std::vector<std::pair<std::string, NpyArray>> arrays;
  std::unordered_set<std::string> keys;
  uint64_t budget = kNpzMaxExpansion * bytes.size();
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(count); ++i) {
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat_index(archive.get(), i, 0, &stat) != 0) {
      return Status::Corruption(fmt::format("{}: member {}: {}", name, i, zip_strerror(archive.get())));
    }
    const std::string_view member = stat.name;
    const std::string where = fmt::format("{}:{}", name, member);
    if (!member.ends_with(kNpySuffix)) {
      return Status::Unsupported(fmt::format("{}: member '{}' is not an .npy file", name, member));
    }
    if (stat.encryption_method != ZIP_EM_NONE) return Status::Unsupported(fmt::format("{}: encrypted member", where));
    if (stat.comp_method != ZIP_CM_STORE && stat.comp_method != ZIP_CM_DEFLATE) {
      return Status::Unsupported(
          fmt::format("{}: zip compression method {} (stoke reads stored and deflate)", where, stat.comp_method));
    }
    uint64_t max_size = stat.comp_size;
    if (stat.comp_method == ZIP_CM_DEFLATE && __builtin_mul_overflow(stat.comp_size, kNpzMaxExpansion, &max_size)) {
      max_size = UINT64_MAX;
    }
    if (stat.size > max_size || stat.size > budget) {
      return Status::Corruption(fmt::format(
          "{}: member declares {} bytes from {} compressed bytes, more than {} can produce or the archive can hold",
          where, stat.size, stat.comp_size, stat.comp_method == ZIP_CM_STORE ? "storing" : "deflate"));
    }
    budget -= stat.size;
    std::string key(member.substr(0, member.size() - kNpySuffix.size()));
    if (!keys.insert(key).second) return Status::Corruption(fmt::format("{}: duplicate member", where));
    STOKE_ASSIGN_OR_RETURN(AlignedBuffer image, ReadMember(archive.get(), i, stat.size, where));
    STOKE_ASSIGN_OR_RETURN(NpyArray array, DecodeNpy(image.view(), where));
    arrays.emplace_back(std::move(key), std::move(array));
  }
  return arrays;
}

Result<std::vector<std::pair<std::string, NpyArray>>> ReadNpzFile(Storage& storage, const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(storage, path));
  return DecodeNpz(AsBytes(bytes), path);
}

Status WriteNpzFile(Storage& storage, const std::string& path,
                    const std::vector<std::pair<std::string, const NpyArray*>>& arrays, bool compress) {
  if (arrays.empty()) return WriteFileAtomically(storage, path, AsBytes(kEmptyZip));
  zip_error_t error;
  zip_error_init(&error);
  ZipSourcePtr output(zip_source_buffer_create(nullptr, 0, 0, &error));
  if (output == nullptr) return Status::Internal(fmt::format("{}: {}", path, TakeZipErrorMessage(&error)));
  ZipArchivePtr archive(zip_open_from_source(output.get(), ZIP_TRUNCATE, &error));
  if (archive == nullptr) return Status::Internal(fmt::format("{}: {}", path, TakeZipErrorMessage(&error)));
  zip_source_keep(output.get());  // the archive frees its reference on close; ours is read after

  // libzip reads the member sources only in zip_close, so the headers must live until then.
  // Reserved up front: the fragments point into the strings.
  std::vector<std::string> headers;
  headers.reserve(arrays.size());
  for (const auto& [key, array] : arrays) {
    const std::string member = key + std::string(kNpySuffix);
    if (array == nullptr) return Status::InvalidArgument(fmt::format("{}: array '{}' is null", path, key));
    Result<size_t> size = NpyDataSize(array->dtype, array->shape);
    if (!size.ok()) return size.status().WithContext(fmt::format("{}: array '{}'", path, key));
    if (array->data.size() != *size) {
      return Status::InvalidArgument(fmt::format("{}: array '{}' has {} bytes of data, its dtype and shape need {}",
                                                 path, key, array->data.size(), *size));
    }
    headers.push_back(EncodeNpyHeader(array->dtype, array->shape));
    // libzip takes non-const pointers but, with freep = 0, only reads the fragments.
    const zip_buffer_fragment_t fragments[] = {
        {reinterpret_cast<zip_uint8_t*>(headers.back().data()), headers.back().size()},
        {const_cast<zip_uint8_t*>(array->data.data()), array->data.size()},
    };
    zip_source_t* source = zip_source_buffer_fragment_create(fragments, array->data.empty() ? 1 : 2, 0, &error);
    if (source == nullptr) return Status::Internal(fmt::format("{}: {}", path, TakeZipErrorMessage(&error)));
    const zip_int64_t index = zip_file_add(archive.get(), member.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      return Status::InvalidArgument(
          fmt::format("{}: cannot add member '{}': {}", path, member, zip_strerror(archive.get())));
    }
    if (zip_set_file_compression(archive.get(), index, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0) {
      return Status::Internal(fmt::format("{}: {}: {}", path, member, zip_strerror(archive.get())));
    }
  }
  if (zip_close(archive.get()) != 0) {
    return Status::Internal(fmt::format("{}: building the archive: {}", path, zip_strerror(archive.get())));
  }
  archive.release();  // zip_close freed it
  STOKE_ASSIGN_OR_RETURN(std::string bytes, ReadWrittenArchive(output.get(), path));
  return WriteFileAtomically(storage, path, AsBytes(bytes));
}

}  // namespace stoke
