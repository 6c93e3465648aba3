// Anthropic's error type for an HTTP status, as its Messages API names them: the same table
// for herd serve's answers (server/anthropic_response.h) and the hub's own (hub/client_api).
#pragma once

#include <string>

namespace herd::http {

// invalid_request_error (400, and other 4xx), authentication_error (401), billing_error
// (402), permission_error (403), not_found_error (404), request_too_large (413),
// rate_limit_error (429), overloaded_error (503, 529), api_error (the rest).
std::string anthropic_error_type(int status);

}  // namespace herd::http
