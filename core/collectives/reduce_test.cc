#include "core/collectives/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/common/half.h"
#include "gtest/gtest.h"

namespace hvd::collectives {
namespace {

template <typename T>
std::vector<T> ReduceOf(std::vector<T> dst, const std::vector<T>& src,
                        DataType dtype, ReduceOp op) {
  Reduce(dst.data(), src.data(), dst.size(), dtype, op);
  return dst;
}

// Operands whose sums float32 and float64 cannot hold exactly.
struct Awkward {
  std::vector<float> a, b;
  std::vector<double> c, d;
};

Awkward AwkwardValues() {
  Awkward v;
  for (int i = 0; i < 1000; ++i) {
    v.a.push_back(1.0f / (i + 1) + 1e7f * (i % 3));
    v.b.push_back(std::sqrt(static_cast<float>(i)) - 3.3f);
    v.c.push_back(1.0 / (i + 7) + 1e15 * (i % 5));
    v.d.push_back(std::cbrt(static_cast<double>(i)) * -0.7);
  }
  return v;
}

// The fused kernel must round exactly like Reduce then Scale: on awkward
// values (non-representable sums, a factor of 1/3) every bit agrees.
TEST(ReduceAndScale, MatchesReduceThenScaleBitForBit) {
  const auto [a, b, c, d] = AwkwardValues();
  for (auto [factor, divisor] : std::vector<std::pair<double, int>>{
           {1.0 / 3, 1}, {0.5, 1}, {-2.75, 1}, {1.0, 3}, {-2.75, 7}}) {
    std::vector<float> fused = a, split = a;
    ReduceAndScale(fused.data(), b.data(), a.size(), DataType::kFloat32,
                   ReduceOp::kSum, factor, divisor);
    Reduce(split.data(), b.data(), a.size(), DataType::kFloat32,
           ReduceOp::kSum);
    Postscale(split.data(), a.size(), DataType::kFloat32, factor, divisor);
    EXPECT_EQ(std::memcmp(fused.data(), split.data(), a.size() * 4), 0);
    std::vector<double> fused64 = c, split64 = c;
    ReduceAndScale(fused64.data(), d.data(), c.size(), DataType::kFloat64,
                   ReduceOp::kSum, factor, divisor);
    Reduce(split64.data(), d.data(), c.size(), DataType::kFloat64,
           ReduceOp::kSum);
    Postscale(split64.data(), c.size(), DataType::kFloat64, factor, divisor);
    EXPECT_EQ(std::memcmp(fused64.data(), split64.data(), c.size() * 8), 0);
    // Other dtypes and ops take the two-call path.
    std::vector<int32_t> ints = {7, -9, 100}, more = {1, 2, 3};
    ReduceAndScale(ints.data(), more.data(), 3, DataType::kInt32,
                   ReduceOp::kMax, factor, divisor);
    std::vector<int32_t> want = {7, 2, 100};
    Postscale(want.data(), 3, DataType::kInt32, factor, divisor);
    EXPECT_EQ(ints, want);
  }
}

// Out of place must give what Reduce gives on a copy of the own operand,
// bit for bit, and leave both inputs as they were.
TEST(ReduceInto, MatchesReduceOnACopyAndLeavesTheInputs) {
  const auto [own, src, own64, src64] = AwkwardValues();
  const std::vector<float> own_before = own, src_before = src;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct}) {
    std::vector<float> out(own.size(), -1.0f);
    ReduceInto(out.data(), own.data(), src.data(), own.size(),
               DataType::kFloat32, op);
    EXPECT_EQ(out, ReduceOf(own, src, DataType::kFloat32, op));
    std::vector<double> out64(own64.size(), -1.0);
    ReduceInto(out64.data(), own64.data(), src64.data(), own64.size(),
               DataType::kFloat64, op);
    EXPECT_EQ(out64, ReduceOf(own64, src64, DataType::kFloat64, op));
  }
  EXPECT_EQ(own, own_before);
  EXPECT_EQ(src, src_before);
  std::vector<int8_t> a = {100, -7}, b = {100, 3}, out = {0, 0};
  ReduceInto(out.data(), a.data(), b.data(), 2, DataType::kInt8,
             ReduceOp::kSum);
  EXPECT_EQ(out, ReduceOf(a, b, DataType::kInt8, ReduceOp::kSum));
}

TEST(Reduce, Int8SumWraps) {
  EXPECT_EQ(ReduceOf<int8_t>({127, -128, 100}, {1, -1, 100}, DataType::kInt8,
                             ReduceOp::kSum),
            (std::vector<int8_t>{-128, 127, -56}));
}

TEST(Reduce, Uint16ProductWrapsWithoutPromotionOverflow) {
  // 65535 * 65535 overflows int, the type uint16 promotes to.
  EXPECT_EQ(ReduceOf<uint16_t>({65535, 300}, {65535, 300}, DataType::kUint16,
                               ReduceOp::kProduct),
            (std::vector<uint16_t>{1, static_cast<uint16_t>(90000)}));
}

TEST(Reduce, Int16ProductWraps) {
  EXPECT_EQ(ReduceOf<int16_t>({-32768, 300}, {-1, 300}, DataType::kInt16,
                              ReduceOp::kProduct),
            (std::vector<int16_t>{-32768, static_cast<int16_t>(90000)}));
}

TEST(Reduce, Int32AndInt64SumWrap) {
  EXPECT_EQ(ReduceOf<int32_t>({std::numeric_limits<int32_t>::max()}, {1},
                              DataType::kInt32, ReduceOp::kSum),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(ReduceOf<int64_t>({std::numeric_limits<int64_t>::min()}, {-1},
                              DataType::kInt64, ReduceOp::kSum),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max()}));
}

TEST(Reduce, Int64ProductWraps) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(ReduceOf<int64_t>({big, -3}, {4, 5}, DataType::kInt64,
                              ReduceOp::kProduct),
            (std::vector<int64_t>{0, -15}));
}

TEST(Reduce, MinMaxSignedAndUnsigned) {
  EXPECT_EQ(ReduceOf<int32_t>({-5, 7, 0}, {3, -9, 0}, DataType::kInt32,
                              ReduceOp::kMin),
            (std::vector<int32_t>{-5, -9, 0}));
  EXPECT_EQ(ReduceOf<uint8_t>({5, 200, 0}, {3, 255, 0}, DataType::kUint8,
                              ReduceOp::kMax),
            (std::vector<uint8_t>{5, 255, 0}));
  EXPECT_EQ(ReduceOf<double>({-1.5, 2.0}, {-2.5, 1.0}, DataType::kFloat64,
                             ReduceOp::kMax),
            (std::vector<double>{-1.5, 2.0}));
}

TEST(Reduce, Float32EveryOp) {
  const std::vector<float> a = {1.5f, -2.0f, 3.0f}, b = {2.0f, 4.0f, -1.0f};
  EXPECT_EQ(ReduceOf(a, b, DataType::kFloat32, ReduceOp::kSum),
            (std::vector<float>{3.5f, 2.0f, 2.0f}));
  EXPECT_EQ(ReduceOf(a, b, DataType::kFloat32, ReduceOp::kProduct),
            (std::vector<float>{3.0f, -8.0f, -3.0f}));
  EXPECT_EQ(ReduceOf(a, b, DataType::kFloat32, ReduceOp::kMin),
            (std::vector<float>{1.5f, -2.0f, -1.0f}));
  EXPECT_EQ(ReduceOf(a, b, DataType::kFloat32, ReduceOp::kMax),
            (std::vector<float>{2.0f, 4.0f, 3.0f}));
}

TEST(Reduce, BoolIsOrForSumAndMaxAndForProductAndMin) {
  // Any non-zero byte is true; results are normalised to 0/1.
  const std::vector<uint8_t> a = {0, 0, 1, 2}, b = {0, 1, 0, 1};
  EXPECT_EQ(ReduceOf(a, b, DataType::kBool, ReduceOp::kSum),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(ReduceOf(a, b, DataType::kBool, ReduceOp::kMax),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(ReduceOf(a, b, DataType::kBool, ReduceOp::kProduct),
            (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(ReduceOf(a, b, DataType::kBool, ReduceOp::kMin),
            (std::vector<uint8_t>{0, 0, 0, 1}));
}

TEST(Reduce, Float16RoundsOnceToNearestEven) {
  // 2048 + 1 is a tie between 2048 and 2050: even mantissa wins.
  // 2048 + 3 = 2051 ties between 2050 and 2052: 2052.
  std::vector<uint16_t> a = {FloatToHalf(2048), FloatToHalf(2048)};
  std::vector<uint16_t> b = {FloatToHalf(1), FloatToHalf(3)};
  const auto sum = ReduceOf(a, b, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(HalfToFloat(sum[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(sum[1]), 2052.0f);
}

TEST(Reduce, BFloat16ComputesInFloat) {
  std::vector<uint16_t> a = {FloatToBFloat16(256), FloatToBFloat16(1.5f)};
  std::vector<uint16_t> b = {FloatToBFloat16(1), FloatToBFloat16(-4)};
  const auto sum = ReduceOf(a, b, DataType::kBFloat16, ReduceOp::kSum);
  EXPECT_EQ(BFloat16ToFloat(sum[0]), 256.0f);  // 257 ties to even 256.
  EXPECT_EQ(BFloat16ToFloat(sum[1]), -2.5f);
  const auto prod = ReduceOf(a, b, DataType::kBFloat16, ReduceOp::kProduct);
  EXPECT_EQ(BFloat16ToFloat(prod[0]), 256.0f);
  EXPECT_EQ(BFloat16ToFloat(prod[1]), -6.0f);
}

// The vector paths (F16C / AVX2 where the CPU has them) must give exactly
// what converting each element with core/common/half.h gives, for every
// length (vector body plus scalar tail) and op.
void ExpectMatchesScalarReference(DataType dtype, float (*to_float)(uint16_t),
                                  uint16_t (*from_float)(float)) {
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin,
                          ReduceOp::kMax};
  for (ReduceOp op : ops) {
    for (size_t n = 0; n < 40; ++n) {
      std::vector<uint16_t> a(n), b(n), want(n);
      for (size_t i = 0; i < n; ++i) {
        const float x = (static_cast<float>(i) - 17.3f) * 0.37f;
        const float y = 1.0f + static_cast<float>(i % 7) * 0.011f;
        a[i] = from_float(x);
        b[i] = from_float(y);
        const float fa = to_float(a[i]), fb = to_float(b[i]);
        float r = 0;
        switch (op) {
          case ReduceOp::kSum:
            r = fa + fb;
            break;
          case ReduceOp::kProduct:
            r = fa * fb;
            break;
          case ReduceOp::kMin:
            r = fb < fa ? fb : fa;
            break;
          default:
            r = fa < fb ? fb : fa;
            break;
        }
        want[i] = from_float(r);
      }
      EXPECT_EQ(ReduceOf(a, b, dtype, op), want)
          << DataTypeName(dtype) << " n=" << n << " op=" << ReduceOpName(op);
    }
  }
}

TEST(Reduce, Float16MatchesScalarReferenceForAllLengthsAndOps) {
  ExpectMatchesScalarReference(DataType::kFloat16, HalfToFloat, FloatToHalf);
}

TEST(Reduce, BFloat16MatchesScalarReferenceForAllLengthsAndOps) {
  ExpectMatchesScalarReference(DataType::kBFloat16, BFloat16ToFloat,
                               FloatToBFloat16);
}

TEST(Reduce, BFloat16NaNStaysNaN) {
  const uint16_t nan = 0x7fc0;
  std::vector<uint16_t> a(9, nan), b(9, FloatToBFloat16(1.0f));
  for (uint16_t x : ReduceOf(a, b, DataType::kBFloat16, ReduceOp::kSum)) {
    EXPECT_TRUE(std::isnan(BFloat16ToFloat(x)));
  }
}

TEST(Reduce, Float16SubnormalsAndOverflow) {
  const uint16_t tiny = 0x0001;  // Smallest subnormal.
  std::vector<uint16_t> a(16, tiny), b(16, tiny);
  a[15] = b[15] = FloatToHalf(60000.0f);
  const auto sum = ReduceOf(a, b, DataType::kFloat16, ReduceOp::kSum);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(sum[i], 0x0002) << i;
  EXPECT_EQ(sum[15], 0x7c00);  // +inf
}

TEST(Reduce, ZeroCountTouchesNothing) {
  int32_t dst = 5, src = 7;
  Reduce(&dst, &src, 0, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(dst, 5);
}

TEST(Scale, IntegersTruncateTowardZero) {
  std::vector<int32_t> v = {-7, 7, 3};
  Scale(v.data(), v.size(), DataType::kInt32, 0.5);
  EXPECT_EQ(v, (std::vector<int32_t>{-3, 3, 1}));
}

TEST(Scale, IntegersSaturateInsteadOfOverflowing) {
  std::vector<int8_t> v = {100, -100, 1};
  Scale(v.data(), v.size(), DataType::kInt8, 3.0);
  EXPECT_EQ(v, (std::vector<int8_t>{127, -128, 3}));
  std::vector<uint8_t> u = {10, 200};
  Scale(u.data(), u.size(), DataType::kUint8, -1.0);
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
}

TEST(Scale, FloatsAndHalves) {
  std::vector<double> d = {1.0, -3.0};
  Scale(d.data(), d.size(), DataType::kFloat64, 0.25);
  EXPECT_EQ(d, (std::vector<double>{0.25, -0.75}));
  std::vector<float> f = {2.0f, 6.0f};
  Scale(f.data(), f.size(), DataType::kFloat32, 1.0 / 3.0);
  EXPECT_EQ(f[0], static_cast<float>(2.0 / 3.0));
  EXPECT_EQ(f[1], 2.0f);
  std::vector<uint16_t> h(19, FloatToHalf(3.0f));  // Vector body + tail.
  Scale(h.data(), h.size(), DataType::kFloat16, 0.5);
  for (uint16_t x : h) EXPECT_EQ(HalfToFloat(x), 1.5f);
  std::vector<uint16_t> bf = {FloatToBFloat16(3.0f)};
  Scale(bf.data(), bf.size(), DataType::kBFloat16, 0.5);
  EXPECT_EQ(BFloat16ToFloat(bf[0]), 1.5f);
}

// Horovod scales a float32 tensor by the factor rounded to float, in float
// arithmetic; Horovod's own tests compare with no tolerance. A product taken
// in double and rounded once differs in the last bit for some values, which
// this test makes sure it meets.
TEST(Scale, Float32IsScaledInFloatArithmetic) {
  const double factor = 0.7315579438247585;  // not a float
  std::vector<float> f(1000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = -50.0f + 0.37f * i;
  std::vector<float> fused = f, other(f.size(), 0.0f);
  Scale(f.data(), f.size(), DataType::kFloat32, factor);
  ReduceAndScale(fused.data(), other.data(), fused.size(),
                 DataType::kFloat32, ReduceOp::kSum, factor, 1);
  int differs_in_double = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const float x = -50.0f + 0.37f * i;
    const float want = x * static_cast<float>(factor);
    EXPECT_EQ(f[i], want) << "x=" << x;
    EXPECT_EQ(fused[i], want) << "x=" << x;
    differs_in_double +=
        static_cast<float>(static_cast<double>(x) * factor) != want;
  }
  EXPECT_GT(differs_in_double, 0);
}

TEST(Scale, BoolKeepsTruthUnlessFactorIsZero) {
  std::vector<uint8_t> v = {0, 1, 3};
  Scale(v.data(), v.size(), DataType::kBool, 0.5);
  EXPECT_EQ(v, (std::vector<uint8_t>{0, 1, 1}));
  Scale(v.data(), v.size(), DataType::kBool, 0.0);
  EXPECT_EQ(v, (std::vector<uint8_t>{0, 0, 0}));
}


// An Average divides: torch's and numpy's own sum / N, which the frameworks'
// tests compare with no tolerance. Multiplying by 1/N instead gives
// 194 * 0.33333334f = 64.66667f, not 194 / 3 = 64.666664f.
TEST(Divide, FloatTypesGiveTheCorrectlyRoundedQuotient) {
  std::vector<float> f = {194.0f, -172.0f, 1.0f, 0.0f};
  Divide(f.data(), f.size(), DataType::kFloat32, 3);
  EXPECT_EQ(f, (std::vector<float>{194.0f / 3, -172.0f / 3, 1.0f / 3, 0.0f}));
  EXPECT_NE(194.0f / 3, 194.0f * static_cast<float>(1.0 / 3));
  std::vector<double> d = {1e300, 7.0};
  Divide(d.data(), d.size(), DataType::kFloat64, 3);
  EXPECT_EQ(d, (std::vector<double>{1e300 / 3, 7.0 / 3}));
  std::vector<uint16_t> h = {FloatToHalf(97.0f)};
  Divide(h.data(), h.size(), DataType::kFloat16, 3);
  EXPECT_EQ(h[0], FloatToHalf(97.0f / 3));
}

TEST(Divide, IntegerTypesTruncateTowardZeroExactly) {
  std::vector<int32_t> i = {-7, 7, 6, -6, 2};
  Divide(i.data(), i.size(), DataType::kInt32, 3);
  EXPECT_EQ(i, (std::vector<int32_t>{-2, 2, 2, -2, 0}));
  // Past 2^53, where a quotient taken in double would be off.
  std::vector<int64_t> big = {9007199254740993LL * 3};
  Divide(big.data(), big.size(), DataType::kInt64, 3);
  EXPECT_EQ(big[0], 9007199254740993LL);
  std::vector<uint8_t> u = {255};
  Divide(u.data(), u.size(), DataType::kUint8, 2);
  EXPECT_EQ(u[0], 127);
}

}  // namespace
}  // namespace hvd::collectives
