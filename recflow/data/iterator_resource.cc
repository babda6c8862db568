#include "recflow/data/iterator_resource.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"

namespace recflow::data {
namespace {

std::string TypeList(const std::vector<DataType>& types) {
  return absl::StrJoin(types, ", ", [](std::string* out, DataType d) {
    out->append(DataTypeString(d));
  });
}

std::string ShapeList(const std::vector<PartialShape>& shapes) {
  return absl::StrJoin(shapes, ", ", [](std::string* out, const PartialShape& s) {
    out->append(s.DebugString());
  });
}

}  // namespace

IteratorResource::IteratorResource(Iterator iterator,
                                   std::vector<DataType> dtypes,
                                   std::vector<PartialShape> shapes,
                                   std::string debug)
    : iterator_(std::make_unique<Iterator>(std::move(iterator))),
      dtypes_(std::move(dtypes)),
      shapes_(std::move(shapes)),
      debug_(std::move(debug)) {}

IteratorResource::IteratorResource(std::vector<DataType> dtypes,
                                   std::vector<PartialShape> shapes,
                                   std::string debug)
    : dtypes_(std::move(dtypes)),
      shapes_(std::move(shapes)),
      debug_(std::move(debug)) {}

absl::Status IteratorResource::Initialize(const Dataset& dataset,
                                          IteratorContext ctx) {
  const std::vector<DataType>& types = dataset.impl()->output_dtypes();
  const std::vector<PartialShape>& shapes = dataset.impl()->output_shapes();
  if (types != dtypes_) {
    return errors::InvalidArgument(
        "iterator ", debug_, " yields (", TypeList(dtypes_),
        ") but the dataset it is initialized from has elements of (",
        TypeList(types), ")");
  }
  for (size_t i = 0; i < shapes.size() && i < shapes_.size(); ++i) {
    if (!shapes[i].IsCompatibleWith(shapes_[i])) {
      return errors::InvalidArgument(
          "iterator ", debug_, " has element shapes (", ShapeList(shapes_),
          ") but the dataset it is initialized from has (", ShapeList(shapes),
          ")");
    }
  }
  RETURN_IF_ERROR(dataset.impl()->CheckValid());
  ASSIGN_OR_RETURN(Iterator it, dataset.MakeIterator(ctx));
  auto fresh = std::make_unique<Iterator>(std::move(it));
  std::unique_ptr<Iterator> old;  // Destroyed outside the lock.
  {
    MutexLock lock(&mu_);
    old = std::move(iterator_);
    iterator_ = std::move(fresh);
    dataset_ = dataset;
    ctx_ = std::move(ctx);
    produced_ = 0;
  }
  return absl::OkStatus();
}

absl::Status IteratorResource::Restart() {
  std::optional<Dataset> dataset;
  IteratorContext ctx;
  {
    MutexLock lock(&mu_);
    if (!dataset_.has_value()) {
      return errors::FailedPrecondition("iterator ", debug_,
                                        " has no dataset to start again from (it was made from "
                                        "an iterator, not initialized from a dataset)");
    }
    dataset = dataset_;
    ctx = ctx_;
  }
  return Initialize(*dataset, std::move(ctx));
}

bool IteratorResource::initialized() const {
  MutexLock lock(&mu_);
  return iterator_ != nullptr;
}

absl::Status IteratorResource::CheckInitialized() const {
  if (iterator_ != nullptr) return absl::OkStatus();
  return errors::FailedPrecondition(
      "GetNext() failed because the iterator ", debug_,
      " has not been initialized. Ensure that you have run the initializer "
      "operation for this iterator (MakeIterator, e.g. "
      "iterator.initializer) or registered a pipeline under its name with "
      "data::RegisterIterator before getting the next element.");
}

absl::Status IteratorResource::GetNext(Element* out, bool* end_of_sequence) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckInitialized());
  RETURN_IF_ERROR(iterator_->GetNext(out, end_of_sequence));
  if (!*end_of_sequence) ++produced_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> IteratorResource::SaveToString() {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckInitialized());
  return iterator_->SaveToString();
}

absl::Status IteratorResource::RestoreFromString(absl::string_view bytes) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckInitialized());
  return iterator_->RestoreFromString(bytes);
}

DataStats& IteratorResource::stats() {
  MutexLock lock(&mu_);
  return iterator_->stats();
}

int64_t IteratorResource::elements_produced() const {
  MutexLock lock(&mu_);
  return produced_;
}

std::string IteratorResource::DebugString() const {
  return absl::StrCat("Iterator(", debug_, ")");
}

absl::Status RegisterIterator(ResourceMgr* rm, const std::string& container,
                              const std::string& name, const Dataset& dataset,
                              IteratorContext ctx) {
  const std::string& where = container.empty() ? rm->default_container() : container;
  auto existing = rm->Lookup<IteratorResource>(where, name);
  if (existing.ok()) {
    if ((*existing)->initialized()) {
      return errors::AlreadyExists("an input pipeline is already registered as '",
                                   where, "/", name, "'");
    }
    return (*existing)->Initialize(dataset, std::move(ctx));
  }
  auto resource = std::make_shared<IteratorResource>(dataset.impl()->output_dtypes(),
                                                     dataset.impl()->output_shapes(),
                                                     dataset.DebugString());
  RETURN_IF_ERROR(resource->Initialize(dataset, std::move(ctx)));  // keeps it for Restart
  return rm->Create<IteratorResource>(where, name, std::move(resource));
}

}  // namespace recflow::data
