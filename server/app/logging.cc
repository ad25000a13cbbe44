#include "server/app/logging.h"

#include <grpc/support/log.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/json_text.h"

namespace kiln::server {
namespace {

// ISO 8601 in UTC with milliseconds, the form log collectors parse without
// configuration.
std::string Timestamp(spdlog::log_clock::time_point t) {
  const auto seconds = std::chrono::time_point_cast<std::chrono::seconds>(t);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(t - seconds).count());
  const std::time_t tt = spdlog::log_clock::to_time_t(t);
  std::tm tm = {};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%03dZ", buf, millis);
}

// A text line carries names and messages a client or a model file chose. A
// line break would split it into lines a line-oriented collector reads as new
// events, a control byte (ESC) would drive the terminal that shows the log, and
// a byte that is not UTF-8 breaks readers that decode it: line breaks become
// \n and \r, the rest \xNN. Valid UTF-8 (names in any script) stays as is.
std::string EscapeForTextLine(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto hex = [&out](unsigned char c) { absl::StrAppendFormat(&out, "\\x%02x", c); };
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      hex(c);
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      // The length of the UTF-8 sequence c starts, and the range of its second
      // byte (which rules out overlong forms, surrogates and past U+10FFFF).
      size_t n = 0;
      unsigned char lo = 0x80, hi = 0xbf;
      if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
      } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
      } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
      }
      bool valid = n > 0 && i + n <= text.size();
      for (size_t k = 1; valid && k < n; ++k) {
        const auto b = static_cast<unsigned char>(text[i + k]);
        valid = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xbf);
      }
      if (!valid) {
        hex(c);
      } else {
        out.append(text, i, n);
        i += n;
        continue;
      }
    }
    ++i;
  }
  return out;
}

class LineFormatter : public spdlog::formatter {
 public:
  explicit LineFormatter(bool json) : json_(json) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    const auto level_view = spdlog::level::to_string_view(msg.level);
    const std::string level(level_view.data(), level_view.size());
    std::string line;
    if (json_) {
      // ordered_json keeps time first, as people read it.
      nlohmann::ordered_json event;
      event["time"] = Timestamp(msg.time);
      event["level"] = level;
      event["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
      event["msg"] = text;
      // Replace, never throw: a model or op name from a client may be bad UTF-8.
      line = JsonText(event);
    } else {
      line = absl::StrCat(Timestamp(msg.time), " ", level, " ", EscapeForTextLine(text));
    }
    line.push_back('\n');
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(json_);
  }

 private:
  bool json_;
};

// gRPC writes its own warnings to stderr in its own format; routed here they
// follow --log-format too.
void GrpcLog(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::info;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::err;
  spdlog::log(level, "grpc: {} ({}:{})", args->message, args->file, args->line);
}

}  // namespace

absl::Status SetUpLogging(const std::string& level, const std::string& format) {
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("log format must be 'text' or 'json', got '", format, "'"));
  }
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("unknown log level '", level, "'"));
  }
  auto logger = spdlog::stderr_logger_mt("kilnd");
  logger->set_formatter(std::make_unique<LineFormatter>(format == "json"));
  logger->set_level(parsed);  // the stderr sink flushes every line itself
  spdlog::set_default_logger(std::move(logger));
  gpr_set_log_function(GrpcLog);
  return absl::OkStatus();
}

}  // namespace kiln::server
