// tokenize_tool: drives parley::Tokenizer for tests/parity/tokenizer_parity_test.py.
// Usage: tokenize_tool REQUEST.json; prints one JSON object. The request:
//   {"path": tokenizer.json or a model folder, "dir": bool,
//    "texts": [...], "decode_ids": [[...], ...]}
// The reply: {"encoded": [{"ids": with special tokens, "plain": without,
//   "decoded": decode(plain), "decoded_skip": decode(ids, skip_special_tokens),
//   "stream": the StreamDecoder's pushes + flush over ids, "stream_pieces_valid": bool}],
//   "decoded": [[decode(x), decode(x, skip)] for x in decode_ids], "bos": .., "eos": ..}
// or {"error": message, "kind": ErrorKind} for a tokenizer that does not load.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"
#include "text/tokenizer.h"
#include "text/tokenizer_unicode.h"

using nlohmann::json;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tokenize_tool REQUEST.json\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  json req = json::parse(ss.str());
  json reply;
  try {
    const std::string path = req.at("path").get<std::string>();
    parley::Tokenizer tok = req.value("dir", false) ? parley::Tokenizer::from_dir(path)
                                                    : parley::Tokenizer::from_file(path);
    reply["bos"] = tok.bos_id();
    reply["eos"] = tok.eos_id();
    reply["eos_ids"] = tok.eos_ids();
    reply["vocab_size"] = tok.vocab_size();
    json encoded = json::array();
    for (const json& t : req.value("texts", json::array())) {
      const std::string text = t.get<std::string>();
      json r;
      std::vector<int32_t> ids = tok.encode(text, true);
      std::vector<int32_t> plain = tok.encode(text, false);
      r["ids"] = ids;
      r["plain"] = plain;
      r["decoded"] = tok.decode(plain);
      r["decoded_skip"] = tok.decode(ids, true);
      parley::StreamDecoder stream(tok);
      std::string streamed;
      bool valid = true;
      for (int32_t id : ids) {
        std::string piece = stream.push(id);
        valid = valid && parley::utf8_invalid_offset(piece) == std::string::npos;
        streamed += piece;
      }
      std::string last = stream.flush();
      valid = valid && parley::utf8_invalid_offset(last) == std::string::npos;
      r["stream"] = streamed + last;
      r["stream_full"] = tok.decode(ids);
      r["stream_pieces_valid"] = valid;
      encoded.push_back(std::move(r));
    }
    reply["encoded"] = std::move(encoded);
    json decoded = json::array();
    for (const json& ids : req.value("decode_ids", json::array())) {
      std::vector<int32_t> v = ids.get<std::vector<int32_t>>();
      decoded.push_back(json::array({tok.decode(v), tok.decode(v, true)}));
    }
    reply["decoded"] = std::move(decoded);
  } catch (const parley::Error& e) {
    reply = json{{"error", e.what()}, {"kind", std::string(parley::to_string(e.kind()))}};
  }
  std::cout << reply.dump() << "\n";
  return 0;
}
