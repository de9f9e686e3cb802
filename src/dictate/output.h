// Where `parley dictate` puts each transcript: stdout, the clipboard (wl-copy or xclip), or
// typed as keystrokes into the focused window (wtype, ydotool or xdotool). The tool is
// chosen once, at start-up, from what is on PATH, so a missing one is reported before
// anyone talks.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace parley::dictate {

enum class OutputKind { stdout_text, clipboard, type };
OutputKind parse_output_kind(const std::string& s);  // "stdout" | "clipboard" | "type"

// The executable `name` in the ':'-separated directories of `path_env`, if any.
std::optional<std::string> find_on_path(const std::string& name, const std::string& path_env);

// The command that delivers text for `kind` (empty for stdout): the first tool present, in
// the order that suits the session (`wayland`: $WAYLAND_DISPLAY is set): clipboard
// wl-copy, xclip (xclip first under X11); type wtype, ydotool, xdotool (xdotool first under
// X11). The text goes to the tool's stdin when stdin_text is set, else after the argv.
// Error(not_found) naming every tool looked for when none is present.
struct OutputCommand {
  std::vector<std::string> argv;  // argv[0]: the tool's full path
  bool stdin_text = false;
};
OutputCommand output_command(OutputKind kind, const std::string& path_env, bool wayland);

// Delivers `text`: stdout (a line, flushed) or the tool (waits for it; Error(internal) when
// it fails).
void deliver(const OutputCommand& command, const std::string& text);

}  // namespace parley::dictate
