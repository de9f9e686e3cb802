// JSON Schema -> GBNF (issue 27 item 3): what the `response_format` json_schema and
// json_object request fields constrain an answer to, compiled to the GBNF dialect of
// Grammar::compile_gbnf (grammar/grammar.h). Written from the JSON Schema 2020-12 texts; the
// accepted language follows llguidance 1.9.1 (the mask oracle) wherever that is reasonable.
//
// The language. Whitespace `[ \t\n]{0,max_whitespace}` at each place JSON allows it between
// tokens (one run per place: after `{` `[` `,` `:`, before `}` `]` `,` `:`; `{ }` is one
// place), none before or after the root value. Strings: characters other than `"`, `\`,
// U+0000-U+001F and U+007F raw; escapes \" \\ \b \f \n \r \t, \u00XX for U+0000-U+001F and
// \u007F (any hex case), and, with unicode_escapes, any \uXXXX of a non-surrogate or a
// surrogate pair (one character for minLength/maxLength). Numbers
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, integers without fraction or exponent.
//
// Supported keywords: type (a name or a list), enum, const (literals; objects and arrays with
// whitespace between tokens), properties (in declared order), required (required keys
// mandatory, the others skippable, order kept; required keys missing from properties follow
// them, valued by additionalProperties), additionalProperties (absent/true: any further
// key-value pairs after the declared ones; false: none; a schema: their values; their keys
// differ from every declared key), items, prefixItems (and the older items-array with
// additionalItems), minItems, maxItems, minLength, maxLength, pattern (a regular expression
// searched in the decoded string, as ECMA-262 does; `^`/`$` anchor it: literals, `.`,
// classes, \d \w \s \D \W \S (ASCII \d \w, Unicode \s), \n \t \r \f \v \0 \xHH \uHHHH and
// escaped punctuation, groups (?: ) (?<n> ) (?P<n> ), `|`, * + ? {n} {n,} {n,m}, lazy
// suffixes), format (date-time, date, time, uuid, email, ipv4, hostname), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (draft-4 booleans too; exact digit grammars for any
// integer bounds, and for decimal bounds of numbers), anyOf, oneOf (as anyOf), allOf (merged:
// types intersected, properties merged in order, required united, bounds tightened, enums
// intersected), $ref to "#" or any local JSON pointer ("#/$defs/X", "#/definitions/X": one
// rule per target, recursion allowed), sibling keywords beside $ref/anyOf/oneOf (merged into
// the target/each branch), boolean schemas, {} (any JSON value). Ignored annotations: title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly,
// strict, and every "x-" key. Any other keyword is an Error naming it and its JSON pointer.
//
// Known differences from llguidance 1.9.1 (and from Python's jsonschema, the test oracle):
// - strings never take `\/` or a raw U+007F, as llguidance (RFC 8259 allows both).
// - bounded integers take "-0" only when both bounds are finite and minimum < 0 <= maximum
//   (llguidance's rule); bounded numbers never take "-0" or an exponent (as llguidance), but
//   their decimal bounds are exact where llguidance rejects some valid numbers (0.2 in
//   [0.1, 0.25], 7.250 for maximum 7.25).
// - const/enum numbers are written in their shortest decimal form without exponent (1.0 and
//   1e2 in the schema: "1", "100", as llguidance); numbers that do not fit an int64 pass
//   through a double (17 significant digits).
// - pattern: no lookaround, backreferences, \b, \p{..} or inline flags (Errors); anchors only
//   at the ends of the top-level alternatives. A negated class never matches the escapes of
//   `"` and `\` it excludes (llguidance lets [^"\\] match them). In a pattern, format or const
//   string a character is written raw or with the escapes above, never \uXXXX for other
//   characters (as llguidance). \d \w are ASCII and \s Unicode White_Space (ECMA-262, as
//   llguidance): Python's re has Unicode \d \w and more \s, and its `$` also matches before a
//   final newline, so jsonschema decides some exotic strings differently ("é" for ^\W$).
//   pattern or format with minLength/maxLength only when the pattern implies the lengths or is
//   one anchored class repeated (`^[a-z]+$`); otherwise an Error (llguidance intersects).
// - format: our own RFC 3339/4122/1123/5321 grammars (dates with the days of each month and
//   Feb 29 always; times with seconds 00-60, optional fraction, [Zz] or +hh:mm; hostname labels
//   of 1-63 alphanumerics and inner hyphens; email dot-atoms @ a hostname or [ipv4]), compared
//   with llguidance on samples; duration, ipv6 and uri are Errors (llguidance has them).
// - additional-property keys, when properties are declared, take \u escapes only for control
//   characters, and a key equal to a declared one in any spelling is excluded; llguidance
//   compares the raw text and takes any \uXXXX there ({"\u0061": ..} beside a declared "a").
// - allOf: two different patterns/formats/prefixItems, anyOf in two branches, and draft-4
//   boolean exclusive bounds in two branches are Errors; llguidance intersects more.
// - unsupported where llguidance has them: multipleOf, patternProperties, minProperties,
//   maxProperties, and the formats above.
//
// llguidance options that give the same whitespace and keyword policy (the schema's top-level
// "x-guidance" key; N = max_whitespace):
//   {"whitespace_pattern": "[ \\t\\n]{0,N}", "coerce_one_of": true,
//    "json_allow_general_unicode_escapes": <unicode_escapes>}
// (item_separator "," and key_separator ":" are the defaults; whitespace_pattern is matched
// once at each place, which is our one run per place).
#pragma once

#include <string>
#include <string_view>

namespace parley {

struct JsonSchemaOptions {
  // Whitespace characters allowed at each place between JSON tokens (bounded so that a model
  // cannot loop on whitespace forever); 0: compact JSON only.
  int max_whitespace = 20;
  // Strings may escape any character as \uXXXX (RFC 8259; llguidance's
  // json_allow_general_unicode_escapes); false (the default, as llguidance's): only
  // U+0000-U+001F and U+007F.
  bool unicode_escapes = false;
};

// The GBNF of the JSON documents `schema` (JSON text) accepts, start rule `root`. Throws
// Error(invalid_argument) for invalid JSON or a schema it cannot compile, the message naming
// the unsupported keyword and its JSON pointer, e.g.
// "[json_schema] unsupported keyword 'patternProperties' at /properties/a".
std::string json_schema_to_gbnf(std::string_view schema, const JsonSchemaOptions& = {});

// The GBNF of any JSON object (OpenAI's response_format json_object).
std::string json_object_gbnf(const JsonSchemaOptions& = {});

}  // namespace parley
