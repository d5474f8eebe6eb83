#include "support/harness_runner.h"

#include <cuda_runtime_api.h>

#include "support/harness_env.h"

namespace floe::test {

bool declined_by_pinned_engine(const Status& status) {
  return status.code() == Code::not_supported && harness_settings().engine != "auto";
}

Status device_sync(const char* what) {
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Status(Code::device_error, std::string(what) + ": " + cudaGetErrorName(err) + ": " +
                                          cudaGetErrorString(err));
  }
  return Status();
}

Result<Plan> build_plan(const Problem& problem, tool::Memory memory, const std::string& engine,
                        int cpu_threads) {
  PlanOptions options;
  options.engine = engine;
  if (memory == tool::Memory::host) return Plan::build(problem, Target::cpu(cpu_threads), options);
  Result<Target> target = Target::cuda();
  if (!target) return target.status();
  tool::limit_smem_per_block(*target, harness_settings().smem_limit_kb);
  return Plan::build(problem, *target, options);
}

Result<PreparedRun> PreparedRun::create(const tool::Case& c, const Plan& plan,
                                        tool::Memory memory) {
  PreparedRun run;
  run.plan_ = plan;
  Result<tool::TensorBuffers> buffers = tool::TensorBuffers::create(plan.problem(), memory);
  if (!buffers) return buffers.status();
  run.buffers_ = *buffers;
  for (const std::string& name : tool::input_names(plan.problem())) {
    const auto it = c.inputs.find(name);
    if (it == c.inputs.end()) {
      return Status(Code::internal, "case " + c.dir + ": no input '" + name + "'");
    }
    if (Status st = run.buffers_.upload(tool::tensor_of(name), it->second); !st) return st;
  }
  if (Status st = run.buffers_.poison_outputs(); !st) return st;
  if (plan.workspace_bytes() > 0) {
    Result<tool::GuardedBlock> ws =
        tool::GuardedBlock::create(plan.workspace_bytes(), memory, "workspace");
    if (!ws) return ws.status();
    run.workspace_ = *ws;
    if (Status st = run.workspace_.fill_payload(0xFF); !st) return st;
  }
  if (memory == tool::Memory::device) {
    // Uploads and poison must have landed before a test times or captures an execute.
    if (Status st = device_sync("prepare"); !st) return st;
  }
  return run;
}

Status PreparedRun::poison() {
  if (Status st = buffers_.poison_outputs(); !st) return st;
  return buffers_.memory() == tool::Memory::device ? device_sync("poison") : Status();
}

Status PreparedRun::scramble_workspace(unsigned char byte) const {
  if (plan_.workspace_bytes() == 0) return Status();
  if (Status st = workspace_.fill_payload(byte); !st) return st;
  return buffers_.memory() == tool::Memory::device ? device_sync("scramble workspace") : Status();
}

Status PreparedRun::execute(Stream stream) const {
  return plan_.execute(buffers_.arguments(), workspace(), workspace_size(), stream);
}

Result<tool::ArrayMap> PreparedRun::finish() const {
  if (buffers_.memory() == tool::Memory::device) {
    if (Status st = device_sync("execute"); !st) return st;
  }
  if (Status st = buffers_.check_guards(); !st) return st;
  if (plan_.workspace_bytes() > 0) {
    if (Status st = workspace_.check_canaries(); !st) return st;
  }
  tool::ArrayMap out;
  for (const std::string& name : tool::output_names(plan_.problem())) {
    Result<tool::HostArray> a = buffers_.download(tool::tensor_of(name));
    if (!a) return a.status();
    out[name] = std::move(*a);
  }
  return out;
}

Result<tool::ArrayMap> run_once(const tool::Case& c, tool::Memory memory,
                                const std::string& engine) {
  Result<Plan> plan = build_plan(c.problem, memory, engine);
  if (!plan) return plan.status();
  Result<PreparedRun> run = PreparedRun::create(c, *plan, memory);
  if (!run) return run.status();
  if (Status st = run->execute(); !st) return st;
  return run->finish();
}

Result<tool::ArrayMap> run_reference(const tool::Case& c) {
  return run_once(c, tool::Memory::host, "reference");
}

}  // namespace floe::test
