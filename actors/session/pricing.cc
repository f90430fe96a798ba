#include "actors/session/pricing.h"

namespace carapace {

double cost_usd(const PriceTable& prices, const std::string& model, const TokenUsage& usage) {
  auto it = prices.find(model);
  if (it == prices.end()) return 0;
  const ModelPrice& p = it->second;
  return (static_cast<double>(usage.input) * p.input_per_mtok +
          static_cast<double>(usage.output) * p.output_per_mtok +
          static_cast<double>(usage.cache_read) * p.cache_read_per_mtok +
          static_cast<double>(usage.cache_write) * p.cache_write_per_mtok) /
         1e6;
}

}  // namespace carapace
