// RETURN_IF_ERROR / ASSIGN_OR_RETURN, as in upstream abseil's status_macros.h
// (Debian's abseil 20220623 does not ship it), plus ENGINE_CHECK for Kiln's own
// invariants. Never use ENGINE_CHECK on anything a client can send.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status _kiln_status = (expr);      \
    if (!_kiln_status.ok()) return _kiln_status; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(_kiln_statusor_, __LINE__), lhs, expr)

#define KILN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(statusor).value()

#define ENGINE_CHECK(cond)                                                      \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: ENGINE_CHECK failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                      \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

namespace kiln {

// Returns `status` with `context` prepended to its message ("while compiling model 'm': ...").
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, status.message()));
}

}  // namespace kiln
