// load_llm_chat_template: a chat model path's template, from a Hugging Face folder
// (load_chat_template) or a GGUF's tokenizer.chat_template. Inline so that parley_llm does
// not depend on the Jinja library; its callers (CLI, serving) link both.
#pragma once

#include <string>

#include "llm/gguf_loader.h"
#include "text/jinja/chat_template.h"

namespace parley {

inline LoadedChatTemplate load_llm_chat_template(const std::string& path) {
  if (!is_gguf_model(path)) return load_chat_template(path);
  GgufChatTemplateText t = gguf_chat_template_text(path);
  return LoadedChatTemplate{ChatTemplate::parse(std::move(t.source), "tokenizer.chat_template"),
                            std::move(t.bos_token), std::move(t.eos_token)};
}

}  // namespace parley
