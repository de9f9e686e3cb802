#include "engine/error.h"

namespace parley {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::not_found: return "not_found";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::resource_exhausted: return "resource_exhausted";
    case ErrorKind::cancelled: return "cancelled";
    case ErrorKind::internal: return "internal";
  }
  return "internal";
}

}  // namespace parley
