#include "server/app/config_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

bool IsExcluded(const std::string& name) { return name == "help" || name == "config"; }

}  // namespace

std::string ConfigFileFormat::FileName() const {
  const CLI::Option* option = app_->get_config_ptr();
  if (option == nullptr || option->count() == 0) return "config file";
  return absl::StrCat("config file '", option->as<std::string>(), "'");
}

std::vector<CLI::ConfigItem> ConfigFileFormat::from_config(std::istream& input) const {
  YAML::Node root;
  try {
    root = YAML::Load(input);
  } catch (const YAML::Exception& e) {
    throw CLI::ConfigError(absl::StrCat(FileName(), ": not valid YAML or JSON: ", e.what()));
  }
  std::vector<CLI::ConfigItem> items;
  if (root.IsNull()) return items;  // an empty file sets nothing
  if (!root.IsMap()) {
    throw CLI::ConfigError(absl::StrCat(
        FileName(), ": expected a mapping of settings (e.g. 'port: 8001'), got a ",
        root.IsSequence() ? "list" : "single value"));
  }
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    const CLI::Option* option = app_->get_option_no_throw("--" + name);
    if (option == nullptr || IsExcluded(name)) {
      throw CLI::ConfigError(absl::StrCat(FileName(), ": unknown key '", key,
                                          "' (keys are kilnd's flag names without '--'; "
                                          "see kilnd --help)"));
    }
    CLI::ConfigItem item;
    item.name = name;
    const YAML::Node& value = entry.second;
    if (value.IsScalar()) {
      item.inputs.push_back(value.Scalar());
    } else if (value.IsSequence()) {
      for (const auto& element : value) {
        if (!element.IsScalar()) {
          throw CLI::ConfigError(
              absl::StrCat(FileName(), ": key '", key, "': list elements must be plain values"));
        }
        item.inputs.push_back(element.Scalar());
      }
    } else if (value.IsMap()) {
      throw CLI::ConfigError(absl::StrCat(FileName(), ": key '", key,
                                          "' holds a nested mapping; settings are flat "
                                          "(e.g. 'cache-dir: /cache')"));
    } else {
      throw CLI::ConfigError(absl::StrCat(FileName(), ": key '", key, "' has no value"));
    }
    items.push_back(std::move(item));
  }
  return items;
}

std::string ConfigFileFormat::to_config(const CLI::App* app, bool default_also,
                                        bool write_description, std::string /*prefix*/) const {
  std::ostringstream out;
  for (const CLI::Option* option : app->get_options()) {
    const std::string name = option->get_single_name();
    if (option->get_lnames().empty() || IsExcluded(name)) continue;
    std::string value;
    if (option->count() > 0) {
      value = option->as<std::string>();
    } else if (default_also) {
      value = option->get_default_str();
    } else {
      continue;
    }
    if (write_description) out << "# " << option->get_description() << "\n";
    out << name << ": " << YAML::Dump(YAML::Node(value)) << "\n";
  }
  return out.str();
}

}  // namespace kiln::server
