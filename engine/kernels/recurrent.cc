// Recurrent layers in float32 or float64 (one table row each, computed in that
// type), as aten::lstm / aten::gru / aten::rnn_tanh /
// aten::rnn_relu compute them: LSTM (gates i, f, g, o) and RNN with attr cell
// gru (gates r, z, n) or tanh / relu, multi-layer and bidirectional, sequence
// first or batch first.
//
// Inputs: x [T, B, I] ([B, T, I] with batch_first; [T, I] unbatched), then with
// attr has_state the initial h0 (and c0 for LSTM) [layers * dirs, B, H], then
// the weights in PyTorch's flat order: per layer, per direction, w_ih [G*H, in],
// w_hh [G*H, H] and, with has_biases, b_ih and b_hh [G*H]. Outputs: the last
// layer's hidden states [T, B, dirs * H] (in the input's layout) and h_n (and
// c_n) [layers * dirs, B, H].
//
// Per layer and direction, the input contribution of every time step is one
// GEMM ([T*B, in] x w_ih^T, plus b_ih); each step then adds h w_hh^T (+ b_hh)
// with one more GEMM and applies the gate nonlinearities. Layers ping-pong
// between two workspace buffers in [T, B, dirs * H] layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "engine/common/status_macros.h"
#include "engine/kernels/gemm.h"
#include "engine/kernels/kernel.h"
#include "engine/kernels/kernel_util.h"

namespace kiln::kernels {
namespace {

enum class Cell { kLstm, kGru, kTanh, kRelu };

struct RnnPlan {
  Cell cell = Cell::kLstm;
  int64_t t = 1, b = 1, in = 1, h = 1, layers = 1, dirs = 1, gates = 4;
  bool batch_first = false, unbatched = false, has_biases = true, has_state = false;
  size_t first_weight = 1;  // input index of layer 0's w_ih
  // Workspace layout (elements of the input dtype).
  size_t x_off = 0, buf_off[2] = {0, 0}, xg_off = 0, hg_off = 0, h_off = 0, c_off = 0;
};

int64_t Align(int64_t floats) { return (floats + 15) / 16 * 16; }

absl::Status PrepareRnn(PrepareContext& ctx) {
  const ir::Node& node = ctx.node;
  const bool lstm = node.kind == ir::OpKind::kLSTM;
  auto p = std::make_shared<RnnPlan>();
  if (lstm) {
    p->cell = Cell::kLstm;
    p->gates = 4;
  } else {
    const std::string cell = node.attrs.GetString("cell", "tanh");
    if (cell == "gru") {
      p->cell = Cell::kGru;
      p->gates = 3;
    } else if (cell == "tanh" || cell == "relu") {
      p->cell = cell == "tanh" ? Cell::kTanh : Cell::kRelu;
      p->gates = 1;
    } else {
      return InvalidArg(node, "unknown cell '", cell, "'");
    }
  }
  p->layers = node.attrs.GetInt("num_layers", 1);
  p->dirs = node.attrs.GetBool("bidirectional", false) ? 2 : 1;
  p->batch_first = node.attrs.GetBool("batch_first", false);
  p->has_biases = node.attrs.GetBool("has_biases", true);
  p->has_state = node.attrs.GetBool("has_state", false);
  const size_t states = p->has_state ? (lstm ? 2 : 1) : 0;
  p->first_weight = 1 + states;
  const size_t per = p->has_biases ? 4 : 2;
  const size_t want = p->first_weight + per * p->layers * p->dirs;
  if (p->layers < 1 || ctx.inputs.size() != want) {
    return InvalidArg(node, "expected ", want, " inputs for ", p->layers, " layer(s), ", p->dirs,
                      " direction(s)", p->has_biases ? " with biases" : "", ", got ",
                      ctx.inputs.size());
  }
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i].present) return InvalidArg(node, "input ", i, " is absent");
  }
  const DType dt = ctx.inputs[0].dtype;  // FP32, or FP64 (its own table row)
  if (dt != DType::kF64) RETURN_IF_ERROR(CheckDType(ctx, 0, DType::kF32));
  for (size_t i = 1; i < ctx.inputs.size(); ++i) RETURN_IF_ERROR(CheckDType(ctx, i, dt));
  const Dims& x = ctx.inputs[0].dims;
  if (x.size() == 2) {
    p->unbatched = true;
    p->t = x[0];
    p->b = 1;
    p->in = x[1];
  } else if (x.size() == 3) {
    p->t = p->batch_first ? x[1] : x[0];
    p->b = p->batch_first ? x[0] : x[1];
    p->in = x[2];
  } else {
    return InvalidArg(node, "expected a 2-D or 3-D input, got ", DimsToString(x));
  }
  const Dims& w_hh = ctx.inputs[p->first_weight + 1].dims;
  if (w_hh.size() != 2 || w_hh[0] % p->gates != 0) {
    return InvalidArg(node, "bad w_hh ", DimsToString(w_hh));
  }
  p->h = w_hh[1];
  const int64_t g = p->gates * p->h;
  for (int64_t l = 0; l < p->layers; ++l) {
    const int64_t in = l == 0 ? p->in : p->dirs * p->h;
    for (int64_t d = 0; d < p->dirs; ++d) {
      const size_t base = p->first_weight + per * (l * p->dirs + d);
      if (ctx.inputs[base].dims != Dims{g, in} || ctx.inputs[base + 1].dims != Dims{g, p->h} ||
          (p->has_biases &&
           (ctx.inputs[base + 2].dims != Dims{g} || ctx.inputs[base + 3].dims != Dims{g}))) {
        return InvalidArg(node, "weights of layer ", l, " direction ", d, " do not match ", g,
                          " gate rows over ", in, " inputs and hidden size ", p->h,
                          " (projections are not supported)");
      }
    }
  }
  const Dims state = {p->layers * p->dirs, p->b, p->h};
  for (size_t s = 0; s < states; ++s) {
    const Dims& got = ctx.inputs[1 + s].dims;
    const Dims unbatched = {p->layers * p->dirs, p->h};
    if (got != state && !(p->unbatched && got == unbatched)) {
      return InvalidArg(node, "expected initial state ", DimsToString(state), ", got ",
                        DimsToString(got));
    }
  }
  const int64_t tb = p->t * p->b;
  size_t off = 0;
  auto take = [&](int64_t floats) {
    const size_t at = off;
    off += Align(floats);
    return at;
  };
  p->x_off = take(tb * p->in);
  p->buf_off[0] = take(tb * p->dirs * p->h);
  p->buf_off[1] = take(tb * p->dirs * p->h);
  p->xg_off = take(tb * g);
  p->hg_off = take(p->b * g);
  p->h_off = take(p->b * p->h);
  p->c_off = take(p->b * p->h);
  ctx.workspace_bytes = off * DTypeSize(dt);
  Dims out = p->unbatched     ? Dims{p->t, p->dirs * p->h}
             : p->batch_first ? Dims{p->b, p->t, p->dirs * p->h}
                              : Dims{p->t, p->b, p->dirs * p->h};
  Dims hn = p->unbatched ? Dims{p->layers * p->dirs, p->h} : state;
  ctx.outputs = {TensorInfo{dt, out}, TensorInfo{dt, hn}};
  if (lstm) ctx.outputs.push_back(TensorInfo{dt, hn});
  ctx.state = std::move(p);
  return absl::OkStatus();
}

template <typename T>
inline T Sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Copies [A, B, C] to [B, A, C] (batch-first <-> sequence-first).
template <typename T>
void SwapLeading(const T* src, T* dst, int64_t a, int64_t b, int64_t c) {
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::memcpy(dst + (j * a + i) * c, src + (i * b + j) * c, c * sizeof(T));
    }
  }
}

template <typename T>
absl::Status EvalRnn(EvalContext& ctx) {
  const RnnPlan& p = StateAs<RnnPlan>(ctx);
  T* ws = static_cast<T*>(ctx.workspace);
  const int64_t tb = p.t * p.b, g = p.gates * p.h, out_w = p.dirs * p.h;
  const size_t per = p.has_biases ? 4 : 2;
  // Sequence-first input.
  T* x = ws + p.x_off;
  if (p.batch_first && !p.unbatched) {
    SwapLeading(ctx.inputs[0]->data<T>(), x, p.b, p.t, p.in);
  } else {
    std::memcpy(x, ctx.inputs[0]->data<T>(), tb * p.in * sizeof(T));
  }
  T* xg = ws + p.xg_off;
  T* hg = ws + p.hg_off;
  T* h = ws + p.h_off;
  T* c = ws + p.c_off;
  T* hn = ctx.outputs[1]->data<T>();
  T* cn = p.cell == Cell::kLstm ? ctx.outputs[2]->data<T>() : nullptr;
  const T* layer_in = x;
  int64_t in = p.in;
  T* layer_out = nullptr;
  for (int64_t l = 0; l < p.layers; ++l) {
    layer_out = ws + p.buf_off[l % 2];
    for (int64_t d = 0; d < p.dirs; ++d) {
      const size_t base = p.first_weight + per * (l * p.dirs + d);
      const T* w_ih = ctx.inputs[base]->data<T>();
      const T* w_hh = ctx.inputs[base + 1]->data<T>();
      const T* b_ih = p.has_biases ? ctx.inputs[base + 2]->data<T>() : nullptr;
      const T* b_hh = p.has_biases ? ctx.inputs[base + 3]->data<T>() : nullptr;
      const int64_t s = l * p.dirs + d;
      if (p.has_state) {
        std::memcpy(h, ctx.inputs[1]->data<T>() + s * p.b * p.h, p.b * p.h * sizeof(T));
        if (cn != nullptr) {
          std::memcpy(c, ctx.inputs[2]->data<T>() + s * p.b * p.h, p.b * p.h * sizeof(T));
        }
      } else {
        std::fill(h, h + p.b * p.h, T(0));
        std::fill(c, c + p.b * p.h, T(0));
      }
      // Input contributions of all steps at once.
      if (b_ih != nullptr) {
        for (int64_t r = 0; r < tb; ++r) std::memcpy(xg + r * g, b_ih, g * sizeof(T));
      }
      Xgemm<T>(false, true, tb, g, in, T(1), layer_in, in, w_ih, in, b_ih ? T(1) : T(0), xg, g);
      for (int64_t step = 0; step < p.t; ++step) {
        const int64_t t = d == 0 ? step : p.t - 1 - step;
        if (b_hh != nullptr) {
          for (int64_t r = 0; r < p.b; ++r) std::memcpy(hg + r * g, b_hh, g * sizeof(T));
        }
        Xgemm<T>(false, true, p.b, g, p.h, T(1), h, p.h, w_hh, p.h, b_hh ? T(1) : T(0), hg, g);
        for (int64_t bi = 0; bi < p.b; ++bi) {
          const T* xr = xg + (t * p.b + bi) * g;
          const T* hr = hg + bi * g;
          T* hb = h + bi * p.h;
          T* cb = c + bi * p.h;
          for (int64_t j = 0; j < p.h; ++j) {
            switch (p.cell) {
              case Cell::kLstm: {
                const T ig = Sigmoid(xr[j] + hr[j]);
                const T fg = Sigmoid(xr[p.h + j] + hr[p.h + j]);
                const T gg = std::tanh(xr[2 * p.h + j] + hr[2 * p.h + j]);
                const T og = Sigmoid(xr[3 * p.h + j] + hr[3 * p.h + j]);
                cb[j] = fg * cb[j] + ig * gg;
                hb[j] = og * std::tanh(cb[j]);
                break;
              }
              case Cell::kGru: {
                const T r = Sigmoid(xr[j] + hr[j]);
                const T z = Sigmoid(xr[p.h + j] + hr[p.h + j]);
                const T n = std::tanh(xr[2 * p.h + j] + r * hr[2 * p.h + j]);
                hb[j] = (T(1) - z) * n + z * hb[j];
                break;
              }
              case Cell::kTanh:
                hb[j] = std::tanh(xr[j] + hr[j]);
                break;
              case Cell::kRelu:
                hb[j] = std::max(xr[j] + hr[j], T(0));
                break;
            }
          }
          std::memcpy(layer_out + (t * p.b + bi) * out_w + d * p.h, hb, p.h * sizeof(T));
        }
      }
      std::memcpy(hn + s * p.b * p.h, h, p.b * p.h * sizeof(T));
      if (cn != nullptr) std::memcpy(cn + s * p.b * p.h, c, p.b * p.h * sizeof(T));
    }
    layer_in = layer_out;
    in = out_w;
  }
  T* y = ctx.outputs[0]->data<T>();
  if (p.batch_first && !p.unbatched) {
    SwapLeading(layer_out, y, p.t, p.b, out_w);
  } else {
    std::memcpy(y, layer_out, tb * out_w * sizeof(T));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const KernelDef> RecurrentKernels() {
  static const KernelDef kKernels[] = {
      {ir::OpKind::kLSTM, DType::kF32, PrepareRnn, EvalRnn<float>},
      {ir::OpKind::kRNN, DType::kF32, PrepareRnn, EvalRnn<float>},
      {ir::OpKind::kLSTM, DType::kF64, PrepareRnn, EvalRnn<double>},
      {ir::OpKind::kRNN, DType::kF64, PrepareRnn, EvalRnn<double>},
  };
  return kKernels;
}

}  // namespace kiln::kernels
