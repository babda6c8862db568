// MappedFile: a whole file mapped read-only into memory (mmap), for formats
// laid out to be used in place (an embedding table checkpoint with its hash
// index, embedding/mapped_rows.h): the pages are read on first touch, and
// the kernel may drop clean pages again under memory pressure.
//
//   ASSIGN_OR_RETURN(auto file, MappedFile::Open("/ckpt/model.data-00000-of-00001"));
//   const char* bytes = file->data();  // file->size() bytes
//
// The mapping stays valid after the file is unlinked or renamed over (the
// way checkpoints are replaced), but NOT if the file is truncated or
// rewritten in place: a touched page past the new end raises SIGBUS. Only
// map files that are written once, through a temporary name.
//
// Thread-safe after Open: the mapping is immutable.
#ifndef RECFLOW_CORE_MAPPED_FILE_H_
#define RECFLOW_CORE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace recflow {

class MappedFile {
 public:
  // NotFound / PermissionDenied / Internal naming the path when the file
  // cannot be opened or mapped. An empty file maps to data() == nullptr.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Access hints for [offset, offset + bytes) (clipped to the file); they
  // never fail (the kernel may ignore them).
  // Random: no read-ahead around a faulting page (hash probes).
  void AdviseRandom(uint64_t offset, uint64_t bytes) const;
  // WillNeed: start reading the range in the background.
  void AdviseWillNeed(uint64_t offset, uint64_t bytes) const;

  // WillNeed for the pages holding [p, p + bytes), an address range inside
  // some MappedFile's mapping.
  static void AdviseWillNeedAt(const void* p, uint64_t bytes);

  // Reads [offset, offset + n) through the file (not the mapping) into
  // `buf`: a sequential pass with the kernel's read-ahead fills the page
  // cache, which the mapping shares, at the disk's rate, where touching the
  // mapping page by page would fault them in one at a time. DataLoss when
  // the file ends first.
  absl::Status ReadAt(uint64_t offset, uint64_t n, char* buf) const;

 private:
  MappedFile(std::string path, int fd, const char* data, uint64_t size)
      : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}
  void Advise(uint64_t offset, uint64_t bytes, int advice) const;

  const std::string path_;
  const int fd_;  // kept open for ReadAt
  const char* const data_;
  const uint64_t size_;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_MAPPED_FILE_H_
