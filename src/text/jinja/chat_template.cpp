// ChatTemplate: the parley::Error edge of the Jinja interpreter, and the model-folder
// loader for chat_template.jinja / tokenizer_config.json.
#include "text/jinja/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"

namespace parley {
namespace {

Error to_error(const jinja::TemplateError& e, const std::string& name) {
  std::string where = "[jinja] " + name + (e.line > 0 ? ":" + std::to_string(e.line) : "") + ": ";
  return Error(e.unsupported ? ErrorKind::unsupported : ErrorKind::invalid_argument,
               where + e.message);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::not_found, "[chat_template] cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string token_string(const nlohmann::ordered_json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

}  // namespace

ChatTemplate ChatTemplate::parse(std::string source, std::string name) {
  ChatTemplate t;
  try {
    t.program_ = std::make_shared<jinja::Program>(jinja::parse_template(source, name));
  } catch (const jinja::TemplateError& e) {
    throw to_error(e, name);
  }
  t.source_ = std::move(source);
  return t;
}

const std::string& ChatTemplate::name() const {
  static const std::string kEmpty;
  return program_ ? program_->name : kEmpty;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const ChatTemplateOptions& options) const {
  check(program_ != nullptr, ErrorKind::invalid_argument, "[jinja] render of an empty template");
  check(context.is_object(), ErrorKind::invalid_argument,
        "[jinja] " + program_->name + ": the context must be a JSON object");
  try {
    jinja::Globals globals;
    globals.now = options.now;
    jinja::InterpreterLimits limits;
    limits.max_call_depth = options.max_call_depth;
    limits.max_loop_iterations = options.max_loop_iterations;
    limits.max_output_bytes = options.max_output_bytes;
    jinja::Interpreter interp(*program_, jinja::make_globals(globals), limits);
    return interp.render(jinja::from_json(context));
  } catch (const jinja::TemplateError& e) {
    throw to_error(e, program_->name);
  }
}

std::string ChatTemplate::render(const nlohmann::json& context,
                                 const ChatTemplateOptions& options) const {
  return render(nlohmann::ordered_json::parse(context.dump()), options);
}

nlohmann::ordered_json alias_reasoning_fields(const nlohmann::ordered_json& messages) {
  if (!messages.is_array()) return messages;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    const nlohmann::ordered_json* reasoning = nullptr;
    if (m.is_object()) {
      for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
        auto it = m.find(key);
        if (it != m.end() && !it->is_null()) {
          reasoning = &*it;
          break;
        }
      }
    }
    if (!reasoning) {
      out.push_back(m);
      continue;
    }
    nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
    aliased["thinking"] = *reasoning;
    for (const auto& [k, v] : m.items()) aliased[k] = v;
    aliased["reasoning_content"] = *reasoning;
    out.push_back(std::move(aliased));
  }
  return out;
}

LoadedChatTemplate load_chat_template(const std::string& model_dir, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    try {
      config = nlohmann::ordered_json::parse(read_file(config_path));
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorKind::invalid_argument,
                  "[chat_template] " + config_path.string() + ": " + e.what());
    }
  }
  std::string source, template_name = "chat_template";
  fs::path jinja_path = dir / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    source = read_file(jinja_path);
  } else {
    auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) {
      throw Error(ErrorKind::not_found,
                  "[chat_template] " + model_dir +
                      " has no chat_template.jinja and no chat_template in tokenizer_config.json");
    }
    if (it->is_string()) {
      source = it->get<std::string>();
    } else if (it->is_array()) {
      std::string names;
      for (const auto& entry : *it) {
        if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
        std::string n = entry["name"].get<std::string>();
        names += (names.empty() ? "" : ", ") + n;
        if (n == name) {
          source = entry["template"].get<std::string>();
          template_name = "chat_template:" + n;
        }
      }
      if (source.empty()) {
        throw Error(ErrorKind::not_found, "[chat_template] " + model_dir +
                                              " has no template named '" + name +
                                              "' (it has: " + names + ")");
      }
    } else {
      throw Error(ErrorKind::invalid_argument,
                  "[chat_template] tokenizer_config.json's chat_template is neither a string nor "
                  "a list of {name, template}");
    }
  }
  LoadedChatTemplate loaded{ChatTemplate::parse(std::move(source), template_name),
                            token_string(config, "bos_token"), token_string(config, "eos_token")};
  return loaded;
}

}  // namespace parley
