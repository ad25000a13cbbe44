// Reference implementations: see reference.h. Every op is written as "for
// each output element, compute it from the definition", with multi-index
// arithmetic and double accumulation, so that a reader can check each one
// against the PyTorch documentation line by line.
#include "engine/kernels/reference/reference.h"

#include "engine/kernels/reference/ref_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/elementwise_chain.h"

namespace kiln::kernels::reference {
namespace {

using ir::Node;
using ir::OpKind;
using Index = std::vector<int64_t>;

absl::Status Error(const Node& node, const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat("reference ", ir::OpName(node.kind), ": ", message));
}

// Row-major strides of `dims`.
Index Strides(const Dims& dims) {
  Index s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * dims[i + 1];
  return s;
}

int64_t Offset(const Index& idx, const Dims& dims) {
  const Index s = Strides(dims);
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * s[i];
  return off;
}

// Calls fn(index) for every multi-index of `dims`, in row-major order.
void ForEachIndex(const Dims& dims, const std::function<void(const Index&)>& fn) {
  if (NumElements(dims) == 0) return;
  Index idx(dims.size(), 0);
  while (true) {
    fn(idx);
    int64_t d = static_cast<int64_t>(dims.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

float At(const Tensor& t, const Index& idx) { return t.data<float>()[Offset(idx, t.dims())]; }

int64_t NormAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + std::max<int64_t>(rank, 1) : axis;
}

// Attribute with one value per spatial dim; a single value is repeated, absent gives `def`.
std::vector<int64_t> Spatial(const Node& node, const char* name, int64_t def) {
  std::vector<int64_t> v = node.attrs.GetInts(name);
  if (v.empty()) return {def, def};
  if (v.size() == 1) return {v[0], v[0]};
  return v;
}

// ---------------------------------------------------------------- elementwise

absl::StatusOr<Dims> BroadcastShape(const Node& node, const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    // Right-align: operand dim for output dim i, or 1 when the operand is shorter.
    const int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1) return Error(node, "shapes do not broadcast");
    out[i] = std::max(da, db);
    if (da == 0 || db == 0) out[i] = 0;
  }
  return out;
}

// The operand index that output index `idx` reads under broadcasting.
Index BroadcastIndex(const Index& idx, const Dims& operand) {
  Index res(operand.size());
  for (size_t k = 0; k < operand.size(); ++k) {
    const size_t i = idx.size() - operand.size() + k;
    res[k] = operand[k] == 1 ? 0 : idx[i];
  }
  return res;
}

absl::StatusOr<std::vector<Tensor>> Binary(const Node& node, const Tensor& a, const Tensor& b) {
  ASSIGN_OR_RETURN(Dims dims, BroadcastShape(node, a.dims(), b.dims()));
  Tensor out = Tensor::Zeros(DType::kF32, dims);
  float* o = out.data<float>();
  int64_t i = 0;
  ForEachIndex(dims, [&](const Index& idx) {
    const float x = At(a, BroadcastIndex(idx, a.dims()));
    const float y = At(b, BroadcastIndex(idx, b.dims()));
    switch (node.kind) {
      case OpKind::kAdd:
        o[i] = x + y;
        break;
      case OpKind::kSub:
        o[i] = x - y;
        break;
      case OpKind::kMul:
        o[i] = x * y;
        break;
      default:
        o[i] = x / y;
        break;
    }
    ++i;
  });
  return std::vector<Tensor>{out};
}

// ---------------------------------------------------------------- activations

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

absl::StatusOr<std::vector<Tensor>> Unary(const Node& node, const Tensor& x) {
  Tensor out = Tensor::Zeros(DType::kF32, x.dims());
  const float* in = x.data<float>();
  float* o = out.data<float>();
  const double lo = node.attrs.GetFloat("min", -std::numeric_limits<double>::infinity());
  const double hi = node.attrs.GetFloat("max", std::numeric_limits<double>::infinity());
  const std::string approximate = node.attrs.GetString("approximate", "none");
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const double v = in[i];
    double r = 0;
    switch (node.kind) {
      case OpKind::kRelu:
        r = std::isnan(v) ? v : (v > 0 ? v : 0);
        break;
      case OpKind::kClip:
        r = std::isnan(v) ? v : std::min(std::max(v, lo), hi);
        break;
      case OpKind::kSigmoid:
        r = Sigmoid(v);
        break;
      case OpKind::kTanh:
        r = std::tanh(v);
        break;
      case OpKind::kGelu:
        if (approximate == "tanh") {
          r = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        } else {
          r = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        }
        break;
      case OpKind::kSilu:
        r = v * Sigmoid(v);
        break;
      case OpKind::kHardSigmoid:
        r = std::clamp(v / 6 + 0.5, 0.0, 1.0);
        break;
      case OpKind::kHardSwish:
        r = v * std::clamp(v + 3, 0.0, 6.0) / 6;
        break;
      default:
        return Error(node, "not a unary op");
    }
    o[i] = static_cast<float>(r);
  }
  return std::vector<Tensor>{out};
}

// ---------------------------------------------------------------- linear algebra

absl::StatusOr<std::vector<Tensor>> MatMul(const Node& node, const Tensor& a, const Tensor& b) {
  if (a.rank() == 0 || b.rank() == 0) return Error(node, "scalar operand");
  // torch.matmul: 1-D left is a row vector, 1-D right a column vector.
  Dims ad = a.dims(), bd = b.dims();
  if (a.rank() == 1) ad.insert(ad.begin(), 1);
  if (b.rank() == 1) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k) return Error(node, "inner dims differ");
  const Dims a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  ASSIGN_OR_RETURN(Dims batch, BroadcastShape(node, a_batch, b_batch));
  Dims full = batch;
  full.push_back(m);
  full.push_back(n);
  Tensor out = Tensor::Zeros(DType::kF32, full);
  float* o = out.data<float>();
  int64_t i = 0;
  ForEachIndex(full, [&](const Index& idx) {
    const Index bi(idx.begin(), idx.end() - 2);
    Index ai = BroadcastIndex(bi, a_batch), bj = BroadcastIndex(bi, b_batch);
    ai.push_back(idx[idx.size() - 2]);
    ai.push_back(0);
    bj.push_back(0);
    bj.push_back(idx.back());
    double sum = 0;
    for (int64_t t = 0; t < k; ++t) {
      ai.back() = t;
      bj[bj.size() - 2] = t;
      sum += static_cast<double>(a.data<float>()[Offset(ai, ad)]) * b.data<float>()[Offset(bj, bd)];
    }
    o[i++] = static_cast<float>(sum);
  });
  Dims dims = batch;
  if (a.rank() > 1) dims.push_back(m);
  if (b.rank() > 1) dims.push_back(n);
  return std::vector<Tensor>{out.Reshaped(dims)};
}

absl::StatusOr<std::vector<Tensor>> Linear(const Node& node, const Tensor& x, const Tensor& w,
                                           const Tensor* b) {
  if (x.rank() < 1 || w.rank() != 2 || x.dims().back() != w.dim(1))
    return Error(node, "bad shapes");
  const int64_t k = w.dim(1), n = w.dim(0);
  Dims dims = x.dims();
  dims.back() = n;
  const int64_t rows = NumElements(Dims(dims.begin(), dims.end() - 1));
  Tensor out = Tensor::Zeros(DType::kF32, dims);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = b ? b->data<float>()[j] : 0.0;
      for (int64_t t = 0; t < k; ++t) {
        sum += static_cast<double>(x.data<float>()[r * k + t]) * w.data<float>()[j * k + t];
      }
      out.data<float>()[r * n + j] = static_cast<float>(sum);
    }
  }
  return std::vector<Tensor>{out};
}

// ---------------------------------------------------------------- conv and pooling

absl::StatusOr<std::vector<Tensor>> Conv(const Node& node, const Tensor& x, const Tensor& w,
                                         const Tensor* b) {
  if (w.rank() != 4 || (x.rank() != 4 && x.rank() != 3)) return Error(node, "bad ranks");
  const bool batched = x.rank() == 4;
  const Tensor x4 = batched ? x : x.Reshaped({1, x.dim(0), x.dim(1), x.dim(2)});
  const auto s = Spatial(node, "stride", 1), p = Spatial(node, "padding", 0),
             d = Spatial(node, "dilation", 1);
  const int64_t groups = node.attrs.GetInt("groups", 1);
  const int64_t n = x4.dim(0), c = x4.dim(1), h = x4.dim(2), wd = x4.dim(3);
  const int64_t o = w.dim(0), cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  if (cg * groups != c || o % groups != 0) return Error(node, "groups mismatch");
  const int64_t oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) / s[0] + 1;
  const int64_t ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) / s[1] + 1;
  if (oh < 1 || ow < 1) return Error(node, "input too small");
  const int64_t og = o / groups;
  Tensor out = Tensor::Zeros(DType::kF32, {n, o, oh, ow});
  ForEachIndex(out.dims(), [&](const Index& idx) {
    const int64_t ni = idx[0], oi = idx[1], y = idx[2], xo = idx[3];
    const int64_t g = oi / og;
    double sum = b ? b->data<float>()[oi] : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t i = 0; i < kh; ++i) {
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t iy = y * s[0] - p[0] + i * d[0];
          const int64_t ix = xo * s[1] - p[1] + j * d[1];
          if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;  // zero padding
          sum += static_cast<double>(At(x4, {ni, g * cg + ci, iy, ix})) * At(w, {oi, ci, i, j});
        }
      }
    }
    out.data<float>()[Offset(idx, out.dims())] = static_cast<float>(sum);
  });
  if (!batched) out = out.Reshaped({o, oh, ow});
  return std::vector<Tensor>{out};
}

// PyTorch's pooling output size, written with real-valued floor/ceil.
int64_t PoolSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / s;
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  // In ceil mode the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

absl::StatusOr<std::vector<Tensor>> Pool(const Node& node, const Tensor& x) {
  if (x.rank() != 4 && x.rank() != 3) return Error(node, "bad rank");
  const auto k = Spatial(node, "kernel", 1);
  auto s = Spatial(node, "stride", 0);
  if (node.attrs.GetInts("stride").empty()) s = k;
  const auto p = Spatial(node, "padding", 0);
  const auto d =
      node.kind == OpKind::kMaxPool ? Spatial(node, "dilation", 1) : std::vector<int64_t>{1, 1};
  const bool ceil_mode = node.attrs.GetBool("ceil_mode");
  const int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  const int64_t oh = PoolSize(h, k[0], s[0], p[0], d[0], ceil_mode);
  const int64_t ow = PoolSize(w, k[1], s[1], p[1], d[1], ceil_mode);
  if (oh < 1 || ow < 1) return Error(node, "input too small");
  Dims dims = x.dims();
  dims[dims.size() - 2] = oh;
  dims[dims.size() - 1] = ow;
  Tensor out = Tensor::Zeros(DType::kF32, dims);
  const bool include_pad = node.attrs.GetBool("count_include_pad", true);
  const int64_t divisor_override = node.attrs.GetInt("divisor_override", 0);
  ForEachIndex(dims, [&](const Index& idx) {
    const int64_t y = idx[idx.size() - 2], xo = idx[idx.size() - 1];
    Index in_idx = idx;
    double best = -std::numeric_limits<double>::infinity();
    double sum = 0;
    int64_t valid = 0, in_padded = 0;
    for (int64_t i = 0; i < k[0]; ++i) {
      for (int64_t j = 0; j < k[1]; ++j) {
        const int64_t iy = y * s[0] - p[0] + i * d[0];
        const int64_t ix = xo * s[1] - p[1] + j * d[1];
        if (iy >= -p[0] && iy < h + p[0] && ix >= -p[1] && ix < w + p[1]) ++in_padded;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        in_idx[idx.size() - 2] = iy;
        in_idx[idx.size() - 1] = ix;
        const double v = At(x, in_idx);
        if (std::isnan(v) || v > best) best = v;
        sum += v;
        ++valid;
      }
    }
    double r;
    if (node.kind == OpKind::kMaxPool) {
      r = best;
    } else if (valid == 0) {
      r = 0;
    } else {
      r = sum / (divisor_override ? divisor_override : include_pad ? in_padded : valid);
    }
    out.data<float>()[Offset(idx, dims)] = static_cast<float>(r);
  });
  return std::vector<Tensor>{out};
}

absl::StatusOr<std::vector<Tensor>> AdaptiveAvgPool(const Node& node, const Tensor& x) {
  if (x.rank() != 4 && x.rank() != 3) return Error(node, "bad rank");
  std::vector<int64_t> size = node.attrs.GetInts("output_size");
  if (size.size() == 1) size.push_back(size[0]);
  const int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  if (size[0] == -1) size[0] = h;
  if (size[1] == -1) size[1] = w;
  Dims dims = x.dims();
  dims[dims.size() - 2] = size[0];
  dims[dims.size() - 1] = size[1];
  Tensor out = Tensor::Zeros(DType::kF32, dims);
  ForEachIndex(dims, [&](const Index& idx) {
    const int64_t y = idx[idx.size() - 2], xo = idx[idx.size() - 1];
    const auto y0 = static_cast<int64_t>(std::floor(static_cast<double>(y * h) / size[0]));
    const auto y1 = static_cast<int64_t>(std::ceil(static_cast<double>((y + 1) * h) / size[0]));
    const auto x0 = static_cast<int64_t>(std::floor(static_cast<double>(xo * w) / size[1]));
    const auto x1 = static_cast<int64_t>(std::ceil(static_cast<double>((xo + 1) * w) / size[1]));
    Index in_idx = idx;
    double sum = 0;
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = x0; ix < x1; ++ix) {
        in_idx[idx.size() - 2] = iy;
        in_idx[idx.size() - 1] = ix;
        sum += At(x, in_idx);
      }
    }
    out.data<float>()[Offset(idx, dims)] = static_cast<float>(sum / ((y1 - y0) * (x1 - x0)));
  });
  return std::vector<Tensor>{out};
}

// ---------------------------------------------------------------- normalisation

absl::StatusOr<std::vector<Tensor>> BatchNorm(const Node& node,
                                              const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  if (x.rank() < 2) return Error(node, "bad rank");
  const double eps = node.attrs.GetFloat("eps", 1e-5);
  Tensor out = Tensor::Zeros(DType::kF32, x.dims());
  ForEachIndex(x.dims(), [&](const Index& idx) {
    const int64_t c = idx[1];
    const double mean = in[3]->data<float>()[c], var = in[4]->data<float>()[c];
    const double v = (At(x, idx) - mean) / std::sqrt(var + eps) * in[1]->data<float>()[c] +
                     in[2]->data<float>()[c];
    out.data<float>()[Offset(idx, x.dims())] = static_cast<float>(v);
  });
  return std::vector<Tensor>{out};
}

absl::StatusOr<std::vector<Tensor>> LayerNorm(const Node& node,
                                              const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const std::vector<int64_t> shape = node.attrs.GetInts("normalized_shape");
  if (shape.empty() || shape.size() > x.dims().size() ||
      !std::equal(shape.begin(), shape.end(), x.dims().end() - shape.size())) {
    return Error(node, "normalized_shape mismatch");
  }
  const double eps = node.attrs.GetFloat("eps", 1e-5);
  const int64_t d = NumElements(shape), rows = x.num_elements() / std::max<int64_t>(d, 1);
  const Tensor* w = in.size() > 1 ? in[1] : nullptr;
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  Tensor out = Tensor::Zeros(DType::kF32, x.dims());
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x.data<float>() + r * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += src[i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (src[i] - mean) * (src[i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i) {
      double v = (src[i] - mean) / std::sqrt(var + eps);
      if (w) v *= w->data<float>()[i];
      if (b) v += b->data<float>()[i];
      out.data<float>()[r * d + i] = static_cast<float>(v);
    }
  }
  return std::vector<Tensor>{out};
}

// ---------------------------------------------------------------- reductions

absl::StatusOr<std::vector<Tensor>> Softmax(const Node& node, const Tensor& x) {
  const int64_t axis = NormAxis(node.attrs.GetInt("axis", -1), x.rank());
  if (axis < 0 || axis >= std::max<int64_t>(x.rank(), 1)) return Error(node, "bad axis");
  Tensor out = Tensor::Zeros(DType::kF32, x.dims());
  if (x.rank() == 0) {
    out.data<float>()[0] = node.kind == OpKind::kSoftmax ? 1.0f : 0.0f;
    return std::vector<Tensor>{out};
  }
  ForEachIndex(x.dims(), [&](const Index& idx) {
    // log sum_j exp(x_j) along the axis, shifted by the max for stability.
    Index j = idx;
    double m = -std::numeric_limits<double>::infinity();
    for (j[axis] = 0; j[axis] < x.dim(axis); ++j[axis]) m = std::max<double>(m, At(x, j));
    double sum = 0;
    for (j[axis] = 0; j[axis] < x.dim(axis); ++j[axis]) sum += std::exp(At(x, j) - m);
    const double lse = m + std::log(sum);
    const double v = At(x, idx) - lse;
    out.data<float>()[Offset(idx, x.dims())] =
        static_cast<float>(node.kind == OpKind::kSoftmax ? std::exp(v) : v);
  });
  return std::vector<Tensor>{out};
}

absl::StatusOr<std::vector<Tensor>> Mean(const Node& node, const Tensor& x) {
  const int64_t rank = x.rank();
  std::vector<bool> reduce(std::max<int64_t>(rank, 1), false);
  std::vector<int64_t> axes = node.attrs.GetInts("axes");
  if (axes.empty()) reduce.assign(reduce.size(), true);
  for (int64_t a : axes) {
    const int64_t n = NormAxis(a, rank);
    if (n < 0 || n >= static_cast<int64_t>(reduce.size()) || reduce[n])
      return Error(node, "bad axes");
    reduce[n] = true;
  }
  const bool keepdim = node.attrs.GetBool("keepdim");
  // Accumulate into a keepdim-shaped buffer, then drop the reduced dims.
  Dims kept = x.dims();
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (reduce[i]) {
      count *= kept[i];
      kept[i] = 1;
    }
  }
  std::vector<double> acc(NumElements(kept), 0.0);
  ForEachIndex(x.dims(), [&](const Index& idx) {
    Index o = idx;
    for (int64_t i = 0; i < rank; ++i) {
      if (reduce[i]) o[i] = 0;
    }
    acc[Offset(o, kept)] += At(x, idx);
  });
  Dims dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduce[i] || keepdim) dims.push_back(kept[i]);
  }
  Tensor out = Tensor::Zeros(DType::kF32, dims);
  for (size_t i = 0; i < acc.size(); ++i) out.data<float>()[i] = static_cast<float>(acc[i] / count);
  return std::vector<Tensor>{out};
}

// ---------------------------------------------------------------- shape ops

absl::StatusOr<std::vector<Tensor>> Reshape(const Node& node, const Tensor& x) {
  Dims shape = node.attrs.GetInts("shape");
  int64_t known = 1;
  int64_t infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0) shape[infer] = x.num_elements() / known;
  if (NumElements(shape) != x.num_elements()) return Error(node, "element count differs");
  return std::vector<Tensor>{x.Clone().Reshaped(shape)};
}

absl::StatusOr<std::vector<Tensor>> Flatten(const Node& node, const Tensor& x) {
  if (x.rank() == 0) return std::vector<Tensor>{x.Clone().Reshaped({1})};
  const int64_t start = NormAxis(node.attrs.GetInt("start_dim", 0), x.rank());
  const int64_t end = NormAxis(node.attrs.GetInt("end_dim", -1), x.rank());
  if (start < 0 || end >= x.rank() || start > end) return Error(node, "bad dims");
  Dims dims;
  int64_t merged = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < start || i > end) {
      dims.push_back(x.dim(i));
    } else {
      merged *= x.dim(i);
      if (i == end) dims.push_back(merged);
    }
  }
  return std::vector<Tensor>{x.Clone().Reshaped(dims)};
}

absl::StatusOr<std::vector<Tensor>> Concat(const Node& node, const std::vector<const Tensor*>& in) {
  std::vector<const Tensor*> parts;
  for (const Tensor* t : in) {
    if (!(t->rank() == 1 && t->dim(0) == 0)) parts.push_back(t);  // torch.cat skips legacy [0]
  }
  if (parts.empty()) return std::vector<Tensor>{in[0]->Clone()};
  const int64_t axis = NormAxis(node.attrs.GetInt("axis", 0), parts[0]->rank());
  Dims dims = parts[0]->dims();
  dims[axis] = 0;
  for (const Tensor* t : parts) {
    if (t->rank() != parts[0]->rank() || t->dtype() != parts[0]->dtype())
      return Error(node, "mismatch");
    dims[axis] += t->dim(axis);
  }
  const size_t elem = DTypeSize(parts[0]->dtype());
  Tensor out = Tensor::Zeros(parts[0]->dtype(), dims);
  // Element by element: find which part output index `idx` falls in.
  ForEachIndex(dims, [&](const Index& idx) {
    Index src = idx;
    for (const Tensor* t : parts) {
      if (src[axis] < t->dim(axis)) {
        std::memcpy(static_cast<char*>(out.raw_data()) + Offset(idx, dims) * elem,
                    static_cast<const char*>(t->raw_data()) + Offset(src, t->dims()) * elem, elem);
        return;
      }
      src[axis] -= t->dim(axis);
    }
  });
  return std::vector<Tensor>{out};
}

// ElementwiseChain: its steps' references, one after another.
absl::StatusOr<std::vector<Tensor>> Chain(const ir::Node& node,
                                          const std::vector<const Tensor*>& inputs) {
  ASSIGN_OR_RETURN(std::vector<ChainStep> steps, DecodeChain(node));
  const int n = static_cast<int>(inputs.size());
  std::vector<Tensor> results;
  results.reserve(steps.size());
  for (const ChainStep& s : steps) {
    ir::Node step;
    step.kind = s.kind;
    step.attrs = s.attrs;
    step.outputs = {0};
    std::vector<const Tensor*> in;
    for (int id : s.operands) {
      step.inputs.push_back(static_cast<ir::ValueId>(in.size()));
      in.push_back(id < n ? inputs[id] : &results[id - n]);
    }
    ASSIGN_OR_RETURN(std::vector<Tensor> out, RunReference(step, in));
    results.push_back(std::move(out[0]));
  }
  return std::vector<Tensor>{std::move(results.back())};
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> RunReference(const ir::Node& node,
                                                 const std::vector<const Tensor*>& inputs) {
  // The op-coverage ops (and the N-d forms of Conv and the pools) live in
  // the per-family reference files; they answer first.
  if (MaybeOutputs coverage = CoverageReference(node, inputs)) return *std::move(coverage);
  const ir::OpArity arity = ir::GetOpArity(node.kind);
  if (static_cast<int>(inputs.size()) < arity.min_inputs) return Error(node, "too few inputs");
  for (int i = 0; i < arity.min_inputs; ++i) {
    if (inputs[i] == nullptr) return Error(node, "required input missing");
  }
  auto opt = [&](size_t i) { return i < inputs.size() ? inputs[i] : nullptr; };
  switch (node.kind) {
    case OpKind::kIdentity:
    case OpKind::kReorder:  // the reference's tensors are all plain: a copy
      return std::vector<Tensor>{inputs[0]->Clone()};
    case OpKind::kReshape:
      return Reshape(node, *inputs[0]);
    case OpKind::kFlatten:
      return Flatten(node, *inputs[0]);
    case OpKind::kConcat:
      return Concat(node, inputs);
    case OpKind::kConstant:
      return absl::UnimplementedError("reference: Constant is handled by the runtime");
    case OpKind::kElementwiseChain:
      return Chain(node, inputs);
    default:
      break;
  }
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->dtype() != DType::kF32) {
      return absl::UnimplementedError(
          absl::StrCat("reference ", ir::OpName(node.kind), ": only FP32 is implemented"));
    }
  }
  switch (node.kind) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
      return Binary(node, *inputs[0], *inputs[1]);
    case OpKind::kRelu:
    case OpKind::kClip:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kGelu:
    case OpKind::kSilu:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
      return Unary(node, *inputs[0]);
    case OpKind::kMatMul:
      return MatMul(node, *inputs[0], *inputs[1]);
    case OpKind::kLinear:
      return Linear(node, *inputs[0], *inputs[1], opt(2));
    case OpKind::kConv:
      return Conv(node, *inputs[0], *inputs[1], opt(2));
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return Pool(node, *inputs[0]);
    case OpKind::kAdaptiveAvgPool:
      return AdaptiveAvgPool(node, *inputs[0]);
    case OpKind::kBatchNorm:
      return BatchNorm(node, inputs);
    case OpKind::kLayerNorm:
      return LayerNorm(node, inputs);
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
      return Softmax(node, *inputs[0]);
    case OpKind::kMean:
      return Mean(node, *inputs[0]);
    default:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("reference: no implementation of ", ir::OpName(node.kind)));
}

}  // namespace kiln::kernels::reference
