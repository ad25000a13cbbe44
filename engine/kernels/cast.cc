// Casts, fills and run-time ranges, for all ten dtypes (FP16 and BF16 through
// float32, see convert.h):
//
//   Cast  x -> attr dtype ("FP32", "INT64", ... as DTypeName prints them), or
//         the dtype of input 1 (type_as). Float to integer truncates toward
//         zero into int64 and then wraps to narrower types, like PyTorch;
//         values int64 cannot hold (NaN, +-inf) become its minimum, as x86
//         conversions give, rather than undefined behaviour. To BOOL is "!= 0".
//   Fill  a tensor of attr value with attr dtype and attr shape (or input 1,
//         an int list computed at run time), or the dtype and dims of input 0
//         where those are absent (zeros_like, full_like, new_full). Prepare
//         precomputes the value's bytes.
//   Arange  start, end, step given as scalars known only when compiling
//         (arange(x.size(1))); constant ranges are folded at import.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "engine/common/status_macros.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/typed.h"

namespace kiln::kernels {
namespace {

absl::StatusOr<DType> DTypeAttr(const ir::Node& node) {
  const std::string name = node.attrs.GetString("dtype");
  std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype) {
    return Unimplemented(node, "dtype '", name, "' is not supported");
  }
  return *dtype;
}

// Conversions live in convert.h (shared with the elementwise family).
void Convert(const void* src, DType from, void* dst, DType to, int64_t n) {
  ConvertElements(src, from, dst, to, n);
}

// ---------------------------------------------------------------- Cast

absl::Status PrepareCast(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 1, 2));
  const DType from = ctx.inputs[0].dtype;
  DType to;
  if (HasInput(ctx, 1)) {
    to = ctx.inputs[1].dtype;
  } else {
    ASSIGN_OR_RETURN(to, DTypeAttr(ctx.node));
  }
  if (from == DType::kUnknown || to == DType::kUnknown) {
    return Unimplemented(ctx.node, "cast from ", DTypeName(from), " to ", DTypeName(to),
                         " is not supported");
  }
  ctx.outputs = {TensorInfo{to, ctx.inputs[0].dims}};
  return absl::OkStatus();
}

absl::Status EvalCast(EvalContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  if (x.dtype() == y.dtype()) {
    if (x.raw_data() != y.raw_data() && x.byte_size() > 0) {
      std::memcpy(y.raw_data(), x.raw_data(), x.byte_size());
    }
    return absl::OkStatus();
  }
  const int64_t n = x.num_elements();
  const size_t in_elem = DTypeSize(x.dtype()), out_elem = DTypeSize(y.dtype());
  ParallelFor(n, ctx.num_threads, n * 2, [&](int64_t begin, int64_t end) {
    Convert(static_cast<const char*>(x.raw_data()) + begin * in_elem, x.dtype(),
            static_cast<char*>(y.raw_data()) + begin * out_elem, y.dtype(), end - begin);
  });
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Fill

struct FillPlan {
  uint64_t bits = 0;  // the value in the output dtype
  size_t elem = 4;
};

absl::Status PrepareFill(PrepareContext& ctx) {
  if (ctx.inputs.size() > 2) return InvalidArg(ctx.node, "expected 0..2 inputs");
  const bool like = HasInput(ctx, 0);
  const ir::Attributes& attrs = ctx.node.attrs;
  DType dtype = like ? ctx.inputs[0].dtype : DType::kF32;
  if (attrs.Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, DTypeAttr(ctx.node));
  }
  if (dtype == DType::kUnknown) {
    return Unimplemented(ctx.node, "dtype ", DTypeName(dtype), " is not supported");
  }
  Dims dims;
  if (HasInput(ctx, 1)) {
    // A shape computed at run time (an int list the executor knows at Prepare).
    const Tensor* value = ctx.inputs[1].constant;
    if (value == nullptr || value->dtype() != DType::kInt64 || value->rank() != 1) {
      return InvalidArg(ctx.node, "input 1 (shape) must be a known int list");
    }
    dims.assign(value->data<int64_t>(), value->data<int64_t>() + value->num_elements());
    for (int64_t d : dims) {
      if (d < 0) return InvalidArg(ctx.node, "negative dim in shape ", DimsToString(dims));
    }
  } else if (attrs.Has("shape")) {
    dims = attrs.GetInts("shape");
    for (int64_t d : dims) {
      if (d < 0) return InvalidArg(ctx.node, "negative dim in shape ", DimsToString(dims));
    }
  } else if (like) {
    dims = ctx.inputs[0].dims;
  } else {
    return InvalidArg(ctx.node, "needs attribute 'shape' or an input to take the shape from");
  }
  auto p = std::make_shared<FillPlan>();
  p->elem = DTypeSize(dtype);
  const double v = attrs.GetFloat("value", 0.0);
  Convert(&v, DType::kF64, &p->bits, dtype, 1);
  ctx.outputs = {TensorInfo{dtype, dims}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalFill(EvalContext& ctx) {
  const FillPlan& p = StateAs<FillPlan>(ctx);
  char* out = static_cast<char*>(ctx.outputs[0]->raw_data());
  const int64_t n = ctx.outputs[0]->num_elements();
  if (p.bits == 0) {
    std::memset(out, 0, n * p.elem);
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * p.elem, &p.bits, p.elem);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Arange

// start, end, step are scalars computed at run time (a sequence length from
// aten::size); the executor knows them in Prepare, where the length is fixed.
struct ArangePlan {
  double start = 0, step = 1;
  DType dtype = DType::kInt64;
};

absl::Status PrepareArange(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 3, 3));
  double v[3];
  for (size_t i = 0; i < 3; ++i) {
    const Tensor* c = ctx.inputs[i].constant;
    if (c == nullptr || c->num_elements() != 1 || !IsPlainDType(c->dtype())) {
      return InvalidArg(ctx.node, "input ", i, " must be a number known before the run");
    }
    v[i] = LoadAsDouble(c->raw_data(), c->dtype(), 0);
  }
  if (v[2] == 0 || !std::isfinite(v[0]) || !std::isfinite(v[1]) || !std::isfinite(v[2])) {
    return InvalidArg(ctx.node, "invalid range start ", v[0], ", end ", v[1], ", step ", v[2]);
  }
  auto p = std::make_shared<ArangePlan>();
  p->start = v[0];
  p->step = v[2];
  ASSIGN_OR_RETURN(p->dtype, DTypeAttr(ctx.node));
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((v[1] - v[0]) / v[2])));
  ctx.outputs = {TensorInfo{p->dtype, Dims{n}}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

absl::Status EvalArange(EvalContext& ctx) {
  const ArangePlan& p = StateAs<ArangePlan>(ctx);
  const int64_t n = ctx.outputs[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const double v = p.start + static_cast<double>(i) * p.step;
    Convert(&v, DType::kF64, static_cast<char*>(ctx.outputs[0]->raw_data()) + i * DTypeSize(p.dtype),
            p.dtype, 1);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> CastKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kCast, DType::kUnknown, PrepareCast, EvalCast},
      {ir::OpKind::kFill, DType::kUnknown, PrepareFill, EvalFill},
      {ir::OpKind::kArange, DType::kUnknown, PrepareArange, EvalArange},
  };
  return kKernels;
}

}  // namespace kiln::kernels
