#include "core/buffer.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

static_assert(std::endian::native == std::endian::little, "stoke supports little-endian hosts only");

namespace stoke {

AlignedBuffer::AlignedBuffer(size_t size, size_t alignment) : alignment_(alignment) { Resize(size); }

AlignedBuffer AlignedBuffer::Borrowed(uint8_t* data, size_t capacity, std::shared_ptr<BufferMemory> from) {
  AlignedBuffer b;
  b.data_ = data;
  b.capacity_ = capacity;
  b.from_ = std::move(from);
  return b;
}

AlignedBuffer::~AlignedBuffer() { Release(); }

void AlignedBuffer::Release() {
  if (from_ != nullptr) {
    from_->Return(data_, capacity_);
    from_.reset();
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(other.data_),
      size_(other.size_),
      capacity_(other.capacity_),
      alignment_(other.alignment_),
      from_(std::move(other.from_)) {
  other.data_ = nullptr;
  other.size_ = other.capacity_ = 0;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = other.data_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    alignment_ = other.alignment_;
    from_ = std::move(other.from_);
    other.data_ = nullptr;
    other.size_ = other.capacity_ = 0;
  }
  return *this;
}

void AlignedBuffer::Reserve(size_t capacity) {
  if (capacity <= capacity_) return;
  // aligned_alloc wants a size that is a multiple of the alignment.
  size_t rounded = (capacity + alignment_ - 1) / alignment_ * alignment_;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(alignment_, rounded));
  if (p == nullptr) throw std::bad_alloc();  // out of memory is fatal, as for std::vector
  if (size_ > 0) std::memcpy(p, data_, size_);
  Release();
  data_ = p;
  capacity_ = rounded;
}

void AlignedBuffer::Resize(size_t size) {
  Reserve(size);
  size_ = size;
}

void AlignedBuffer::Append(const void* bytes, size_t n) {
  if (n == 0) return;
  if (size_ + n > capacity_) Reserve(std::max(size_ + n, capacity_ * 2));
  std::memcpy(data_ + size_, bytes, n);
  size_ += n;
}

}  // namespace stoke
