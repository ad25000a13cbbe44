// The .npy format: "\x93NUMPY", a major and minor version byte, the header
// length (uint16 for 1.0, uint32 for 2.0/3.0, little-endian), then an ASCII
// Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by '\n' so the data starts 64-byte aligned,
// then the raw C-ordered data. The header parser below accepts exactly that
// dict grammar: string keys mapped to a string, True/False or an int tuple.
#include "client/npy.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"

namespace kiln::client {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";

struct DescrEntry {
  absl::string_view descr;
  DType dtype;
};

// Written with the first spelling; '=' (native, little-endian here) and '<'
// for single bytes are also read, as other writers emit them.
constexpr DescrEntry kDescrs[] = {
    {"<f4", DType::kF32},   {"<f8", DType::kF64},   {"<f2", DType::kF16},
    {"<i8", DType::kInt64}, {"<i4", DType::kInt32}, {"<i2", DType::kInt16},
    {"|i1", DType::kInt8},  {"|u1", DType::kUInt8}, {"|b1", DType::kBool},
};

absl::Status NpyError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("npy: ", what));
}

absl::StatusOr<DType> DTypeFromDescr(const std::string& descr) {
  if (descr.size() == 3 && descr[0] == '>' && descr[2] != '1') {
    return NpyError(
        absl::StrCat("big-endian dtype '", descr,
                     "' is not supported; save arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  std::string normalized = descr;
  if (normalized.size() == 3 && normalized[0] == '=') normalized[0] = '<';
  if (normalized.size() == 3 && normalized[2] == '1') normalized[0] = '|';
  for (const DescrEntry& e : kDescrs) {
    if (e.descr == normalized) return e.dtype;
  }
  return NpyError(absl::StrCat("unsupported dtype '", descr,
                               "'; Kiln reads <f4 <f8 <f2 <i8 <i4 "
                               "<i2 |i1 |u1 |b1"));
}

using HeaderValue = std::variant<std::string, bool, std::vector<int64_t>>;

// A recursive-descent parser for the header dict.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::map<std::string, HeaderValue>> Parse() {
    std::map<std::string, HeaderValue> dict;
    RETURN_IF_ERROR(Expect('{'));
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      ASSIGN_OR_RETURN(std::string key, ParseString());
      RETURN_IF_ERROR(Expect(':'));
      ASSIGN_OR_RETURN(HeaderValue value, ParseValue());
      dict[key] = std::move(value);
      SkipSpace();
      if (Consume(',')) continue;
      RETURN_IF_ERROR(Expect('}'));
      break;
    }
    return dict;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::Status Expect(char c) {
    if (Consume(c)) return absl::OkStatus();
    return NpyError(absl::StrCat("malformed header: expected '", std::string(1, c), "' at offset ",
                                 pos_, " in ", text_));
  }
  absl::StatusOr<std::string> ParseString() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return NpyError(absl::StrCat("malformed header: expected a string at offset ", pos_));
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return NpyError("malformed header: unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  absl::StatusOr<int64_t> ParseInt() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (start == pos_ || pos_ - start > 18) {
      return NpyError(absl::StrCat("malformed header: bad dimension at offset ", start));
    }
    int64_t v = std::stoll(std::string(text_.substr(start, pos_ - start)));
    // Python 2 era writers append 'L' to longs.
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return v;
  }
  absl::StatusOr<HeaderValue> ParseValue() {
    SkipSpace();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return HeaderValue(true);
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return HeaderValue(false);
    }
    if (Consume('(')) {
      std::vector<int64_t> dims;
      while (!Consume(')')) {
        ASSIGN_OR_RETURN(int64_t d, ParseInt());
        dims.push_back(d);
        if (!Consume(',')) {
          RETURN_IF_ERROR(Expect(')'));
          break;
        }
      }
      return HeaderValue(std::move(dims));
    }
    ASSIGN_OR_RETURN(std::string s, ParseString());
    return HeaderValue(std::move(s));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(absl::string_view bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return v;
}

}  // namespace

absl::StatusOr<std::string> NpyDescr(DType dtype) {
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) return std::string(e.descr);
  }
  return NpyError(absl::StrCat(std::string(DTypeName(dtype)), " has no NumPy dtype"));
}

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return NpyError("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t len_width = 0;
  if (major == 1) {
    len_width = 2;
  } else if (major == 2 || major == 3) {
    len_width = 4;
  } else {
    return NpyError(absl::StrCat("unsupported format version ", major, ".",
                                 static_cast<int>(static_cast<unsigned char>(bytes[7]))));
  }
  if (bytes.size() < 8 + len_width) return NpyError("truncated header");
  const size_t header_len = ReadLittleEndian(bytes, 8, len_width);
  const size_t data_offset = 8 + len_width + header_len;
  if (bytes.size() < data_offset) return NpyError("truncated header");

  HeaderParser parser(bytes.substr(8 + len_width, header_len));
  ASSIGN_OR_RETURN(auto header, parser.Parse());
  auto descr = header.find("descr");
  auto fortran = header.find("fortran_order");
  auto shape = header.find("shape");
  if (descr == header.end() || !std::holds_alternative<std::string>(descr->second)) {
    return NpyError("header has no string 'descr'");
  }
  if (fortran == header.end() || !std::holds_alternative<bool>(fortran->second)) {
    return NpyError("header has no boolean 'fortran_order'");
  }
  if (shape == header.end() || !std::holds_alternative<std::vector<int64_t>>(shape->second)) {
    return NpyError("header has no tuple 'shape'");
  }
  if (std::get<bool>(fortran->second)) {
    return NpyError("Fortran-ordered arrays are not supported; save np.ascontiguousarray(arr)");
  }
  ASSIGN_OR_RETURN(DType dtype, DTypeFromDescr(std::get<std::string>(descr->second)));
  Dims dims = std::get<std::vector<int64_t>>(shape->second);

  int64_t count = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(count, d, &count)) return NpyError("shape is too large");
  }
  const size_t data_size = bytes.size() - data_offset;
  if (static_cast<uint64_t>(count) > data_size / DTypeSize(dtype) + 1 ||
      static_cast<size_t>(count) * DTypeSize(dtype) != data_size) {
    return NpyError(absl::StrCat("data holds ", data_size, " bytes, shape ", DimsToString(dims),
                                 " of ", std::get<std::string>(descr->second), " needs ",
                                 static_cast<uint64_t>(count) * DTypeSize(dtype)));
  }
  Tensor tensor = Tensor::Zeros(dtype, std::move(dims));
  if (data_size > 0) std::memcpy(tensor.raw_data(), bytes.data() + data_offset, data_size);
  return tensor;
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Tensor> tensor = ParseNpy(ss.str());
  if (!tensor.ok()) return Annotate(tensor.status(), absl::StrCat(path, ": "));
  return tensor;
}

absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor) {
  if (tensor.dtype() == DType::kBF16) {
    // NumPy has no bfloat16. A bfloat16 is the top half of a float32, so
    // widening is exact: shift each value into the high 16 bits.
    Tensor wide = Tensor::Zeros(DType::kF32, tensor.dims());
    const uint16_t* in = static_cast<const uint16_t*>(tensor.raw_data());
    uint32_t* out = static_cast<uint32_t*>(wide.raw_data());
    for (int64_t i = 0; i < tensor.num_elements(); ++i) out[i] = static_cast<uint32_t>(in[i]) << 16;
    return SerializeNpy(wide);
  }
  ASSIGN_OR_RETURN(std::string descr, NpyDescr(tensor.dtype()));
  std::string shape;
  if (tensor.rank() == 1) {
    shape = absl::StrCat("(", tensor.dim(0), ",)");
  } else {
    shape = absl::StrCat("(", absl::StrJoin(tensor.dims(), ", "), ")");
  }
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Version 1.0 unless the header outgrows its uint16 length field.
  const bool v2 = header.size() + 1 + 10 > 65535;
  const size_t prefix = kMagic.size() + 2 + (v2 ? 4 : 2);
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::string out(kMagic);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += header;
  out.append(static_cast<const char*>(tensor.raw_data()), tensor.byte_size());
  return out;
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(tensor));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot create '", path, "': ", std::strerror(errno)));
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kiln::client
