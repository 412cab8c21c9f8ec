#include "harness/records/record.hpp"

#include <cmath>
#include <stdexcept>

#include "model/json_number.hpp"

namespace faprobe {

std::string_view to_string(Status status) {
  switch (status) {
    case Status::ok: return "ok";
    case Status::mismatch: return "mismatch";
    case Status::skipped: return "skipped";
    case Status::unsupported: return "unsupported";
    case Status::failed: return "failed";
  }
  return "?";
}

Status parse_status(std::string_view text) {
  for (Status status : {Status::ok, Status::mismatch, Status::skipped, Status::unsupported, Status::failed}) {
    if (text == to_string(status)) return status;
  }
  throw std::invalid_argument("unknown status '" + std::string(text) + "'");
}

std::string_view to_string(SampleOrder order) {
  return order == SampleOrder::interleaved ? "interleaved" : "sequential";
}

SampleOrder parse_sample_order(std::string_view text) {
  for (SampleOrder order : {SampleOrder::sequential, SampleOrder::interleaved}) {
    if (text == to_string(order)) return order;
  }
  throw std::invalid_argument("unknown time_s.order '" + std::string(text) + "' (allowed: sequential, interleaved)");
}

std::optional<double> Record::gflops() const {
  if (!time || time->median <= 0) return std::nullopt;
  return flops() / time->median * 1e-9;
}

std::optional<double> Record::gbytes_per_s() const {
  if (!time || time->median <= 0) return std::nullopt;
  return bytes() / time->median * 1e-9;
}

void to_json(nlohmann::json& out, const Record& record) {
  out = nlohmann::json::object();
  out["impl"] = record.impl;
  out["device"] = record.device;
  out["case"] = record.c;
  out["status"] = to_string(record.status);
  out["reason"] = record.reason;
  if (record.time) {
    const TimeStats& t = record.time.value();
    out["time_s"] = {{"median", t.median}, {"mean", t.mean}, {"min", t.min},       {"max", t.max},
                     {"q1", t.q1},         {"q3", t.q3},     {"stddev", t.stddev}, {"samples", t.samples},
                     {"samples_s", t.samples_s}};
    out["time_s"]["order"] = to_string(t.order);
    // One sample says nothing about its spread: said outright (read back from `samples`, never parsed).
    if (t.samples == 1) out["time_s"]["one_sample"] = true;
    if (t.order == SampleOrder::interleaved) out["time_s"]["interleaved_with"] = t.interleaved_with;
    if (t.contended) {
      const Contention& c = *t.contended;
      out["time_s"]["contended"] = {{"evidence", c.evidence},
                                    {"cpu_share", c.cpu_share},
                                    {"involuntary_switches", c.involuntary_switches},
                                    {"quantised", c.quantised},
                                    {"identical", c.identical}};
    }
    if (!t.runs.empty()) {
      nlohmann::json runs = nlohmann::json::array();
      for (const ProcessRun& run : t.runs) {
        runs.push_back({{"round", run.round}, {"median", run.median}, {"q1", run.q1}, {"q3", run.q3},
                        {"samples", run.samples}, {"contended", run.contended}});
      }
      out["time_s"]["runs"] = std::move(runs);
    }
  } else {
    out["time_s"] = nullptr;
  }
  out["predicted_time_s"] = record.predicted_time_s;
  out["flops"] = record.flops();
  out["bytes"] = record.bytes();
  const auto gflops = record.gflops();
  const auto gbytes = record.gbytes_per_s();
  out["tflops"] = gflops ? nlohmann::json(*gflops * 1e-3) : nlohmann::json(nullptr);
  out["gflops"] = gflops ? nlohmann::json(*gflops) : nlohmann::json(nullptr);
  out["gbytes_per_s"] = gbytes ? nlohmann::json(*gbytes) : nlohmann::json(nullptr);
  out["bandwidth_fraction"] =
      record.bandwidth_fraction ? nlohmann::json(*record.bandwidth_fraction) : nlohmann::json(nullptr);
  out["memory"] = {{"peak_bytes", record.memory.peak_bytes},
                   {"workspace_bytes", record.memory.workspace_bytes},
                   {"predicted_bytes", record.memory.predicted_bytes}};
  out["verify"] = record.verify ? nlohmann::json(*record.verify) : nlohmann::json(nullptr);
  out["details"] = record.details;
  out["repro"] = record.repro.empty() ? nlohmann::json(nullptr) : nlohmann::json(record.repro);
  if (record.shard) {
    out["shard"] = {{"index", record.shard->index},
                    {"count", record.shard->count},
                    {"plan_fingerprint", record.shard->plan_fingerprint}};
    if (record.shard->pairs > 0) out["shard"]["pairs"] = record.shard->pairs;
    if (!record.shard->host.empty()) out["shard"]["host"] = record.shard->host;
    if (!record.shard->cuda_visible_devices.empty()) {
      out["shard"]["cuda_visible_devices"] = record.shard->cuda_visible_devices;
    }
  }
}

namespace {

// A time read back, in seconds: finite and not negative, and not subnormal (no clock measures 1e-310 s);
// `positive`: above 0 too (a median or a mean). Anything else is a damaged or forged record, which compare
// would turn into ratios of inf or NaN.
double json_seconds(const nlohmann::json& value, const std::string& name, bool positive) {
  if (!value.is_number()) {
    throw std::invalid_argument(name + ": expected a number of seconds, found " + json_value_text(value));
  }
  const double seconds = value.get<double>();
  const bool usable = std::isfinite(seconds) && seconds >= 0 && (seconds == 0 ? !positive : std::isnormal(seconds));
  if (!usable) {
    throw std::invalid_argument(name + ": " + value.dump() + " is not a time (expected " +
                                (positive ? "a positive" : "a non-negative") + " finite number of seconds)");
  }
  return seconds;
}

}  // namespace

void from_json(const nlohmann::json& in, Record& record) {
  if (!in.is_object()) throw std::invalid_argument("expected a record (a JSON object), found " + json_value_text(in));
  auto text = [&](const char* key) { return json_string(json_member(in, key, key), key); };
  auto optional_text = [&](const char* key) {
    return in.contains(key) && !in[key].is_null() ? json_string(in[key], key) : std::string();
  };
  record.impl = text("impl");
  record.device = text("device");
  record.c = json_member(in, "case", "case").get<Case>();
  record.status = parse_status(text("status"));
  record.reason = optional_text("reason");
  record.time.reset();
  if (in.contains("time_s") && in["time_s"].is_object()) {
    const auto& t = in["time_s"];
    auto seconds = [&](const char* key, bool positive) {
      const std::string name = std::string("time_s.") + key;
      return json_seconds(json_member(t, key, name), name, positive);
    };
    record.time = TimeStats{seconds("median", true), seconds("mean", true), seconds("min", false),
                            seconds("max", false),   seconds("q1", false),  seconds("q3", false),
                            seconds("stddev", false), json_int64(json_member(t, "samples", "time_s.samples"), "time_s.samples"), {}};
    if (t.contains("samples_s") && !t["samples_s"].is_null()) {
      if (!t["samples_s"].is_array()) {
        throw std::invalid_argument("time_s.samples_s: expected a list of seconds, found " + json_value_text(t["samples_s"]));
      }
      if (t["samples_s"].size() > kMaxKeptSamples) {
        throw std::invalid_argument("time_s.samples_s holds more than " + std::to_string(kMaxKeptSamples) + " samples");
      }
      for (const nlohmann::json& sample : t["samples_s"]) {
        record.time->samples_s.push_back(json_seconds(sample, "time_s.samples_s", false));
      }
    }
    // Both optional: records written before --interleave were all sequential.
    if (t.contains("order") && !t["order"].is_null()) record.time->order = parse_sample_order(json_string(t["order"], "time_s.order"));
    if (t.contains("interleaved_with") && !t["interleaved_with"].is_null()) {
      record.time->interleaved_with = json_strings(t["interleaved_with"], "time_s.interleaved_with");
    }
    // Both optional too: absent in records of a quiet machine, of one process, or written before they existed.
    if (t.contains("contended") && !t["contended"].is_null()) {
      const auto& c = t["contended"];
      if (!c.is_object()) {
        throw std::invalid_argument("time_s.contended: expected an object, found " + json_value_text(c));
      }
      Contention contention;
      contention.evidence = json_strings(json_member(c, "evidence", "time_s.contended.evidence"),
                                         "time_s.contended.evidence");
      if (c.contains("cpu_share")) contention.cpu_share = json_double(c["cpu_share"], "time_s.contended.cpu_share");
      if (c.contains("involuntary_switches")) {
        contention.involuntary_switches = json_double(c["involuntary_switches"], "time_s.contended.involuntary_switches");
      }
      if (c.contains("quantised")) contention.quantised = json_bool(c["quantised"], "time_s.contended.quantised");
      if (c.contains("identical")) contention.identical = json_bool(c["identical"], "time_s.contended.identical");
      record.time->contended = std::move(contention);
    }
    if (t.contains("runs") && !t["runs"].is_null()) {
      if (!t["runs"].is_array()) {
        throw std::invalid_argument("time_s.runs: expected a list of processes, found " + json_value_text(t["runs"]));
      }
      for (const nlohmann::json& run : t["runs"]) {
        if (!run.is_object()) {
          throw std::invalid_argument("time_s.runs: expected a process's summary (an object), found " +
                                      json_value_text(run));
        }
        ProcessRun process;
        const std::int64_t round = json_int64(json_member(run, "round", "time_s.runs.round"), "time_s.runs.round");
        if (round < 1 || round > kMaxRepeat) {
          throw std::invalid_argument("time_s.runs.round: " + std::to_string(round) + " is not a round (1.." +
                                      std::to_string(kMaxRepeat) + ")");
        }
        process.round = int(round);
        process.median = json_seconds(json_member(run, "median", "time_s.runs.median"), "time_s.runs.median", true);
        process.q1 = json_seconds(json_member(run, "q1", "time_s.runs.q1"), "time_s.runs.q1", false);
        process.q3 = json_seconds(json_member(run, "q3", "time_s.runs.q3"), "time_s.runs.q3", false);
        process.samples = json_int64(json_member(run, "samples", "time_s.runs.samples"), "time_s.runs.samples");
        if (process.samples < 1) throw std::invalid_argument("time_s.runs.samples: a process's run has at least one sample");
        if (run.contains("contended")) process.contended = json_bool(run["contended"], "time_s.runs.contended");
        record.time->runs.push_back(process);
      }
      if (record.time->runs.size() > std::size_t(kMaxRepeat)) {
        throw std::invalid_argument("time_s.runs holds more than " + std::to_string(kMaxRepeat) + " processes");
      }
    }
  } else if (in.contains("time_s") && !in["time_s"].is_null()) {
    throw std::invalid_argument("time_s: expected an object or null (not timed), found " + json_value_text(in["time_s"]));
  }
  record.predicted_time_s =
      in.contains("predicted_time_s") ? json_double(in["predicted_time_s"], "predicted_time_s") : 0.0;
  record.bandwidth_fraction.reset();  // optional: records written before it existed have none
  if (in.contains("bandwidth_fraction") && in["bandwidth_fraction"].is_number()) {
    record.bandwidth_fraction = in["bandwidth_fraction"].get<double>();
  }
  const auto& memory = json_member(in, "memory", "memory");
  record.memory = {json_uint64(json_member(memory, "peak_bytes", "memory.peak_bytes"), "memory.peak_bytes"),
                   json_uint64(json_member(memory, "workspace_bytes", "memory.workspace_bytes"), "memory.workspace_bytes"),
                   json_uint64(json_member(memory, "predicted_bytes", "memory.predicted_bytes"), "memory.predicted_bytes")};
  record.verify.reset();
  if (in.contains("verify") && in["verify"].is_object()) record.verify = in["verify"].get<VerifyResult>();
  record.details = in.value("details", nlohmann::json::object());
  record.repro = optional_text("repro");  // optional: records written before it existed have none
  record.shard.reset();  // optional: absent when not sharded
  if (in.contains("shard") && !in["shard"].is_null()) {
    const auto& shard = in["shard"];
    auto shard_text = [&](const char* key, const char* name) {
      return shard.contains(key) ? json_string(shard[key], name) : std::string();
    };
    ShardTag tag;
    // Bounded before they are narrowed to int: a file's count is input, held to --shard's own limit.
    const std::int64_t index = json_int64(json_member(shard, "index", "shard.index"), "shard.index");
    const std::int64_t count = json_int64(json_member(shard, "count", "shard.count"), "shard.count");
    if (count < 1 || count > kMaxShards) {
      throw std::invalid_argument("shard.count " + std::to_string(count) + " (allowed: 1 <= count <= " +
                                  std::to_string(kMaxShards) + ", as for --shard)");
    }
    if (index < 1 || index > count) {
      throw std::invalid_argument("shard.index " + std::to_string(index) + " of " + std::to_string(count) +
                                  " (allowed: 1 <= index <= count)");
    }
    tag.index = static_cast<int>(index);
    tag.count = static_cast<int>(count);
    tag.plan_fingerprint =
        json_string(json_member(shard, "plan_fingerprint", "shard.plan_fingerprint"), "shard.plan_fingerprint");
    // Optional: records of the first sharded runs have none of them.
    if (shard.contains("pairs")) tag.pairs = json_int64(shard["pairs"], "shard.pairs");
    tag.host = shard_text("host", "shard.host");
    tag.cuda_visible_devices = shard_text("cuda_visible_devices", "shard.cuda_visible_devices");
    if (tag.pairs < 0) throw std::invalid_argument("shard.pairs is negative");
    record.shard = std::move(tag);
  }
}

}  // namespace faprobe
