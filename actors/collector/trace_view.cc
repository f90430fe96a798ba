#include "actors/collector/trace_view.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <map>
#include <span>
#include <string_view>
#include <unordered_map>

namespace carapace {
namespace {

using span_attr::b;
using span_attr::f;
using span_attr::s;
using span_attr::u;

std::string ms_text(uint64_t millis) { return format_duration_us(static_cast<int64_t>(millis) * 1000); }

std::string cut(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;  // not inside a UTF-8 sequence
  return text.substr(0, end) + "\u2026";
}

// Tokens of a span, or summed over a run of turns.
struct Tokens {
  uint64_t in = 0, out = 0, cache_read = 0, cache_write = 0;
  explicit Tokens(const SpanAttrs& a)
      : in(u(a, "tokens_in")),
        out(u(a, "tokens_out")),
        cache_read(u(a, "cache_read")),
        cache_write(u(a, "cache_write")) {}
  Tokens() = default;
  void add(const Tokens& t) {
    in += t.in;
    out += t.out;
    cache_read += t.cache_read;
    cache_write += t.cache_write;
  }
};

std::string tokens(const Tokens& k) {
  std::string t = format_count(k.in) + " in / " + format_count(k.out) + " out tok";
  if (k.cache_read || k.cache_write) {
    t += " (cache " + format_count(k.cache_read) + "r/" + format_count(k.cache_write) + "w)";
  }
  return t;
}
std::string tokens(const SpanAttrs& a) { return tokens(Tokens(a)); }

// Span ids to the spans' indices: an open-addressing table, one allocation
// rather than a node per span (a long session has 61,000 spans).
class IdIndex {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  explicit IdIndex(const std::vector<Span>& spans) : spans_(spans) {
    size_t capacity = 16;
    while (capacity < spans.size() * 2) capacity <<= 1;
    slots_.assign(capacity, kNone);
    mask_ = capacity - 1;
    for (size_t i = 0; i < spans.size(); ++i)
      slots_[slot(spans[i].span_id)] = i;  // a repeated id: the last span
  }
  size_t find(std::string_view id) const { return slots_[slot(id)]; }

 private:
  size_t slot(std::string_view id) const {
    size_t at = std::hash<std::string_view>()(id) & mask_;
    while (slots_[at] != kNone && spans_[slots_[at]].span_id != id) at = (at + 1) & mask_;
    return at;
  }

  const std::vector<Span>& spans_;
  std::vector<size_t> slots_;
  size_t mask_ = 0;
};

struct Tree {
  const std::vector<Span>& spans;
  IdIndex by_id;
  // The children of span i are kid_list[first_kid[i], first_kid[i + 1]), in index order.
  std::vector<size_t> first_kid, kid_list;
  std::vector<bool> shares_seq;  // another span before it opened at the same seq
  // notable() of each span, once known (-1: not yet): the layout asks it of
  // a turn several times, and of its children each time.
  mutable std::vector<signed char> notable;

  explicit Tree(const std::vector<Span>& all)
      : spans(all),
        by_id(all),
        first_kid(all.size() + 1, 0),
        shares_seq(all.size(), false),
        notable(all.size(), -1) {
    std::vector<size_t> parent(spans.size(), IdIndex::kNone);
    for (size_t i = 0; i < spans.size(); ++i) {
      if (spans[i].parent_id.empty()) continue;
      parent[i] = by_id.find(spans[i].parent_id);
      if (parent[i] != IdIndex::kNone) ++first_kid[parent[i] + 1];
    }
    for (size_t i = 0; i < spans.size(); ++i) first_kid[i + 1] += first_kid[i];
    kid_list.resize(first_kid.back());
    std::vector<size_t> filled(first_kid.begin(), first_kid.end() - 1);
    for (size_t i = 0; i < spans.size(); ++i) {
      if (parent[i] != IdIndex::kNone) kid_list[filled[parent[i]]++] = i;
    }
    // In open order (as a builder gives them), spans opened at one seq are neighbours.
    auto by_seq = [](const Span& a, const Span& b) { return a.open_seq < b.open_seq; };
    if (std::is_sorted(spans.begin(), spans.end(), by_seq)) {
      for (size_t i = 1; i < spans.size(); ++i) shares_seq[i] = spans[i].open_seq == spans[i - 1].open_seq;
    } else {
      std::unordered_map<uint64_t, size_t> opened_at;
      opened_at.reserve(spans.size());
      for (size_t i = 0; i < spans.size(); ++i)
        shares_seq[i] = !opened_at.emplace(spans[i].open_seq, i).second;
    }
  }
  std::span<const size_t> kids(size_t i) const {
    return {kid_list.data() + first_kid[i], first_kid[i + 1] - first_kid[i]};
  }
  // The span's handle: its opening seq, with the kind when another span shares it.
  std::string handle(size_t i) const {
    std::string h = std::to_string(spans[i].open_seq);
    return shares_seq[i] ? h + ":" + spans[i].kind : h;
  }
  std::string seq_of(const SpanLink& l) const {
    size_t i = by_id.find(l.span_id);
    return i == IdIndex::kNone ? "span " + l.span_id : "#" + handle(i);
  }
};

std::string duration(const Span& sp) {
  if (sp.open()) return "\u2026";
  return format_duration_us(sp.end_us - sp.start_us);
}

// The text after the name of one span.
std::string describe(const Tree& tree, const Span& sp) {
  const auto& a = sp.attrs;
  std::string d;
  if (sp.kind == kSpanTurn) {
    d = duration(sp) + "  " + tokens(a);
    if (f(a, "cost_usd") > 0) d += "  " + format_cost(f(a, "cost_usd"));
    if (u(a, "retries")) d += "  " + std::to_string(u(a, "retries")) + (u(a, "retries") > 1 ? " retries" : " retry");
    if (sp.status != "ok") d += "  " + (sp.open() ? std::string("OPEN") : "[" + sp.status + "]");
  } else if (sp.kind == kSpanLlm) {
    d = s(a, "model") + "  " + duration(sp);
    if (sp.status == "ok") {
      d += "  " + tokens(a);
      if (f(a, "cost_usd") > 0) d += "  " + format_cost(f(a, "cost_usd"));
      d += s(a, "tool_names").empty() ? "  → answer (" + format_count(u(a, "text_chars")) + " chars)"
                                      : "  → " + s(a, "tool_names");
    } else if (sp.status == "error") {
      d += "  ERROR " + (u(a, "http_status") ? "HTTP " + std::to_string(u(a, "http_status")) : cut(s(a, "error"), 60));
      d += b(a, "will_retry") ? ", RETRY in " + ms_text(u(a, "retry_delay_ms")) : ", gave up";
    } else if (sp.open()) {
      d += "  waiting for the model";
    } else {
      d += "  [" + sp.status + "]";
    }
  } else if (sp.kind == kSpanTool) {
    d = duration(sp);
    if (a.contains("output_bytes")) d += "  " + format_count(u(a, "output_bytes")) + " B";
    if (sp.status == "ok") {
      d += "  ok";
    } else if (sp.open()) {
      d += b(a, "awaiting_decision") ? "  WAITING for a decision" : "  NO RESULT";
    } else {
      d += "  " + std::string(sp.status == "interrupted" ? "INTERRUPTED by a crash"
                              : sp.status == "stopped"
                                  ? "STOPPED (" + s(a, "stop_reason") + "), outcome unknown"
                              : sp.status == "denied"    ? "DENIED by " + s(a, "denied_by")
                              : sp.status == "timed_out" ? "TIMED OUT"
                                                         : "ERROR");
    }
    if (b(a, "truncated")) d += "  TRUNCATED from " + format_count(u(a, "original_bytes")) + " B";
    if (!s(a, "args").empty()) d += "  " + cut(s(a, "args"), 50);
  } else if (sp.kind == kSpanApproval) {
    if (sp.open()) {
      d = "WAITING (" + s(a, "asked_by") + "): " + cut(s(a, "kind") == "question" ? s(a, "question") : s(a, "reason"), 60);
    } else {
      d = "→ " + sp.status + " by " + s(a, "by") + " after " + ms_text(u(a, "wait_ms"));
    }
  } else if (sp.kind == kSpanHook) {
    d = "→ " + s(a, "decision");
    if (!s(a, "reason").empty()) d += ": " + cut(s(a, "reason"), 60);
  } else if (sp.kind == kSpanResume) {
    if (b(a, "after_crash")) {
      d = "CRASHED after seq " + std::to_string(u(a, "crashed_after_seq")) + ", resumed";
    } else if (b(a, "after_wait")) {
      d = "woken while waiting for a decision";
    } else {
      d = "reopened";
    }
    d += " from turn " + std::to_string(u(a, "checkpoint_turn")) + " (seq " + std::to_string(u(a, "checkpoint_seq")) +
         "), pid " + std::to_string(u(a, "pid"));
    for (const auto& l : sp.links) d += "  ↩ " + tree.seq_of(l);
  }
  return d;
}

std::string event_line(const SpanEvent& e) {
  const auto& a = e.attrs;
  if (e.name == "context_trimmed") {
    return "context trimmed: " + std::to_string(u(a, "messages_removed")) + " messages removed, " +
           format_count(u(a, "chars_before")) + " → " + format_count(u(a, "chars_after")) + " chars";
  }
  if (e.name == "fault") return "FAULT " + s(a, "point") + " " + s(a, "action") + ": " + s(a, "detail");
  if (e.name == "crash") return "CRASH: the process died after seq " + std::to_string(u(a, "after_seq"));
  if (e.name == "rolled_back") {
    return "ROLLED BACK seq " + std::to_string(u(a, "from_seq")) + "-" + std::to_string(u(a, "to_seq")) +
           (s(a, "reason").empty() ? "" : ": " + s(a, "reason"));
  }
  return e.name;
}

// Whether a turn is worth showing whole: something in it did not go to plan.
bool notable(const Tree& tree, size_t i) {
  signed char& known = tree.notable[i];
  if (known >= 0) return known != 0;
  const Span& sp = tree.spans[i];
  bool is = sp.status != "ok" || !sp.events.empty() || !sp.links.empty();
  for (size_t k : tree.kids(i)) {
    if (is) break;
    is = notable(tree, k) || b(tree.spans[k].attrs, "truncated");
  }
  known = is ? 1 : 0;
  return is;
}

// What a turn did, to spot runs of turns doing the same: "llm → shell, read_file".
std::string steps(const Tree& tree, size_t i) {
  std::string out;
  std::string_view previous;
  for (size_t k : tree.kids(i)) {
    const Span& c = tree.spans[k];
    if (!out.empty()) out += c.kind == kSpanTool && previous == kSpanTool ? ", " : " → ";
    out += c.kind == kSpanTool ? c.name.substr(5) : c.kind;
    previous = c.kind;
  }
  return out;
}

std::string plural(uint64_t n, const std::string& noun, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? noun : many);
}

struct Renderer {
  const Tree& tree;
  const SkeletonOptions& options;
  std::string out;
  // The same lines as data: what each line under the session's header stands for.
  std::vector<SkeletonItem> items;

  void item(SkeletonItem::Show show, size_t first, size_t last, uint64_t count, std::string text) {
    items.push_back(SkeletonItem{show, first, last, count, std::move(text), {}});
  }

  // Set while the blocks are laid out: items are made, text is not.
  bool quiet = false;

  void line(const std::string& handle, int depth, const std::string& text) {
    if (quiet) return;
    char h[24];
    std::snprintf(h, sizeof h, "%-8s", ("#" + handle).c_str());
    out += h + std::string(2 * static_cast<size_t>(depth), ' ') + text + "\n";
  }

  void span(size_t i, int depth) {
    if (quiet) return;
    const Span& sp = tree.spans[i];
    line(tree.handle(i), depth, sp.name + "  " + describe(tree, sp));
    for (const auto& e : sp.events) {
      if (e.name == "user_message") continue;
      line(std::to_string(e.seq), depth + 1, "· " + event_line(e));
    }
    for (size_t k : tree.kids(i)) {
      // A hook that let the call go on says nothing the tool line does not (--full shows it).
      if (!options.full && tree.spans[k].kind == kSpanHook && tree.spans[k].status == "ok") continue;
      span(k, depth + 1);
    }
  }

  void compact_turn(size_t i, int depth) {
    const Span& sp = tree.spans[i];
    const std::string what = steps(tree, i);
    if (!quiet) line(tree.handle(i), depth, sp.name + "  " + describe(tree, sp) + "  " + what);
    item(SkeletonItem::Show::kCompact, i, i, 1, what);
  }

  // One child of the session, or one run of them: the children it covers,
  // [first, last), and its items.
  struct Block {
    size_t first = 0, last = 0;
    std::vector<SkeletonItem> items;
  };
  // Past this many blocks, the middle ones become one line (unless `full`).
  static constexpr size_t kMaxBlocks = 60, kKeptAtEachEnd = 25;

  void session(size_t root) {
    const auto& kids = tree.kids(root);
    // The blocks are laid out first, without their text: only those shown
    // are rendered, so a long session costs its layout, not its text.
    std::vector<Block> blocks;
    const size_t items_top = items.size();
    quiet = true;
    for (size_t n = 0; n < kids.size();) {
      const size_t from = n;
      n = block(root, n);
      blocks.push_back(Block{from, n,
                             std::vector<SkeletonItem>(std::make_move_iterator(items.begin() + static_cast<long>(items_top)),
                                                       std::make_move_iterator(items.end()))});
      items.resize(items_top);
    }
    quiet = false;
    // A block shown: rendered again, text and items (the same items).
    auto keep = [&](const Block& b) { block(root, b.first); };
    if (options.full || blocks.size() <= kMaxBlocks) {
      for (auto& b : blocks) keep(b);
      return;
    }
    for (size_t i = 0; i < kKeptAtEachEnd; ++i) keep(blocks[i]);
    const size_t first = blocks[kKeptAtEachEnd].first, last = blocks[blocks.size() - kKeptAtEachEnd - 1].last;
    uint64_t turns = 0, notable_turns = 0, first_turn = 0, last_turn = 0;
    for (size_t m = first; m < last; ++m) {
      const Span& sp = tree.spans[kids[m]];
      if (sp.kind != kSpanTurn) continue;
      if (turns++ == 0) first_turn = u(sp.attrs, "turn");
      last_turn = u(sp.attrs, "turn");
      if (notable(tree, kids[m])) ++notable_turns;
    }
    std::string text = "… turns " + std::to_string(first_turn) + "-" + std::to_string(last_turn) + ": " +
                       plural(turns, "turn", "turns") + " not shown, " + std::to_string(notable_turns) +
                       " of them with an error, retry, fault or other event";
    line(tree.handle(kids[first]), 1,
         text + " (--full shows them; `carapace trace analyze` lists the patterns with their seqs)");
    SkeletonItem middle{SkeletonItem::Show::kFold, kids[first], kids[last - 1], last - first, std::move(text), {}};
    for (size_t i = kKeptAtEachEnd; i < blocks.size() - kKeptAtEachEnd; ++i) {
      for (auto& it : blocks[i].items) middle.items.push_back(std::move(it));
    }
    items.push_back(std::move(middle));
    for (size_t i = blocks.size() - kKeptAtEachEnd; i < blocks.size(); ++i) keep(blocks[i]);
  }

  // Renders kids[n] (or a run of turns from it) and returns the index after it.
  size_t block(size_t root, size_t n) {
    const auto& kids = tree.kids(root);
    size_t k = kids[n];
    const Span& sp = tree.spans[k];
    if (options.full || sp.kind != kSpanTurn) {
      span(k, 1);
      item(SkeletonItem::Show::kWhole, k, k, 1, "");
      return n + 1;
    }
    if (b(sp.attrs, "copied_from_parent")) {
      size_t m = n;
      while (m < kids.size() && b(tree.spans[kids[m]].attrs, "copied_from_parent")) ++m;
      std::string text = "turns " + tree.spans[k].attrs.value("turn", nlohmann::json(0)).dump() + "-" +
                         tree.spans[kids[m - 1]].attrs.value("turn", nlohmann::json(0)).dump() +
                         " copied from the parent " + s(tree.spans[root].attrs, "parent_session");
      line(tree.handle(k), 1, text + " (--full shows them)");
      item(SkeletonItem::Show::kFold, k, kids[m - 1], m - n, std::move(text));
      return m;
    }
    if (notable(tree, k)) {
      span(k, 1);
      item(SkeletonItem::Show::kWhole, k, k, 1, "");
      return n + 1;
    }
    // A run of clean turns: the first and the last, and one line for those between.
    std::string what = steps(tree, k);
    bool same = true;
    size_t m = n + 1;
    while (m < kids.size() && tree.spans[kids[m]].kind == kSpanTurn && !notable(tree, kids[m]) &&
           !b(tree.spans[kids[m]].attrs, "copied_from_parent")) {
      same = same && steps(tree, kids[m]) == what;
      ++m;
    }
    compact_turn(k, 1);
    if (m - n >= 4) {
      Tokens sum;
      double cost = 0;
      int64_t us = 0;
      std::map<std::string, uint64_t> tools;
      for (size_t r = n + 1; r + 1 < m; ++r) {
        const auto& a = tree.spans[kids[r]].attrs;
        sum.add(Tokens(a));
        cost += f(a, "cost_usd");
        us += tree.spans[kids[r]].end_us - tree.spans[kids[r]].start_us;
        for (size_t c : tree.kids(kids[r])) {
          if (tree.spans[c].kind == kSpanTool) ++tools[tree.spans[c].name.substr(5)];
        }
      }
      std::string text = "turns " + std::to_string(u(tree.spans[kids[n + 1]].attrs, "turn")) + "-" +
                         std::to_string(u(tree.spans[kids[m - 2]].attrs, "turn")) + ": " +
                         std::to_string(m - n - 2) + " more turns, all ok";
      if (same) {
        text += ", each " + what;
      } else {
        std::string list;
        for (const auto& [name, calls] : tools) list += (list.empty() ? "" : ", ") + name + " ×" + std::to_string(calls);
        if (!list.empty()) text += ", tools " + list;
      }
      text += "  " + format_duration_us(us) + "  " + tokens(sum);
      if (cost > 0) text += "  " + format_cost(cost);
      line(tree.handle(kids[n + 1]), 1, text + "  (--full expands)");
      item(SkeletonItem::Show::kFold, kids[n + 1], kids[m - 2], m - n - 2, std::move(text));
      compact_turn(kids[m - 1], 1);
      return m;
    }
    return n + 1;
  }
};

}  // namespace

std::string format_duration_us(int64_t us) {
  char buf[32];
  if (us < 0) us = 0;
  if (us < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(us / 1000));
  } else if (us < 600'000'000) {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(us) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f min", static_cast<double>(us) / 6e7);
  }
  return buf;
}

std::string format_count(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_cost(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.4f", usd);
  return buf;
}

std::string format_ms(double ms) {
  char buf[32];
  if (ms < 10) {
    std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  } else if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000);
  }
  return buf;
}

std::string format_bytes(uint64_t n) {
  char buf[32];
  if (n < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else if (n < (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024.0);
  } else if (n < (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / 1048576.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(n) / 1073741824.0);
  }
  return buf;
}

std::string render_skeleton(const std::vector<Span>& spans, const SkeletonOptions& options) {
  if (spans.empty()) return "";
  Tree tree(spans);
  const Span& root = spans[0];
  const auto& a = root.attrs;
  std::string head = root.name + "  " + s(a, "provider") + "/" + s(a, "model") + "  ";
  if (root.status == "completed") {
    head += "COMPLETED (" + s(a, "stop_reason") + ")";
  } else if (root.status == "failed") {
    head += "FAILED (" + s(a, "stop_reason") + "): " + cut(s(a, "error"), 80);
  } else if (root.status == "stopped") {
    head += "STOPPED (" + s(a, "stop_reason") + "), resumable";
  } else if (!s(a, "waiting_call").empty()) {
    head += "WAITING for a decision on call " + s(a, "waiting_call") + " (`carapace approvals`)";
  } else if (options.crashed_after_seq) {
    head += "CRASHED after seq " + std::to_string(options.crashed_after_seq) + ", not resumed";
  } else {
    head += "OPEN: running, or its process died after seq " + std::to_string(u(a, "last_seq"));
  }
  int64_t end = root.open() ? static_cast<int64_t>(u(a, "last_ts_us")) : root.end_us;
  head += "\n        " + plural(u(a, "turns"), "turn", "turns") + ", " + format_duration_us(end - root.start_us) + ", " +
          tokens(a) + ", " + format_cost(f(a, "cost_usd")) + ", " + plural(u(a, "llm_attempts"), "model call", "model calls") + ", " +
          plural(u(a, "retries"), "retry", "retries") + ", " + plural(u(a, "tool_calls"), "tool call", "tool calls") +
          " (" + std::to_string(u(a, "tool_errors")) + " failed)";
  if (u(a, "resumes")) head += ", " + plural(u(a, "resumes"), "resume", "resumes");
  if (u(a, "faults")) head += ", " + plural(u(a, "faults"), "fault", "faults");
  if (u(a, "context_trims")) head += ", " + plural(u(a, "context_trims"), "context trim", "context trims");
  for (const auto& l : root.links) {
    head += "\n        forked from " + l.session + " at turn " + std::to_string(u(a, "parent_turn")) + " (its span #" +
            std::to_string(l.seq) + ", id " + l.span_id + ")";
  }
  if (options.dropped_events) {
    head += "\n        WARNING: the collector dropped " + std::to_string(options.dropped_events) +
            " events of this session (its queue was full) and read them back from the log";
  }
  Renderer r{tree, options, "", {}};
  r.line(tree.handle(0), 0, head);
  for (const auto& e : root.events) {
    if (e.name != "user_message") r.line(std::to_string(e.seq), 1, "· " + event_line(e));
  }
  r.session(0);
  return r.out;
}

std::vector<SkeletonItem> skeleton_items(const std::vector<Span>& spans) {
  if (spans.empty()) return {};
  Tree tree(spans);
  SkeletonOptions options;
  Renderer r{tree, options, "", {}};
  r.session(0);
  return std::move(r.items);
}

namespace {

nlohmann::json items_json(const std::vector<Span>& spans, const std::vector<SkeletonItem>& items) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& it : items) {
    if (it.show == SkeletonItem::Show::kFold) {
      nlohmann::json fold = {{"show", "fold"},
                             {"first", spans[it.first].span_id},
                             {"last", spans[it.last].span_id},
                             {"count", it.count},
                             {"text", it.text}};
      if (!it.items.empty()) fold["items"] = items_json(spans, it.items);
      list.push_back(std::move(fold));
    } else if (it.show == SkeletonItem::Show::kCompact) {
      list.push_back({{"show", "compact"}, {"span", spans[it.first].span_id}, {"steps", it.text}});
    } else {
      list.push_back({{"show", "whole"}, {"span", spans[it.first].span_id}});
    }
  }
  return list;
}

}  // namespace

nlohmann::json skeleton_json(const std::vector<Span>& spans) { return items_json(spans, skeleton_items(spans)); }

long find_span(const std::vector<Span>& spans, const std::string& handle, bool* ambiguous) {
  *ambiguous = false;
  std::string h = handle;
  if (!h.empty() && h[0] == '#') h = h.substr(1);
  std::string kind;
  if (auto colon = h.find(':'); colon != std::string::npos) {
    kind = h.substr(colon + 1);
    h = h.substr(0, colon);
  }
  bool digits = !h.empty() && h.size() < 16 && h.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    uint64_t seq = std::stoull(h);
    for (size_t i = 0; i < spans.size(); ++i) {
      if (spans[i].open_seq == seq && (kind.empty() || spans[i].kind == kind)) return static_cast<long>(i);
    }
    return -1;
  }
  long found = -1;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (h.size() >= 4 && spans[i].span_id.compare(0, h.size(), h) == 0) {
      if (found >= 0) *ambiguous = true;
      found = static_cast<long>(i);
    }
  }
  return found;
}

}  // namespace carapace
