// The pickle machine: a stack of value ids into one arena of values, a memo of
// ids, and a stack of MARK positions, run over the bytes once. Values are never
// copied (the memo and the stack share them by id), so nothing nests in C++'s
// own stack however deep the pickle nests; the marks cap how deep tuples may
// nest. Calls (REDUCE) are the three the allow-list names, evaluated here:
// OrderedDict() makes an empty dict, _rebuild_tensor_v2 records a view of a
// storage, _rebuild_parameter(_with_state) returns its tensor. Storages come only from
// BINPERSID ('storage', <dtype storage>, key, location, numel).
#include "engine/importer/export/torch_save.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/importer/export/pt2_archive.h"

namespace kiln::importer {
namespace {

// The standard pickle opcodes, for naming one Kiln refuses.
const char* OpcodeName(uint8_t op) {
  struct Named {
    uint8_t op;
    const char* name;
  };
  // clang-format off
  static constexpr Named kOpcodes[] = {
      {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"},
      {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"},
      {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"},
      {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"}, {'X', "BINUNICODE"},
      {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"},
      {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"},
      {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"},
      {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"},
      {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
      {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
      {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"},
      {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"},
      {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"}, {0x93, "STACK_GLOBAL"},
      {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
      {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
  };
  // clang-format on
  for (const Named& n : kOpcodes) {
    if (n.op == op) return n.name;
  }
  return nullptr;
}

enum class Global : uint8_t {
  kNone,
  kOrderedDict,
  kRebuildTensor,
  kRebuildParameter,
  kRebuildParameterWithState,
  kStorage
};

// The allow-list: module and name as GLOBAL spells them. A storage type sets
// `dtype`.
Global LookupGlobal(std::string_view module, std::string_view name, DType* dtype) {
  if (module == "collections" && name == "OrderedDict") return Global::kOrderedDict;
  if (module == "torch._utils" && name == "_rebuild_tensor_v2") return Global::kRebuildTensor;
  if (module == "torch._utils" && name == "_rebuild_parameter") return Global::kRebuildParameter;
  // A parameter with Python attributes (torch.compile's _dynamo_static_input_type).
  if (module == "torch._utils" && name == "_rebuild_parameter_with_state") {
    return Global::kRebuildParameterWithState;
  }
  if ((module == "torch" || module == "torch.storage") && name == "UntypedStorage") {
    *dtype = DType::kUInt8;
    return Global::kStorage;
  }
  if (module != "torch") return Global::kNone;
  static const std::map<std::string_view, DType>* const kStorages =
      new std::map<std::string_view, DType>{
          {"FloatStorage", DType::kF32},   {"DoubleStorage", DType::kF64},
          {"HalfStorage", DType::kF16},    {"BFloat16Storage", DType::kBF16},
          {"LongStorage", DType::kInt64},  {"IntStorage", DType::kInt32},
          {"ShortStorage", DType::kInt16}, {"CharStorage", DType::kInt8},
          {"ByteStorage", DType::kUInt8},  {"BoolStorage", DType::kBool}};
  auto it = kStorages->find(name);
  if (it == kStorages->end()) return Global::kNone;
  *dtype = it->second;
  return Global::kStorage;
}

struct Value {
  enum Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kTuple,
    kDict,
    kGlobal,
    kStorage,
    kTensor
  };
  Kind kind = kNone;
  Global global = Global::kNone;
  int64_t i = 0;                  // kBool, kInt; kStorage/kTensor: index into tensors
  double f = 0;                   // kFloat
  std::string s;                  // kStr
  std::vector<uint32_t> items;    // kTuple; kDict: key, value, key, value, ...
  DType dtype = DType::kUnknown;  // kGlobal of a storage type
};

const char* KindName(Value::Kind k) {
  static const char* const kNames[] = {"None",  "bool", "int",    "float",   "str",
                                       "tuple", "dict", "global", "storage", "tensor"};
  return kNames[k];
}

class Machine {
 public:
  Machine(std::string_view bytes, const PickleLimits& limits) : b_(bytes), limits_(limits) {}

  absl::StatusOr<std::vector<std::pair<std::string, PickledTensor>>> Run() {
    ASSIGN_OR_RETURN(uint32_t top, RunToTop());
    return Result(top);
  }

  // torch.export's sample inputs: (args, kwargs), tensors only; args named
  // "" in order, then kwargs by their keys.
  absl::StatusOr<std::vector<std::pair<std::string, PickledTensor>>> RunSampleInputs() {
    ASSIGN_OR_RETURN(uint32_t top, RunToTop());
    ASSIGN_OR_RETURN(const Value* pair, Expect(top, Value::kTuple, "the pickled sample inputs"));
    if (pair->items.size() != 2) return Fail("the sample inputs are not an (args, kwargs) pair");
    ASSIGN_OR_RETURN(const Value* args, Expect(pair->items[0], Value::kTuple, "the sample args"));
    ASSIGN_OR_RETURN(const Value* kwargs, Expect(pair->items[1], Value::kDict, "the sample kwargs"));
    std::vector<std::pair<std::string, PickledTensor>> out;
    for (uint32_t a : args->items) {
      ASSIGN_OR_RETURN(const Value* t, Expect(a, Value::kTensor, "a sample arg"));
      out.emplace_back("", tensors_[t->i]);
    }
    for (size_t k = 0; k + 1 < kwargs->items.size(); k += 2) {
      ASSIGN_OR_RETURN(const Value* key, Expect(kwargs->items[k], Value::kStr, "a sample kwarg's name"));
      ASSIGN_OR_RETURN(const Value* t, Expect(kwargs->items[k + 1], Value::kTensor, "a sample kwarg"));
      out.emplace_back(key->s, tensors_[t->i]);
    }
    return out;
  }

 private:
  // Runs the pickle to its STOP; the id of the one value left.
  absl::StatusOr<uint32_t> RunToTop() {
    bool stopped = false;
    while (!stopped) {
      if (pos_ >= b_.size()) return Fail("ends before STOP (truncated)");
      op_pos_ = pos_;
      const uint8_t op = static_cast<uint8_t>(b_[pos_++]);
      RETURN_IF_ERROR(Step(op, &stopped));
    }
    if (pos_ != b_.size()) return Fail(absl::StrCat(b_.size() - pos_, " bytes after STOP"));
    if (stack_.size() != 1 || !marks_.empty()) return Fail("STOP with a malformed stack");
    return stack_[0];
  }

  absl::Status Fail(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("pickle: ", what, " (byte ", op_pos_, ")"));
  }

  // ---- reading operands

  absl::StatusOr<std::string_view> Take(size_t n) {
    if (n > b_.size() - pos_) return Fail("truncated operand");
    std::string_view v = b_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  absl::StatusOr<uint64_t> Unsigned(size_t n) {
    ASSIGN_OR_RETURN(std::string_view v, Take(n));
    uint64_t x = 0;
    for (size_t k = n; k-- > 0;) x = (x << 8) | static_cast<uint8_t>(v[k]);
    return x;
  }
  absl::StatusOr<std::string_view> Line() {
    const size_t end = b_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > 256)
      return Fail("GLOBAL without a short line");
    std::string_view v = b_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return v;
  }

  // ---- values, stack, memo

  absl::StatusOr<uint32_t> New(Value v) {
    if (values_.size() >= limits_.max_objects) {
      return Fail(absl::StrCat("more than ", limits_.max_objects, " values"));
    }
    values_.push_back(std::move(v));
    return static_cast<uint32_t>(values_.size() - 1);
  }
  absl::Status Push(uint32_t id) {
    if (stack_.size() >= limits_.max_stack) {
      return Fail(absl::StrCat("stack deeper than ", limits_.max_stack));
    }
    stack_.push_back(id);
    return absl::OkStatus();
  }
  absl::Status PushNew(Value v) {
    ASSIGN_OR_RETURN(uint32_t id, New(std::move(v)));
    return Push(id);
  }
  absl::StatusOr<uint32_t> Pop() {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Fail("pops an empty stack");
    const uint32_t id = stack_.back();
    stack_.pop_back();
    return id;
  }
  // The values above the last MARK, which is removed.
  absl::StatusOr<std::vector<uint32_t>> PopMark() {
    if (marks_.empty()) return Fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return items;
  }
  // The top of the stack above the last MARK, or nullptr.
  const uint32_t* Top() const {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    return stack_.size() > floor ? &stack_.back() : nullptr;
  }
  absl::Status Put(uint64_t index) {
    if (index > limits_.max_memo) {
      return Fail(absl::StrCat("memo index ", index, " past the limit ", limits_.max_memo));
    }
    if (Top() == nullptr) return Fail("memoizes an empty stack");
    memo_[static_cast<uint32_t>(index)] = *Top();
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t index) {
    auto it = index > limits_.max_memo ? memo_.end() : memo_.find(static_cast<uint32_t>(index));
    if (it == memo_.end()) return Fail(absl::StrCat("memo index ", index, " was never stored"));
    return Push(it->second);
  }
  absl::StatusOr<const Value*> Expect(uint32_t id, Value::Kind kind, absl::string_view what) {
    const Value& v = values_[id];
    if (v.kind != kind) {
      return Fail(absl::StrCat(what, " is a ", KindName(v.kind), ", expected a ", KindName(kind)));
    }
    return &v;
  }
  absl::StatusOr<std::vector<int64_t>> IntTuple(uint32_t id, absl::string_view what) {
    ASSIGN_OR_RETURN(const Value* t, Expect(id, Value::kTuple, what));
    if (t->items.size() > limits_.max_rank) {
      return Fail(absl::StrCat(what, " has ", t->items.size(), " dims"));
    }
    std::vector<int64_t> out;
    for (uint32_t e : t->items) {
      ASSIGN_OR_RETURN(const Value* v, Expect(e, Value::kInt, what));
      out.push_back(v->i);
    }
    return out;
  }

  // ---- the opcodes

  absl::Status Step(uint8_t op, bool* stopped) {
    switch (op) {
      case 0x80: {  // PROTO
        ASSIGN_OR_RETURN(uint64_t v, Unsigned(1));
        if (v < 2 || v > 5) return Fail(absl::StrCat("protocol ", v));
        return absl::OkStatus();
      }
      case 0x95: {  // FRAME: a length hint only
        ASSIGN_OR_RETURN(uint64_t n, Unsigned(8));
        if (n > b_.size() - pos_) return Fail("a FRAME longer than the pickle");
        return absl::OkStatus();
      }
      case '.':
        *stopped = true;
        return absl::OkStatus();
      case '(':
        if (marks_.size() >= limits_.max_marks) {
          return Fail(absl::StrCat("MARKs nest deeper than ", limits_.max_marks));
        }
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case 'N':
        return PushNew(Value{});
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        Value v;
        v.kind = Value::kBool;
        v.i = op == 0x88;
        return PushNew(std::move(v));
      }
      case 'K':
      case 'M':
      case 'J': {  // BININT1, BININT2, BININT
        ASSIGN_OR_RETURN(uint64_t x, Unsigned(op == 'K' ? 1 : op == 'M' ? 2 : 4));
        Value v;
        v.kind = Value::kInt;
        v.i = op == 'J' ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(x)))
                        : static_cast<int64_t>(x);
        return PushNew(std::move(v));
      }
      case 0x8a: {  // LONG1: little-endian two's complement
        ASSIGN_OR_RETURN(uint64_t n, Unsigned(1));
        if (n > 8) return Fail(absl::StrCat("a LONG1 of ", n, " bytes (past int64)"));
        ASSIGN_OR_RETURN(uint64_t x, Unsigned(n));
        if (n > 0 && n < 8 && (x >> (8 * n - 1)) & 1) x |= ~uint64_t{0} << (8 * n);
        Value v;
        v.kind = Value::kInt;
        v.i = static_cast<int64_t>(x);
        return PushNew(std::move(v));
      }
      case 'G': {  // BINFLOAT: big-endian double
        ASSIGN_OR_RETURN(std::string_view raw, Take(8));
        uint64_t x = 0;
        for (char c : raw) x = (x << 8) | static_cast<uint8_t>(c);
        Value v;
        v.kind = Value::kFloat;
        std::memcpy(&v.f, &x, 8);
        return PushNew(std::move(v));
      }
      case 'X':
      case 0x8c: {  // BINUNICODE, SHORT_BINUNICODE
        ASSIGN_OR_RETURN(uint64_t n, Unsigned(op == 'X' ? 4 : 1));
        ASSIGN_OR_RETURN(std::string_view s, Take(n));
        Value v;
        v.kind = Value::kStr;
        v.s = std::string(s);
        return PushNew(std::move(v));
      }
      case ')':
      case 't':
      case 0x85:
      case 0x86:
      case 0x87: {  // tuples
        Value v;
        v.kind = Value::kTuple;
        if (op == 't') {
          ASSIGN_OR_RETURN(v.items, PopMark());
        } else if (op != ')') {
          v.items.resize(op - 0x84);
          for (size_t k = v.items.size(); k-- > 0;) {
            ASSIGN_OR_RETURN(v.items[k], Pop());
          }
        }
        return PushNew(std::move(v));
      }
      case '}': {
        Value v;
        v.kind = Value::kDict;
        return PushNew(std::move(v));
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS
        std::vector<uint32_t> kv;
        if (op == 's') {
          kv.resize(2);
          ASSIGN_OR_RETURN(kv[1], Pop());
          ASSIGN_OR_RETURN(kv[0], Pop());
        } else {
          ASSIGN_OR_RETURN(kv, PopMark());
          if (kv.size() % 2 != 0) return Fail("SETITEMS with an odd number of values");
        }
        if (Top() == nullptr || values_[*Top()].kind != Value::kDict) {
          return Fail(absl::StrCat(OpcodeName(op), " on something that is not a dict"));
        }
        std::vector<uint32_t>& items = values_[*Top()].items;
        if (items.size() + kv.size() > limits_.max_objects) return Fail("a dict too large");
        items.insert(items.end(), kv.begin(), kv.end());
        return absl::OkStatus();
      }
      case 'q':
      case 'r': {  // BINPUT, LONG_BINPUT
        ASSIGN_OR_RETURN(uint64_t index, Unsigned(op == 'q' ? 1 : 4));
        return Put(index);
      }
      case 0x94:
        return Put(memo_.size());  // MEMOIZE
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        ASSIGN_OR_RETURN(uint64_t index, Unsigned(op == 'h' ? 1 : 4));
        return Get(index);
      }
      case 'c': {  // GLOBAL: the allow-list only
        ASSIGN_OR_RETURN(std::string_view module_v, Line());
        ASSIGN_OR_RETURN(std::string_view name_v, Line());
        const std::string module(module_v), name(name_v);
        Value v;
        v.kind = Value::kGlobal;
        v.global = LookupGlobal(module, name, &v.dtype);
        if (v.global == Global::kNone) {
          return Fail(absl::StrCat("GLOBAL ", module, ".", name,
                                   " is not one a torch.save state dict uses; refused"));
        }
        return PushNew(std::move(v));
      }
      case 'Q':
        return PersistentId();
      case 'R':
        return Reduce();
      case 'b': {  // BUILD: a tensor's Python attributes; nothing Kiln keeps
        ASSIGN_OR_RETURN(uint32_t state, Pop());
        (void)state;
        if (Top() == nullptr) return Fail("BUILD without an object");
        const Value::Kind k = values_[*Top()].kind;
        if (k != Value::kTensor && k != Value::kDict) {
          return Fail(absl::StrCat("BUILD on a ", KindName(k)));
        }
        return absl::OkStatus();
      }
      default:
        break;
    }
    const char* name = OpcodeName(op);
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", op);
    return Fail(absl::StrCat("opcode ", name != nullptr ? name : "(unknown)", " (", hex,
                             ") is not one torch.save's state dicts use; refused"));
  }

  // ('storage', <storage type>, key, location, numel) -> a storage.
  absl::Status PersistentId() {
    ASSIGN_OR_RETURN(uint32_t id, Pop());
    ASSIGN_OR_RETURN(const Value* pid, Expect(id, Value::kTuple, "a persistent id"));
    if (pid->items.size() != 5) return Fail("a persistent id that is not a 5-tuple");
    const std::vector<uint32_t> items = pid->items;
    ASSIGN_OR_RETURN(const Value* tag, Expect(items[0], Value::kStr, "a persistent id's tag"));
    if (tag->s != "storage")
      return Fail(absl::StrCat("persistent id '", tag->s.substr(0, 32), "'"));
    ASSIGN_OR_RETURN(const Value* type, Expect(items[1], Value::kGlobal, "a storage type"));
    if (type->global != Global::kStorage) return Fail("a storage of a type that is not a storage");
    ASSIGN_OR_RETURN(const Value* key, Expect(items[2], Value::kStr, "a storage key"));
    ASSIGN_OR_RETURN(const Value* location, Expect(items[3], Value::kStr, "a storage location"));
    ASSIGN_OR_RETURN(const Value* numel, Expect(items[4], Value::kInt, "a storage size"));
    if (key->s.empty() || key->s.size() > 64 ||
        !std::all_of(key->s.begin(), key->s.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        })) {
      return Fail(absl::StrCat("storage key '", key->s.substr(0, 64), "' is not a plain name"));
    }
    if (location->s != "cpu" && !absl::StartsWith(location->s, "cuda")) {
      return Fail(absl::StrCat("storage location '", location->s.substr(0, 32), "'"));
    }
    if (numel->i < 0 || numel->i > (int64_t{1} << 48)) return Fail("a storage size out of range");
    PickledTensor storage;
    storage.dtype = type->dtype;
    storage.storage_key = key->s;
    storage.storage_numel = numel->i;
    tensors_.push_back(std::move(storage));
    Value v;
    v.kind = Value::kStorage;
    v.i = static_cast<int64_t>(tensors_.size() - 1);
    return PushNew(std::move(v));
  }

  absl::Status Reduce() {
    ASSIGN_OR_RETURN(uint32_t args_id, Pop());
    ASSIGN_OR_RETURN(uint32_t fn_id, Pop());
    ASSIGN_OR_RETURN(const Value* fn, Expect(fn_id, Value::kGlobal, "REDUCE's callable"));
    ASSIGN_OR_RETURN(const Value* args_v, Expect(args_id, Value::kTuple, "REDUCE's arguments"));
    const std::vector<uint32_t> args = args_v->items;
    switch (fn->global) {
      case Global::kOrderedDict: {
        if (!args.empty()) return Fail("OrderedDict called with arguments");
        Value v;
        v.kind = Value::kDict;
        return PushNew(std::move(v));
      }
      case Global::kRebuildParameter:
      case Global::kRebuildParameterWithState: {
        // (data, requires_grad, backward_hooks[, state]): the attributes in
        // `state` are Python's alone.
        const size_t n = fn->global == Global::kRebuildParameter ? 3 : 4;
        if (args.size() != n) {
          return Fail(absl::StrCat("a parameter rebuilt from ", args.size(), " arguments"));
        }
        RETURN_IF_ERROR(Expect(args[0], Value::kTensor, "a parameter's data").status());
        return Push(args[0]);
      }
      case Global::kRebuildTensor: {
        // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        if (args.size() != 6 && args.size() != 7) {
          return Fail(absl::StrCat("_rebuild_tensor_v2 with ", args.size(), " arguments"));
        }
        ASSIGN_OR_RETURN(const Value* storage,
                         Expect(args[0], Value::kStorage, "a tensor's storage"));
        ASSIGN_OR_RETURN(const Value* offset, Expect(args[1], Value::kInt, "a storage offset"));
        PickledTensor t = tensors_[storage->i];
        t.storage_offset = offset->i;
        ASSIGN_OR_RETURN(t.sizes, IntTuple(args[2], "a tensor's size"));
        ASSIGN_OR_RETURN(t.strides, IntTuple(args[3], "a tensor's stride"));
        if (t.sizes.size() != t.strides.size())
          return Fail("a tensor's size and stride differ in rank");
        const Value& hooks = values_[args[5]];
        if (hooks.kind != Value::kDict || !hooks.items.empty()) {
          return Fail("a tensor with backward hooks");
        }
        tensors_.push_back(std::move(t));
        Value v;
        v.kind = Value::kTensor;
        v.i = static_cast<int64_t>(tensors_.size() - 1);
        return PushNew(std::move(v));
      }
      default:
        return Fail("REDUCE on a storage type (not callable here)");
    }
  }

  absl::StatusOr<std::vector<std::pair<std::string, PickledTensor>>> Result(uint32_t id) {
    ASSIGN_OR_RETURN(const Value* dict, Expect(id, Value::kDict, "the pickled object"));
    std::vector<std::pair<std::string, PickledTensor>> out;
    std::set<std::string> seen;
    for (size_t k = 0; k + 1 < dict->items.size(); k += 2) {
      ASSIGN_OR_RETURN(const Value* key, Expect(dict->items[k], Value::kStr, "a state dict key"));
      const Value& v = values_[dict->items[k + 1]];
      if (v.kind != Value::kTensor) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pickle: state dict entry '", key->s, "' is a ", KindName(v.kind), ", not a tensor"));
      }
      if (!seen.insert(key->s).second) {
        return absl::InvalidArgumentError(absl::StrCat("pickle: key '", key->s, "' twice"));
      }
      out.emplace_back(key->s, tensors_[v.i]);
    }
    return out;
  }

  std::string_view b_;
  const PickleLimits& limits_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::vector<Value> values_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
  std::vector<PickledTensor> tensors_;  // storages and tensors, by Value::i
};

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, PickledTensor>>> ReadStateDictPickle(
    std::string_view bytes, const PickleLimits& limits) {
  Machine m(bytes, limits);
  return m.Run();
}

absl::StatusOr<Tensor> TensorFromStorage(const std::string& what, DType dtype, const Dims& dims,
                                         const Dims& strides, int64_t offset, std::string_view data,
                                         const std::string& storage_name,
                                         const std::shared_ptr<const void>& owner) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("PT2 archive: ", what, ": ", why));
  };
  if (dims.size() != strides.size() || dims.size() > 16)
    return invalid("sizes and strides do not match");
  constexpr int64_t kMaxDim = int64_t{1} << 40;
  int64_t numel = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] > kMaxDim || strides[i] < 0 || strides[i] > kMaxDim) {
      return invalid(absl::StrCat("size or stride ", i, " is out of range"));
    }
    if (numel > 0 && dims[i] > (int64_t{1} << 48) / numel) return invalid("too many elements");
    numel *= dims[i];
  }
  if (offset < 0 || offset > (int64_t{1} << 48)) return invalid("storage_offset is out of range");
  const uint64_t esize = DTypeSize(dtype);
  if (esize == 0) return invalid("no dtype");
  // The last element any index reaches, in elements past the storage's start.
  uint64_t last = static_cast<uint64_t>(offset);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] > 0) last += static_cast<uint64_t>(dims[i] - 1) * static_cast<uint64_t>(strides[i]);
  }
  if (numel > 0 && (last + 1) * esize > data.size()) {
    return invalid(absl::StrCat("sizes ", DimsToString(dims), ", strides ", DimsToString(strides),
                                " and offset ", offset, " reach byte ", (last + 1) * esize, " but ",
                                storage_name, " has ", data.size()));
  }
  // Stride-0 dims could make a small file a huge tensor.
  if (static_cast<uint64_t>(numel) * esize > std::max<uint64_t>(64 * data.size(), 1 << 20)) {
    return invalid(
        absl::StrCat(DimsToString(dims), " elements from a file of ", data.size(), " bytes"));
  }
  if (numel == 0) return Tensor::Zeros(dtype, dims);
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1 && strides[i] != expect) contiguous = false;
    expect *= dims[i];
  }
  const char* first = data.data() + offset * esize;
  if (contiguous && owner != nullptr &&
      reinterpret_cast<uintptr_t>(first) % kConstantViewAlign == 0) {
    // In place: the bytes were checked above to hold the whole tensor.
    return Tensor::Wrap(dtype, dims, const_cast<char*>(first), std::const_pointer_cast<void>(owner));
  }
  Tensor t = Tensor::Zeros(dtype, dims);
  char* out = static_cast<char*>(t.raw_data());
  if (contiguous) {
    std::memcpy(out, first, numel * esize);
    return t;
  }
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t src = offset;
    for (size_t i = 0; i < dims.size(); ++i) src += index[i] * strides[i];
    std::memcpy(out + k * esize, data.data() + src * esize, esize);
    for (size_t i = dims.size(); i-- > 0;) {
      if (++index[i] < dims[i]) break;
      index[i] = 0;
    }
  }
  return t;
}

namespace {

// A torch.save zip archive's pickle run by `run` (a Machine's Run or
// RunSampleInputs), its tensors read from the archive's storages, in order.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadTorchSave(
    std::string_view bytes, const std::string& what, bool sample_inputs) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("PT2 archive: ", what, ": ", why));
  };
  if (!LooksLikeZip(bytes)) return invalid("not a torch.save zip archive");
  absl::StatusOr<ZipArchive> zip = ZipArchive::Open(bytes);
  if (!zip.ok()) return invalid(zip.status().message());
  // <prefix>/data.pkl, one level down ("archive/data.pkl").
  const ZipEntry* pickle = nullptr;
  for (const ZipEntry& e : zip->entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.substr(slash + 1) == "data.pkl") {
      if (pickle != nullptr) return invalid("two data.pkl entries");
      pickle = &e;
    }
  }
  if (pickle == nullptr) return invalid("no <name>/data.pkl");
  const std::string prefix = pickle->name.substr(0, pickle->name.size() - 8);
  if (const ZipEntry* order = zip->Find(prefix + "byteorder")) {
    absl::StatusOr<std::string> o = zip->Read(*order);
    if (!o.ok()) return invalid(o.status().message());
    if (*o != "little") return invalid(absl::StrCat("byte order '", o->substr(0, 16), "'"));
  }
  absl::StatusOr<std::string> pkl = zip->Read(*pickle);
  if (!pkl.ok()) return invalid(pkl.status().message());
  const PickleLimits limits;
  Machine machine(*pkl, limits);
  absl::StatusOr<std::vector<std::pair<std::string, PickledTensor>>> entries =
      sample_inputs ? machine.RunSampleInputs() : machine.Run();
  if (!entries.ok()) return invalid(entries.status().message());
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < entries->size(); ++k) {
    const auto& [key, t] = (*entries)[k];
    const std::string name = key.empty() ? absl::StrCat("arg ", k) : key;
    const std::string file = absl::StrCat(prefix, "data/", t.storage_key);
    const ZipEntry* entry = zip->Find(file);
    if (entry == nullptr) return invalid(absl::StrCat("'", name, "': no ", file));
    absl::StatusOr<std::string> data = zip->Read(*entry);
    if (!data.ok()) return invalid(data.status().message());
    const uint64_t declared = static_cast<uint64_t>(t.storage_numel) * DTypeSize(t.dtype);
    if (data->size() != declared) {
      return invalid(absl::StrCat("'", name, "': its storage declares ", declared, " bytes but ",
                                  file, " has ", data->size()));
    }
    // Copied, never viewed (no owner): this torch.save zip is nested inside
    // the archive and read out of it first, so there are no archive bytes to
    // view (the PT2 layout's weights of torch >= 2.8 are viewed in place).
    ASSIGN_OR_RETURN(Tensor tensor,
                     TensorFromStorage(absl::StrCat(what, " '", name, "'"), t.dtype, t.sizes,
                                       t.strides, t.storage_offset, *data, file));
    out.emplace_back(key, std::move(tensor));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadTorchSaveTensors(
    std::string_view bytes, const std::string& what) {
  return ReadTorchSave(bytes, what, /*sample_inputs=*/false);
}

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadTorchSaveSampleInputs(
    std::string_view bytes, const std::string& what) {
  return ReadTorchSave(bytes, what, /*sample_inputs=*/true);
}

}  // namespace kiln::importer
