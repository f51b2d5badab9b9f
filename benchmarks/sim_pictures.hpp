// sim_pictures.hpp — weft-sim's SVG pictures: the rank x rank traffic matrix as a heat map, and
// the bytes on scale-up and scale-out links as bars, one panel or bar pair per run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace weft_sim {

struct picture_run {
  std::string title;  // "ring, 1 GiB"
  int ranks = 0;
  std::vector<double> traffic;  // [a * ranks + b], bytes from a to b (empty: not kept)
  double scale_up_bytes = 0;
  double scale_out_bytes = 0;
  std::vector<int> node_of;  // each rank's domain: the heat map marks where one ends
};

inline std::string svg_text(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

inline std::string bytes_label(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g %s", bytes, units[u]);
  return text;
}

// One heat map per run, side by side: cell (a, b) darker the more bytes rank a sent rank b.
// Above 256 ranks, cells are blocks of ranks (their bytes summed). Returns false if the file
// could not be written.
inline bool write_traffic_svg(const std::string& path, const std::vector<picture_run>& runs) {
  constexpr int panel = 360, margin = 40, caption = 36;
  std::ofstream out(path);
  const int width = margin + static_cast<int>(runs.size()) * (panel + margin);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
      << panel + caption + 2 * margin
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const int x0 = margin + static_cast<int>(i) * (panel + margin), y0 = margin + caption;
    out << "<text x=\"" << x0 << "\" y=\"" << margin << "\">" << svg_text(run.title) << "</text>\n";
    out << "<text x=\"" << x0 << "\" y=\"" << margin + 16 << "\" fill=\"#555\">" << run.ranks
        << " ranks: rows send, columns receive; orange: domain ends</text>\n";
    if (run.traffic.empty()) {
      out << "<text x=\"" << x0 << "\" y=\"" << y0 + 20
          << "\">(not kept above 1024 ranks)</text>\n";
      continue;
    }
    const int p = run.ranks;
    const int cells = std::min(p, 256);
    const double per = static_cast<double>(p) / cells;  // ranks a cell
    std::vector<double> binned(static_cast<std::size_t>(cells) * cells, 0.0);
    for (int a = 0; a < p; ++a) {
      for (int b = 0; b < p; ++b) {
        const auto ca = static_cast<std::size_t>(a / per), cb = static_cast<std::size_t>(b / per);
        binned[std::min<std::size_t>(ca, cells - 1) * cells +
               std::min<std::size_t>(cb, cells - 1)] +=
            run.traffic[static_cast<std::size_t>(a) * p + b];
      }
    }
    const double most = *std::max_element(binned.begin(), binned.end());
    const double side = static_cast<double>(panel) / cells;
    out << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << panel << "\" height=\""
        << panel << "\" fill=\"#f4f4f4\" stroke=\"#999\"/>\n";
    for (int a = 0; a < cells; ++a) {
      for (int b = 0; b < cells; ++b) {
        const double v = binned[static_cast<std::size_t>(a) * cells + b];
        if (v <= 0 || most <= 0) continue;
        const int shade = static_cast<int>(std::lround(230 * (1 - v / most)));
        out << "<rect x=\"" << x0 + b * side << "\" y=\"" << y0 + a * side << "\" width=\"" << side
            << "\" height=\"" << side << "\" fill=\"rgb(" << shade << "," << shade << ",255)\"/>\n";
      }
    }
    for (int r = 1; r < p && static_cast<std::size_t>(r) < run.node_of.size();
         ++r) {  // domain boundaries
      if (run.node_of[static_cast<std::size_t>(r)] == run.node_of[static_cast<std::size_t>(r - 1)])
        continue;
      const double at = r / per * side;
      out << "<line x1=\"" << x0 + at << "\" y1=\"" << y0 << "\" x2=\"" << x0 + at << "\" y2=\""
          << y0 + panel << "\" stroke=\"#d4753b\" stroke-width=\"1\"/>\n<line x1=\"" << x0
          << "\" y1=\"" << y0 + at << "\" x2=\"" << x0 + panel << "\" y2=\"" << y0 + at
          << "\" stroke=\"#d4753b\" stroke-width=\"1\"/>\n";
    }
    out << "<text x=\"" << x0 << "\" y=\"" << y0 + panel + 16 << "\" fill=\"#555\">darkest cell "
        << svg_text(bytes_label(most)) << "</text>\n";
  }
  out << "</svg>\n";
  return static_cast<bool>(out);
}

// Bars of the bytes that stayed in scale-up domains and that crossed scale-out links, per run.
inline bool write_tiers_svg(const std::string& path, const std::vector<picture_run>& runs) {
  constexpr int bar = 28, gap = 36, margin = 50, height = 300;
  double most = 0;
  for (const auto& run : runs) most = std::max({most, run.scale_up_bytes, run.scale_out_bytes});
  const int width = 2 * margin + static_cast<int>(runs.size()) * (2 * bar + gap) +
                    160;  // room for the slanted labels
  std::ofstream out(path);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
      << height + 3 * margin
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n"
      << "<text x=\"" << margin
      << "\" y=\"20\">bytes by tier: <tspan fill=\"#3b6fd4\">scale-up</tspan>, "
      << "<tspan fill=\"#d4753b\">scale-out</tspan> (tallest " << svg_text(bytes_label(most))
      << ")</text>\n";
  const int base = margin + height;
  out << "<line x1=\"" << margin << "\" y1=\"" << base << "\" x2=\"" << width - margin - 160
      << "\" y2=\"" << base << "\" stroke=\"#333\"/>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const int x = margin + static_cast<int>(i) * (2 * bar + gap);
    const double values[2] = {runs[i].scale_up_bytes, runs[i].scale_out_bytes};
    const char* colours[2] = {"#3b6fd4", "#d4753b"};
    for (int k = 0; k < 2; ++k) {
      const double h = most > 0 ? height * values[k] / most : 0;
      out << "<rect x=\"" << x + k * bar << "\" y=\"" << base - h << "\" width=\"" << bar - 2
          << "\" height=\"" << h << "\" fill=\"" << colours[k] << "\"><title>"
          << svg_text(bytes_label(values[k])) << "</title></rect>\n";
    }
    out << "<text x=\"" << x << "\" y=\"" << base + 16 << "\" transform=\"rotate(20 " << x << " "
        << base + 16 << ")\">" << svg_text(runs[i].title) << "</text>\n";
  }
  out << "</svg>\n";
  return static_cast<bool>(out);
}

}  // namespace weft_sim
