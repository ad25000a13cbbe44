// Binary elementwise ops (Add, Sub, Mul, Div) with numpy/PyTorch broadcasting.
//
// Prepare turns the two operand shapes into a compact loop plan. Each operand
// gets one stride per output dim (0 where it is broadcast); output dims of size
// 1 are dropped, and adjacent dims are merged whenever both operands step
// through them contiguously. So same-shape operands collapse to a single
// contiguous dim, a scalar operand to stride 0, and a per-channel operand
// ([1, C, 1, 1] against [N, C, H, W]) to dims [N, C, H*W] with strides
// (C*HW, HW, 1) and (0, 1, 0). Eval runs one contiguous inner loop per row
// (vector-vector, vector-scalar or scalar-vector, which GCC vectorises) and
// steps the outer dims with an odometer, so no element index is ever divided.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

// Collapsed rank limit; only reached by pathological alternating broadcasts
// of very high-rank tensors.
constexpr int kMaxRank = 16;

struct BroadcastPlan {
  int rank = 0;  // collapsed rank; 0 means a single element
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};

// Strides of `dims` right-aligned to an output of rank `out_rank`, 0 where the
// operand is broadcast (missing or size-1 dim).
std::vector<int64_t> BroadcastStrides(const Dims& dims, const Dims& out) {
  const size_t r = out.size();
  std::vector<int64_t> strides(r, 0);
  int64_t stride = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    const size_t j = dims.size() - 1 - k;  // operand dim
    const size_t i = r - 1 - k;            // output dim
    strides[i] = dims[j] == 1 ? 0 : stride;
    stride *= dims[j];
  }
  return strides;
}

absl::StatusOr<BroadcastPlan> MakePlan(const ir::Node& node, const Dims& out, const Dims& a,
                                       const Dims& b) {
  const std::vector<int64_t> sa = BroadcastStrides(a, out);
  const std::vector<int64_t> sb = BroadcastStrides(b, out);
  std::vector<int64_t> dims, as, bs;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    if (!dims.empty() && as.back() == sa[i] * out[i] && bs.back() == sb[i] * out[i]) {
      dims.back() *= out[i];
      as.back() = sa[i];
      bs.back() = sb[i];
    } else {
      dims.push_back(out[i]);
      as.push_back(sa[i]);
      bs.push_back(sb[i]);
    }
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return Unimplemented(node, "broadcast of ", DimsToString(a), " with ", DimsToString(b),
                         " needs more than ", kMaxRank, " loop dims");
  }
  BroadcastPlan plan;
  plan.rank = static_cast<int>(dims.size());
  for (int i = 0; i < plan.rank; ++i) {
    plan.dims[i] = dims[i];
    plan.a_strides[i] = as[i];
    plan.b_strides[i] = bs[i];
  }
  return plan;
}

absl::Status PrepareBinary(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  RETURN_IF_ERROR(CheckDType(ctx, 1, DType::kF32));
  const Dims& a = ctx.inputs[0].dims;
  const Dims& b = ctx.inputs[1].dims;
  const size_t r = std::max(a.size(), b.size());
  Dims out(r, 1);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) {
      return InvalidArg(ctx.node, "cannot broadcast ", DimsToString(a), " with ", DimsToString(b));
    }
    out[r - 1 - k] = da == 1 ? db : da;
  }
  ASSIGN_OR_RETURN(BroadcastPlan plan, MakePlan(ctx.node, out, a, b));
  ctx.outputs = {TensorInfo{DType::kF32, out}};
  ctx.state = std::make_shared<BroadcastPlan>(plan);
  return absl::OkStatus();
}

struct AddOp {
  static float Apply(float a, float b) { return a + b; }
};
struct SubOp {
  static float Apply(float a, float b) { return a - b; }
};
struct MulOp {
  static float Apply(float a, float b) { return a * b; }
};
struct DivOp {
  static float Apply(float a, float b) { return a / b; }
};

// One contiguous row. The branches sit outside the loops so that each loop is
// a plain vectorisable stream.
template <typename Op>
inline void Row(const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n) {
  if (sa != 0 && sb != 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], b[i]);
  } else if (sa != 0) {
    const float y = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], y);
  } else if (sb != 0) {
    const float x = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = Op::Apply(x, b[i]);
  } else {
    std::fill(out, out + n, Op::Apply(*a, *b));
  }
}

template <typename Op>
absl::Status EvalBinary(EvalContext& ctx) {
  const BroadcastPlan& p = StateAs<BroadcastPlan>(ctx);
  const float* a = ctx.inputs[0]->data<float>();
  const float* b = ctx.inputs[1]->data<float>();
  float* out = ctx.outputs[0]->data<float>();
  const int64_t total = ctx.outputs[0]->num_elements();
  if (total == 0) return absl::OkStatus();
  if (p.rank == 0) {
    out[0] = Op::Apply(a[0], b[0]);
    return absl::OkStatus();
  }
  const int last = p.rank - 1;
  const int64_t inner = p.dims[last];
  const int64_t rows = total / inner;
  if (rows == 1) {
    // Same shape or scalar operand: one long row, split across threads.
    const int64_t sa = p.a_strides[last], sb = p.b_strides[last];
    ParallelFor(inner, ctx.num_threads, total, [&](int64_t begin, int64_t end) {
      Row<Op>(a + begin * sa, sa, b + begin * sb, sb, out + begin, end - begin);
    });
    return absl::OkStatus();
  }
  ParallelFor(rows, ctx.num_threads, total, [&](int64_t begin, int64_t end) {
    // Odometer over the outer dims, started at row `begin`.
    int64_t idx[kMaxRank];
    int64_t a_off = 0, b_off = 0;
    int64_t rest = begin;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rest % p.dims[d];
      rest /= p.dims[d];
      a_off += idx[d] * p.a_strides[d];
      b_off += idx[d] * p.b_strides[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      Row<Op>(a + a_off, p.a_strides[last], b + b_off, p.b_strides[last], out + row * inner, inner);
      for (int d = last - 1; d >= 0; --d) {
        a_off += p.a_strides[d];
        b_off += p.b_strides[d];
        if (++idx[d] < p.dims[d]) break;
        a_off -= p.a_strides[d] * p.dims[d];
        b_off -= p.b_strides[d] * p.dims[d];
        idx[d] = 0;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> ElementwiseKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kAdd, DType::kF32, PrepareBinary, EvalBinary<AddOp>},
      {ir::OpKind::kSub, DType::kF32, PrepareBinary, EvalBinary<SubOp>},
      {ir::OpKind::kMul, DType::kF32, PrepareBinary, EvalBinary<MulOp>},
      {ir::OpKind::kDiv, DType::kF32, PrepareBinary, EvalBinary<DivOp>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
