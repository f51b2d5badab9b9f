// weft/detail/lists.hpp — the comma-separated lists settings are written in ("allreduce=ring,
// broadcast=binomial_tree", "cubic,reno", "0,1,5").
#pragma once

#include <string_view>

namespace weft::detail {

// The first item of `list`, which loses it and its comma: "a,b" gives "a" and leaves "b";
// "a" gives "a" and leaves "". Empty items stay empty ("a,,b" gives "a", "", "b").
constexpr std::string_view next_item(std::string_view& list) {
  const auto comma = list.find(',');
  const std::string_view item = list.substr(0, comma);
  list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  return item;
}

}  // namespace weft::detail
