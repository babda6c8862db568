// Id deduplication for sparse gradients. An embedding lookup's gradient
// arrives per occurrence (one row per looked-up id, duplicates included),
// while the table's Apply*() wants one gradient row per distinct id:
//
//   UniqueIds u = Unique(ids);                     // u.ids, u.inverse
//   std::vector<float> g(u.ids.size() * dim);
//   SumRowsByIndex(u.inverse, grad_per_occurrence, dim, u.ids.size(),
//                  g.data());
//   table->ApplyAdagrad(u.ids, g, params, step, pool);
//
// Thread-compatible; deterministic (first-occurrence order, like tf.unique;
// sums run in occurrence order).
#ifndef RECFLOW_EMBEDDING_UNIQUE_IDS_H_
#define RECFLOW_EMBEDDING_UNIQUE_IDS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace recflow::embedding {

struct UniqueIds {
  std::vector<int64_t> ids;      // distinct ids in first-occurrence order
  std::vector<int64_t> inverse;  // ids_in[i] == ids[inverse[i]]
  std::vector<int64_t> counts;   // occurrences of ids[j]
};

UniqueIds Unique(absl::Span<const int64_t> ids);

// dst[j, :] = sum of src[i, :] over i with inverse[i] == j, for j in
// [0, num_unique); dst is overwritten (rows with no occurrence become 0).
// src is [inverse.size(), dim], dst [num_unique, dim].
// REQUIRES: 0 <= inverse[i] < num_unique.
void SumRowsByIndex(absl::Span<const int64_t> inverse, const float* src,
                    int64_t dim, int64_t num_unique, float* dst);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_UNIQUE_IDS_H_
