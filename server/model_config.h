// The load configuration a model may carry (REPO/NAME/config.json, or the
// "config" parameter of RepositoryModelLoad):
//   {"inputs":  [{"name": "x", "datatype": "FP32", "dims": [-1, 3, 224, 224]}],
//    "outputs": [{"name": "logits"}]}
// Names apply by position (they rename forward()'s parameters and the graph
// outputs); datatype and dims, when given, become the model's declared contract.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/importer/torchscript_importer.h"
#include "engine/runtime/model.h"

namespace kiln::server {

struct ModelConfig {
  importer::ImportOptions import;
  // Declarations by position; an entry's name may be empty until
  // FillDeclaredNames() takes it from the imported graph.
  runtime::ModelOptions model;
};

// Parses the JSON text. Fails with InvalidArgument naming the offending key
// for malformed JSON, unknown keys, an unknown datatype or a dim below -1.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json);

// Gives every unnamed declaration the name of the graph input/output at its
// position, so the runtime can match declarations by name. InvalidArgument
// when the config declares more inputs or outputs than the graph has.
absl::Status FillDeclaredNames(const ir::Graph& graph, runtime::ModelOptions& options);

}  // namespace kiln::server
