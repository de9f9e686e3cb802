#include "cli/default_model.h"

#include <cstdlib>

namespace parley::cli {

std::string parley_home() {
  std::string home;
  if (const char* p = std::getenv("PARLEY_HOME"); p && *p) {
    home = p;
  } else if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    home = std::string(xdg) + "/parley";
  } else {
    const char* h = std::getenv("HOME");
    home = std::string(h ? h : ".") + "/.local/share/parley";
  }
  return home;
}

std::string default_model_dir() { return parley_home() + "/models/whisper-tiny.en"; }

}  // namespace parley::cli
