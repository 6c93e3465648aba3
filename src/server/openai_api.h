// The endpoints that speak OpenAI's API and herd's own: each reads its request, submits it
// through a Serving and answers in its shape. Errors are ApiError (OpenAI's shape).
#pragma once

#include "server/serving.h"

namespace herd::server {

// POST /v1/chat/completions
void openai_chat_completions(const httplib::Request& req, httplib::Response& res, Serving& s);
// POST /v1/completions
void openai_completions(const httplib::Request& req, httplib::Response& res, Serving& s);
// POST /api/verify: a hub asks this pod to check tokens another pod served (docs/network.md).
void herd_verify(const httplib::Request& req, httplib::Response& res, Serving& s);

}  // namespace herd::server
