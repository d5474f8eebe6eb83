// Plans a problem for Hopper with no GPU present and prints the explanation.
#include <floe/floe.h>

#include <cstdio>

int main() {
  auto problem = floe::Problem::forward({2, 16, 4, 1024, 1024, 128, 128}, floe::DType::bf16)
                     .set_causal()
                     .set_stats();
  auto plan = floe::Plan::build(problem, floe::Target::cuda_arch(90));
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.status().message().c_str());
    return 1;
  }
  std::printf("%s", plan->explain().c_str());
  return 0;
}
