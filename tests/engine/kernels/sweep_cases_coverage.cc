// Sweep case generators for the op-coverage kernels (see sweep_case.h): random
// shapes and attributes inside each op's domain, with integer and boolean
// operands where the kernels take them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "engine/kernels/elementwise_chain.h"
#include "tests/engine/kernels/single_op_graph.h"
#include "tests/engine/kernels/sweep_case.h"

namespace kiln::kernels::testing {
namespace {

using K = ir::OpKind;
using Rng = SweepRng;
using Case = SweepCase;

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
double Real(Rng& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
bool Coin(Rng& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }
bool Big(int i) { return i % 6 == 5; }

Dims RandomDims(Rng& rng, int64_t min_rank, int64_t max_rank, int64_t max_dim) {
  Dims d(Uniform(rng, min_rank, max_rank));
  for (int64_t& x : d) x = Uniform(rng, 1, max_dim);
  return d;
}

Tensor Int64s(const Dims& dims, Rng& rng, int64_t lo, int64_t hi) {
  Tensor t = Tensor::Zeros(DType::kInt64, dims);
  for (int64_t k = 0; k < t.num_elements(); ++k) t.data<int64_t>()[k] = Uniform(rng, lo, hi);
  return t;
}
Tensor Bools(const Dims& dims, Rng& rng, double p = 0.5) {
  Tensor t = Tensor::Zeros(DType::kBool, dims);
  for (int64_t k = 0; k < t.num_elements(); ++k) t.data<bool>()[k] = Coin(rng, p);
  return t;
}
// Floats rounded to quarters, so comparisons see ties.
Tensor Coarse(const Dims& dims, Rng& rng) {
  Tensor t = RandomF32(dims, rng, -2, 2);
  for (int64_t k = 0; k < t.num_elements(); ++k) t.data<float>()[k] = std::round(t.data<float>()[k] * 4) / 4;
  return t;
}
Tensor Scalar(DType dtype, double v) {
  Tensor t = Tensor::Zeros(dtype, {});
  if (dtype == DType::kF32) *t.data<float>() = static_cast<float>(v);
  if (dtype == DType::kInt64) *t.data<int64_t>() = static_cast<int64_t>(v);
  if (dtype == DType::kBool) *t.data<bool>() = v != 0;
  return t;
}

// A shape `out` and an operand shape that broadcasts to it.
Dims BroadcastOperand(Rng& rng, const Dims& out) {
  Dims d(out.begin() + Uniform(rng, 0, static_cast<int64_t>(out.size())), out.end());
  for (int64_t& x : d) {
    if (Coin(rng, 0.3)) x = 1;
  }
  return d;
}

// ---------------------------------------------------------------- elementwise

Case UnaryMath(K op, Rng& rng, int i) {
  Dims d = Big(i) ? Dims{Uniform(rng, 30000, 70000)} : RandomDims(rng, 0, 4, 6);
  float lo = -3, hi = 3;
  switch (op) {
    case K::kSqrt: case K::kRsqrt: case K::kLog: case K::kLog2: case K::kLog10:
      lo = 0.05f;
      break;
    case K::kLog1p: lo = -0.9f; break;
    case K::kReciprocal: lo = 0.2f; break;
    case K::kAsin: case K::kAcos: lo = -1; hi = 1; break;
    case K::kAtanh: lo = -0.95f; hi = 0.95f; break;
    case K::kAcosh: lo = 1; hi = 6; break;
    case K::kTan: lo = -1.4f; hi = 1.4f; break;
    default: break;
  }
  Tensor x = RandomF32(d, rng, lo, hi);
  if (op == K::kIsNan) {
    for (int64_t k = 0; k < x.num_elements(); ++k) {
      if (Coin(rng, 0.3)) x.data<float>()[k] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  if ((op == K::kNeg || op == K::kAbs || op == K::kSign) && Coin(rng, 0.3)) {
    return {{Int64s(d, rng, -50, 50)}, {}, {}};
  }
  if (op == K::kLogicalNot) {
    return {{Coin(rng) ? Bools(d, rng) : Coarse(d, rng)}, {}, {}};
  }
  return {{x}, {}, {}};
}

Case Activation(K op, Rng& rng, int i) {
  Dims d = Big(i) ? Dims{Uniform(rng, 30000, 70000)} : RandomDims(rng, 0, 4, 6);
  ir::Attributes attrs;
  switch (op) {
    case K::kLeakyRelu: attrs.SetFloat("negative_slope", Real(rng, 0, 0.5)); break;
    case K::kElu:
      attrs.SetFloat("alpha", Real(rng, 0.5, 2));
      if (Coin(rng)) attrs.SetFloat("scale", Real(rng, 0.5, 2));
      if (Coin(rng)) attrs.SetFloat("input_scale", Real(rng, 0.5, 2));
      break;
    case K::kSoftplus:
      attrs.SetFloat("beta", Real(rng, 0.5, 3));
      attrs.SetFloat("threshold", Real(rng, 1, 20));
      break;
    case K::kHardShrink: case K::kSoftShrink: attrs.SetFloat("lambd", Real(rng, 0, 1)); break;
    case K::kThreshold:
      attrs.SetFloat("threshold", Real(rng, -1, 1));
      attrs.SetFloat("value", Real(rng, -3, 3));
      break;
    default: break;
  }
  return {{RandomF32(d, rng, -5, 5)}, attrs, {}};
}

Case PRelu(Rng& rng, int i) {
  Dims d = Big(i) ? Dims{2, 16, 50, 50} : RandomDims(rng, 1, 4, 5);
  const int64_t c = d.size() >= 2 ? d[1] : d[0];
  Tensor w = Coin(rng) ? RandomF32({c}, rng) : RandomF32({1}, rng);
  return {{RandomF32(d, rng), w}, {}, {1}};
}

Case BinaryAny(K op, Rng& rng, int i) {
  Dims out = Big(i) ? Dims{2, Uniform(rng, 8, 24), Uniform(rng, 20, 40), Uniform(rng, 20, 40)}
                    : RandomDims(rng, 0, 4, 5);
  Dims a = Coin(rng) ? out : BroadcastOperand(rng, out);
  Dims b = BroadcastOperand(rng, out);
  if (Coin(rng)) std::swap(a, b);
  const bool compare = op == K::kEqual || op == K::kNotEqual || op == K::kLess ||
                       op == K::kLessEqual || op == K::kGreater || op == K::kGreaterEqual;
  const bool logical = op == K::kLogicalAnd || op == K::kLogicalOr || op == K::kLogicalXor;
  const bool divides = op == K::kFloorDiv || op == K::kTruncDiv || op == K::kRemainder ||
                       op == K::kFmod;
  const bool float_only = op == K::kPow || op == K::kAtan2 || op == K::kDiv;
  Case c;
  if (logical) {
    c.inputs = {Bools(a, rng), Bools(b, rng)};
  } else if (!float_only && Coin(rng, 0.35)) {
    Tensor tb = Int64s(b, rng, divides ? 1 : -9, 9);
    if (divides) {
      for (int64_t k = 0; k < tb.num_elements(); ++k) {
        if (Coin(rng)) tb.data<int64_t>()[k] = -tb.data<int64_t>()[k];
      }
    }
    c.inputs = {Int64s(a, rng, -20, 20), tb};
  } else if (compare) {
    c.inputs = {Coarse(a, rng), Coarse(b, rng)};
  } else if (op == K::kPow) {
    c.inputs = {RandomF32(a, rng, 0.1f, 2), RandomF32(b, rng, -2, 2)};
    if (Coin(rng, 0.4)) {
      const double e[] = {2, 3, 0.5, -1, -0.5, -2, 1.5};
      c.inputs[1] = Scalar(DType::kF32, e[Uniform(rng, 0, 6)]);
      c.constant_inputs = {1};
    }
  } else if (divides || op == K::kDiv) {
    Tensor tb = RandomF32(b, rng, 0.5f, 2);
    for (int64_t k = 0; k < tb.num_elements(); ++k) {
      if (Coin(rng)) tb.data<float>()[k] = -tb.data<float>()[k];
    }
    c.inputs = {RandomF32(a, rng, -5, 5), tb};
  } else {
    c.inputs = {RandomF32(a, rng), RandomF32(b, rng)};
  }
  // Sometimes a weak scalar constant of another dtype (an int literal).
  if (c.constant_inputs.empty() && !logical && Coin(rng, 0.15)) {
    const double v = divides ? 3 : 2;
    c.inputs[1] = Scalar(c.inputs[0].dtype() == DType::kF32 ? DType::kInt64 : DType::kF32, v);
    c.constant_inputs = {1};
  }
  return c;
}

Case Where(Rng& rng, int i) {
  Dims out = Big(i) ? Dims{2, 16, 40, 40} : RandomDims(rng, 0, 4, 5);
  Dims c = BroadcastOperand(rng, out), a = BroadcastOperand(rng, out), b = BroadcastOperand(rng, out);
  if (Coin(rng)) a = out;
  Case k{{Bools(c, rng), RandomF32(a, rng), RandomF32(b, rng)}, {}, {}};
  if (Coin(rng, 0.3)) k.inputs = {Bools(c, rng), Int64s(a, rng, -5, 5), Int64s(b, rng, -5, 5)};
  if (Coin(rng, 0.2)) {
    k.inputs[2] = Scalar(DType::kF32, 0.0);  // masked_fill's scalar, as an FP32 literal
    k.constant_inputs = {2};
  }
  return k;
}

// ---------------------------------------------------------------- reductions

Case Reduce(K op, Rng& rng, int i) {
  Dims x = Big(i) ? Dims{4, 32, 15, 15} : RandomDims(rng, 0, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  ir::Attributes attrs;
  if (op == K::kArgMax || op == K::kArgMin) {
    if (rank > 0 && Coin(rng, 0.8)) attrs.SetInt("axis", Uniform(rng, -rank, rank - 1));
  } else {
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < rank; ++a) {
      if (Coin(rng)) axes.push_back(Coin(rng) ? a : a - rank);
    }
    std::shuffle(axes.begin(), axes.end(), rng);
    attrs.SetInts("axes", axes);
  }
  attrs.SetBool("keepdim", Coin(rng));
  if (op == K::kVar || op == K::kStd) attrs.SetFloat("correction", Uniform(rng, 0, 1));
  if (op == K::kNorm) {
    const double ps[] = {2, 1, 3, 0.5, 0, std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity()};
    attrs.SetFloat("p", ps[Uniform(rng, 0, 6)]);
  }
  Tensor t = RandomF32(x, rng, -3, 3);
  if (op == K::kProd) t = RandomF32(x, rng, 0.7f, 1.3f);
  if (op == K::kReduceAll || op == K::kReduceAny) t = Bools(x, rng, op == K::kReduceAll ? 0.9 : 0.1);
  const bool ints = op == K::kSum || op == K::kReduceMax || op == K::kReduceMin ||
                    op == K::kArgMax || op == K::kArgMin;
  if (ints && Coin(rng, 0.25)) t = Int64s(x, rng, -5, 5);
  if (op == K::kSum && Coin(rng, 0.1)) t = Bools(x, rng);
  // Extremes of an empty dim are an error; keep dims non-empty (RandomDims does).
  return {{t}, attrs, {}};
}

Case Scan(K op, Rng& rng, int i) {
  Dims x = Big(i) ? Dims{8, 64, 100} : RandomDims(rng, 0, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  ir::Attributes attrs;
  attrs.SetInt("axis", rank == 0 ? 0 : Uniform(rng, -rank, rank - 1));
  Tensor t = op == K::kCumProd ? RandomF32(x, rng, 0.8f, 1.2f) : RandomF32(x, rng);
  if (Coin(rng, 0.25)) t = Int64s(x, rng, op == K::kCumProd ? -1 : -5, op == K::kCumProd ? 1 : 5);
  return {{t}, attrs, {}};
}

// ---------------------------------------------------------------- shape and movement

Case Views(K op, Rng& rng, int) {
  Dims x = RandomDims(rng, 0, 4, 4);
  const int64_t rank = static_cast<int64_t>(x.size());
  for (int64_t& d : x) {
    if (Coin(rng, 0.3)) d = 1;
  }
  ir::Attributes attrs;
  Case c{{RandomF32(x, rng)}, attrs, {}};
  switch (op) {
    case K::kSqueeze:
      if (rank > 0 && Coin(rng)) c.attrs.SetInts("axes", {Uniform(rng, -rank, rank - 1)});
      break;
    case K::kUnsqueeze:
      c.attrs.SetInt("axis", Uniform(rng, -rank - 1, rank));
      break;
    case K::kUnflatten: {
      Dims y = {Uniform(rng, 1, 3), Uniform(rng, 1, 3), 6};
      c.inputs = {RandomF32(y, rng)};
      c.attrs.SetInt("axis", Coin(rng) ? 2 : -1);
      c.attrs.SetInts("sizes", Coin(rng) ? std::vector<int64_t>{2, -1} : std::vector<int64_t>{3, 1, 2});
      break;
    }
    default: {  // ReshapeLike
      Dims y = x;
      std::shuffle(y.begin(), y.end(), rng);
      c.inputs.push_back(RandomF32(y, rng));
      break;
    }
  }
  return c;
}

Tensor AnyDType(const Dims& d, Rng& rng) {
  switch (Uniform(rng, 0, 4)) {
    case 0: return Int64s(d, rng, -100, 100);
    case 1: return Bools(d, rng);
    default: return RandomF32(d, rng);
  }
}

Case Movement(K op, Rng& rng, int i) {
  Dims x = Big(i) ? Dims{2, 16, 40, 40} : RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  Case c{{AnyDType(x, rng)}, {}, {}};
  ir::Attributes& a = c.attrs;
  switch (op) {
    case K::kPermute: {
      const int form = Uniform(rng, 0, 2);
      if (form == 0) {
        std::vector<int64_t> perm(rank);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        if (Coin(rng)) perm[0] -= rank;
        a.SetInts("perm", perm);
      } else if (form == 1) {
        a.SetInt("dim0", Uniform(rng, -rank, rank - 1));
        a.SetInt("dim1", Uniform(rng, -rank, rank - 1));
      } else {
        const int64_t s = Uniform(rng, 0, rank - 1), d = Uniform(rng, 0, rank - 1);
        a.SetInts("source", {s});
        a.SetInts("destination", {Coin(rng) ? d : d - rank});
      }
      break;
    }
    case K::kExpand: {
      Dims shape;
      for (int64_t k = Uniform(rng, 0, 2); k > 0; --k) shape.push_back(Uniform(rng, 1, 3));
      Dims xs = x;
      for (int64_t& v : xs) {
        if (Coin(rng, 0.4)) v = 1;
      }
      c.inputs = {AnyDType(xs, rng)};
      for (int64_t v : xs) shape.push_back(v == 1 ? Uniform(rng, 1, 4) : (Coin(rng) ? -1 : v));
      if (Coin(rng, 0.2)) {
        Dims like = shape;
        for (size_t k = 0; k < like.size(); ++k) {
          if (like[k] == -1) like[k] = xs[k - (shape.size() - xs.size())];
        }
        c.inputs.push_back(RandomF32(like, rng));
        a.SetBool("like", true);
      } else {
        a.SetInts("shape", shape);
      }
      break;
    }
    case K::kTile: {
      std::vector<int64_t> rep(rank + Uniform(rng, 0, 1));
      for (int64_t& r : rep) r = Uniform(rng, 1, 3);
      a.SetInts("repeats", rep);
      break;
    }
    case K::kSlice: {
      a.SetInt("axis", Uniform(rng, -rank, rank - 1));
      if (Coin(rng, 0.2)) {
        const int64_t n = x[(a.GetInt("axis") + rank) % rank];
        const int64_t start = Uniform(rng, 0, n - 1);
        a.SetInt("start", Coin(rng) ? start : start - n);
        a.SetInt("length", Uniform(rng, 0, n - start));
      } else {
        if (Coin(rng, 0.8)) a.SetInt("start", Uniform(rng, -6, 6));
        if (Coin(rng, 0.8)) a.SetInt("end", Uniform(rng, -6, 6));
        a.SetInt("step", Uniform(rng, 1, 3));
        if (Coin(rng, 0.2)) {
          // Bounds known only at run time: 0-dim INT64 constants as inputs.
          c.inputs.push_back(Scalar(DType::kInt64, Uniform(rng, -6, 6)));
          c.inputs.push_back(Scalar(DType::kInt64, Uniform(rng, -6, 6)));
          c.constant_inputs = {1, 2};
        }
      }
      break;
    }
    case K::kSelect: {
      const int64_t axis = Uniform(rng, 0, rank - 1);
      a.SetInt("axis", Coin(rng) ? axis : axis - rank);
      a.SetInt("index", Uniform(rng, -x[axis], x[axis] - 1));
      break;
    }
    case K::kChunk: {
      const int64_t axis = Uniform(rng, 0, rank - 1);
      const int64_t chunks = Uniform(rng, 1, 4);
      const int64_t size = (x[axis] + chunks - 1) / chunks;
      a.SetInt("axis", axis);
      a.SetInt("chunks", chunks);
      a.SetInt("index", Uniform(rng, 0, (x[axis] + size - 1) / size - 1));
      break;
    }
    case K::kFlip: {
      std::vector<int64_t> axes;
      for (int64_t d = 0; d < rank; ++d) {
        if (Coin(rng)) axes.push_back(Coin(rng) ? d : d - rank);
      }
      a.SetInts("axes", axes);
      break;
    }
    case K::kRoll: {
      if (Coin(rng, 0.2)) {
        a.SetInts("shifts", {Uniform(rng, -20, 20)});
      } else {
        std::vector<int64_t> axes, shifts;
        for (int64_t d = 0; d < rank; ++d) {
          if (Coin(rng)) {
            axes.push_back(d);
            shifts.push_back(Uniform(rng, -7, 7));
          }
        }
        if (axes.empty()) {
          axes = {0};
          shifts = {1};
        }
        a.SetInts("axes", axes);
        a.SetInts("shifts", shifts);
      }
      break;
    }
    case K::kPad: {
      const std::string modes[] = {"constant", "reflect", "replicate", "circular"};
      const std::string mode = modes[Uniform(rng, 0, 3)];
      std::vector<int64_t> pads;
      for (int64_t k = 0; k < Uniform(rng, 1, rank); ++k) {
        const int64_t n = x[rank - 1 - k];
        const int64_t hi = mode == "reflect" ? n - 1 : mode == "circular" ? n : 3;
        const int64_t lo = mode == "constant" ? -std::min<int64_t>(n / 2, 1) : 0;
        pads.push_back(Uniform(rng, lo, std::max(lo, hi)));
        pads.push_back(Uniform(rng, lo, std::max(lo, hi)));
      }
      a.SetInts("pads", pads);
      a.SetString("mode", mode);
      if (mode == "constant") a.SetFloat("value", Uniform(rng, -2, 2));
      break;
    }
    case K::kTril:
    case K::kTriu: {
      Dims y = RandomDims(rng, 2, 4, 6);
      c.inputs = {AnyDType(y, rng)};
      a.SetInt("diagonal", Uniform(rng, -3, 3));
      break;
    }
    default: {  // PixelShuffle
      const int64_t r = Uniform(rng, 1, 3);
      const bool inverse = Coin(rng);
      Dims y = inverse ? Dims{Uniform(rng, 1, 2), Uniform(rng, 1, 3), r * Uniform(rng, 1, 3),
                              r * Uniform(rng, 1, 3)}
                       : Dims{Uniform(rng, 1, 2), r * r * Uniform(rng, 1, 3), Uniform(rng, 1, 4),
                              Uniform(rng, 1, 4)};
      c.inputs = {AnyDType(y, rng)};
      a.SetInt("factor", r);
      a.SetBool("inverse", inverse);
      break;
    }
  }
  return c;
}

Case Scatter(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{Uniform(rng, 200, 400), Uniform(rng, 20, 60)} : RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = Uniform(rng, 0, rank - 1);
  Dims idx(rank), src(rank);
  for (int64_t d = 0; d < rank; ++d) {
    idx[d] = d == axis ? Uniform(rng, 1, 2 * x[d]) : Uniform(rng, 1, x[d]);
    src[d] = idx[d] + Uniform(rng, 0, 1);  // src may be larger than index
  }
  static const char* const kReduce[] = {"none", "sum", "prod", "mean", "amax", "amin"};
  Case c{{RandomF32(x, rng), Int64s(idx, rng, 0, x[axis] - 1),
          Coin(rng, 0.2) ? RandomF32({}, rng) : RandomF32(src, rng)},
         {}, {}};
  c.attrs.SetInt("axis", Coin(rng) ? axis : axis - rank);
  c.attrs.SetString("reduce", kReduce[Uniform(rng, 0, 5)]);
  c.attrs.SetBool("include_self", Coin(rng));
  return c;
}

// Index's operands after x: one per leading dim of `x` (Absent: take all),
// at least one an INT64 tensor, all broadcasting to one shape.
std::vector<Tensor> IntegerIndices(const Dims& x, Rng& rng) {
  const int64_t slots = Uniform(rng, 1, static_cast<int64_t>(x.size()));
  Dims b = RandomDims(rng, 0, 2, 3);
  std::vector<Tensor> indices;
  bool any = false;
  for (int64_t d = 0; d < slots; ++d) {
    if (Coin(rng, 0.6) || (!any && d == slots - 1)) {
      indices.push_back(Int64s(BroadcastOperand(rng, b), rng, -x[d], x[d] - 1));
      any = true;
    } else {
      indices.push_back(Absent());
    }
  }
  return indices;
}

// IndexPut: integer indices as Index takes them, or one boolean mask over
// some leading dims; values one number, or (for a mask) the dims after it.
Case IndexPut(Rng& rng, int) {
  Dims x = RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  Case c{{RandomF32(x, rng)}, {}, {}};
  c.attrs.SetBool("accumulate", Coin(rng));
  std::vector<Tensor> indices;
  Tensor values = RandomF32({}, rng);
  if (Coin(rng, 0.4)) {
    if (Coin(rng)) values = RandomF32({1}, rng);  // self[mask] has the count's dim at least
    const int64_t d = Uniform(rng, 0, rank - 1), k = Uniform(rng, 1, rank - d);
    for (int64_t i = 0; i < d; ++i) indices.push_back(Absent());
    indices.push_back(Bools(Dims(x.begin() + d, x.begin() + d + k), rng, 0.4));
    if (d == 0 && Coin(rng)) values = RandomF32(Dims(x.begin() + k, x.end()), rng);
  } else {
    indices = IntegerIndices(x, rng);
  }
  c.inputs.push_back(values);
  c.inputs.insert(c.inputs.end(), indices.begin(), indices.end());
  return c;
}

// NonZero: sparse inputs (zeros, -0.0, NaN among the values), rank 0 to 4, a
// mask's check against the tensor it indexes.
Case NonZeroCase(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{64, 300} : RandomDims(rng, 0, 4, 5);
  Tensor t = RandomF32(x, rng);
  float* v = t.data<float>();
  for (int64_t e = 0; e < t.num_elements(); ++e) {
    const int64_t pick = Uniform(rng, 0, 9);
    if (pick < 5) v[e] = 0.0f;
    if (pick == 5) v[e] = -0.0f;
    if (pick == 6) v[e] = std::nanf("");
  }
  Case c{{t}, {}, {}};
  if (!x.empty() && Coin(rng, 0.3)) {
    // The mask of y[:, mask]: y has one more leading dim.
    Dims y = {Uniform(rng, 1, 3)};
    y.insert(y.end(), x.begin(), x.end());
    c.inputs.push_back(RandomF32(y, rng));
    c.attrs.SetInt("axis", 1);
  }
  return c;
}

// IndexMask: x[..., mask] with the mask over 1 to all of x's dims from `axis`.
Case IndexMaskCase(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{3, 4000, 8} : RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = Uniform(rng, 0, rank - 1), r = Uniform(rng, 1, rank - axis);
  Case c{{RandomF32(x, rng), Bools(Dims(x.begin() + axis, x.begin() + axis + r), rng, 0.4)}, {}, {}};
  c.attrs.SetInt("axis", axis);
  return c;
}

Case RepeatInterleave(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{Uniform(rng, 2000, 5000), 8} : RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  Case c{{AnyDType(x, rng)}, {}, {}};
  c.attrs.SetInt("repeats", Uniform(rng, 0, 3));
  c.attrs.SetInt("axis", Uniform(rng, -rank, rank - 1));
  return c;
}

// NaN everywhere; infinities only with posinf and neginf given (their
// defaults are the dtype's own limits, which the FP32 reference cannot know
// for the other dtypes the support matrix converts the case to).
Case NanToNum(Rng& rng, int i) {
  Dims d = Big(i) ? Dims{Uniform(rng, 30000, 70000)} : RandomDims(rng, 0, 4, 6);
  Tensor x = RandomF32(d, rng, -3, 3);
  Case c{{}, {}, {}};
  if (Coin(rng)) c.attrs.SetFloat("nan", Real(rng, -5, 5));
  const bool infinities = Coin(rng);
  if (infinities) {
    c.attrs.SetFloat("posinf", Real(rng, 0, 100));
    c.attrs.SetFloat("neginf", Real(rng, -100, 0));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < x.num_elements(); ++k) {
    if (Coin(rng, 0.2)) {
      x.data<float>()[k] = std::numeric_limits<float>::quiet_NaN();
    } else if (infinities && Coin(rng, 0.2)) {
      x.data<float>()[k] = Coin(rng) ? inf : -inf;
    }
  }
  c.inputs.push_back(x);
  return c;
}

Case SliceScatter(Rng& rng, int) {
  Dims x = RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = Uniform(rng, 0, rank - 1);
  const int64_t n = x[axis];
  Case c{{AnyDType(x, rng)}, {}, {}};
  c.attrs.SetInt("axis", Coin(rng) ? axis : axis - rank);
  Dims src = x;
  if (Coin(rng, 0.3)) {
    const int64_t index = Uniform(rng, -n, n - 1);
    c.attrs.SetInt("index", index);
    src.erase(src.begin() + axis);
  } else {
    const int64_t start = Uniform(rng, 0, n - 1), end = Uniform(rng, start, n + 2);
    const int64_t step = Uniform(rng, 1, 3);
    c.attrs.SetInt("start", Coin(rng) ? start : start - n);
    c.attrs.SetInt("end", end);
    c.attrs.SetInt("step", step);
    src[axis] = (std::min(end, n) - start + step - 1) / step;
  }
  Tensor s = AnyDType(src, rng);
  if (s.dtype() != c.inputs[0].dtype()) s = Tensor::Zeros(c.inputs[0].dtype(), src);
  c.inputs.push_back(s);
  return c;
}

Case Indexing(K op, Rng& rng, int) {
  Dims x = RandomDims(rng, 1, 4, 5);
  const int64_t rank = static_cast<int64_t>(x.size());
  Case c{{AnyDType(x, rng)}, {}, {}};
  if (op == K::kIndexSelect) {
    const int64_t axis = Uniform(rng, 0, rank - 1);
    c.attrs.SetInt("axis", Coin(rng) ? axis : axis - rank);
    c.inputs.push_back(Int64s(RandomDims(rng, 0, 2, 4), rng, -x[axis], x[axis] - 1));
  } else if (op == K::kGather) {
    const int64_t axis = Uniform(rng, 0, rank - 1);
    Dims idx = x;
    for (int64_t d = 0; d < rank; ++d) idx[d] = d == axis ? Uniform(rng, 1, 6) : Uniform(rng, 1, x[d]);
    c.attrs.SetInt("axis", axis);
    c.inputs.push_back(Int64s(idx, rng, -x[axis], x[axis] - 1));
  } else {  // Index
    for (Tensor& t : IntegerIndices(x, rng)) c.inputs.push_back(std::move(t));
  }
  return c;
}

// ---------------------------------------------------------------- casts and fills

Case CastCase(Rng& rng, int i) {
  Dims x = Big(i) ? Dims{100000} : RandomDims(rng, 0, 4, 5);
  const std::string names[] = {"FP32", "INT64", "INT32", "BOOL", "UINT8", "FP64"};
  Case c{{AnyDType(x, rng)}, {}, {}};
  if (c.inputs[0].dtype() == DType::kF32) {
    for (int64_t k = 0; k < c.inputs[0].num_elements(); ++k) c.inputs[0].data<float>()[k] *= 100;
  }
  if (Coin(rng, 0.2)) {
    c.inputs.push_back(AnyDType({1}, rng));
  } else {
    c.attrs.SetString("dtype", names[Uniform(rng, 0, 5)]);
  }
  return c;
}

Case FillCase(Rng& rng, int) {
  Case c;
  if (Coin(rng)) c.inputs = {AnyDType(RandomDims(rng, 0, 3, 4), rng)};
  if (c.inputs.empty() || Coin(rng)) c.attrs.SetInts("shape", RandomDims(rng, 0, 3, 4));
  if (c.inputs.empty() || Coin(rng)) {
    const std::string names[] = {"FP32", "INT64", "BOOL"};
    c.attrs.SetString("dtype", names[Uniform(rng, 0, 2)]);
  }
  c.attrs.SetFloat("value", Uniform(rng, -3, 3));
  return c;
}

// ---------------------------------------------------------------- nn

Case ConvNd(Rng& rng, int i, bool transposed) {
  const int64_t s = transposed ? Uniform(rng, 1, 3) : (Coin(rng) ? 1 : 3);
  const int64_t groups = Uniform(rng, 1, 2);
  const int64_t c = groups * Uniform(rng, 1, 3), og = Uniform(rng, 1, 3);
  const int64_t o = groups * og;
  std::vector<int64_t> k(s), st(s), p(s), d(s), op(s);
  Dims x = {Uniform(rng, 1, 2), c};
  for (int64_t j = 0; j < s; ++j) {
    k[j] = Uniform(rng, 1, 3);
    st[j] = Uniform(rng, 1, 2);
    d[j] = Uniform(rng, 1, 2);
    const int64_t span = d[j] * (k[j] - 1) + 1;
    p[j] = Uniform(rng, 0, transposed ? (span - 1) / 2 : 1);
    op[j] = Uniform(rng, 0, std::max(st[j], d[j]) - 1);
    const int64_t extra = Big(i) && s < 3 ? 20 : 4;
    x.push_back(std::max<int64_t>(span - 2 * p[j], 1) + Uniform(rng, 0, extra));
  }
  if (Coin(rng, 0.2)) x.erase(x.begin());  // unbatched
  Dims w = transposed ? Dims{c, og} : Dims{o, c / groups};
  w.insert(w.end(), k.begin(), k.end());
  ir::Attributes attrs;
  attrs.SetInts("stride", st);
  attrs.SetInts("padding", p);
  attrs.SetInts("dilation", d);
  attrs.SetInt("groups", groups);
  if (transposed) attrs.SetInts("output_padding", op);
  Tensor bias = Coin(rng, 0.7) ? RandomF32({o}, rng) : Absent();
  return {{RandomF32(x, rng), RandomF32(w, rng), bias}, attrs, {1, 2}};
}

Case PoolNd(K op, Rng& rng, int i) {
  const int64_t s = Coin(rng) ? 1 : 3;
  std::vector<int64_t> k(s), st(s), p(s), d(s);
  const bool max = op != K::kAvgPool;
  Dims x = {Uniform(rng, 1, 2), Uniform(rng, 1, 3)};
  for (int64_t j = 0; j < s; ++j) {
    k[j] = Uniform(rng, 1, 3);
    st[j] = Uniform(rng, 1, 2);
    p[j] = Uniform(rng, 0, k[j] / 2);
    d[j] = max ? Uniform(rng, 1, 2) : 1;
    x.push_back(d[j] * (k[j] - 1) + 1 + Uniform(rng, 0, Big(i) && s == 1 ? 40 : 4));
  }
  if (Coin(rng, 0.2)) x.erase(x.begin());
  ir::Attributes attrs;
  attrs.SetInts("kernel", k);
  if (Coin(rng, 0.8)) attrs.SetInts("stride", st);
  attrs.SetInts("padding", p);
  attrs.SetBool("ceil_mode", Coin(rng));
  if (max) {
    attrs.SetInts("dilation", d);
  } else {
    attrs.SetBool("count_include_pad", Coin(rng));
  }
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case AdaptiveNd(Rng& rng, int i, int64_t s) {
  Dims x = {Uniform(rng, 1, 2), Uniform(rng, 1, 3)};
  std::vector<int64_t> out(s);
  for (int64_t j = 0; j < s; ++j) {
    x.push_back(Uniform(rng, 1, Big(i) && s < 3 ? 30 : 7));
    out[j] = Uniform(rng, 1, 5);
  }
  if (Coin(rng, 0.2)) x.erase(x.begin());
  ir::Attributes attrs;
  attrs.SetInts("output_size", out);
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case GroupNorm(Rng& rng, int i) {
  const int64_t g = Uniform(rng, 1, 3);
  Dims x = Big(i) ? Dims{2, g * 11, 30, 30} : Dims{Uniform(rng, 1, 2), g * Uniform(rng, 1, 3)};
  if (!Big(i)) {
    for (int64_t k = Uniform(rng, 0, 2); k > 0; --k) x.push_back(Uniform(rng, 1, 5));
  }
  ir::Attributes attrs;
  attrs.SetInt("groups", g);
  attrs.SetFloat("eps", 1e-5);
  Tensor w = Coin(rng, 0.7) ? RandomF32({x[1]}, rng) : Absent();
  Tensor b = Coin(rng, 0.7) ? RandomF32({x[1]}, rng) : Absent();
  return {{RandomF32(x, rng, -3, 3), w, b}, attrs, {1, 2}};
}

Case ResizeCase(Rng& rng, int i) {
  const std::string modes[] = {"nearest", "nearest_exact", "linear", "cubic"};
  const std::string mode = modes[Uniform(rng, 0, 3)];
  const int64_t s = mode == "cubic" ? 2 : Uniform(rng, 1, 3);
  Dims x = {Uniform(rng, 1, 2), Uniform(rng, 1, 3)};
  std::vector<int64_t> sizes;
  std::vector<double> scales;
  const bool use_scales = Coin(rng, 0.4);
  for (int64_t j = 0; j < s; ++j) {
    x.push_back(Uniform(rng, 1, Big(i) && s < 3 ? 30 : 6));
    if (use_scales) {
      const double opts[] = {0.5, 1.5, 2, 3, 0.75};
      double sc = opts[Uniform(rng, 0, 4)];
      if (std::floor(x.back() * sc) < 1) sc = 2;
      scales.push_back(sc);
    } else {
      sizes.push_back(Uniform(rng, 1, 2 * x.back() + 2));
    }
  }
  ir::Attributes attrs;
  attrs.SetString("mode", mode);
  if (mode == "linear" || mode == "cubic") attrs.SetBool("align_corners", Coin(rng));
  if (use_scales) {
    attrs.SetFloats("scales", scales);
  } else {
    attrs.SetInts("sizes", sizes);
  }
  return {{RandomF32(x, rng)}, attrs, {}};
}

Case GridSampleCase(Rng& rng, int i) {
  const std::string modes[] = {"bilinear", "nearest", "bicubic"};
  const std::string pads[] = {"zeros", "border", "reflection"};
  const int64_t n = Uniform(rng, 1, 2), c = Big(i) ? 16 : Uniform(rng, 1, 3);
  const int64_t h = Uniform(rng, 1, Big(i) ? 24 : 6), w = Uniform(rng, 1, Big(i) ? 24 : 6);
  const int64_t ho = Uniform(rng, 1, Big(i) ? 20 : 5), wo = Uniform(rng, 1, Big(i) ? 20 : 5);
  ir::Attributes attrs;
  attrs.SetString("mode", modes[Uniform(rng, 0, 2)]);
  attrs.SetString("padding_mode", pads[Uniform(rng, 0, 2)]);
  attrs.SetBool("align_corners", Coin(rng));
  // Coordinates partly outside [-1, 1], so every padding does something; some on
  // pixel centres and half-way points (nearest's ties, floor's edges).
  Tensor grid = RandomF32({n, ho, wo, 2}, rng, -1.6f, 1.6f);
  if (Coin(rng, 0.3)) {
    float* g = grid.data<float>();
    for (int64_t k = 0; k < grid.num_elements(); ++k) {
      const int64_t size = k % 2 == 0 ? w : h;
      g[k] = static_cast<float>(Uniform(rng, -2, 2 * size + 2)) / static_cast<float>(size) - 1.0f;
    }
  }
  return {{RandomF32({n, c, h, w}, rng, -3, 3), grid}, attrs, {}};
}

Case AffineGridCase(Rng& rng, int i) {
  const bool volumetric = Coin(rng, 0.3);
  const int64_t n = Uniform(rng, 1, 3);
  std::vector<int64_t> size = {n, Uniform(rng, 1, 3)};
  for (int k = 0; k < (volumetric ? 3 : 2); ++k) size.push_back(Uniform(rng, 1, Big(i) ? 40 : 6));
  const int64_t k = volumetric ? 3 : 2;
  ir::Attributes attrs;
  attrs.SetInts("size", size);
  attrs.SetBool("align_corners", Coin(rng));
  return {{RandomF32({n, k, k + 1}, rng, -1.5f, 1.5f)}, attrs, {}};
}

Case SortCase(K op, Rng& rng, int i) {
  Dims x = Big(i) ? Dims{64, 500} : RandomDims(rng, 1, 3, 6);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = Uniform(rng, 0, rank - 1);
  ir::Attributes attrs;
  attrs.SetInt("axis", Coin(rng) ? axis : axis - rank);
  if (op == K::kTopK) {
    attrs.SetInt("k", Uniform(rng, 0, x[axis]));
    attrs.SetBool("largest", Coin(rng));
  } else {
    attrs.SetBool("descending", Coin(rng));
  }
  // Distinct values, so that the order is unique.
  Tensor t = RandomF32(x, rng);
  if (Coin(rng, 0.3)) {
    t = Tensor::Zeros(DType::kInt64, x);
    std::vector<int64_t> perm(t.num_elements());
    std::iota(perm.begin(), perm.end(), -static_cast<int64_t>(perm.size()) / 2);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy(perm.begin(), perm.end(), t.data<int64_t>());
  }
  return {{t}, attrs, {}};
}

Case EinsumCase(Rng& rng, int) {
  const std::string eqs[] = {"bij,bjk->bik", "ij->ji",   "bhqd,bhkd->bhqk", "i,j->ij",
                             "bij->b",       "bi,oij,bj->bo", "i,i->",     "ij,jk",
                             "...ij,...jk->...ik", "ii->i", "ij,ij->ij", "bn,anm,bm->ba"};
  const std::string eq = eqs[Uniform(rng, 0, 11)];
  std::map<char, int64_t> size;
  ir::Attributes attrs;
  attrs.SetString("equation", eq);
  Case c{{}, attrs, {}};
  std::string lhs = eq.substr(0, eq.find("->"));
  const int64_t ell = Uniform(rng, 0, 2);
  Dims ell_dims;
  for (int64_t k = 0; k < ell; ++k) ell_dims.push_back(Uniform(rng, 1, 3));
  std::string cur;
  for (char ch : lhs + ",") {
    if (ch != ',') {
      cur.push_back(ch);
      continue;
    }
    Dims d;
    if (cur.rfind("...", 0) == 0) {
      d = ell_dims;
      cur = cur.substr(3);
    }
    for (char l : cur) {
      if (!size.count(l)) size[l] = Uniform(rng, 1, 5);
      d.push_back(size[l]);
    }
    c.inputs.push_back(RandomF32(d, rng));
    cur.clear();
  }
  return c;
}

Case AttentionCase(Rng& rng, int i) {
  const int64_t heads = Uniform(rng, 1, 3), e = heads * Uniform(rng, 1, 4);
  const int64_t b = Uniform(rng, 1, 2), l = Uniform(rng, 1, Big(i) ? 20 : 5);
  const int64_t s = Coin(rng) ? l : Uniform(rng, 1, 5);
  ir::Attributes attrs;
  attrs.SetInt("num_heads", heads);
  attrs.SetBool("need_weights", Coin(rng));
  attrs.SetBool("average_weights", Coin(rng));
  Tensor q = RandomF32({b, l, e}, rng);
  Tensor k = s == l && Coin(rng) ? q : RandomF32({b, s, e}, rng);
  Tensor v = Coin(rng) ? k : RandomF32({b, s, e}, rng);
  Case c{{q, k, v, RandomF32({3 * e, e}, rng), RandomF32({e, e}, rng),
          Coin(rng, 0.8) ? RandomF32({3 * e}, rng) : Absent(),
          Coin(rng, 0.8) ? RandomF32({e}, rng) : Absent()},
         attrs,
         {3, 4, 5, 6}};
  if (Coin(rng, 0.4)) {
    if (Coin(rng)) {
      c.attrs.SetInt("mask_type", 1);
      c.inputs.push_back(Bools({b, s}, rng, 0.3));
    } else {
      c.inputs.push_back(Bools({l, s}, rng, 0.3));
    }
  }
  return c;
}

// q [batch..., L, D], k [batch..., S, D], v [batch..., S, Dv] (batch dims
// broadcasting), given transposed now and then (q_perm, k_perm, v_perm,
// out_perm), with or without a mask that broadcasts to the scores, the scale
// as an attribute, the default or a number dividing or multiplying the scores
// or the query.
// A chain of 1 to 6 elementwise steps over 1 to 3 inputs: the output's shape,
// operands that broadcast to it, single elements and 0-dim tensors; a big case
// (every 6th) of one shape throughout, which runs tile by tile.
Case ChainCase(Rng& rng, int i) {
  static const K kUnary[] = {K::kRelu, K::kSigmoid, K::kTanh, K::kGelu, K::kSilu,
                             K::kNeg,  K::kAbs,     K::kExp,  K::kErf,  K::kHardSwish};
  static const K kBinary[] = {K::kAdd, K::kSub, K::kMul, K::kMaximum, K::kMinimum};
  const Dims out = Big(i) ? Dims{3, Uniform(rng, 2800, 6000)} : RandomDims(rng, 0, 3, 4);
  Case c;
  const int64_t inputs = Uniform(rng, 1, 3);
  for (int64_t k = 0; k < inputs; ++k) {
    Dims d = out;
    if (k > 0 && !Big(i) && Coin(rng, 0.4)) d = BroadcastOperand(rng, out);
    if (k > 0 && Coin(rng, 0.2)) d = Coin(rng) ? Dims{} : Dims{1};
    c.inputs.push_back(RandomF32(d, rng, -2, 2));
  }
  if (c.inputs[0].dims() != out) c.inputs[0] = RandomF32(out, rng, -2, 2);
  std::vector<kernels::ChainStep> steps;
  int64_t available = inputs;  // operand ids so far
  for (int64_t s = Uniform(rng, 1, 6); s > 0; --s) {
    kernels::ChainStep step;
    const int last = static_cast<int>(available - 1);
    if (Coin(rng)) {
      step.kind = kUnary[Uniform(rng, 0, static_cast<int64_t>(std::size(kUnary)) - 1)];
      step.operands = {last};
    } else {
      step.kind = kBinary[Uniform(rng, 0, static_cast<int64_t>(std::size(kBinary)) - 1)];
      step.operands = {last, static_cast<int>(Uniform(rng, 0, available - 1))};
      if (Coin(rng)) std::swap(step.operands[0], step.operands[1]);
    }
    if (step.kind == K::kGelu && Coin(rng)) step.attrs.SetString("approximate", "tanh");
    if (step.kind == K::kExp) {
      // exp of an exp overflows: clamp the operand first.
      kernels::ChainStep tanh{K::kTanh, step.operands, {}};
      steps.push_back(tanh);
      step.operands = {static_cast<int>(available++)};
    }
    steps.push_back(std::move(step));
    ++available;
  }
  kernels::EncodeChain(steps, c.attrs);
  return c;
}

Case SdpaCase(Rng& rng, int i) {
  const int64_t l = Uniform(rng, 1, Big(i) ? 70 : 6), s = Uniform(rng, 1, Big(i) ? 90 : 6);
  const int64_t d = Uniform(rng, 1, Big(i) ? 32 : 5), dv = Uniform(rng, 1, 5);
  Dims batch;
  for (int64_t n = Uniform(rng, 0, 2); n > 0; --n) batch.push_back(Uniform(rng, 1, 3));
  auto operand = [&](int64_t rows, int64_t cols) {
    Dims dims(batch.begin() + Uniform(rng, 0, static_cast<int64_t>(batch.size())), batch.end());
    for (int64_t& x : dims) {
      if (Coin(rng, 0.3)) x = 1;
    }
    dims.push_back(rows);
    dims.push_back(cols);
    return dims;
  };
  ir::Attributes attrs;
  auto maybe_transposed = [&](Dims logical, const char* attr) {
    const int64_t rank = static_cast<int64_t>(logical.size());
    if (Coin(rng, 0.4)) {
      const int64_t a = Uniform(rng, 0, rank - 1), b = Uniform(rng, 0, rank - 1);
      attrs.SetInts(attr, {a, b - rank});  // a negative dim now and then
      std::swap(logical[a], logical[b]);
    }
    return RandomF32(logical, rng);
  };
  Case c{{maybe_transposed(operand(l, d), "q_perm"), maybe_transposed(operand(s, d), "k_perm"),
          maybe_transposed(operand(s, dv), "v_perm")},
         {},
         {}};
  c.attrs = attrs;
  const int mask = static_cast<int>(Uniform(rng, 0, 2));
  if (mask > 0) {
    Dims m = operand(Coin(rng, 0.3) ? 1 : l, Coin(rng, 0.2) ? 1 : s);
    if (mask == 2) m.erase(m.begin(), m.end() - 1);  // [S] or [1]
    if (Coin(rng, 0.3)) {
      // aten's BOOL mask (true takes part), or added as 0 and 1 as Add does.
      c.inputs.push_back(Bools(m, rng, 0.7));
      if (Coin(rng)) c.attrs.SetString("bool_mask", "keep");
    } else {
      c.inputs.push_back(RandomF32(m, rng, -3, 3));
    }
  } else {
    c.inputs.push_back(Absent());
  }
  switch (Uniform(rng, 0, 3)) {
    case 0: break;  // 1/sqrt(D)
    case 1: c.attrs.SetFloat("scale", 0.5 + Uniform(rng, 0, 4) * 0.25); break;
    default:
      c.inputs.push_back(Scalar(DType::kF32, 1 + Uniform(rng, 0, 8)));
      c.attrs.SetString("scale_op", Coin(rng) ? "div" : "mul");
      break;
  }
  if (Coin(rng, 0.3)) c.attrs.SetString("scale_on", "query");
  if (Coin(rng, 0.3)) {
    const int64_t rank = static_cast<int64_t>(std::max({c.inputs[0].rank(), c.inputs[1].rank(),
                                                        c.inputs[2].rank()}));
    c.attrs.SetInts("out_perm", {Uniform(rng, 0, rank - 1), Uniform(rng, 0, rank - 1)});
  }
  return c;
}

Case RnnCase(K op, Rng& rng, int) {
  const std::string cells[] = {"gru", "tanh", "relu"};
  const std::string cell = op == K::kLSTM ? "lstm" : cells[Uniform(rng, 0, 2)];
  const int64_t gates = cell == "lstm" ? 4 : cell == "gru" ? 3 : 1;
  const int64_t layers = Uniform(rng, 1, 2), dirs = Uniform(rng, 1, 2);
  const int64_t t = Uniform(rng, 1, 5), b = Uniform(rng, 1, 3), in = Uniform(rng, 1, 4),
                h = Uniform(rng, 1, 4);
  const bool batch_first = Coin(rng), biases = Coin(rng, 0.8), state = Coin(rng);
  const bool unbatched = Coin(rng, 0.15);
  ir::Attributes attrs;
  if (op == K::kRNN) attrs.SetString("cell", cell);
  attrs.SetInt("num_layers", layers);
  attrs.SetBool("bidirectional", dirs == 2);
  attrs.SetBool("batch_first", batch_first);
  attrs.SetBool("has_biases", biases);
  attrs.SetBool("has_state", state);
  Case c{{RandomF32(unbatched ? Dims{t, in} : batch_first ? Dims{b, t, in} : Dims{t, b, in}, rng)},
         attrs,
         {}};
  const Dims sd = unbatched ? Dims{layers * dirs, h} : Dims{layers * dirs, b, h};
  if (state) {
    c.inputs.push_back(RandomF32(sd, rng));
    if (op == K::kLSTM) c.inputs.push_back(RandomF32(sd, rng));
  }
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t width = l == 0 ? in : dirs * h;
      c.constant_inputs.push_back(static_cast<int>(c.inputs.size()));
      c.inputs.push_back(RandomF32({gates * h, width}, rng));
      c.constant_inputs.push_back(static_cast<int>(c.inputs.size()));
      c.inputs.push_back(RandomF32({gates * h, h}, rng));
      if (biases) {
        c.inputs.push_back(RandomF32({gates * h}, rng));
        c.inputs.push_back(RandomF32({gates * h}, rng));
      }
    }
  }
  return c;
}

}  // namespace

void AddCoverageSweepCases(std::map<ir::OpKind, SweepGenerator>& m) {
  for (K op : {K::kNeg, K::kAbs, K::kSign, K::kSqrt, K::kRsqrt, K::kExp, K::kExpm1, K::kLog,
               K::kLog2, K::kLog10, K::kLog1p, K::kReciprocal, K::kFloor, K::kCeil, K::kRound,
               K::kTrunc, K::kFrac, K::kErf, K::kSin, K::kCos, K::kTan, K::kAsin, K::kAcos,
               K::kAtan, K::kSinh, K::kCosh, K::kAsinh, K::kAcosh, K::kAtanh, K::kIsNan,
               K::kLogicalNot}) {
    m[op] = [op](Rng& r, int i) { return UnaryMath(op, r, i); };
  }
  for (K op : {K::kLeakyRelu, K::kElu, K::kMish, K::kSoftplus, K::kLogSigmoid, K::kHardShrink,
               K::kSoftShrink, K::kThreshold}) {
    m[op] = [op](Rng& r, int i) { return Activation(op, r, i); };
  }
  m[K::kPRelu] = PRelu;
  // Add, Sub, Mul and Div now also take INT64 and weak scalars: replace their generators.
  for (K op : {K::kAdd, K::kSub, K::kMul, K::kDiv, K::kPow, K::kMaximum, K::kMinimum, K::kFloorDiv,
               K::kTruncDiv, K::kRemainder, K::kFmod, K::kAtan2, K::kEqual, K::kNotEqual, K::kLess,
               K::kLessEqual, K::kGreater, K::kGreaterEqual, K::kLogicalAnd, K::kLogicalOr,
               K::kLogicalXor}) {
    m[op] = [op](Rng& r, int i) { return BinaryAny(op, r, i); };
  }
  m[K::kWhere] = Where;
  for (K op : {K::kSum, K::kProd, K::kReduceMax, K::kReduceMin, K::kArgMax, K::kArgMin, K::kVar,
               K::kStd, K::kNorm, K::kLogSumExp, K::kReduceAll, K::kReduceAny}) {
    m[op] = [op](Rng& r, int i) { return Reduce(op, r, i); };
  }
  for (K op : {K::kCumSum, K::kCumProd}) {
    m[op] = [op](Rng& r, int i) { return Scan(op, r, i); };
  }
  for (K op : {K::kSqueeze, K::kUnsqueeze, K::kUnflatten, K::kReshapeLike}) {
    m[op] = [op](Rng& r, int i) { return Views(op, r, i); };
  }
  for (K op : {K::kPermute, K::kExpand, K::kTile, K::kSlice, K::kSelect, K::kChunk, K::kFlip,
               K::kRoll, K::kPad, K::kTril, K::kTriu, K::kPixelShuffle}) {
    m[op] = [op](Rng& r, int i) { return Movement(op, r, i); };
  }
  for (K op : {K::kIndexSelect, K::kGather, K::kIndex}) {
    m[op] = [op](Rng& r, int i) { return Indexing(op, r, i); };
  }
  m[K::kSliceScatter] = SliceScatter;
  m[K::kScatter] = Scatter;
  m[K::kIndexPut] = IndexPut;
  m[K::kNonZero] = NonZeroCase;
  m[K::kIndexMask] = IndexMaskCase;
  m[K::kRepeatInterleave] = RepeatInterleave;
  m[K::kNanToNum] = NanToNum;
  m[K::kCast] = CastCase;
  m[K::kFill] = FillCase;
  m[K::kArange] = [](Rng& r, int) {
    const bool f = Coin(r);
    const double start = Uniform(r, -5, 5), step = (Coin(r) ? 1 : -1) * (f ? 0.5 : Uniform(r, 1, 3));
    Case c{{Scalar(f ? DType::kF32 : DType::kInt64, start),
            Scalar(f ? DType::kF32 : DType::kInt64, start + step * Uniform(r, 0, 9)),
            Scalar(f ? DType::kF32 : DType::kInt64, step)},
           {},
           {0, 1, 2}};
    c.attrs.SetString("dtype", f ? "FP32" : "INT64");
    return c;
  };
  m[K::kEinsum] = EinsumCase;
  m[K::kConvTranspose] = [](Rng& r, int i) { return ConvNd(r, i, /*transposed=*/true); };
  // Conv and the pools grew 1-D and 3-D forms: every 4th case uses one.
  const SweepGenerator conv2d = m[K::kConv];
  m[K::kConv] = [conv2d](Rng& r, int i) { return i % 4 == 3 ? ConvNd(r, i, false) : conv2d(r, i); };
  for (K op : {K::kMaxPool, K::kAvgPool}) {
    const SweepGenerator pool2d = m[op];
    m[op] = [op, pool2d](Rng& r, int i) { return i % 4 == 3 ? PoolNd(op, r, i) : pool2d(r, i); };
  }
  m[K::kMaxPoolWithIndices] = [](Rng& r, int i) { return PoolNd(K::kMaxPoolWithIndices, r, i); };
  const SweepGenerator adaptive2d = m[K::kAdaptiveAvgPool];
  m[K::kAdaptiveAvgPool] = [adaptive2d](Rng& r, int i) {
    return i % 4 == 3 ? AdaptiveNd(r, i, i % 8 == 3 ? 1 : 3) : adaptive2d(r, i);
  };
  m[K::kAdaptiveMaxPool] = [](Rng& r, int i) { return AdaptiveNd(r, i, 1 + i % 3); };
  m[K::kGroupNorm] = GroupNorm;
  m[K::kResize] = ResizeCase;
  m[K::kGridSample] = GridSampleCase;
  m[K::kAffineGrid] = AffineGridCase;
  m[K::kTopK] = [](Rng& r, int i) { return SortCase(K::kTopK, r, i); };
  m[K::kSort] = [](Rng& r, int i) { return SortCase(K::kSort, r, i); };
  m[K::kMultiHeadAttention] = AttentionCase;
  m[K::kScaledDotProductAttention] = SdpaCase;
  m[K::kElementwiseChain] = ChainCase;
  m[K::kLSTM] = [](Rng& r, int i) { return RnnCase(K::kLSTM, r, i); };
  m[K::kRNN] = [](Rng& r, int i) { return RnnCase(K::kRNN, r, i); };
}

}  // namespace kiln::kernels::testing
