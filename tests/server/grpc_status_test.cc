#include "server/grpc/grpc_status.h"

#include <gtest/gtest.h>

namespace kiln::server {
namespace {

TEST(GrpcStatusTest, OkMapsToOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(GrpcStatusTest, EveryCodeMapsOneToOneWithItsMessage) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "why it failed");
    const grpc::Status grpc = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(grpc.error_code()), code);
    EXPECT_EQ(grpc.error_message(), "why it failed");
  }
}

TEST(GrpcStatusTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(absl::UnimplementedError("")).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::InternalError("")).error_code(), grpc::StatusCode::INTERNAL);
}

}  // namespace
}  // namespace kiln::server
