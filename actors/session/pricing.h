// Pricing: the cost of a model call from its token usage and a price table.
// Pure and thread-safe.
#pragma once

#include <map>
#include <string>

#include "events/events.h"

namespace carapace {

// Dollars per million tokens. `input` counts input tokens not read from the
// cache; cache reads and writes are priced apart.
struct ModelPrice {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
  double cache_read_per_mtok = 0;
  double cache_write_per_mtok = 0;
};

using PriceTable = std::map<std::string, ModelPrice>;

// 0 for a model the table does not price.
double cost_usd(const PriceTable& prices, const std::string& model, const TokenUsage& usage);

}  // namespace carapace
