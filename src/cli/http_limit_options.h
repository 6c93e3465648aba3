// The flags of the limits every HTTP server of herd holds to (http/limits.h): `herd serve`
// and `herd hub` add them alike, each with its own defaults.
#pragma once

#include <CLI/CLI.hpp>

#include "http/limits.h"

namespace herd::cli {

// --max-body, --max-header, --header-timeout, --body-timeout, --max-connections,
// --max-connections-per-address. REQUIRES: `limits` outlives the command's parsing.
void add_http_limit_options(CLI::App& cmd, http::HttpLimits& limits);

}  // namespace herd::cli
