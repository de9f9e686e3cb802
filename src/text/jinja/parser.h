// Jinja2's recursive-descent parser (jinja2/parser.py) for the statements chat templates
// use: if/elif/else, for (else, loop filters, unpacking), set (blocks, tuples, namespace
// attributes), macro, filter blocks, break/continue and transformers' {% generation %}.
// Anything else (include, extends, call blocks with arguments we do not model, unknown
// filters or tests) fails here, at load time, with the line.
#pragma once

#include <string>

#include "text/jinja/ast.h"

namespace parley::jinja {

// Throws TemplateError with the line of the offending token.
Program parse_template(const std::string& source, const std::string& name);

}  // namespace parley::jinja
