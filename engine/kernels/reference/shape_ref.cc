// Reference shape, movement and indexing ops: for every output element, the
// input element the op's definition names.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "engine/kernels/reference/ref_util.h"

namespace kiln::kernels::reference {
namespace {

using ir::OpKind;

Outputs Same(const Tensor& x, const Dims& dims, const std::vector<double>& v) {
  return Outputs{Write(x.dtype(), dims, v)};
}

// Output dims and, per output index, the input index it reads (or nullopt: padding).
using Mapping = std::function<std::optional<Index>(const Index&)>;

Outputs Gathered(const Tensor& x, const Dims& out_dims, const Mapping& map, double pad = 0) {
  const Values v = Read(x);
  std::vector<double> out;
  ForEach(out_dims, [&](const Index& o) {
    std::optional<Index> i = map(o);
    out.push_back(i ? v.at(*i) : pad);
  });
  return Same(x, out_dims, out);
}

int64_t ReadIndex(const Values& idx, int64_t k, int64_t n) {
  int64_t i = static_cast<int64_t>(idx.v[k]);
  return i < 0 ? i + n : i;
}

}  // namespace

MaybeOutputs ShapeReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const ir::Attributes& a = node.attrs;
  switch (node.kind) {
    case OpKind::kSqueeze: {
      const Dims& x = in[0]->dims();
      std::vector<bool> drop(x.size(), false);
      if (!a.Has("axes")) {
        for (size_t i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
      } else {
        for (int64_t ax : a.GetInts("axes")) {
          if (!x.empty()) drop[Axis(ax, x.size())] = x[Axis(ax, x.size())] == 1;
        }
      }
      Dims out;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!drop[i]) out.push_back(x[i]);
      }
      return Outputs{in[0]->Clone().Reshaped(out)};
    }
    case OpKind::kUnsqueeze: {
      Dims out = in[0]->dims();
      const int64_t ax = a.GetInt("axis", 0);
      out.insert(out.begin() + (ax < 0 ? ax + static_cast<int64_t>(out.size()) + 1 : ax), 1);
      return Outputs{in[0]->Clone().Reshaped(out)};
    }
    case OpKind::kUnflatten: {
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      Dims sizes = a.GetInts("sizes");
      int64_t known = 1;
      for (int64_t s : sizes) known *= s == -1 ? 1 : s;
      for (int64_t& s : sizes) {
        if (s == -1) s = x[ax] / known;
      }
      Dims out(x.begin(), x.begin() + ax);
      out.insert(out.end(), sizes.begin(), sizes.end());
      out.insert(out.end(), x.begin() + ax + 1, x.end());
      return Outputs{in[0]->Clone().Reshaped(out)};
    }
    case OpKind::kReshapeLike:
      return Outputs{in[0]->Clone().Reshaped(in[1]->dims())};
    case OpKind::kPermute: {
      const Dims& x = in[0]->dims();
      const int64_t r = x.size();
      std::vector<int64_t> perm(r);
      std::iota(perm.begin(), perm.end(), 0);
      if (a.Has("perm")) {
        perm = a.GetInts("perm");
        for (int64_t& p : perm) p = Axis(p, r);
      } else if (a.Has("dim0")) {
        if (r >= 2 || !a.GetBool("identity_below_rank2")) {
          std::swap(perm[Axis(a.GetInt("dim0"), r)], perm[Axis(a.GetInt("dim1"), r)]);
        }
      } else {
        // movedim: place each source at its destination, the rest in order.
        std::vector<int64_t> src = a.GetInts("source"), dst = a.GetInts("destination");
        std::vector<int64_t> order(r, -1);
        std::vector<bool> used(r, false);
        for (size_t k = 0; k < src.size(); ++k) {
          order[Axis(dst[k], r)] = Axis(src[k], r);
          used[Axis(src[k], r)] = true;
        }
        int64_t next = 0;
        for (int64_t& o : order) {
          if (o >= 0) continue;
          while (used[next]) ++next;
          o = next++;
        }
        perm = order;
      }
      Dims out;
      for (int64_t p : perm) out.push_back(x[p]);
      return Gathered(*in[0], out, [&](const Index& o) {
        Index i(r);
        for (int64_t k = 0; k < r; ++k) i[perm[k]] = o[k];
        return std::optional<Index>(i);
      });
    }
    case OpKind::kExpand: {
      const Dims& x = in[0]->dims();
      Dims shape = a.GetBool("like") ? in[1]->dims() : a.GetInts("shape");
      const size_t lead = shape.size() - x.size();
      for (size_t i = lead; i < shape.size(); ++i) {
        if (shape[i] == -1) shape[i] = x[i - lead];
      }
      return Gathered(*in[0], shape, [&](const Index& o) {
        Index i(x.size());
        for (size_t k = 0; k < x.size(); ++k) i[k] = x[k] == 1 ? 0 : o[k + lead];
        return std::optional<Index>(i);
      });
    }
    case OpKind::kTile: {
      const Dims& x = in[0]->dims();
      std::vector<int64_t> rep = a.GetInts("repeats");
      if (a.GetBool("pad_repeats") && rep.size() < x.size()) rep.insert(rep.begin(), x.size() - rep.size(), 1);
      Dims xx = x;
      xx.insert(xx.begin(), rep.size() - x.size(), 1);
      Dims out(rep.size());
      for (size_t k = 0; k < rep.size(); ++k) out[k] = xx[k] * rep[k];
      const size_t lead = rep.size() - x.size();
      return Gathered(*in[0], out, [&](const Index& o) {
        Index i(x.size());
        for (size_t k = 0; k < x.size(); ++k) i[k] = o[k + lead] % x[k];
        return std::optional<Index>(i);
      });
    }
    case OpKind::kSlice:
    case OpKind::kChunk:
    case OpKind::kSelect: {
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      const int64_t n = x[ax];
      int64_t start = 0, step = 1, size = 0;
      if (node.kind == OpKind::kSlice) {
        start = in.size() > 1 && in[1] != nullptr ? static_cast<int64_t>(Read(*in[1]).v[0])
                                                  : a.GetInt("start", 0);
        step = a.GetInt("step", 1);
        int64_t end;
        if (a.Has("length")) {
          if (start < 0) start += n;
          end = start + a.GetInt("length");
        } else {
          end = in.size() > 2 && in[2] != nullptr ? static_cast<int64_t>(Read(*in[2]).v[0])
                                                  : a.GetInt("end", std::numeric_limits<int64_t>::max());
          if (start < 0) start += n;
          if (end < 0) end += n;
          start = std::clamp<int64_t>(start, 0, n);
          end = std::clamp<int64_t>(end, start, n);
        }
        size = (end - start + step - 1) / step;
      } else if (node.kind == OpKind::kChunk) {
        const int64_t c = a.GetInt("chunks", 1);
        const int64_t piece = (n + c - 1) / c;
        start = a.GetInt("index", 0) * piece;
        size = std::min(piece, n - start);
      } else {
        start = a.GetInt("index", 0);
        if (start < 0) start += n;
        size = 1;
      }
      Dims out = x;
      out[ax] = size;
      Outputs r = Gathered(*in[0], out, [&](const Index& o) {
        Index i = o;
        i[ax] = start + o[ax] * step;
        return std::optional<Index>(i);
      });
      if (node.kind == OpKind::kSelect) {
        out.erase(out.begin() + ax);
        r[0] = r[0].Reshaped(out);
      }
      return r;
    }
    case OpKind::kSliceScatter: {
      // out = base; out[slice] = src, element by element.
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      const int64_t n = x[ax];
      Values out = Read(*in[0]);
      const Values src = Read(*in[1]);
      int64_t start = 0, step = 1;
      const bool select = a.Has("index");
      if (select) {
        start = a.GetInt("index");
        if (start < 0) start += n;
      } else {
        start = a.GetInt("start", 0);
        step = a.GetInt("step", 1);
        if (start < 0) start += n;
        start = std::clamp<int64_t>(start, 0, n);
      }
      int64_t k = 0;
      ForEach(src.dims, [&](const Index& si) {
        Index bi = si;
        if (select) {
          bi.insert(bi.begin() + ax, start);
        } else {
          bi[ax] = start + si[ax] * step;
        }
        out.v[OffsetOf(bi, x)] = src.v[k++];
      });
      return Same(*in[0], x, out.v);
    }
    case OpKind::kFlip: {
      const Dims& x = in[0]->dims();
      std::vector<bool> flip(x.size(), false);
      for (int64_t ax : a.GetInts("axes")) flip[Axis(ax, x.size())] = true;
      return Gathered(*in[0], x, [&](const Index& o) {
        Index i = o;
        for (size_t k = 0; k < x.size(); ++k) {
          if (flip[k]) i[k] = x[k] - 1 - o[k];
        }
        return std::optional<Index>(i);
      });
    }
    case OpKind::kRoll: {
      const Dims& x = in[0]->dims();
      const std::vector<int64_t> shifts = a.GetInts("shifts"), axes = a.GetInts("axes");
      if (axes.empty()) {
        const int64_t n = in[0]->num_elements();
        const Values v = Read(*in[0]);
        std::vector<double> out(n);
        for (int64_t k = 0; k < n; ++k) out[((k + shifts[0]) % n + n) % n] = v.v[k];
        return Same(*in[0], x, out);
      }
      return Gathered(*in[0], x, [&](const Index& o) {
        Index i = o;
        for (size_t k = 0; k < axes.size(); ++k) {
          const int64_t ax = Axis(axes[k], x.size());
          i[ax] = ((i[ax] - shifts[k]) % x[ax] + x[ax]) % x[ax];
        }
        return std::optional<Index>(i);
      });
    }
    case OpKind::kPad: {
      const Dims& x = in[0]->dims();
      const std::vector<int64_t> pads = a.GetInts("pads");
      const std::string mode = a.GetString("mode", "constant");
      Dims out = x;
      std::vector<int64_t> before(x.size(), 0);
      for (size_t k = 0; k < pads.size() / 2; ++k) {
        const size_t d = x.size() - 1 - k;
        before[d] = pads[2 * k];
        out[d] += pads[2 * k] + pads[2 * k + 1];
      }
      return Gathered(
          *in[0], out,
          [&](const Index& o) -> std::optional<Index> {
            Index i(x.size());
            for (size_t d = 0; d < x.size(); ++d) {
              int64_t j = o[d] - before[d];
              const int64_t n = x[d];
              if (j < 0 || j >= n) {
                if (mode == "constant") return std::nullopt;
                if (mode == "reflect") j = j < 0 ? -j : 2 * (n - 1) - j;
                if (mode == "replicate") j = std::clamp<int64_t>(j, 0, n - 1);
                if (mode == "circular") j = ((j % n) + n) % n;
              }
              i[d] = j;
            }
            return i;
          },
          a.GetFloat("value", 0));
    }
    case OpKind::kTril:
    case OpKind::kTriu: {
      const Dims& x = in[0]->dims();
      const int64_t diag = a.GetInt("diagonal", 0);
      const bool lower = node.kind == OpKind::kTril;
      return Gathered(*in[0], x, [&](const Index& o) -> std::optional<Index> {
        const int64_t i = o[x.size() - 2], j = o[x.size() - 1];
        const bool keep = lower ? j - i <= diag : j - i >= diag;
        if (!keep) return std::nullopt;
        return o;
      });
    }
    case OpKind::kPixelShuffle: {
      const Dims& x = in[0]->dims();
      const int64_t r = a.GetInt("factor", 1);
      const bool inverse = a.GetBool("inverse", false);
      const size_t n = x.size();
      Dims out = x;
      if (!inverse) {
        out[n - 3] /= r * r;
        out[n - 2] *= r;
        out[n - 1] *= r;
      } else {
        out[n - 3] *= r * r;
        out[n - 2] /= r;
        out[n - 1] /= r;
      }
      return Gathered(*in[0], out, [&](const Index& o) {
        Index i = o;
        if (!inverse) {  // out[c, h*r+a, w*r+b] = in[c*r*r + a*r + b, h, w]
          i[n - 3] = o[n - 3] * r * r + (o[n - 2] % r) * r + (o[n - 1] % r);
          i[n - 2] = o[n - 2] / r;
          i[n - 1] = o[n - 1] / r;
        } else {  // out[c*r*r + a*r + b, h, w] = in[c, h*r+a, w*r+b]
          const int64_t c = o[n - 3] / (r * r), ab = o[n - 3] % (r * r);
          i[n - 3] = c;
          i[n - 2] = o[n - 2] * r + ab / r;
          i[n - 1] = o[n - 1] * r + ab % r;
        }
        return std::optional<Index>(i);
      });
    }
    case OpKind::kIndexSelect: {
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      const Values idx = Read(*in[1]);
      Dims out(x.begin(), x.begin() + ax);
      out.insert(out.end(), idx.dims.begin(), idx.dims.end());
      out.insert(out.end(), x.begin() + ax + 1, x.end());
      const size_t ir = idx.dims.size();
      for (size_t k = 0; k < idx.v.size(); ++k) {
        const int64_t i = ReadIndex(idx, k, x[ax]);
        if (i < 0 || i >= x[ax]) return MaybeOutputs(RefError(node, "index out of range"));
      }
      return Gathered(*in[0], out, [&](const Index& o) {
        Index i(o.begin(), o.begin() + ax);
        const Index k(o.begin() + ax, o.begin() + ax + ir);
        i.push_back(ReadIndex(idx, OffsetOf(k, idx.dims), x[ax]));
        i.insert(i.end(), o.begin() + ax + ir, o.end());
        return std::optional<Index>(i);
      });
    }
    case OpKind::kRepeatInterleave: {
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      const int64_t r = a.GetInt("repeats", 1);
      Dims out = x;
      out[ax] *= r;
      return Gathered(*in[0], out, [&](const Index& o) {
        Index i = o;
        i[ax] = o[ax] / r;  // output position k * r + j reads element k
        return std::optional<Index>(i);
      });
    }
    case OpKind::kIndexPut: {
      // self[indices] = values (+= with accumulate). The offsets in self that
      // self[indices] names, in order: x[indices] of a tensor holding each
      // element's own offset (kIndex's reference), or, for one boolean mask,
      // the masked positions between the dims before and after it.
      const Tensor& x = *in[0];
      const Dims& xd = x.dims();
      const Values vals = Read(*in[1]);
      std::vector<double> out = Read(x).v;
      std::vector<int64_t> targets;
      Dims r;
      size_t mask_at = 0;
      for (size_t k = 2; k < in.size(); ++k) {
        if (in[k] != nullptr && (in[k]->dtype() == DType::kBool || in[k]->dtype() == DType::kUInt8)) mask_at = k;
      }
      if (mask_at != 0) {
        const int64_t d = static_cast<int64_t>(mask_at) - 2;
        const Values mask = Read(*in[mask_at]);
        const int64_t k = static_cast<int64_t>(mask.dims.size());
        int64_t lead = 1, rest = 1;
        for (int64_t i = 0; i < d; ++i) lead *= xd[i];
        for (size_t i = d + k; i < xd.size(); ++i) rest *= xd[i];
        const int64_t span = static_cast<int64_t>(mask.v.size());
        std::vector<int64_t> chosen;
        for (int64_t m = 0; m < span; ++m) {
          if (mask.v[m] != 0) chosen.push_back(m);
        }
        r.assign(xd.begin(), xd.begin() + d);
        r.push_back(static_cast<int64_t>(chosen.size()));
        r.insert(r.end(), xd.begin() + d + k, xd.end());
        for (int64_t l = 0; l < lead; ++l) {
          for (int64_t m : chosen) {
            for (int64_t j = 0; j < rest; ++j) targets.push_back((l * span + m) * rest + j);
          }
        }
      } else {
        std::vector<double> offsets(out.size());
        for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<double>(i);
        const Tensor iota = Write(DType::kF64, xd, offsets);
        ir::Node index_node = node;
        index_node.kind = OpKind::kIndex;
        std::vector<const Tensor*> index_in = {&iota};
        index_in.insert(index_in.end(), in.begin() + 2, in.end());
        MaybeOutputs named = ShapeReference(index_node, index_in);
        if (!named->ok()) return named;
        const Values t = Read((**named)[0]);
        r = t.dims;
        for (double v : t.v) targets.push_back(static_cast<int64_t>(v));
      }
      // values broadcast to r, right-aligned.
      if (vals.dims.size() > r.size()) return MaybeOutputs(RefError(node, "values do not broadcast"));
      size_t j = 0;
      bool bad = false;
      const bool accumulate = a.GetBool("accumulate", false);
      ForEach(r, [&](const Index& o) {
        Index vi(vals.dims.size());
        for (size_t k = 0; k < vi.size(); ++k) {
          const int64_t od = o[r.size() - vi.size() + k];
          if (vals.dims[k] != 1 && vals.dims[k] != r[r.size() - vi.size() + k]) bad = true;
          vi[k] = vals.dims[k] == 1 ? 0 : od;
        }
        const double v = bad ? 0.0 : vals.at(vi);
        double& t = out[targets[j++]];
        t = accumulate ? t + v : v;
      });
      if (bad) return MaybeOutputs(RefError(node, "values do not broadcast"));
      return Same(x, xd, out);
    }
    case OpKind::kScatter: {
      // out = self; then for each index position p, in row-major order:
      // out[p with p[axis] = index[p]] = src[p] (or src's one value), reduced.
      const Values self = Read(*in[0]);
      const Values idx = Read(*in[1]);
      const Values src = Read(*in[2]);
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      const std::string reduce = a.GetString("reduce", "none");
      const bool include_self = a.GetBool("include_self", true);
      std::vector<double> out = self.v;
      std::vector<int64_t> count(out.size(), include_self ? 1 : 0);
      bool bad = false;
      ForEach(idx.dims, [&](const Index& p) {
        const int64_t j = static_cast<int64_t>(idx.at(p));
        if (j < 0 || j >= (x.empty() ? 1 : x[ax])) {
          bad = true;
          return;
        }
        Index o = p;
        if (!x.empty()) o[ax] = j;
        const int64_t k = x.empty() ? 0 : OffsetOf(o, x);
        const double v = src.dims.empty() ? src.v[0] : src.at(p);
        double& t = out[k];
        if (count[k] == 0 || reduce == "none") {
          t = v;
        } else if (reduce == "sum" || reduce == "mean") {
          t += v;
        } else if (reduce == "prod") {
          t *= v;
        } else if (reduce == "amax") {
          t = std::isnan(t) || std::isnan(v) ? std::nan("") : std::max(t, v);
        } else {
          t = std::isnan(t) || std::isnan(v) ? std::nan("") : std::min(t, v);
        }
        ++count[k];
      });
      if (bad) return MaybeOutputs(RefError(node, "index out of range"));
      if (reduce == "mean") {
        for (size_t k = 0; k < out.size(); ++k) {
          if (count[k] > 1) out[k] /= static_cast<double>(count[k]);
        }
      }
      return Same(*in[0], x, out);
    }
    case OpKind::kGather: {
      const Dims& x = in[0]->dims();
      const int64_t ax = Axis(a.GetInt("axis", 0), x.size());
      const Values idx = Read(*in[1]);
      for (size_t k = 0; k < idx.v.size(); ++k) {
        const int64_t i = ReadIndex(idx, k, x[ax]);
        if (i < 0 || i >= x[ax]) return MaybeOutputs(RefError(node, "index out of range"));
      }
      return Gathered(*in[0], idx.dims, [&](const Index& o) {
        Index i = o;
        i[ax] = ReadIndex(idx, OffsetOf(o, idx.dims), x[ax]);
        return std::optional<Index>(i);
      });
    }
    case OpKind::kNonZero: {
      // Every element's multi-index, in row-major order, where it is not 0.
      const Values x = Read(*in[0]);
      const int64_t rank = static_cast<int64_t>(x.dims.size());
      std::vector<double> out;
      int64_t n = 0;
      for (size_t e = 0; e < x.v.size(); ++e) {
        if (x.v[e] == 0.0) continue;
        ++n;
        int64_t rest = static_cast<int64_t>(e);
        std::vector<double> index(rank);
        for (int64_t d = rank - 1; d >= 0; --d) {
          index[d] = static_cast<double>(rest % x.dims[d]);
          rest /= x.dims[d];
        }
        out.insert(out.end(), index.begin(), index.end());
      }
      return MaybeOutputs(Outputs{Write(DType::kInt64, {n, rank}, out)});
    }
    case OpKind::kIndexMask: {
      // x[(slice,) * axis + (mask,)]: per leading index, the mask's true
      // positions in row-major order, each with its trailing elements.
      const Values x = Read(*in[0]);
      const Values mask = Read(*in[1]);
      const int64_t axis = a.GetInt("axis", 0);
      const int64_t r = static_cast<int64_t>(mask.dims.size());
      if (axis + r > static_cast<int64_t>(x.dims.size())) {
        return MaybeOutputs(RefError(node, "too many indices"));
      }
      for (int64_t d = 0; d < r; ++d) {
        if (mask.dims[d] != x.dims[axis + d]) return MaybeOutputs(RefError(node, "mask shape"));
      }
      int64_t outer = 1, inner = 1, n = 0;
      for (int64_t d = 0; d < axis; ++d) outer *= x.dims[d];
      for (size_t d = axis + r; d < x.dims.size(); ++d) inner *= x.dims[d];
      for (double m : mask.v) n += m != 0.0;
      std::vector<double> out;
      for (int64_t o = 0; o < outer; ++o) {
        for (size_t i = 0; i < mask.v.size(); ++i) {
          if (mask.v[i] == 0.0) continue;
          for (int64_t e = 0; e < inner; ++e) {
            out.push_back(x.v[(o * static_cast<int64_t>(mask.v.size()) + i) * inner + e]);
          }
        }
      }
      Dims dims(x.dims.begin(), x.dims.begin() + axis);
      dims.push_back(n);
      dims.insert(dims.end(), x.dims.begin() + axis + r, x.dims.end());
      return MaybeOutputs(Outputs{Write(in[0]->dtype(), dims, out)});
    }
    case OpKind::kIndex: {
      // numpy advanced indexing, spelled out: broadcast shape B of the index
      // tensors, placed where the indexed dims were when they are adjacent.
      const Dims& x = in[0]->dims();
      std::vector<int64_t> indexed;
      std::vector<Values> idx;
      for (size_t d = 1; d < in.size(); ++d) {
        if (in[d] == nullptr) continue;
        indexed.push_back(static_cast<int64_t>(d) - 1);
        idx.push_back(Read(*in[d]));
      }
      size_t br = 0;
      for (const Values& v : idx) br = std::max(br, v.dims.size());
      Dims b(br, 1);
      for (const Values& v : idx) {
        for (size_t k = 0; k < v.dims.size(); ++k) {
          int64_t& bd = b[br - v.dims.size() + k];
          if (v.dims[k] != 1) bd = v.dims[k];
        }
      }
      bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
      std::vector<int64_t> rest;
      for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
        if (std::find(indexed.begin(), indexed.end(), d) == indexed.end()) rest.push_back(d);
      }
      const int64_t b_at = adjacent ? indexed.front() : 0;  // rest dims before B in the output
      Dims out;
      for (int64_t k = 0; k < b_at; ++k) out.push_back(x[rest[k]]);
      out.insert(out.end(), b.begin(), b.end());
      for (size_t k = b_at; k < rest.size(); ++k) out.push_back(x[rest[k]]);
      bool bad = false;
      Outputs r = Gathered(*in[0], out, [&](const Index& o) {
        Index i(x.size());
        for (int64_t k = 0; k < b_at; ++k) i[rest[k]] = o[k];
        const Index bi(o.begin() + b_at, o.begin() + b_at + br);
        for (size_t k = b_at; k < rest.size(); ++k) i[rest[k]] = o[br + k];
        for (size_t j = 0; j < indexed.size(); ++j) {
          Index ti(idx[j].dims.size());
          for (size_t k = 0; k < ti.size(); ++k) {
            ti[k] = idx[j].dims[k] == 1 ? 0 : bi[br - ti.size() + k];
          }
          const int64_t n = x[indexed[j]];
          const int64_t v = ReadIndex(idx[j], OffsetOf(ti, idx[j].dims), n);
          if (v < 0 || v >= n) bad = true;
          i[indexed[j]] = std::clamp<int64_t>(v, 0, n - 1);
        }
        return std::optional<Index>(i);
      });
      if (bad) return MaybeOutputs(RefError(node, "index out of range"));
      return r;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace kiln::kernels::reference
