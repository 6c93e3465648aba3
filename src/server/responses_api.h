// OpenAI's Responses API: POST /v1/responses, whole or streamed as server-sent events with
// `event:` lines (responses_request.h reads the request, responses_output.h writes the
// output). A response kept in a ResponseStore (store: true, the default) can be continued by
// a later request's previous_response_id. Errors are ApiError (OpenAI's shape).
#pragma once

#include <memory>

#include "server/response_store.h"
#include "server/serving.h"

namespace herd::server {

// POST /v1/responses, keeping its responses in `store`.
Endpoint responses_endpoint(std::shared_ptr<ResponseStore> store);

}  // namespace herd::server
