#include "recflow/data/iterator_resource.h"

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::data {

IteratorResource::IteratorResource(Iterator iterator,
                                   std::vector<DataType> dtypes,
                                   std::vector<PartialShape> shapes,
                                   std::string debug)
    : iterator_(std::move(iterator)),
      dtypes_(std::move(dtypes)),
      shapes_(std::move(shapes)),
      debug_(std::move(debug)) {}

absl::Status IteratorResource::GetNext(Element* out, bool* end_of_sequence) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(iterator_.GetNext(out, end_of_sequence));
  if (!*end_of_sequence) ++produced_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> IteratorResource::SaveToString() {
  MutexLock lock(&mu_);
  return iterator_.SaveToString();
}

absl::Status IteratorResource::RestoreFromString(absl::string_view bytes) {
  MutexLock lock(&mu_);
  return iterator_.RestoreFromString(bytes);
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
  ASSIGN_OR_RETURN(Iterator it, dataset.MakeIterator(std::move(ctx)));
  auto resource = std::make_shared<IteratorResource>(
      std::move(it), dataset.impl()->output_dtypes(),
      dataset.impl()->output_shapes(), dataset.DebugString());
  return rm->Create<IteratorResource>(
      container.empty() ? rm->default_container() : container, name,
      std::move(resource));
}

}  // namespace recflow::data
