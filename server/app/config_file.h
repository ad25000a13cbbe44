// kilnd --config FILE: the same settings as the flags, from a YAML or JSON
// file (JSON is read as YAML's flow style, so one parser serves both).
//
//   # kiln.yaml
//   port: 8001
//   model-repository: /models     # or model_repository
//   threads: 4
//
// Keys are the long flag names without "--" ('_' may stand for '-'); values
// are scalars, or lists for repeatable flags. A flag given on the command
// line wins over the file. An unknown key, a nested mapping or a value that
// fails the flag's own check is an error naming the key.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kiln::server {

// CLI11's config-file hook for kilnd's App (install with app.config_formatter).
class ConfigFileFormat : public CLI::Config {
 public:
  // `app` must outlive this object; it is asked which keys are flags.
  explicit ConfigFileFormat(const CLI::App* app) : app_(app) {}

  // Throws CLI::ConfigError naming the file and the key for anything that is
  // not a flat mapping of known flags to values.
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

  // The current settings as YAML (for `--help`-style dumps; not used to parse).
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;

 private:
  std::string FileName() const;

  const CLI::App* app_;
};

}  // namespace kiln::server
