#include "client/cli/profile_command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/profiler.h"

namespace kiln::cli {
namespace {

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::NotFoundError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace

absl::Status Profile(client::InferenceClient& client, const std::string& name,
                     const std::vector<client::NamedTensor>& inputs, const std::string& version,
                     const ProfileOptions& options) {
  if (options.runs < 1) return absl::InvalidArgumentError("--runs must be at least 1");
  for (int i = 0; i < options.warmup; ++i) {
    RETURN_IF_ERROR(client.Infer(name, inputs, {}, version).status());
  }
  runtime::Profile merged;
  for (int i = 0; i < options.runs; ++i) {
    ASSIGN_OR_RETURN(client::InferenceClient::ProfiledInfer answer,
                     client.InferProfiled(name, inputs, version));
    ASSIGN_OR_RETURN(runtime::Profile profile, runtime::Profile::FromJson(answer.profile_json));
    merged.Merge(profile);
  }
  std::vector<std::string> shapes;
  for (const client::NamedTensor& in : inputs) {
    shapes.push_back(absl::StrCat(in.name, " ", DTypeName(in.tensor.dtype()),
                                  DimsToString(in.tensor.dims())));
  }
  std::printf("profile of '%s' on %s (%d warm-up run%s first)\n", name.c_str(),
              absl::StrJoin(shapes, ", ").c_str(), options.warmup, options.warmup == 1 ? "" : "s");
  std::printf("%s", merged.FormatTable(options.top).c_str());
  if (merged.dropped_events > 0) {
    std::printf("(the trace keeps the first %zu step runs; %lld more were timed but not traced)\n",
                merged.events.size(), static_cast<long long>(merged.dropped_events));
  }
  if (!options.trace_path.empty()) {
    RETURN_IF_ERROR(WriteText(options.trace_path, merged.ToChromeTrace()));
    std::printf("trace: %s (%zu events; open in ui.perfetto.dev or chrome://tracing)\n",
                options.trace_path.c_str(), merged.events.size());
  }
  if (!options.json_path.empty()) {
    RETURN_IF_ERROR(WriteText(options.json_path, merged.ToJson()));
    std::printf("profile: %s\n", options.json_path.c_str());
  }
  return absl::OkStatus();
}

}  // namespace kiln::cli
