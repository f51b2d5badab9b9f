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
  double seconds = 0;        // the simulated time of the call
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

inline std::string time_label(double seconds) {
  char text[32];
  if (seconds < 1e-3)
    std::snprintf(text, sizeof(text), "%.3g us", seconds * 1e6);
  else if (seconds < 1)
    std::snprintf(text, sizeof(text), "%.3g ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof(text), "%.3g s", seconds);
  return text;
}

// A run's traffic in at most 256 x 256 cells (blocks of ranks above 256, their bytes summed).
struct binned_traffic {
  int cells = 0;
  double ranks_a_cell = 1;
  std::vector<double> bytes;  // [a * cells + b]
};

inline binned_traffic bin(const picture_run& run) {
  binned_traffic out;
  const int p = run.ranks;
  out.cells = std::min(p, 256);
  out.ranks_a_cell = static_cast<double>(p) / out.cells;
  const auto cells = static_cast<std::size_t>(out.cells);
  out.bytes.assign(cells * cells, 0.0);
  for (int a = 0; a < p; ++a) {
    for (int b = 0; b < p; ++b) {
      const auto ca = static_cast<std::size_t>(a / out.ranks_a_cell);
      const auto cb = static_cast<std::size_t>(b / out.ranks_a_cell);
      out.bytes[std::min(ca, cells - 1) * cells + std::min(cb, cells - 1)] +=
          run.traffic[static_cast<std::size_t>(a) * p + b];
    }
  }
  return out;
}

// The ranks to number along a heat map's edges: where each domain starts when there are at most
// 16 domains, else every eighth of the ranks.
inline std::vector<int> rank_ticks(const picture_run& run) {
  std::vector<int> ticks = {0};
  for (int r = 1; r < run.ranks && static_cast<std::size_t>(r) < run.node_of.size(); ++r) {
    if (run.node_of[static_cast<std::size_t>(r)] != run.node_of[static_cast<std::size_t>(r - 1)])
      ticks.push_back(r);
  }
  if (ticks.size() > 16 || ticks.size() == 1) {
    ticks = {0};
    const int step = std::max(1, run.ranks / 8);
    for (int r = step; r < run.ranks; r += step) ticks.push_back(r);
  }
  return ticks;
}

// One heat map per run, side by side, on one colour scale: cell (a, b) darker the more bytes
// rank a sent rank b in the call; each panel names its algorithm, size and simulated time, and
// numbers the ranks where each node (domain) starts. Above 256 ranks, cells are blocks of ranks
// (their bytes summed). Returns false if the file could not be written.
inline bool write_traffic_svg(const std::string& path, const std::vector<picture_run>& runs) {
  constexpr int panel = 360, margin = 60, caption = 52, legend = 56;
  std::vector<binned_traffic> binned;
  double most = 0;  // the shared scale's top
  for (const auto& run : runs) {
    binned.push_back(run.traffic.empty() ? binned_traffic{} : bin(run));
    for (const double v : binned.back().bytes) most = std::max(most, v);
  }
  std::ofstream out(path);
  const int width = margin + static_cast<int>(runs.size()) * (panel + margin);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << std::max(width, 520)
      << "\" height=\"" << legend + caption + panel + 2 * margin
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n"
      << "<defs><linearGradient id=\"scale\"><stop offset=\"0\" stop-color=\"rgb(230,230,255)\"/>"
         "<stop offset=\"1\" stop-color=\"rgb(0,0,255)\"/></linearGradient></defs>\n";
  // The colour scale, shared by every panel.
  out << "<text x=\"" << margin << "\" y=\"20\">bytes one rank sent another in the call "
      << "(one scale for every panel; white: none)</text>\n"
      << "<rect x=\"" << margin << "\" y=\"28\" width=\"240\" height=\"12\" fill=\"url(#scale)\" "
      << "stroke=\"#999\"/>\n"
      << "<text x=\"" << margin << "\" y=\"" << 54 << "\" fill=\"#555\">&gt; 0</text>\n"
      << "<text x=\"" << margin + 240 << "\" y=\"" << 54 << "\" fill=\"#555\" text-anchor=\"end\">"
      << svg_text(bytes_label(most)) << "</text>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const int x0 = margin + static_cast<int>(i) * (panel + margin);
    const int top = legend + margin / 2, y0 = top + caption;
    out << "<text x=\"" << x0 << "\" y=\"" << top << "\" font-weight=\"bold\">"
        << svg_text(run.title) << "</text>\n";
    out << "<text x=\"" << x0 << "\" y=\"" << top + 16 << "\">simulated time "
        << svg_text(time_label(run.seconds)) << "</text>\n";
    out << "<text x=\"" << x0 << "\" y=\"" << top + 32 << "\" fill=\"#555\">" << run.ranks
        << " ranks; orange lines: where a node ends</text>\n";
    if (run.traffic.empty()) {
      out << "<text x=\"" << x0 << "\" y=\"" << y0 + 20
          << "\">(not kept above 1024 ranks)</text>\n";
      continue;
    }
    const auto& cells = binned[i];
    const double side = static_cast<double>(panel) / cells.cells;
    out << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << panel << "\" height=\""
        << panel << "\" fill=\"white\" stroke=\"#999\"/>\n";
    for (int a = 0; a < cells.cells; ++a) {
      for (int b = 0; b < cells.cells; ++b) {
        const double v = cells.bytes[static_cast<std::size_t>(a) * cells.cells + b];
        if (v <= 0 || most <= 0) continue;
        const int shade = static_cast<int>(std::lround(230 * (1 - v / most)));
        out << "<rect x=\"" << x0 + b * side << "\" y=\"" << y0 + a * side << "\" width=\"" << side
            << "\" height=\"" << side << "\" fill=\"rgb(" << shade << "," << shade << ",255)\"/>\n";
      }
    }
    for (const int r : rank_ticks(run)) {  // rank numbers along the top and the left
      const double at = r / cells.ranks_a_cell * side;
      out << "<text x=\"" << x0 + at << "\" y=\"" << y0 - 3 << "\" font-size=\"10\" fill=\"#555\">"
          << r << "</text>\n<text x=\"" << x0 - 3 << "\" y=\"" << y0 + at + 9
          << "\" font-size=\"10\" fill=\"#555\" text-anchor=\"end\">" << r << "</text>\n";
    }
    for (int r = 1; r < run.ranks && static_cast<std::size_t>(r) < run.node_of.size(); ++r) {
      if (run.node_of[static_cast<std::size_t>(r)] == run.node_of[static_cast<std::size_t>(r - 1)])
        continue;  // not where a node ends
      const double at = r / cells.ranks_a_cell * side;
      out << "<line x1=\"" << x0 + at << "\" y1=\"" << y0 << "\" x2=\"" << x0 + at << "\" y2=\""
          << y0 + panel << "\" stroke=\"#d4753b\" stroke-width=\"1\"/>\n<line x1=\"" << x0
          << "\" y1=\"" << y0 + at << "\" x2=\"" << x0 + panel << "\" y2=\"" << y0 + at
          << "\" stroke=\"#d4753b\" stroke-width=\"1\"/>\n";
    }
    double darkest = 0;
    for (const double v : cells.bytes) darkest = std::max(darkest, v);
    const int below = y0 + panel + 16, left = x0 - 30;
    out << "<text x=\"" << x0 << "\" y=\"" << below
        << "\" fill=\"#555\">receiving rank &#8594;</text>\n"
        << "<text x=\"" << x0 + panel << "\" y=\"" << below
        << "\" fill=\"#555\" text-anchor=\"end\">"
        << "darkest cell here " << svg_text(bytes_label(darkest)) << "</text>\n"
        << "<text x=\"" << left << "\" y=\"" << y0 << "\" fill=\"#555\" transform=\"rotate(90 "
        << left << " " << y0 << ")\">sending rank &#8594;</text>\n";
  }
  out << "</svg>\n";
  return static_cast<bool>(out);
}

// Bars of the bytes that stayed inside the nodes (scale-up: NVLink, UALink) and that crossed
// between them (scale-out: the NICs and the network), per run, each bar's value written above
// it and each run's simulated time beside its name.
inline bool write_tiers_svg(const std::string& path, const std::vector<picture_run>& runs) {
  constexpr int bar = 44, gap = 36, margin = 50, height = 300;
  double most = 0;
  for (const auto& run : runs) most = std::max({most, run.scale_up_bytes, run.scale_out_bytes});
  const int width = std::max(2 * margin + static_cast<int>(runs.size()) * (2 * bar + gap) + 160,
                             660);  // room for the slanted labels and the legend
  std::ofstream out(path);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
      << height + 4 * margin
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n"
      << "<text x=\"" << margin << "\" y=\"20\">bytes sent in one call, by where they went</text>\n"
      << "<rect x=\"" << margin << "\" y=\"30\" width=\"12\" height=\"12\" fill=\"#3b6fd4\"/>"
      << "<text x=\"" << margin + 18
      << "\" y=\"41\">scale-up: inside a node or rack (NVLink, UALink)</text>\n"
      << "<rect x=\"" << margin + 330 << "\" y=\"30\" width=\"12\" height=\"12\" fill=\"#d4753b\"/>"
      << "<text x=\"" << margin + 348 << "\" y=\"41\">scale-out: between nodes (NICs)</text>\n";
  const int base = 2 * margin + height;
  out << "<line x1=\"" << margin << "\" y1=\"" << base << "\" x2=\"" << width - margin - 160
      << "\" y2=\"" << base << "\" stroke=\"#333\"/>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const int x = margin + static_cast<int>(i) * (2 * bar + gap);
    const double values[2] = {runs[i].scale_up_bytes, runs[i].scale_out_bytes};
    const char* colours[2] = {"#3b6fd4", "#d4753b"};
    for (int k = 0; k < 2; ++k) {
      const double h = most > 0 ? height * values[k] / most : 0;
      out << "<rect x=\"" << x + k * bar << "\" y=\"" << base - h << "\" width=\"" << bar - 2
          << "\" height=\"" << h << "\" fill=\"" << colours[k] << "\"/>\n"
          << "<text x=\"" << x + k * bar + (bar - 2) / 2 << "\" y=\"" << base - h - 4
          << "\" font-size=\"10\" text-anchor=\"middle\">" << svg_text(bytes_label(values[k]))
          << "</text>\n";
    }
    out << "<text x=\"" << x << "\" y=\"" << base + 16 << "\" transform=\"rotate(20 " << x << " "
        << base + 16 << ")\">" << svg_text(runs[i].title + ": " + time_label(runs[i].seconds))
        << "</text>\n";
  }
  out << "</svg>\n";
  return static_cast<bool>(out);
}

}  // namespace weft_sim
