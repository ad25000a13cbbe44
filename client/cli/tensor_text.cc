#include "client/cli/tensor_text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/element.h"
#include "engine/common/half.h"
#include "engine/common/status_macros.h"

namespace kiln::cli {
namespace {

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

// Recursive descent over "[[1,2],[3,4]]": collects the scalars and the dims,
// and refuses ragged nesting.
class NestedParser {
 public:
  explicit NestedParser(const std::string& text) : text_(text) {}

  absl::Status Parse(std::vector<std::string>& values, Dims& dims) {
    RETURN_IF_ERROR(ParseList(0, values, dims));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the closing ']'");
    return absl::OkStatus();
  }

 private:
  absl::Status ParseList(size_t depth, std::vector<std::string>& values, Dims& dims) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '[') return Error("expected '['");
    ++pos_;
    int64_t count = 0;
    bool nested = false;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      return Error("empty lists are not allowed; give at least one value");
    }
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '[') {
        if (count > 0 && !nested) return Error("mixes values and lists at one level");
        nested = true;
        RETURN_IF_ERROR(ParseList(depth + 1, values, dims));
      } else {
        if (nested) return Error("mixes values and lists at one level");
        const size_t end = text_.find_first_of(",]", pos_);
        if (end == std::string::npos) return Error("missing ']'");
        const std::string token = Trim(text_.substr(pos_, end - pos_));
        if (token.empty()) return Error("empty value");
        if (seen_leaf_ && leaf_depth_ != depth) return Error("ragged nesting");
        leaf_depth_ = depth;
        seen_leaf_ = true;
        values.push_back(token);
        pos_ = end;
        if (dims.size() < depth + 1) dims.resize(depth + 1, -1);
      }
      ++count;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        break;
      }
      return Error("expected ',' or ']'");
    }
    if (dims.size() < depth + 1) dims.resize(depth + 1, -1);
    if (dims[depth] == -1) {
      dims[depth] = count;
    } else if (dims[depth] != count) {
      return Error(absl::StrCat("ragged: a list at depth ", depth, " has ", count,
                                " elements, an earlier one ", dims[depth]));
    }
    return absl::OkStatus();
  }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text_, "' at character ", pos_ + 1, ": ", what));
  }

  const std::string& text_;
  size_t pos_ = 0;
  size_t leaf_depth_ = 0;
  bool seen_leaf_ = false;
};

// "2x3" -> [2, 3]; nullopt when `text` is not of that form.
std::optional<Dims> ParseShape(const std::string& text) {
  Dims dims;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0) return std::nullopt;
    dims.push_back(d);
  }
  return dims;
}

// The one shape `declared` allows for `count` values, if exactly one.
std::optional<Dims> FitDeclared(const std::vector<int64_t>& declared, int64_t count) {
  Dims dims(declared.begin(), declared.end());
  int64_t known = 1;
  int dynamic = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) {
      known *= dims[i];
    } else if (dynamic >= 0) {
      return std::nullopt;  // two dynamic dims: many shapes fit
    } else {
      dynamic = static_cast<int>(i);
    }
  }
  if (dynamic < 0) return known == count ? std::optional<Dims>(dims) : std::nullopt;
  if (known == 0 || count % known != 0) return std::nullopt;
  dims[dynamic] = count / known;
  return dims;
}

template <typename T>
absl::Status ParseInts(const std::vector<std::string>& values, T* out, const std::string& input) {
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(values[i], &v) || v < std::numeric_limits<T>::min() ||
        v > std::numeric_limits<T>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input, "': value ", i, " '", values[i], "' is not a ",
          sizeof(T) * 8, "-bit ", std::numeric_limits<T>::is_signed ? "" : "unsigned ",
          "integer"));
    }
    out[i] = static_cast<T>(v);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ParseFloats(const std::vector<std::string>& values, T* out,
                         const std::string& input) {
  for (size_t i = 0; i < values.size(); ++i) {
    const char* begin = values[i].c_str();
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(begin, &end);
    if (end == begin || *end != '\0') {
      return absl::InvalidArgumentError(absl::StrCat("input '", input, "': value ", i, " '",
                                                     values[i], "' is not a number"));
    }
    out[i] = static_cast<T>(v);
  }
  return absl::OkStatus();
}

absl::Status ParseBools(const std::vector<std::string>& values, bool* out,
                        const std::string& input) {
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string v = absl::AsciiStrToLower(values[i]);
    if (v == "true" || v == "1") {
      out[i] = true;
    } else if (v == "false" || v == "0") {
      out[i] = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input, "': value ", i, " '", values[i], "' is not a bool (true/false/1/0)"));
    }
  }
  return absl::OkStatus();
}

// Element i as a double (for summaries) and as text (for tables).
double ValueAt(const Tensor& t, int64_t i) { return LoadAsDouble(t.raw_data(), t.dtype(), i); }

std::string TextAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kBool: return t.data<bool>()[i] ? "true" : "false";
    case DType::kInt64: return absl::StrCat(t.data<int64_t>()[i]);
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32:
    case DType::kF64: return absl::StrFormat("%.6g", ValueAt(t, i));
    default: return absl::StrCat(static_cast<int64_t>(ValueAt(t, i)));
  }
}

std::string Header(const std::string& name, const Tensor& t) {
  return absl::StrCat(name, "  ", DTypeName(t.dtype()), "  ", DimsToString(t.dims()));
}

}  // namespace

absl::StatusOr<InputArg> ParseInputArg(const std::string& arg) {
  InputArg input;
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input '", arg, "' must look like NAME=FILE.npy or NAME=VALUES[:DTYPE][:SHAPE], "
        "e.g. x=1,2,3:FP32:1x3"));
  }
  input.name = arg.substr(0, eq);
  const std::string rest = arg.substr(eq + 1);
  if (absl::EndsWithIgnoreCase(rest, ".npy")) {
    input.npy_file = rest;
    return input;
  }
  // Brackets hold no ':' (values are numbers), so the last ']' ends the values.
  const size_t close = rest.rfind(']');
  const size_t colon = rest.find(':', close == std::string::npos ? 0 : close);
  const std::string values = Trim(rest.substr(0, colon));
  if (values == "[]") {
    input.nested_dims = Dims{0};  // an empty tensor (an empty list sent whole)
  } else if (values.empty()) {
    // Only an empty shape holds no values: "xs=:FP32:0x3".
  } else if (values.front() == '[') {
    Dims dims;
    absl::Status parsed = NestedParser(values).Parse(input.values, dims);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input '", input.name, "': ", parsed.message()));
    }
    input.nested_dims = dims;
  } else {
    for (absl::string_view v : absl::StrSplit(values, ',')) {
      const std::string token = Trim(std::string(v));
      if (token.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input '", arg, "': empty value in '", values, "'"));
      }
      input.values.push_back(token);
    }
  }
  std::vector<std::string> parts;
  if (colon != std::string::npos) parts = absl::StrSplit(rest.substr(colon + 1), ':');
  for (const std::string& part : parts) {
    const std::string p = Trim(std::string(part));
    if (std::optional<DType> dtype = DTypeFromName(absl::AsciiStrToUpper(p)); dtype.has_value()) {
      if (input.dtype.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--input '", arg, "': two datatypes"));
      }
      input.dtype = dtype;
    } else if (std::optional<Dims> shape = ParseShape(p); shape.has_value()) {
      if (input.shape.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--input '", arg, "': two shapes"));
      }
      input.shape = shape;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input '", arg, "': '", p,
          "' is neither a datatype (FP32, INT64, BOOL, ...) nor a shape like 1x3"));
    }
  }
  if (values.empty() && (!input.shape.has_value() || NumElements(*input.shape) != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input '", arg, "': no values (an empty tensor is NAME=[] or NAME=:DTYPE:0x3)"));
  }
  return input;
}

absl::StatusOr<Tensor> MakeInlineTensor(const InputArg& input,
                                        const client::TensorMetadata* declared) {
  const int64_t count = static_cast<int64_t>(input.values.size());
  DType dtype = DType::kF32;
  if (input.dtype.has_value()) {
    dtype = *input.dtype;
  } else if (declared != nullptr && DTypeFromName(declared->datatype).has_value()) {
    dtype = *DTypeFromName(declared->datatype);
  }
  Dims dims = {count};
  if (input.shape.has_value()) {
    dims = *input.shape;
  } else if (input.nested_dims.has_value()) {
    dims = *input.nested_dims;
  } else if (declared != nullptr) {
    std::optional<Dims> fit = FitDeclared(declared->shape, count);
    if (!fit.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input.name, "': ", count, " values do not fill the declared shape ",
          DimsToString(Dims(declared->shape.begin(), declared->shape.end())),
          " in exactly one way; give the shape, e.g. ", input.name, "=...:1x", count));
    }
    dims = *fit;
  }
  if (NumElements(dims) != count) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': ", count,
                                                   " values, but shape ", DimsToString(dims),
                                                   " holds ", NumElements(dims)));
  }
  Tensor t = Tensor::Zeros(dtype, dims);
  const std::vector<std::string>& v = input.values;
  switch (dtype) {
    case DType::kBool: RETURN_IF_ERROR(ParseBools(v, t.data<bool>(), input.name)); break;
    case DType::kUInt8: RETURN_IF_ERROR(ParseInts(v, t.data<uint8_t>(), input.name)); break;
    case DType::kInt8: RETURN_IF_ERROR(ParseInts(v, t.data<int8_t>(), input.name)); break;
    case DType::kInt16: RETURN_IF_ERROR(ParseInts(v, t.data<int16_t>(), input.name)); break;
    case DType::kInt32: RETURN_IF_ERROR(ParseInts(v, t.data<int32_t>(), input.name)); break;
    case DType::kInt64: RETURN_IF_ERROR(ParseInts(v, t.data<int64_t>(), input.name)); break;
    case DType::kF32: RETURN_IF_ERROR(ParseFloats(v, t.data<float>(), input.name)); break;
    case DType::kF64: RETURN_IF_ERROR(ParseFloats(v, t.data<double>(), input.name)); break;
    case DType::kF16:
    case DType::kBF16: {
      // Parsed as float, then rounded to the storage type (nearest even).
      std::vector<float> wide(v.size());
      RETURN_IF_ERROR(ParseFloats(v, wide.data(), input.name));
      uint16_t* out = t.data<uint16_t>();
      for (size_t i = 0; i < wide.size(); ++i) {
        out[i] = dtype == DType::kF16 ? FloatToHalf(wide[i]) : FloatToBF16(wide[i]);
      }
      break;
    }
    default:
      return absl::UnimplementedError(absl::StrCat("input '", input.name, "': inline ",
                                                   DTypeName(dtype),
                                                   " values are not supported; use a .npy file"));
  }
  return t;
}

Tensor RoundToBF16(const Tensor& f32) {
  Tensor t = Tensor::Zeros(DType::kBF16, f32.dims());
  for (int64_t i = 0; i < f32.num_elements(); ++i) {
    t.data<uint16_t>()[i] = FloatToBF16(f32.data<float>()[i]);
  }
  return t;
}

std::string FormatTable(const std::string& name, const Tensor& t, int columns) {
  std::string out = Header(name, t) + "\n";
  const int64_t n = t.num_elements();
  if (t.rank() == 0) return absl::StrCat(out, "  ", TextAt(t, 0), "\n");
  if (n == 0) return absl::StrCat(out, "  (empty)\n");
  const int64_t width_dim = t.dims().back();
  const int64_t rows = n / width_dim;
  int value_width = 1;
  for (int64_t i = 0; i < n; ++i) {
    value_width = std::max<int>(value_width, static_cast<int>(TextAt(t, i).size()));
  }
  // Row labels: the index of every dim but the last, "[i, j]".
  std::vector<std::string> labels(rows);
  int label_width = 0;
  for (int64_t r = 0; r < rows; ++r) {
    Dims index;
    int64_t rest = r;
    for (int64_t d = t.rank() - 2; d >= 0; --d) {
      index.insert(index.begin(), rest % t.dim(d));
      rest /= t.dim(d);
    }
    labels[r] = t.rank() == 1 ? "" : absl::StrCat("[", absl::StrJoin(index, ", "), "]");
    label_width = std::max<int>(label_width, static_cast<int>(labels[r].size()));
  }
  for (int64_t c0 = 0; c0 < width_dim; c0 += columns) {
    const int64_t c1 = std::min<int64_t>(width_dim, c0 + columns);
    std::string head = absl::StrFormat("  %*s", label_width, "");
    for (int64_t c = c0; c < c1; ++c) absl::StrAppendFormat(&head, "  %*d", value_width, c);
    absl::StrAppend(&out, head, "\n");
    for (int64_t r = 0; r < rows; ++r) {
      std::string line = absl::StrFormat("  %*s", label_width, labels[r]);
      for (int64_t c = c0; c < c1; ++c) {
        absl::StrAppendFormat(&line, "  %*s", value_width, TextAt(t, r * width_dim + c));
      }
      absl::StrAppend(&out, line, "\n");
    }
  }
  return out;
}

std::string FormatSummary(const std::string& name, const Tensor& t) {
  const int64_t n = t.num_elements();
  std::string out = absl::StrCat(Header(name, t), "  (", n, " values");
  if (n > 0) {
    int64_t argmax = 0;
    double lo = ValueAt(t, 0), hi = lo, sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = ValueAt(t, i);
      if (v > hi) {
        hi = v;
        argmax = i;
      }
      lo = std::min(lo, v);
      sum += v;
    }
    Dims index(t.rank());
    for (int64_t d = t.rank() - 1, rest = argmax; d >= 0; --d) {
      index[d] = rest % t.dim(d);
      rest /= t.dim(d);
    }
    absl::StrAppendFormat(&out, ": min %.6g, max %.6g at %s, mean %.6g", lo, hi,
                          DimsToString(index), sum / static_cast<double>(n));
  }
  return out + ")";
}

}  // namespace kiln::cli
