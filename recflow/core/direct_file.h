// Direct I/O files: the POSIX implementation behind
// Env::NewDirectWritableFile and Env::NewDirectRandomAccessFile.
//
// A direct transfer (O_DIRECT) moves bytes between the caller's memory and
// the device without the page cache, but the kernel accepts it only when
// the file offset, the length and the memory address are all multiples of
// the device's block size. kDirectIoAlignment (4096) covers 512-byte and
// 4K-sector devices. These files accept pieces of any size and alignment:
//
// Writing. Appends are gathered in an aligned staging buffer that is
// written in whole blocks. A piece that starts at an aligned file offset in
// aligned memory (AlignedBuffer, as BundleWriter uses) is written straight
// from the caller's memory, its last partial block (if any) staged. The
// final partial block is written by Sync or Close, with O_DIRECT turned off
// for the descriptor (fcntl); from then on the file is an ordinary buffered
// one. Flush writes only whole blocks: up to 4095 bytes stay in memory
// until Sync or Close.
//
// Reading. A read at an aligned offset into aligned memory goes straight to
// the caller, its last partial block (if any) through the page cache. A
// read under 64 KiB goes through the page cache (a second, ordinary
// descriptor): small reads are better cached. Anything else is read in
// aligned pieces through a bounce buffer (kept by the file for reuse) and
// copied out. BundleWriter starts large tensors on aligned offsets and
// restores read them into direct_io_allocator() buffers, so most bytes
// take the first way.
//
// Fallbacks. Opening returns nullptr (not an error) where the file system
// refuses O_DIRECT (tmpfs says EINVAL), so the caller opens an ordinary
// file instead. A transfer that fails with EINVAL later (a file system that
// accepted the flag but not this alignment) turns direct I/O off for that
// file and is retried the ordinary way: the bytes always arrive.
#ifndef RECFLOW_CORE_DIRECT_FILE_H_
#define RECFLOW_CORE_DIRECT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/core/allocator.h"
#include "recflow/core/env.h"

namespace recflow {

inline constexpr size_t kDirectIoAlignment = 4096;

// A heap byte buffer whose start and capacity are multiples of
// kDirectIoAlignment. Move-only. Bytes are appended up to the capacity.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Capacity rounded up to a multiple of kDirectIoAlignment.
  explicit AlignedBuffer(size_t capacity);
  AlignedBuffer(AlignedBuffer&& other) noexcept { *this = std::move(other); }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.size_ = other.capacity_ = 0;
    return *this;
  }

  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  size_t room() const { return capacity_ - size_; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == capacity_; }
  void clear() { size_ = 0; }
  // Keeps the first n bytes (n at most capacity()).
  void set_size(size_t n) { size_ = n; }
  // Appends n bytes; n must be at most room().
  void append(const char* p, size_t n) {
    std::memcpy(data_.get() + size_, p, n);
    size_ += n;
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The CPU allocator with every buffer aligned to kDirectIoAlignment:
// tensors a direct read fills in place (checkpoint restores). Never null.
Allocator* direct_io_allocator();

// Opens `path` for writing (created or truncated) with O_DIRECT. nullptr
// when the file system does not support direct I/O; errors as
// Env::NewWritableFile.
absl::StatusOr<std::unique_ptr<WritableFile>> OpenDirectWritableFile(const std::string& path);

// Opens `path` for reading with O_DIRECT (plus an ordinary descriptor for
// small reads). nullptr when the file system does not support direct I/O;
// errors as Env::NewRandomAccessFile.
absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenDirectRandomAccessFile(
    const std::string& path);

}  // namespace recflow

#endif  // RECFLOW_CORE_DIRECT_FILE_H_
