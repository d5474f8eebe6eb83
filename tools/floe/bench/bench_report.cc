#include "bench_report.h"

#include <algorithm>

namespace floe::tool {

namespace {

std::string format(const char* fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

// 1536 -> "1.5 KiB": workspaces span bytes to gigabytes.
std::string bytes_text(size_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB"};
  double x = static_cast<double>(n);
  int u = -1;
  while (x >= 1024 && u < 2) {
    x /= 1024;
    ++u;
  }
  return format("%.1f ", x) + units[u];
}

std::string label(const BenchRecord& r) {
  std::string s = std::string(direction_name(r.direction)) + " " + r.problem.name();
  if (r.engine_requested != "auto") s += " [" + r.engine_requested + "]";
  return s;
}

}  // namespace

double BenchRecord::tflops() const {
  return m.status == "ok" && m.median_ms > 0 ? flops.flops / (m.median_ms * 1e-3) / 1e12 : 0;
}

double BenchRecord::tb_per_s() const {
  const double bytes = kv_bytes_read(problem);
  return m.status == "ok" && m.median_ms > 0 ? bytes / (m.median_ms * 1e-3) / 1e12 : 0;
}

double BenchRecord::tflops_best() const {
  return m.status == "ok" && m.min_ms > 0 ? flops.flops / (m.min_ms * 1e-3) / 1e12 : 0;
}

std::string progress_line(const BenchRecord& r) {
  std::string s = label(r) + ": ";
  if (r.m.status == "declined") return s + "declined by " + r.engine_requested + ": " + r.m.reason;
  if (r.m.status != "ok") return s + "error: " + r.m.reason;
  s += r.m.engine + ", ws " + bytes_text(r.m.workspace_bytes) + ", " +
       format("%.3f ms", r.m.median_ms) + format(" (min %.3f", r.m.min_ms) + ", " +
       std::to_string(r.m.ms.size()) + " calls";
  if (r.m.input_sets > 1) s += ", " + std::to_string(r.m.input_sets) + " input sets";
  if (r.m.graph) s += ", graph";
  s += "), " + format("%.1f TFLOP/s", r.tflops());
  if (kv_bytes_read(r.problem) > 0) s += format(", %.2f TB/s", r.tb_per_s());
  return s;
}

void print_table(std::FILE* out, const std::vector<BenchRecord>& records,
                 const std::vector<HostRecord>& host) {
  size_t w = 7;
  for (const BenchRecord& r : records) w = std::max(w, label(r).size());
  const int width = static_cast<int>(w);
  std::fprintf(out, "%-*s  %-10s %12s %10s %10s %9s\n", width, "problem", "engine", "workspace",
               "median ms", "min ms", "TFLOP/s");
  for (const BenchRecord& r : records) {
    const std::string l = label(r);
    if (r.m.status == "ok") {
      std::fprintf(out, "%-*s  %-10s %12s %10.3f %10.3f %9.1f\n", width, l.c_str(),
                   r.m.engine.c_str(), bytes_text(r.m.workspace_bytes).c_str(), r.m.median_ms,
                   r.m.min_ms, r.tflops());
    } else {
      const std::string who = r.m.status == "declined" ? r.engine_requested : "error";
      std::fprintf(out, "%-*s  %-10s %s: %s\n", width, l.c_str(), who.c_str(), r.m.status.c_str(),
                   r.m.reason.c_str());
    }
  }
  for (const HostRecord& h : host) {
    std::fprintf(out, "host time of one execute(), %s %s: ", direction_name(h.direction),
                 h.problem.name().c_str());
    if (h.h.status == "ok") {
      std::fprintf(out, "%.2f us median, %.2f us min over %d calls (engine %s)\n", h.h.median_us,
                   h.h.min_us, h.h.calls, h.h.engine.c_str());
    } else {
      std::fprintf(out, "%s: %s\n", h.h.status.c_str(), h.h.reason.c_str());
    }
  }
}

nlohmann::json record_json(const BenchRecord& r) {
  nlohmann::json j = problem_json(r.problem);
  const bool ok = r.m.status == "ok";
  j["direction"] = direction_name(r.direction);
  j["engine_requested"] = r.engine_requested;
  j["engine"] = r.m.engine.empty() ? nlohmann::json() : nlohmann::json(r.m.engine);
  j["status"] = r.m.status;
  j["reason"] = r.m.reason.empty() ? nlohmann::json() : nlohmann::json(r.m.reason);
  j["workspace_bytes"] =
      r.m.engine.empty() ? nlohmann::json() : nlohmann::json(r.m.workspace_bytes);
  j["working_set_bytes"] = ok ? nlohmann::json(r.m.working_set_bytes) : nlohmann::json();
  j["input_sets"] = ok ? nlohmann::json(r.m.input_sets) : nlohmann::json();
  j["warmups"] = r.m.warmups;
  j["timed_calls"] = r.m.ms.size();
  j["median_ms"] = ok ? nlohmann::json(r.m.median_ms) : nlohmann::json();
  j["min_ms"] = ok ? nlohmann::json(r.m.min_ms) : nlohmann::json();
  j["tflops"] = ok ? nlohmann::json(r.tflops()) : nlohmann::json();
  j["tflops_best"] = ok ? nlohmann::json(r.tflops_best()) : nlohmann::json();
  j["flops"] = r.flops.flops;
  j["flop_pairs"] = r.flops.pairs;
  j["flop_rule"] = r.flops.rule;
  if (r.problem.decode()) {
    j["timing"] = r.m.graph ? "graph" : "direct";
    j["kv_bytes"] = kv_bytes_read(r.problem);
    j["tb_per_s"] = ok ? nlohmann::json(r.tb_per_s()) : nlohmann::json();
  }
  j["ms"] = r.m.ms;
  return j;
}

nlohmann::json host_json(const HostRecord& h) {
  nlohmann::json j = problem_json(h.problem);
  j["direction"] = direction_name(h.direction);
  j["engine"] = h.h.engine.empty() ? nlohmann::json() : nlohmann::json(h.h.engine);
  j["status"] = h.h.status;
  j["reason"] = h.h.reason.empty() ? nlohmann::json() : nlohmann::json(h.h.reason);
  j["calls"] = h.h.calls;
  j["median_us"] = h.h.status == "ok" ? nlohmann::json(h.h.median_us) : nlohmann::json();
  j["min_us"] = h.h.status == "ok" ? nlohmann::json(h.h.min_us) : nlohmann::json();
  return j;
}

}  // namespace floe::tool
