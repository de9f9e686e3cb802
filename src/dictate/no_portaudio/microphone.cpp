// open_microphone() in a build without PortAudio (capture.h): a clear error, so the rest
// of `parley dictate` (--input FILE) works everywhere.
#include "dictate/capture.h"
#include "engine/error.h"

namespace parley::dictate {

bool built_with_portaudio() { return false; }

std::unique_ptr<CaptureSource> open_microphone() {
  throw Error(ErrorKind::unsupported,
              "[dictate] built without PortAudio; use --input FILE (or rebuild with "
              "portaudio19-dev installed)");
}

}  // namespace parley::dictate
