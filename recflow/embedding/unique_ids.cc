#include "recflow/embedding/unique_ids.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace recflow::embedding {

UniqueIds Unique(absl::Span<const int64_t> ids) {
  UniqueIds out;
  out.inverse.resize(ids.size());
  absl::flat_hash_map<int64_t, int64_t> index;
  index.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, inserted] =
        index.try_emplace(ids[i], static_cast<int64_t>(out.ids.size()));
    if (inserted) {
      out.ids.push_back(ids[i]);
      out.counts.push_back(0);
    }
    out.inverse[i] = it->second;
    ++out.counts[it->second];
  }
  return out;
}

void SumRowsByIndex(absl::Span<const int64_t> inverse, const float* src,
                    int64_t dim, int64_t num_unique, float* dst) {
  std::fill(dst, dst + num_unique * dim, 0.0f);
  for (size_t i = 0; i < inverse.size(); ++i) {
    float* d = dst + inverse[i] * dim;
    const float* s = src + static_cast<int64_t>(i) * dim;
    for (int64_t k = 0; k < dim; ++k) d[k] += s[k];
  }
}

}  // namespace recflow::embedding
