#include "tools/trace_load.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "actors/collector/log_watch.h"
#include "actors/collector/span_builder.h"
#include "actors/collector/stored_span.h"
#include "base/clock.h"
#include "storage/db_lock.h"
#include "storage/keys.h"
#include "tools/batch_pipe.h"

namespace carapace::cli {

namespace {

// A session that never finished, whose runtime did not stop it, while no
// process writes the home: its writer died after its last event. The
// collector's rule (actors/collector/log_watch.h), and `sessions`'s, so that
// `trace show`, `trace analyze`, `sessions` and serve give one answer before
// any collector ran.
void attribute_crash(const Context& ctx, const EventLog& log, const std::string& session,
                     const std::vector<Span>& spans, TraceInfo* info) {
  if (info->crashed_after_seq != 0 || spans.empty() || !spans[0].open()) return;
  if (ends_stopped(log, session, info->last_seq)) return;
  if (waits_for_decision(log, session)) return;  // parked: it waits for a person
  if (lock_holder(ctx.log_path()) != 0) return;  // a process writes the home: it may be running
  info->crashed_after_seq = info->last_seq;
}

// A session of this many events or more is read (its events, or its stored
// spans) on a thread of its own while this one builds; a shorter one on
// this one (tools/batch_pipe.h).
constexpr uint64_t kReadOnAThreadFrom = 4096;

// Reads events [1, last] of `session` in batches handed to `fold` on this
// thread (read on a thread of their own for a long session). Returns the
// reading's status: an error stops it at the damaged record, after `fold`
// had every event before it.
Status read_in_batches(const EventLog& log, const std::string& session, uint64_t last,
                       const std::function<void(std::vector<Event>&)>& fold) {
  constexpr size_t kBatch = 512;
  return pipe_batches<Event>(
      "reading the log", last >= kReadOnAThreadFrom,
      [&](const PushBatch<Event>& push) {
        auto c = log.cursor(session, 1);
        std::vector<Event> batch;
        batch.reserve(kBatch);
        Status s;
        for (; c->valid() && c->seq() <= last; c->next()) {
          s = c->event(&batch.emplace_back());
          if (!s.ok()) {
            batch.pop_back();
            break;
          }
          if (batch.size() < kBatch) continue;
          if (!push(std::move(batch))) return Status();
          batch = {};
          batch.reserve(kBatch);
        }
        if (s.ok()) s = c->status();
        if (!batch.empty() && !push(std::move(batch))) return Status();
        return s;
      },
      [&](std::vector<Event>& batch) {
        fold(batch);
        return true;
      });
}

// A stored span on its way from the scan to the consumer: its text, or the
// span the scanning thread already read from it.
struct StoredItem {
  enum class State { kText, kRead, kBad } state = State::kText;
  std::string text;
  Span span;
};

// The spans the collector stored for `session`, in the order a builder
// gives them. For a long session they are scanned on a thread of their own
// while this one reads them; that thread also reads the spans of a batch
// whenever this one is behind (reading is the larger part: the two cores
// share it).
// False when there are none, or one does not read: the caller builds them
// from the log instead.
bool read_stored(const TraceStore& store, const std::string& session, uint64_t last, std::vector<Span>* out) {
  constexpr size_t kBatch = 256;
  out->reserve(static_cast<size_t>(std::min<uint64_t>(last, 1u << 20)));  // as the builder's
  StoredSpanReader reader;
  bool good = true;
  Status read = pipe_batches<StoredItem>(
      "reading the trace store", last >= kReadOnAThreadFrom,
      [&](const PushBatch<StoredItem>& push) {
        StoredSpanReader scanner_reader;  // this thread's
        std::vector<StoredItem> batch;
        batch.reserve(kBatch);
        bool more = true;
        auto hand_over = [&] {
          if (push.waiting() > 0) {
            for (auto& item : batch) {
              item.state = scanner_reader.read(item.text, &item.span).ok() ? StoredItem::State::kRead
                                                                           : StoredItem::State::kBad;
            }
          }
          more = push(std::move(batch));
          batch = {};
          batch.reserve(kBatch);
          return more;
        };
        Status s = store.scan_spans(session, [&](std::string_view value) {
          batch.emplace_back().text.assign(value);
          return batch.size() < kBatch || hand_over();
        });
        if (s.ok() && more && !batch.empty()) hand_over();
        return s;
      },
      [&](std::vector<StoredItem>& batch) {
        for (auto& item : batch) {
          if (item.state == StoredItem::State::kRead) {
            out->push_back(std::move(item.span));
          } else if (item.state == StoredItem::State::kBad ||
                     !reader.read(item.text, &out->emplace_back()).ok()) {
            good = false;
            return false;
          }
        }
        return true;
      });
  if (!read.ok() || !good || out->empty()) {
    out->clear();
    return false;
  }
  order_as_built(out);
  return true;
}

}  // namespace

// The session's spans: from the trace store when the collector has folded
// every event the log holds, else built from the log now (the same spans).
Status load_trace(const Context& ctx, const EventLog& log, const TraceStore* store, const std::string& session,
                  std::vector<Span>* spans, TraceInfo* info) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(session));
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log.last_seq(session, &last));
  if (last == 0) return Status::not_found("no session '" + session + "' in " + ctx.home());
  info->last_seq = last;
  TraceProgress progress;
  if (store != nullptr && store->progress(session, &progress).ok()) {
    info->dropped = progress.dropped;
    info->crashed_after_seq = progress.crashed_after_seq;
    if (progress.last_seq == last) {
      std::vector<Span> stored;
      if (read_stored(*store, session, last, &stored)) {
        *spans = std::move(stored);
        info->source = "store";
        attribute_crash(ctx, log, session, *spans, info);
        return Status();
      }
    }
  }
  // Each event is folded as it is read: a long session's events are never
  // all in memory at once. A thread reads and decodes them, a batch at a
  // time, while this one builds the spans (a fifth of the work is reading).
  SpanBuilder builder(session, SpanBuilder::Changes::kUntracked);
  // Reserved, not touched: only the pages the spans fill are ever faulted in,
  // and up to 2^20 spans the vector never moves them.
  builder.reserve(static_cast<size_t>(std::min<uint64_t>(last, 1u << 20)));
  Status read = read_in_batches(log, session, last, [&](std::vector<Event>& batch) {
    for (const Event& e : batch) builder.add(e);
  });
  if (!read.ok()) {
    if (builder.last_seq() == 0) return read;
    info->warning = "the trace stops at a damaged record: " + read.message();
  }
  *spans = std::move(builder).release();
  info->source = "log";
  attribute_crash(ctx, log, session, *spans, info);
  return Status();
}

void left_to_exit(std::vector<Span>&& spans) {
  static auto* kept = new std::vector<std::vector<Span>>();  // never freed, on purpose
  kept->push_back(std::move(spans));
}

// The trace store, if the home has one (nullptr otherwise).
std::unique_ptr<TraceStore> open_store(const Context& ctx) {
  std::unique_ptr<TraceStore> store;
  if (!TraceStore::open(ctx.home() + "/traces", TraceStore::Mode::kReader, &store).ok()) return nullptr;
  return store;
}

int no_such_session(const Context& ctx, const Status& s) {
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  return ctx.fail(s);
}

bool parse_since(const std::string& text, int64_t* us) {
  if (text.size() < 2) return false;
  char unit = text.back();
  std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return false;
  int64_t n = std::stoll(digits);
  int64_t mult = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 0;
  if (mult == 0) return false;
  *us = n * mult * 1'000'000;
  return true;
}

// The sessions a query covers: `session`, or every session updated since `since_us`.
Status sessions_for(const Context& ctx, const EventLog& log, const std::string& session, int64_t since_us,
                    std::vector<std::string>* out) {
  if (!session.empty()) {
    out->push_back(session);
    return Status();
  }
  std::vector<std::string> unreadable;
  (void)ctx;
  // The time index, from its newest end: a window of an hour reads the
  // sessions of that hour, in a home of any size.
  const size_t first = out->size();
  CARAPACE_RETURN_IF_ERROR(log.sessions_by_time(since_us, [&](SessionMeta& m) {
    out->push_back(std::move(m.id));
    return true;
  }, &unreadable));
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());  // by id, as every query lists them
  return Status();
}

int open_trace_query(Context& ctx, const std::string& session, const std::string& since, TraceQuery* out) {
  int64_t window = 0;
  if (!since.empty() && !parse_since(since, &window)) {
    return ctx.usage(Status::invalid_argument("--since '" + since + "' is not a duration"),
                    "durations look like 90s, 30m, 24h or 7d");
  }
  out->log = ctx.open_log(EventLog::Mode::kReader);
  if (!out->log) return kExitFailed;
  out->store = open_store(ctx);
  out->since_us = window ? now_us() - window : 0;
  Status s = sessions_for(ctx, *out->log, session, out->since_us, &out->sessions);
  if (!s.ok()) return ctx.fail(s);
  return kExitOk;
}

}  // namespace carapace::cli
