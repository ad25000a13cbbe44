// The real binaries: kilnd on 127.0.0.1:0 (port parsed from its stdout), the
// kiln CLI run as a subprocess against it, and SIGTERM for a clean exit.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "client/npy.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// $KILN_BIN / $KILN_FIXTURES when set, else the build tree's (CMake passes them).
std::string Bin(const std::string& tool) {
  const std::string dir = Env("KILN_BIN");
  return (dir.empty() ? std::string(KILN_BIN_DIR) : dir) + "/" + tool;
}
std::string Fixture(const std::string& file) {
  const std::string dir = Env("KILN_FIXTURES");
  return (dir.empty() ? std::string(KILN_FIXTURES_DIR) : dir) + "/" + file;
}

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line and captures its output.
Result RunCommand(const std::string& command) {
  Result result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// kilnd as a child process; its stderr (the log) goes to a file.
class Kilnd {
 public:
  // Also serves the local socket at `repo`/../kilnd.sock.
  explicit Kilnd(const std::string& repo, const std::string& log)
      : socket_(fs::path(repo).parent_path().string() + "/kilnd.sock") {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(log_fd, STDERR_FILENO);
      ::close(fds[0]);
      const std::string bin = Bin("kilnd");
      ::execl(bin.c_str(), bin.c_str(), "--host", "127.0.0.1", "--port", "0", "--http-port", "0",
              "--metrics-port", "0",
              "--model-repository", repo.c_str(), "--threads", "1", "--local-socket",
              socket_.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
    char line[512];
    while (std::fgets(line, sizeof(line), out_) != nullptr) {
      std::cmatch m;
      if (std::regex_search(line, m, std::regex(R"(kilnd listening on (\S+))"))) {
        address_ = m[1];
        break;
      }
    }
  }

  ~Kilnd() {
    if (pid_ > 0 && exit_code_ < 0) Stop();
    if (out_ != nullptr) std::fclose(out_);
  }

  // SIGTERM, then the exit status (-1 when killed by a signal).
  int Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }

  const std::string& address() const { return address_; }
  const std::string& socket() const { return socket_; }

 private:
  std::string socket_;
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string address_;
  int exit_code_ = -1;
};

class KilndCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln-cli-test-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Result Kiln(const Kilnd& server, const std::string& args) {
    return RunCommand(Bin("kiln") + " --server " + server.address() + " " + args);
  }

  std::string root_;
};

TEST_F(KilndCliTest, ServesUploadsInfersAndStopsCleanly) {
  if (!fs::exists(Fixture("mlp.pt"))) GTEST_SKIP() << "fixture mlp.pt missing";
  Kilnd server(root_ + "/models", root_ + "/kilnd.log");
  ASSERT_THAT(server.address(), ::testing::MatchesRegex(R"(127\.0\.0\.1:[0-9]+)"));

  Result health = Kiln(server, "health");
  EXPECT_EQ(health.exit_code, 0) << health.output;
  EXPECT_THAT(health.output, HasSubstr("live=true ready=true"));
  EXPECT_THAT(Kiln(server, "models").output, HasSubstr("no models"));

  Result upload = Kiln(server, "upload " + Fixture("mlp.pt") + " --name mlp");
  ASSERT_EQ(upload.exit_code, 0) << upload.output;
  Result models = Kiln(server, "models");
  EXPECT_THAT(models.output, HasSubstr("mlp"));
  EXPECT_THAT(models.output, HasSubstr("READY"));
  Result metadata = Kiln(server, "metadata mlp");
  EXPECT_THAT(metadata.output, HasSubstr("input     x FP32"));

  const std::string out_dir = root_ + "/out";
  Result infer = Kiln(
      server, "infer mlp --input x=" + Fixture("mlp.input.x.npy") + " --output-dir " + out_dir);
  ASSERT_EQ(infer.exit_code, 0) << infer.output;
  EXPECT_THAT(infer.output, HasSubstr("output0 FP32"));
  auto got = client::ReadNpy(out_dir + "/output0.npy");
  auto want = client::ReadNpy(Fixture("mlp.output0.npy"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->dims(), want->dims());
  for (int64_t i = 0; i < want->num_elements(); ++i) {
    EXPECT_NEAR(got->data<float>()[i], want->data<float>()[i], 1e-4);
  }
  EXPECT_THAT(Kiln(server, "stats mlp").output, HasSubstr("inferences 1, failures 0"));

  // The same inference over kilnd's local socket (--local-socket, or KILN_LOCAL_SOCKET).
  const std::string local_dir = root_ + "/out-local";
  Result local = RunCommand("KILN_LOCAL_SOCKET=" + server.socket() + " " + Bin("kiln") +
                            " --server " + server.address() + " infer mlp --input x=" +
                            Fixture("mlp.input.x.npy") + " --output-dir " + local_dir);
  ASSERT_EQ(local.exit_code, 0) << local.output;
  auto got_local = client::ReadNpy(local_dir + "/output0.npy");
  ASSERT_TRUE(got_local.ok()) << got_local.status();
  ASSERT_EQ(got_local->dims(), got->dims());
  EXPECT_EQ(std::memcmp(got_local->raw_data(), got->raw_data(), got->byte_size()), 0);
  EXPECT_THAT(Kiln(server, "stats mlp").output, HasSubstr("inferences 2, failures 0"));
  Result no_socket = Kiln(server, "--local-socket " + root_ + "/none.sock infer mlp --input x=" +
                                      Fixture("mlp.input.x.npy"));
  EXPECT_EQ(no_socket.exit_code, 2) << no_socket.output;  // UNAVAILABLE
  EXPECT_THAT(no_socket.output, HasSubstr("cannot connect to kilnd's local socket"));

  // KILN_SERVER is the default for --server.
  Result via_env = RunCommand("KILN_SERVER=" + server.address() + " " + Bin("kiln") + " models");
  EXPECT_THAT(via_env.output, HasSubstr("mlp"));

  Result unknown = Kiln(server, "infer nope --input x=" + Fixture("mlp.input.x.npy"));
  EXPECT_EQ(unknown.exit_code, 4);  // NOT_FOUND (client/cli/exit_codes.cc)
  EXPECT_THAT(unknown.output, HasSubstr("kiln: error: NOT_FOUND"));
  EXPECT_THAT(unknown.output, HasSubstr("nope"));

  EXPECT_EQ(Kiln(server, "unload mlp").exit_code, 0);
  EXPECT_THAT(Kiln(server, "models").output, HasSubstr("UNAVAILABLE"));
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(KilndCliTest, CliErrorsAreClearAndNonZero) {
  // Exit statuses from client/cli/exit_codes.cc.
  Result unreachable = RunCommand(Bin("kiln") + " --server 127.0.0.1:1 models");
  EXPECT_EQ(unreachable.exit_code, 2);
  EXPECT_THAT(unreachable.output, HasSubstr("kiln: error: UNAVAILABLE"));
  EXPECT_THAT(unreachable.output, HasSubstr("is kilnd running"));

  Result bad_input = RunCommand(Bin("kiln") + " --server 127.0.0.1:1 infer m --input oops");
  EXPECT_EQ(bad_input.exit_code, 3);
  EXPECT_THAT(bad_input.output, HasSubstr("NAME=FILE.npy or NAME=VALUES[:DTYPE][:SHAPE]"));

  Result missing_file =
      RunCommand(Bin("kiln") + " --server 127.0.0.1:1 upload /nonexistent.pt --name m");
  EXPECT_EQ(missing_file.exit_code, 4);
  EXPECT_THAT(missing_file.output, HasSubstr("cannot open '/nonexistent.pt'"));

  EXPECT_EQ(RunCommand(Bin("kiln")).exit_code, 1);  // usage
  EXPECT_EQ(RunCommand(Bin("kilnd") + " --port 70000").exit_code, 2);
  EXPECT_EQ(RunCommand(Bin("kilnd") + " --log-level loud").exit_code, 2);
  EXPECT_EQ(RunCommand(Bin("kilnd") + " --log-format xml").exit_code, 2);
}

TEST_F(KilndCliTest, ConfigFileUnknownKeyIsAnErrorNamingIt) {
  const std::string config = root_ + "/kiln.yaml";
  FILE* f = std::fopen(config.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("port: 0\nthreds: 4\n", f);
  std::fclose(f);
  Result r = RunCommand(Bin("kilnd") + " --config " + config);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unknown key 'threds'"));
  EXPECT_THAT(r.output, HasSubstr(config));
}

}  // namespace
}  // namespace kiln
