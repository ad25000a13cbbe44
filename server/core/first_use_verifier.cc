#include "server/core/first_use_verifier.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/common/status_macros.h"
#include "server/core/model_repository.h"

namespace kiln::server {
namespace {

// Whether the verification was stopped by the request itself (its deadline
// passed, it was cancelled) rather than decided: the request fails so, and a
// later request verifies the signature. Any other failure (libtorch's child
// past its memory or time limit, libtorch refusing the values) leaves the
// signature unverified and the request served natively.
bool StoppedByRequest(const absl::Status& s, const runtime::RunOptions& run) {
  return absl::IsCancelled(s) ||
         (absl::IsDeadlineExceeded(s) && std::chrono::steady_clock::now() >= run.deadline);
}

// libtorch's results (ReferenceResult::outputs, each flattened) as the
// values of the graph's outputs.
std::vector<runtime::RunValue> AsOutputs(const ir::Graph& graph,
                                         const std::vector<std::vector<Tensor>>& outputs) {
  std::vector<runtime::RunValue> values;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const bool list = k < graph.outputs().size() &&
                      graph.value(graph.outputs()[k]).kind == ir::ValueKind::kTensorList;
    if (list) {
      values.push_back(runtime::RunValue::List(outputs[k]));
    } else if (outputs[k].empty()) {
      values.push_back(runtime::RunValue::None());
    } else {
      values.push_back(runtime::RunValue::Of(outputs[k][0]));
    }
  }
  return values;
}

}  // namespace

std::string FirstUseUnavailable(const std::string& torch_worker) {
  if (torch_worker.empty()) {
    return "unavailable: libtorch runs in this process (a server of tests or tools), and runs a "
           "model's requests only in kiln-torch-worker";
  }
  if (::access(torch_worker.c_str(), X_OK) != 0) {
    return absl::StrCat("unavailable: this kilnd has no kiln-torch-worker beside it ('",
                        torch_worker, "'; built or deployed without libtorch)");
  }
  return "";
}

void FirstUseVerifier::set_model_path(std::string path) {
  std::lock_guard<std::mutex> lock(mu_);
  path_ = std::move(path);
}

// The record: a header line, then one "KEY<TAB>SUMMARY" line per signature
// that passed. Small (a line per signature); a larger or malformed file is
// read as far as it makes sense and otherwise ignored.
constexpr char kRecordHeader[] = "kiln verified signatures 1";
constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr char kRemembered[] = " (remembered from an earlier run of kilnd)";

// The record's (key, summary) lines, in file order; none when it is missing,
// unreadable or not a record.
static std::vector<std::pair<std::string, std::string>> ReadRecord(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kRecordHeader) return entries;
  size_t bytes = line.size();
  while (std::getline(in, line) && (bytes += line.size() + 1) <= kMaxRecordBytes) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) continue;
    entries.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return entries;
}

FirstUseVerifier::FirstUseVerifier(FirstUseOptions options) : options_(std::move(options)) {
  if (options_.record_path.empty()) return;
  for (auto& [key, summary] : ReadRecord(options_.record_path)) {
    Signature& sig = signatures_[key];
    sig.state = State::kPassed;
    sig.summary = std::move(summary);
    if (!absl::EndsWith(sig.summary, kRemembered)) sig.summary += kRemembered;
  }
  if (!signatures_.empty()) {
    spdlog::info("{}: {} signature(s) verified on first use by an earlier run are not verified again",
                 options_.label, signatures_.size());
  }
}

void FirstUseVerifier::SaveRecordLocked() const {
  if (options_.record_path.empty()) return;
  std::string text = absl::StrCat(kRecordHeader, "\n");
  // Lines another served copy of the same file wrote (another name, same
  // content and settings) stay.
  for (const auto& [key, summary] : ReadRecord(options_.record_path)) {
    if (signatures_.count(key) == 0) absl::StrAppend(&text, key, "\t", summary, "\n");
  }
  for (const auto& [key, sig] : signatures_) {
    if (sig.state != State::kPassed || absl::StartsWith(sig.summary, "verified at load")) continue;
    // One line each: no tab or newline inside a field.
    auto flat = [](std::string v) {
      for (char& c : v) {
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
      }
      return v;
    };
    absl::StrAppend(&text, flat(key), "\t", flat(sig.summary), "\n");
  }
  const std::string dir = std::filesystem::path(options_.record_path).parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (absl::Status s = WriteFileAtomically(options_.record_path, text); !s.ok()) {
    // Only costs verifying again after a restart.
    spdlog::warn("{}: cannot remember the verified signatures: {}", options_.label,
                 std::string(s.message()));
  }
}

void FirstUseVerifier::MarkVerified(const std::string& key, std::string how) {
  std::lock_guard<std::mutex> lock(mu_);
  Signature& s = signatures_[key];
  s.state = State::kPassed;
  s.summary = absl::StrCat("verified at load: ", how);
}

absl::StatusOr<std::optional<std::vector<runtime::RunValue>>> FirstUseVerifier::Admit(
    const runtime::Model& model, const std::string& key,
    const std::vector<kernels::TensorInfo>& signature, const std::vector<runtime::RunValue>& args,
    const runtime::RunOptions& run) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = signatures_.find(key);
  // Another request of the signature is verifying it: wait for its outcome.
  while (it != signatures_.end() && it->second.state == State::kVerifying) {
    if (std::chrono::steady_clock::now() >= run.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          run.deadline_name, " passed while the signature was verified against libtorch"));
    }
    verified_.wait_for(lock, std::chrono::milliseconds(50));
    it = signatures_.find(key);
  }
  if (it != signatures_.end()) {
    if (it->second.state != State::kFallback) return std::nullopt;
    std::shared_ptr<const runtime::Model> repaired = it->second.repaired;
    const std::string path = path_;
    lock.unlock();
    if (repaired == nullptr) {
      // No forced op repaired the signature: libtorch answers each request of it.
      const auto deadline =
          std::min(run.deadline, std::chrono::steady_clock::now() + options_.timeout);
      std::unique_ptr<verify::TorchReference> reference =
          options_.reference(path, deadline);
      verify::ReferenceRequest request;
      for (size_t i = 0; i < args.size(); ++i) {
        const ir::Value& in = model.graph().value(model.graph().inputs()[i]);
        request.inputs.push_back(verify::ReferenceInput{args[i], ir::IsScalarKind(in.kind)});
      }
      ASSIGN_OR_RETURN(verify::ReferenceResult result, reference->Run(request));
      if (!result.rejected.empty()) return absl::InvalidArgumentError(result.rejected);
      return AsOutputs(model.graph(), result.outputs);
    }
    ASSIGN_OR_RETURN(std::vector<runtime::RunValue> outs,
                     repaired->RunMatched(signature, args, run));
    return std::optional<std::vector<runtime::RunValue>>(std::move(outs));
  }
  signatures_[key].state = State::kVerifying;
  ++verifications_;
  lock.unlock();

  absl::StatusOr<Outcome> outcome = Verify(model, key, signature, args, run);
  lock.lock();
  const bool undecided = !outcome.ok() ? StoppedByRequest(outcome.status(), run)
                                       : !outcome->kiln_failed.ok();
  if (undecided) {
    // Not decided: a later request verifies the signature.
    signatures_.erase(key);
    --verifications_;
    verified_.notify_all();
    return outcome.ok() ? outcome->kiln_failed : outcome.status();
  }
  Signature& s = signatures_[key];
  if (!outcome.ok()) {
    s.state = State::kUnverified;
    s.summary = absl::StrCat("not verified: ", outcome.status().message());
    spdlog::warn("{}: signature {} {}", options_.label, key, s.summary);
    verified_.notify_all();
    return std::nullopt;
  }
  s = outcome->signature;
  if (s.state == State::kFallback) ++fallbacks_;
  if (s.state == State::kPassed) SaveRecordLocked();
  verified_.notify_all();
  return std::move(outcome->answer);
}

absl::StatusOr<FirstUseVerifier::Outcome> FirstUseVerifier::Verify(
    const runtime::Model& model, const std::string& key,
    const std::vector<kernels::TensorInfo>& signature, const std::vector<runtime::RunValue>& args,
    const runtime::RunOptions& run) const {
  Outcome outcome;
  // The request as it runs without verification first: a failure of Kiln's
  // own is the request's, and libtorch need not run. Its result answers the
  // request unless Kiln diverges.
  absl::StatusOr<std::vector<runtime::RunValue>> kiln = model.RunMatched(signature, args, run);
  if (!kiln.ok()) {
    outcome.kiln_failed = kiln.status();
    return outcome;
  }
  outcome.answer = *std::move(kiln);
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    path = path_;
  }
  const auto deadline =
      std::min(run.deadline, std::chrono::steady_clock::now() + options_.timeout);
  verify::VerifyOptions options;
  options.tolerance = options_.tolerance;
  options.compile.precision = options_.precision;
  options.values = args;
  options.kiln_outputs = outcome.answer;
  options.fallback_on_mismatch = options_.max_forced_ops;
  options.run = run;
  options.run.deadline = deadline;
  std::unique_ptr<verify::TorchReference> reference = options_.reference(path, deadline);
  ASSIGN_OR_RETURN(verify::VerifyReport report,
                   verify::VerifyOnce(*reference, options_.import, model, options));
  if (report.skipped) {
    outcome.signature.state = State::kUnverified;
    outcome.signature.summary = absl::StrCat("not verified: ", report.skip_reason);
    spdlog::warn("{}: signature {} {}", options_.label, key, outcome.signature.summary);
    return outcome;
  }
  if (report.passed) {
    outcome.signature.state = State::kPassed;
    outcome.signature.summary = absl::StrCat("verified on first use: ", report.Summary());
    spdlog::info("{}: signature {} {}", options_.label, key, outcome.signature.summary);
    return outcome;
  }
  // Kiln diverges: answer with libtorch's result, and repair the signature
  // as the load's on_mismatch "fallback" repairs a model.
  outcome.answer = AsOutputs(model.graph(), report.reference_outputs);
  const std::string diverged = report.Summary();
  auto rebuild = [&](const importer::ImportOptions& import) {
    return options_.rebuild(path, import, deadline);
  };
  ASSIGN_OR_RETURN(verify::VerifiedModel repaired,
                   verify::RepairWithFallback(*reference, options_.import, std::move(report),
                                              rebuild, options));
  outcome.signature.state = State::kFallback;
  outcome.signature.forced = repaired.report.forced_fallback;
  if (repaired.report.passed && repaired.model != nullptr) {
    outcome.signature.repaired = std::move(repaired.model);
    outcome.signature.summary =
        absl::StrCat("fallback: Kiln diverged from libtorch (", diverged, "); served with ",
                     absl::StrJoin(outcome.signature.forced, ", "),
                     " through the libtorch fallback: ", repaired.report.Summary());
  } else {
    outcome.signature.summary = absl::StrCat(
        "fallback: Kiln diverged from libtorch (", diverged,
        "); no forced fallback op repaired it, so libtorch answers every request of it");
  }
  spdlog::warn("{}: signature {} {}; this request is answered with libtorch's result",
               options_.label, key, outcome.signature.summary);
  return outcome;
}

std::map<std::string, std::string> FirstUseVerifier::Properties() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::string> p;
  p["verify.first_use"] = "on";
  p["verify.first_use.count"] = absl::StrCat(verifications_);
  p["verify.first_use.fallbacks"] = absl::StrCat(fallbacks_);
  std::vector<std::string> listed;
  for (const auto& [key, s] : signatures_) {
    std::string state;
    switch (s.state) {
      case State::kVerifying: state = "verifying"; break;
      case State::kPassed: state = "passed"; break;
      case State::kUnverified: state = "not verified"; break;
      case State::kFallback:
        state = absl::StrCat("fallback (", absl::StrJoin(s.forced, ","), ")");
        break;
    }
    listed.push_back(absl::StrCat(key, ": ", state));
    // A property name has no spaces: "verify.signature.FP32[4,16]".
    std::string name = absl::StrReplaceAll(key, {{" ", ""}});
    if (!name.empty() && name.back() == ';') name.pop_back();
    if (!s.summary.empty()) p[absl::StrCat("verify.signature.", name)] = s.summary;
  }
  p["verify.signatures"] = absl::StrJoin(listed, " | ");
  return p;
}

}  // namespace kiln::server
