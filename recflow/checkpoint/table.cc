#include "recflow/checkpoint/table.h"

#include <utility>

#include "recflow/core/crc32c.h"
#include "recflow/core/status.h"

namespace recflow::table {

// --- TableBuilder ------------------------------------------------------------

TableBuilder::TableBuilder(const TableBuilderOptions& options, WritableFile* file)
    : options_(options),
      file_(file),
      data_block_(options.block_restart_interval),
      index_block_(1) {}

absl::Status TableBuilder::Add(absl::string_view key, absl::string_view value) {
  RETURN_IF_ERROR(status_);
  if (finished_) return errors::FailedPrecondition("table builder already finished");
  if (num_entries_ > 0 && key <= absl::string_view(last_key_)) {
    status_ = errors::InvalidArgument("table keys must be added in increasing order: '",
                                      key, "' after '", last_key_, "'");
    return status_;
  }
  if (pending_index_entry_) {
    FindShortestSeparator(&last_key_, key);
    std::string handle;
    pending_handle_.EncodeTo(&handle);
    index_block_.Add(last_key_, handle);
    pending_index_entry_ = false;
  }
  last_key_.assign(key.data(), key.size());
  ++num_entries_;
  data_block_.Add(key, value);
  if (data_block_.CurrentSizeEstimate() >= options_.block_size) {
    status_ = FlushDataBlock();
  }
  return status_;
}

absl::Status TableBuilder::FlushDataBlock() {
  if (data_block_.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(WriteBlock(&data_block_, &pending_handle_));
  pending_index_entry_ = true;
  return absl::OkStatus();
}

absl::Status TableBuilder::WriteBlock(BlockBuilder* block, BlockHandle* handle) {
  absl::string_view raw = block->Finish();
  handle->offset = offset_;
  handle->size = raw.size();
  std::string trailer;
  trailer.push_back(kNoCompression);
  uint32_t crc = crc32c::Value(raw.data(), raw.size());
  crc = crc32c::Extend(crc, trailer.data(), 1);
  PutFixed32(&trailer, crc32c::Mask(crc));
  RETURN_IF_ERROR(file_->Append(raw));
  RETURN_IF_ERROR(file_->Append(trailer));
  offset_ += raw.size() + trailer.size();
  block->Reset();
  return absl::OkStatus();
}

absl::Status TableBuilder::Finish() {
  RETURN_IF_ERROR(status_);
  if (finished_) return errors::FailedPrecondition("table builder already finished");
  finished_ = true;
  status_ = FlushDataBlock();
  RETURN_IF_ERROR(status_);
  // Metaindex: no filter blocks, so an empty block.
  BlockBuilder meta_block(options_.block_restart_interval);
  BlockHandle metaindex_handle, index_handle;
  status_ = WriteBlock(&meta_block, &metaindex_handle);
  RETURN_IF_ERROR(status_);
  if (pending_index_entry_) {
    FindShortSuccessor(&last_key_);
    std::string handle;
    pending_handle_.EncodeTo(&handle);
    index_block_.Add(last_key_, handle);
    pending_index_entry_ = false;
  }
  status_ = WriteBlock(&index_block_, &index_handle);
  RETURN_IF_ERROR(status_);
  Footer footer;
  footer.metaindex_handle = metaindex_handle;
  footer.index_handle = index_handle;
  std::string encoded;
  footer.EncodeTo(&encoded);
  status_ = file_->Append(encoded);
  RETURN_IF_ERROR(status_);
  offset_ += encoded.size();
  return absl::OkStatus();
}

// --- Reading blocks ----------------------------------------------------------

namespace {

// Iterates the entries of one block's contents (which it shares).
class BlockIter {
 public:
  BlockIter(std::shared_ptr<const std::string> contents, std::string file_name)
      : contents_(std::move(contents)), file_name_(std::move(file_name)) {
    const std::string& c = *contents_;
    if (c.size() < sizeof(uint32_t)) {
      Corrupt("block is too short for its restart count");
      return;
    }
    num_restarts_ = DecodeFixed32(c.data() + c.size() - 4);
    const uint64_t max_restarts = (c.size() - 4) / 4;
    if (num_restarts_ == 0 || num_restarts_ > max_restarts) {
      Corrupt("bad restart count in block");
      return;
    }
    restarts_ = static_cast<uint32_t>(c.size() - (1 + num_restarts_) * 4);
    current_ = restarts_;
  }

  bool Valid() const { return status_.ok() && current_ < restarts_; }
  const absl::Status& status() const { return status_; }
  absl::string_view key() const { return key_; }
  absl::string_view value() const { return value_; }

  void SeekToFirst() {
    if (!status_.ok()) return;
    SeekToRestart(0);
    ParseNext();
  }

  void Next() { ParseNext(); }

  void Seek(absl::string_view target) {
    if (!status_.ok()) return;
    // Binary search for the last restart point whose key is < target.
    uint32_t left = 0, right = num_restarts_ - 1;
    while (left < right) {
      const uint32_t mid = (left + right + 1) / 2;
      const uint32_t offset = RestartPoint(mid);
      absl::string_view p(contents_->data() + offset, restarts_ - offset);
      uint32_t shared, non_shared, value_len;
      if (offset >= restarts_ || !GetVarint32(&p, &shared) ||
          !GetVarint32(&p, &non_shared) || !GetVarint32(&p, &value_len) || shared != 0 ||
          p.size() < non_shared) {
        Corrupt("bad entry at a restart point");
        return;
      }
      if (absl::string_view(p.data(), non_shared) < target) {
        left = mid;
      } else {
        right = mid - 1;
      }
    }
    SeekToRestart(left);
    while (ParseNext()) {
      if (key_ >= target) return;
    }
  }

 private:
  uint32_t RestartPoint(uint32_t i) const {
    return DecodeFixed32(contents_->data() + restarts_ + i * 4);
  }

  void SeekToRestart(uint32_t i) {
    key_.clear();
    has_key_ = false;
    next_ = RestartPoint(i);
    current_ = restarts_;
  }

  // Parses the entry at next_; false at the end of the block or on error.
  bool ParseNext() {
    if (!status_.ok()) return false;
    if (next_ >= restarts_) {
      current_ = restarts_;
      return false;
    }
    current_ = next_;
    absl::string_view p(contents_->data() + next_, restarts_ - next_);
    uint32_t shared, non_shared, value_len;
    if (!GetVarint32(&p, &shared) || !GetVarint32(&p, &non_shared) ||
        !GetVarint32(&p, &value_len) || shared > key_.size() ||
        p.size() < static_cast<uint64_t>(non_shared) + value_len) {
      Corrupt("bad entry in block");
      return false;
    }
    // Keys increase within a block. A block with a valid checksum and keys
    // out of order was made, not damaged; lookups in it would go wrong
    // silently. Compared without a copy: the shared prefix is equal.
    if (has_key_ && absl::string_view(p.data(), non_shared) <=
                        absl::string_view(key_).substr(shared)) {
      Corrupt("keys out of order in block");
      return false;
    }
    key_.resize(shared);
    key_.append(p.data(), non_shared);
    has_key_ = true;
    value_ = absl::string_view(p.data() + non_shared, value_len);
    next_ = static_cast<uint32_t>(value_.data() + value_len - contents_->data());
    return true;
  }

  void Corrupt(absl::string_view what) {
    if (status_.ok()) status_ = errors::DataLoss("table ", file_name_, ": ", what, " (corrupted)");
    current_ = restarts_;
  }

  std::shared_ptr<const std::string> contents_;
  std::string file_name_;
  absl::Status status_;
  uint32_t num_restarts_ = 0;
  uint32_t restarts_ = 0;  // offset of the restart array
  uint32_t current_ = 0;   // offset of the current entry (restarts_: invalid)
  uint32_t next_ = 0;      // offset of the entry after it
  std::string key_;
  bool has_key_ = false;  // key_ holds the entry before next_ (order check)
  absl::string_view value_;
};

// Index block -> data blocks.
class TwoLevelIter : public Table::Iterator {
 public:
  explicit TwoLevelIter(const Table* table)
      : table_(table),
        index_(table->index_contents(),
               table->file_name()) {}

  bool Valid() const override { return data_ != nullptr && data_->Valid(); }
  absl::string_view key() const override { return data_->key(); }
  absl::string_view value() const override { return data_->value(); }
  absl::Status status() const override {
    if (!index_.status().ok()) return index_.status();
    if (!status_.ok()) return status_;
    if (data_ != nullptr) return data_->status();
    return absl::OkStatus();
  }

  void SeekToFirst() override {
    prev_index_key_.clear();
    index_.SeekToFirst();
    LoadDataBlock();
    if (data_ != nullptr) data_->SeekToFirst();
    SkipEmptyBlocks();
  }

  void Seek(absl::string_view target) override {
    prev_index_key_.clear();
    index_.Seek(target);
    LoadDataBlock();
    if (data_ != nullptr) data_->Seek(target);
    SkipEmptyBlocks();
  }

  void Next() override {
    data_->Next();
    SkipEmptyBlocks();
  }

 private:
  void LoadDataBlock() {
    data_.reset();
    if (!index_.Valid() || !status_.ok()) return;
    absl::string_view v = index_.value();
    BlockHandle handle;
    if (!handle.DecodeFrom(&v)) {
      status_ = errors::DataLoss("table ", table_->file_name(),
                                 ": bad block handle in index block (corrupted)");
      return;
    }
    auto contents = table_->ReadDataBlock(handle);
    if (!contents.ok()) {
      status_ = contents.status();
      return;
    }
    data_ = std::make_unique<BlockIter>(*std::move(contents), table_->file_name());
  }

  // Note [Table key order]: for Get and Seek to find what iteration finds,
  // each data block's keys lie above the previous block's index key and at
  // or below its own. A table breaking that was made, not damaged (the
  // blocks' checksums hold); it is DataLoss when met rather than lookups
  // that silently miss.
  void CheckKeyFitsItsBlock() {
    if (!Valid() || !index_.Valid()) return;
    if (data_->key() > index_.key() ||
        (!prev_index_key_.empty() && data_->key() <= prev_index_key_)) {
      status_ = errors::DataLoss("table ", table_->file_name(), ": key '", data_->key(),
                                 "' lies outside its block's index range (corrupted)");
      data_.reset();
    }
  }

  // Moves to the next data block while the current one is exhausted.
  void SkipEmptyBlocks() {
    while (data_ != nullptr && !data_->Valid() && data_->status().ok()) {
      if (index_.Valid()) prev_index_key_.assign(index_.key().data(), index_.key().size());
      index_.Next();
      LoadDataBlock();
      if (data_ != nullptr) data_->SeekToFirst();
    }
    if (data_ != nullptr && !data_->status().ok() && status_.ok()) status_ = data_->status();
    CheckKeyFitsItsBlock();
  }

  const Table* table_;
  BlockIter index_;
  std::unique_ptr<BlockIter> data_;
  absl::Status status_;
  // The index key of the block before data_'s, when walked into from it
  // (empty after a Seek that landed in the block: only forward walks check
  // the lower bound).
  std::string prev_index_key_;
};

}  // namespace

// --- Table -------------------------------------------------------------------

Table::Table(const RandomAccessFile* file, uint64_t file_size, std::string file_name,
             const TableReadOptions& options, std::string index_contents)
    : file_(file),
      file_size_(file_size),
      file_name_(std::move(file_name)),
      options_(options),
      index_contents_(std::make_shared<const std::string>(std::move(index_contents))) {}

absl::StatusOr<std::unique_ptr<Table>> Table::Open(const RandomAccessFile* file,
                                                   uint64_t file_size, std::string file_name,
                                                   const TableReadOptions& options) {
  if (file_size < kFooterSize) {
    return errors::DataLoss("table ", file_name, ": file is ", file_size,
                            " bytes, too short to hold the ", kFooterSize,
                            "-byte footer (truncated)");
  }
  char scratch[kFooterSize];
  ASSIGN_OR_RETURN(absl::string_view got,
                   file->Read(file_size - kFooterSize, kFooterSize, scratch));
  Footer footer;
  RETURN_IF_ERROR(footer.DecodeFrom(got, file_name));
  ASSIGN_OR_RETURN(std::string index, ReadBlock(*file, file_size, footer.index_handle,
                                                file_name, options.max_block_bytes));
  // The metaindex is unused (no filters) but checked, so that damage
  // anywhere in the file is reported.
  RETURN_IF_ERROR(ReadBlock(*file, file_size, footer.metaindex_handle, file_name,
                            options.max_block_bytes)
                      .status());
  auto table = std::make_unique<Table>(file, file_size, std::move(file_name), options,
                                       std::move(index));
  // Validate the index block's restart array now, so a corrupt one fails
  // Open rather than the first lookup.
  BlockIter check(table->index_contents_,
                  table->file_name_);
  check.SeekToFirst();
  RETURN_IF_ERROR(check.status());
  return table;
}

absl::StatusOr<std::shared_ptr<const std::string>> Table::ReadDataBlock(
    const BlockHandle& handle) const {
  if (options_.block_cache_bytes > 0) {
    MutexLock lock(&cache_mu_);
    auto it = cache_.find(CacheKey(handle.offset, handle.size));
    if (it != cache_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::string contents, ReadBlock(*file_, file_size_, handle, file_name_,
                                                   options_.max_block_bytes));
  auto block = std::make_shared<const std::string>(std::move(contents));
  if (options_.block_cache_bytes > 0 && block->size() <= options_.block_cache_bytes) {
    MutexLock lock(&cache_mu_);
    const CacheKey key(handle.offset, handle.size);
    if (cache_.emplace(key, block).second) {
      cache_order_.push_back(key);
      cache_bytes_ += block->size();
      while (cache_bytes_ > options_.block_cache_bytes && !cache_order_.empty()) {
        auto victim = cache_.find(cache_order_.front());
        cache_bytes_ -= victim->second->size();
        cache_.erase(victim);
        cache_order_.pop_front();
      }
    }
  }
  return block;
}

std::unique_ptr<Table::Iterator> Table::NewIterator() const {
  return std::make_unique<TwoLevelIter>(this);
}

absl::StatusOr<std::string> Table::Get(absl::string_view key) const {
  auto it = NewIterator();
  it->Seek(key);
  if (it->Valid() && it->key() == key) return std::string(it->value());
  RETURN_IF_ERROR(it->status());
  return errors::NotFound("key '", key, "' not found in table ", file_name_);
}

}  // namespace recflow::table
