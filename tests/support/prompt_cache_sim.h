// PromptCacheSim: a provider's prompt cache, for the loopback test server.
// It reads the request body it got (key order kept), lays the prompt out as
// the provider does, and answers with the cache-token counts that a real
// prefix check on those bytes gives:
//   anthropic  the prompt is its blocks in order: each tool, each system
//              block, each message's content blocks, each serialized
//              without its cache_control. A request writes the prefix up to
//              each block that carries cache_control; it reads the longest
//              prefix, ending at any block, that an earlier request wrote
//              and that has not expired (anthropic looks back from its
//              breakpoints the same way).
//   openai     the prompt is its tools, then its messages; every request's
//              prefixes at each message end are kept (automatic caching);
//              it reads the longest one seen, when at least min_tokens.
// Tokens are bytes / 4; prefixes under min_tokens are never cached. Entries
// live `ttl` since they were last written or read. forget() drops them all,
// as when a request reaches another machine of the provider.
//
// An implementation of its own (nlohmann's ordered_json and whole-prefix
// strings), not the code under test's byte scanner.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace carapace::testing {

struct CacheUsage {
  uint64_t input = 0, cache_read = 0, cache_write = 0;  // input: neither read nor written
};

class PromptCacheSim {
 public:
  using Clock = std::chrono::steady_clock;

  PromptCacheSim(std::string format, std::chrono::milliseconds ttl = std::chrono::minutes(5), uint64_t min_tokens = 1024)
      : format_(std::move(format)), ttl_(ttl), min_tokens_(min_tokens) {}

  CacheUsage usage_for(const std::string& body) {
    using ojson = nlohmann::ordered_json;
    ojson b = ojson::parse(body, nullptr, false);
    std::vector<std::pair<std::string, bool>> blocks;  // serialized, breakpoint
    // `v` as a block, without its cache_control; `role` prefixed to a
    // message's content block.
    auto block = [&blocks](ojson v, const std::string& role = "") {
      bool marked = v.is_object() && v.contains("cache_control");
      if (marked) v.erase("cache_control");
      blocks.push_back({role + v.dump(), marked});
    };
    if (b.is_object()) {
      std::string key = b.value("prompt_cache_key", "");
      blocks.push_back({"model:" + b.value("model", "") + " key:" + key, false});
      if (b.contains("tools")) {
        for (const auto& t : b["tools"]) block(t);
      }
      if (format_ == "anthropic" && b.contains("system")) {
        if (b["system"].is_string()) {
          block(b["system"]);
        } else {
          for (const auto& s : b["system"]) block(s);
        }
      }
      if (b.contains("messages")) {
        for (const auto& m : b["messages"]) {
          if (format_ == "anthropic" && m.contains("content") && m["content"].is_array()) {
            for (const auto& c : m["content"]) block(c, m.value("role", "") + ":");
          } else {
            block(m);
          }
        }
      }
    }
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    std::string prefix;
    std::vector<std::string> ends;  // the prefix at the end of each block
    for (const auto& [text, marked] : blocks) {
      prefix += text;
      ends.push_back(prefix);
    }
    CacheUsage u;
    const uint64_t total = prefix.size() / 4;
    uint64_t read = 0;
    for (size_t i = ends.size(); i-- > 0;) {
      auto it = entries_.find(ends[i]);
      if (it != entries_.end() && now - it->second < ttl_) {
        read = ends[i].size() / 4;
        it->second = now;
        break;
      }
    }
    if (read < min_tokens_) read = 0;
    if (format_ == "openai" && read > min_tokens_) read -= (read - min_tokens_) % 128;
    uint64_t written = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      bool keep = format_ == "openai" || blocks[i].second;
      if (!keep || ends[i].size() / 4 < min_tokens_) continue;
      entries_[ends[i]] = now;
      if (format_ == "anthropic") written = std::max<uint64_t>(written, ends[i].size() / 4);
    }
    u.cache_read = read;
    u.cache_write = written > read ? written - read : 0;
    u.input = total - u.cache_read - u.cache_write;
    return u;
  }

  void forget() {
    std::lock_guard lock(mu_);
    entries_.clear();
  }

 private:
  std::string format_;
  std::chrono::milliseconds ttl_;
  uint64_t min_tokens_;
  std::mutex mu_;
  std::map<std::string, Clock::time_point> entries_;
};

}  // namespace carapace::testing
