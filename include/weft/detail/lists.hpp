// weft/detail/lists.hpp — the comma-separated lists settings are written in ("allreduce=ring,
// broadcast=binomial_tree", "cubic,reno", "0,1,5").
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::detail {

// The first item of `list`, which loses it and its comma: "a,b" gives "a" and leaves "b";
// "a" gives "a" and leaves "". Empty items stay empty ("a,,b" gives "a", "", "b"). A comma
// inside parentheses belongs to its item: "allreduce=hierarchical(ring,ring),barrier=direct" has
// two.
constexpr std::string_view next_item(std::string_view& list) {
  auto comma = std::string_view::npos;
  int depth = 0;
  for (std::size_t i = 0; i < list.size() && comma == std::string_view::npos; ++i) {
    if (list[i] == '(')
      ++depth;
    else if (list[i] == ')' && depth > 0)
      --depth;
    else if (list[i] == ',' && depth == 0)
      comma = i;
  }
  const std::string_view item = list.substr(0, comma);
  list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  return item;
}

}  // namespace weft::detail
