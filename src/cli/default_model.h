// Where the built-in default model lives: the Whisper tiny.en that scripts/setup.sh
// installs, under $PARLEY_HOME (default ~/.local/share/parley). Resolved once, here at
// the app layer, so nothing below reads the environment.
#pragma once

#include <string>

namespace parley::cli {

// $PARLEY_HOME, else $XDG_DATA_HOME/parley, else ~/.local/share/parley.
std::string parley_home();
std::string default_model_dir();

}  // namespace parley::cli
