// Unfinished parts of the starter code announce themselves.
//
// Each piece left for you to write sits next to a line
//     COURSE_TODO("day02: what to write");
// at file scope. While such a line is compiled in, the op refuses to run on the path it
// stands in and raises an error listing what is left there, on the host: a half-written
// kernel never runs and never hands back garbage. Delete the line once the piece is written.
//
// Which path a line blocks: one in a .cu or .cuh file blocks the CUDA path;
// COURSE_TODO_CPU and COURSE_TODO_CUDA mark pieces of a .cpp file that only one path runs
// (a CPU loop, a kernel launch); any other COURSE_TODO (input checks, say) blocks both. So
// the CPU tests run as soon as the CPU path is written, whatever the kernels' state.
//
// An op that names the functions it runs refuses only while one of those is unwritten:
//     COURSE_REFUSE_UNFINISHED(x, "my_forward_kernel");
// so the forward runs as soon as it is written, before the backward. The line's text names
// the function: "dayNN: file, function: what to write".
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

// Hidden: each extension keeps its own list. Exported, the dynamic loader would merge the
// lists of every loaded library, and a rebuilt module would still report its old TODOs.
namespace course __attribute__((visibility("hidden"))) {

struct Todo {
  std::string what;
  std::string path;  // "cpu", "cuda", or "" for both
  std::string function;  // what "dayNN: file, function: ..." names
};

// The function of "dayNN: file, function: what": from the first ", " to the next ": ".
inline std::string function_of(const std::string& what) {
  const auto start = what.find(", ");
  if (start == std::string::npos) return "";
  const auto end = what.find(": ", start + 2);
  return what.substr(start + 2, end == std::string::npos ? std::string::npos : end - start - 2);
}

inline std::vector<Todo>& pending_todos() {
  static std::vector<Todo> todos;
  return todos;
}

inline bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

struct TodoMarker {
  TodoMarker(const char* what, const char* file, const char* path) {
    const std::string name(file);
    const bool in_kernel_file = ends_with(name, ".cu") || ends_with(name, ".cuh");
    pending_todos().push_back({what, in_kernel_file ? "cuda" : path, function_of(what)});
  }
};

inline bool among(const std::string& function, const std::vector<std::string>& functions) {
  for (const std::string& name : functions) {
    if (name == function) return true;
  }
  return false;
}

// What stands in the way of running on `path` ("cpu" or "cuda"; nullptr: anywhere), of
// `functions` alone where given: empty when nothing does, otherwise one "TODO(dayNN): ..."
// line each, in the order they were compiled (a header's line once, however many files
// include it).
inline std::string pending_todo_message(const char* path = nullptr,
                                        const std::vector<std::string>* functions = nullptr) {
  std::string message;
  for (const Todo& todo : pending_todos()) {
    if (path != nullptr && !todo.path.empty() && todo.path != path) continue;
    if (functions != nullptr && !among(todo.function, *functions)) continue;
    const auto colon = todo.what.find(':');
    const std::string line = "TODO(" + todo.what.substr(0, colon) + ")" + todo.what.substr(colon) + "\n";
    if (message.find(line) == std::string::npos) message += line;
  }
  return message;
}

// What stands in the way of running on `tensor`'s device (any type with is_cuda()).
template <typename Tensor>
std::string todos_blocking(const Tensor& tensor) {
  return pending_todo_message(tensor.is_cuda() ? "cuda" : "cpu");
}

// What stands in the way of running `functions` on `tensor`'s device: their TODOs on its path.
template <typename Tensor>
std::string todos_of(const Tensor& tensor, std::initializer_list<const char*> functions) {
  const std::vector<std::string> names(functions.begin(), functions.end());
  return pending_todo_message(tensor.is_cuda() ? "cuda" : "cpu", &names);
}

}  // namespace course

#define COURSE_TODO_JOIN2(a, b) a##b
#define COURSE_TODO_JOIN(a, b) COURSE_TODO_JOIN2(a, b)
#define COURSE_TODO_ON(path, what) \
  static const ::course::TodoMarker COURSE_TODO_JOIN(course_todo_, __LINE__)(what, __FILE__, path)
#define COURSE_TODO(what) COURSE_TODO_ON("", what)
#define COURSE_TODO_CPU(what) COURSE_TODO_ON("cpu", what)
#define COURSE_TODO_CUDA(what) COURSE_TODO_ON("cuda", what)

// The op refuses, on the host and naming what to write, while a function it runs on
// `tensor`'s device is unwritten (TORCH_CHECK: where ATen is included).
#define COURSE_REFUSE_UNFINISHED(tensor, ...)                                                       \
  TORCH_CHECK(::course::todos_of(tensor, {__VA_ARGS__}).empty(), "this op is not finished yet:\n", \
              ::course::todos_of(tensor, {__VA_ARGS__}))
