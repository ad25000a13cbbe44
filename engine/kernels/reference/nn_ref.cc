// Reference neural-network ops: N-d convolution and transposed convolution,
// N-d pooling, GroupNorm, Resize, Einsum, multi-head attention and the
// recurrent layers, each a direct loop over its definition in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "engine/kernels/reference/ref_util.h"

namespace kiln::kernels::reference {
namespace {

using ir::OpKind;

std::vector<int64_t> PerDim(const ir::Node& node, const char* name, size_t n, int64_t def) {
  std::vector<int64_t> v = node.attrs.GetInts(name);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  return v;
}

// x as [batch, channels, spatial...] with `s` spatial dims (unbatched: batch 1).
struct Layout {
  int64_t n = 1, c = 1;
  Dims sp;
  bool batched = true;
};
Layout LayoutOf(const Dims& x, size_t s) {
  Layout l;
  l.batched = x.size() == s + 2;
  l.n = l.batched ? x[0] : 1;
  l.c = x[x.size() - s - 1];
  l.sp.assign(x.end() - s, x.end());
  return l;
}
Dims Assemble(const Layout& l, int64_t c, const Dims& sp) {
  Dims d;
  if (l.batched) d.push_back(l.n);
  d.push_back(c);
  d.insert(d.end(), sp.begin(), sp.end());
  return d;
}

Outputs Conv(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]), w = Read(*in[1]);
  const size_t s = w.dims.size() - 2;
  const Layout l = LayoutOf(x.dims, s);
  const auto stride = PerDim(node, "stride", s, 1), pad = PerDim(node, "padding", s, 0),
             dil = PerDim(node, "dilation", s, 1);
  const int64_t g = node.attrs.GetInt("groups", 1), o = w.dims[0], cg = l.c / g, og = o / g;
  Dims osp(s);
  for (size_t i = 0; i < s; ++i) {
    osp[i] = (l.sp[i] + 2 * pad[i] - dil[i] * (w.dims[2 + i] - 1) - 1) / stride[i] + 1;
  }
  const Dims ksp(w.dims.begin() + 2, w.dims.end());
  const Dims xfull = {l.n, l.c, 1}, out_full = {l.n, o};
  Dims out_dims = {l.n, o};
  out_dims.insert(out_dims.end(), osp.begin(), osp.end());
  Dims in_dims = {l.n, l.c};
  in_dims.insert(in_dims.end(), l.sp.begin(), l.sp.end());
  std::vector<double> out;
  ForEach(out_dims, [&](const Index& oi) {
    const int64_t n = oi[0], co = oi[1], grp = co / og;
    double acc = in.size() > 2 && in[2] != nullptr ? Read(*in[2]).v[co] : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      ForEach(ksp, [&](const Index& k) {
        Index xi = {n, grp * cg + ci};
        for (size_t i = 0; i < s; ++i) {
          const int64_t p = oi[2 + i] * stride[i] - pad[i] + k[i] * dil[i];
          if (p < 0 || p >= l.sp[i]) return;
          xi.push_back(p);
        }
        Index wi = {co, ci};
        wi.insert(wi.end(), k.begin(), k.end());
        acc += x.v[OffsetOf(xi, in_dims)] * w.at(wi);
      });
    }
    out.push_back(acc);
  });
  return Outputs{Write(DType::kF32, Assemble(l, o, osp), out)};
}

Outputs ConvTranspose(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]), w = Read(*in[1]);
  const size_t s = w.dims.size() - 2;
  const Layout l = LayoutOf(x.dims, s);
  const auto stride = PerDim(node, "stride", s, 1), pad = PerDim(node, "padding", s, 0),
             dil = PerDim(node, "dilation", s, 1), opad = PerDim(node, "output_padding", s, 0);
  const int64_t g = node.attrs.GetInt("groups", 1), cg = l.c / g, og = w.dims[1], o = og * g;
  Dims osp(s);
  for (size_t i = 0; i < s; ++i) {
    osp[i] = (l.sp[i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w.dims[2 + i] - 1) + opad[i] + 1;
  }
  Dims out_dims = {l.n, o};
  out_dims.insert(out_dims.end(), osp.begin(), osp.end());
  std::vector<double> out(NumElements(out_dims), 0.0);
  if (in.size() > 2 && in[2] != nullptr) {
    const Values b = Read(*in[2]);
    ForEach(out_dims, [&](const Index& oi) { out[OffsetOf(oi, out_dims)] = b.v[oi[1]]; });
  }
  const Dims ksp(w.dims.begin() + 2, w.dims.end());
  Dims in_dims = {l.n, l.c};
  in_dims.insert(in_dims.end(), l.sp.begin(), l.sp.end());
  ForEach(in_dims, [&](const Index& xi) {
    const double xv = x.v[OffsetOf(xi, in_dims)];
    const int64_t grp = xi[1] / cg;
    for (int64_t j = 0; j < og; ++j) {
      ForEach(ksp, [&](const Index& k) {
        Index oi = {xi[0], grp * og + j};
        for (size_t i = 0; i < s; ++i) {
          const int64_t p = xi[2 + i] * stride[i] - pad[i] + k[i] * dil[i];
          if (p < 0 || p >= osp[i]) return;
          oi.push_back(p);
        }
        Index wi = {xi[1], j};
        wi.insert(wi.end(), k.begin(), k.end());
        out[OffsetOf(oi, out_dims)] += xv * w.at(wi);
      });
    }
  });
  return Outputs{Write(DType::kF32, Assemble(l, o, osp), out)};
}

int64_t PoolOut(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

Outputs Pool(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]);
  const std::vector<int64_t> kernel = node.attrs.GetInts("kernel");
  const size_t s = kernel.size();
  const Layout l = LayoutOf(x.dims, s);
  const bool max = node.kind != OpKind::kAvgPool;
  std::vector<int64_t> stride = node.attrs.GetInts("stride");
  if (stride.empty()) stride = kernel;
  if (stride.size() == 1) stride.assign(s, stride[0]);
  const auto pad = PerDim(node, "padding", s, 0);
  const auto dil = max ? PerDim(node, "dilation", s, 1) : std::vector<int64_t>(s, 1);
  const bool ceil_mode = node.attrs.GetBool("ceil_mode", false);
  const bool include_pad = node.attrs.GetBool("count_include_pad", true);
  const int64_t divisor = node.attrs.GetInt("divisor_override", 0);
  Dims osp(s);
  for (size_t i = 0; i < s; ++i) osp[i] = PoolOut(l.sp[i], kernel[i], pad[i], stride[i], dil[i], ceil_mode);
  const int64_t planes = l.n * l.c;
  Dims plane_out = {planes};
  plane_out.insert(plane_out.end(), osp.begin(), osp.end());
  Dims plane_in = {planes};
  plane_in.insert(plane_in.end(), l.sp.begin(), l.sp.end());
  std::vector<double> out, idx;
  ForEach(plane_out, [&](const Index& oi) {
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    int64_t at = -1, count = 0, padded = 1;
    for (size_t i = 0; i < s; ++i) {
      const int64_t lo = oi[1 + i] * stride[i] - pad[i];
      padded *= std::min(lo + kernel[i], l.sp[i] + pad[i]) - lo;
    }
    ForEach(Dims(kernel.begin(), kernel.end()), [&](const Index& k) {
      Index xi = {oi[0]};
      for (size_t i = 0; i < s; ++i) {
        const int64_t p = oi[1 + i] * stride[i] - pad[i] + k[i] * dil[i];
        if (p < 0 || p >= l.sp[i]) return;
        xi.push_back(p);
      }
      const double v = x.v[OffsetOf(xi, plane_in)];
      const int64_t flat = OffsetOf(Index(xi.begin() + 1, xi.end()), l.sp);
      if (at < 0 || v > best || std::isnan(v)) {
        if (!(at >= 0 && std::isnan(best))) {
          best = v;
          at = flat;
        }
      }
      sum += v;
      ++count;
    });
    if (max) {
      out.push_back(best);
      idx.push_back(at);
    } else {
      const int64_t div = divisor ? divisor : include_pad ? padded : count;
      out.push_back(count == 0 ? 0.0 : static_cast<float>(sum) / static_cast<float>(div));
    }
  });
  Outputs r = {Write(DType::kF32, Assemble(l, l.c, osp), out)};
  if (node.kind == OpKind::kMaxPoolWithIndices) {
    r.push_back(Write(DType::kInt64, Assemble(l, l.c, osp), idx));
  }
  return r;
}

Outputs AdaptivePool(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]);
  std::vector<int64_t> size = node.attrs.GetInts("output_size");
  const size_t s = size.size();
  const Layout l = LayoutOf(x.dims, s);
  for (size_t i = 0; i < s; ++i) {
    if (size[i] == -1) size[i] = l.sp[i];
  }
  const bool max = node.kind == OpKind::kAdaptiveMaxPool;
  Dims plane_out = {l.n * l.c};
  plane_out.insert(plane_out.end(), size.begin(), size.end());
  Dims plane_in = {l.n * l.c};
  plane_in.insert(plane_in.end(), l.sp.begin(), l.sp.end());
  std::vector<double> out, idx;
  ForEach(plane_out, [&](const Index& oi) {
    Dims win(s);
    Index lo(s);
    for (size_t i = 0; i < s; ++i) {
      lo[i] = oi[1 + i] * l.sp[i] / size[i];
      win[i] = ((oi[1 + i] + 1) * l.sp[i] + size[i] - 1) / size[i] - lo[i];
    }
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    int64_t at = -1;
    ForEach(win, [&](const Index& k) {
      Index xi = {oi[0]}, sp(s);
      for (size_t i = 0; i < s; ++i) {
        sp[i] = lo[i] + k[i];
        xi.push_back(sp[i]);
      }
      const double v = x.v[OffsetOf(xi, plane_in)];
      if (at < 0 || v > best) {
        best = v;
        at = OffsetOf(sp, l.sp);
      }
      sum += v;
    });
    out.push_back(max ? best : sum / NumElements(win));
    idx.push_back(at);
  });
  Outputs r = {Write(DType::kF32, Assemble(l, l.c, size), out)};
  if (max) r.push_back(Write(DType::kInt64, Assemble(l, l.c, size), idx));
  return r;
}

Outputs GroupNorm(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]);
  const int64_t n = x.dims[0], c = x.dims[1];
  const int64_t g = node.attrs.GetInt("groups", 1) == -1 ? c : node.attrs.GetInt("groups", 1);
  const int64_t inner = NumElements(Dims(x.dims.begin() + 2, x.dims.end()));
  const int64_t block = c / g * inner;
  const double eps = node.attrs.GetFloat("eps", 1e-5);
  std::vector<double> out(x.v.size());
  for (int64_t b = 0; b < n * g; ++b) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < block; ++i) mean += x.v[b * block + i];
    mean /= block;
    for (int64_t i = 0; i < block; ++i) var += std::pow(x.v[b * block + i] - mean, 2);
    var /= block;
    for (int64_t i = 0; i < block; ++i) {
      const int64_t ch = (b % g) * (c / g) + i / inner;
      double y = (x.v[b * block + i] - mean) / std::sqrt(var + eps);
      if (in.size() > 1 && in[1] != nullptr) y *= Read(*in[1]).v[ch];
      if (in.size() > 2 && in[2] != nullptr) y += Read(*in[2]).v[ch];
      out[b * block + i] = y;
    }
  }
  return Outputs{Write(DType::kF32, x.dims, out)};
}

// Source taps and weights of output index `o` along one dim (PyTorch's UpSample.h rules).
std::vector<std::pair<int64_t, double>> Taps(const std::string& mode, bool align, int64_t in,
                                             int64_t out, double scale, int64_t o) {
  auto coord_scale = [&]() -> float {
    return scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / out;
  };
  if (mode == "nearest" || mode == "nearest_exact") {
    int64_t src;
    if (mode == "nearest" && out == in) {
      src = o;
    } else if (mode == "nearest" && out == 2 * in) {
      src = o / 2;
    } else {
      const float off = mode == "nearest" ? 0.0f : 0.5f;
      src = std::min<int64_t>(static_cast<int64_t>(std::floor((o + off) * coord_scale())), in - 1);
    }
    return {{src, 1.0}};
  }
  const bool cubic = mode == "cubic";
  const float sc = align ? (out > 1 ? static_cast<float>(in - 1) / (out - 1) : 0.0f) : coord_scale();
  float real = align ? sc * o : sc * (o + 0.5f) - 0.5f;
  if (!align && !cubic && real < 0) real = 0;
  if (!cubic) {
    if (out == in) return {{o, 1.0}};
    const int64_t i0 = static_cast<int64_t>(real);
    const int64_t i1 = std::min(i0 + 1, in - 1);
    const double t = std::clamp<double>(real - i0, 0, 1);
    return {{i0, 1 - t}, {i1, t}};
  }
  const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(real)), in - 1);
  const double t = std::clamp<double>(real - i0, 0, 1), A = -0.75;
  auto k1 = [&](double v) { return ((A + 2) * v - (A + 3)) * v * v + 1; };
  auto k2 = [&](double v) { return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A; };
  const double w[4] = {k2(t + 1), k1(t), k1(1 - t), k2(2 - t)};
  std::vector<std::pair<int64_t, double>> taps;
  for (int k = 0; k < 4; ++k) taps.push_back({std::clamp<int64_t>(i0 - 1 + k, 0, in - 1), w[k]});
  return taps;
}

Outputs Resize(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values x = Read(*in[0]);
  std::vector<int64_t> sizes = node.attrs.GetInts("sizes");
  const std::vector<double> scales = node.attrs.GetFloats("scales");
  if (in.size() > 1 && in[1] != nullptr) {
    sizes.clear();
    for (double v : Read(*in[1]).v) sizes.push_back(static_cast<int64_t>(v));
  }
  const size_t s = sizes.empty() ? scales.size() : sizes.size();
  const std::string mode = node.attrs.GetString("mode", "nearest");
  const bool align = node.attrs.GetBool("align_corners", false);
  const size_t lead = x.dims.size() - s;
  Dims out = x.dims;
  for (size_t i = 0; i < s; ++i) {
    out[lead + i] = sizes.empty() ? static_cast<int64_t>(std::floor(x.dims[lead + i] * scales[i]))
                                  : sizes[i];
  }
  std::vector<double> v;
  ForEach(out, [&](const Index& o) {
    std::vector<std::vector<std::pair<int64_t, double>>> taps;
    for (size_t i = 0; i < s; ++i) {
      taps.push_back(Taps(mode, align, x.dims[lead + i], out[lead + i],
                          scales.empty() ? 0.0 : scales[i], o[lead + i]));
    }
    Dims counts;
    for (const auto& t : taps) counts.push_back(t.size());
    double acc = 0;
    ForEach(counts, [&](const Index& k) {
      Index xi(o.begin(), o.begin() + lead);
      double w = 1;
      for (size_t i = 0; i < s; ++i) {
        xi.push_back(taps[i][k[i]].first);
        w *= taps[i][k[i]].second;
      }
      acc += w * x.at(xi);
    });
    v.push_back(acc);
  });
  return Outputs{Write(DType::kF32, out, v)};
}

Outputs Einsum(const ir::Node& node, const std::vector<const Tensor*>& in) {
  std::string eq = node.attrs.GetString("equation");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), cur;
  for (char ch : lhs + ",") {
    if (ch == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  // Ellipsis: private digit labels aligned from the right.
  size_t er = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (terms[i].find("...") != std::string::npos) {
      er = std::max(er, in[i]->dims().size() - (terms[i].size() - 3));
    }
  }
  auto expand = [&](const std::string& t, size_t rank) {
    const size_t dots = t.find("...");
    if (dots == std::string::npos) return t;
    std::string e;
    const size_t cov = rank - (t.size() - 3);
    for (size_t d = er - cov; d < er; ++d) e.push_back(static_cast<char>('0' + d));
    return t.substr(0, dots) + e + t.substr(dots + 3);
  };
  std::map<char, int64_t> size;
  std::map<char, int> count;
  std::vector<Values> vals;
  for (size_t i = 0; i < terms.size(); ++i) {
    terms[i] = expand(terms[i], in[i]->dims().size());
    vals.push_back(Read(*in[i]));
    for (size_t d = 0; d < terms[i].size(); ++d) {
      size[terms[i][d]] = in[i]->dims()[d];
      ++count[terms[i][d]];
    }
  }
  std::string out_labels;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    out_labels = expand(rhs, rhs.find("...") == std::string::npos ? rhs.size() : rhs.size() - 3 + er);
  } else {
    for (size_t d = 0; d < er; ++d) out_labels.push_back(static_cast<char>('0' + d));
    for (const auto& [c, n] : count) {
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) out_labels.push_back(c);
    }
  }
  std::string all = out_labels;
  for (const auto& [c, n] : size) {
    if (all.find(c) == std::string::npos) all.push_back(c);
  }
  Dims all_dims, out_dims;
  for (char c : all) all_dims.push_back(size[c]);
  for (char c : out_labels) out_dims.push_back(size[c]);
  std::vector<double> out(NumElements(out_dims), 0.0);
  ForEach(all_dims, [&](const Index& idx) {
    double prod = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      Index ii;
      for (char c : terms[i]) ii.push_back(idx[all.find(c)]);
      prod *= vals[i].at(ii);
    }
    out[OffsetOf(Index(idx.begin(), idx.begin() + out_labels.size()), out_dims)] += prod;
  });
  return Outputs{Write(DType::kF32, out_dims, out)};
}

Outputs Attention(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const Values q = Read(*in[0]), k = Read(*in[1]), v = Read(*in[2]), w = Read(*in[3]),
               wo = Read(*in[4]);
  auto opt = [&](size_t i) { return in.size() > i && in[i] != nullptr; };
  const Values bi = opt(5) ? Read(*in[5]) : Values{}, bo = opt(6) ? Read(*in[6]) : Values{};
  const Values mask = opt(7) ? Read(*in[7]) : Values{};
  const int64_t B = q.dims[0], L = q.dims[1], S = k.dims[1], E = q.dims[2];
  const int64_t H = node.attrs.GetInt("num_heads", 1), D = E / H;
  const bool key_padding = node.attrs.GetInt("mask_type", 0) == 1;
  auto proj = [&](const Values& x, int64_t rows, int64_t part) {
    std::vector<double> y(rows * E);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < E; ++j) {
        double acc = opt(5) ? bi.v[part * E + j] : 0;
        for (int64_t t = 0; t < E; ++t) acc += x.v[r * E + t] * w.v[(part * E + j) * E + t];
        y[r * E + j] = acc;
      }
    }
    return y;
  };
  const auto Q = proj(q, B * L, 0), K = proj(k, B * S, 1), V = proj(v, B * S, 2);
  std::vector<double> concat(B * L * E, 0.0);
  const bool need = node.attrs.GetBool("need_weights", false);
  const bool avg = node.attrs.GetBool("average_weights", true);
  Dims wdims = need ? (avg ? Dims{B, L, S} : Dims{B, H, L, S}) : Dims{0};
  std::vector<double> weights(NumElements(wdims), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc(S);
        std::vector<bool> masked(S, false);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += Q[(b * L + i) * E + h * D + d] * K[(b * S + j) * E + h * D + d];
          sc[j] = acc / std::sqrt(static_cast<double>(D));
          if (opt(7)) {
            const Index full = {b, h, i, j};
            Index mi;
            const Dims md = key_padding ? Dims{B, 1, 1, S} : mask.dims;
            for (size_t t = 0; t < md.size(); ++t) {
              const int64_t fd = full[4 - md.size() + t];
              mi.push_back(md[t] == 1 ? 0 : fd);
            }
            masked[j] = mask.v[OffsetOf(mi, md)] != 0;
          }
          if (!masked[j]) m = std::max(m, sc[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += masked[j] ? 0 : std::exp(sc[j] - m);
        for (int64_t j = 0; j < S; ++j) {
          const double p = masked[j] || sum == 0 ? 0 : std::exp(sc[j] - m) / sum;
          for (int64_t d = 0; d < D; ++d) {
            concat[(b * L + i) * E + h * D + d] += p * V[(b * S + j) * E + h * D + d];
          }
          if (need) weights[avg ? (b * L + i) * S + j : ((b * H + h) * L + i) * S + j] += avg ? p / H : p;
        }
      }
    }
  }
  std::vector<double> out(B * L * E);
  for (int64_t r = 0; r < B * L; ++r) {
    for (int64_t j = 0; j < E; ++j) {
      double acc = opt(6) ? bo.v[j] : 0;
      for (int64_t t = 0; t < E; ++t) acc += concat[r * E + t] * wo.v[j * E + t];
      out[r * E + j] = acc;
    }
  }
  return Outputs{Write(DType::kF32, q.dims, out), Write(DType::kF32, wdims, weights)};
}

Outputs Rnn(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const bool lstm = node.kind == OpKind::kLSTM;
  const std::string cell = lstm ? "lstm" : node.attrs.GetString("cell", "tanh");
  const int64_t G = cell == "lstm" ? 4 : cell == "gru" ? 3 : 1;
  const int64_t layers = node.attrs.GetInt("num_layers", 1);
  const int64_t dirs = node.attrs.GetBool("bidirectional", false) ? 2 : 1;
  const bool bf = node.attrs.GetBool("batch_first", false);
  const bool biases = node.attrs.GetBool("has_biases", true);
  const bool has_state = node.attrs.GetBool("has_state", false);
  const size_t first = 1 + (has_state ? (lstm ? 2 : 1) : 0), per = biases ? 4 : 2;
  const Values x = Read(*in[0]);
  const bool unbatched = x.dims.size() == 2;
  const int64_t T = unbatched ? x.dims[0] : bf ? x.dims[1] : x.dims[0];
  const int64_t B = unbatched ? 1 : bf ? x.dims[0] : x.dims[1];
  const int64_t I = x.dims.back();
  const int64_t H = in[first + 1]->dims()[1];
  auto X = [&](int64_t t, int64_t b, int64_t i) {
    return unbatched ? x.v[t * I + i] : bf ? x.v[(b * T + t) * I + i] : x.v[(t * B + b) * I + i];
  };
  std::vector<double> cur(T * B * I);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < I; ++i) cur[(t * B + b) * I + i] = X(t, b, i);
  int64_t width = I;
  std::vector<double> hn(layers * dirs * B * H), cn(layers * dirs * B * H);
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<double> next(T * B * dirs * H);
    for (int64_t d = 0; d < dirs; ++d) {
      const size_t base = first + per * (l * dirs + d);
      const Values wih = Read(*in[base]), whh = Read(*in[base + 1]);
      const Values bih = biases ? Read(*in[base + 2]) : Values{}, bhh = biases ? Read(*in[base + 3]) : Values{};
      const int64_t s = l * dirs + d;
      std::vector<double> h(B * H, 0.0), c(B * H, 0.0);
      if (has_state) {
        const Values h0 = Read(*in[1]);
        for (int64_t i = 0; i < B * H; ++i) h[i] = h0.v[s * B * H + i];
        if (lstm) {
          const Values c0 = Read(*in[2]);
          for (int64_t i = 0; i < B * H; ++i) c[i] = c0.v[s * B * H + i];
        }
      }
      for (int64_t step = 0; step < T; ++step) {
        const int64_t t = d == 0 ? step : T - 1 - step;
        std::vector<double> nh = h;
        for (int64_t b = 0; b < B; ++b) {
          std::vector<double> gx(G * H), gh(G * H);
          for (int64_t r = 0; r < G * H; ++r) {
            gx[r] = biases ? bih.v[r] : 0;
            gh[r] = biases ? bhh.v[r] : 0;
            for (int64_t i = 0; i < width; ++i) gx[r] += wih.v[r * width + i] * cur[(t * B + b) * width + i];
            for (int64_t i = 0; i < H; ++i) gh[r] += whh.v[r * H + i] * h[b * H + i];
          }
          auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
          for (int64_t j = 0; j < H; ++j) {
            double& hv = nh[b * H + j];
            if (cell == "lstm") {
              const double ig = sig(gx[j] + gh[j]), fg = sig(gx[H + j] + gh[H + j]);
              const double gg = std::tanh(gx[2 * H + j] + gh[2 * H + j]), og = sig(gx[3 * H + j] + gh[3 * H + j]);
              c[b * H + j] = fg * c[b * H + j] + ig * gg;
              hv = og * std::tanh(c[b * H + j]);
            } else if (cell == "gru") {
              const double r = sig(gx[j] + gh[j]), z = sig(gx[H + j] + gh[H + j]);
              const double n = std::tanh(gx[2 * H + j] + r * gh[2 * H + j]);
              hv = (1 - z) * n + z * h[b * H + j];
            } else {
              const double a = gx[j] + gh[j];
              hv = cell == "tanh" ? std::tanh(a) : std::max(a, 0.0);
            }
            next[(t * B + b) * dirs * H + d * H + j] = hv;
          }
        }
        h = nh;
      }
      for (int64_t i = 0; i < B * H; ++i) {
        hn[s * B * H + i] = h[i];
        cn[s * B * H + i] = c[i];
      }
    }
    cur = next;
    width = dirs * H;
  }
  std::vector<double> y(T * B * width);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < width; ++j) {
        const int64_t o = unbatched ? t * width + j : bf ? (b * T + t) * width + j : (t * B + b) * width + j;
        y[o] = cur[(t * B + b) * width + j];
      }
  const Dims out = unbatched ? Dims{T, width} : bf ? Dims{B, T, width} : Dims{T, B, width};
  const Dims sd = unbatched ? Dims{layers * dirs, H} : Dims{layers * dirs, B, H};
  Outputs r = {Write(DType::kF32, out, y), Write(DType::kF32, sd, hn)};
  if (lstm) r.push_back(Write(DType::kF32, sd, cn));
  return r;
}

// Values transposed by the node's attribute `attr` ([dim0, dim1]), if set.
Values Transposed(const Values& x, const ir::Node& node, const char* attr) {
  if (!node.attrs.Has(attr)) return x;
  const std::vector<int64_t> p = node.attrs.GetInts(attr);
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  const int64_t a = Axis(p[0], rank), b = Axis(p[1], rank);
  Values y = x;
  std::swap(y.dims[a], y.dims[b]);
  ForEach(y.dims, [&](const Index& idx) {
    Index src = idx;
    std::swap(src[a], src[b]);
    y.v[OffsetOf(idx, y.dims)] = x.v[OffsetOf(src, x.dims)];
  });
  return y;
}

// ScaledDotProductAttention, straight from its definition: for every output
// row, the scaled scores against every key (plus the mask), a softmax, the
// weighted sum of the values; batch dims broadcast right-aligned.
Outputs ScaledDotProductAttention(const ir::Node& node, const std::vector<const Tensor*>& in) {
  auto opt = [&](size_t i) { return in.size() > i && in[i] != nullptr; };
  const Values q = Transposed(Read(*in[0]), node, "q_perm");
  const Values k = Transposed(Read(*in[1]), node, "k_perm");
  const Values v = Transposed(Read(*in[2]), node, "v_perm");
  Values mask = opt(3) ? Read(*in[3]) : Values{};
  const int64_t L = q.dims[q.dims.size() - 2], D = q.dims.back();
  const int64_t S = k.dims[k.dims.size() - 2], Dv = v.dims.back();
  double scale = node.attrs.Has("scale") ? node.attrs.GetFloat("scale") : 1.0 / std::sqrt(double(D));
  bool divide = false;
  if (opt(4)) {
    scale = Read(*in[4]).v[0];
    divide = node.attrs.GetString("scale_op", "mul") == "div";
  }
  const bool on_query = node.attrs.GetString("scale_on", "scores") == "query";
  const bool keep_mask = opt(3) && in[3]->dtype() == DType::kBool &&
                         node.attrs.GetString("bool_mask") == "keep";
  auto scaled = [&](double x) { return divide ? x / scale : x * scale; };
  if (opt(3)) {
    while (mask.dims.size() < 2) mask.dims.insert(mask.dims.begin(), 1);
  }
  // Broadcast batch dims.
  std::vector<const Values*> all = {&q, &k, &v};
  if (opt(3)) all.push_back(&mask);
  size_t nb = 0;
  for (const Values* x : all) nb = std::max(nb, x->dims.size() - 2);
  Dims batch(nb, 1);
  for (const Values* x : all) {
    const size_t xb = x->dims.size() - 2;
    for (size_t i = 0; i < xb; ++i) batch[nb - xb + i] = std::max(batch[nb - xb + i], x->dims[i]);
  }
  auto at = [&](const Values& x, const Index& b, int64_t r, int64_t c) {
    const size_t xb = x.dims.size() - 2;
    Index idx;
    for (size_t i = 0; i < xb; ++i) idx.push_back(x.dims[i] == 1 ? 0 : b[nb - xb + i]);
    idx.push_back(x.dims[xb] == 1 ? 0 : r);
    idx.push_back(x.dims[xb + 1] == 1 ? 0 : c);
    return x.v[OffsetOf(idx, x.dims)];
  };
  Dims out_dims = batch;
  out_dims.push_back(L);
  out_dims.push_back(Dv);
  std::vector<double> out(NumElements(out_dims), 0.0);
  ForEach(batch, [&](const Index& b) {
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> sc(S);
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        double acc = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double qv = at(q, b, i, d);
          acc += (on_query ? scaled(qv) : qv) * at(k, b, j, d);
        }
        sc[j] = on_query ? acc : scaled(acc);
        if (opt(3)) {
          const double mv = at(mask, b, i, j);
          sc[j] += keep_mask ? (mv != 0 ? 0.0 : -std::numeric_limits<double>::infinity()) : mv;
        }
        m = std::max(m, sc[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += std::exp(sc[j] - m);
      Index o = b;
      o.push_back(i);
      o.push_back(0);
      const int64_t base = OffsetOf(o, out_dims);
      for (int64_t j = 0; j < S; ++j) {
        const double p = std::exp(sc[j] - m) / sum;
        for (int64_t d = 0; d < Dv; ++d) out[base + d] += p * at(v, b, j, d);
      }
    }
  });
  Values result{out_dims, out};
  result = Transposed(result, node, "out_perm");
  return Outputs{Write(DType::kF32, result.dims, result.v)};
}

}  // namespace

MaybeOutputs NnReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  switch (node.kind) {
    case OpKind::kConv: return Conv(node, in);
    case OpKind::kConvTranspose: return ConvTranspose(node, in);
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolWithIndices:
    case OpKind::kAvgPool:
      return Pool(node, in);
    case OpKind::kAdaptiveAvgPool:
    case OpKind::kAdaptiveMaxPool:
      return AdaptivePool(node, in);
    case OpKind::kGroupNorm: return GroupNorm(node, in);
    case OpKind::kResize: return Resize(node, in);
    case OpKind::kEinsum: return Einsum(node, in);
    case OpKind::kMultiHeadAttention: return Attention(node, in);
    case OpKind::kScaledDotProductAttention: return ScaledDotProductAttention(node, in);
    case OpKind::kLSTM:
    case OpKind::kRNN:
      return Rnn(node, in);
    default:
      return std::nullopt;
  }
}

}  // namespace kiln::kernels::reference
