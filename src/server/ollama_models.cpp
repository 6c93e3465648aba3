// Ollama's model listing: GET /api/tags, /api/ps, /api/version, POST /api/show, and the 501
// of what herd serve does not do (ollama_api.h).
#include <httplib.h>

#include "http/bounded_json.h"
#include "http/guarded_server.h"
#include "server/ollama_api.h"
#include "server/ollama_request.h"
#include "server/served_model.h"

namespace herd::server {
namespace {

using json = nlohmann::json;

json details(const ModelFacts& f) {
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", f.family},
          {"families", json::array({f.family})},
          {"parameter_size", parameter_size(f.parameters)},
          {"quantization_level", f.quantization}};
}

json model_entry(const ServedModel& m) {
  const ModelFacts& f = m.facts;
  const std::string name = ollama_name(m.id);
  return {
      {"name", name},
      {"model", name},
      {"modified_at",
       ollama_time(std::chrono::system_clock::time_point(std::chrono::seconds(f.modified_unix)))},
      {"size", f.size_bytes},
      {"digest", f.digest},
      {"details", details(f)}};
}

}  // namespace

std::string ollama_name(const std::string& id) {
  return id.find(':') == std::string::npos ? id + ":latest" : id;
}

json ollama_tags(const ServedModel* m) {
  json models = json::array();
  if (m != nullptr) models.push_back(model_entry(*m));
  return {{"models", models}};
}

json ollama_ps(const ServedModel* m) {
  json models = json::array();
  if (m != nullptr) {
    json e = model_entry(*m);
    // Loaded for as long as the server runs (keep_alive is not herd's).
    e["expires_at"] = "9999-12-31T23:59:59Z";
    const json& device_bytes =
        m->node_info.contains("device_bytes") ? m->node_info["device_bytes"] : json(0);
    e["size_vram"] = device_bytes.is_number() ? device_bytes : json(0);
    if (m->node_info.contains("n_ctx")) e["context_length"] = m->node_info["n_ctx"];
    models.push_back(std::move(e));
  }
  return {{"models", models}};
}

json ollama_version() {
  return {{"version", HERD_VERSION}};
}

void ollama_show(const httplib::Request& req, httplib::Response& res, Serving& s) {
  const ServedModel& m = s.model();
  const json body = http::parse_bounded_json(req.body);
  if (body.is_discarded() || !body.is_object()) {
    throw ApiError(400, "the request body must be a JSON object", "invalid_request_error");
  }
  // Older clients send "name".
  const json name = body.contains("model") ? body["model"] : body.value("name", json());
  if (!name.is_string() || name.get<std::string>().empty()) {
    throw ApiError(400, "'model' is required", "invalid_request_error", "model");
  }
  check_ollama_model(name.get<std::string>(), m.id);
  const ModelFacts& f = m.facts;
  json capabilities = json::array({"completion"});
  if (detect_tool_format(m.template_source) != ToolFormat::kNone) capabilities.push_back("tools");
  if (reasoning_markers(m.template_source) || uses_harmony(m.template_source)) {
    capabilities.push_back("thinking");
  }
  json info = f.metadata.is_object() ? f.metadata : json::object();
  info["general.parameter_count"] = f.parameters;
  const json license = info.value("general.license", json(""));
  send_json(
      res, 200,
      {{"license", license.is_string() ? license : json("")},
       {"modelfile", "# herd serves this model as it was started; there is no Modelfile\nFROM " +
                         ollama_name(m.id) + "\n"},
       {"parameters", ""},
       {"template", m.template_source},
       {"details", details(f)},
       {"model_info", info},
       {"capabilities", capabilities},
       {"modified_at", ollama_time(std::chrono::system_clock::time_point(
                           std::chrono::seconds(f.modified_unix)))}});
}

void ollama_not_supported(httplib::Response& res, const std::string& message) {
  write_ollama_error(res, ApiError(501, message, "invalid_request_error"));
}

void add_ollama_unsupported_routes(http::GuardedServer& http) {
  for (const char* path : {"/api/embed", "/api/embeddings"}) {
    http.Post(path, [](const httplib::Request&, httplib::Response& res) {
      ollama_not_supported(res, "herd has no embeddings");
    });
  }
  http.Post("/api/pull", [](const httplib::Request&, httplib::Response& res) {
    ollama_not_supported(res,
                         "herd serve does not pull models: run `herd pull` on its machine, then "
                         "serve the model");
  });
  for (const char* path : {"/api/push", "/api/create", "/api/copy"}) {
    http.Post(path, [](const httplib::Request&, httplib::Response& res) {
      ollama_not_supported(res,
                           "herd serve serves the model it was started with: models are not "
                           "created, copied or pushed through it");
    });
  }
  http.Delete("/api/delete", [](const httplib::Request&, httplib::Response& res) {
    ollama_not_supported(res, "herd serve does not delete models");
  });
}

}  // namespace herd::server
