// Renders many chat templates over many contexts in one process, for
// tests/parity/template_parity_test.py: reads a job JSON file
//   {"templates": [{"name", "source"}], "contexts": [{...}], "now": [y, m, d, H, M, S],
//    "alias_reasoning": bool (apply parley::alias_reasoning_fields to each context's messages)}
// and prints {"results": [{"parse_error": str|null, "renders": [{"ok", "text"|"error"}]}]}.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "text/jinja/chat_template.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: jinja_render_tool JOB.json\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json job = nlohmann::ordered_json::parse(ss.str());
  parley::ChatTemplateOptions options;
  if (job.contains("now")) {
    std::tm tm{};
    const auto& n = job["now"];
    tm.tm_year = n[0].get<int>() - 1900;
    tm.tm_mon = n[1].get<int>() - 1;
    tm.tm_mday = n[2].get<int>();
    tm.tm_hour = n[3].get<int>();
    tm.tm_min = n[4].get<int>();
    tm.tm_sec = n[5].get<int>();
    tm.tm_isdst = -1;
    std::time_t t = timegm(&tm);  // normalizes tm_wday / tm_yday
    gmtime_r(&t, &tm);
    options.now = [tm] { return tm; };
  }
  if (job.value("alias_reasoning", false)) {
    for (auto& ctx : job["contexts"]) {
      if (ctx.contains("messages"))
        ctx["messages"] = parley::alias_reasoning_fields(ctx["messages"]);
    }
  }
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& t : job["templates"]) {
    nlohmann::ordered_json r;
    r["parse_error"] = nullptr;
    r["renders"] = nlohmann::ordered_json::array();
    try {
      parley::ChatTemplate tmpl =
          parley::ChatTemplate::parse(t["source"].get<std::string>(), t["name"].get<std::string>());
      for (const auto& ctx : job["contexts"]) {
        nlohmann::ordered_json one;
        try {
          one["ok"] = true;
          one["text"] = tmpl.render(ctx, options);
        } catch (const parley::Error& e) {
          one["ok"] = false;
          one["error"] = e.what();
        }
        r["renders"].push_back(one);
      }
    } catch (const parley::Error& e) {
      r["parse_error"] = e.what();
    }
    results.push_back(r);
  }
  nlohmann::ordered_json out;
  out["results"] = results;
  std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return 0;
}
