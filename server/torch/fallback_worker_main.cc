// The libtorch fallback's worker process (fallback_worker.h):
// kiln-torch-worker --fallback-worker. Loads libtorch and its Fallback kernel, limits its
// address space, enters the sandbox, says FallbackReady, then serves calls
// until kilnd closes the socket.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/graph_serializer.h"
#include "engine/common/status_macros.h"
#include "kiln/v1/torch_worker.pb.h"
#include "server/torch/import_worker.h"
#include "server/torch/fallback_protocol.h"
#include "server/torch/fallback_worker.h"
#include "server/torch/torch_backend.h"
#include "server/torch/torch_reference_codec.h"

namespace kiln::server {
namespace {

namespace fp = fallback_protocol;

bool Send(const google::protobuf::Message& message) {
  return fp::WriteMessage(fp::kSocketFd, message.SerializeAsString(), /*from_kilnd=*/false);
}

void SetError(const absl::Status& status, v1::ErrorStatus* error) {
  absl::StatusCode code = status.code();
  std::string message(status.message());
  if (LooksLikeOutOfMemory(message)) code = absl::StatusCode::kResourceExhausted;
  error->set_code(static_cast<int>(code));
  error->set_message(message);
}

// Reads one message; false at EOF (kilnd closed the socket or is gone).
bool Receive(std::string* message) {
  unsigned char head[4];
  auto read_all = [](char* p, size_t n) {
    while (n > 0) {
      const ssize_t r = ::read(fp::kSocketFd, p, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  };
  if (!read_all(reinterpret_cast<char*>(head), 4)) return false;
  const uint32_t size = fp::DecodeSize(head);
  if (size > fp::kMaxMessage) return false;
  message->resize(size);
  return read_all(message->data(), size);
}

class Worker {
 public:
  Worker(kernels::KernelDef kernel, uint64_t memory_bytes, int num_threads)
      : kernel_(kernel), memory_bytes_(memory_bytes), num_threads_(num_threads) {}

  v1::FallbackReply Call(const v1::FallbackCall& call) {
    v1::FallbackReply reply;
    absl::Status s = absl::UnknownError("not run");
    try {
      s = CallOrError(call, &reply);
    } catch (const std::bad_alloc&) {
      s = absl::ResourceExhaustedError("out of memory");
    }
    if (!s.ok()) {
      reply.clear_outputs();
      SetError(s, reply.mutable_error());
    }
    reply.set_arena_bytes(arena_bytes_);
    return reply;
  }

 private:
  struct Op {
    ir::Node node;
    std::map<size_t, std::shared_ptr<void>> prepared;  // by operand count
  };

  absl::Status Map(uint64_t bytes, bool grow) {
    if (grow && bytes > memory_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the results need ", bytes >> 20, " MiB of shared memory, past the "
                       "worker's memory limit of ", memory_bytes_ >> 20, " MiB"));
    }
    if (grow && ::ftruncate(fp::kArenaFd, static_cast<off_t>(bytes)) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot grow the shared memory: ", std::strerror(errno)));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fp::kArenaFd, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map the shared memory: ", std::strerror(errno)));
    }
    if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
    arena_ = static_cast<char*>(p);
    arena_bytes_ = bytes;
    return absl::OkStatus();
  }

  absl::Status CallOrError(const v1::FallbackCall& call, v1::FallbackReply* reply) {
    if (call.arena_bytes() != arena_bytes_) RETURN_IF_ERROR(Map(call.arena_bytes(), false));
    if (call.has_op()) {
      ASSIGN_OR_RETURN(ir::Node node, cache::NodeFromProto(call.op()));
      ops_[call.op_id()] = Op{std::move(node), {}};
    }
    auto it = ops_.find(call.op_id());
    if (it == ops_.end()) return absl::InternalError("a call of an op the worker was not given");
    Op& op = it->second;
    std::vector<Tensor> inputs(call.inputs_size());
    std::vector<const Tensor*> operands;
    std::vector<kernels::TensorInfo> infos;
    for (int i = 0; i < call.inputs_size(); ++i) {
      const v1::ArenaTensor& a = call.inputs(i);
      if (a.absent()) {
        operands.push_back(nullptr);
        infos.push_back(kernels::TensorInfo{DType::kUnknown, {}, nullptr, false});
        continue;
      }
      ASSIGN_OR_RETURN(WireTensorType type, WireTensorTypeFromProto(a.dtype(), a.dims()));
      const uint64_t bytes = static_cast<uint64_t>(NumElements(type.dims)) * DTypeSize(type.dtype);
      if (a.offset() % fp::kAlign != 0 || a.offset() > arena_bytes_ ||
          bytes > arena_bytes_ - a.offset()) {
        return absl::InvalidArgumentError("an operand lies outside the shared memory");
      }
      inputs[i] = Tensor::Wrap(type.dtype, type.dims, arena_ + a.offset());
      operands.push_back(&inputs[i]);
      infos.push_back(kernels::TensorInfo{type.dtype, type.dims, nullptr, true});
    }
    auto prepared = op.prepared.find(operands.size());
    if (prepared == op.prepared.end()) {
      kernels::PrepareContext ctx{op.node, infos, {}, 0, nullptr, num_threads_};
      ctx.outputs.resize(op.node.outputs.size());
      RETURN_IF_ERROR(kernel_.prepare(ctx));
      prepared = op.prepared.emplace(operands.size(), ctx.state).first;
    }
    std::vector<Tensor> results(op.node.outputs.size());
    kernels::EvalContext ctx{op.node, operands, {}, nullptr, prepared->second.get(), num_threads_};
    for (Tensor& r : results) ctx.outputs.push_back(&r);
    RETURN_IF_ERROR(kernel_.eval(ctx));
    // The results after the operands (a result may be a view of an operand:
    // it is copied from there).
    uint64_t end = call.free_offset();
    std::vector<uint64_t> offsets;
    for (const Tensor& r : results) {
      offsets.push_back(end);
      if (r.dtype() != DType::kUnknown) end = fp::AlignUp(end + r.byte_size());
    }
    if (end > arena_bytes_) RETURN_IF_ERROR(Map(std::max<uint64_t>(end, 2 * arena_bytes_), true));
    for (size_t o = 0; o < results.size(); ++o) {
      v1::ArenaTensor* a = reply->add_outputs();
      const Tensor& r = results[o];
      if (r.dtype() == DType::kUnknown) continue;
      a->set_dtype(DTypeName(r.dtype()));
      for (int64_t d : r.dims()) a->add_dims(d);
      a->set_offset(offsets[o]);
      if (r.byte_size() > 0) std::memcpy(arena_ + offsets[o], r.raw_data(), r.byte_size());
    }
    return absl::OkStatus();
  }

  kernels::KernelDef kernel_;
  uint64_t memory_bytes_;
  int num_threads_;
  char* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  std::map<uint64_t, Op> ops_;
};

}  // namespace

int FallbackWorkerMain(int argc, char** argv) {
  uint64_t memory_bytes = 0;
  int num_threads = 1;
  if (argc != 6 || !absl::SimpleAtoi(argv[2], &memory_bytes) ||
      !absl::SimpleAtoi(argv[5], &num_threads)) {
    std::fprintf(stderr,
                 "usage: kiln-torch-worker --fallback-worker MEMORY_BYTES SANDBOX_ROOT|off "
                 "NAMESPACES THREADS "
                 "(the socket on descriptor 3, the shared memory on 4)\n");
    return 2;
  }
  const std::string sandbox_root = argv[3];
  const std::string namespaces = argv[4];
  // What the worker logs (libtorch's warnings, through the plugin) goes to
  // stderr, one line per event, which kilnd logs as its own.
  spdlog::set_default_logger(spdlog::stderr_logger_st("fallback-worker"));
  spdlog::set_pattern("%v");
  v1::FallbackReady ready;
  // libtorch (and torchvision's operators) are loaded before the limit and
  // the sandbox: the limit is the ops' own memory, and the sandbox opens no file.
  absl::StatusOr<kernels::KernelDef> kernel = torch::LibtorchFallbackKernel(num_threads);
  if (!kernel.ok()) {
    SetError(kernel.status(), ready.mutable_error());
    Send(ready);
    return 0;
  }
  LimitAddressSpace(memory_bytes);
  if (sandbox_root != "off") {
    absl::StatusOr<std::string> summary = EnterWorkerSandbox(sandbox_root, namespaces);
    if (!summary.ok()) {
      SetError(absl::InternalError(absl::StrCat(
                   "the sandbox could not be set up: ", summary.status().message(),
                   " (kilnd --import-sandbox off runs it without)")),
               ready.mutable_error());
      Send(ready);
      return 0;
    }
    ready.set_sandbox(*summary);
  }
  if (!Send(ready)) return 0;
  const char* fault = std::getenv("KILN_TEST_FALLBACK_FAULT");
  Worker worker(*kernel, memory_bytes, num_threads);
  std::string message;
  while (Receive(&message)) {
    v1::FallbackCall call;
    v1::FallbackReply reply;
    if (!call.ParseFromString(message)) {
      SetError(absl::InternalError("a call that does not parse"), reply.mutable_error());
    } else if (fault != nullptr && std::strcmp(fault, "escape") == 0) {
      SetError(absl::PermissionDeniedError(
                   sandbox_root != "off" ? "sandbox probe: " + SandboxEscapeProbe(fp::kArenaFd)
                                         : std::string("sandbox probe: not run, the sandbox is off")),
               reply.mutable_error());
    } else {
      if (fault != nullptr) RunCrashHangOrOomFault(fault);
      reply = worker.Call(call);
    }
    if (!Send(reply)) break;
  }
  return 0;
}

}  // namespace kiln::server
