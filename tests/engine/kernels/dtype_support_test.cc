// The dtype x op support matrix, read from the kernels themselves: for every
// op with a sweep-case generator and each of the ten dtypes, the op's small
// sweep case gets its FP32 inputs converted to that dtype and is run through
// Prepare and Eval, as the executor prepares it (FP16/BF16 through the FP32
// kernel where the op's own kernel does not take them). "yes" means the op
// runs on that dtype; a "no" must be a clean Prepare error (Unimplemented or InvalidArgument naming the
// node), never a crash or a silent cast. The test prints the matrix (which
// docs/dtypes.md reproduces) and pins the entries models depend on.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kernels/convert.h"
#include "engine/kernels/kernel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/single_op_graph.h"
#include "tests/engine/kernels/sweep_case.h"

namespace kiln::kernels {
namespace {

using ir::OpKind;
using testing::ConvertedTensor;
using testing::SingleOpGraph;

constexpr DType kAllDTypes[] = {DType::kF32,  DType::kF64,  DType::kF16,   DType::kBF16,
                                DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64,
                                DType::kUInt8, DType::kBool};

struct Family {
  const char* name;
  absl::Span<const KernelDef> kernels;
};

std::vector<Family> Families() {
  return {{"elementwise", ElementwiseKernels()}, {"activation", ActivationKernels()},
          {"unary", UnaryKernels()},             {"cast", CastKernels()},
          {"matmul", MatMulKernels()},           {"conv", ConvKernels()},
          {"pool", PoolKernels()},               {"norm", NormKernels()},
          {"reduce", ReduceKernels()},           {"shape", ShapeKernels()},
          {"movement", MovementKernels()},       {"indexing", IndexingKernels()},
          {"resize", ResizeKernels()},           {"sort", SortKernels()},
          {"attention", AttentionKernels()},     {"recurrent", RecurrentKernels()}};
}

// "yes" / "no" per op and dtype, computed once.
struct Matrix {
  std::map<OpKind, std::map<DType, bool>> native;
  std::map<OpKind, std::string> family;
  std::vector<std::string> unclear_errors;  // failures that did not come from Prepare cleanly
};

const Matrix& GetMatrix() {
  static const Matrix* matrix = [] {
    auto* m = new Matrix();
    const auto& gens = testing::SweepGenerators();
    for (const Family& f : Families()) {
      for (const KernelDef& k : f.kernels) {
        if (IsNonTensorOp(k.op) || m->family.count(k.op) > 0) continue;
        auto gen = gens.find(k.op);
        if (gen == gens.end()) continue;
        m->family[k.op] = f.name;
        // The first small case whose data operand (input 0) is FP32: some
        // generators mix dtypes, and only FP32 inputs are converted.
        testing::SweepRng rng(testing::SweepSeed(k.op) * 131 + 7);
        testing::SweepCase c = gen->second(rng, 0);
        auto fp32_data = [](const testing::SweepCase& sc) {
          return sc.inputs.empty() ||
                 (sc.inputs[0].defined() && sc.inputs[0].dtype() == DType::kF32);
        };
        for (int i = 1; i < 50 && !fp32_data(c); ++i) {
          if (i % 6 == 5) continue;  // big cases
          c = gen->second(rng, i);
        }
        for (DType d : kAllDTypes) {
          std::vector<Tensor> inputs;
          for (const Tensor& t : c.inputs) inputs.push_back(ConvertedTensor(t, d));
          SingleOpGraph g(k.op, inputs, c.attrs, c.constant_inputs);
          absl::Status prepared = g.Prepare();
          bool ok = prepared.ok();
          if (ok) {
            absl::StatusOr<std::vector<Tensor>> out = g.Run();
            // InvalidArgument from Eval is the data (an integer division by
            // zero after the conversion): the kernel itself runs.
            if (!out.ok() && out.status().code() != absl::StatusCode::kInvalidArgument) {
              m->unclear_errors.push_back(absl::StrCat(ir::OpName(k.op), " ", DTypeName(d),
                                                       ": Prepare passed, Eval failed: ",
                                                       out.status().ToString()));
              ok = false;
            }
          } else if ((prepared.code() != absl::StatusCode::kUnimplemented &&
                      prepared.code() != absl::StatusCode::kInvalidArgument) ||
                     (prepared.message().find("node (") == absl::string_view::npos &&
                      prepared.message().find("no kernel for") == absl::string_view::npos)) {
            m->unclear_errors.push_back(absl::StrCat(ir::OpName(k.op), " ", DTypeName(d), ": ",
                                                     prepared.ToString()));
          }
          m->native[k.op][d] = ok;
        }
      }
    }
    return m;
  }();
  return *matrix;
}

bool Native(OpKind op, DType d) {
  const Matrix& m = GetMatrix();
  auto it = m.native.find(op);
  return it != m.native.end() && it->second.at(d);
}

TEST(DTypeSupportTest, PrintsTheMatrixAndFailuresAreCleanPrepareErrors) {
  const Matrix& m = GetMatrix();
  std::string table = "| family | op |";
  for (DType d : kAllDTypes) absl::StrAppend(&table, " ", DTypeName(d), " |");
  table += "\n|---|---|";
  for (size_t i = 0; i < std::size(kAllDTypes); ++i) table += "---|";
  table += "\n";
  for (const Family& f : Families()) {
    for (const auto& [op, fam] : m.family) {
      if (fam != f.name) continue;
      absl::StrAppend(&table, "| ", fam, " | ", ir::OpName(op), " |");
      for (DType d : kAllDTypes) table += m.native.at(op).at(d) ? " yes |" : " - |";
      table += "\n";
    }
  }
  std::printf("KILN_DTYPE_MATRIX_BEGIN\n%sKILN_DTYPE_MATRIX_END\n", table.c_str());
  EXPECT_GT(m.native.size(), 60u);
  EXPECT_THAT(m.unclear_errors, ::testing::IsEmpty());
}

TEST(DTypeSupportTest, ArithmeticAndComparisonsTakeEveryDType) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(DTypeName(d));
    EXPECT_TRUE(Native(OpKind::kAdd, d));
    EXPECT_TRUE(Native(OpKind::kMul, d));
    EXPECT_TRUE(Native(OpKind::kEqual, d));
    EXPECT_TRUE(Native(OpKind::kLess, d));
    EXPECT_TRUE(Native(OpKind::kMaximum, d));
    // PyTorch itself rejects bool subtraction and bool floor division.
    EXPECT_EQ(Native(OpKind::kSub, d), d != DType::kBool);
    EXPECT_EQ(Native(OpKind::kFloorDiv, d), d != DType::kBool);
    EXPECT_EQ(Native(OpKind::kTruncDiv, d), d != DType::kBool);
  }
}

TEST(DTypeSupportTest, CastsAndMovementTakeEveryDType) {
  for (DType d : kAllDTypes) {
    SCOPED_TRACE(DTypeName(d));
    EXPECT_TRUE(Native(OpKind::kCast, d));
    EXPECT_TRUE(Native(OpKind::kReshape, d));
    EXPECT_TRUE(Native(OpKind::kConcat, d));
  }
}

TEST(DTypeSupportTest, Float64RunsTheFloatKernelsModelsUse) {
  for (OpKind op : {OpKind::kRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kGelu,
                    OpKind::kSoftmax, OpKind::kLayerNorm, OpKind::kMatMul, OpKind::kLinear,
                    OpKind::kSum, OpKind::kMean,
                    // A float64 CNN (model.double() on a conv net).
                    OpKind::kConv, OpKind::kMaxPool, OpKind::kMaxPoolWithIndices,
                    OpKind::kAvgPool, OpKind::kAdaptiveAvgPool, OpKind::kAdaptiveMaxPool,
                    OpKind::kBatchNorm, OpKind::kGroupNorm,
                    // Every activation.
                    OpKind::kHardSigmoid, OpKind::kHardSwish, OpKind::kElu, OpKind::kMish,
                    OpKind::kSoftplus, OpKind::kLogSigmoid, OpKind::kPRelu,
                    // Decoders, resizing heads, statistics, transformers, RNNs.
                    OpKind::kConvTranspose, OpKind::kResize, OpKind::kVar, OpKind::kStd,
                    OpKind::kNorm, OpKind::kLogSumExp, OpKind::kCumSum, OpKind::kCumProd,
                    OpKind::kEinsum, OpKind::kMultiHeadAttention, OpKind::kLSTM, OpKind::kRNN,
                    OpKind::kTopK, OpKind::kSort}) {
    EXPECT_TRUE(Native(op, DType::kF64)) << ir::OpName(op);
  }
}

TEST(DTypeSupportTest, IntegerMatMulAndSignOfBoolAsInPyTorch) {
  for (DType d : {DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8}) {
    EXPECT_TRUE(Native(OpKind::kMatMul, d)) << DTypeName(d);
  }
  EXPECT_FALSE(Native(OpKind::kMatMul, DType::kBool));  // PyTorch refuses it too
  EXPECT_TRUE(Native(OpKind::kSign, DType::kBool));
}

TEST(DTypeSupportTest, Float16AndBFloat16ComputeInFloat32) {
  for (DType d : {DType::kF16, DType::kBF16}) {
    for (OpKind op : {OpKind::kMatMul, OpKind::kLinear, OpKind::kSoftmax, OpKind::kLayerNorm,
                      OpKind::kGelu, OpKind::kAdd, OpKind::kCast, OpKind::kPermute}) {
      EXPECT_TRUE(Native(op, d)) << ir::OpName(op) << " " << DTypeName(d);
    }
  }
}

// Every op with an FP32 kernel takes FP16 and BF16 (widened where its own
// kernel does not), except the ones PyTorch itself only defines on other types
// and the ops whose FP32 row is not a computation on the data operand.
TEST(DTypeSupportTest, EveryFloat32OpTakesFloat16AndBFloat16) {
  std::vector<std::string> missing;
  for (const auto& [op, natives] : GetMatrix().native) {
    if (!natives.at(DType::kF32)) continue;
    for (DType d : {DType::kF16, DType::kBF16}) {
      if (!natives.at(d)) missing.push_back(absl::StrCat(ir::OpName(op), " ", DTypeName(d)));
    }
  }
  EXPECT_THAT(missing, ::testing::IsEmpty());
  for (OpKind op : {OpKind::kConv, OpKind::kMaxPool, OpKind::kBatchNorm, OpKind::kHardSwish,
                    OpKind::kSum, OpKind::kReduceMax, OpKind::kArgMax}) {
    EXPECT_TRUE(Native(op, DType::kBF16)) << ir::OpName(op);
  }
}

TEST(DTypeSupportTest, IndexingAndArgReductionsTakeIntegerAndFloatData) {
  for (DType d : {DType::kF32, DType::kInt64, DType::kInt32, DType::kBool}) {
    EXPECT_TRUE(Native(OpKind::kIndexSelect, d)) << DTypeName(d);
    EXPECT_TRUE(Native(OpKind::kGather, d)) << DTypeName(d);
  }
  for (DType d : {DType::kF32, DType::kF64, DType::kInt64}) {
    EXPECT_TRUE(Native(OpKind::kArgMax, d)) << DTypeName(d);
    EXPECT_TRUE(Native(OpKind::kSum, d)) << DTypeName(d);
  }
}

// Every FP64, FP16 and BF16 kernel computes what the FP32 kernel computes:
// the same sweep case run in FP32 (on the same values: FP16/BF16 inputs are
// widened back first) must agree to FP32 rounding for FP64, and to the
// storage type's rounding for FP16/BF16, relative to the output's scale.
TEST(DTypeSupportTest, OtherFloatKernelsAgreeWithFloat32) {
  const auto& gens = testing::SweepGenerators();
  int checked = 0;
  std::set<OpKind> checked_f64, checked_bf16;
  for (const auto& [op, natives] : GetMatrix().native) {
    // Their output dtype comes from an attribute, not from the input.
    if (op == OpKind::kArange || op == OpKind::kFill || op == OpKind::kCast) continue;
    for (DType d : {DType::kF64, DType::kF16, DType::kBF16}) {
      if (!natives.at(d) || !natives.at(DType::kF32)) continue;
      testing::SweepRng rng(testing::SweepSeed(op) * 977 + 3);
      // FP64 runs more cases: its kernels are separate code (not the FP32
      // kernel widened), so every configuration the generator draws
      // (spatial rank, groups, dilation, output_padding, resize mode) counts.
      const int num_cases = d == DType::kF64 ? 24 : 6;
      for (int i = 0; i < num_cases; ++i) {
        testing::SweepCase c = gens.at(op)(rng, i);
        if (i % 6 == 5 || c.inputs.empty() || !c.inputs[0].defined() ||
            c.inputs[0].dtype() != DType::kF32) {
          continue;
        }
        // BF16 bicubic rounds at every step, as libtorch does (CoverageOpsTest
        // checks it against libtorch's values), not once.
        if (d == DType::kBF16 && op == OpKind::kResize && c.attrs.GetString("mode", "") == "cubic") {
          continue;
        }
        // `typed`: the FP32 inputs converted to d. `widened`: the same values
        // in FP32 (the originals for FP64, which holds them exactly; FP16/BF16
        // rounded values widened back), so only the computation differs.
        std::vector<Tensor> typed, widened;
        for (const Tensor& t : c.inputs) {
          typed.push_back(ConvertedTensor(t, d));
          if (d == DType::kF64 || !t.defined() || t.dtype() != DType::kF32) {
            widened.push_back(t);
          } else {
            Tensor w = Tensor::Zeros(DType::kF32, t.dims());
            ConvertElements(typed.back().raw_data(), d, w.raw_data(), DType::kF32,
                            w.num_elements());
            widened.push_back(std::move(w));
          }
        }
        auto want = SingleOpGraph(op, widened, c.attrs, c.constant_inputs).Run();
        auto got = SingleOpGraph(op, typed, c.attrs, c.constant_inputs).Run();
        if (!want.ok() || !got.ok()) continue;  // data the op rejects (checked elsewhere)
        ASSERT_EQ(want->size(), got->size());
        for (size_t o = 0; o < got->size(); ++o) {
          const Tensor& w = (*want)[o];
          const Tensor& g = (*got)[o];
          if (w.dtype() != DType::kF32) continue;  // indices, bools: not rounded
          ASSERT_EQ(g.dtype(), d) << ir::OpName(op) << " output " << o;
          ASSERT_EQ(g.dims(), w.dims());
          double scale = 1.0;
          for (int64_t k = 0; k < w.num_elements(); ++k) {
            if (std::isfinite(w.data<float>()[k])) {
              scale = std::max(scale, std::abs(double{w.data<float>()[k]}));
            }
          }
          // FP16/BF16: the FP32 result rounded once to the storage type, so
          // within half a unit in its last place: 2^-11 (FP16) or 2^-8 (BF16)
          // of the element, plus half the smallest FP16 subnormal. FP64: to
          // FP32 rounding of the output's scale.
          const double unit = d == DType::kF16 ? 0x1p-11 : 0x1p-8;
          const double floor_abs = d == DType::kF16 ? 0x1p-25 : 0.0;
          for (int64_t k = 0; k < w.num_elements(); ++k) {
            const double a = w.data<float>()[k];
            const double b = LoadAnyAsDouble(g.raw_data(), d, k);
            if (std::isnan(a) && std::isnan(b)) continue;
            if (std::isinf(a) && a == b) continue;
            if (d == DType::kF16 && std::isinf(b) && std::abs(a) >= 65520.0) continue;  // overflow
            const double tol = d == DType::kF64 ? 1e-4 * scale : unit * std::abs(a) + floor_abs;
            EXPECT_LE(std::abs(a - b), tol)
                << ir::OpName(op) << " " << DTypeName(d) << " case " << i << " element " << k
                << ": FP32 " << a << ", " << DTypeName(d) << " " << b;
          }
        }
        ++checked;
        if (d == DType::kF64) checked_f64.insert(op);
        if (d == DType::kBF16) checked_bf16.insert(op);
      }
    }
  }
  EXPECT_GT(checked, 100);
  // The FP64 CNN kernels must be among the compared ones (a sweep generator
  // change that stopped giving them FP32 cases would silently drop them).
  for (OpKind op : {OpKind::kConv, OpKind::kMaxPool, OpKind::kAvgPool, OpKind::kAdaptiveAvgPool,
                    OpKind::kAdaptiveMaxPool, OpKind::kBatchNorm, OpKind::kGroupNorm,
                    OpKind::kConvTranspose, OpKind::kResize, OpKind::kVar, OpKind::kStd,
                    OpKind::kNorm, OpKind::kLogSumExp, OpKind::kCumSum, OpKind::kCumProd,
                    OpKind::kEinsum, OpKind::kMultiHeadAttention, OpKind::kLSTM, OpKind::kRNN,
                    OpKind::kTopK, OpKind::kSort}) {
    EXPECT_TRUE(checked_f64.count(op) > 0) << ir::OpName(op);
  }
  // And the BF16 ones that run widened through the executor's generic path.
  for (OpKind op : {OpKind::kConv, OpKind::kMaxPool, OpKind::kBatchNorm, OpKind::kHardSwish,
                    OpKind::kSoftmax, OpKind::kLinear, OpKind::kLayerNorm}) {
    EXPECT_TRUE(checked_bf16.count(op) > 0) << ir::OpName(op);
  }
}

}  // namespace
}  // namespace kiln::kernels
