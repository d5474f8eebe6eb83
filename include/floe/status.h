// Status and Result: how floe says no. Every refusal names the tensor, the field and the rule.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace floe {

enum class Code {
  ok,
  invalid_problem,   // the problem breaks a rule of DESIGN §2 (found at build)
  not_supported,     // valid, but the requested engine or target cannot serve it
  invalid_argument,  // execute: a pointer missing, undeclared or misaligned
  workspace,         // execute: workspace null, undersized or misaligned
  device_error,      // a CUDA call failed
  internal,
};

const char* to_string(Code code);

class Status {
 public:
  Status() = default;  // ok; an empty message never allocates
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::ok; }
  explicit operator bool() const { return ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::ok;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace floe
