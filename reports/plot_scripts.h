// The gnuplot scripts and data files behind the HTML report's figures: one
// script per figure, written into the report's directory, each producing one
// SVG there. Drawing only: the numbers come from Report::plots.
#pragma once

#include "report.h"

#include <string>
#include <vector>

namespace memlayout::cli {

struct PlotScript {
  std::string kind;   // occupancy, offsets, chunks, colocation
  uint32_t group = 0; // Group::id; 0 for figures over several groups
  std::string script; // file names relative to the directory
  std::string svg;
  std::string caption; // what the figure shows, plain text
};

// Writes every figure's data and script into `dir`. False with `error`
// naming the file that could not be written.
bool write_plot_scripts(const inspector::Report &r, const std::string &dir,
                        std::vector<PlotScript> &out, std::string &error);

} // namespace memlayout::cli
