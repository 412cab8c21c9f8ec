#include "harness/record.hpp"

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
    if (t.order == SampleOrder::interleaved) out["time_s"]["interleaved_with"] = t.interleaved_with;
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

void from_json(const nlohmann::json& in, Record& record) {
  record.impl = in.at("impl").get<std::string>();
  record.device = in.at("device").get<std::string>();
  record.c = in.at("case").get<Case>();
  record.status = parse_status(in.at("status").get<std::string>());
  record.reason = in.value("reason", std::string());
  record.time.reset();
  if (in.contains("time_s") && in["time_s"].is_object()) {
    const auto& t = in["time_s"];
    record.time = TimeStats{t.at("median").get<double>(), t.at("mean").get<double>(), t.at("min").get<double>(),
                            t.at("max").get<double>(),    t.at("q1").get<double>(),   t.at("q3").get<double>(),
                            t.at("stddev").get<double>(), json_int64(t.at("samples"), "time_s.samples"), {}};
    if (t.contains("samples_s") && !t["samples_s"].is_null()) {
      record.time->samples_s = t["samples_s"].get<std::vector<double>>();
      if (record.time->samples_s.size() > kMaxKeptSamples) {
        throw std::invalid_argument("time_s.samples_s holds more than " + std::to_string(kMaxKeptSamples) + " samples");
      }
    }
    // Both optional: records written before --interleave were all sequential.
    if (t.contains("order") && !t["order"].is_null()) record.time->order = parse_sample_order(t["order"].get<std::string>());
    if (t.contains("interleaved_with") && !t["interleaved_with"].is_null()) {
      record.time->interleaved_with = t["interleaved_with"].get<std::vector<std::string>>();
    }
  }
  record.predicted_time_s = in.value("predicted_time_s", 0.0);
  record.bandwidth_fraction.reset();  // optional: records written before it existed have none
  if (in.contains("bandwidth_fraction") && in["bandwidth_fraction"].is_number()) {
    record.bandwidth_fraction = in["bandwidth_fraction"].get<double>();
  }
  const auto& memory = in.at("memory");
  record.memory = {json_uint64(memory.at("peak_bytes"), "memory.peak_bytes"),
                   json_uint64(memory.at("workspace_bytes"), "memory.workspace_bytes"),
                   json_uint64(memory.at("predicted_bytes"), "memory.predicted_bytes")};
  record.verify.reset();
  if (in.contains("verify") && in["verify"].is_object()) record.verify = in["verify"].get<VerifyResult>();
  record.details = in.value("details", nlohmann::json::object());
  record.repro.clear();  // optional: records written before it existed have none
  if (in.contains("repro") && !in["repro"].is_null()) record.repro = in["repro"].get<std::string>();
  record.shard.reset();  // optional: absent when not sharded
  if (in.contains("shard") && !in["shard"].is_null()) {
    const auto& shard = in["shard"];
    ShardTag tag;
    // Bounded before they are narrowed to int: a file's count is input, held to --shard's own limit.
    const std::int64_t index = json_int64(shard.at("index"), "shard.index");
    const std::int64_t count = json_int64(shard.at("count"), "shard.count");
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
    tag.plan_fingerprint = shard.at("plan_fingerprint").get<std::string>();
    // Optional: records of the first sharded runs have none of them.
    if (shard.contains("pairs")) tag.pairs = json_int64(shard["pairs"], "shard.pairs");
    tag.host = shard.value("host", std::string());
    tag.cuda_visible_devices = shard.value("cuda_visible_devices", std::string());
    if (tag.pairs < 0) throw std::invalid_argument("shard.pairs is negative");
    record.shard = std::move(tag);
  }
}

}  // namespace faprobe
