#include "server/core/first_use_verifier.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
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

// The record: a header line, then one line per signature: "KEY<TAB>SUMMARY"
// for one that passed, "KEY<TAB>SUMMARY<TAB>fallback=OP,OP" for one served
// with those ops forced onto the fallback. Format 1 had only the first kind
// (its header is still read); a kilnd that knows only format 1 ignores a
// format 2 record, so it never takes a fallen-back signature for a passed
// one. Small (a line per signature); a larger or malformed file is read as
// far as it makes sense and otherwise ignored.
constexpr char kRecordHeader1[] = "kiln verified signatures 1";
constexpr char kRecordHeader[] = "kiln verified signatures 2";
constexpr char kFallbackField[] = "fallback=";
constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr char kRemembered[] = " (remembered from an earlier run of kilnd)";

std::vector<RecordedSignature> ReadSignatureRecord(const std::string& path) {
  std::vector<RecordedSignature> entries;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return entries;
  const bool format1 = line == kRecordHeader1;
  if (!format1 && line != kRecordHeader) return entries;
  size_t bytes = line.size();
  while (std::getline(in, line) && (bytes += line.size() + 1) <= kMaxRecordBytes) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields[0].empty() || fields.size() < 2) continue;
    RecordedSignature entry{fields[0], fields[1], {}};
    if (format1) {
      // Its summary was the rest of the line.
      entry.summary = line.substr(line.find('\t') + 1);
    } else if (fields.size() > 3) {
      continue;
    } else if (fields.size() == 3) {
      if (!absl::StartsWith(fields[2], kFallbackField)) continue;
      entry.forced = absl::StrSplit(fields[2].substr(strlen(kFallbackField)), ',',
                                    absl::SkipEmpty());
      if (entry.forced.empty()) continue;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string FormatSignatureRecord(const std::vector<RecordedSignature>& signatures) {
  // One line each: no tab or newline inside a field.
  auto flat = [](std::string v) {
    for (char& c : v) {
      if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    }
    return v;
  };
  std::string text = absl::StrCat(kRecordHeader, "\n");
  for (const RecordedSignature& s : signatures) {
    absl::StrAppend(&text, flat(s.key), "\t", flat(s.summary));
    if (!s.forced.empty()) {
      absl::StrAppend(&text, "\t", kFallbackField, flat(absl::StrJoin(s.forced, ",")));
    }
    absl::StrAppend(&text, "\n");
  }
  return text;
}

FirstUseVerifier::FirstUseVerifier(FirstUseOptions options) : options_(std::move(options)) {
  if (options_.record_path.empty()) return;
  size_t fell_back = 0;
  for (RecordedSignature& entry : ReadSignatureRecord(options_.record_path)) {
    Signature& sig = signatures_[entry.key];
    sig.state = entry.forced.empty() ? State::kPassed : State::kFallback;
    sig.summary = std::move(entry.summary);
    if (!absl::EndsWith(sig.summary, kRemembered)) sig.summary += kRemembered;
    sig.forced = std::move(entry.forced);
    sig.remembered = sig.state == State::kFallback;
    if (sig.remembered) ++fell_back;
  }
  if (!signatures_.empty()) {
    spdlog::info("{}: {} signature(s) verified on first use by an earlier run are not verified "
                 "again{}",
                 options_.label, signatures_.size(),
                 fell_back == 0 ? ""
                                : absl::StrCat(" (", fell_back,
                                               " of them served with ops forced onto the "
                                               "libtorch fallback)"));
  }
}

void FirstUseVerifier::SaveRecordLocked() const {
  if (options_.record_path.empty()) return;
  std::vector<RecordedSignature> kept;
  // Lines another served copy of the same file wrote (another name, same
  // content and settings) stay.
  for (RecordedSignature& entry : ReadSignatureRecord(options_.record_path)) {
    if (signatures_.count(entry.key) == 0) kept.push_back(std::move(entry));
  }
  for (const auto& [key, sig] : signatures_) {
    const bool passed =
        sig.state == State::kPassed && !absl::StartsWith(sig.summary, "verified at load");
    // Only a repair can be rebuilt: a signature no forced op repaired is
    // verified again after a restart.
    const bool repaired = sig.state == State::kFallback && !sig.forced.empty() &&
                          (sig.repaired != nullptr || sig.remembered);
    if (passed || repaired) {
      kept.push_back(RecordedSignature{key, sig.summary,
                                       repaired ? sig.forced : std::vector<std::string>{}});
    }
  }
  const std::string dir = std::filesystem::path(options_.record_path).parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (absl::Status s = WriteFileAtomically(options_.record_path, FormatSignatureRecord(kept));
      !s.ok()) {
    // Only costs verifying again after a restart.
    spdlog::warn("{}: cannot remember the verified signatures: {}", options_.label,
                 std::string(s.message()));
  }
}

absl::Status FirstUseVerifier::RebuildRemembered(std::unique_lock<std::mutex>& lock,
                                                 const std::string& key,
                                                 const runtime::RunOptions& run) const {
  Signature& sig = signatures_[key];
  sig.rebuilding = true;
  importer::ImportOptions import = options_.import;
  import.force_fallback.insert(import.force_fallback.end(), sig.forced.begin(), sig.forced.end());
  const std::string path = path_;
  lock.unlock();
  const auto deadline =
      std::min(run.deadline, std::chrono::steady_clock::now() + options_.timeout);
  absl::StatusOr<std::unique_ptr<runtime::Model>> rebuilt =
      absl::FailedPreconditionError("this server cannot rebuild a model");
  if (options_.rebuild) rebuilt = options_.rebuild(path, import, deadline);
  lock.lock();
  verified_.notify_all();
  Signature& s = signatures_[key];
  s.rebuilding = false;
  if (rebuilt.ok()) {
    s.repaired = *std::move(rebuilt);
    s.remembered = false;
    spdlog::info("{}: signature {} served with {} through the libtorch fallback, as an earlier "
                 "run of kilnd found; not verified again",
                 options_.label, key, absl::StrJoin(s.forced, ", "));
    return absl::OkStatus();
  }
  if (StoppedByRequest(rebuilt.status(), run)) return rebuilt.status();
  spdlog::warn("{}: signature {}: cannot rebuild the model with {} forced onto the fallback as "
               "an earlier run of kilnd did ({}); verifying it again",
               options_.label, key, absl::StrJoin(s.forced, ", "),
               std::string(rebuilt.status().message()));
  signatures_.erase(key);
  return absl::OkStatus();
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
  // Another request of the signature is verifying it, or rebuilding its
  // remembered repair: wait for its outcome.
  while (it != signatures_.end() &&
         (it->second.state == State::kVerifying || it->second.rebuilding)) {
    if (std::chrono::steady_clock::now() >= run.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          run.deadline_name, " passed while the signature was verified against libtorch"));
    }
    verified_.wait_for(lock, std::chrono::milliseconds(50));
    it = signatures_.find(key);
  }
  if (it != signatures_.end() && it->second.remembered) {
    // Repaired by an earlier run of kilnd: the same repair, without libtorch.
    RETURN_IF_ERROR(RebuildRemembered(lock, key, run));
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
  if (s.state == State::kPassed || s.repaired != nullptr) SaveRecordLocked();
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
