// The model a server serves, as its endpoints see it: names, tokenizer, chat template and
// what /api/node and /api/cluster report. Generation itself goes through engine::Scheduler.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "server/model_facts.h"
#include "tokenizer/tokenizer.h"

namespace herd::server {

// REQUIRES: every pointer outlives the server.
struct ServedModel {
  std::string id;  // the name /v1/models lists and requests may give
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::optional<chat::Template> chat_template;
  std::string template_source;
  std::optional<std::string> bos, eos;  // token texts for the template
  nlohmann::json node_info;             // what /api/node reports about this node
  // The pod as it is now, for GET /api/cluster (schema: docs/server.md): set when the
  // runner spans nodes (its cluster_json()); empty: the one-node view of node_info.
  // Called from HTTP threads while the engine runs: it must be thread-safe.
  std::function<nlohmann::json()> cluster_status;
  ModelFacts facts;  // what Ollama's listing shows of the file (/api/tags, /api/show)
};

}  // namespace herd::server
