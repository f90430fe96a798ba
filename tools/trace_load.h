// How the `carapace trace` commands find a session's spans (the trace
// store when it is up to date, else the log) and which sessions a --since
// window covers (tools/cmd_trace.cc, tools/cmd_trace_export.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/collector/span.h"
#include "base/clock.h"
#include "storage/event_log.h"
#include "storage/trace_store.h"
#include "tools/cli.h"

namespace carapace::cli {

struct TraceInfo {
  std::string source;  // store, or log
  uint64_t last_seq = 0;
  uint64_t dropped = 0;
  uint64_t crashed_after_seq = 0;
  std::string warning;  // a damaged record cut the trace short
};

// The session's spans: from the trace store when the collector has folded
// every event the log holds, else built from the log now (the same spans).
Status load_trace(const Context& ctx, const EventLog& log, const TraceStore* store, const std::string& session,
                  std::vector<Span>* spans, TraceInfo* info);

// For a command about to exit: the spans are left for the exit to reclaim
// with the rest of the process. Freed one by one, the attribute maps of a
// 10,000-turn session's 61,000 spans took a tenth of `trace show`.
void left_to_exit(std::vector<Span>&& spans);

// The trace store, if the home has one (nullptr otherwise).
std::unique_ptr<TraceStore> open_store(const Context& ctx);

// Prints the failure to load a session (with a hint when it does not exist).
int no_such_session(const Context& ctx, const Status& s);

// "24h", "30m", "7d", "90s" → microseconds; false on anything else.
bool parse_since(const std::string& text, int64_t* us);

// The sessions a query covers: `session`, or every session updated since `since_us`.
Status sessions_for(const Context& ctx, const EventLog& log, const std::string& session, int64_t since_us,
                    std::vector<std::string>* out);

// What a query over one session or a --since window opens: the log, the
// trace store (null if none) and the sessions covered.
struct TraceQuery {
  std::unique_ptr<EventLog> log;
  std::unique_ptr<TraceStore> store;
  int64_t since_us = 0;  // 0: no window
  std::vector<std::string> sessions;
};
// kExitOk, or the exit status of the error it printed (a bad --since, no log).
int open_trace_query(Context& ctx, const std::string& session, const std::string& since, TraceQuery* out);

}  // namespace carapace::cli
