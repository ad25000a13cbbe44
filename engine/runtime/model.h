// A loaded model: its imported graph, the input/output contract it accepts, and
// the executables compiled for each input signature seen so far. Validates every
// request against the contract before running.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/tensor.h"
#include "engine/ir/graph.h"
#include "engine/runtime/executable.h"

namespace kiln::runtime {

// One input or output as the server advertises it. dims: -1 is a dynamic dim;
// nullopt means the rank itself is open. dtype kUnknown means open: any
// dtype is accepted and compiled for (an output's dtype then depends on the
// request's).
struct TensorSpec {
  std::string name;
  DType dtype = DType::kUnknown;
  std::optional<Dims> dims;
  // An input that may be left out of a request (an Optional[Tensor] argument,
  // or a parameter with a default).
  bool optional = false;
  // The parameter's default, as Python writes it ("2.0"), run when a request
  // leaves the input out; empty when it has none.
  std::string default_text;
  // Why the dtype is fixed, for metadata: "declared" (load config), "model"
  // (recorded in the file), "implied" (by the ops using the input),
  // "argument" (an int/float/bool parameter); empty while open.
  std::string dtype_source;
  // Where the tensor sits in forward()'s arguments or result, in Python
  // syntax: "x", "pair[1]", "result[0]", "result['logits']", "result[1][0]".
  std::string path;
  // Other dtypes the input also takes: INT32 for token ids whose INT64 is
  // implied by their use as indices only (passes::IsIndexOnlyInput).
  std::vector<DType> also_accepts;
  // A List[Tensor] argument's name ("xs"), empty for any other input. The spec
  // then describes every element: a request sends the list as "xs.0",
  // "xs.1", ... (consecutive from 0), or whole as "xs", its elements stacked
  // on a new first dim (the only way to send an empty list: shape [0]);
  // `name` is the first element's, "xs.0". Each list length (at most 4096) compiles its own
  // executable. An Optional[List[Tensor]] argument is also `optional`: left
  // out, it is None.
  std::string list;
  // dims shows the usual rank ([-1, 16]), but any number of leading dims
  // (none included) goes before dims[1:]: a Linear's input, or an output
  // that follows one. Checked on its last dims only.
  bool any_leading_dims = false;
  // Bounds the model declares for some of its dynamic dims (a .pt2's
  // Dim("batch", min=1, max=64)): a request outside them is refused, and
  // dims sharing a symbol must be equal.
  std::vector<ir::DimRange> dim_ranges;
};

// A request's inputs matched to a graph's (Model::MatchInputs): one value
// per graph input, the signature with an entry per list element, and each
// List[Tensor] input's length (nullopt for the others).
struct MatchedInputs {
  std::vector<kernels::TensorInfo> signature;
  std::vector<RunValue> args;
  std::vector<std::optional<size_t>> lengths;
  bool has_list = false;
};

// "[1, 64]", or ">= 2" when unbounded above.
std::string DimRangeString(const ir::DimRange& range);

// Triton's positional names, accepted as aliases: "INPUT__0", "OUTPUT__2".
std::string InputAlias(size_t position);
std::string OutputAlias(size_t position);

// The graph a request with these list lengths runs (one entry per graph
// input): each List[Tensor] input with a length becomes that many tensor
// inputs "<name>.<k>" gathered by a ListConstruct at the top of the main
// block, so the rest of the graph (cat over the list, a loop over it) is
// unchanged and compiles like any other. nullopt keeps the input as it is: an
// input that is not a list, or an optional list left out (None).
absl::StatusOr<ir::Graph> ExpandListInputs(const ir::Graph& graph,
                                           const std::vector<std::optional<size_t>>& lengths);

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Where a Model gets its executables. Without one, a Model compiles each
// signature once and keeps it for its lifetime; a server passes a shared cache
// bounded in bytes and backed by disk (engine/cache) instead.
class ExecutableProvider {
 public:
  virtual ~ExecutableProvider() = default;
  // Returns the executable of `graph` for `signature`, compiling on a miss.
  // Fails as Executable::Compile does.
  virtual absl::StatusOr<std::shared_ptr<const Executable>> Get(
      const ir::Graph& graph, const std::vector<kernels::TensorInfo>& signature,
      const CompileOptions& options) const = 0;
};

class Model;

// Sees every request's signature before it runs: kilnd's verification
// against libtorch on a signature's first use (server/core/first_use_verifier.h).
class SignatureGate {
 public:
  virtual ~SignatureGate() = default;
  // Called by Model::Infer with the request matched to the graph's inputs
  // (one value per graph input, a List[Tensor] input as a list), its
  // signature (an entry per list element) and the signature's key
  // (SignatureKey, after "lists=<lengths>;" when it has lists). Returns
  // nullopt to run it on `model` as usual, or the values to answer with
  // instead (one per graph output); a failure fails the request.
  virtual absl::StatusOr<std::optional<std::vector<RunValue>>> Admit(
      const Model& model, const std::string& key,
      const std::vector<kernels::TensorInfo>& signature, const std::vector<RunValue>& args,
      const RunOptions& run) const = 0;
  // What it found so far, added to the model's properties.
  virtual std::map<std::string, std::string> Properties() const = 0;
};

// The key of a signature (graph input order) in a model's plans and logs:
// "FP32[1, 3, 224, 224];INT64[1, 8];".
std::string SignatureKey(const std::vector<kernels::TensorInfo>& signature);

struct ModelOptions {
  CompileOptions compile;
  // Null: the model's own per-signature map.
  std::shared_ptr<const ExecutableProvider> executables;
  // Declarations from the load config; they override what the graph implies.
  // Matched by name; an empty name in `inputs` at position i renames nothing.
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // Given to every run that brings none (RunOptions::services): a server's
  // libtorch worker for the model's fallback ops. Null: none.
  std::shared_ptr<kernels::KernelServices> services;
  // Shown every request before it runs. Null: none.
  std::shared_ptr<const SignatureGate> gate;
};

class Model {
 public:
  // Builds the contract from the graph (names from the importer, dtypes and
  // ranks implied by the first consumers) and the declarations in `options`.
  static absl::StatusOr<std::unique_ptr<Model>> Create(ir::Graph graph, ModelOptions options);

  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  const ir::Graph& graph() const { return graph_; }

  // What the load found out about the model, for its metadata (the ops that
  // run through the libtorch fallback, the verified import's differences).
  // With the signature gate's, when it has one.
  std::map<std::string, std::string> properties() const;
  void set_property(const std::string& key, std::string value) {
    properties_[key] = std::move(value);
  }

  // Checks `inputs` against the contract (unknown, missing or duplicate name,
  // dtype, rank, fixed dims: InvalidArgument naming the input with expected
  // versus got), compiles for their signature on first use, runs, and returns
  // the requested outputs (all when `requested` is empty; an unknown or
  // repeated name is InvalidArgument). Inputs and outputs may also be named
  // by their Triton alias (INPUT__<i>, OUTPUT__<i>); a requested output comes
  // back under the name it was requested by. An input whose dtype is open
  // takes any dtype. An optional input may be left out; an int/float/bool
  // input takes a 0-dim or one-element tensor. A List[Tensor] input "xs" takes
  // "xs.0" ... "xs.<n-1>" (a gap is InvalidArgument naming the missing
  // element) or "xs" whole (see TensorSpec::list), and each n compiles its
  // own executable. An output that is a tensor list
  // comes back as "<name>.0", "<name>.1", ... (a list that is forward()'s
  // whole result, named "output" by the importer, as "output0", "output1",
  // ..., the names a tuple's elements have); one that is None is left out.
  // `run` bounds the run (Executable::RunValues); the model's services join
  // it unless it brings its own.
  absl::StatusOr<std::vector<NamedTensor>> Infer(const std::vector<NamedTensor>& inputs,
                                                 const std::vector<std::string>& requested,
                                                 const RunOptions& run = {}) const;

  // Matches a request's named inputs to the graph's inputs with every check
  // Infer makes (names and aliases, dtypes and also_accepts, dims, declared
  // dim ranges and shared symbols, lists, scalars, missing inputs) and
  // nothing run: the values RunMatched takes, in graph input order. Infer
  // runs on it; so does anything else that feeds the model tensors from
  // outside (an archive's sample inputs), so that no second copy of the
  // checks drifts from this one.
  absl::StatusOr<MatchedInputs> MatchInputs(const std::vector<NamedTensor>& inputs) const;

  // Runs values already matched to the graph's inputs (one per graph input;
  // a List[Tensor] input as a list, with an entry per element in
  // `signature`) on the executable of `signature`, compiled on first use,
  // without the signature gate: one value per graph output.
  absl::StatusOr<std::vector<RunValue>> RunMatched(const std::vector<kernels::TensorInfo>& signature,
                                                   const std::vector<RunValue>& args,
                                                   const RunOptions& run = {}) const;

  // The executable for one signature (graph input order), compiled on first
  // use; for `num_threads` threads when > 0 (RunOptions::num_threads), else
  // the model's.
  absl::StatusOr<std::shared_ptr<const Executable>> GetExecutable(
      const std::vector<kernels::TensorInfo>& signature, int num_threads = 0) const;

  size_t num_compiled() const;

  // The nodes whose kernel refused a signature compiled so far, so that they
  // run through libtorch for it (Executable::libtorch_fallbacks): per source
  // op ("aten::linear"), how many signatures.
  std::map<std::string, int> signature_fallbacks() const;

 private:
  Model() = default;

  // ExpandListInputs(graph_, lengths), built once per lengths.
  absl::StatusOr<std::shared_ptr<const ir::Graph>> GraphForLengths(
      const std::vector<std::optional<size_t>>& lengths) const;
  // GetExecutable for `graph` (graph_ or one of list_graphs_); `prefix` tells
  // the graphs apart in executables_.
  absl::StatusOr<std::shared_ptr<const Executable>> GetExecutableOf(
      const ir::Graph& graph, const std::string& prefix,
      const std::vector<kernels::TensorInfo>& signature, int num_threads = 0) const;
  // Runs `args` on `exe`, with the model's services unless `run` brings its own.
  absl::StatusOr<std::vector<RunValue>> RunOn(const Executable& exe,
                                              const std::vector<RunValue>& args,
                                              const RunOptions& run) const;
  // Records and logs `exe`'s libtorch_fallbacks() for signature `key`, once.
  void NoteSignatureFallbacks(const std::string& key, const Executable& exe) const;

  ir::Graph graph_;
  ModelOptions options_;
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
  std::map<std::string, std::string> properties_;

  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Executable>> executables_;
  mutable std::map<std::vector<std::optional<size_t>>, std::shared_ptr<const ir::Graph>>
      list_graphs_;
  // Signature key -> Executable::libtorch_fallbacks() of its executable.
  mutable std::map<std::string, std::vector<std::string>> signature_fallbacks_;
};

}  // namespace kiln::runtime
