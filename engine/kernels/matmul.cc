// MatMul (torch.matmul semantics for every rank combination), Linear
// (x[..., K] * W[N, K]^T + b[N]) and Einsum, all on OpenBLAS; Sgemm (gemm.h)
// serves the other families.
//
// MatMul: Prepare reduces the operands to a list of (A, B, C) offsets for
// [M, K] x [K, N] products, following torch.matmul: a 1-D left operand is a
// row [1, K] and a 1-D right operand a column [K, 1] (the unit dim is dropped
// from the output), and batch dims broadcast. When B has no real batch dims
// (the common x[B, S, K] @ W[K, N]), the batches of A are folded into M for a
// single GEMM. Linear flattens x to [M, K] and runs one GEMM with W
// transposed, the bias pre-filled into the output and beta = 1.
//
// Products with a single row or column go to sgemv: OpenBLAS 0.3.21 has no
// gemm-to-gemv forwarding, and packing a whole matrix for one row is what
// makes batch-1 Linear slow otherwise. No small-size threshold is applied:
// OpenBLAS's own small-matrix path is fast enough for the shapes models use.
//
// FP64 runs the same plans on cblas_dgemm/dgemv; FP16 and BF16 are widened to
// FP32 around the FP32 kernels (widen.cc), as PyTorch computes them on CPU.
// Integer MatMul (INT8 to INT64, UINT8) runs the same plans on a plain loop
// that wraps like PyTorch's.
//
// This file and conv.cc are the only callers of cblas; neither calls it
// inside an OpenMP region, since OpenBLAS runs its own thread pool.
#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/conv_epilogue.h"
#include "engine/kernels/gemm.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/movement.h"

namespace kiln::kernels {
namespace {

// C[M, N] = A[M, K] * op(B) + beta * C, all row-major and dense. op(B) is B
// ([K, N]) or, with `b_transposed`, the transpose of B stored as [N, K].
// float and double alike: PyTorch's CPU float64 matmul is also a BLAS dgemm,
// so results agree to rounding.
template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, bool b_transposed, T beta, T* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // OpenBLAS rejects lda = 0; the product is empty, so C = beta * C.
    if (beta == T(0)) std::fill(c, c + m * n, T(0));
    return;
  }
  if (m == 1) {
    // c[N] = op(B)^T a: with B stored [K, N] that is B^T a, with B stored [N, K] it is B a.
    if (b_transposed) {
      Blas<T>::gemv(CblasRowMajor, CblasNoTrans, n, k, T(1), b, k, a, 1, beta, c, 1);
    } else {
      Blas<T>::gemv(CblasRowMajor, CblasTrans, k, n, T(1), b, n, a, 1, beta, c, 1);
    }
    return;
  }
  if (n == 1) {
    // c[M] = A b, where b is the single column of op(B): contiguous either way.
    Blas<T>::gemv(CblasRowMajor, CblasNoTrans, m, k, T(1), a, k, b, 1, beta, c, 1);
    return;
  }
  Blas<T>::gemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, m, n, k, T(1),
                a, k, b, b_transposed ? k : n, beta, c, n);
}

// Integer products (PyTorch has them on CPU, for index and token-id
// arithmetic): a plain loop, no BLAS; sums wrap as PyTorch's do (computed
// unsigned, where wrapping is defined).
template <typename T>
void IntGemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  using U = std::make_unsigned_t<T>;
  // Narrow types would be promoted to (signed) int, where a product can overflow.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  U* out = reinterpret_cast<U*>(c);
  std::fill(out, out + m * n, U(0));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const W av = static_cast<U>(a[i * k + p]);
      const T* brow = b + p * n;
      U* crow = out + i * n;
      for (int64_t j = 0; j < n; ++j) {
        crow[j] = static_cast<U>(W{crow[j]} + av * W{static_cast<U>(brow[j])});
      }
    }
  }
}

// FP32 or FP64 (the dtype of input 0, which every operand must share); with
// `integers`, also the integer dtypes (not BOOL, which PyTorch refuses).
absl::StatusOr<DType> GemmDType(const PrepareContext& ctx, size_t num_operands,
                                bool integers = false) {
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF32 && t != DType::kF64 && !(integers && IsIntegral(t))) {
    return Unimplemented(ctx.node, "no kernel for ", DTypeName(t), " operands");
  }
  for (size_t i = 1; i < num_operands; ++i) {
    if (HasInput(ctx, i)) RETURN_IF_ERROR(CheckDType(ctx, i, t));
  }
  return t;
}

// ---------------------------------------------------------------- MatMul

struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  // One entry per product, in elements; the output offset of product i is i * m * n.
  std::vector<int64_t> a_offsets;
  std::vector<int64_t> b_offsets;
};

// Row-major strides of `batch` dims inside an operand whose matrix part has
// `matrix_elems` elements, 0 for size-1 (broadcast) dims, right-aligned to
// `out_batch`.
std::vector<int64_t> BatchStrides(const Dims& batch, int64_t matrix_elems, size_t out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  int64_t stride = matrix_elems;
  for (size_t k = 0; k < batch.size(); ++k) {
    const size_t j = batch.size() - 1 - k;
    strides[out_rank - 1 - k] = batch[j] == 1 ? 0 : stride;
    stride *= batch[j];
  }
  return strides;
}

absl::Status PrepareMatMul(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 2));
  ASSIGN_OR_RETURN(const DType dtype, GemmDType(ctx, 2, /*integers=*/true));
  const Dims& a = ctx.inputs[0].dims;
  const Dims& b = ctx.inputs[1].dims;
  if (a.empty() || b.empty()) {
    return InvalidArg(ctx.node, "both operands need at least 1 dim, got ", DimsToString(a), " and ",
                      DimsToString(b));
  }
  // Matrix views: a 1-D left operand is [1, K], a 1-D right operand [K, 1].
  const int64_t m = a.size() == 1 ? 1 : a[a.size() - 2];
  const int64_t k = a.back();
  const int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  const int64_t n = b.size() == 1 ? 1 : b.back();
  if (k != kb) {
    return InvalidArg(ctx.node, "inner dims do not match: ", DimsToString(a), " @ ",
                      DimsToString(b));
  }
  const Dims a_batch(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  const Dims b_batch(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  const size_t r = std::max(a_batch.size(), b_batch.size());
  Dims batch(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < a_batch.size() ? a_batch[a_batch.size() - 1 - i] : 1;
    const int64_t db = i < b_batch.size() ? b_batch[b_batch.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return InvalidArg(ctx.node, "batch dims do not broadcast: ", DimsToString(a), " @ ",
                        DimsToString(b));
    }
    batch[r - 1 - i] = da == 1 ? db : da;
  }
  Dims out = batch;
  if (a.size() > 1) out.push_back(m);
  if (b.size() > 1) out.push_back(n);

  auto plan = std::make_shared<MatMulPlan>();
  plan->m = m;
  plan->n = n;
  plan->k = k;
  const int64_t num_batches = NumElements(batch);
  if (NumElements(b_batch) == 1 && num_batches > 0) {
    // Every product uses the same B and A's batches are contiguous: one GEMM
    // with the batches stacked into M (the output layout is the same).
    plan->m = m * num_batches;
    plan->a_offsets = {0};
    plan->b_offsets = {0};
  } else {
    const std::vector<int64_t> as = BatchStrides(a_batch, m * k, r);
    const std::vector<int64_t> bs = BatchStrides(b_batch, k * n, r);
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < num_batches; ++i) {
      int64_t ao = 0, bo = 0;
      for (size_t d = 0; d < r; ++d) {
        ao += idx[d] * as[d];
        bo += idx[d] * bs[d];
      }
      plan->a_offsets.push_back(ao);
      plan->b_offsets.push_back(bo);
      for (size_t d = r; d-- > 0;) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  }
  ctx.outputs = {TensorInfo{dtype, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalMatMul(EvalContext& ctx) {
  const MatMulPlan& p = StateAs<MatMulPlan>(ctx);
  const T* a = ctx.inputs[0]->data<T>();
  const T* b = ctx.inputs[1]->data<T>();
  T* c = ctx.outputs[0]->data<T>();
  for (size_t i = 0; i < p.a_offsets.size(); ++i) {
    T* ci = c + static_cast<int64_t>(i) * p.m * p.n;
    if constexpr (std::is_integral_v<T>) {
      IntGemm(p.m, p.n, p.k, a + p.a_offsets[i], b + p.b_offsets[i], ci);
    } else {
      Gemm(p.m, p.n, p.k, a + p.a_offsets[i], b + p.b_offsets[i], /*b_transposed=*/false,
           /*beta=*/T(0), ci);
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Linear

struct LinearPlan {
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false;
  // A fused Relu/Clip and activation (post_min/post_max/post_act), per row.
  ConvEpilogue epilogue;
};

absl::Status PrepareLinear(PrepareContext& ctx) {
  RETURN_IF_ERROR(CheckInputCount(ctx, 2, 3));
  ASSIGN_OR_RETURN(const DType dtype, GemmDType(ctx, 3));
  const Dims& x = ctx.inputs[0].dims;
  const Dims& w = ctx.inputs[1].dims;
  if (x.empty()) return InvalidArg(ctx.node, "expected input with at least 1 dim, got []");
  if (w.size() != 2) {
    return InvalidArg(ctx.node, "expected 2-D weight, got ", DimsToString(w));
  }
  if (x.back() != w[1]) {
    return InvalidArg(ctx.node, "input ", DimsToString(x), " does not match weight ",
                      DimsToString(w));
  }
  auto plan = std::make_shared<LinearPlan>();
  plan->n = w[0];
  plan->k = w[1];
  plan->m = NumElements(Dims(x.begin(), x.end() - 1));
  if (HasInput(ctx, 2)) {
    const Dims& b = ctx.inputs[2].dims;
    if (b.size() != 1 || b[0] != plan->n) {
      return InvalidArg(ctx.node, "expected bias [", plan->n, "], got ", DimsToString(b));
    }
    plan->has_bias = true;
  }
  ASSIGN_OR_RETURN(plan->epilogue, ConvEpilogueFromAttrs(ctx.node, dtype, plan->n));
  Dims out = x;
  out.back() = plan->n;
  ctx.outputs = {TensorInfo{dtype, out}};
  ctx.state = std::move(plan);
  return absl::OkStatus();
}

template <typename T>
absl::Status EvalLinear(EvalContext& ctx) {
  const LinearPlan& p = StateAs<LinearPlan>(ctx);
  const T* x = ctx.inputs[0]->data<T>();
  const T* w = ctx.inputs[1]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  if (p.has_bias) {
    // Bias goes in first and the GEMM accumulates onto it (beta = 1): one pass
    // over the output instead of a separate bias pass after the product.
    const T* bias = ctx.inputs[2]->data<T>();
    for (int64_t i = 0; i < p.m; ++i) std::memcpy(y + i * p.n, bias, p.n * sizeof(T));
  }
  Gemm(p.m, p.n, p.k, x, w, /*b_transposed=*/true, p.has_bias ? T(1) : T(0), y);
  if constexpr (std::is_floating_point_v<T>) {
    ApplyConvEpilogue<T>(p.epilogue, 0, p.m, p.n, y, nullptr, ctx.num_threads);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Einsum
//
// Labels are parsed once in Prepare ("..." becomes one private label per
// covered dim; an implicit output lists the labels used once, sorted). Two
// operands whose labels split into batch (both, kept), k (both, summed), m
// (first only, kept) and n (second only, kept) become one batched GEMM: each
// operand is permuted into [batch, m, k] / [batch, k, n] in the workspace when
// not already in that order, and the [batch, m, n] product permuted into the
// output's order. Every other equation (one or three operands, a label summed
// inside one operand, repeated labels) runs as a direct loop over all label
// values with double accumulation.

struct EinsumPlan {
  std::vector<std::string> in_labels;  // per operand, one char per dim
  std::string out_labels;
  std::vector<int64_t> sizes;  // per label (indexed by char)
  bool gemm = false;
  // GEMM path.
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool permute_a = false, permute_b = false, permute_out = false;
  GatherPlan plan_a, plan_b, plan_out;
  size_t a_bytes = 0, b_bytes = 0;
};

absl::Status ParseEinsum(const PrepareContext& ctx, EinsumPlan* p) {
  std::string eq = ctx.node.attrs.GetString("equation");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != ctx.inputs.size()) {
    return InvalidArg(ctx.node, "equation '", eq, "' has ", terms.size(), " operands, got ",
                      ctx.inputs.size(), " inputs");
  }
  // "..." expands to private labels '0', '1', ... aligned from the right.
  size_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t dots = terms[i].find("...");
    const size_t letters = terms[i].size() - (dots == std::string::npos ? 0 : 3);
    const size_t rank = ctx.inputs[i].dims.size();
    if (dots == std::string::npos ? letters != rank : letters > rank) {
      return InvalidArg(ctx.node, "operand ", i, " '", terms[i], "' does not match its ", rank,
                        " dims");
    }
    if (dots != std::string::npos) ellipsis_rank = std::max(ellipsis_rank, rank - letters);
  }
  std::string ell;
  for (size_t d = 0; d < ellipsis_rank; ++d) ell.push_back(static_cast<char>('0' + d));
  auto expand = [&](const std::string& term, size_t rank) {
    const size_t dots = term.find("...");
    if (dots == std::string::npos) return term;
    const size_t covered = rank - (term.size() - 3);
    return term.substr(0, dots) + ell.substr(ellipsis_rank - covered) + term.substr(dots + 3);
  };
  p->sizes.assign(128, -1);
  std::vector<int> count(128, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string labels = expand(terms[i], ctx.inputs[i].dims.size());
    for (size_t d = 0; d < labels.size(); ++d) {
      const unsigned char c = static_cast<unsigned char>(labels[d]);
      if (c >= 128 || !(std::isalpha(c) || std::isdigit(c))) {
        return InvalidArg(ctx.node, "invalid label '", std::string(1, labels[d]), "' in '", eq, "'");
      }
      const int64_t size = ctx.inputs[i].dims[d];
      if (p->sizes[c] >= 0 && p->sizes[c] != size) {
        return Unimplemented(ctx.node, "label '", std::string(1, labels[d]), "' has sizes ",
                             p->sizes[c], " and ", size, " (broadcasting is not supported)");
      }
      p->sizes[c] = size;
      ++count[c];
    }
    p->in_labels.push_back(labels);
  }
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    p->out_labels = rhs.find("...") == std::string::npos ? rhs : expand(rhs, rhs.size() - 3 + ellipsis_rank);
  } else {
    p->out_labels = ell;
    for (int c = 'A'; c <= 'z'; ++c) {
      if (std::isalpha(c) && count[c] == 1) p->out_labels.push_back(static_cast<char>(c));
    }
  }
  for (char c : p->out_labels) {
    if (p->sizes[static_cast<unsigned char>(c)] < 0) {
      return InvalidArg(ctx.node, "output label '", std::string(1, c), "' is not in any operand");
    }
  }
  return absl::OkStatus();
}

// Fills the GEMM path of `p` when the equation has that shape.
void PlanEinsumGemm(const PrepareContext& ctx, EinsumPlan* p) {
  if (p->in_labels.size() != 2) return;
  const std::string& la = p->in_labels[0];
  const std::string& lb = p->in_labels[1];
  const std::string& lo = p->out_labels;
  auto has = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  auto unique = [](const std::string& s) {
    std::string t = s;
    std::sort(t.begin(), t.end());
    return std::adjacent_find(t.begin(), t.end()) == t.end();
  };
  if (!unique(la) || !unique(lb) || !unique(lo)) return;
  std::string batch, m, n, k;
  for (char c : la) {
    if (has(lb, c)) {
      (has(lo, c) ? batch : k).push_back(c);
    } else if (has(lo, c)) {
      m.push_back(c);
    } else {
      return;  // summed within A alone
    }
  }
  for (char c : lb) {
    if (!has(la, c)) {
      if (!has(lo, c)) return;
      n.push_back(c);
    }
  }
  auto size_of = [&](const std::string& labels) {
    int64_t s = 1;
    for (char c : labels) s *= p->sizes[static_cast<unsigned char>(c)];
    return s;
  };
  auto perm_to = [](const std::string& from, const std::string& to) {
    std::vector<int64_t> perm;
    for (char c : to) perm.push_back(static_cast<int64_t>(from.find(c)));
    return perm;
  };
  auto dims_of = [&](const std::string& labels) {
    Dims d;
    for (char c : labels) d.push_back(p->sizes[static_cast<unsigned char>(c)]);
    return d;
  };
  p->gemm = true;
  p->batch = size_of(batch);
  p->m = size_of(m);
  p->n = size_of(n);
  p->k = size_of(k);
  const std::string want_a = batch + m + k, want_b = batch + k + n, got = batch + m + n;
  p->permute_a = want_a != la;
  p->permute_b = want_b != lb;
  p->permute_out = got != lo;
  const size_t elem = DTypeSize(ctx.inputs[0].dtype);
  if (p->permute_a) p->plan_a = MakePermutePlan(ctx.inputs[0].dims, perm_to(la, want_a), elem);
  if (p->permute_b) p->plan_b = MakePermutePlan(ctx.inputs[1].dims, perm_to(lb, want_b), elem);
  if (p->permute_out) p->plan_out = MakePermutePlan(dims_of(got), perm_to(got, lo), elem);
  p->a_bytes = p->permute_a ? static_cast<size_t>(p->batch * p->m * p->k) * elem : 0;
  p->b_bytes = p->permute_b ? static_cast<size_t>(p->batch * p->k * p->n) * elem : 0;
}

absl::Status PrepareEinsum(PrepareContext& ctx) {
  if (ctx.inputs.empty()) return InvalidArg(ctx.node, "expected at least 1 input");
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i].present) return InvalidArg(ctx.node, "input ", i, " is absent");
  }
  // FP32, or FP64 (its own table row); every operand shares input 0's dtype.
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  for (size_t i = 1; i < ctx.inputs.size(); ++i) RETURN_IF_ERROR(CheckDType(ctx, i, t));
  auto p = std::make_shared<EinsumPlan>();
  RETURN_IF_ERROR(ParseEinsum(ctx, p.get()));
  PlanEinsumGemm(ctx, p.get());
  Dims out;
  for (char c : p->out_labels) out.push_back(p->sizes[static_cast<unsigned char>(c)]);
  if (p->gemm) {
    ctx.workspace_bytes =
        p->a_bytes + p->b_bytes +
        (p->permute_out ? static_cast<size_t>(p->batch * p->m * p->n) * DTypeSize(t) : 0);
  }
  ctx.outputs = {TensorInfo{t, out}};
  ctx.state = std::move(p);
  return absl::OkStatus();
}

// out[o...] = sum over the other labels of the product of the operands,
// accumulated in double for float and double operands alike.
template <typename T>
void EinsumDirect(const EinsumPlan& p, EvalContext& ctx) {
  std::string all = p.out_labels;
  for (const std::string& l : p.in_labels) {
    for (char c : l) {
      if (all.find(c) == std::string::npos) all.push_back(c);
    }
  }
  const size_t n_out = p.out_labels.size();
  // Stride of each label of `all` in each operand (0 when absent; summed when repeated).
  std::vector<std::vector<int64_t>> strides(p.in_labels.size(), std::vector<int64_t>(all.size(), 0));
  for (size_t i = 0; i < p.in_labels.size(); ++i) {
    const Dims& dims = ctx.inputs[i]->dims();
    int64_t stride = 1;
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      strides[i][all.find(p.in_labels[i][d])] += stride;
      stride *= dims[d];
    }
  }
  std::vector<int64_t> size(all.size());
  for (size_t j = 0; j < all.size(); ++j) size[j] = p.sizes[static_cast<unsigned char>(all[j])];
  T* y = ctx.outputs[0]->data<T>();
  const int64_t total_out = ctx.outputs[0]->num_elements();
  int64_t inner_total = 1;
  for (size_t j = n_out; j < all.size(); ++j) inner_total *= size[j];
  std::vector<int64_t> idx(all.size(), 0);
  for (int64_t o = 0; o < total_out; ++o) {
    double acc = 0.0;
    for (size_t j = n_out; j < all.size(); ++j) idx[j] = 0;
    for (int64_t t = 0; t < inner_total; ++t) {
      double prod = 1.0;
      for (size_t i = 0; i < p.in_labels.size(); ++i) {
        int64_t off = 0;
        for (size_t j = 0; j < all.size(); ++j) off += idx[j] * strides[i][j];
        prod *= ctx.inputs[i]->data<T>()[off];
      }
      acc += prod;
      for (size_t j = all.size(); j-- > n_out;) {
        if (++idx[j] < size[j]) break;
        idx[j] = 0;
      }
    }
    y[o] = static_cast<T>(acc);
    for (size_t j = n_out; j-- > 0;) {
      if (++idx[j] < size[j]) break;
      idx[j] = 0;
    }
  }
}

// T is float or double (one table row each): the GEMM path through Xgemm<T>.
template <typename T>
absl::Status EvalEinsum(EvalContext& ctx) {
  const EinsumPlan& p = StateAs<EinsumPlan>(ctx);
  if (!p.gemm) {
    EinsumDirect<T>(p, ctx);
    return absl::OkStatus();
  }
  char* ws = static_cast<char*>(ctx.workspace);
  const T* a = ctx.inputs[0]->data<T>();
  const T* b = ctx.inputs[1]->data<T>();
  if (p.permute_a) {
    RunGather(p.plan_a, a, ws, ctx.num_threads);
    a = reinterpret_cast<const T*>(ws);
  }
  if (p.permute_b) {
    RunGather(p.plan_b, b, ws + p.a_bytes, ctx.num_threads);
    b = reinterpret_cast<const T*>(ws + p.a_bytes);
  }
  T* c = p.permute_out ? reinterpret_cast<T*>(ws + p.a_bytes + p.b_bytes)
                       : ctx.outputs[0]->data<T>();
  for (int64_t i = 0; i < p.batch; ++i) {
    Xgemm<T>(false, false, p.m, p.n, p.k, T(1), a + i * p.m * p.k, p.k, b + i * p.k * p.n, p.n,
             T(0), c + i * p.m * p.n, p.n);
  }
  if (p.permute_out) RunGather(p.plan_out, c, ctx.outputs[0]->raw_data(), ctx.num_threads);
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> MatMulKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kMatMul, DType::kF32, PrepareMatMul, EvalMatMul<float>},
      {ir::OpKind::kLinear, DType::kF32, PrepareLinear, EvalLinear<float>},
      {ir::OpKind::kMatMul, DType::kF64, PrepareMatMul, EvalMatMul<double>},
      {ir::OpKind::kMatMul, DType::kInt64, PrepareMatMul, EvalMatMul<int64_t>},
      {ir::OpKind::kMatMul, DType::kInt32, PrepareMatMul, EvalMatMul<int32_t>},
      {ir::OpKind::kMatMul, DType::kInt16, PrepareMatMul, EvalMatMul<int16_t>},
      {ir::OpKind::kMatMul, DType::kInt8, PrepareMatMul, EvalMatMul<int8_t>},
      {ir::OpKind::kMatMul, DType::kUInt8, PrepareMatMul, EvalMatMul<uint8_t>},
      {ir::OpKind::kLinear, DType::kF64, PrepareLinear, EvalLinear<double>},
      {ir::OpKind::kEinsum, DType::kF32, PrepareEinsum, EvalEinsum<float>},
      {ir::OpKind::kEinsum, DType::kF64, PrepareEinsum, EvalEinsum<double>},
  };
  return kKernels;
}

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  Xgemm<float>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace kiln::kernels
