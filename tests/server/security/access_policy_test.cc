// The token file parser, the role table and the check both front ends run
// (server/security/). End to end over gRPC and HTTP: tests/integration/test_auth.py.
#include "server/security/access_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "inference/grpc_service.pb.h"
#include "kiln/v1/repository_service.pb.h"
#include "server/security/tokens.h"

namespace kiln::server::security {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kInferToken[] = "infer-token-0123456789abcdef";
constexpr char kAdminToken[] = "admin-token-0123456789abcdef";

TEST(TokenTableTest, ParsesRolesSkippingCommentsAndBlankLines) {
  const std::string text = std::string("# Kiln tokens\n\n  infer ") + kInferToken +
                           "  \n\t\n# admin below\nadmin\t" + kAdminToken + "\r\n";
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  EXPECT_EQ(table->Find(kInferToken), Role::kInfer);
  EXPECT_EQ(table->Find(kAdminToken), Role::kAdmin);
  EXPECT_EQ(table->Find("infer-token-0123456789abcdeX"), std::nullopt);
  EXPECT_EQ(table->Find(""), std::nullopt);
  EXPECT_EQ(table->Find(std::string(kInferToken) + "0"), std::nullopt);
}

// Each bad line names its line number, says what is wrong, and never quotes
// the token.
TEST(TokenTableTest, RefusesBadLinesNamingTheLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::string secret = "s3cr3t-s3cr3t-s3cr3t";
  const Case cases[] = {
      {"# ok\ninfer\n", "line 2: expected 'ROLE TOKEN' (two fields), found 1"},
      {"infer " + secret + " extra\n", "line 1: expected 'ROLE TOKEN' (two fields), found 3"},
      {"\nreader " + secret + "\n", "line 2: unknown role"},
      {secret + " admin\n", "line 1: unknown role"},
      {"admin short\n", "line 1: the token has 5 characters, fewer than the 16 required"},
      {"admin " + secret + "\"x\n", "line 1: the token has a character a bearer token cannot"},
      {"infer " + secret + "\n#\nadmin " + secret + "\n",
       "line 3: the same token is already given on line 1"},
      {"", "holds no token"},
      {"# only comments\n\n", "holds no token"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(c.text);
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(table.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(std::string(table.status().message()), Not(HasSubstr(secret))) << c.text;
  }
}

// Every RPC the two services declare has a row in the table, under the
// method name gRPC dispatches on; a new RPC without one fails here.
TEST(AccessPolicyTest, EveryRpcOfBothServicesHasARow) {
  const google::protobuf::ServiceDescriptor* services[] = {
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName("GRPCInferenceService"),
      kiln::v1::UploadModelRequest::descriptor()->file()->FindServiceByName(
          "ModelRepositoryService"),
  };
  int methods = 0;
  for (const auto* service : services) {
    ASSERT_NE(service, nullptr);
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string method = "/" + service->full_name() + "/" + service->method(i)->name();
      absl::StatusOr<Rpc> rpc = RpcForMethod(method);
      ASSERT_TRUE(rpc.ok()) << method << " has no row in the access table";
      EXPECT_EQ(RpcMethod(*rpc), method);
      EXPECT_EQ(RpcName(*rpc), service->method(i)->name());
      ++methods;
    }
  }
  EXPECT_EQ(methods, 17);
  EXPECT_FALSE(RpcForMethod("/grpc.health.v1.Health/Check").ok());
}

TEST(AccessPolicyTest, RolesGrantWhatTheTableSays) {
  absl::StatusOr<TokenTable> tokens =
      TokenTable::Parse(std::string("infer ") + kInferToken + "\nadmin " + kAdminToken + "\n");
  ASSERT_TRUE(tokens.ok());
  const Authenticator auth(*std::move(tokens));
  const std::string infer = std::string("Bearer ") + kInferToken;
  const std::string admin = std::string("bearer  ") + kAdminToken;  // scheme case-insensitive
  for (Rpc rpc : {Rpc::kServerLive, Rpc::kServerReady, Rpc::kModelReady}) {
    EXPECT_TRUE(auth.Check(rpc, "").ok()) << RpcName(rpc);
    EXPECT_TRUE(auth.Check(rpc, "Bearer wrong-wrong-wrong-wrong").ok()) << RpcName(rpc);
  }
  for (Rpc rpc : {Rpc::kServerMetadata, Rpc::kModelMetadata, Rpc::kModelInfer,
                  Rpc::kModelStatistics, Rpc::kCacheStatistics}) {
    EXPECT_EQ(RequiredAccess(rpc), Access::kInfer);
    EXPECT_TRUE(auth.Check(rpc, infer).ok()) << RpcName(rpc);
    EXPECT_TRUE(auth.Check(rpc, admin).ok()) << RpcName(rpc);
  }
  for (Rpc rpc : {Rpc::kRepositoryIndex, Rpc::kRepositoryModelLoad, Rpc::kRepositoryModelUnload,
                  Rpc::kQueryModelFile, Rpc::kUploadModel, Rpc::kDeleteModel}) {
    EXPECT_EQ(RequiredAccess(rpc), Access::kAdmin);
    absl::Status denied = auth.Check(rpc, infer);
    EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << RpcName(rpc);
    EXPECT_THAT(std::string(denied.message()), HasSubstr("needs the role 'admin'"));
    EXPECT_THAT(std::string(denied.message()), Not(HasSubstr(kInferToken)));
    EXPECT_TRUE(auth.Check(rpc, admin).ok()) << RpcName(rpc);
  }
  // No token, a wrong one, another scheme: Unauthenticated, never quoting it.
  for (const char* bad : {"", "   ", "Bearer", "Bearer ", "Basic YWRtaW46YWRtaW4=",
                          "Bearer admin-token-0123456789abcdeX", kAdminToken}) {
    absl::Status status = auth.Check(Rpc::kModelInfer, bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("0123456789abcde"))) << bad;
  }
  // Without a token file, everything is allowed.
  const Authenticator open;
  EXPECT_FALSE(open.enabled());
  EXPECT_TRUE(open.Check(Rpc::kDeleteModel, "").ok());
}

// The caller Authenticate returns is what the core checks each call against
// again: its token's role, none for a public call, unchecked without tokens.
TEST(AccessPolicyTest, AuthenticateReturnsTheCallerTheCoreChecks) {
  absl::StatusOr<TokenTable> tokens =
      TokenTable::Parse(std::string("infer ") + kInferToken + "\nadmin " + kAdminToken + "\n");
  ASSERT_TRUE(tokens.ok());
  const Authenticator auth(*std::move(tokens));
  absl::StatusOr<Caller> infer =
      auth.Authenticate(Rpc::kModelInfer, std::string("Bearer ") + kInferToken);
  ASSERT_TRUE(infer.ok());
  EXPECT_TRUE(infer->checked());
  EXPECT_EQ(infer->role(), Role::kInfer);
  EXPECT_TRUE(Authorize(*infer, Rpc::kModelMetadata).ok());
  EXPECT_EQ(Authorize(*infer, Rpc::kRepositoryModelLoad).code(),
            absl::StatusCode::kPermissionDenied);

  absl::StatusOr<Caller> probe = auth.Authenticate(Rpc::kServerReady, "Bearer nonsense");
  ASSERT_TRUE(probe.ok());
  EXPECT_FALSE(probe->role().has_value());
  EXPECT_TRUE(Authorize(*probe, Rpc::kModelReady).ok());
  absl::Status anonymous = Authorize(*probe, Rpc::kModelInfer);
  EXPECT_EQ(anonymous.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(anonymous.message()), HasSubstr("ModelInfer needs a bearer token"));

  absl::StatusOr<Caller> open = Authenticator().Authenticate(Rpc::kDeleteModel, "");
  ASSERT_TRUE(open.ok());
  EXPECT_FALSE(open->checked());
  EXPECT_TRUE(Authorize(*open, Rpc::kDeleteModel).ok());
  EXPECT_TRUE(Authorize(Caller::Unchecked(), Rpc::kSystemSharedMemoryRegister).ok());
}

}  // namespace
}  // namespace kiln::server::security
