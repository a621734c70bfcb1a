// Owning, aligned byte buffers and non-owning byte views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

namespace stoke {

using ByteView = std::span<const uint8_t>;
using MutableByteView = std::span<uint8_t>;

inline ByteView AsBytes(std::string_view s) {
  return ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
inline std::string_view AsChars(ByteView b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

// Memory an AlignedBuffer borrows instead of allocating it on the heap (HugePageBlocks), told when
// the buffer lets it go. Thread-safe: buffers are destroyed on any thread.
class BufferMemory {
 public:
  virtual ~BufferMemory() = default;
  // Takes back `data`, `capacity` bytes, handed out by this memory.
  virtual void Return(uint8_t* data, size_t capacity) = 0;
};

// A heap buffer whose start is aligned to `alignment` bytes (4096 by default, the O_DIRECT requirement
// on common file systems), or a block borrowed from a BufferMemory. Move-only. Not thread-safe; the
// owner decides who touches it.
class AlignedBuffer {
 public:
  static constexpr size_t kDefaultAlignment = 4096;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = kDefaultAlignment);
  // An empty buffer over `capacity` bytes at `data` (aligned to 4096) that `from` handed out and takes
  // back when the buffer is destroyed, or grows beyond them (the bytes move to the heap then).
  static AlignedBuffer Borrowed(uint8_t* data, size_t capacity, std::shared_ptr<BufferMemory> from);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

  // Sets the size; grows the allocation (keeping contents) when needed. New bytes are uninitialised.
  void Resize(size_t size);
  // Appends bytes, growing geometrically.
  void Append(const void* bytes, size_t n);
  void Append(ByteView bytes) { Append(bytes.data(), bytes.size()); }
  void Clear() { size_ = 0; }
  // Grows the allocation to at least `capacity` bytes, keeping the contents.
  void Reserve(size_t capacity);

  ByteView view() const { return ByteView(data_, size_); }
  MutableByteView mutable_view() { return MutableByteView(data_, size_); }

 private:
  void Release();  // frees data_ or returns it to from_

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t alignment_ = kDefaultAlignment;
  std::shared_ptr<BufferMemory> from_;  // set when data_ is borrowed
};

// Little-endian loads and stores. stoke runs on little-endian hosts only (checked at build time).
template <typename T>
inline T LoadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
inline void StoreLE(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace stoke
