// Measuring the link to a node when a session starts: round trip and bandwidth each way,
// with PROBE frames (net/messages.h) over the session's own connection, before LOAD.
// The planner's predictions (plan/predict.h) use the figures; `herd plan` and the live
// view show them.
#pragma once

#include "net/transport.h"
#include "plan/predict.h"

namespace herd::cluster {

// Round trip: the fastest of 5 empty PROBEs. Bandwidth each way: PROBEs of 64 KiB, then 4x
// larger each time until one after the first takes 5 ms beyond the round trip (or 16 MiB),
// the bytes over that time. About 3 x (5 to 10 ms) on a fast link; on a slow one at most `budget`
// in all (a larger PROBE is not sent when the last one's time says it would not fit). Throws
// herd::Error naming the peer when the connection fails or the node answers otherwise.
LinkProfile measure_link(net::Connection& connection, net::Millis budget = net::Millis(300));

// "0.12 ms round trip, 9.8 / 10.1 Gbit/s" (to the node / from it).
std::string link_text(const LinkProfile& link);

}  // namespace herd::cluster
