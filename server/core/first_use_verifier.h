// Verification on first use: a request whose signature (input dtypes and
// shapes) the load did not verify (no shape known at load, so "verify:
// skipped"; or a new signature of a model with dynamic dims) also runs
// through libtorch, in the sandboxed worker child the verified import uses
// (server/torch/torch_reference_client.h), and the two answers are compared as the
// verified import compares them (engine/verify, engine/common/tolerance.h).
//
//   passed    the request is answered with Kiln's result; later requests of
//             the signature run natively without a second look
//   diverged  the diverging ops are forced onto the libtorch fallback for
//             that signature (the on_mismatch "fallback" repair: the file
//             imported again with them forced, verified again); the request
//             is answered with libtorch's result, and later requests of the
//             signature run on the repaired model
//
// Both outcomes are remembered across restarts (FirstUseOptions::record_path):
// after one, a passed signature runs natively at once, and a repaired one on
// the model rebuilt with the same ops forced, without libtorch's run.
//
// A signature is verified once per served model version: concurrent first
// requests of one signature wait for the one verification. What was found is
// logged and published in the model's metadata (Properties()). libtorch never
// runs in kilnd: a kilnd without kiln-torch-worker (built or deployed without
// libtorch) has no verification on first use and says so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/common/precision.h"
#include "engine/importer/import.h"
#include "engine/runtime/model.h"
#include "engine/verify/verify.h"

namespace kiln::server {

struct FirstUseOptions {
  // For the log: "model 'm' version 1".
  std::string label;
  double tolerance = 1e-4;
  Precision precision = Precision::kFp32;
  importer::ImportOptions import;
  // How many ops a diverging signature may force onto the fallback.
  int max_forced_ops = 4;
  // One verification's time bound besides the request's own deadline.
  std::chrono::seconds timeout{600};
  // The libtorch run of the model file at `path`, bounded by `deadline`.
  std::function<std::unique_ptr<verify::TorchReference>(
      const std::string& path, std::chrono::steady_clock::time_point deadline)>
      reference;
  // Where the signatures that passed, and those repaired with ops forced onto
  // the fallback, are remembered across restarts: a file whose name the
  // caller derives from everything that decides a verification's outcome
  // (the model's content, the load settings, the tolerance and precision, the
  // engine version), rewritten whole and atomically after each signature
  // decided so. Empty: kept in memory only.
  std::string record_path;
  // The model of the file at `path` imported again with ops forced onto the
  // fallback, without a gate of its own (set_rebuild).
  std::function<absl::StatusOr<std::unique_ptr<runtime::Model>>(
      const std::string& path, const importer::ImportOptions& import,
      std::chrono::steady_clock::time_point deadline)>
      rebuild;
};

// A signature FirstUseOptions::record_path remembers: one that passed (no
// forced ops), or one served with `forced` on the libtorch fallback.
struct RecordedSignature {
  std::string key;
  std::string summary;
  std::vector<std::string> forced;

  bool operator==(const RecordedSignature& o) const {
    return key == o.key && summary == o.summary && forced == o.forced;
  }
};

// The signatures of the record at `path`, in file order: none when it is
// missing, unreadable or not a record. Reads both formats: 1 (kilnd before
// the fallen-back signatures were kept: every line passed) and 2.
std::vector<RecordedSignature> ReadSignatureRecord(const std::string& path);
// The record of `signatures`, in format 2 (tabs and newlines inside a field
// become spaces).
std::string FormatSignatureRecord(const std::vector<RecordedSignature>& signatures);

class FirstUseVerifier : public runtime::SignatureGate {
 public:
  // Reads the signatures options.record_path remembers (a missing or
  // unreadable record is an empty one): those that passed are not verified
  // again, and those that fell back are served by the model rebuilt with
  // the same ops forced (options.rebuild, on their first request) without
  // libtorch verifying them again.
  explicit FirstUseVerifier(FirstUseOptions options);

  // The model file the verifications run (it moves once an upload is served).
  void set_model_path(std::string path);
  // Sets options.rebuild; before the first request.
  void set_rebuild(decltype(FirstUseOptions::rebuild) rebuild) {
    options_.rebuild = std::move(rebuild);
  }
  // Records a signature the load verified (`how`: the load's summary).
  void MarkVerified(const std::string& key, std::string how);

  absl::StatusOr<std::optional<std::vector<runtime::RunValue>>> Admit(
      const runtime::Model& model, const std::string& key,
      const std::vector<kernels::TensorInfo>& signature,
      const std::vector<runtime::RunValue>& args, const runtime::RunOptions& run) const override;

  // verify.first_use ("on"), verify.first_use.count (verifications run),
  // verify.first_use.fallbacks (signatures that fell back in those runs),
  // verify.signatures ("FP32[1, 5];: passed; FP32[3, 5];: fallback
  // (aten::gelu)"), and verify.signature.<key> with each one's summary (the
  // key without spaces or its last ';': "verify.signature.FP32[3,5]").
  std::map<std::string, std::string> Properties() const override;

 private:
  enum class State { kVerifying, kPassed, kFallback, kUnverified };
  struct Signature {
    State state = State::kVerifying;
    std::string summary;
    std::vector<std::string> forced;
    std::shared_ptr<const runtime::Model> repaired;  // kFallback
    // kFallback read from the record: `repaired` is built on first use.
    bool remembered = false;
    // Its rebuild is under way: other requests of it wait.
    bool rebuilding = false;
  };
  struct Outcome {
    Signature signature;
    std::optional<std::vector<runtime::RunValue>> answer;
    // Kiln's own run of the request failed (a fallback worker that died, the
    // request's memory limit): the request fails so, nothing is decided,
    // and libtorch is not asked.
    absl::Status kiln_failed;
  };

  // Runs the request and the verification of its signature (no lock held).
  absl::StatusOr<Outcome> Verify(const runtime::Model& model, const std::string& key,
                                 const std::vector<kernels::TensorInfo>& signature,
                                 const std::vector<runtime::RunValue>& args,
                                 const runtime::RunOptions& run) const;

  // Rewrites options_.record_path with the signatures that passed or were
  // repaired (mu_ held).
  void SaveRecordLocked() const;
  // Builds `key`'s remembered repair (options_.rebuild with its forced ops);
  // on a failure not the request's, forgets the signature so that it is
  // verified afresh. `lock` holds mu_, and is released while building.
  absl::Status RebuildRemembered(std::unique_lock<std::mutex>& lock, const std::string& key,
                                 const runtime::RunOptions& run) const;

  FirstUseOptions options_;
  mutable std::mutex mu_;
  mutable std::condition_variable verified_;
  std::string path_;
  mutable std::map<std::string, Signature> signatures_;
  mutable uint64_t verifications_ = 0;
  mutable uint64_t fallbacks_ = 0;
};

// Whether this kilnd can verify on first use, and why not: it needs
// kiln-torch-worker at `torch_worker` (RegistryOptions::torch_worker; empty:
// libtorch runs in the server's process). Empty when it can.
std::string FirstUseUnavailable(const std::string& torch_worker);

}  // namespace kiln::server
