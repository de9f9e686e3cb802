// The HTTP client of `parley dictate --server URL` (remote.h): one request per
// connection (Connection: close), Content-Length or chunked answers.
#include "dictate/remote.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/error.h"

namespace parley::dictate {
namespace {

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
void put_u16(std::string& s, uint16_t v) {
  s.push_back(char(v & 0xff));
  s.push_back(char(v >> 8));
}

int connect_tcp(const HttpEndpoint& e, const std::string& url) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &res);
  check(rc == 0, ErrorKind::not_found,
        "[dictate] --server " + url + ": cannot resolve " + e.host + ": " + gai_strerror(rc));
  int fd = -1, err = 0;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    err = errno;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  check(fd >= 0, ErrorKind::not_found,
        "[dictate] --server " + url + ": cannot connect to " + e.host + ":" +
            std::to_string(e.port) + " (" + std::strerror(err) + "); is the server running?");
  return fd;
}

std::string dechunk(const std::string& body) {
  std::string out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    out.append(body, eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

HttpEndpoint transcription_endpoint(const std::string& url) {
  const std::string scheme = "http://";
  check_arg(url.rfind(scheme, 0) == 0,
            "[dictate] --server " + url + ": expected http://HOST[:PORT][/PREFIX]" +
                (url.rfind("https://", 0) == 0 ? " (https is not supported; use plain http)" : ""));
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  HttpEndpoint e;
  const size_t colon = authority.rfind(':');
  const bool has_port =
      colon != std::string::npos && authority.find(']', colon) == std::string::npos;
  e.host = has_port ? authority.substr(0, colon) : authority;
  if (e.host.size() >= 2 && e.host.front() == '[') e.host = e.host.substr(1, e.host.size() - 2);
  check_arg(!e.host.empty(), "[dictate] --server " + url + ": no host");
  if (has_port) {
    const std::string p = authority.substr(colon + 1);
    check_arg(!p.empty() && p.size() <= 5 && std::all_of(p.begin(), p.end(), ::isdigit) &&
                  std::stoi(p) > 0 && std::stoi(p) < 65536,
              "[dictate] --server " + url + ": bad port '" + p + "'");
    e.port = std::stoi(p);
  }
  const bool v1 = prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0;
  e.path = prefix + (v1 ? "/audio/transcriptions" : "/v1/audio/transcriptions");
  return e;
}

std::string wav_pcm16(std::span<const float> samples, int sample_rate) {
  const uint32_t data_bytes = uint32_t(samples.size() * 2);
  std::string s = "RIFF";
  put_u32(s, 36 + data_bytes);
  s += "WAVEfmt ";
  put_u32(s, 16);
  put_u16(s, 1);  // PCM
  put_u16(s, 1);  // mono
  put_u32(s, uint32_t(sample_rate));
  put_u32(s, uint32_t(sample_rate) * 2);
  put_u16(s, 2);
  put_u16(s, 16);
  s += "data";
  put_u32(s, data_bytes);
  for (float x : samples) {
    const float c = std::clamp(x, -1.0f, 1.0f);
    put_u16(s, uint16_t(int16_t(std::lrint(c * 32767.0f))));
  }
  return s;
}

std::string transcribe_remote(const RemoteOptions& o, std::span<const float> samples) {
  const HttpEndpoint e = transcription_endpoint(o.url);
  std::mt19937_64 rng(std::random_device{}());
  const std::string boundary = "parley-dictate-" + std::to_string(rng());
  std::string body;
  const auto field = [&](const std::string& name, const std::string& value) {
    body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" +
            value + "\r\n";
  };
  field("model", o.model);
  field("response_format", "json");
  if (!o.language.empty()) field("language", o.language);
  body += "--" + boundary +
          "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dictation.wav\"\r\n"
          "Content-Type: audio/wav\r\n\r\n";
  body += wav_pcm16(samples, 16000);
  body += "\r\n--" + boundary + "--\r\n";

  std::string request = "POST " + e.path + " HTTP/1.1\r\nHost: " + e.host + ":" +
                        std::to_string(e.port) +
                        "\r\nConnection: close\r\nAccept: application/json\r\n"
                        "Content-Type: multipart/form-data; boundary=" +
                        boundary + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (!o.api_key.empty()) request += "Authorization: Bearer " + o.api_key + "\r\n";
  request += "\r\n" + body;

  const int fd = connect_tcp(e, o.url);
  size_t off = 0;
  while (off < request.size()) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += size_t(n);
  }
  std::string response;
  char buf[16384];
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, int(o.timeout_s * 1000)) > 0) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, size_t(n));
  }
  ::close(fd);
  check(off == request.size() && !response.empty(), ErrorKind::internal,
        "[dictate] --server " + o.url + ": no answer from " + e.path);

  const size_t head_end = response.find("\r\n\r\n");
  check(head_end != std::string::npos && response.rfind("HTTP/", 0) == 0, ErrorKind::internal,
        "[dictate] --server " + o.url + ": not an HTTP answer");
  const std::string head = lower(response.substr(0, head_end));
  std::string answer = response.substr(head_end + 4);
  if (head.find("transfer-encoding: chunked") != std::string::npos) answer = dechunk(answer);
  const int status = std::atoi(response.c_str() + response.find(' ') + 1);
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
  if (status < 200 || status >= 300) {
    std::string message = answer.substr(0, 300);
    if (j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].value("message", "") != "")
      message = j["error"]["message"].get<std::string>();
    throw Error(ErrorKind::internal, "[dictate] --server " + o.url + ": HTTP " +
                                         std::to_string(status) + ": " + message);
  }
  check(j.is_object() && j.contains("text") && j["text"].is_string(), ErrorKind::internal,
        "[dictate] --server " + o.url + ": the answer has no \"text\": " + answer.substr(0, 200));
  return j["text"].get<std::string>();
}

}  // namespace parley::dictate
