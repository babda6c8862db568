#include "recflow/kernels/cwise_ops_common.h"

namespace recflow::cwise {

absl::StatusOr<TensorShape> BroadcastShape(const TensorShape& a, const TensorShape& b,
                                           BroadcastPlan* plan) {
  const int rank = std::max(a.dims(), b.dims());
  absl::InlinedVector<int64_t, 6> out(rank), da(rank), db(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.dims() - rank + i, ib = b.dims() - rank + i;
    da[i] = ia >= 0 ? a.dim_size(ia) : 1;
    db[i] = ib >= 0 ? b.dim_size(ib) : 1;
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) {
      return errors::InvalidArgument("incompatible shapes: ", a.DebugString(), " vs. ",
                                     b.DebugString());
    }
    out[i] = da[i] == 1 ? db[i] : da[i];
  }
  // Strides in elements, then merge dims with the same broadcast pattern.
  absl::InlinedVector<int64_t, 6> sa(rank), sb(rank);
  int64_t stride_a = 1, stride_b = 1;
  for (int i = rank - 1; i >= 0; --i) {
    sa[i] = da[i] == 1 ? 0 : stride_a;
    sb[i] = db[i] == 1 ? 0 : stride_b;
    stride_a *= da[i];
    stride_b *= db[i];
  }
  plan->dims.clear();
  plan->a_strides.clear();
  plan->b_strides.clear();
  for (int i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;  // size-1 dims contribute nothing
    if (!plan->dims.empty()) {
      const size_t k = plan->dims.size() - 1;
      const bool a_same = (sa[i] == 0) == (plan->a_strides[k] == 0);
      const bool b_same = (sb[i] == 0) == (plan->b_strides[k] == 0);
      if (a_same && b_same) {  // merge into the previous dimension
        plan->dims[k] *= out[i];
        plan->a_strides[k] = sa[i];
        plan->b_strides[k] = sb[i];
        continue;
      }
    }
    plan->dims.push_back(out[i]);
    plan->a_strides.push_back(sa[i]);
    plan->b_strides.push_back(sb[i]);
  }
  return TensorShape(absl::MakeConstSpan(out));
}

}  // namespace recflow::cwise
