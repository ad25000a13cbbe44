// Converters for PyTorch's transformer fast path: the fused encoder layer
// (aten::_transformer_encoder_layer_fwd, what nn.TransformerEncoderLayer
// records in eval mode under torch.no_grad()) and the nested tensors
// nn.TransformerEncoder makes of a padded batch and its src_key_padding_mask.
//
// Nested tensors have no ir form. _nested_tensor_from_mask(t, mask) makes
// sequence i of t[i, :L_i] with L_i = mask[i].sum() (the first L_i positions,
// whatever the mask's pattern), so Kiln keeps the padded t and records which
// positions are real (ConvertContext::Nested). An encoder layer on a nested
// input is the same layer on the padded input with the positions past each
// length as a key padding mask: real positions then attend only to real ones,
// and every step other than attention works per position. to_padded_tensor
// writes the padding value past each length and, like PyTorch, keeps only
// max(L_i) positions (a length that depends on the data).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {
namespace {

using ir::OpKind;

ir::Attributes AxisAttr(const char* name, int64_t axis) {
  ir::Attributes attrs;
  attrs.SetInt(name, axis);
  return attrs;
}

// An ir node whose result is an int (not a tensor), named after the call plus `suffix`.
ir::ValueId EmitInt(const AtenCall& call, ConvertContext& cx, OpKind op,
                    std::vector<ir::ValueId> inputs, ir::Attributes attrs, std::string_view suffix) {
  ir::ValueId id = cx.Emit(call, op, std::move(inputs), std::move(attrs), suffix);
  ir::Value& value = cx.graph().mutable_value(id);
  value.kind = ir::ValueKind::kInt;
  value.type = ir::TensorType{ir::ScalarKindDType(ir::ValueKind::kInt), Dims{}};
  return id;
}

}  // namespace

// _nested_tensor_from_mask(Tensor t, Tensor mask, bool mask_check=True): t
// [N, T, E] and mask [N, T] (BOOL, true = a token). With mask_check PyTorch
// refuses a mask that is not left-aligned; Kiln takes the lengths either way.
ConvertResult ConvertNestedTensorFromMask(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId t, call.Tensor("t"));
  ASSIGN_OR_RETURN(ir::ValueId mask, call.Tensor("mask"));
  ir::Attributes sum;
  sum.SetInts("axes", {1});
  sum.SetBool("keepdim", false);
  const ir::ValueId lengths = cx.Emit(call, OpKind::kSum, {mask}, std::move(sum), ".lengths");
  const ir::ValueId steps = EmitInt(call, cx, OpKind::kSize, {t}, AxisAttr("dim", 1), ".steps");
  ir::Attributes arange;
  arange.SetString("dtype", DTypeName(DType::kInt64));
  const ir::ValueId positions = cx.Emit(
      call, OpKind::kArange, {cx.AddInt(0), steps, cx.AddInt(1)}, std::move(arange), ".positions");
  const ir::ValueId row = cx.Emit(call, OpKind::kUnsqueeze, {positions}, AxisAttr("axis", 0), ".row");
  const ir::ValueId column =
      cx.Emit(call, OpKind::kUnsqueeze, {lengths}, AxisAttr("axis", 1), ".column");
  const ir::ValueId valid = cx.Emit(call, OpKind::kLess, {row, column}, {}, ".valid");
  // A value of its own, so that t stays an ordinary tensor for its other uses.
  const ir::ValueId nested = cx.Emit(call, OpKind::kIdentity, {t});
  cx.SetNested(nested, {valid, lengths});
  return std::vector<ir::ValueId>{nested};
}

// to_padded_tensor(Tensor self, float padding, int[]? output_size=None) of a nested value.
ConvertResult ConvertToPaddedTensor(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("self"));
  const ConvertContext::Nested* found = cx.NestedOf(x);
  if (found == nullptr) {
    return call.Unimplemented("takes a nested tensor that Kiln did not make (only "
                              "_nested_tensor_from_mask's are translated)");
  }
  const ConvertContext::Nested nested = *found;
  if (call.Has("output_size")) return call.Unimplemented("output_size is not supported");
  ASSIGN_OR_RETURN(double padding, call.Double("padding"));
  const ir::ValueId valid =
      cx.Emit(call, OpKind::kUnsqueeze, {nested.valid}, AxisAttr("axis", 2), ".valid");
  Number pad;
  pad.kind = Number::kFloat;
  pad.f = padding;
  const ir::ValueId filled =
      cx.Emit(call, OpKind::kWhere, {valid, x, cx.AddNumber(pad)}, {}, ".filled");
  ir::Attributes max;
  max.SetInts("axes", {0});
  max.SetBool("keepdim", false);
  const ir::ValueId longest =
      cx.Emit(call, OpKind::kReduceMax, {nested.lengths}, std::move(max), ".longest");
  ir::Attributes to_int;
  to_int.SetString("type", "int");
  const ir::ValueId end = EmitInt(call, cx, OpKind::kToScalar, {longest}, std::move(to_int), ".end");
  ir::Attributes slice;
  slice.SetInt("axis", 1);
  slice.SetInt("start", 0);
  slice.SetInt("step", 1);
  return std::vector<ir::ValueId>{
      cx.Emit(call, OpKind::kSlice, {filled, ir::kNoValue, end}, std::move(slice))};
}

// scaled_dot_product_attention(query, key, value, attn_mask=None,
// dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False): one
// ScaledDotProductAttention node. A BOOL mask (true: the position takes
// part) and is_causal's lower-triangular one are turned by the kernel into
// the additive mask PyTorch makes of them (0 or -inf); a float mask is added
// as it is.
ConvertResult ConvertScaledDotProductAttention(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId q, call.Tensor("query"));
  ASSIGN_OR_RETURN(ir::ValueId k, call.Tensor("key"));
  ASSIGN_OR_RETURN(ir::ValueId v, call.Tensor("value"));
  ASSIGN_OR_RETURN(ir::ValueId mask, call.OptionalTensor("attn_mask"));
  ASSIGN_OR_RETURN(double dropout, call.Double("dropout_p", 0.0));
  ASSIGN_OR_RETURN(bool causal, call.Bool("is_causal", false));
  ASSIGN_OR_RETURN(bool gqa, call.Bool("enable_gqa", false));
  if (dropout != 0.0) return call.Unimplemented("dropout_p > 0 draws random numbers");
  if (gqa) return call.Unimplemented("enable_gqa (grouped-query attention) is not translated");
  if (causal && mask != ir::kNoValue) {
    return call.InvalidArgument("an explicit attn_mask should not be set when is_causal=True");
  }
  ir::Attributes attrs;
  if (call.Has("scale")) {
    ASSIGN_OR_RETURN(double scale, call.Double("scale"));
    attrs.SetFloat("scale", scale);
  }
  if (causal) {
    // keep[i][j] = j <= i over [L, S].
    auto positions = [&](ir::ValueId t, const char* suffix) {
      const ir::ValueId n = EmitInt(call, cx, OpKind::kSize, {t}, AxisAttr("dim", -2), suffix);
      ir::Attributes arange;
      arange.SetString("dtype", DTypeName(DType::kInt64));
      return cx.Emit(call, OpKind::kArange, {cx.AddInt(0), n, cx.AddInt(1)}, std::move(arange),
                     suffix);
    };
    const ir::ValueId rows = cx.Emit(call, OpKind::kUnsqueeze, {positions(q, ".rows")},
                                     AxisAttr("axis", 1), ".rows");
    const ir::ValueId cols = positions(k, ".cols");
    mask = cx.Emit(call, OpKind::kLessEqual, {cols, rows}, {}, ".causal");
  }
  // A BOOL mask (its dtype may be known only per signature) says which
  // positions take part; the kernel makes PyTorch's 0 / -inf of it.
  attrs.SetString("bool_mask", "keep");
  // torch >= 2.5 computes it with _safe_softmax: a query whose every key is
  // masked out gets zeros, not NaN.
  attrs.SetBool("safe", true);
  std::vector<ir::ValueId> inputs = {q, k, v};
  if (mask != ir::kNoValue) inputs.push_back(mask);
  return std::vector<ir::ValueId>{
      cx.Emit(call, OpKind::kScaledDotProductAttention, std::move(inputs), std::move(attrs))};
}

// _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight,
// qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1,
// norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
// ffn_weight_2, ffn_bias_2, mask=None, mask_type=None): spelled out as
// PyTorch's transformer_encoder_layer_forward computes it: attention, residual
// add, LayerNorm, feed-forward (relu or exact gelu), residual add, LayerNorm,
// the LayerNorms before their blocks when norm_first.
ConvertResult ConvertTransformerEncoderLayer(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId src, call.Tensor("src"));
  ASSIGN_OR_RETURN(int64_t embed_dim, call.Int("embed_dim"));
  ASSIGN_OR_RETURN(int64_t heads, call.Int("num_heads"));
  ASSIGN_OR_RETURN(bool use_gelu, call.Bool("use_gelu"));
  ASSIGN_OR_RETURN(bool norm_first, call.Bool("norm_first"));
  ASSIGN_OR_RETURN(double eps, call.Double("eps"));
  ASSIGN_OR_RETURN(ir::ValueId qkv_w, call.Tensor("qkv_weight"));
  ASSIGN_OR_RETURN(ir::ValueId qkv_b, call.Tensor("qkv_bias"));
  ASSIGN_OR_RETURN(ir::ValueId proj_w, call.Tensor("proj_weight"));
  ASSIGN_OR_RETURN(ir::ValueId proj_b, call.Tensor("proj_bias"));
  ASSIGN_OR_RETURN(ir::ValueId norm1_w, call.Tensor("norm_weight_1"));
  ASSIGN_OR_RETURN(ir::ValueId norm1_b, call.Tensor("norm_bias_1"));
  ASSIGN_OR_RETURN(ir::ValueId norm2_w, call.Tensor("norm_weight_2"));
  ASSIGN_OR_RETURN(ir::ValueId norm2_b, call.Tensor("norm_bias_2"));
  ASSIGN_OR_RETURN(ir::ValueId ffn1_w, call.Tensor("ffn_weight_1"));
  ASSIGN_OR_RETURN(ir::ValueId ffn1_b, call.Tensor("ffn_bias_1"));
  ASSIGN_OR_RETURN(ir::ValueId ffn2_w, call.Tensor("ffn_weight_2"));
  ASSIGN_OR_RETURN(ir::ValueId ffn2_b, call.Tensor("ffn_bias_2"));
  ASSIGN_OR_RETURN(ir::ValueId mask, call.OptionalTensor("mask"));
  std::optional<int64_t> mask_type;
  if (call.Has("mask_type")) {
    ASSIGN_OR_RETURN(mask_type, call.Int("mask_type"));
  }
  std::optional<ConvertContext::Nested> nested;
  if (const ConvertContext::Nested* n = cx.NestedOf(src)) nested = *n;
  if (nested) {
    if (mask != ir::kNoValue) return call.Unimplemented("a mask with a nested input");
    // The positions past each sequence's length, as a key padding mask.
    mask = cx.Emit(call, OpKind::kLogicalNot, {nested->valid}, {}, ".padding");
    mask_type = 1;
  }

  auto layer_norm = [&](ir::ValueId x, ir::ValueId w, ir::ValueId b, const char* suffix) {
    ir::Attributes attrs;
    attrs.SetInts("normalized_shape", {embed_dim});
    attrs.SetFloat("eps", eps);
    return cx.Emit(call, OpKind::kLayerNorm, {x, w, b}, std::move(attrs), suffix);
  };
  auto attention = [&](ir::ValueId x) {
    ir::Attributes attrs;
    attrs.SetInt("num_heads", heads);
    attrs.SetBool("need_weights", false);
    if (mask_type) attrs.SetInt("mask_type", *mask_type);
    std::vector<ir::ValueId> inputs = {x, x, x, qkv_w, proj_w, qkv_b, proj_b};
    if (mask != ir::kNoValue) inputs.push_back(mask);
    const std::string base = call.OutputName(0);
    ir::NodeId n = cx.graph().AddNode(OpKind::kMultiHeadAttention, std::move(inputs),
                                      std::move(attrs), std::string(call.op()),
                                      {base + ".attn", base + ".attn_weights"});
    return cx.graph().node(n).outputs[0];
  };
  auto feed_forward = [&](ir::ValueId x) {
    ir::ValueId h = cx.Emit(call, OpKind::kLinear, {x, ffn1_w, ffn1_b}, {}, ".ffn1");
    if (use_gelu) {
      ir::Attributes attrs;
      attrs.SetString("approximate", "none");
      h = cx.Emit(call, OpKind::kGelu, {h}, std::move(attrs), ".act");
    } else {
      h = cx.Emit(call, OpKind::kRelu, {h}, {}, ".act");
    }
    return cx.Emit(call, OpKind::kLinear, {h, ffn2_w, ffn2_b}, {}, ".ffn2");
  };

  ir::ValueId x = src;
  if (norm_first) {
    x = cx.Emit(call, OpKind::kAdd, {x, attention(layer_norm(x, norm1_w, norm1_b, ".norm1"))}, {},
                ".res1");
    x = cx.Emit(call, OpKind::kAdd, {x, feed_forward(layer_norm(x, norm2_w, norm2_b, ".norm2"))});
  } else {
    x = layer_norm(cx.Emit(call, OpKind::kAdd, {x, attention(x)}, {}, ".res1"), norm1_w, norm1_b,
                   ".norm1");
    x = layer_norm(cx.Emit(call, OpKind::kAdd, {x, feed_forward(x)}, {}, ".res2"), norm2_w,
                   norm2_b, "");
  }
  if (nested) cx.SetNested(x, *nested);  // the layer keeps its input's lengths
  return std::vector<ir::ValueId>{x};
}

namespace {

// Rows [begin, begin + n) of a 2-D or 1-D projection weight or bias: a
// constant cut at import when the tensor is one (so the Linear that reads it
// has a constant weight, prepacked once), else a Slice node.
ir::ValueId Rows(const AtenCall& call, ConvertContext& cx, ir::ValueId t, int64_t begin,
                 int64_t n, const char* suffix) {
  if (const Tensor* c = cx.ConstValue(t); c != nullptr && c->rank() >= 1 && c->rank() <= 2 &&
                                          c->dim(0) >= begin + n) {
    Dims dims = c->dims();
    dims[0] = n;
    Tensor part = Tensor::Zeros(c->dtype(), dims);
    const size_t row = part.byte_size() / static_cast<size_t>(n == 0 ? 1 : n);
    std::memcpy(part.raw_data(), static_cast<const char*>(c->raw_data()) + begin * row,
                part.byte_size());
    return cx.AddConstant(std::move(part), call.OutputName(0) + suffix);
  }
  ir::Attributes attrs;
  attrs.SetInt("axis", 0);
  attrs.SetInt("start", begin);
  attrs.SetInt("end", begin + n);
  attrs.SetInt("step", 1);
  return cx.Emit(call, OpKind::kSlice, {t}, std::move(attrs), suffix);
}

ir::Attributes Transpose(int64_t dim0, int64_t dim1) {
  ir::Attributes attrs;
  attrs.SetInt("dim0", dim0);
  attrs.SetInt("dim1", dim1);
  return attrs;
}

}  // namespace

// _native_multi_head_attention(query, key, value, embed_dim, num_head,
// qkv_weight, qkv_bias, proj_weight, proj_bias, mask=None, need_weights=True,
// average_attn_weights=True, mask_type=None) -> (output, weights): what
// nn.MultiheadAttention(batch_first=True) records for self-attention in eval
// mode under torch.no_grad(), on [B, L, E] inputs. Spelled out as ir ops the
// compiler prepacks once: a Linear per projection (the in-projection's rows
// cut into q, k and v), the heads split as [B, H, L, D], one
// ScaledDotProductAttention (PyTorch's 1/sqrt(D) scale), the heads joined
// and the out-projection's Linear. The weights result (softmax of the scaled
// scores, averaged over heads unless average_attn_weights=False) is computed
// on its own, so dead-code elimination drops it when nothing reads it; with
// need_weights=False it is an empty tensor, as PyTorch's. A mask keeps the
// MultiHeadAttention node, whose kernel reads mask_type as PyTorch does.
ConvertResult ConvertNativeMultiHeadAttention(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId q, call.Tensor("query"));
  ASSIGN_OR_RETURN(ir::ValueId k, call.Tensor("key"));
  ASSIGN_OR_RETURN(ir::ValueId v, call.Tensor("value"));
  ASSIGN_OR_RETURN(int64_t embed_dim, call.Int("embed_dim"));
  ASSIGN_OR_RETURN(int64_t heads, call.Int("num_head"));
  ASSIGN_OR_RETURN(ir::ValueId w_in, call.Tensor("qkv_weight"));
  ASSIGN_OR_RETURN(ir::ValueId b_in, call.Tensor("qkv_bias"));
  ASSIGN_OR_RETURN(ir::ValueId w_out, call.Tensor("proj_weight"));
  ASSIGN_OR_RETURN(ir::ValueId b_out, call.Tensor("proj_bias"));
  ASSIGN_OR_RETURN(ir::ValueId mask, call.OptionalTensor("mask"));
  ASSIGN_OR_RETURN(bool need_weights, call.Bool("need_weights", true));
  ASSIGN_OR_RETURN(bool average, call.Bool("average_attn_weights", true));
  if (call.num_outputs() != 2) return call.InvalidArgument("expected two results");
  if (heads <= 0 || embed_dim % heads != 0) {
    return call.InvalidArgument("embed_dim is not a multiple of num_head");
  }
  const std::string base = call.OutputName(0);
  if (mask != ir::kNoValue) {
    ir::Attributes attrs;
    attrs.SetInt("num_heads", heads);
    attrs.SetBool("need_weights", need_weights);
    attrs.SetBool("average_weights", average);
    if (call.Has("mask_type")) {
      ASSIGN_OR_RETURN(int64_t mask_type, call.Int("mask_type"));
      attrs.SetInt("mask_type", mask_type);
    }
    ir::NodeId n = cx.graph().AddNode(OpKind::kMultiHeadAttention,
                                      {q, k, v, w_in, w_out, b_in, b_out, mask}, std::move(attrs),
                                      std::string(call.op()), {base, call.OutputName(1)});
    return cx.graph().node(n).outputs;
  }
  const int64_t head_dim = embed_dim / heads;
  // [B, L, E] -> [B, H, L, D]
  auto project = [&](ir::ValueId x, int64_t part, const char* name) {
    const std::string p = absl::StrCat(".", name);
    const ir::ValueId w = Rows(call, cx, w_in, part * embed_dim, embed_dim, (p + "_weight").c_str());
    const ir::ValueId b = Rows(call, cx, b_in, part * embed_dim, embed_dim, (p + "_bias").c_str());
    const ir::ValueId y = cx.Emit(call, OpKind::kLinear, {x, w, b}, {}, p);
    ir::Attributes split;
    split.SetInt("axis", 2);
    split.SetInts("sizes", {heads, head_dim});
    const ir::ValueId h = cx.Emit(call, OpKind::kUnflatten, {y}, std::move(split), p + "_heads");
    return cx.Emit(call, OpKind::kPermute, {h}, Transpose(1, 2), p + "_bhld");
  };
  const ir::ValueId qh = project(q, 0, "q");
  const ir::ValueId kh = project(k, 1, "k");
  const ir::ValueId vh = project(v, 2, "v");
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  ir::Attributes sdpa;
  sdpa.SetFloat("scale", scale);
  const ir::ValueId attended =
      cx.Emit(call, OpKind::kScaledDotProductAttention, {qh, kh, vh}, std::move(sdpa), ".sdpa");
  const ir::ValueId blhd = cx.Emit(call, OpKind::kPermute, {attended}, Transpose(1, 2), ".blhd");
  ir::Attributes join;
  join.SetInt("start_dim", 2);
  join.SetInt("end_dim", 3);
  const ir::ValueId joined = cx.Emit(call, OpKind::kFlatten, {blhd}, std::move(join), ".joined");
  const ir::ValueId out = cx.Emit(call, OpKind::kLinear, {joined, w_out, b_out});

  ir::ValueId weights;
  if (need_weights) {
    // softmax(q k^T * scale) over [B, H, L, S], then the mean over heads.
    const ir::ValueId kt = cx.Emit(call, OpKind::kPermute, {kh}, Transpose(2, 3), ".k_t");
    const ir::ValueId scores = cx.Emit(call, OpKind::kMatMul, {qh, kt}, {}, ".scores");
    Number s;
    s.kind = Number::kFloat;
    s.f = scale;
    const ir::ValueId scaled =
        cx.Emit(call, OpKind::kMul, {scores, cx.AddNumber(s)}, {}, ".scaled");
    ir::Attributes softmax;
    softmax.SetInt("axis", -1);
    weights = cx.Emit(call, OpKind::kSoftmax, {scaled}, std::move(softmax),
                      average ? ".per_head" : "");
    if (average) {
      ir::Attributes mean;
      mean.SetInts("axes", {1});
      mean.SetBool("keepdim", false);
      weights = cx.Emit(call, OpKind::kMean, {weights}, std::move(mean));
    }
  } else {
    ASSIGN_OR_RETURN(weights, cx.AddFilledConstant(Dims{0}, 0.0, DType::kF32, call.OutputName(1)));
  }
  cx.graph().mutable_value(weights).name = call.OutputName(1);
  return std::vector<ir::ValueId>{out, weights};
}

}  // namespace kiln::importer::aten
