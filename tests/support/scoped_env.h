// An environment variable set (or unset) for one scope and put back as it was after: the plan-time
// knobs (FLOE_SM90_*) that a test turns for a few plans without leaking into the next test.
#pragma once

#include <cstdlib>
#include <string>

namespace floe::test {

class ScopedEnv {
 public:
  // value nullptr: unset for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old, had_ = true;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? saved_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  // A new value inside the same scope; the destructor still restores the first one.
  void set(const char* value) const {
    if (value != nullptr) {
      setenv(name_.c_str(), value, 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  // Whether the variable was set when the scope began.
  bool was_set() const { return had_; }

 private:
  std::string name_;
  std::string saved_;
  bool had_ = false;
};

}  // namespace floe::test
