// Reference reductions, scans and sorts: the elements of each output's
// reduction set gathered into a list, then reduced by the definition.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/kernels/reference/ref_util.h"

namespace kiln::kernels::reference {
namespace {

using ir::OpKind;

double Reduce(const ir::Node& node, const std::vector<double>& v) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (node.kind) {
    case OpKind::kSum: return std::accumulate(v.begin(), v.end(), 0.0);
    case OpKind::kProd: return std::accumulate(v.begin(), v.end(), 1.0, std::multiplies<>());
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kArgMax:
    case OpKind::kArgMin: {
      const bool max = node.kind == OpKind::kReduceMax || node.kind == OpKind::kArgMax;
      size_t at = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        if (std::isnan(v[i])) {
          at = i;
          break;
        }
        if (max ? v[i] > v[at] : v[i] < v[at]) at = i;
      }
      return node.kind == OpKind::kArgMax || node.kind == OpKind::kArgMin ? at : v[at];
    }
    case OpKind::kVar:
    case OpKind::kStd: {
      const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
      double sq = 0;
      for (double x : v) sq += (x - mean) * (x - mean);
      const double var = sq / std::max(0.0, v.size() - node.attrs.GetFloat("correction", 1));
      return node.kind == OpKind::kStd ? std::sqrt(var) : var;
    }
    case OpKind::kNorm: {
      const double p = node.attrs.GetFloat("p", 2);
      if (std::isinf(p)) {
        double m = p > 0 ? 0 : inf;
        for (double x : v) m = p > 0 ? std::max(m, std::abs(x)) : std::min(m, std::abs(x));
        return m;
      }
      double s = 0;
      for (double x : v) s += p == 0 ? (x != 0) : std::pow(std::abs(x), p);
      return p == 0 ? s : std::pow(s, 1 / p);
    }
    case OpKind::kLogSumExp: {
      double s = 0;
      for (double x : v) s += std::exp(x);
      return std::log(s);
    }
    case OpKind::kReduceAll:
      return std::all_of(v.begin(), v.end(), [](double x) { return x != 0; });
    case OpKind::kReduceAny:
      return std::any_of(v.begin(), v.end(), [](double x) { return x != 0; });
    default:
      return 0;
  }
}

DType ReduceDType(OpKind op, DType in) {
  switch (op) {
    // PyTorch 1.13: sums and products of integers and bools are INT64,
    // all/any are BOOL except of UINT8, which stays UINT8.
    case OpKind::kSum:
    case OpKind::kProd:
      return IsIntegral(in) || in == DType::kBool ? DType::kInt64 : in;
    case OpKind::kArgMax:
    case OpKind::kArgMin:
      return DType::kInt64;
    case OpKind::kReduceAll:
    case OpKind::kReduceAny:
      return in == DType::kUInt8 ? DType::kUInt8 : DType::kBool;
    default:
      return in;
  }
}

}  // namespace

MaybeOutputs ReduceReference(const ir::Node& node, const std::vector<const Tensor*>& in) {
  const ir::Attributes& a = node.attrs;
  switch (node.kind) {
    case OpKind::kSum:
    case OpKind::kProd:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kArgMax:
    case OpKind::kArgMin:
    case OpKind::kVar:
    case OpKind::kStd:
    case OpKind::kNorm:
    case OpKind::kLogSumExp:
    case OpKind::kReduceAll:
    case OpKind::kReduceAny: {
      const Values x = Read(*in[0]);
      const int64_t r = x.dims.size();
      std::vector<bool> red(r, false);
      std::vector<int64_t> axes;
      if (node.kind == OpKind::kArgMax || node.kind == OpKind::kArgMin) {
        if (a.Has("axis")) axes = {a.GetInt("axis")};
      } else {
        axes = a.GetInts("axes");
      }
      if (axes.empty()) std::fill(red.begin(), red.end(), true);
      for (int64_t ax : axes) {
        if (r > 0) red[Axis(ax, r)] = true;
      }
      const bool keepdim = a.GetBool("keepdim", false);
      Dims out, kept;
      for (int64_t i = 0; i < r; ++i) {
        if (!red[i]) kept.push_back(x.dims[i]);
        if (!red[i] || keepdim) out.push_back(red[i] ? 1 : x.dims[i]);
      }
      std::vector<std::vector<double>> groups(NumElements(kept));
      ForEach(x.dims, [&](const Index& idx) {
        Index k;
        for (int64_t i = 0; i < r; ++i) {
          if (!red[i]) k.push_back(idx[i]);
        }
        groups[OffsetOf(k, kept)].push_back(x.at(idx));
      });
      std::vector<double> v;
      for (const auto& g : groups) v.push_back(Reduce(node, g));
      return Outputs{Write(ReduceDType(node.kind, in[0]->dtype()), out, v)};
    }
    case OpKind::kCumSum:
    case OpKind::kCumProd: {
      Values x = Read(*in[0]);
      const Dims dims = x.dims;
      if (x.dims.empty()) x.dims = {1};  // a 0-D input scans as one element
      const int64_t ax = Axis(a.GetInt("axis", 0), x.dims.size());
      std::vector<double> out(x.v.size());
      const bool sum = node.kind == OpKind::kCumSum;
      ForEach(x.dims, [&](const Index& idx) {
        double acc = sum ? 0 : 1;
        Index j = idx;
        for (j[ax] = 0; j[ax] <= idx[ax]; ++j[ax]) acc = sum ? acc + x.at(j) : acc * x.at(j);
        out[OffsetOf(idx, x.dims)] = acc;
      });
      const DType t = in[0]->dtype();
      return Outputs{Write(IsIntegral(t) || t == DType::kBool ? DType::kInt64 : t, dims, out)};
    }
    case OpKind::kTopK:
    case OpKind::kSort: {
      const Values x = Read(*in[0]);
      const int64_t ax = Axis(a.GetInt("axis", -1), x.dims.size());
      const bool topk = node.kind == OpKind::kTopK;
      const bool desc = topk ? a.GetBool("largest", true) : a.GetBool("descending", false);
      const int64_t k = topk ? a.GetInt("k", 1) : x.dims[ax];
      Dims out = x.dims;
      out[ax] = k;
      std::vector<double> vals(NumElements(out)), idxs(NumElements(out));
      Dims lines = x.dims;
      lines[ax] = 1;
      ForEach(lines, [&](const Index& base) {
        std::vector<std::pair<double, int64_t>> row;
        Index j = base;
        for (j[ax] = 0; j[ax] < x.dims[ax]; ++j[ax]) row.push_back({x.at(j), j[ax]});
        std::stable_sort(row.begin(), row.end(), [&](const auto& p, const auto& q) {
          return desc ? p.first > q.first : p.first < q.first;
        });
        Index o = base;
        for (o[ax] = 0; o[ax] < k; ++o[ax]) {
          vals[OffsetOf(o, out)] = row[o[ax]].first;
          idxs[OffsetOf(o, out)] = row[o[ax]].second;
        }
      });
      return Outputs{Write(in[0]->dtype(), out, vals), Write(DType::kInt64, out, idxs)};
    }
    default:
      return std::nullopt;
  }
}

}  // namespace kiln::kernels::reference
