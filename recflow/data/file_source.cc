#include "recflow/data/file_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/logging.h"
#include "recflow/data/dataset_internal.h"

namespace recflow::data::internal {

absl::StatusOr<Tensor> MoveToStringTensor(std::vector<std::string>* records,
                                          bool scalar, absl::string_view source,
                                          absl::string_view what) {
  const int64_t n = static_cast<int64_t>(records->size());
  DCHECK(!scalar || n == 1);
  absl::StatusOr<Tensor> t =
      Tensor::Create(DT_STRING, scalar ? TensorShape() : TensorShape({n}));
  if (!t.ok())
    return errors::Annotate(
        t.status(), absl::StrCat(source, " ", what, ": ", n, " records"));
  std::string* dst = t->data<std::string>();
  for (int64_t i = 0; i < n; ++i) dst[i] = std::move((*records)[i]);
  records->clear();
  return t;
}

// ---------------------------------------------------------------------------
// FileSourceDataset

FileSourceDataset::FileSourceDataset(const FileSourceKind& kind,
                                     std::vector<std::string> files,
                                     ShardOptions shard, int64_t per_element,
                                     bool emit_origin,
                                     absl::Status options_status,
                                     MakeIteratorFn make_iterator)
    : kind_(kind),
      total_files_(static_cast<int64_t>(files.size())),
      shard_(shard),
      per_element_(per_element),
      emit_origin_(emit_origin),
      make_iterator_(std::move(make_iterator)) {
  if (shard.num_shards < 1 || shard.shard_index < 0 ||
      shard.shard_index >= shard.num_shards) {
    status_ = errors::InvalidArgument(
        kind.name, ": shard_index ", shard.shard_index, " of num_shards ",
        shard.num_shards,
        "; need num_shards >= 1 and 0 <= shard_index < num_shards");
  } else if (per_element < 1) {
    status_ = errors::InvalidArgument(kind.name, ": ", kind.per_element_attr,
                                      " is ", per_element, "; must be >= 1");
  } else {
    status_ = std::move(options_status);
  }
  if (status_.ok()) {
    for (size_t i = 0; i < files.size(); ++i) {
      if (static_cast<int64_t>(i % shard.num_shards) == shard.shard_index) {
        files_.push_back(std::move(files[i]));
      }
    }
  }
  dtypes_.push_back(DT_STRING);
  shapes_.push_back(per_element == 1 ? PartialShape({})
                                     : PartialShape({kUnknownDim}));
  if (emit_origin) {
    dtypes_.push_back(DT_STRING);
    shapes_.push_back(shapes_[0]);
  }
}

std::unique_ptr<IteratorBase> FileSourceDataset::MakeIteratorInternal(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  if (!status_.ok()) return MakeErrorIterator(std::move(ctx), prefix, status_);
  return make_iterator_(
      std::static_pointer_cast<const FileSourceDataset>(shared_from_this()),
      std::move(ctx), prefix);
}

std::string FileSourceDataset::DebugString() const {
  std::string s = absl::StrCat(kind_.name, "(", files_.size(), " files");
  if (shard_.num_shards > 1) {
    absl::StrAppend(&s, " of ", total_files_, ", shard ", shard_.shard_index,
                    "/", shard_.num_shards);
  }
  if (per_element_ > 1)
    absl::StrAppend(&s, ", ", kind_.per_element_attr, "=", per_element_);
  if (emit_origin_) absl::StrAppend(&s, ", emit_origin");
  return s + ")";
}

// ---------------------------------------------------------------------------
// FileSourceIteratorBase

FileSourceIteratorBase::FileSourceIteratorBase(
    std::shared_ptr<const FileSourceDataset> ds,
    std::shared_ptr<const IteratorContext> ctx, std::string prefix)
    : IteratorBase(std::move(ctx), std::move(prefix)), ds_(std::move(ds)) {}

absl::Status FileSourceIteratorBase::OutOfMemoryError(int64_t n,
                                                      int64_t k) const {
  const FileSourceKind& kind = ds_->kind();
  return errors::ResourceExhausted(kind.name, ": out of memory after ", n, " ",
                                   kind.records, " of an element of up to ", k,
                                   " ", kind.records, " (",
                                   kind.per_element_attr, "; a batch size?)");
}

absl::Status FileSourceIteratorBase::Save(IteratorState* state) {
  state->WriteInt(Key("file_index"), file_index_);
  state->WriteInt(Key("offset"),
                  static_cast<int64_t>(file_open() ? Offset() : next_offset_));
  state->WriteInt(Key(ds_->kind().counter_key), records_in_file_);
  state->WriteInt(Key("pending_code"),
                  static_cast<int64_t>(pending_error_.code()));
  state->WriteString(Key("pending_message"),
                     std::string(pending_error_.message()));
  return absl::OkStatus();
}

absl::Status FileSourceIteratorBase::Restore(const IteratorState& state) {
  const char* name = ds_->kind().name;
  if (file_open()) {
    EndFile();
    file_.reset();
  }
  ASSIGN_OR_RETURN(file_index_, state.ReadInt(Key("file_index")));
  ASSIGN_OR_RETURN(int64_t offset, state.ReadInt(Key("offset")));
  ASSIGN_OR_RETURN(records_in_file_,
                   state.ReadInt(Key(ds_->kind().counter_key)));
  ASSIGN_OR_RETURN(int64_t code, state.ReadInt(Key("pending_code")));
  ASSIGN_OR_RETURN(std::string message,
                   state.ReadString(Key("pending_message")));
  if (file_index_ < 0 || offset < 0 || records_in_file_ < 0) {
    return errors::DataLoss(name, " state at '", prefix(),
                            "' has a negative position");
  }
  if (file_index_ > static_cast<int64_t>(ds_->files().size())) {
    return errors::FailedPrecondition(
        name, " state at '", prefix(), "' is at file ", file_index_,
        " but the dataset has ", ds_->files().size(), " files");
  }
  next_offset_ = static_cast<uint64_t>(offset);
  pending_error_ = absl::Status(static_cast<absl::StatusCode>(code), message);
  return absl::OkStatus();
}

absl::Status FileSourceIteratorBase::OpenFile() {
  Env* env = context().env != nullptr ? context().env : Env::Default();
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f =
      env->NewRandomAccessFile(CurrentPath());
  if (!f.ok()) {
    return errors::Annotate(
        f.status(),
        absl::StrCat(ds_->kind().name, ": cannot open '", CurrentPath(), "'"));
  }
  file_ = std::move(*f);
  StartFile(file_.get(), next_offset_);
  return absl::OkStatus();
}

void FileSourceIteratorBase::NextFile() {
  if (file_open()) {
    EndFile();
    file_.reset();
  }
  ++file_index_;
  next_offset_ = 0;
  records_in_file_ = 0;
}

}  // namespace recflow::data::internal
