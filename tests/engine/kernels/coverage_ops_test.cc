// The semantics PyTorch defines for the op-coverage kernels, on small hand-
// computed examples: Python rounding of floor division and remainder, type
// promotion of scalar and constant operands, first-occurrence argmax, padding
// modes, chunk sizes, advanced-indexing layout, casts, resampling rules, and
// the error paths (out-of-range indices, division by zero) that must fail a
// request rather than crash. The sweep test checks the same kernels against
// kernels/reference/ on random cases; the parity suite checks them against
// libtorch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/common/half.h"
#include "engine/kernels/kernel.h"
#include "tests/engine/kernels/single_op_graph.h"

namespace kiln::kernels {
namespace {

using ir::OpKind;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::Absent;
using testing::Attrs;
using testing::F32;
using testing::SingleOpGraph;
using testing::Values;

Tensor I64(Dims dims, std::vector<int64_t> values) {
  Tensor t = Tensor::Zeros(DType::kInt64, std::move(dims));
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}
Tensor Bool(Dims dims, std::vector<bool> values) {
  Tensor t = Tensor::Zeros(DType::kBool, std::move(dims));
  for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
  return t;
}
std::vector<int64_t> I64Values(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.num_elements());
}
std::vector<bool> BoolValues(const Tensor& t) {
  return std::vector<bool>(t.data<bool>(), t.data<bool>() + t.num_elements());
}

std::vector<Tensor> RunOp(const SingleOpGraph& g) {
  auto out = g.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : std::vector<Tensor>{};
}

// ---------------------------------------------------------------- elementwise

TEST(CoverageOpsTest, FloorDivAndRemainderRoundLikePython) {
  const Tensor a = F32({4}, {-7, 7, -7.5, 7});
  const Tensor b = F32({4}, {2, -2, 2, 2});
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kFloorDiv, {a, b}))[0]), ElementsAre(-4, -4, -4, 3));
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kRemainder, {a, b}))[0]),
              ElementsAre(1, -1, 0.5, 1));
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kFmod, {a, b}))[0]), ElementsAre(-1, 1, -1.5, 1));
  const Tensor ia = I64({3}, {-7, 7, -8}), ib = I64({3}, {2, -2, 3});
  EXPECT_THAT(I64Values(RunOp(SingleOpGraph(OpKind::kFloorDiv, {ia, ib}))[0]), ElementsAre(-4, -4, -3));
  EXPECT_THAT(I64Values(RunOp(SingleOpGraph(OpKind::kRemainder, {ia, ib}))[0]), ElementsAre(1, -1, 1));
}

TEST(CoverageOpsTest, IntegerDivisionByZeroFailsTheRequest) {
  SingleOpGraph g(OpKind::kFloorDiv, {I64({2}, {1, 2}), I64({2}, {1, 0})});
  auto out = g.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("integer division by zero"));
}

TEST(CoverageOpsTest, ScalarConstantsPromoteLikePythonNumbers) {
  // A 0-dim constant promotes as a Python number (engine/common/type_promotion):
  // an int keeps an INT64 tensor INT64, a float makes it FP32 (PyTorch's
  // default float), never a silent truncation.
  Tensor two_i64 = Tensor::Zeros(DType::kInt64, {});
  *two_i64.data<int64_t>() = 2;
  SingleOpGraph g1(OpKind::kMul, {I64({2}, {3, 4}), two_i64}, {}, {1});
  const Tensor y = RunOp(g1)[0];
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_THAT(I64Values(y), ElementsAre(6, 8));
  Tensor half = Tensor::Zeros(DType::kF32, {});
  *half.data<float>() = 0.5f;
  SingleOpGraph g2(OpKind::kMul, {I64({2}, {3, 4}), half}, {}, {1});
  const Tensor z = RunOp(g2)[0];
  EXPECT_EQ(z.dtype(), DType::kF32);
  EXPECT_THAT(Values(z), ElementsAre(1.5, 2));
  // A dimensioned INT64 constant (an arange) added to FP32 input is converted once.
  SingleOpGraph g3(OpKind::kAdd, {F32({2}, {0.5, 0.5}), I64({2}, {1, 2})}, {}, {1});
  EXPECT_THAT(Values(RunOp(g3)[0]), ElementsAre(1.5, 2.5));
}

TEST(CoverageOpsTest, ComparisonsAndWhere) {
  const Tensor x = F32({4}, {-1, 0, 1, NAN});
  Tensor zero = Tensor::Zeros(DType::kF32, {});
  const Tensor gt = RunOp(SingleOpGraph(OpKind::kGreater, {x, zero}, {}, {1}))[0];
  EXPECT_EQ(gt.dtype(), DType::kBool);
  EXPECT_THAT(BoolValues(gt), ElementsAre(false, false, true, false));
  const Tensor w =
      RunOp(SingleOpGraph(OpKind::kWhere, {Bool({4}, {true, false, true, false}), x, zero}, {}, {2}))[0];
  EXPECT_THAT(Values(w), ElementsAre(-1, 0, 1, 0));
}

TEST(CoverageOpsTest, RoundHalfToEvenAndSignOfNan) {
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kRound, {F32({4}, {0.5, 1.5, 2.5, -0.5})}))[0]),
              ElementsAre(0, 2, 2, 0));
  const std::vector<float> s = Values(RunOp(SingleOpGraph(OpKind::kSign, {F32({3}, {-2, 0, NAN})}))[0]);
  EXPECT_EQ(s[0], -1);
  EXPECT_EQ(s[1], 0);
  EXPECT_TRUE(std::isnan(s[2]));
}

TEST(CoverageOpsTest, BitwiseOnIntegersIsNative) {
  SingleOpGraph g(OpKind::kLogicalAnd, {I64({1}, {6}), I64({1}, {3})}, Attrs().Bool("bitwise", true));
  const Tensor y = RunOp(g)[0];
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_THAT(I64Values(y), ElementsAre(2));
}

// ---------------------------------------------------------------- reductions

TEST(CoverageOpsTest, ArgMaxIsTheFirstExtremeAndNanWins) {
  const Tensor x = F32({2, 4}, {1, 3, 3, 2, 1, NAN, 5, NAN});
  const Tensor a = RunOp(SingleOpGraph(OpKind::kArgMax, {x}, Attrs().Int("axis", 1)))[0];
  EXPECT_THAT(I64Values(a), ElementsAre(1, 1));
  const Tensor all = RunOp(SingleOpGraph(OpKind::kArgMin, {F32({4}, {2, 0, 0, 1})}))[0];
  EXPECT_EQ(all.dims(), Dims{});
  EXPECT_THAT(I64Values(all), ElementsAre(1));
}

TEST(CoverageOpsTest, ArgMaxOfBoolServesMaxOverADim) {
  // torch.max(bool [[T, F, T], [F, F, T]], 1).indices == [0, 2]; min's [1, 0].
  const Tensor x = Bool({2, 3}, {true, false, true, false, false, true});
  EXPECT_THAT(I64Values(RunOp(SingleOpGraph(OpKind::kArgMax, {x}, Attrs().Int("axis", 1)))[0]),
              ElementsAre(0, 2));
  EXPECT_THAT(I64Values(RunOp(SingleOpGraph(OpKind::kArgMin, {x}, Attrs().Int("axis", 1)))[0]),
              ElementsAre(1, 0));
}

TEST(CoverageOpsTest, VarianceCorrectionAndInfinityNorm) {
  const Tensor x = F32({4}, {1, 2, 3, 4});
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kVar, {x}))[0]), ElementsAre(5.0f / 3));
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kVar, {x}, Attrs().Float("correction", 0)))[0]),
              ElementsAre(1.25f));
  const Tensor y = F32({3}, {-7, 2, 3});
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kNorm, {y}, Attrs().Float("p", INFINITY)))[0]),
              ElementsAre(7));
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kNorm, {y}, Attrs().Float("p", 0)))[0]), ElementsAre(3));
}

TEST(CoverageOpsTest, SumOfBoolsIsInt64) {
  const Tensor s = RunOp(SingleOpGraph(OpKind::kSum, {Bool({3}, {true, false, true})}))[0];
  EXPECT_EQ(s.dtype(), DType::kInt64);
  EXPECT_THAT(I64Values(s), ElementsAre(2));
}

TEST(CoverageOpsTest, TopKKeepsTiesInIndexOrder) {
  auto out = RunOp(SingleOpGraph(OpKind::kTopK, {F32({5}, {1, 3, 2, 3, 0})}, Attrs().Int("k", 3)));
  EXPECT_THAT(Values(out[0]), ElementsAre(3, 3, 2));
  EXPECT_THAT(I64Values(out[1]), ElementsAre(1, 3, 2));
}

TEST(CoverageOpsTest, SortTakesSmallIntegersAndBool) {
  // torch.argsort(int8 [3, 1, 2, 1]) == [1, 3, 2, 0]; of bool [T, F, T, F] [1, 3, 0, 2].
  Tensor i8 = Tensor::Zeros(DType::kInt8, {4});
  const int8_t v[] = {3, 1, 2, 1};
  std::copy(v, v + 4, i8.data<int8_t>());
  auto out = RunOp(SingleOpGraph(OpKind::kSort, {i8}));
  EXPECT_EQ(out[0].dtype(), DType::kInt8);
  EXPECT_THAT(I64Values(out[1]), ElementsAre(1, 3, 2, 0));
  auto b = RunOp(SingleOpGraph(OpKind::kSort, {Bool({4}, {true, false, true, false})}));
  EXPECT_THAT(BoolValues(b[0]), ElementsAre(false, false, true, true));
  EXPECT_THAT(I64Values(b[1]), ElementsAre(1, 3, 0, 2));
}

// ---------------------------------------------------------------- movement and indexing

TEST(CoverageOpsTest, PadModes) {
  const Tensor x = F32({1, 3}, {1, 2, 3});
  auto pad = [&](const char* mode) {
    return Values(RunOp(SingleOpGraph(OpKind::kPad, {x},
                                    Attrs().Ints("pads", {2, 1}).Str("mode", mode).Float("value", 9)))[0]);
  };
  EXPECT_THAT(pad("constant"), ElementsAre(9, 9, 1, 2, 3, 9));
  EXPECT_THAT(pad("reflect"), ElementsAre(3, 2, 1, 2, 3, 2));
  EXPECT_THAT(pad("replicate"), ElementsAre(1, 1, 1, 2, 3, 3));
  EXPECT_THAT(pad("circular"), ElementsAre(2, 3, 1, 2, 3, 1));
  // Negative constant padding crops.
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kPad, {x}, Attrs().Ints("pads", {-1, 0})))[0]),
              ElementsAre(2, 3));
}

TEST(CoverageOpsTest, ConstantPadOfAnIntegerTensorTruncatesAFractionalValue) {
  // libtorch fills with the value converted to the tensor's dtype, as fill_ does.
  auto pad = [&](const Tensor& x, double value) {
    return RunOp(SingleOpGraph(OpKind::kPad, {x}, Attrs().Ints("pads", {1, 1}).Float("value", value)))[0];
  };
  EXPECT_THAT(I64Values(pad(I64({2}, {5, 6}), 1.5)), ElementsAre(1, 5, 6, 1));
  EXPECT_THAT(I64Values(pad(I64({1}, {5}), -2.7)), ElementsAre(-2, 5, -2));
  EXPECT_THAT(BoolValues(pad(Bool({1}, {false}), 0.5)), ElementsAre(true, false, true));
}

TEST(CoverageOpsTest, ChunkPiecesFollowTorchChunk) {
  const Tensor x = F32({5}, {0, 1, 2, 3, 4});
  auto piece = [&](int64_t chunks, int64_t index) {
    return SingleOpGraph(OpKind::kChunk, {x}, Attrs().Int("chunks", chunks).Int("index", index));
  };
  EXPECT_THAT(Values(RunOp(piece(3, 2))[0]), ElementsAre(4));
  // 5 elements in 4 chunks: pieces of 2 give only 3 chunks.
  EXPECT_THAT(Values(RunOp(piece(4, 2))[0]), ElementsAre(4));
  EXPECT_EQ(piece(4, 3).Prepare().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoverageOpsTest, PermuteForms) {
  const Tensor x = F32({1, 2, 3}, {0, 1, 2, 3, 4, 5});
  const Tensor t = RunOp(SingleOpGraph(OpKind::kPermute, {x}, Attrs().Int("dim0", -1).Int("dim1", 1)))[0];
  EXPECT_EQ(t.dims(), (Dims{1, 3, 2}));
  EXPECT_THAT(Values(t), ElementsAre(0, 3, 1, 4, 2, 5));
  const Tensor m = RunOp(SingleOpGraph(OpKind::kPermute, {x},
                                     Attrs().Ints("source", {0}).Ints("destination", {-1})))[0];
  EXPECT_EQ(m.dims(), (Dims{2, 3, 1}));
}

TEST(CoverageOpsTest, AdvancedIndexingLayout) {
  // x[i, :, j] with index tensors on non-adjacent dims: the index shape leads.
  Tensor x = Tensor::Zeros(DType::kF32, {2, 3, 4});
  for (int64_t k = 0; k < 24; ++k) x.data<float>()[k] = static_cast<float>(k);
  SingleOpGraph g(OpKind::kIndex, {x, I64({2}, {1, 0}), Absent(), I64({2}, {3, -1})});
  const Tensor y = RunOp(g)[0];
  EXPECT_EQ(y.dims(), (Dims{2, 3}));
  EXPECT_THAT(Values(y), ElementsAre(15, 19, 23, 3, 7, 11));
  // Adjacent index dims stay in place: x[:, i] keeps the leading dim.
  SingleOpGraph h(OpKind::kIndex, {x, Absent(), I64({1}, {2})});
  EXPECT_EQ(RunOp(h)[0].dims(), (Dims{2, 1, 4}));
}

TEST(CoverageOpsTest, IndexOutOfRangeFailsTheRequest) {
  SingleOpGraph g(OpKind::kIndexSelect, {F32({3}, {1, 2, 3}), I64({1}, {3})});
  auto out = g.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("index 3 is out of bounds"));
}

TEST(CoverageOpsTest, SliceScatterWritesThroughASlice) {
  const Tensor base = F32({2, 3}, {0, 0, 0, 0, 0, 0});
  const Tensor src = F32({2, 2}, {1, 2, 3, 4});
  const Tensor y = RunOp(SingleOpGraph(OpKind::kSliceScatter, {base, src},
                                     Attrs().Int("axis", 1).Int("start", 1)))[0];
  EXPECT_THAT(Values(y), ElementsAre(0, 1, 2, 0, 3, 4));
  const Tensor z = RunOp(SingleOpGraph(OpKind::kSliceScatter, {base, F32({3}, {7, 8, 9})},
                                     Attrs().Int("axis", 0).Int("index", -1)))[0];
  EXPECT_THAT(Values(z), ElementsAre(0, 0, 0, 7, 8, 9));
}

TEST(CoverageOpsTest, ScatterReplacesOrReducesAlongTheAxis) {
  const Tensor self = F32({2, 3}, {1, 1, 1, 1, 1, 1});
  const Tensor index = I64({2, 2}, {0, 2, 1, 1});
  const Tensor src = F32({2, 3}, {5, 6, 9, 7, 8, 9});  // wider than index: its last column unread
  auto scatter = [&](const std::string& reduce, bool include_self) {
    return Values(RunOp(SingleOpGraph(
        OpKind::kScatter, {self, index, src},
        Attrs().Int("axis", 1).Str("reduce", reduce).Bool("include_self", include_self)))[0]);
  };
  EXPECT_THAT(scatter("none", true), ElementsAre(5, 1, 6, 1, 8, 1));  // ties: the last one wins
  EXPECT_THAT(scatter("sum", true), ElementsAre(6, 1, 7, 1, 16, 1));
  EXPECT_THAT(scatter("sum", false), ElementsAre(5, 1, 6, 1, 15, 1));
  EXPECT_THAT(scatter("prod", true), ElementsAre(5, 1, 6, 1, 56, 1));
  EXPECT_THAT(scatter("mean", true), ElementsAre(3, 1, 3.5, 1, 16.0f / 3, 1));
  EXPECT_THAT(scatter("mean", false), ElementsAre(5, 1, 6, 1, 7.5, 1));
  EXPECT_THAT(scatter("amax", false), ElementsAre(5, 1, 6, 1, 8, 1));
  EXPECT_THAT(scatter("amin", true), ElementsAre(1, 1, 1, 1, 1, 1));
  // A 0-D src (scatter's value) writes the same number everywhere the index points.
  const Tensor y = RunOp(SingleOpGraph(OpKind::kScatter, {self, index, F32({}, {-2})},
                                       Attrs().Int("axis", 1)))[0];
  EXPECT_THAT(Values(y), ElementsAre(-2, 1, -2, 1, -2, 1));
  // Integers: the mean divides with floor, as PyTorch's integer scatter_reduce does.
  const Tensor m = RunOp(SingleOpGraph(OpKind::kScatter,
                                       {I64({1, 2}, {0, 0}), I64({1, 2}, {0, 0}), I64({1, 2}, {-3, 0})},
                                       Attrs().Int("axis", 1).Str("reduce", "mean")))[0];
  EXPECT_THAT(I64Values(m), ElementsAre(-1, 0));
}

TEST(CoverageOpsTest, ScatterRefusesIndicesOutsideTheDim) {
  for (int64_t bad : {3, -1}) {  // PyTorch's scatter does not wrap negative indices either
    SingleOpGraph g(OpKind::kScatter, {F32({3}, {0, 0, 0}), I64({1}, {bad}), F32({1}, {1})},
                    Attrs().Int("axis", 0));
    auto out = g.Run();
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("is out of bounds"));
  }
  SingleOpGraph wide(OpKind::kScatter, {F32({2, 2}, {0, 0, 0, 0}), I64({3, 1}, {0, 0, 0}),
                                        F32({3, 1}, {1, 2, 3})},
                     Attrs().Int("axis", 1));
  EXPECT_FALSE(wide.Run().ok());  // index taller than self outside the axis
}

TEST(CoverageOpsTest, IndexPutWritesThroughIndicesOrAMask) {
  const Tensor x = F32({3, 2}, {0, 1, 2, 3, 4, 5});
  // x[[2, 0]] = [[7, 8]] (a row broadcast to both), and += with a repeated index.
  const Tensor rows = RunOp(SingleOpGraph(OpKind::kIndexPut, {x, F32({1, 2}, {7, 8}), I64({2}, {2, 0})}))[0];
  EXPECT_THAT(Values(rows), ElementsAre(7, 8, 2, 3, 7, 8));
  const Tensor acc = RunOp(SingleOpGraph(OpKind::kIndexPut, {x, F32({}, {1}), I64({3}, {1, 1, -1})},
                                         Attrs().Bool("accumulate", true)))[0];
  EXPECT_THAT(Values(acc), ElementsAre(0, 1, 4, 5, 5, 6));
  // x[mask] = v: as many rows as the mask holds, known only when it runs.
  Tensor mask = Tensor::Zeros(DType::kBool, {3});
  mask.data<bool>()[0] = mask.data<bool>()[2] = true;
  const Tensor masked = RunOp(SingleOpGraph(OpKind::kIndexPut, {x, F32({2, 1}, {-1, -2}), mask}))[0];
  EXPECT_THAT(Values(masked), ElementsAre(-1, -1, 2, 3, -2, -2));
  // Values of the wrong count for the mask, or a mask of the wrong shape, fail.
  EXPECT_FALSE(SingleOpGraph(OpKind::kIndexPut, {x, F32({3, 1}, {1, 2, 3}), mask}).Run().ok());
  EXPECT_FALSE(SingleOpGraph(OpKind::kIndexPut, {x, F32({}, {1}), Tensor::Zeros(DType::kBool, {2})})
                   .Run()
                   .ok());
  auto out = SingleOpGraph(OpKind::kIndexPut, {x, F32({}, {1}), I64({1}, {3})}).Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("is out of bounds"));
}

TEST(CoverageOpsTest, RepeatInterleaveAndTileLikeTorch) {
  const Tensor x = F32({2, 2}, {1, 2, 3, 4});
  const Tensor r = RunOp(SingleOpGraph(OpKind::kRepeatInterleave, {x},
                                       Attrs().Int("repeats", 2).Int("axis", -1)))[0];
  EXPECT_EQ(r.dims(), (Dims{2, 4}));
  EXPECT_THAT(Values(r), ElementsAre(1, 1, 2, 2, 3, 3, 4, 4));
  const Tensor r0 = RunOp(SingleOpGraph(OpKind::kRepeatInterleave, {x},
                                        Attrs().Int("repeats", 2).Int("axis", 0)))[0];
  EXPECT_THAT(Values(r0), ElementsAre(1, 2, 1, 2, 3, 4, 3, 4));
  // torch.tile pads fewer repeats than dims with 1s in front; torch.repeat refuses them.
  const Tensor t = RunOp(SingleOpGraph(OpKind::kTile, {x},
                                       Attrs().Ints("repeats", {2}).Bool("pad_repeats", true)))[0];
  EXPECT_EQ(t.dims(), (Dims{2, 4}));
  EXPECT_THAT(Values(t), ElementsAre(1, 2, 1, 2, 3, 4, 3, 4));
  EXPECT_FALSE(SingleOpGraph(OpKind::kTile, {x}, Attrs().Ints("repeats", {2})).Run().ok());
}

TEST(CoverageOpsTest, NanToNumUsesTheDtypesOwnLimits) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = F32({4}, {std::nanf(""), inf, -inf, 1.5});
  const Tensor y = RunOp(SingleOpGraph(OpKind::kNanToNum, {x}))[0];
  EXPECT_THAT(Values(y), ElementsAre(0, std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::lowest(), 1.5));
  const Tensor z = RunOp(SingleOpGraph(OpKind::kNanToNum, {x},
                                       Attrs().Float("nan", 9).Float("posinf", 1e6)))[0];
  EXPECT_THAT(Values(z), ElementsAre(9, 1e6, std::numeric_limits<float>::lowest(), 1.5));
  // FP16 runs in its own kernel: its largest finite value is 65504, not float32's.
  const Tensor h = RunOp(SingleOpGraph(OpKind::kNanToNum, {testing::ConvertedTensor(x, DType::kF16)}))[0];
  ASSERT_EQ(h.dtype(), DType::kF16);
  std::vector<float> half_values;
  for (int k = 0; k < 4; ++k) half_values.push_back(HalfToFloat(h.data<uint16_t>()[k]));
  EXPECT_THAT(half_values, ElementsAre(0, 65504, -65504, 1.5));
  // Integers pass through.
  EXPECT_THAT(I64Values(RunOp(SingleOpGraph(OpKind::kNanToNum, {I64({2}, {7, -7})}))[0]),
              ElementsAre(7, -7));
}

// NonZero: NaN counts, -0.0 does not, row-major order; a 0-dim input gives
// [0 or 1, 0]. IndexMask: x[:, mask] keeps the trailing dims, and a mask whose
// dims are not the ones it indexes is refused with PyTorch's message.
TEST(CoverageOpsTest, NonZeroAndMaskIndexing) {
  const Tensor x = F32({2, 3}, {0, std::nanf(""), -0.0f, 2, 0, -1});
  const Tensor nz = RunOp(SingleOpGraph(OpKind::kNonZero, {x}))[0];
  ASSERT_EQ(nz.dims(), (Dims{3, 2}));
  EXPECT_THAT(I64Values(nz), ElementsAre(0, 1, 1, 0, 1, 2));
  const Tensor scalar = RunOp(SingleOpGraph(OpKind::kNonZero, {F32({}, {0})}))[0];
  EXPECT_EQ(scalar.dims(), (Dims{0, 0}));
  const Tensor y = F32({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor m = RunOp(SingleOpGraph(OpKind::kIndexMask, {y, Bool({3}, {true, false, true})},
                                       Attrs().Int("axis", 1)))[0];
  ASSERT_EQ(m.dims(), (Dims{2, 2, 2}));
  EXPECT_THAT(Values(m), ElementsAre(0, 1, 4, 5, 6, 7, 10, 11));
  const Tensor off = Bool({2, 3}, {false, false, false, false, false, false});
  const Tensor none = RunOp(SingleOpGraph(OpKind::kIndexMask, {y, off}))[0];
  EXPECT_EQ(none.dims(), (Dims{0, 2}));
  const absl::StatusOr<std::vector<Tensor>> wrong =
      SingleOpGraph(OpKind::kIndexMask, {y, Bool({2}, {true, true})}, Attrs().Int("axis", 1)).Run();
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()),
              HasSubstr("The shape of the mask [2] at index 0 does not match the shape of the "
                        "indexed tensor [2, 3, 2] at index 1"));
}

// ---------------------------------------------------------------- casts, resampling, nn

TEST(CoverageOpsTest, CastsTruncateAndWrapLikePyTorch) {
  const Tensor x = F32({4}, {-1.5, 2.7, 300, 0});
  const Tensor u8 = RunOp(SingleOpGraph(OpKind::kCast, {x}, Attrs().Str("dtype", "UINT8")))[0];
  EXPECT_THAT(std::vector<int>(u8.data<uint8_t>(), u8.data<uint8_t>() + 4), ElementsAre(255, 2, 44, 0));
  const Tensor b = RunOp(SingleOpGraph(OpKind::kCast, {x}, Attrs().Str("dtype", "BOOL")))[0];
  EXPECT_THAT(BoolValues(b), ElementsAre(true, true, true, false));
}

TEST(CoverageOpsTest, ResizeCoordinateRules) {
  const Tensor x = F32({1, 1, 2}, {0, 1});
  auto resize = [&](ir::Attributes attrs) { return Values(RunOp(SingleOpGraph(OpKind::kResize, {x}, attrs))[0]); };
  EXPECT_THAT(resize(Attrs().Str("mode", "nearest").Ints("sizes", {4})), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(resize(Attrs().Str("mode", "linear").Bool("align_corners", true).Ints("sizes", {4})),
              ElementsAre(0, 1.0f / 3, 2.0f / 3, 1));
  // Half-pixel centres, clamped at the border.
  EXPECT_THAT(resize(Attrs().Str("mode", "linear").Ints("sizes", {4})), ElementsAre(0, 0.25, 0.75, 1));
}

// BF16 bicubic rounds at every step as libtorch 1.13 does: the expected
// values are libtorch's own (F.interpolate of this BF16 input), and each
// case differs from the FP32 result rounded once in most elements.
TEST(CoverageOpsTest, BicubicInBFloat16RoundsAsLibtorch) {
  const std::vector<float> in = {-2.5, 1.25, 3.0, -0.75, 0.5, 4.5, -3.25, 2.0, 1.75, -1.5, 0.25, 5.0};
  Tensor x = Tensor::Zeros(DType::kBF16, {1, 1, 3, 4});
  for (size_t i = 0; i < in.size(); ++i) x.data<uint16_t>()[i] = FloatToBF16(in[i]);
  auto resize = [&](Attrs attrs) {
    const Tensor y = RunOp(SingleOpGraph(OpKind::kResize, {x}, attrs.Str("mode", "cubic")))[0];
    EXPECT_EQ(y.dtype(), DType::kBF16);
    std::vector<float> v;
    for (int64_t i = 0; i < y.num_elements(); ++i) v.push_back(BF16ToFloat(y.data<uint16_t>()[i]));
    return v;
  };
  EXPECT_THAT(resize(Attrs().Ints("sizes", {5, 6})),
              ElementsAreArray<float>(
                  {-3.171875,  -1.2109375, 1.6640625,   3.625,      1.5078125,  -1.390625,
                   -1.734375,  1.03125,    2.859375,    0.6484375,  0.048828125, 0.326171875,
                   0.14453125, 3.21875,    3.625,       -2.5625,    -1.3046875, 2.40625,
                   1.5390625,  1.484375,   0.494140625, -1.6328125, 1.0625,     4.40625,
                   2.28125,    -0.392578125, -2.234375, -0.2001953125, 3.21875, 5.5625}));
  EXPECT_THAT(resize(Attrs().Bool("align_corners", true).Ints("sizes", {4, 7})),
              ElementsAreArray<float>(
                  {-2.5,       -0.7890625, 1.25,      2.8125,       3.0,         1.2890625,
                   -0.75,      -0.6328125, 2.296875,  4.15625,      1.5,         -1.609375,
                   -0.9453125, 0.796875,   1.2109375, 2.625,        2.96875,     -0.33203125,
                   -2.828125,  -0.345703125, 3.21875, 1.7578125,    -0.039306640625, -1.5078125,
                   -1.3828125, 0.25,       2.796875,  5.03125}));
  EXPECT_THAT(resize(Attrs().Floats("scales", {1.5, 1.5})),
              ElementsAreArray<float>(
                  {-3.265625, -1.1875,   1.765625,     3.65625,  1.53125,   -1.3828125,
                   -1.5703125, 1.515625, 3.25,         0.049072265625, -0.416015625, 0.404296875,
                   0.6328125, 3.09375,   3.046875,     -2.703125, -0.9609375, 3.03125,
                   1.7578125, 0.458984375, -0.81640625, -0.72265625, 2.203125, 4.875}));
}

TEST(CoverageOpsTest, ConvTransposeScattersEachInput) {
  // 1-D: y = x[0] * w placed at 0 plus x[1] * w placed at 1.
  const Tensor y = RunOp(SingleOpGraph(OpKind::kConvTranspose,
                                     {F32({1, 1, 2}, {1, 2}), F32({1, 1, 2}, {1, 1})}, {}, {1}))[0];
  EXPECT_EQ(y.dims(), (Dims{1, 1, 3}));
  EXPECT_THAT(Values(y), ElementsAre(1, 3, 2));
}

TEST(CoverageOpsTest, InstanceNormIsGroupNormPerChannel) {
  const Tensor x = F32({1, 2, 2}, {1, 3, 10, 30});
  const std::vector<float> y =
      Values(RunOp(SingleOpGraph(OpKind::kGroupNorm, {x}, Attrs().Int("groups", -1).Float("eps", 0)))[0]);
  EXPECT_THAT(y, ElementsAre(-1, 1, -1, 1));
}

TEST(CoverageOpsTest, EinsumDiagonalAndImplicitOutput) {
  const Tensor m = F32({2, 2}, {1, 2, 3, 4});
  EXPECT_THAT(Values(RunOp(SingleOpGraph(OpKind::kEinsum, {m}, Attrs().Str("equation", "ii->i")))[0]),
              ElementsAre(1, 4));
  // Implicit output: the labels used once, sorted ("ba" -> "ab").
  const Tensor t = RunOp(SingleOpGraph(OpKind::kEinsum, {m}, Attrs().Str("equation", "ba")))[0];
  EXPECT_THAT(Values(t), ElementsAre(1, 3, 2, 4));
}

}  // namespace
}  // namespace kiln::kernels
