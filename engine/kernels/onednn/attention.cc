// ScaledDotProductAttention in FP32, fused: softmax(scale(q k^T) + mask) v
// one tile of query rows at a time. Per (batch index, row tile): the scores
// of those rows against every key go to a per-thread tile (one GEMM), are
// scaled and masked in place, go through oneDNN's softmax (the primitive
// the unfused Softmax runs), and one more GEMM writes the rows' output; the
// GEMMs are oneDNN matmul primitives made for the tile's shape and strides. The
// [L, S] score matrix of a head is never materialised, nor are the
// transposed copies of q, k, v and the output that the unfused graph makes
// (q_perm, k_perm, v_perm and out_perm are read as strides).
//
// The arithmetic is the unfused ops' in their order (the scale divides or
// multiplies in float32 after the product, or the query before it; the mask
// is added after); only the GEMMs' blocking differs. Shapes and errors are
// the native kernel's (attention.cc): its Prepare runs first. Taken where
// every operand is FP32 (the mask may be aten's BOOL one; the scale a
// number), q, k and v have at least two
// dims and read their last dim with stride 1, the mask's last two dims are
// 1 or the scores', and the output's last dim is contiguous; anything else
// runs the native kernel.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel_util.h"
#include "engine/kernels/onednn/onednn.h"
#include "engine/kernels/onednn/onednn_kernels.h"
#include "engine/kernels/safe_softmax.h"

namespace kiln::kernels::onednn {
namespace {

using dnnl::memory;

enum Input { kQ = 0, kK, kV, kMask, kScale };

// An operand viewed as [batch..., rows, cols] with strides in elements.
struct View {
  Dims dims;
  std::vector<int64_t> strides;
};

std::vector<int64_t> ContiguousStrides(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// The two dims a transposition attribute names, counted from 0 in `rank`
// dims; nullopt when they are not two dims of it.
std::optional<std::pair<int64_t, int64_t>> TransposedDims(const ir::Node& node, const char* attr,
                                                          int64_t rank) {
  const std::vector<int64_t> p = node.attrs.GetInts(attr);
  if (p.size() != 2) return std::nullopt;
  const int64_t a = p[0] < 0 ? p[0] + rank : p[0], b = p[1] < 0 ? p[1] + rank : p[1];
  if (a < 0 || b < 0 || a >= rank || b >= rank) return std::nullopt;
  return std::make_pair(a, b);
}

// The operand the node reads: the input, transposed by attribute `attr`.
std::optional<View> Logical(const PrepareContext& ctx, size_t input, const char* attr) {
  View v{ctx.inputs[input].dims, ContiguousStrides(ctx.inputs[input].dims)};
  if (!ctx.node.attrs.Has(attr)) return v;
  const auto ab = TransposedDims(ctx.node, attr, static_cast<int64_t>(v.dims.size()));
  if (!ab) return std::nullopt;
  std::swap(v.dims[ab->first], v.dims[ab->second]);
  std::swap(v.strides[ab->first], v.strides[ab->second]);
  return v;
}

struct Geometry {
  int64_t l = 0, s = 0, d = 0, dv = 0;
  Dims batch;  // broadcast batch dims
  // Per batch dim, the stride of q, k, v, mask and the output (0: broadcast).
  std::vector<int64_t> qb, kb, vb, mb, ob;
  int64_t q_ld = 0, k_ld = 0, v_ld = 0, o_ld = 0;  // row strides
  int64_t m_l = 0, m_s = 0;                         // mask strides over L and S (0: broadcast)
  bool has_mask = false;
  bool keep_mask = false;  // a BOOL mask: true takes part (0), false does not (-inf)
  Dims out_dims;  // the node's (physical) output dims
};

// Batch strides of `v` (dims before its last two) against `batch`, right-aligned.
bool BatchStrides(const View& v, const Dims& batch, std::vector<int64_t>& out) {
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t vb = static_cast<int64_t>(v.dims.size()) - 2;
  out.assign(nb, 0);
  for (int64_t i = 0; i < vb; ++i) {
    const int64_t j = nb - vb + i;
    if (v.dims[i] == batch[j]) {
      out[j] = batch[j] == 1 ? 0 : v.strides[i];
    } else if (v.dims[i] != 1) {
      return false;
    }
  }
  return true;
}

std::optional<Geometry> FastGeometry(const PrepareContext& ctx) {
  const size_t n = ctx.inputs.size();
  for (size_t i : {kQ, kK, kV}) {
    if (ctx.inputs[i].dtype != DType::kF32 || ctx.inputs[i].dims.size() < 2) return std::nullopt;
  }
  const bool has_mask = HasInput(ctx, kMask);
  const bool keep_mask = has_mask && ctx.inputs[kMask].dtype == DType::kBool &&
                         ctx.node.attrs.GetString("bool_mask") == "keep";
  if (has_mask && ctx.inputs[kMask].dtype != DType::kF32 && !keep_mask) return std::nullopt;
  if (n > kScale && ctx.inputs[kScale].present &&
      (!ctx.inputs[kScale].scalar || !ctx.inputs[kScale].dims.empty())) {
    return std::nullopt;
  }
  std::optional<View> q = Logical(ctx, kQ, "q_perm"), k = Logical(ctx, kK, "k_perm"),
                      v = Logical(ctx, kV, "v_perm");
  if (!q || !k || !v || q->strides.back() != 1 || k->strides.back() != 1 ||
      v->strides.back() != 1) {
    return std::nullopt;
  }
  Geometry g;
  g.l = q->dims[q->dims.size() - 2];
  g.d = q->dims.back();
  g.s = k->dims[k->dims.size() - 2];
  g.dv = v->dims.back();
  if (k->dims.back() != g.d || v->dims[v->dims.size() - 2] != g.s) return std::nullopt;
  g.q_ld = q->strides[q->strides.size() - 2];
  g.k_ld = k->strides[k->strides.size() - 2];
  g.v_ld = v->strides[v->strides.size() - 2];
  // The mask as [batch..., L or 1, S or 1]; it may not widen the scores.
  View m;
  if (has_mask) {
    m = View{ctx.inputs[kMask].dims, ContiguousStrides(ctx.inputs[kMask].dims)};
    while (m.dims.size() < 2) {
      m.dims.insert(m.dims.begin(), 1);
      m.strides.insert(m.strides.begin(), 0);
    }
    const int64_t ml = m.dims[m.dims.size() - 2], ms = m.dims.back();
    if ((ml != 1 && ml != g.l) || (ms != 1 && ms != g.s)) return std::nullopt;
    g.m_l = ml == 1 ? 0 : m.strides[m.strides.size() - 2];
    g.m_s = ms == 1 ? 0 : m.strides.back();
    g.has_mask = true;
    g.keep_mask = keep_mask;
  }
  // Broadcast batch dims, as torch.matmul and the Add broadcast them.
  std::vector<const View*> views = {&*q, &*k, &*v};
  if (has_mask) views.push_back(&m);
  size_t nb = 0;
  for (const View* x : views) nb = std::max(nb, x->dims.size() - 2);
  g.batch.assign(nb, 1);
  for (const View* x : views) {
    const size_t xb = x->dims.size() - 2;
    for (size_t i = 0; i < xb; ++i) {
      int64_t& d = g.batch[nb - xb + i];
      if (d == 1) {
        d = x->dims[i];
      } else if (x->dims[i] != 1 && x->dims[i] != d) {
        return std::nullopt;
      }
    }
  }
  if (!BatchStrides(*q, g.batch, g.qb) || !BatchStrides(*k, g.batch, g.kb) ||
      !BatchStrides(*v, g.batch, g.vb) || (has_mask && !BatchStrides(m, g.batch, g.mb))) {
    return std::nullopt;
  }
  if (!has_mask) g.mb.assign(nb, 0);
  // The output [batch..., L, Dv], written through out_perm's transposition.
  Dims logical = g.batch;
  logical.push_back(g.l);
  logical.push_back(g.dv);
  View o{logical, ContiguousStrides(logical)};
  if (ctx.node.attrs.Has("out_perm")) {
    const auto ab = TransposedDims(ctx.node, "out_perm", static_cast<int64_t>(logical.size()));
    if (!ab) return std::nullopt;
    const auto [a, b] = *ab;
    Dims physical = logical;
    std::swap(physical[a], physical[b]);
    const std::vector<int64_t> ps = ContiguousStrides(physical);
    o.strides = ps;
    std::swap(o.strides[a], o.strides[b]);
    g.out_dims = physical;
  } else {
    g.out_dims = logical;
  }
  if (o.strides.back() != 1) return std::nullopt;
  g.o_ld = o.strides[o.strides.size() - 2];
  g.ob.assign(o.strides.begin(), o.strides.end() - 2);
  for (size_t i = 0; i < nb; ++i) {
    if (g.batch[i] == 1) g.ob[i] = 0;
  }
  return g;
}

bool SupportsSdpa(const PrepareContext& ctx) {
  return ctx.allow_layouts && FastGeometry(ctx).has_value();
}

struct SdpaState {
  Geometry g;
  int64_t tile_rows = 1;
  bool on_query = false, divide = false;
  float scale = 1.0f;  // when there is no scale input
  // Per tile height (full, and the last, shorter tile): the scores' GEMM, the
  // softmax over [rows, S] and the output's GEMM, each JIT-compiled for its
  // shape and strides.
  struct Tile {
    PrimitiveCall scores;   // q rows, k^T, the tile, scratchpad
    PrimitiveCall softmax;  // the tile in place, scratchpad
    PrimitiveCall output;   // the tile, v, out rows, scratchpad
    memory::desc q, kt, s, v, o;
  };
  Tile full, tail;
  memory::desc scratch_desc;
  size_t slot_bytes = 0, tile_offset = 0, query_offset = 0, scratch_offset = 0;
};

absl::Status PrepareSdpa(PrepareContext& ctx) {
  ASSIGN_OR_RETURN(Dims out_dims, NativeOutputDims(ctx));
  std::optional<Geometry> g = FastGeometry(ctx);
  if (!g || g->out_dims != out_dims) {
    return Unimplemented(ctx.node, "not the fused kernel's shape");
  }
  auto st = std::make_shared<SdpaState>();
  st->g = *g;
  const ir::Attributes& attrs = ctx.node.attrs;
  st->on_query = attrs.GetString("scale_on", "scores") == "query";
  if (HasInput(ctx, kScale)) {
    st->divide = attrs.GetString("scale_op", "mul") == "div";
  } else {
    st->scale = static_cast<float>(attrs.Has("scale") ? attrs.GetFloat("scale")
                                                      : 1.0 / std::sqrt(static_cast<double>(g->d)));
  }
  // Row tiles: at most ~192 KB of scores, and enough tiles for every thread.
  int64_t batches = NumElements(g->batch);
  int64_t rows = std::max<int64_t>(1, std::min<int64_t>(g->l, 49152 / std::max<int64_t>(g->s, 1)));
  const int64_t want = 2 * std::max(ctx.num_threads, 1);
  if (batches * ((g->l + rows - 1) / rows) < want) {
    const int64_t per_batch = (want + batches - 1) / batches;
    rows = std::max<int64_t>(1, std::min(rows, (g->l + per_batch - 1) / per_batch));
  }
  st->tile_rows = std::max<int64_t>(1, rows);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  UseThreads(ctx.num_threads);
  size_t scratch = 0;
  const int64_t q_ld = st->on_query ? g->d : g->q_ld;
  // Per tile: its three primitives, wrapped once the shared scratchpad's size
  // is known.
  dnnl::primitive made[2][3];
  try {
    auto make = [&](int64_t r, SdpaState::Tile& t, dnnl::primitive* p) {
      using tag = memory::format_tag;
      const auto f32 = memory::data_type::f32;
      t.q = memory::desc({r, g->d}, f32, memory::dims{q_ld, 1});
      t.kt = memory::desc({g->d, g->s}, f32, memory::dims{1, g->k_ld});
      t.s = memory::desc({r, g->s}, f32, tag::ab);
      t.v = memory::desc({g->s, g->dv}, f32, memory::dims{g->v_ld, 1});
      t.o = memory::desc({r, g->dv}, f32, memory::dims{g->o_ld, 1});
      const dnnl::matmul::primitive_desc scores(dnnl::matmul::desc(t.q, t.kt, t.s), attr, Engine());
      const dnnl::softmax_forward::primitive_desc softmax(
          {dnnl::prop_kind::forward_inference, t.s, 1}, attr, Engine());
      const dnnl::matmul::primitive_desc output(dnnl::matmul::desc(t.s, t.v, t.o), attr, Engine());
      p[0] = dnnl::matmul(scores);
      p[1] = dnnl::softmax_forward(softmax);
      p[2] = dnnl::matmul(output);
      for (size_t bytes : {scores.scratchpad_desc().get_size(), softmax.scratchpad_desc().get_size(),
                           output.scratchpad_desc().get_size()}) {
        scratch = std::max(scratch, bytes);
      }
    };
    make(st->tile_rows, st->full, made[0]);
    const int64_t tail = g->l % st->tile_rows;
    if (tail != 0) make(tail, st->tail, made[1]);
  } catch (const dnnl::error& e) {
    return Unimplemented(ctx.node, "oneDNN has no attention GEMM or softmax for this shape: ",
                         e.what());
  }
  st->scratch_desc = memory::desc({static_cast<int64_t>(scratch)}, memory::data_type::u8,
                                  memory::format_tag::a);
  SdpaState::Tile* tiles[2] = {&st->full, &st->tail};
  for (int i = 0; i < 2; ++i) {
    if (!made[i][0]) continue;  // no tail tile
    SdpaState::Tile* t = tiles[i];
    const memory::desc& sc = st->scratch_desc;
    t->scores = PrimitiveCall(std::move(made[i][0]), {{DNNL_ARG_SRC, t->q},
                                                      {DNNL_ARG_WEIGHTS, t->kt},
                                                      {DNNL_ARG_DST, t->s},
                                                      {DNNL_ARG_SCRATCHPAD, sc}});
    t->softmax = PrimitiveCall(std::move(made[i][1]),
                               {{DNNL_ARG_SRC, t->s}, {DNNL_ARG_DST, t->s}, {DNNL_ARG_SCRATCHPAD, sc}});
    t->output = PrimitiveCall(std::move(made[i][2]), {{DNNL_ARG_SRC, t->s},
                                                      {DNNL_ARG_WEIGHTS, t->v},
                                                      {DNNL_ARG_DST, t->o},
                                                      {DNNL_ARG_SCRATCHPAD, sc}});
  }
  WorkspaceLayout slot;
  st->tile_offset = slot.Add(st->tile_rows * g->s * sizeof(float));
  st->query_offset = slot.Add(st->on_query ? st->tile_rows * g->d * sizeof(float) : 0);
  st->scratch_offset = slot.Add(scratch);
  st->slot_bytes = slot.total();
  ctx.workspace_bytes = st->slot_bytes * std::max(ctx.num_threads, 1);
  ctx.outputs = {TensorInfo{DType::kF32, out_dims}};
  ctx.state = std::move(st);
  return absl::OkStatus();
}

absl::Status EvalSdpa(EvalContext& ctx) {
  const auto& st = *static_cast<const SdpaState*>(ctx.state);
  const Geometry& g = st.g;
  UseThreads(ctx.num_threads);
  const float* q = ctx.inputs[kQ]->data<float>();
  const float* k = ctx.inputs[kK]->data<float>();
  const float* v = ctx.inputs[kV]->data<float>();
  const float* mask = g.has_mask && !g.keep_mask ? ctx.inputs[kMask]->data<float>() : nullptr;
  const bool* keep = g.keep_mask ? ctx.inputs[kMask]->data<bool>() : nullptr;
  float* out = ctx.outputs[0]->data<float>();
  const bool has_scale = ctx.inputs.size() > kScale && ctx.inputs[kScale] != nullptr;
  // As the unfused Div/Mul computes a float32 tensor by a number: in float32.
  const float scale = has_scale ? static_cast<float>(
      LoadAnyAsDouble(ctx.inputs[kScale]->raw_data(), ctx.inputs[kScale]->dtype(), 0)) : st.scale;
  const bool divide = has_scale && st.divide;
  const bool safe = ctx.node.attrs.GetBool("safe", false);
  const int64_t tiles = (g.l + st.tile_rows - 1) / st.tile_rows;
  const int64_t batches = NumElements(g.batch);
  const int64_t nb = static_cast<int64_t>(g.batch.size());
  char* ws = static_cast<char*>(ctx.workspace);
  ParallelFor(batches * tiles, ctx.num_threads, batches * g.l * g.s * (g.d + g.dv) * 2,
              [&](int64_t begin, int64_t end) {
    char* slot = ws + st.slot_bytes * static_cast<size_t>(omp_get_thread_num());
    float* tile = reinterpret_cast<float*>(slot + st.tile_offset);
    float* qbuf = reinterpret_cast<float*>(slot + st.query_offset);
    std::vector<uint8_t> verdict(static_cast<size_t>(st.tile_rows));
    dnnl::stream& stream = Stream();
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bi = item / tiles, l0 = (item % tiles) * st.tile_rows;
      const int64_t rows = std::min(st.tile_rows, g.l - l0);
      int64_t qo = 0, ko = 0, vo = 0, mo = 0, oo = 0;
      for (int64_t i = nb - 1, rest = bi; i >= 0; --i) {
        const int64_t idx = rest % g.batch[i];
        rest /= g.batch[i];
        qo += idx * g.qb[i];
        ko += idx * g.kb[i];
        vo += idx * g.vb[i];
        mo += idx * g.mb[i];
        oo += idx * g.ob[i];
      }
      const float* qrows = q + qo + l0 * g.q_ld;
      if (st.on_query) {
        for (int64_t r = 0; r < rows; ++r) {
          const float* src = qrows + r * g.q_ld;
          float* dst = qbuf + r * g.d;
          if (divide) {
            for (int64_t c = 0; c < g.d; ++c) dst[c] = src[c] / scale;
          } else {
            for (int64_t c = 0; c < g.d; ++c) dst[c] = src[c] * scale;
          }
        }
        qrows = qbuf;
      }
      const SdpaState::Tile& t = rows == st.tile_rows ? st.full : st.tail;
      void* scratch = slot + st.scratch_offset;
      // tile [rows, S] = qrows [rows, D] k^T (inside this parallel region the
      // primitives run on the calling thread alone).
      t.scores.Execute(stream, {qrows, k + ko, tile, scratch});
      for (int64_t r = 0; r < rows; ++r) {
        float* row = tile + r * g.s;
        if (!st.on_query) {
          if (divide) {
            for (int64_t c = 0; c < g.s; ++c) row[c] /= scale;
          } else {
            for (int64_t c = 0; c < g.s; ++c) row[c] *= scale;
          }
        }
        if (keep != nullptr) {
          const bool* m = keep + mo + (l0 + r) * g.m_l;
          for (int64_t c = 0; c < g.s; ++c) {
            if (!m[c * g.m_s]) row[c] = -std::numeric_limits<float>::infinity();
          }
        } else if (mask != nullptr) {
          const float* m = mask + mo + (l0 + r) * g.m_l;
          if (g.m_s == 1) {
            for (int64_t c = 0; c < g.s; ++c) row[c] += m[c];
          } else {
            for (int64_t c = 0; c < g.s; ++c) row[c] += m[c * g.m_s];
          }
        }
      }
      // Rows PyTorch's softmax makes NaN (a NaN, +inf, all -inf) or, safe,
      // zeros (all -inf): classified before the in-place softmax, written after.
      for (int64_t r = 0; r < rows; ++r) verdict[r] = ClassifyRow(tile + r * g.s, g.s, safe);
      t.softmax.Execute(stream, {tile, tile, scratch});
      stream.wait();
      for (int64_t r = 0; r < rows; ++r) ApplyRowVerdict(tile + r * g.s, g.s, verdict[r]);
      // out rows [rows, Dv] = tile [rows, S] v [S, Dv].
      t.output.Execute(stream, {tile, v + vo, out + oo + l0 * g.o_ld, scratch});
      stream.wait();
    }
  });
  return absl::OkStatus();
}

}  // namespace

KernelDef SdpaKernel() {
  KernelDef k{ir::OpKind::kScaledDotProductAttention, DType::kF32, PrepareSdpa, EvalSdpa};
  k.provider = Provider::kOneDnn;
  k.supports = SupportsSdpa;
  k.name = "onednn.sdpa";
  return k;
}

}  // namespace kiln::kernels::onednn
