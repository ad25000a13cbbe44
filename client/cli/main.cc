// kiln: command-line client for a Kiln server (or any KServe v2 gRPC server).
//   kiln [--server host:port] [--timeout S] [--token T] [--tls-ca CA.pem] upload FILE --name NAME [--config JSON_FILE]
//   kiln models | metadata NAME | unload NAME | delete NAME [--version V] | stats [NAME] | health
//   kiln infer NAME -i x=img.npy | -i x=1,2,3:FP32:1x3 [--output NAME] [-o out/]
//   kiln profile NAME -i x=img.npy [--runs N] [--trace out.json]
// Errors go to stderr as "kiln: error: CODE: ..."; the exit status says which
// kind (client/cli/exit_codes.cc, printed by --help).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/exit_codes.h"
#include "client/cli/inspect_command.h"
#include "client/cli/profile_command.h"
#include "client/cli/progress.h"
#include "client/cli/tensor_text.h"
#include "client/inference_client.h"
#include "client/npy.h"
#include "engine/common/status_macros.h"

namespace {

namespace fs = std::filesystem;
using kiln::client::InferenceClient;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read '", path, "'"));
  return std::move(ss).str();
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Output names become file names; keep them from escaping the output dir.
std::string SafeFileName(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out == "." || out == "..") out = "output_" + out;
  return out;
}

double Ms(const kiln::client::Duration& d) {
  return d.count == 0 ? 0.0 : static_cast<double>(d.ns) / static_cast<double>(d.count) / 1e6;
}

std::string Short(const std::string& sha256) { return sha256.substr(0, 16); }

// Progress bars are for files big enough to take a moment.
constexpr uint64_t kProgressMinBytes = 4 << 20;

// The model's contract in a few lines, so the next command can be written.
void PrintContract(const kiln::client::ModelMetadata& metadata) {
  auto property = [&](const std::string& name, const std::string& key) -> std::string {
    auto it = metadata.properties.find(absl::StrCat("input.", name, ".", key));
    return it == metadata.properties.end() ? "" : it->second;
  };
  for (const auto& t : metadata.inputs) {
    // How the input may be sent beyond its datatype and shape.
    std::vector<std::string> notes;
    if (const std::string d = property(t.name, "default"); !d.empty()) {
      notes.push_back(absl::StrCat("default ", d));
    } else if (property(t.name, "optional") == "true") {
      notes.push_back("optional");
    }
    if (const std::string l = property(t.name, "list"); !l.empty()) {
      notes.push_back(l.substr(0, l.find(',')));  // "xs: List[Tensor]"
    }
    if (absl::StrContains(property(t.name, "datatype"), "INT32 also accepted")) {
      notes.push_back("INT32 also accepted");
    }
    std::printf("  input  %s %s %s%s\n", t.name.c_str(), t.datatype.c_str(),
                ShapeString(t.shape).c_str(),
                notes.empty() ? "" : absl::StrCat("  (", absl::StrJoin(notes, "; "), ")").c_str());
  }
  for (const auto& t : metadata.outputs) {
    std::printf("  output %s %s %s\n", t.name.c_str(), t.datatype.c_str(),
                ShapeString(t.shape).c_str());
  }
}

absl::Status Upload(InferenceClient& client, const std::string& file, const std::string& name,
                    const std::string& config_file, int64_t version, size_t chunk_bytes,
                    bool single_message, std::optional<bool> progress_flag) {
  std::optional<std::string> config;
  if (!config_file.empty()) {
    ASSIGN_OR_RETURN(config, ReadFile(config_file));
  }
  if (single_message) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(file));
    if (version <= 0) {
      // Triton's message names the version ("file:1/model.pt"); the next one
      // after those the repository has, as the streamed upload does.
      ASSIGN_OR_RETURN(std::vector<kiln::client::ModelIndexEntry> index, client.Index());
      version = 1;
      for (const kiln::client::ModelIndexEntry& e : index) {
        int64_t v = 0;
        if (e.name == name && absl::SimpleAtoi(e.version, &v)) version = std::max(version, v + 1);
      }
    }
    RETURN_IF_ERROR(client.Upload(name, bytes, std::move(config), version));
    std::printf("uploaded '%s' version %lld (%zu bytes, one message): READY\n", name.c_str(),
                static_cast<long long>(version), bytes.size());
    return absl::OkStatus();
  }
  kiln::client::UploadOptions options;
  options.version = version;
  options.config_json = std::move(config);
  if (chunk_bytes > 0) options.chunk_bytes = chunk_bytes;
  if (!std::ifstream(file)) {
    return absl::NotFoundError(absl::StrCat("cannot open '", file, "': ", std::strerror(errno)));
  }
  std::error_code size_error;
  const uint64_t file_size = fs::file_size(file, size_error);
  // A bar on a terminal for big files; --progress forces it (piped: one line
  // a second), --no-progress turns it off.
  const bool show_progress = progress_flag.value_or(::isatty(STDERR_FILENO) == 1 &&
                                                    file_size >= kProgressMinBytes);
  std::unique_ptr<kiln::cli::UploadProgress> bar;
  if (show_progress) {
    bar = std::make_unique<kiln::cli::UploadProgress>(fs::path(file).filename().string(), stderr);
    options.progress = [&bar](uint64_t sent, uint64_t total) { bar->Update(sent, total); };
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<kiln::client::UploadResult> uploaded = client.UploadFile(name, file, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (bar != nullptr) bar->Finish();
  RETURN_IF_ERROR(uploaded.status());
  const kiln::client::UploadResult& result = *uploaded;
  std::string how;
  if (result.already_on_server) {
    how = "the server already had this file, nothing sent";
  } else if (result.resumed_from > 0) {
    how = absl::StrCat("resumed at byte ", result.resumed_from, ", ", result.bytes_sent,
                       " bytes sent");
  } else {
    how = absl::StrCat(result.bytes_sent, " bytes sent");
  }
  // A rate over a few kilobytes would only measure round trips.
  std::string rate;
  if (result.bytes_sent >= (1u << 20)) {
    rate = absl::StrCat(
        " at ",
        kiln::cli::HumanBytes(static_cast<double>(result.bytes_sent) /
                              std::max(seconds - result.load_ms / 1e3, 1e-3)),
        "/s");
  }
  std::printf("uploaded '%s' version %lld (%llu bytes, sha256 %s; %s%s%s): READY in %.1f ms\n",
              name.c_str(), static_cast<long long>(result.version),
              static_cast<unsigned long long>(result.size), Short(result.sha256).c_str(),
              how.c_str(), rate.c_str(), result.unchanged ? "; unchanged" : "", result.load_ms);
  // What the load found (Kiln servers publish it in the model's metadata).
  absl::StatusOr<kiln::client::ModelMetadata> metadata =
      client.Metadata(name, absl::StrCat(result.version));
  if (metadata.ok()) {
    PrintContract(*metadata);
    for (const char* key : {"fallback_ops", "verify", "verify.fallback_ops"}) {
      auto it = metadata->properties.find(key);
      if (it == metadata->properties.end()) continue;
      std::printf("  %s: %s\n", key,
                  it->second.empty() && std::string(key) == "fallback_ops" ? "none (all native)"
                                                                           : it->second.c_str());
    }
  }
  return absl::OkStatus();
}

// `upload --dry-run`: the server imports and validates the file and answers
// with the contract it derived; it stores and serves nothing.
absl::Status DryRunUpload(InferenceClient& client, const std::string& file,
                          const std::string& name, const std::string& config_file) {
  nlohmann::json config = nlohmann::json::object();
  if (!config_file.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(config_file));
    config = nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", config_file, "' does not hold a JSON object"));
    }
  }
  config["dry_run"] = true;
  kiln::client::UploadOptions options;
  options.config_json = config.dump();
  ASSIGN_OR_RETURN(kiln::client::UploadResult result, client.UploadFile(name, file, options));
  if (!result.dry_run) {
    return absl::UnimplementedError("the server ignored the dry run (it predates dry runs?)");
  }
  std::printf("dry run of '%s': imported and validated in %.1f ms; nothing stored or served\n",
              name.c_str(), result.load_ms);
  nlohmann::json contract =
      nlohmann::json::parse(result.contract_json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  std::printf("%s\n", contract.is_discarded() ? result.contract_json.c_str()
                                              : contract.dump(/*indent=*/2).c_str());
  return absl::OkStatus();
}

absl::Status Delete(InferenceClient& client, const std::string& name, int64_t version) {
  RETURN_IF_ERROR(client.Delete(name, version));
  if (version > 0) {
    std::printf("deleted '%s' version %lld\n", name.c_str(), static_cast<long long>(version));
  } else {
    std::printf("deleted '%s'\n", name.c_str());
  }
  return absl::OkStatus();
}

absl::Status Models(InferenceClient& client) {
  ASSIGN_OR_RETURN(auto index, client.Index());
  if (index.empty()) {
    std::printf("no models\n");
    return absl::OkStatus();
  }
  size_t width = 4;
  for (const auto& m : index) width = std::max(width, m.name.size());
  std::printf("%-*s  %-7s  %-11s  %s\n", static_cast<int>(width), "NAME", "VERSION", "STATE",
              "REASON");
  for (const auto& m : index) {
    std::printf("%-*s  %-7s  %-11s  %s\n", static_cast<int>(width), m.name.c_str(),
                m.version.c_str(), m.state.c_str(), m.reason.c_str());
  }
  return absl::OkStatus();
}

absl::Status Metadata(InferenceClient& client, const std::string& name,
                      const std::string& version) {
  ASSIGN_OR_RETURN(auto metadata, client.Metadata(name, version));
  std::printf("model:    %s\n", metadata.name.c_str());
  std::printf("platform: %s\n", metadata.platform.c_str());
  std::printf("versions: %s\n", absl::StrJoin(metadata.versions, ", ").c_str());
  for (const auto& t : metadata.inputs) {
    std::printf("input     %s %s %s\n", t.name.c_str(), t.datatype.c_str(),
                ShapeString(t.shape).c_str());
  }
  for (const auto& t : metadata.outputs) {
    std::printf("output    %s %s %s\n", t.name.c_str(), t.datatype.c_str(),
                ShapeString(t.shape).c_str());
  }
  for (const auto& [key, value] : metadata.properties) {
    if (key == "graph") {  // many lines: `kiln inspect NAME --remote` shows it
      std::printf("property  graph = (%zu lines; kiln inspect %s --remote)\n",
                  static_cast<size_t>(std::count(value.begin(), value.end(), '\n')),
                  metadata.name.c_str());
      continue;
    }
    std::printf("property  %s = %s\n", key.c_str(), value.c_str());
  }
  return absl::OkStatus();
}

// Outputs up to this many values are printed as a table by default.
constexpr int64_t kDefaultPrintLimit = 100;

// A request's inputs from -i arguments (`kiln infer`, `kiln profile`).
absl::StatusOr<std::vector<kiln::client::NamedTensor>> BuildInputs(
    InferenceClient& client, const std::string& name, const std::vector<std::string>& input_args,
    const std::string& version) {
  std::vector<kiln::cli::InputArg> args;
  bool any_inline = false;
  for (const std::string& arg : input_args) {
    ASSIGN_OR_RETURN(kiln::cli::InputArg parsed, kiln::cli::ParseInputArg(arg));
    any_inline |= parsed.npy_file.empty();
    args.push_back(std::move(parsed));
  }
  // Inline values take their datatype and shape from the model's contract,
  // and a float32 .npy feeds a BF16 input (NumPy has no bfloat16).
  std::vector<kiln::Tensor> files(args.size());
  bool need_contract = any_inline;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].npy_file.empty()) continue;
    ASSIGN_OR_RETURN(files[i], kiln::client::ReadNpy(args[i].npy_file));
    need_contract |= files[i].dtype() == kiln::DType::kF32;
  }
  std::optional<kiln::client::ModelMetadata> metadata;
  if (need_contract) {
    absl::StatusOr<kiln::client::ModelMetadata> m = client.Metadata(name, version);
    if (!m.ok() && !absl::IsUnimplemented(m.status())) return m.status();
    if (m.ok()) metadata = std::move(*m);
  }
  std::vector<kiln::client::NamedTensor> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const kiln::cli::InputArg& arg = args[i];
    const kiln::client::TensorMetadata* declared = nullptr;
    if (metadata.has_value()) {
      for (const auto& t : metadata->inputs) {
        if (t.name == arg.name) declared = &t;
      }
    }
    if (!arg.npy_file.empty()) {
      kiln::Tensor tensor = std::move(files[i]);
      if (declared != nullptr && declared->datatype == "BF16" &&
          tensor.dtype() == kiln::DType::kF32) {
        tensor = kiln::cli::RoundToBF16(tensor);
      }
      inputs.push_back({arg.name, std::move(tensor)});
      continue;
    }
    ASSIGN_OR_RETURN(kiln::Tensor tensor, kiln::cli::MakeInlineTensor(arg, declared));
    inputs.push_back({arg.name, std::move(tensor)});
  }
  return inputs;
}

absl::Status Infer(InferenceClient& client, const std::string& name,
                   const std::vector<std::string>& input_args,
                   const std::vector<std::string>& requested, const std::string& output_dir,
                   const std::string& version, int64_t print_limit) {
  ASSIGN_OR_RETURN(std::vector<kiln::client::NamedTensor> inputs,
                   BuildInputs(client, name, input_args, version));
  ASSIGN_OR_RETURN(auto outputs, client.Infer(name, inputs, requested, version));

  if (!output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(output_dir, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create output directory '", output_dir, "': ", ec.message()));
    }
  }
  for (const auto& output : outputs) {
    const kiln::Tensor& t = output.tensor;
    const bool small = t.num_elements() <= print_limit;
    if (!output_dir.empty()) {
      const std::string path =
          (fs::path(output_dir) / (SafeFileName(output.name) + ".npy")).string();
      RETURN_IF_ERROR(kiln::client::WriteNpy(path, t));
      std::printf("%s %s %s -> %s\n", output.name.c_str(),
                  std::string(kiln::DTypeName(t.dtype())).c_str(),
                  kiln::DimsToString(t.dims()).c_str(), path.c_str());
    } else if (small) {
      std::printf("%s", kiln::cli::FormatTable(output.name, t).c_str());
    } else {
      std::printf("%s\n  (more than %lld values: -o DIR saves it as DIR/%s.npy; --print-limit N "
                  "prints up to N)\n",
                  kiln::cli::FormatSummary(output.name, t).c_str(),
                  static_cast<long long>(print_limit), SafeFileName(output.name).c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status Unload(InferenceClient& client, const std::string& name) {
  RETURN_IF_ERROR(client.Unload(name));
  std::printf("unloaded '%s'\n", name.c_str());
  return absl::OkStatus();
}

double Mb(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

absl::Status Stats(InferenceClient& client, const std::string& name) {
  ASSIGN_OR_RETURN(auto stats, client.Statistics(name));
  // Kiln's load and cache figures; other servers do not have the RPC.
  absl::StatusOr<kiln::client::CacheStatistics> cache = client.GetCacheStatistics(name);
  for (const auto& s : stats) {
    std::string last = "never";
    if (s.last_inference_ms > 0) {
      const std::time_t t = static_cast<std::time_t>(s.last_inference_ms / 1000);
      char buf[32];
      std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
      last = buf;
    }
    std::printf("%s (version %s)\n", s.name.c_str(), s.version.c_str());
    std::printf("  inferences %llu, failures %llu, last %s\n",
                static_cast<unsigned long long>(s.inference_count),
                static_cast<unsigned long long>(s.fail.count), last.c_str());
    std::printf("  avg ms: request %.3f  decode %.3f  infer %.3f  encode %.3f  failed %.3f\n",
                Ms(s.success), Ms(s.compute_input), Ms(s.compute_infer), Ms(s.compute_output),
                Ms(s.fail));
    if (!cache.ok()) continue;
    for (const auto& c : cache->models) {
      if (c.name != s.name || absl::StrCat(c.version) != s.version) continue;
      char import[64] = "";
      if (c.import_ms > 0) std::snprintf(import, sizeof(import), ", import %.1f ms", c.import_ms);
      std::printf("  load %.1f ms (graph from %s%s), sha256 %s, weights %.1f MB\n", c.load_ms,
                  c.graph_source.c_str(), import, Short(c.sha256).c_str(), Mb(c.weight_bytes));
      std::printf("  plans: memory hits %llu, disk hits %llu, misses %llu, evictions %llu, "
                  "compiled/loaded %llu in %.1f ms, %.1f MB held\n",
                  static_cast<unsigned long long>(c.plan_memory_hits),
                  static_cast<unsigned long long>(c.plan_disk_hits),
                  static_cast<unsigned long long>(c.plan_misses),
                  static_cast<unsigned long long>(c.plan_evictions),
                  static_cast<unsigned long long>(c.compile_count), c.compile_ms,
                  Mb(c.bytes_held));
    }
  }
  if (stats.empty()) std::printf("no models\n");
  if (cache.ok() && name.empty()) {
    const auto& t = cache->totals;
    std::printf("cache: %.1f of %.1f MB in memory (%llu plans, %llu evictions); disk %s",
                Mb(t.memory_bytes), Mb(t.memory_limit_bytes),
                static_cast<unsigned long long>(t.memory_entries),
                static_cast<unsigned long long>(t.evictions),
                t.disk_dir.empty() ? "off" : t.disk_dir.c_str());
    if (!t.disk_dir.empty()) {
      std::printf(": graphs %llu hits / %llu misses, plans %llu hits / %llu misses, "
                  "prepacked weights %llu mapped / %llu written, %llu writes, "
                  "%llu corrupt removed; %.1f MB",
                  static_cast<unsigned long long>(t.disk_graph_hits),
                  static_cast<unsigned long long>(t.disk_graph_misses),
                  static_cast<unsigned long long>(t.disk_plan_hits),
                  static_cast<unsigned long long>(t.disk_plan_misses),
                  static_cast<unsigned long long>(t.packed_hits),
                  static_cast<unsigned long long>(t.packed_writes),
                  static_cast<unsigned long long>(t.disk_writes),
                  static_cast<unsigned long long>(t.disk_corrupt), Mb(t.disk_bytes));
      if (t.disk_limit_bytes > 0) {
        std::printf(" of %.1f (%llu evicted)", Mb(t.disk_limit_bytes),
                    static_cast<unsigned long long>(t.disk_evictions));
      }
    }
    std::printf("\n");
  }
  return absl::OkStatus();
}

absl::Status Health(InferenceClient& client) {
  ASSIGN_OR_RETURN(auto metadata, client.GetServerMetadata());
  ASSIGN_OR_RETURN(bool live, client.Live());
  ASSIGN_OR_RETURN(bool ready, client.Ready());
  std::printf("%s %s at %s: live=%s ready=%s extensions=[%s]\n", metadata.name.c_str(),
              metadata.version.c_str(), client.target().c_str(), live ? "true" : "false",
              ready ? "true" : "false", absl::StrJoin(metadata.extensions, ", ").c_str());
  if (!live || !ready) return absl::FailedPreconditionError("server is not ready");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with absl::Mutex's deadlock detection on; gRPC's
  // locks would pay for it on every call (server/app/main.cc says more).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"kiln: client for the Kiln inference server"};
  app.footer(kiln::cli::ExitCodeTable());
  const char* env_server = std::getenv("KILN_SERVER");
  std::string server = env_server != nullptr && *env_server != '\0' ? env_server : "127.0.0.1:8001";
  app.add_option("--server", server,
                 "Server address host:port (default: $KILN_SERVER, else 127.0.0.1:8001)");
  double timeout_s = 0;
  app.add_option("--timeout", timeout_s,
                 "Deadline of every call to the server, in seconds (0: none); past it the command "
                 "fails with DEADLINE_EXCEEDED, exit status 5. For upload it covers sending the "
                 "file and the server's verify and load")
      ->check(CLI::NonNegativeNumber);
  const char* env_token = std::getenv("KILN_TOKEN");
  std::string token = env_token != nullptr ? env_token : "";
  app.add_option("--token", token,
                 "Bearer token sent with every call (kilnd --auth-tokens; default: $KILN_TOKEN). "
                 "Prefer the variable: a command line is visible to other users");
  const char* env_local = std::getenv("KILN_LOCAL_SOCKET");
  std::string local_socket = env_local != nullptr ? env_local : "";
  app.add_option("--local-socket", local_socket,
                 "Send inferences over kilnd's local socket at this path (kilnd --local-socket) "
                 "instead of gRPC; other calls still use --server (default: $KILN_LOCAL_SOCKET)");
  std::string tls_ca, tls_cert, tls_key;
  bool tls = false;
  app.add_flag("--tls", tls, "Connect with TLS, checking the server against the system's CAs");
  app.add_option("--tls-ca", tls_ca,
                 "Connect with TLS, checking the server's certificate against these CA "
                 "certificates (PEM file)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", tls_cert,
                 "Client certificate chain (PEM) for a kilnd with --tls-client-ca (mutual TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls_key, "Private key of --tls-cert (PEM)")
      ->check(CLI::ExistingFile);
  app.require_subcommand(1);

  std::string file, name, config_file, output_dir, version;
  std::vector<std::string> input_args, output_names;
  int64_t upload_version = 0;
  size_t chunk_bytes = 0;
  bool single_message = false;
  int64_t print_limit = kDefaultPrintLimit;

  CLI::App* upload = app.add_subcommand(
      "upload", "Upload a model file (torch.export .pt2 or TorchScript .pt) as a new model version (streamed, verified, resumable), "
                "wait until it is served and print its inputs and outputs");
  upload->add_option("FILE", file, "TorchScript archive (torch.jit.save)")->required();
  upload->add_option("--name", name, "Model name")->required();
  upload->add_option("--config", config_file, "Load configuration JSON file");
  upload->add_option("--version", upload_version,
                     "Version to install (default: the next one)")
      ->check(CLI::PositiveNumber);
  upload->add_option("--chunk-bytes", chunk_bytes, "Bytes per streamed chunk (default 1 MiB)")
      ->check(CLI::PositiveNumber);
  upload->add_flag("--single-message", single_message,
                   "Send the file in one RepositoryModelLoad message (Triton's way)");
  bool progress = false, no_progress = false;
  upload->add_flag("--progress", progress,
                   "Show the progress bar (bytes, rate) even when stderr is not a terminal or the "
                   "file is small; default: on a terminal, for files of 4 MiB or more");
  upload->add_flag("--no-progress", no_progress, "Never show the progress bar");
  bool dry_run = false;
  upload->add_flag("--dry-run", dry_run,
                   "Import and validate only, print the derived contract (names, datatypes, "
                   "shapes, fallback ops); the server stores and serves nothing");

  CLI::App* remove = app.add_subcommand("delete", "Stop serving a model and delete its files");
  remove->add_option("NAME", name, "Model name")->required();
  remove->add_option("--version", upload_version, "Only this version")
      ->check(CLI::PositiveNumber);

  CLI::App* models = app.add_subcommand("models", "List the server's models");

  CLI::App* metadata = app.add_subcommand("metadata", "Show a model's inputs and outputs");
  metadata->add_option("NAME", name, "Model name")->required();
  metadata->add_option("--version", version, "Model version (default: the latest ready)");

  CLI::App* infer = app.add_subcommand(
      "infer", "Run a model on .npy files or inline values; print small outputs as a table");
  infer->footer(R"(Inputs:
  -i NAME=FILE.npy           a NumPy file
  -i NAME=1,2,3              inline values; datatype and shape from the model's metadata
  -i NAME=1,2,3,4:2x2        with a shape (dims joined by 'x')
  -i NAME=[[1,2],[3,4]]      nested brackets give the shape
  -i NAME=7:INT64            with a datatype (FP32, FP64, INT64, INT32, INT8, UINT8, BOOL, ...)
Outputs with at most --print-limit values are printed as a table (rows: leading
indices, columns: the last dim); larger ones as a one-line summary. -o DIR writes
every output to DIR/NAME.npy instead.)");
  infer->add_option("NAME", name, "Model name")->required();
  infer->add_option("--version", version, "Model version (default: the latest ready)");
  infer->add_option("-i,--input", input_args, "NAME=FILE.npy or NAME=VALUES[:DTYPE][:SHAPE] (repeatable)")
      ->required();
  infer->add_option("--output", output_names, "Output to return (repeatable; default: all)");
  infer->add_option("-o,--output-dir", output_dir, "Write every output to DIR/<output>.npy");
  infer->add_option("--print-limit", print_limit,
                    "Print outputs with at most this many values as a table")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  kiln::cli::ProfileOptions profile_options;
  CLI::App* profile = app.add_subcommand(
      "profile", "Run a model with the server's profiler and print where the time goes, per "
                 "node of the compiled graph, sorted");
  profile->footer(R"(Columns: share of the total, ms per run, calls per run, node id, op (indented
inside an If or Loop), kernel (e.g. onednn.conv; Kiln's own kernels go by the op's
name), step (static: planned at compile time; dynamic: prepared per run; if,
loop: their own time, less their blocks'), output types with layout (e.g.
FP32[1, 64, 56, 56]{nhwc}) and the source op. Inputs as for `kiln infer`.)");
  profile->add_option("NAME", name, "Model name")->required();
  profile->add_option("--version", version, "Model version (default: the latest ready)");
  profile->add_option("-i,--input", input_args, "NAME=FILE.npy or NAME=VALUES[:DTYPE][:SHAPE] (repeatable)")
      ->required();
  profile->add_option("--runs", profile_options.runs, "Profiled runs, merged")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  profile->add_option("--warmup", profile_options.warmup,
                      "Unprofiled runs first (the first request compiles the plan)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  profile->add_option("--trace", profile_options.trace_path,
                      "Write the Chrome/Perfetto trace-event JSON (one event per step run)");
  profile->add_option("--json", profile_options.json_path, "Write the merged profile as JSON");
  profile->add_option("--top", profile_options.top, "Print only the K costliest nodes (0: all)")
      ->check(CLI::NonNegativeNumber);

  CLI::App* unload = app.add_subcommand("unload", "Stop serving a model (files stay)");
  unload->add_option("NAME", name, "Model name")->required();

  CLI::App* stats =
      app.add_subcommand("stats", "Show inference, load and compiled-graph cache statistics");
  stats->add_option("NAME", name, "Model name (default: all)");

  CLI::App* health = app.add_subcommand("health", "Check that the server is live and ready");

  std::string dot_file;
  bool remote = false, strict = false;
  CLI::App* inspect = app.add_subcommand(
      "inspect", "Show the graph Kiln imports from a model file (offline) or a served model");
  inspect->add_option("MODEL", file, "Model file (.pt2 or .pt), or a model name with --remote")
      ->required();
  inspect->add_option("--dot", dot_file, "Also write the graph as Graphviz to this file");
  inspect->add_flag("--strict", strict, "Fail listing every op without a native translation");
  inspect->add_flag("--remote", remote, "Ask the server for the graph of the model MODEL");
  inspect->add_option("--version", version, "With --remote: the model version");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message
    return kiln::cli::kExitUsage;
  }

  auto fail = [&](const absl::Status& status) {
    std::string hint;
    if (status.code() == absl::StatusCode::kUnavailable) {
      hint = absl::StrCat(" (is kilnd running at ", server, "? set --server or KILN_SERVER)");
    } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
      hint = absl::StrFormat(" (no answer from %s within --timeout %g s)", server, timeout_s);
    } else if (status.code() == absl::StatusCode::kUnauthenticated) {
      hint = token.empty() ? " (set KILN_TOKEN or --token)" : " (check KILN_TOKEN or --token)";
    }
    std::fprintf(stderr, "kiln: error: %s: %s%s\n", absl::StatusCodeToString(status.code()).c_str(),
                 std::string(status.message()).c_str(), hint.c_str());
    return kiln::cli::ExitCodeFor(status.code());
  };

  if (inspect->parsed() && !remote) {
    // Offline, no server: the importer's binary next to this one does it.
    std::vector<std::string> args = {file};
    if (!dot_file.empty()) args.insert(args.end(), {"--dot", dot_file});
    if (strict) args.push_back("--strict");
    return fail(kiln::cli::RunInspectBinary(args));
  }

  kiln::client::ClientOptions client_options;
  client_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s * 1e3)));
  client_options.token = token;
  client_options.local_socket = local_socket;
  client_options.tls = tls;
  client_options.tls_ca_file = tls_ca;
  client_options.tls_cert_file = tls_cert;
  client_options.tls_key_file = tls_key;
  absl::StatusOr<std::unique_ptr<InferenceClient>> client =
      InferenceClient::Connect(server, client_options);
  absl::Status status = client.status();
  if (status.ok()) {
    InferenceClient& c = **client;
    if (upload->parsed() && dry_run) {
      status = DryRunUpload(c, file, name, config_file);
    } else if (upload->parsed()) {
      std::optional<bool> show;
      if (progress) show = true;
      if (no_progress) show = false;
      status = Upload(c, file, name, config_file, upload_version, chunk_bytes, single_message,
                      show);
    }
    if (remove->parsed()) status = Delete(c, name, upload_version);
    if (models->parsed()) status = Models(c);
    if (metadata->parsed()) status = Metadata(c, name, version);
    if (infer->parsed()) {
      status = Infer(c, name, input_args, output_names, output_dir, version, print_limit);
    }
    if (profile->parsed()) {
      absl::StatusOr<std::vector<kiln::client::NamedTensor>> inputs =
          BuildInputs(c, name, input_args, version);
      status = inputs.ok() ? kiln::cli::Profile(c, name, *inputs, version, profile_options)
                           : inputs.status();
    }
    if (unload->parsed()) status = Unload(c, name);
    if (stats->parsed()) status = Stats(c, name);
    if (health->parsed()) status = Health(c);
    if (inspect->parsed()) status = kiln::cli::InspectRemote(c, file, version);
  }
  if (!status.ok()) return fail(status);
  return kiln::cli::kExitOk;
}
